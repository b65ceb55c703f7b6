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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

S2sStatus prepared_hash_file(const char *path, uint64_t *h, S2sError *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return s2s_fail(err, S2S_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    unsigned char buf[1 << 16];
    uLong crc = crc32(0L, Z_NULL, 0), ad = adler32(0L, Z_NULL, 0);
    uint64_t size = 0;
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        crc = crc32(crc, buf, (uInt)n);
        ad = adler32(ad, buf, (uInt)n);
        size += n;
    }
    bool bad = ferror(f);
    fclose(f);
    if (bad) return s2s_fail(err, S2S_ERR_IO, "%s: read error", path);
    uint64_t parts[3] = {size, crc, ad};
    *h = data_fnv(*h, parts, sizeof parts);
    return S2S_OK;
}

void prepared_path(char *out, size_t n, const char *dir, uint64_t key) {
    snprintf(out, n, "%s/%016" PRIx64 ".s2sdata", dir, key);
}

enum { MAX_INPUTS = PREPARED_MAX_INPUTS };

/* The test split may be "": none. */
int prepared_input_files(const ConfigTask *t, char paths[PREPARED_MAX_INPUTS][PREPARED_PATH]) {
    TrainCorpora c;
    S2sError ignored;
    if (!config_original_corpora(t, &c, &ignored)) c.n = 0; /* refused by config_check before; the teacher's file below */
    int n = 0;
    for (int i = 0; i < c.n; i++, n += 2) parallel_split_paths(t, c.prefix[i], paths[n], paths[n + 1], sizeof paths[n]);
    if (t->teacher_output[0]) snprintf(paths[n++], sizeof paths[0], "%s", t->teacher_output);
    const char *evals[2] = {t->valid_prefix, t->test_prefix};
    for (int k = 0; k < 2; k++)
        if (evals[k][0]) {
            parallel_split_paths(t, evals[k], paths[n], paths[n + 1], sizeof paths[n]);
            n += 2;
        }
    const char *model = t->subword == SUBWORD_SENTENCEPIECE ? t->spm_model : t->subword == SUBWORD_BPE ? t->bpe_model : "";
    if (model[0]) snprintf(paths[n++], sizeof paths[0], "%s", model);
    return n;
}

/* Reading every input file for its digest costs seconds on a large corpus, each run. A memo in
 * the cache folder, named by a digest of the settings and the paths, keeps each file's identity
 * (device, inode, size, modification and change times to the nanosecond) beside the key they
 * gave; while every identity stays the same, the key is taken from it. Every write to a file
 * sets its change time, which no user can set back: a changed file is never matched. */
enum { MEMO_FIELDS = 7 };

static void file_identity(const struct stat *sb, uint64_t id[MEMO_FIELDS]) {
    uint64_t v[MEMO_FIELDS] = {(uint64_t)sb->st_dev, (uint64_t)sb->st_ino, (uint64_t)sb->st_size,
                               (uint64_t)sb->st_mtim.tv_sec, (uint64_t)sb->st_mtim.tv_nsec, (uint64_t)sb->st_ctim.tv_sec,
                               (uint64_t)sb->st_ctim.tv_nsec};
    memcpy(id, v, sizeof v);
}

/* A string and then a byte no text has, so that strings one after the other stay apart. */
static uint64_t fnv_str(uint64_t h, const char *s) {
    static const unsigned char apart = 0xff;
    return data_fnv(data_fnv(h, s, strlen(s)), &apart, 1);
}

/* The key of a task's prepared data: this build of the data code (prepared_cache.o is rebuilt
 * with every data file), the settings that shape the data, and the bytes of every input file. */
