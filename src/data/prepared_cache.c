/* prepared_cache.c — the folder of prepared data (task.cache_dir): a task's key (its settings,
 * this build of the data code, its input files), the file found under it or prepared there,
 * and the folder kept to the files used last (see prepared.h). */
#include "s2s/prepared.h"
#include "s2s/file.h"
#include "data_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

void prepared_name(char *out, size_t n, const char *dir, const Digest *key, const char *suffix) {
    char hex[2 * DIGEST_BYTES + 1];
    digest_hex(key, hex);
    snprintf(out, n, "%s/%.*s%s", dir, PREPARED_NAME_HEX, hex, suffix);
}

void prepared_path(char *out, size_t n, const char *dir, const Digest *key) { prepared_name(out, n, dir, key, ".s2sdata"); }

enum { MAX_INPUTS = PREPARED_MAX_INPUTS };

/* The test split may be "": none. */
int prepared_input_files(const ConfigTask *t, char paths[PREPARED_MAX_INPUTS][PREPARED_PATH]) {
    TrainCorpora c;
    S2sError ignored;
    if (!config_original_corpora(t, &c, &ignored)) c.n = 0; /* refused by config_check before; the teacher's file below */
    int n = 0;
    for (int i = 0; i < c.n; i++, n += 2) task_split_paths(t, c.prefix[i], paths[n], paths[n + 1], sizeof paths[n]);
    if (t->teacher_output[0]) snprintf(paths[n++], sizeof paths[0], "%s", t->teacher_output);
    const char *evals[2] = {t->valid_prefix, t->test_prefix};
    for (int k = 0; k < 2; k++)
        if (evals[k][0]) {
            task_split_paths(t, evals[k], paths[n], paths[n + 1], sizeof paths[n]);
            n += 2;
        }
    const char *model = t->subword == SUBWORD_SENTENCEPIECE ? t->spm_model : t->subword == SUBWORD_BPE ? t->bpe_model : "";
    if (model[0]) snprintf(paths[n++], sizeof paths[0], "%s", model);
    return n;
}

/* Reading every input file for its digest costs seconds on a large corpus, each run. A memo in
 * the cache folder, named by a digest of the settings and the paths, keeps each file's stamp
 * (device, inode, size, modification and change times to the nanosecond: file.h) beside the
 * key they gave; while every stamp stays the same, the key is taken from it. Every write to a
 * file moves its change time, which no user can set back: a changed file is never matched. */
enum { MEMO_FIELDS = sizeof(FileStamp) / sizeof(uint64_t) };

/* The key of a task's prepared data: this build of the data code (prepared_cache.o is rebuilt
 * with every data file), the settings that shape the data, and the digest of every input
 * file's bytes. */
static S2sStatus task_key(const ConfigTask *t, Digest *key, S2sError *err) {
    char settings[640];
    snprintf(settings, sizeof settings, "%s %s %s|%d|%d %d %d %d %d|%d %d %d %d|%d|%d %.9g %d %d|%d %d", S2S_VERSION, __DATE__,
             __TIME__, PREPARED_VERSION, (int)t->subword, t->bpe_merges, (int)t->bpe_joint, t->bpe_vocab_size,
             t->bpe_dropout > 0, t->min_freq, t->max_vocab, t->max_train_len, t->train_max_lines, (int)t->source_markers,
             (int)t->dedup, (double)t->max_length_ratio, t->subword_sample, t->data_seed,
             t->teacher_output[0] ? (int)t->teacher_mix : -1, t->teacher_nbest);
    DigestCtx kc, mc;
    digest_init(&kc);
    digest_str(&kc, settings);
    mc = kc; /* the memo's name: the settings and the paths */
    char(*paths)[PREPARED_PATH] = s2s_xcalloc(MAX_INPUTS, sizeof *paths), memo[CONFIG_STR + 64];
    int n = prepared_input_files(t, paths);
    uint64_t ids[MAX_INPUTS * MEMO_FIELDS + DIGEST_BYTES / 8];
    S2sStatus st = S2S_OK;
    for (int i = 0; i < n && !st; i++) {
        FileStamp fs = {{0}};
        if (!file_stamp_path(paths[i], &fs)) st = s2s_fail(err, S2S_ERR_IO, "%s: cannot open: %s", paths[i], strerror(errno));
        memcpy(ids + i * MEMO_FIELDS, fs.v, sizeof fs.v);
        digest_str(&mc, paths[i]);
    }
    Digest memo_name = digest_final(&mc);
    prepared_name(memo, sizeof memo, t->cache_dir, &memo_name, ".key");
    size_t len = 0, at = (size_t)n * MEMO_FIELDS * sizeof *ids, want = at + DIGEST_BYTES;
    char *seen = NULL;
    S2sError ignored;
    if (!st && file_read_regular(memo, 4096, &seen, &len, &ignored) == S2S_OK && len == want && !memcmp(seen, ids, at)) {
        memcpy(key->b, seen + at, DIGEST_BYTES); /* every file as it was: the key they gave */
        free(seen);
        free(paths);
        return S2S_OK;
    }
    free(seen);
    for (int i = 0; i < n && !st; i++) {
        Digest f;
        if (!(st = digest_file(paths[i], &f, err))) digest_update(&kc, f.b, DIGEST_BYTES);
    }
    free(paths);
    if (st) return st;
    *key = digest_final(&kc);
    memcpy((char *)ids + at, key->b, DIGEST_BYTES);
    if (file_mkdirs(t->cache_dir, &ignored) == S2S_OK) file_write_managed(memo, ids, want, &ignored); /* a memo only */
    return S2S_OK;
}

