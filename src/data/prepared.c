/* prepared.c — a translation task's data written once and read back (see prepared.h).
 *
 * Layout, little-endian: "s2sdata1" (the version in its last byte), u64 key, u64 payload
 * bytes, u32 CRC-32 of the payload, u32 0; then the payload: u32 train_skipped; the source and
 * the target vocabulary (u8 0: words, u32 count, each u32 length + bytes; u8 1: a subword
 * model, u32 kind, u64 length + bytes; u8 2 for the target: the source's model); the three
 * splits (u32 pairs, u64 ids, then pairs × i32 source lengths, pairs × i32 target lengths,
 * ids × i32 ids, each pair's source then target); the validation and test references and the
 * training text (u8 present, then one string per pair or two per training pair). */
#include "s2s/prepared.h"
#include "s2s/file.h"
#include "s2s/subword.h"
#include "s2s/text.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define MAGIC "s2sdata"
#define HEADER 32

/* ---- writing: a growing buffer ---- */

typedef struct Out {
    unsigned char *b;
    size_t n, cap;
} Out;

static void put(Out *o, const void *p, size_t n) {
    if (o->n + n > o->cap) {
        while (o->n + n > o->cap) o->cap = o->cap ? 2 * o->cap : 1 << 16;
        o->b = s2s_xrealloc(o->b, o->cap);
    }
    memcpy(o->b + o->n, p, n);
    o->n += n;
}

static void put_u8(Out *o, uint8_t v) { put(o, &v, 1); }
static void put_u32(Out *o, uint32_t v) { put(o, &v, 4); }
static void put_u64(Out *o, uint64_t v) { put(o, &v, 8); }

static void put_str(Out *o, const char *s) {
    uint32_t n = (uint32_t)strlen(s);
    put_u32(o, n);
    put(o, s, n);
}

static void put_vocab(Out *o, const Vocab *v, const Vocab *src) {
    if (!v->sub) {
        put_u8(o, 0);
        put_u32(o, (uint32_t)v->size);
        for (int i = 0; i < v->size; i++) put_str(o, v->tokens[i]);
        return;
    }
    size_t len, slen = 0;
    char *bytes = subword_bytes(v->sub, &len);
    char *sb = src && src->sub ? subword_bytes(src->sub, &slen) : NULL;
    if (sb && slen == len && !memcmp(sb, bytes, len)) {
        put_u8(o, 2); /* the source's model (a joint one) */
    } else {
        put_u8(o, 1);
        put_u32(o, (uint32_t)v->sub->kind);
        put_u64(o, len);
        put(o, bytes, len);
    }
    free(sb);
    free(bytes);
}

static void put_pad8(Out *o) {
    static const unsigned char zero[8] = {0};
    if (o->n % 8) put(o, zero, 8 - o->n % 8);
}

/* A split: counts, then (8-aligned, to be read in place) the offsets, the lengths and the ids. */
static void put_dataset(Out *o, const Dataset *d) {
    put_u32(o, (uint32_t)d->n);
    put_u64(o, d->n_ids);
    put_pad8(o);
    put(o, d->src_off, (size_t)d->n * sizeof *d->src_off);
    put(o, d->trg_off, (size_t)d->n * sizeof *d->trg_off);
    put(o, d->src_len, (size_t)d->n * sizeof *d->src_len);
    put(o, d->trg_len, (size_t)d->n * sizeof *d->trg_len);
    put_pad8(o);
    put(o, d->ids, d->n_ids * sizeof *d->ids);
}

static void put_lines(Out *o, char *const *lines, int n) {
    put_u8(o, lines != NULL);
    for (int i = 0; lines && i < n; i++) put_str(o, lines[i]);
}

S2sStatus prepared_write(const char *path, const TaskData *td, uint64_t key, S2sError *err) {
    Out o = {0};
    unsigned char header[HEADER] = {0};
    put(&o, header, HEADER); /* filled in below */
    put_u32(&o, (uint32_t)td->train_skipped);
    put_vocab(&o, &td->src_vocab, NULL);
    put_vocab(&o, &td->trg_vocab, &td->src_vocab);
    const Dataset *splits[3] = {&td->train, &td->valid, &td->test};
    for (int k = 0; k < 3; k++) put_dataset(&o, splits[k]);
    put_lines(&o, td->valid_refs, td->valid.n);
    put_lines(&o, td->test_refs, td->test.n);
    put_lines(&o, td->train_src_text, td->train.n);
    put_lines(&o, td->train_trg_text, td->train.n);
    uint64_t payload = o.n - HEADER;
    uint32_t crc = (uint32_t)crc32(0L, Z_NULL, 0);
    for (size_t at = HEADER; at < o.n;) { /* zlib takes uInt lengths */
        size_t k = o.n - at > (1u << 30) ? (1u << 30) : o.n - at;
        crc = (uint32_t)crc32(crc, o.b + at, (uInt)k);
        at += k;
    }
    memcpy(o.b, MAGIC, 7);
    o.b[7] = (unsigned char)('0' + PREPARED_VERSION);
    memcpy(o.b + 8, &key, 8);
    memcpy(o.b + 16, &payload, 8);
    memcpy(o.b + 24, &crc, 4);
    S2sStatus st = file_write_atomic(path, o.b, o.n, err);
    free(o.b);
    return st;
}

