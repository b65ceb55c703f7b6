/* file.c — temporary file + rename, bounded reads, folder locks, mkdir -p. */
#define _DEFAULT_SOURCE /* realpath, flock */
#include "s2s/file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* Where a write to path lands: a symlink's target, and whether it is a regular file (or new). */
static S2sStatus destination(const char *path, char *dest, size_t n, bool *regular, mode_t *mode, S2sError *err) {
    struct stat st;
    *regular = true;
    *mode = 0644;
    if (snprintf(dest, n, "%s", path) >= (int)n) return s2s_fail(err, S2S_ERR_IO, "%s: path too long", path);
    if (lstat(path, &st) != 0) return S2S_OK; /* a new file */
    if (S_ISLNK(st.st_mode)) {
        char real[PATH_MAX];
        if (!realpath(path, real))
            return s2s_fail(err, S2S_ERR_IO, "%s: a symbolic link to a missing file (%s); give the file's own path", path,
                            strerror(errno));
        if (snprintf(dest, n, "%s", real) >= (int)n) return s2s_fail(err, S2S_ERR_IO, "%s: path too long", real);
        if (stat(dest, &st) != 0) return S2S_OK;
    }
    if (S_ISDIR(st.st_mode)) return s2s_fail(err, S2S_ERR_IO, "%s: is a directory", path);
    *regular = S_ISREG(st.st_mode);
    *mode = st.st_mode & 0777;
    return S2S_OK;
}

/* A copy of this process's standard output or error when path names it (/dev/stdout, a link
 * to /proc/self/fd/1, or the very file a shell's > or >> opened), else −1: written through
 * the copy, a pipe stays a pipe and a file opened for appending is appended to. */
static int std_stream(const char *path) {
    struct stat p, s;
    if (stat(path, &p) != 0) return -1;
    for (int fd = 1; fd <= 2; fd++)
        if (fstat(fd, &s) == 0 && s.st_dev == p.st_dev && s.st_ino == p.st_ino) {
            int flags = fcntl(fd, F_GETFL);
            if (flags >= 0 && (flags & O_ACCMODE) != O_RDONLY) return fcntl(fd, F_DUPFD_CLOEXEC, 0);
        }
    return -1;
}

/* A temporary file beside dest, to be renamed over it, made with mode. */
static S2sStatus tmp_beside(FileTmp *t, const char *path, mode_t mode, S2sError *err) {
    if (snprintf(t->tmp, sizeof t->tmp, "%s.tmp.XXXXXX", t->path) >= (int)sizeof t->tmp)
        return s2s_fail(err, S2S_ERR_IO, "%s: path too long", path);
    int fd = mkstemp(t->tmp);
    if (fd < 0) return s2s_fail(err, S2S_ERR_IO, "%s: cannot create a temporary file: %s", path, strerror(errno));
    /* mkstemp makes 0600; our files are for sharing, and a replaced file keeps its mode */
    if (fchmod(fd, mode) != 0 || !(t->f = fdopen(fd, "wb"))) {
        int e = errno;
        close(fd);
        unlink(t->tmp);
        return s2s_fail(err, S2S_ERR_IO, "%s: cannot open a temporary file: %s", path, strerror(e));
    }
    return S2S_OK;
}

S2sStatus file_tmp_open_managed(FileTmp *t, const char *path, S2sError *err) {
    t->f = NULL;
    t->tmp[0] = '\0';
    t->direct = false;
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode)) return s2s_fail(err, S2S_ERR_IO, "%s: is a directory", path);
    if (snprintf(t->path, sizeof t->path, "%s", path) >= (int)sizeof t->path)
        return s2s_fail(err, S2S_ERR_IO, "%s: path too long", path);
    return tmp_beside(t, path, 0644, err);
}

S2sStatus file_write_managed(const char *path, const void *data, size_t n, S2sError *err) {
    FileTmp t;
    S2sStatus st = file_tmp_open_managed(&t, path, err);
    if (st) return st;
    bool failed = n && fwrite(data, 1, n, t.f) != n;
    return file_tmp_commit(&t, failed, err);
}