/* A cache folder keeps the PREPARED_KEEP files used last (a read sets a file's access time), and
 * four times as many key memos; older ones go after a write, so changed settings and files do
 * not fill the disk. */
#define PREPARED_KEEP 16

typedef struct Aged {
    char name[NAME_MAX + 1];
    struct timespec t;
} Aged;

static int newer_first(const void *a, const void *b) {
    const struct timespec *x = &((const Aged *)a)->t, *y = &((const Aged *)b)->t;
    if (x->tv_sec != y->tv_sec) return x->tv_sec < y->tv_sec ? 1 : -1;
    return x->tv_nsec < y->tv_nsec ? 1 : x->tv_nsec > y->tv_nsec ? -1 : 0;
}

/* A preparation killed part way leaves its temporary file (`KEY.s2sdata.tmp.XXXXXX`); one that
 * nobody has written to for ten minutes is such a one (a live preparation writes all along). */
static bool stale_tmp(const char *name, const struct stat *sb) {
    return strlen(name) > PREPARED_NAME_HEX + 13 && !strncmp(name + PREPARED_NAME_HEX, ".s2sdata.tmp.", 13) &&
           S_ISREG(sb->st_mode) &&
           time(NULL) - sb->st_mtim.tv_sec > 600;
}

void prepared_prune(const char *dir, const char *suffix, int keep) {
    DIR *d = opendir(dir);
    if (!d) return;
    Aged *a = NULL;
    int n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        struct stat sb;
        if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && stale_tmp(e->d_name, &sb)) {
            unlinkat(dirfd(d), e->d_name, 0);
            continue;
        }
        if (len != PREPARED_NAME_HEX + strlen(suffix) || len > NAME_MAX || strcmp(e->d_name + PREPARED_NAME_HEX, suffix) != 0 ||
            strspn(e->d_name, "0123456789abcdef") != PREPARED_NAME_HEX)
            continue;
        if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(sb.st_mode)) continue;
        if (n == cap) a = s2s_xrealloc(a, (size_t)(cap = cap ? 2 * cap : 32) * sizeof *a);
        memcpy(a[n].name, e->d_name, len + 1); /* at most NAME_MAX, checked above */
        a[n++].t = sb.st_atim; /* the last use (file_mark_used), or the making */
    }
    if (n > keep) {
        qsort(a, (size_t)n, sizeof *a, newer_first);
        for (int i = keep; i < n; i++) unlinkat(dirfd(d), a[i].name, 0);
    }
    closedir(d);
    free(a);
}

S2sStatus prepared_load(TaskData *td, const ConfigTask *t, const TaskLoadHooks *hooks, S2sError *err) {
    Digest key;
    char path[sizeof td->prepared];
    if (!t->cache_dir[0] || task_key(t, &key, err)) return parallel_load(td, t, hooks, err); /* a missing file: its own message */
    prepared_path(path, sizeof path, t->cache_dir, &key);
    S2sError why;
    S2sStatus st = prepared_read(path, &key, td, &why);
    if (!st) {
        snprintf(td->prepared, sizeof td->prepared, "%s", path);
        td->prepared_state = PREPARED_READ;
        file_mark_used(path); /* the last to go */
        return S2S_OK;
    }
    S2sError werr;
    if (!(st = file_mkdirs(t->cache_dir, &werr)) && !(st = prepared_build(path, td, t, &key, hooks, &werr))) {
        snprintf(td->prepared, sizeof td->prepared, "%s", path);
        td->prepared_state = PREPARED_WRITTEN;
        prepared_prune(t->cache_dir, ".s2sdata", PREPARED_KEEP);
        prepared_prune(t->cache_dir, ".key", 4 * PREPARED_KEEP);
        if (why.status == S2S_ERR_CORRUPT) /* a damaged file under its key: replaced */
            snprintf(td->prepared_note, sizeof td->prepared_note, "replaced: %.140s", why.msg);
        return S2S_OK;
    }
    task_free(td);
    bool stopped = hooks && hooks->stop && atomic_load(hooks->stop);
    if (st == S2S_ERR_DATA || st == S2S_ERR_CONFIG || stopped) { /* the data's fault or a signal, not the folder's */
        *err = werr;
        return st;
    }
    /* the folder could not take the file: the run goes on with the data in memory */
    if ((st = parallel_load(td, t, hooks, err))) return st;
    snprintf(td->prepared, sizeof td->prepared, "%s", path);
    td->prepared_state = PREPARED_UNWRITTEN;
    snprintf(td->prepared_note, sizeof td->prepared_note, "%.150s", werr.msg);
    return S2S_OK;
}