/* ---- reading: every count against the bytes that remain ---- */

typedef struct In {
    const unsigned char *b;
    size_t n, at;
    bool bad;
} In;

static const void *take(In *in, size_t n) {
    if (in->bad || n > in->n - in->at) {
        in->bad = true;
        return NULL;
    }
    const void *p = in->b + in->at;
    in->at += n;
    return p;
}

static uint8_t get_u8(In *in) {
    const uint8_t *p = take(in, 1);
    return p ? *p : 0;
}

static uint32_t get_u32(In *in) {
    uint32_t v = 0;
    const void *p = take(in, 4);
    if (p) memcpy(&v, p, 4);
    return v;
}

static uint64_t get_u64(In *in) {
    uint64_t v = 0;
    const void *p = take(in, 8);
    if (p) memcpy(&v, p, 8);
    return v;
}

/* A string (malloc'ed), or NULL when the bytes run out. */
static char *get_str(In *in) {
    uint32_t n = get_u32(in);
    const char *p = take(in, n);
    if (!p) return NULL;
    char *s = s2s_xmalloc((size_t)n + 1);
    memcpy(s, p, n);
    s[n] = '\0';
    return s;
}

static bool get_vocab(In *in, Vocab *v, const Vocab *src, const char *path, S2sError *err) {
    uint8_t kind = get_u8(in);
    if (kind == 0) {
        uint32_t n = get_u32(in);
        if (in->bad || n < TOK_SPECIALS || n > in->n - in->at) return false;
        vocab_init(v);
        for (uint32_t i = 0; i < n; i++) {
            char *t = get_str(in);
            if (!t) return false;
            if (i >= TOK_SPECIALS && vocab_add(v, t) != (int32_t)i) in->bad = true; /* a repeated word */
            free(t);
        }
        return !in->bad;
    }
    SubwordModel *m = NULL;
    if (kind == 2 && src && src->sub) {
        m = subword_copy(src->sub);
    } else if (kind == 1) {
        uint32_t sk = get_u32(in);
        uint64_t len = get_u64(in);
        const void *bytes = in->bad || len > in->n - in->at ? NULL : take(in, (size_t)len);
        if (!bytes || (sk != SUBWORD_BPE && sk != SUBWORD_SENTENCEPIECE)) return false;
        if (subword_from_bytes(&m, (Subword)sk, bytes, (size_t)len, path, err)) return false;
    } else {
        return false;
    }
    subword_vocab(m, v);
    subword_attach(v, m);
    return true;
}

static void skip_pad8(In *in) {
    if (in->at % 8) take(in, 8 - in->at % 8);
}

/* A split read in place: its arrays point into the image (8-aligned), every pair checked:
 * offsets back to back, lengths within the ids, every id within its vocabulary. */
static bool get_dataset(In *in, Dataset *d, int V_src, int V_trg) {
    uint32_t n = get_u32(in);
    uint64_t n_ids = get_u64(in);
    skip_pad8(in);
    if (in->bad || n > (in->n - in->at) / 24 || n_ids > (in->n - in->at) / 4) return in->bad = true, false;
    const size_t *so = take(in, (size_t)n * 8), *to = take(in, (size_t)n * 8);
    const int *sl = take(in, (size_t)n * 4), *tl = take(in, (size_t)n * 4);
    skip_pad8(in);
    const int32_t *ids = take(in, (size_t)n_ids * 4);
    if (!so || !to || !sl || !tl || !ids) return false;
    uint64_t at = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (sl[i] < 0 || tl[i] < 0 || so[i] != at || to[i] != at + (uint64_t)sl[i] ||
            (uint64_t)sl[i] + (uint64_t)tl[i] > n_ids - at)
            return in->bad = true, false;
        for (int k = 0; k < sl[i] + tl[i]; k++)
            if (ids[at + k] < 0 || ids[at + k] >= (k < sl[i] ? V_src : V_trg)) return in->bad = true, false;
        at += (uint64_t)sl[i] + (uint64_t)tl[i];
    }
    if (at != n_ids) return in->bad = true, false;
    *d = (Dataset){.n = (int)n, .ids = (int32_t *)ids, .src_off = (size_t *)so, .trg_off = (size_t *)to,
                   .src_len = (int *)sl, .trg_len = (int *)tl, .n_ids = (size_t)n_ids, .borrowed = true};
    return true;
}

