/* rundir.c — run folders: lock, refuse or clear an earlier run, remove stale temporaries. */
#include "s2s/rundir.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const RUN_FILES[] = {RUN_CONFIG, RUN_LOG, RUN_LAST, RUN_MODEL, RUN_TEST_HYP, RUN_TEST_REF, RUN_CURVES};
#define N_RUN_FILES ((int)(sizeof RUN_FILES / sizeof RUN_FILES[0]))
#define N_MARKERS 4 /* the first four: what makes a folder hold a run */

void rundir_path(char *buf, size_t n, const char *dir, const char *name) { snprintf(buf, n, "%s/%s", dir, name); }

bool rundir_holds_run(const char *dir) {
    char p[PATH_MAX];
    for (int i = 0; i < N_MARKERS; i++) {
        rundir_path(p, sizeof p, dir, RUN_FILES[i]);
        if (file_exists(p)) return true;
    }
    return false;
}

/* "config.json, log.jsonl and model.bin" */
static void list_held(const char *dir, char *buf, size_t n) {
    char p[PATH_MAX];
    const char *held[N_MARKERS];
    int k = 0;
    for (int i = 0; i < N_MARKERS; i++) {
        rundir_path(p, sizeof p, dir, RUN_FILES[i]);
        if (file_exists(p)) held[k++] = RUN_FILES[i];
    }
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < k && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", i == 0 ? "" : i == k - 1 ? " and " : ", ", held[i]);
}

/* Deletes dir/sub/prefix*suffix, then sub itself when that leaves it empty; a link in sub's
 * place is removed itself (what it names is not the run's). */
static void clear_folder(const char *dir, const char *sub, const char *prefix, const char *suffix) {
    char p[PATH_MAX];
    rundir_path(p, sizeof p, dir, sub);
    struct stat st;
    if (lstat(p, &st) == 0 && S_ISLNK(st.st_mode)) {
        unlink(p);
        return;
    }
    DIR *d = opendir(p);
    if (!d) return;
    size_t lp = strlen(prefix), ls = strlen(suffix);
    for (struct dirent *e; (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (n < lp + ls || strncmp(e->d_name, prefix, lp) != 0 || strcmp(e->d_name + n - ls, suffix) != 0) continue;
        char f[PATH_MAX + 256];
        snprintf(f, sizeof f, "%s/%s", p, e->d_name);
        unlink(f);
    }
    closedir(d);
    rmdir(p); /* only when empty */
}

/* Deletes an earlier run's files (its heatmaps and kept checkpoints too), nothing else. */
static S2sStatus clear_run(const char *dir, S2sError *err) {
    char p[PATH_MAX];
    for (int i = 0; i < N_RUN_FILES; i++) {
        rundir_path(p, sizeof p, dir, RUN_FILES[i]);
        if (unlink(p) != 0 && errno != ENOENT) return s2s_fail(err, S2S_ERR_IO, "%s: cannot delete: %s", p, strerror(errno));
    }
    clear_folder(dir, RUN_ATTENTION, "epoch", ".png");
    clear_folder(dir, RUN_CHECKPOINTS, "step", ".bin");
    return S2S_OK;
}

/* The first of a run's files (or its folders) that is a symbolic link, or NULL. A run's files
 * are its own: written through a link, training would replace or cut a file outside the run. */
static const char *linked_file(const char *dir) {
    static const char *const NAMES[] = {RUN_CONFIG, RUN_LOG, RUN_LAST, RUN_MODEL, RUN_TEST_HYP,
                                        RUN_TEST_REF, RUN_CURVES, RUN_ATTENTION, RUN_CHECKPOINTS};
    char p[PATH_MAX];
    struct stat st;
    for (size_t i = 0; i < sizeof NAMES / sizeof *NAMES; i++) {
        rundir_path(p, sizeof p, dir, NAMES[i]);
        if (lstat(p, &st) == 0 && S_ISLNK(st.st_mode)) return NAMES[i];
    }
    return NULL;
}

S2sStatus rundir_names(RunDir *d, const char *dir, S2sError *err) {
    memset(d, 0, sizeof *d);
    d->lock.fd = -1;
    if (snprintf(d->dir, sizeof d->dir, "%s", dir) >= (int)sizeof d->dir)
        return s2s_fail(err, S2S_ERR_CONFIG, "%s: path too long", dir);
    rundir_path(d->config, sizeof d->config, dir, RUN_CONFIG);
    rundir_path(d->log, sizeof d->log, dir, RUN_LOG);
    rundir_path(d->model, sizeof d->model, dir, RUN_MODEL);
    rundir_path(d->last, sizeof d->last, dir, RUN_LAST);
    return S2S_OK;
}

S2sStatus rundir_open(RunDir *d, const char *dir, RunMode mode, S2sError *err) {
    S2sStatus st = rundir_names(d, dir, err);
    if (st) return st;
    if (mode == RUN_RESUME) {
        struct stat sb;
        if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
            return s2s_fail(err, S2S_ERR_IO, "%s: no such run folder", dir);
    } else if ((st = file_mkdirs(dir, err))) {
        return st;
    }
    if ((st = file_lock(&d->lock, dir, err))) {
        if (st == S2S_ERR_IO && strstr(err->msg, "in use")) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            s2s_fail(err, st, "%s: another run trains there", msg);
        }
        return st;
    }
    /* ours now: nobody else writes here, so temporary files are leftovers of killed writers */
    char p[PATH_MAX];
    d->stale_tmps = file_remove_stale_tmps(dir);
    rundir_path(p, sizeof p, dir, RUN_ATTENTION);
    d->stale_tmps += file_remove_stale_tmps(p);
    rundir_path(p, sizeof p, dir, RUN_CHECKPOINTS);
    d->stale_tmps += file_remove_stale_tmps(p);
    const char *link = mode == RUN_OVERWRITE ? NULL : linked_file(dir); /* --overwrite removes the links */
    if (link) {
        st = s2s_fail(err, S2S_ERR_IO, "%s/%s is a symbolic link: a run's files must be its own (remove the link, or start "
                                       "the run again with --overwrite, which removes it)",
                      dir, link);
        rundir_close(d);
        return st;
    }
    if (mode == RUN_RESUME) {
        if (!file_exists(d->last)) {
            st = s2s_fail(err, S2S_ERR_IO,
                          "%s: no %s to resume from (the run stopped before its first checkpoint); start it again "
                          "with --overwrite",
                          dir, RUN_LAST);
            rundir_close(d);
            return st;
        }
        return S2S_OK;
    }
    if (rundir_holds_run(dir)) {
        if (mode == RUN_OVERWRITE) {
            if ((st = clear_run(dir, err))) {
                rundir_close(d);
                return st;
            }
            return S2S_OK;
        }
        char held[128];
        list_held(dir, held, sizeof held);
        if (file_exists(d->last))
            st = s2s_fail(err, S2S_ERR_CONFIG,
                          "%s holds a run already (%s); continue it with --resume %s, start it anew with --overwrite "
                          "(deletes that run's files), or give another --out",
                          dir, held, dir);
        else /* nothing to resume: the same advice --resume gives */
            st = s2s_fail(err, S2S_ERR_CONFIG,
                          "%s holds a run that stopped before its first checkpoint (%s, no %s to resume from); start it "
                          "anew with --overwrite (deletes that run's files), or give another --out",
                          dir, held, RUN_LAST);
        rundir_close(d);
        return st;
    }
    return S2S_OK;
}