S2sStatus file_tmp_open(FileTmp *t, const char *path, S2sError *err) {
    t->f = NULL;
    t->tmp[0] = '\0';
    t->direct = false;
    int sfd = std_stream(path);
    if (sfd >= 0) {
        if (!(t->f = fdopen(sfd, "ab"))) {
            close(sfd);
            return s2s_fail(err, S2S_ERR_IO, "%s: cannot open for writing: %s", path, strerror(errno));
        }
        snprintf(t->path, sizeof t->path, "%s", path);
        t->direct = true;
        return S2S_OK;
    }
    bool regular;
    mode_t mode;
    S2sStatus st = destination(path, t->path, sizeof t->path, &regular, &mode, err);
    if (st) return st;
    if (!regular) { /* a device, pipe or socket: nothing to rename over; write it as it is */
        int fd = open(t->path, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || !(t->f = fdopen(fd, "wb"))) {
            int e = errno;
            if (fd >= 0) close(fd);
            return s2s_fail(err, S2S_ERR_IO, "%s: cannot open for writing: %s", path, strerror(e));
        }
        t->direct = true;
        return S2S_OK;
    }
    return tmp_beside(t, path, mode, err);
}

S2sStatus file_tmp_commit(FileTmp *t, bool failed, S2sError *err) {
    S2S_ASSERT(t->f);
    int e = failed ? errno : 0; /* the caller's failed write, when it just happened */
    if (!failed && (fflush(t->f) != 0 || (!t->direct && fsync(fileno(t->f)) != 0))) {
        e = errno;
        failed = true;
    }
    if (fclose(t->f) != 0 && !failed) {
        e = errno;
        failed = true;
    }
    t->f = NULL;
    if (failed) {
        if (!t->direct) unlink(t->tmp);
        return s2s_fail(err, S2S_ERR_IO, "%s: cannot write: %s", t->path, strerror(e ? e : EIO));
    }
    if (t->direct) return S2S_OK;
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
    if (!t->direct) unlink(t->tmp);
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

static S2sStatus read_all(FILE *f, bool is_stdin, const char *path, size_t max, char **out, size_t *out_len, S2sError *err);

S2sStatus file_read_all(const char *path, size_t max, char **out, size_t *out_len, S2sError *err) {
    bool is_stdin = strcmp(path, "-") == 0;
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f) return s2s_fail(err, S2S_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    return read_all(f, is_stdin, path, max, out, out_len, err);
}

S2sStatus file_read_regular(const char *path, size_t max, char **out, size_t *out_len, S2sError *err) {
    int fd;
    S2sStatus st = file_open_regular(path, O_RDONLY, &fd, err);
    if (st) return st;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return s2s_fail(err, S2S_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    }
    return read_all(f, false, path, max, out, out_len, err);
}

static S2sStatus read_all(FILE *f, bool is_stdin, const char *path, size_t max, char **out, size_t *out_len, S2sError *err) {
    struct stat st;
    if (fstat(fileno(f), &st) == 0) {
        S2sStatus bad = S2S_OK;
        if (S_ISDIR(st.st_mode)) bad = s2s_fail(err, S2S_ERR_IO, "%s: is a directory", path);
        else if (S_ISREG(st.st_mode) && (uint64_t)st.st_size > max)
            bad = s2s_fail(err, S2S_ERR_IO, "%s: %lld bytes; the limit for this file is %zu", path, (long long)st.st_size, max);
        if (bad) {
            if (!is_stdin) fclose(f);
            return bad;
        }
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    S2sStatus rc = S2S_OK;
    while (buf) {
        if (n == cap - 1) { /* grow, but never past max + 1 bytes of text */
            if (n > max) break;
            size_t nc = cap * 2 > max + 2 ? max + 2 : cap * 2;
            char *nb = realloc(buf, nc);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap = nc;
        }
        size_t got = fread(buf + n, 1, cap - 1 - n, f);
        n += got;
        if (got == 0) break;
    }
    if (!buf) rc = s2s_fail(err, S2S_ERR_NOMEM, "%s: out of memory reading it", path);
    else if (n > max) rc = s2s_fail(err, S2S_ERR_IO, "%s: larger than %zu bytes, the limit for this file", path, max);
    else if (ferror(f)) rc = s2s_fail(err, S2S_ERR_IO, "%s: read error: %s", path, strerror(errno));
    if (!is_stdin) fclose(f);
    if (rc) {
        free(buf);
        return rc;
    }
    buf[n] = '\0';
    *out = buf;
    if (out_len) *out_len = n;
    return S2S_OK;
}

bool file_is_regular(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

bool file_exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

static long lock_pid(int fd) {
    char b[32] = {0};
    if (pread(fd, b, sizeof b - 1, 0) <= 0) return 0;
    return strtol(b, NULL, 10);
}

S2sStatus file_lock(FileLock *l, const char *dir, S2sError *err) {
    l->fd = -1;
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s/.lock", dir) >= (int)sizeof p) return s2s_fail(err, S2S_ERR_IO, "%s: path too long", dir);
    int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644); /* a link planted there is never written through */
    if (fd < 0 && errno == ELOOP)
        return s2s_fail(err, S2S_ERR_IO, "%s: a symbolic link; a folder's lock must be its own file (remove the link)", p);
    if (fd < 0) return s2s_fail(err, S2S_ERR_IO, "%s: cannot create: %s", p, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        long pid = e == EWOULDBLOCK ? lock_pid(fd) : 0;
        close(fd);
        if (e != EWOULDBLOCK) return s2s_fail(err, S2S_ERR_IO, "%s: cannot lock: %s", p, strerror(e));
        if (pid > 0) return s2s_fail(err, S2S_ERR_IO, "%s: in use by another process (pid %ld)", dir, pid);
        return s2s_fail(err, S2S_ERR_IO, "%s: in use by another process", dir);
    }
    char b[32];
    int k = snprintf(b, sizeof b, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, b, (size_t)k, 0) != k) { /* the pid is a courtesy for messages */
    }
    l->fd = fd;
    return S2S_OK;
}

void file_unlock(FileLock *l) {
    if (l->fd < 0) return;
    close(l->fd); /* releases the flock */
    l->fd = -1;
}

bool file_lock_held(const char *dir, long *pid) {
    if (pid) *pid = 0;
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s/.lock", dir) >= (int)sizeof p) return false;
    int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return false;
    bool held = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    if (held && pid) *pid = lock_pid(fd);
    close(fd); /* also drops the shared lock when it was granted */
    return held;
}

int file_open_beneath(int dirfd, const char *rel, int flags, mode_t mode, bool want_dir) {
    char name[NAME_MAX + 1];
    int cur = dirfd;
    const char *p = rel;
    for (;;) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 0 || n > NAME_MAX || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.')) {
            if (cur != dirfd) close(cur);
            errno = ENOENT;
            return -1;
        }
        memcpy(name, p, n);
        name[n] = '\0';
        bool last = !e;
        int fd = last ? openat(cur, name, flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, mode)
                      : openat(cur, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int saved = errno;
        if (cur != dirfd) close(cur);
        if (fd < 0) {
            errno = saved;
            return -1;
        }
        if (last) {
            struct stat st;
            if (fstat(fd, &st) != 0 || (want_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))) {
                close(fd);
                errno = ENOENT;
                return -1;
            }
            int fl = fcntl(fd, F_GETFL);
            if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
            return fd;
        }
        cur = fd;
        p = e + 1;
    }
}

