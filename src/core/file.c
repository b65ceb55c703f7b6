/* file.c — temporary file + rename, and mkdir -p. */
#include "s2s/file.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

S2sStatus file_tmp_open(FileTmp *t, const char *path, S2sError *err) {
    t->f = NULL;
    t->tmp[0] = '\0';
    if (snprintf(t->path, sizeof t->path, "%s", path) >= (int)sizeof t->path ||
        snprintf(t->tmp, sizeof t->tmp, "%s.tmp.XXXXXX", path) >= (int)sizeof t->tmp)
        return s2s_fail(err, S2S_ERR_IO, "%s: path too long", path);
    int fd = mkstemp(t->tmp);
    if (fd < 0) return s2s_fail(err, S2S_ERR_IO, "%s: cannot create a temporary file: %s", path, strerror(errno));
    /* mkstemp makes 0600; our files are for sharing */
    if (fchmod(fd, 0644) != 0 || !(t->f = fdopen(fd, "wb"))) {
        int e = errno;
        close(fd);
        unlink(t->tmp);
        return s2s_fail(err, S2S_ERR_IO, "%s: cannot open a temporary file: %s", path, strerror(e));
    }
    return S2S_OK;
}

S2sStatus file_tmp_commit(FileTmp *t, bool failed, S2sError *err) {
    S2S_ASSERT(t->f);
    int e = failed ? errno : 0; /* the caller's failed write, when it just happened */
    if (!failed && (fflush(t->f) != 0 || fsync(fileno(t->f)) != 0)) {
        e = errno;
        failed = true;
    }
    if (fclose(t->f) != 0 && !failed) {
        e = errno;
        failed = true;
    }
    t->f = NULL;
    if (failed) {
        unlink(t->tmp);
        return s2s_fail(err, S2S_ERR_IO, "%s: cannot write: %s", t->path, strerror(e ? e : EIO));
    }
    if (rename(t->tmp, t->path) != 0) {
        e = errno;
        unlink(t->tmp);
        return s2s_fail(err, S2S_ERR_IO, "%s: cannot rename the temporary file into place: %s", t->path,
                        strerror(e));
    }
    return S2S_OK;
}

void file_tmp_abort(FileTmp *t) {
    if (!t->f) return;
    fclose(t->f);
    t->f = NULL;
    unlink(t->tmp);
}

S2sStatus file_write_atomic(const char *path, const void *data, size_t n, S2sError *err) {
    FileTmp t;
    S2sStatus st = file_tmp_open(&t, path, err);
    if (st) return st;
    bool failed = n && fwrite(data, 1, n, t.f) != n;
    return file_tmp_commit(&t, failed, err);
}

S2sStatus file_mkdirs(const char *path, S2sError *err) {
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return s2s_fail(err, S2S_ERR_IO, "%s: path too long", path);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(buf, 0755) != 0 && errno != EEXIST)
                return s2s_fail(err, S2S_ERR_IO, "%s: cannot create: %s", buf, strerror(errno));
            *p = c;
            if (!c) break;
        }
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) return s2s_fail(err, S2S_ERR_IO, "%s: not a directory", path);
    return S2S_OK;
}