void rundir_close(RunDir *d) { file_unlock(&d->lock); }

void rundir_checkpoint_path(char *buf, size_t n, const char *dir, long step) {
    snprintf(buf, n, "%s/%s/step%09ld.bin", dir, RUN_CHECKPOINTS, step);
}

static int by_step(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

int rundir_checkpoint_steps(const char *dir, long **steps) {
    char p[PATH_MAX];
    rundir_path(p, sizeof p, dir, RUN_CHECKPOINTS);
    *steps = NULL;
    DIR *d = opendir(p);
    if (!d) return -1;
    int n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        long step;
        char tail[8];
        if (sscanf(e->d_name, "step%ld.%7s", &step, tail) != 2 || strcmp(tail, "bin") != 0) continue;
        if (n == cap) *steps = s2s_xrealloc(*steps, (size_t)(cap = cap ? 2 * cap : 16) * sizeof **steps);
        (*steps)[n++] = step;
    }
    closedir(d);
    if (n) qsort(*steps, (size_t)n, sizeof **steps, by_step);
    return n;
}

/* Each file of dir/sub named prefix*suffix against the inputs. */
static S2sStatus check_folder(const char *dir, const char *sub, const char *prefix, const char *suffix, const FileRole *in,
                              int n, S2sError *err) {
    char p[PATH_MAX];
    rundir_path(p, sizeof p, dir, sub);
    DIR *d = opendir(p);
    if (!d) return S2S_OK;
    S2sStatus st = S2S_OK;
    size_t lp = strlen(prefix), ls = strlen(suffix);
    for (struct dirent *e; !st && (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len < lp + ls || strncmp(e->d_name, prefix, lp) != 0 || strcmp(e->d_name + len - ls, suffix) != 0) continue;
        char f[PATH_MAX + 256];
        snprintf(f, sizeof f, "%s/%s", p, e->d_name);
        st = file_distinct(in, n, &(FileRole){"the run's file", f}, 1, err);
    }
    closedir(d);
    return st;
}

S2sStatus rundir_check_inputs(const char *dir, const FileRole *in, int n, S2sError *err) {
    char p[PATH_MAX];
    for (int i = 0; i < N_RUN_FILES; i++) {
        rundir_path(p, sizeof p, dir, RUN_FILES[i]);
        S2sStatus st = file_distinct(in, n, &(FileRole){"the run's file", p}, 1, err);
        if (st) return st;
    }
    S2sStatus st = check_folder(dir, RUN_ATTENTION, "epoch", ".png", in, n, err);
    return st ? st : check_folder(dir, RUN_CHECKPOINTS, "step", ".bin", in, n, err);
}