/* "name.tmp.XXXXXX", as mkstemp fills file_tmp_open's template */
static bool is_tmp_name(const char *s) {
    size_t n = strlen(s);
    if (n < 12 || memcmp(s + n - 11, ".tmp.", 5) != 0) return false;
    for (size_t i = n - 6; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) return false;
    }
    return true;
}

int file_remove_stale_tmps(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!is_tmp_name(e->d_name)) continue;
        char p[PATH_MAX];
        if (snprintf(p, sizeof p, "%s/%s", dir, e->d_name) >= (int)sizeof p) continue;
        if (file_is_regular(p) && unlink(p) == 0) n++;
    }
    closedir(d);
    return n;
}

S2sStatus file_open_regular(const char *path, int flags, int *out, S2sError *err) {
    *out = -1;
    int fd = open(path, flags | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        s2s_fail(err, S2S_ERR_IO, "%s: cannot open: %s", path, strerror(e));
        errno = e;
        return S2S_ERR_IO;
    }
    struct stat st;
    int fl = fcntl(fd, F_GETFL);
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        close(fd);
        errno = EINVAL;
        return s2s_fail(err, S2S_ERR_IO, "%s: not a regular file (a FIFO, a device or a folder where a file was expected)",
                        path);
    }
    *out = fd;
    return S2S_OK;
}