static S2sStatus task_key(const ConfigTask *t, uint64_t *key, S2sError *err) {
    char settings[640];
    snprintf(settings, sizeof settings, "%s %s %s|%d|%d %d %d %d %d|%d %d %d|%d|%d %.9g %d %d|%d %d", S2S_VERSION, __DATE__,
             __TIME__, PREPARED_VERSION, (int)t->subword, t->bpe_merges, (int)t->bpe_joint, t->bpe_vocab_size,
             t->bpe_dropout > 0, t->min_freq, t->max_vocab, t->max_train_len, (int)t->source_markers, (int)t->dedup,
             (double)t->max_length_ratio, t->subword_sample, t->data_seed, t->teacher_output[0] ? (int)t->teacher_mix : -1, t->teacher_nbest);
    uint64_t h = fnv_str(DATA_FNV_BASIS, settings), memo_name = h;
    char paths[MAX_INPUTS][CONFIG_STR + 96], memo[CONFIG_STR + 64];
    int n = prepared_input_files(t, paths);
    uint64_t ids[MAX_INPUTS * MEMO_FIELDS + 1];
    for (int i = 0; i < n; i++) {
        struct stat sb;
        if (stat(paths[i], &sb) != 0) return s2s_fail(err, S2S_ERR_IO, "%s: cannot open: %s", paths[i], strerror(errno));
        file_identity(&sb, ids + i * MEMO_FIELDS);
        memo_name = fnv_str(memo_name, paths[i]);
    }
    snprintf(memo, sizeof memo, "%s/%016" PRIx64 ".key", t->cache_dir, memo_name);
    size_t len = 0, want = ((size_t)n * MEMO_FIELDS + 1) * sizeof *ids;
    char *seen = NULL;
    S2sError ignored;
    if (file_read_all(memo, 4096, &seen, &len, &ignored) == S2S_OK && len == want && !memcmp(seen, ids, want - 8)) {
        memcpy(key, seen + want - 8, 8); /* every file as it was: the key they gave */
        free(seen);
        return S2S_OK;
    }
    free(seen);
    S2sStatus st = S2S_OK;
    for (int i = 0; i < n && !st; i++) st = prepared_hash_file(paths[i], &h, err);
    *key = h;
    ids[n * MEMO_FIELDS] = h;
    if (!st && file_mkdirs(t->cache_dir, &ignored) == S2S_OK) file_write_atomic(memo, ids, want, &ignored); /* a memo only */
    return st;
}

/* A cache folder keeps the PREPARED_KEEP files used last (a read renews a file's time), and
 * four times as many key memos; older ones go after a write, so changed settings and files do
 * not fill the disk. */
#define PREPARED_KEEP 16

typedef struct Aged {
    char name[64];
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
    return strlen(name) > 16 + 13 && !strncmp(name + 16, ".s2sdata.tmp.", 13) && S_ISREG(sb->st_mode) &&
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
        if (len != 16 + strlen(suffix) || strcmp(e->d_name + 16, suffix) != 0) continue;
        if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(sb.st_mode)) continue;
        if (n == cap) a = s2s_xrealloc(a, (size_t)(cap = cap ? 2 * cap : 32) * sizeof *a);
        memcpy(a[n].name, e->d_name, len + 1); /* 16 + the suffix's bytes, checked above */
        a[n++].t = sb.st_mtim;
    }
    if (n > keep) {
        qsort(a, (size_t)n, sizeof *a, newer_first);
        for (int i = keep; i < n; i++) unlinkat(dirfd(d), a[i].name, 0);
    }
    closedir(d);
    free(a);
}

S2sStatus prepared_load(TaskData *td, const ConfigTask *t, const TaskLoadHooks *hooks, S2sError *err) {
    uint64_t key = 0;
    char path[sizeof td->prepared];
    if (!t->cache_dir[0] || task_key(t, &key, err)) return parallel_load(td, t, hooks, err); /* a missing file: its own message */
    prepared_path(path, sizeof path, t->cache_dir, key);
    S2sError why;
    S2sStatus st = prepared_read(path, key, td, &why);
    if (!st) {
        snprintf(td->prepared, sizeof td->prepared, "%s", path);
        td->prepared_state = PREPARED_READ;
        utimensat(AT_FDCWD, path, NULL, 0); /* used now: the last to go */
        return S2S_OK;
    }
    S2sError werr;
    if (!(st = file_mkdirs(t->cache_dir, &werr)) && !(st = prepared_build(path, td, t, key, hooks, &werr))) {
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