static bool get_lines(In *in, char ***out, int n) {
    if (!get_u8(in)) return !in->bad;
    char **lines = s2s_xcalloc((size_t)(n ? n : 1), sizeof *lines);
    for (int i = 0; i < n; i++)
        if (!(lines[i] = get_str(in))) {
            text_free_lines(lines, i);
            return false;
        }
    *out = lines;
    return true;
}

/* The header: this version's magic, the key, the payload's length and CRC. */
static S2sStatus check_header(const unsigned char *b, size_t len, uint64_t key, const char *path, S2sError *err) {
    if (len < HEADER || memcmp(b, MAGIC, 7) != 0)
        return s2s_fail(err, S2S_ERR_CORRUPT, "%s: not a prepared data file", path);
    if (b[7] != '0' + PREPARED_VERSION)
        return s2s_fail(err, S2S_ERR_CORRUPT, "%s: a prepared data file of version %c; this build reads version %d", path,
                        b[7], PREPARED_VERSION);
    uint64_t k, payload;
    uint32_t crc;
    memcpy(&k, b + 8, 8);
    memcpy(&payload, b + 16, 8);
    memcpy(&crc, b + 24, 4);
    if (k != key)
        return s2s_fail(err, S2S_ERR_CORRUPT, "%s: prepared for other data or settings (key %016" PRIx64 ", expected %016" PRIx64 ")",
                        path, k, key);
    if (payload != len - HEADER)
        return s2s_fail(err, S2S_ERR_CORRUPT, "%s: truncated or extended: %zu bytes after the header, the header says %" PRIu64,
                        path, len - HEADER, payload);
    uint32_t c = (uint32_t)crc32(0L, Z_NULL, 0);
    for (size_t at = HEADER; at < len;) {
        size_t n = len - at > (1u << 30) ? (1u << 30) : len - at;
        c = (uint32_t)crc32(c, b + at, (uInt)n);
        at += n;
    }
    if (c != crc) return s2s_fail(err, S2S_ERR_CORRUPT, "%s: damaged (CRC-32 %08x, the header says %08x)", path, c, crc);
    return S2S_OK;
}

S2sStatus prepared_parse(const void *buf, size_t len, uint64_t key, const char *path, TaskData *td, S2sError *err) {
    memset(td, 0, sizeof *td);
    S2sStatus st = check_header(buf, len, key, path, err);
    if (st) return st;
    In in = {buf, len, HEADER, false};
    td->train_skipped = (int)get_u32(&in);
    bool ok = get_vocab(&in, &td->src_vocab, NULL, path, err) && get_vocab(&in, &td->trg_vocab, &td->src_vocab, path, err);
    Dataset *splits[3] = {&td->train, &td->valid, &td->test};
    for (int k = 0; k < 3; k++) dataset_init(splits[k]);
    for (int k = 0; k < 3 && ok; k++) ok = get_dataset(&in, splits[k], td->src_vocab.size, td->trg_vocab.size);
    ok = ok && get_lines(&in, &td->valid_refs, td->valid.n) && get_lines(&in, &td->test_refs, td->test.n) &&
         get_lines(&in, &td->train_src_text, td->train.n) && get_lines(&in, &td->train_trg_text, td->train.n);
    ok = ok && !in.bad && in.at == in.n && td->train.n > 0;
    if (ok) return S2S_OK;
    task_free(td);
    return s2s_fail(err, S2S_ERR_CORRUPT, "%s: a prepared data file whose contents do not hold together (at byte %zu)", path,
                    in.at);
}

S2sStatus prepared_read(const char *path, uint64_t key, TaskData *td, S2sError *err) {
    memset(td, 0, sizeof *td);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 && errno == ENOENT) return s2s_fail(err, S2S_ERR_IO, "%s: not prepared yet", path);
    if (fd < 0) return s2s_fail(err, S2S_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return s2s_fail(err, S2S_ERR_CORRUPT, "%s: not a regular file", path);
    }
    size_t len = (size_t)sb.st_size;
    /* mapped, not read: the splits are used in place, and pages nobody touches cost nothing */
    void *map = len ? mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
    close(fd);
    if (map == MAP_FAILED) return s2s_fail(err, S2S_ERR_CORRUPT, "%s: %s", path, len ? strerror(errno) : "empty");
    S2sStatus st = prepared_parse(map, len, key, path, td, err);
    if (st) {
        munmap(map, len);
        return st;
    }
    td->map = map;
    td->map_len = len;
    return S2S_OK;
}

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
    const unsigned char *p = (const unsigned char *)parts;
    for (size_t i = 0; i < sizeof parts; i++) *h = (*h ^ p[i]) * 0x100000001b3ull; /* FNV-1a */
    return S2S_OK;
}