/* ---- the output-onto-input rule ---- */

/* path's identity (links followed; "-": standard input), false when it names no regular file */
static bool regular_id(const char *path, struct stat *st) {
    if (!path) return false;
    int r = strcmp(path, "-") == 0 ? fstat(0, st) : stat(path, st);
    return r == 0 && S_ISREG(st->st_mode);
}

static bool same_regular(const char *a, const char *b) {
    struct stat sa, sb;
    return regular_id(a, &sa) && regular_id(b, &sb) && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* Two outputs that do not exist yet: one name in one folder (the folders resolved). */
static bool same_new(const char *a, const char *b) {
    struct stat st;
    if (!a || !b || !strcmp(a, "-") || !strcmp(b, "-") || stat(a, &st) == 0 || stat(b, &st) == 0) return false;
    char da[PATH_MAX], db[PATH_MAX], ra[PATH_MAX], rb[PATH_MAX];
    const char *sa = strrchr(a, '/'), *sb = strrchr(b, '/');
    snprintf(da, sizeof da, "%.*s", sa ? (int)(sa - a) + 1 : 1, sa ? a : ".");
    snprintf(db, sizeof db, "%.*s", sb ? (int)(sb - b) + 1 : 1, sb ? b : ".");
    return realpath(da, ra) && realpath(db, rb) && !strcmp(ra, rb) && !strcmp(sa ? sa + 1 : a, sb ? sb + 1 : b);
}

S2sStatus file_distinct(const FileRole *in, int n_in, const FileRole *out, int n_out, S2sError *err) {
    for (int o = 0; o < n_out; o++) {
        for (int i = 0; i < n_in; i++)
            if (same_regular(out[o].path, in[i].path)) {
                bool std_in = !strcmp(in[i].path, "-");
                return s2s_fail(err, S2S_ERR_CONFIG,
                                "%s %s is the file read as %s%s%s: writing it would destroy what is read (give "
                                "another file)",
                                out[o].what, out[o].path, in[i].what, std_in ? "" : " ", std_in ? "" : in[i].path);
            }
        for (int k = 0; k < o; k++)
            if (same_regular(out[o].path, out[k].path) || same_new(out[o].path, out[k].path))
                return s2s_fail(err, S2S_ERR_CONFIG, "%s %s and %s %s are one file: give each its own", out[k].what,
                                out[k].path, out[o].what, out[o].path);
    }
    return S2S_OK;
}

/* ---- stamps ---- */

static void stamp_of(const struct stat *sb, FileStamp *s) {
    uint64_t v[7] = {(uint64_t)sb->st_dev, (uint64_t)sb->st_ino, (uint64_t)sb->st_size, (uint64_t)sb->st_mtim.tv_sec,
                     (uint64_t)sb->st_mtim.tv_nsec, (uint64_t)sb->st_ctim.tv_sec, (uint64_t)sb->st_ctim.tv_nsec};
    memcpy(s->v, v, sizeof v);
}

bool file_stamp(int fd, FileStamp *s) {
    struct stat sb;
    if (fstat(fd, &sb) != 0) return false;
    stamp_of(&sb, s);
    return true;
}

bool file_stamp_path(const char *path, FileStamp *s) {
    struct stat sb;
    if (stat(path, &sb) != 0) return false;
    stamp_of(&sb, s);
    return true;
}

bool file_stamp_equal(const FileStamp *a, const FileStamp *b) { return !memcmp(a->v, b->v, sizeof a->v); }

bool file_stamp_same_writes(const FileStamp *a, const FileStamp *b) { return !memcmp(a->v, b->v, 5 * sizeof a->v[0]); }

void file_mark_used(const char *path) {
    utimensat(AT_FDCWD, path, (const struct timespec[2]){{0, UTIME_NOW}, {0, UTIME_OMIT}}, 0);
}