void prepared_path(char *out, size_t n, const char *dir, uint64_t key) {
    snprintf(out, n, "%s/%016" PRIx64 ".s2sdata", dir, key);
}

/* The key of a task's prepared data: this build of the data code (parallel.o is rebuilt with
 * every data file), the settings that shape the data, and the bytes of every input file. */
static S2sStatus task_key(const ConfigTask *t, uint64_t *key, S2sError *err) {
    char settings[512];
    snprintf(settings, sizeof settings, "%s %s %s|%d|%d %d %d %d %d|%d %d %d|%d", S2S_VERSION, __DATE__, __TIME__,
             PREPARED_VERSION, (int)t->subword, t->bpe_merges, (int)t->bpe_joint, t->bpe_vocab_size, t->bpe_dropout > 0,
             t->min_freq, t->max_vocab, t->max_train_len, (int)t->source_markers);
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *c = settings; *c; c++) h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
    const char *prefixes[3] = {t->train_prefix, t->valid_prefix, t->test_prefix};
    S2sStatus st = S2S_OK;
    for (int k = 0; k < 3 && !st; k++) {
        char ps[CONFIG_STR + 96], pt[CONFIG_STR + 96];
        parallel_split_paths(t, prefixes[k], ps, pt, sizeof ps);
        st = prepared_hash_file(ps, &h, err);
        if (!st) st = prepared_hash_file(pt, &h, err);
    }
    if (!st && t->subword == SUBWORD_SENTENCEPIECE) st = prepared_hash_file(t->spm_model, &h, err);
    if (!st && t->subword == SUBWORD_BPE && t->bpe_model[0]) st = prepared_hash_file(t->bpe_model, &h, err);
    *key = h;
    return st;
}

/* A cache folder keeps the PREPARED_KEEP files used last (a read renews a file's time); older
 * ones go after a write, so changed settings and files do not fill the disk. */
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

static void prune(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    Aged *a = NULL;
    int n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        struct stat sb;
        if (len != 16 + 8 || strcmp(e->d_name + 16, ".s2sdata") != 0) continue;
        if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(sb.st_mode)) continue;
        if (n == cap) a = s2s_xrealloc(a, (size_t)(cap = cap ? 2 * cap : 32) * sizeof *a);
        memcpy(a[n].name, e->d_name, len + 1); /* 24 bytes, checked above */
        a[n++].t = sb.st_mtim;
    }
    if (n > PREPARED_KEEP) {
        qsort(a, (size_t)n, sizeof *a, newer_first);
        for (int i = PREPARED_KEEP; i < n; i++) unlinkat(dirfd(d), a[i].name, 0);
    }
    closedir(d);
    free(a);
}

S2sStatus prepared_load(TaskData *td, const ConfigTask *t, S2sError *err) {
    uint64_t key;
    char path[sizeof td->prepared];
    if (!t->cache_dir[0] || task_key(t, &key, err)) return parallel_load(td, t, err); /* a missing file: its own message */
    prepared_path(path, sizeof path, t->cache_dir, key);
    S2sError why;
    S2sStatus st = prepared_read(path, key, td, &why);
    if (!st) {
        snprintf(td->prepared, sizeof td->prepared, "%s", path);
        td->prepared_state = PREPARED_READ;
        utimensat(AT_FDCWD, path, NULL, 0); /* used now: the last to go */
        return S2S_OK;
    }
    if ((st = parallel_load(td, t, err))) return st;
    snprintf(td->prepared, sizeof td->prepared, "%s", path);
    S2sError werr;
    if (file_mkdirs(t->cache_dir, &werr) || prepared_write(path, td, key, &werr)) {
        td->prepared_state = PREPARED_UNWRITTEN;
        snprintf(td->prepared_note, sizeof td->prepared_note, "%.150s", werr.msg);
    } else {
        td->prepared_state = PREPARED_WRITTEN;
        prune(t->cache_dir);
        if (why.status == S2S_ERR_CORRUPT) /* a damaged file under its key: replaced */
            snprintf(td->prepared_note, sizeof td->prepared_note, "replaced: %.140s", why.msg);
    }
    return S2S_OK;
}
