/* prepared.c — a translation task's data written once and read back (see prepared.h).
 *
 * Layout, little-endian. A 96-byte header: "s2sdata" and the version digit, the 32-byte key,
 * u64 payload bytes (all after the header), u32 CRC-32 of the payload, u32 bytes an id (2 or
 * 4), u64 where the index starts, u64 training pairs, u64 training ids, u64 0, 8 zero bytes.
 * Then the training ids, each pair's source then target, written as the corpus is encoded;
 * then the index: the 32-byte task_fingerprint, the counts (read, kept, dropped and first line by reason), u16 source and
 * u16 target lengths of every training pair, the number of ids before every 64th pair, the two
 * vocabularies (u8 0: words, u32 count, each u32 length + bytes; u8 1: a subword model, u32
 * kind, u64 length + bytes; u8 2 for the target: the source's model), the validation and test
 * splits (u32 pairs, u64 ids, i32 lengths, i32 ids), their references and, for BPE-dropout, the
 * training text (u8 present, then the strings, u32 length + bytes). */
#include "s2s/prepared.h"
#include "s2s/corpus.h"
#include "s2s/file.h"
#include "s2s/subword.h"
#include "s2s/text.h"
#include "data_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define MAGIC "s2sdata"
#define HEADER 96
#define FIELDS_AT (8 + DIGEST_BYTES)

static uLong crc_more(uLong crc, const void *p, size_t n) {
    for (const unsigned char *b = p; n;) { /* zlib takes uInt lengths */
        uInt k = n > (1u << 30) ? 1u << 30 : (uInt)n;
        crc = crc32(crc, b, k);
        b += k;
        n -= k;
    }
    return crc;
}

/* ---- the index: a growing buffer ---- */

typedef struct Out {
    unsigned char *b;
    size_t n, cap;
} Out;

static void put(Out *o, const void *p, size_t n) {
    if (!n) return; /* an empty split's arrays are NULL */
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

/* An in-memory split (validation, test): counts, lengths, ids. */
static void put_dataset(Out *o, const Dataset *d) {
    put_u32(o, (uint32_t)d->n);
    put_u64(o, d->n_ids);
    put(o, d->src_len, (size_t)d->n * sizeof *d->src_len);
    put(o, d->trg_len, (size_t)d->n * sizeof *d->trg_len);
    put(o, d->ids, d->n_ids * sizeof *d->ids);
}

static void put_lines(Out *o, char *const *lines, int n) {
    put_u8(o, lines != NULL);
    for (int i = 0; lines && i < n; i++) put_str(o, lines[i]);
}

static void put_counts(Out *o, const CorpusCounts *c) {
    put_u64(o, (uint64_t)c->read);
    put_u64(o, (uint64_t)c->kept);
    for (int i = 0; i < DROP_REASONS; i++) put_u64(o, (uint64_t)c->dropped[i]);
    for (int i = 0; i < DROP_REASONS; i++) put_u64(o, (uint64_t)c->first[i]);
    for (int i = 0; i < DROP_REASONS; i++) put_u32(o, (uint32_t)c->first_corpus[i]);
    for (int i = 0; i < TASK_MAX_CORPORA; i++) put_u64(o, (uint64_t)c->kept_by[i]);
}

/* The index of a prepared file: td's training split is the streamed one being written. */
static void put_index(Out *o, const TaskData *td, const Digest *fingerprint) {
    const Dataset *d = &td->train;
    put(o, fingerprint->b, DIGEST_BYTES);
    put_counts(o, &td->train_counts);
    uint16_t *len = s2s_xmalloc((size_t)d->n * sizeof *len + 1);
    for (int side = 0; side < 2; side++) {
        for (int i = 0; i < d->n; i++) len[i] = (uint16_t)(side ? d->trg_len[i] : d->src_len[i]);
        put(o, len, (size_t)d->n * sizeof *len);
    }
    free(len);
    put_pad8(o);
    put(o, d->every64, ((size_t)d->n / 64 + 1) * sizeof *d->every64);
    put_vocab(o, &td->src_vocab, NULL);
    put_vocab(o, &td->trg_vocab, &td->src_vocab);
    put_dataset(o, &td->valid);
    put_dataset(o, &td->test);
    put_lines(o, td->valid_refs, td->valid.n);
    put_lines(o, td->test_refs, td->test.n);
    put_lines(o, td->train_src_text, td->train.n);
    put_lines(o, td->train_trg_text, td->train.n);
}

/* ---- writing: the training ids as they are encoded ---- */

typedef struct FileSink {
    FileTmp *tmp;
    TaskData *td;
    Dataset *d;        /* td->train, growing as a streamed split (its ids go to the file) */
    uLong crc;
    int cap, cap_text;
    bool keep_text;
    unsigned char *buf;
    size_t cap_buf;
} FileSink;

static S2sStatus file_pair(void *ctx, const int32_t *src, int ns, const int32_t *trg, int nt, const char *st,
                           const char *tt, S2sError *err) {
    FileSink *s = ctx;
    Dataset *d = s->d;
    if (d->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 1 << 16;
        d->src_len = s2s_xrealloc(d->src_len, (size_t)s->cap * sizeof *d->src_len);
        d->trg_len = s2s_xrealloc(d->trg_len, (size_t)s->cap * sizeof *d->trg_len);
        d->every64 = s2s_xrealloc(d->every64, ((size_t)s->cap / 64 + 1) * sizeof *d->every64);
    }
    if (s->keep_text) data_keep_text(s->td, d->n, &s->cap_text, st, tt);
    if (d->n % 64 == 0) d->every64[d->n / 64] = d->n_ids;
    d->src_len[d->n] = ns;
    d->trg_len[d->n] = nt;
    d->n++;
    size_t k = (size_t)(ns + nt) * (size_t)d->id_bytes;
    if (k > s->cap_buf) s->buf = s2s_xrealloc(s->buf, s->cap_buf = k);
    unsigned char *p = s->buf;
    for (int i = 0; i < ns + nt; i++) {
        uint32_t v = (uint32_t)(i < ns ? src[i] : trg[i - ns]);
        for (int b = 0; b < d->id_bytes; b++) *p++ = (unsigned char)(v >> 8 * b);
    }
    d->n_ids += (uint64_t)(ns + nt);
    s->crc = crc_more(s->crc, s->buf, k);
    if (fwrite(s->buf, 1, k, s->tmp->f) != k)
        return s2s_fail(err, S2S_ERR_IO, "%s: cannot write: %s", s->tmp->path, strerror(errno));
    return S2S_OK;
}

S2sStatus prepared_build(const char *path, TaskData *td, const ConfigTask *t, const Digest *key, const TaskLoadHooks *hooks,
                         S2sError *err) {
    S2sStatus st = corpus_vocab(td, t, hooks, err);
    if (st) return st;
    FileTmp tmp;
    if ((st = file_tmp_open_managed(&tmp, path, err))) return st;
    Dataset *d = &td->train;
    dataset_init(d);
    d->streamed = true;
    d->fd = -1;
    d->id_bytes = td->src_vocab.size <= 65536 && td->trg_vocab.size <= 65536 ? 2 : 4;
    d->ids_at = HEADER;
    d->vocab_src = td->src_vocab.size;
    d->vocab_trg = td->trg_vocab.size;
    FileSink sink = {&tmp, td, d, crc32(0L, Z_NULL, 0), 0, 0, t->bpe_dropout > 0, NULL, 0};
    unsigned char header[HEADER] = {0};
    if (fwrite(header, 1, HEADER, tmp.f) != HEADER)
        st = s2s_fail(err, S2S_ERR_IO, "%s: cannot write: %s", tmp.path, strerror(errno));
    CorpusSink cs = {&sink, file_pair};
    if (!st) st = corpus_encode(td, t, &cs, hooks, &td->train_counts, err);
    free(sink.buf);
    if (!st) st = parallel_load_eval(td, t, err);
    if (!st && fflush(tmp.f) != 0) st = s2s_fail(err, S2S_ERR_IO, "%s: cannot write: %s", tmp.path, strerror(errno));
    if (!st && (d->fd = open(tmp.tmp, O_RDONLY | O_CLOEXEC)) < 0) /* the file the run streams from, once renamed */
        st = s2s_fail(err, S2S_ERR_IO, "%s: cannot open: %s", tmp.tmp, strerror(errno));
    bool readable = true;
    if (!st) td->fingerprint = task_fingerprint(td, &readable), td->has_fingerprint = readable;
    if (!st && !readable) st = s2s_fail(err, S2S_ERR_IO, "%s: cannot read back what was written", tmp.tmp);
    if (st) {
        file_tmp_abort(&tmp);
        return st;
    }
    static const unsigned char zero[8] = {0};
    uint64_t ids_end = HEADER + d->n_ids * (uint64_t)d->id_bytes;
    size_t pad = (size_t)(-ids_end % 8); /* the index starts 8-aligned: its own alignments are the file's */
    Out o = {0};
    put_index(&o, td, &td->fingerprint);
    uint64_t index_at = ids_end + pad, payload = index_at + o.n - HEADER, n = (uint64_t)d->n, zero64 = 0;
    uint32_t crc = (uint32_t)crc_more(crc_more(sink.crc, zero, pad), o.b, o.n), id_bytes = (uint32_t)d->id_bytes;
    memcpy(header, MAGIC, 7);
    header[7] = (unsigned char)('0' + PREPARED_VERSION);
    uint64_t fields[6] = {payload, (uint64_t)crc | (uint64_t)id_bytes << 32, index_at, n, d->n_ids, zero64};
    memcpy(header + 8, key->b, DIGEST_BYTES);
    memcpy(header + FIELDS_AT, fields, sizeof fields);
    bool bad = fwrite(zero, 1, pad, tmp.f) != pad || fwrite(o.b, 1, o.n, tmp.f) != o.n || fseek(tmp.f, 0, SEEK_SET) != 0 || fwrite(header, 1, HEADER, tmp.f) != HEADER;
    free(o.b);
    S2sStatus st2 = file_tmp_commit(&tmp, bad, err);
    if (!st2 && !file_stamp(d->fd, &d->stamp)) /* as renamed (a rename moves the change time) */
        st2 = s2s_fail(err, S2S_ERR_IO, "%s: %s", path, strerror(errno));
    return st2;
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
        if (!bytes || (sk != SUBWORD_KIND_BPE && sk != SUBWORD_KIND_SENTENCEPIECE)) return false;
        if (subword_from_bytes(&m, (SubwordKind)sk, bytes, (size_t)len, path, err)) return false;
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

/* An in-memory split, copied out of the index, every id within its vocabulary. */
static bool get_dataset(In *in, Dataset *d, int V_src, int V_trg) {
    uint32_t n = get_u32(in);
    uint64_t n_ids = get_u64(in);
    if (in->bad || n > (in->n - in->at) / 8 || n_ids > (in->n - in->at) / 4) return in->bad = true, false;
    const unsigned char *sl = take(in, (size_t)n * 4), *tl = take(in, (size_t)n * 4), *ids = take(in, (size_t)n_ids * 4);
    if (!sl || !tl || !ids) return false;
    uint64_t at = 0;
    int32_t *buf = NULL;
    int cap = 0;
    dataset_init(d);
    for (uint32_t i = 0; i < n && !in->bad; i++) {
        int32_t ls, lt;
        memcpy(&ls, sl + 4 * i, 4);
        memcpy(&lt, tl + 4 * i, 4);
        if (ls < 0 || lt < 0 || (uint64_t)ls + (uint64_t)lt > n_ids - at) return in->bad = true, free(buf), false;
        if (ls + lt > cap) buf = s2s_xrealloc(buf, (size_t)(cap = ls + lt) * sizeof *buf);
        memcpy(buf, ids + 4 * at, (size_t)(ls + lt) * 4);
        for (int k = 0; k < ls + lt; k++)
            if (buf[k] < 0 || buf[k] >= (k < ls ? V_src : V_trg)) in->bad = true;
        dataset_add(d, buf, ls, buf + ls, lt);
        at += (uint64_t)ls + (uint64_t)lt;
    }
    free(buf);
    if (at != n_ids) in->bad = true;
    return !in->bad;
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

static bool get_counts(In *in, CorpusCounts *c) {
    c->read = (long)get_u64(in);
    c->kept = (long)get_u64(in);
    for (int i = 0; i < DROP_REASONS; i++) c->dropped[i] = (long)get_u64(in);
    for (int i = 0; i < DROP_REASONS; i++) c->first[i] = (long)get_u64(in);
    for (int i = 0; i < DROP_REASONS; i++) c->first_corpus[i] = (int)(get_u32(in) % TASK_MAX_CORPORA);
    long kept = 0;
    for (int i = 0; i < TASK_MAX_CORPORA; i++) {
        c->kept_by[i] = (long)(get_u64(in) & 0x7fffffff);
        kept += c->kept_by[i];
    }
    return !in->bad && kept == c->kept;
}

/* The training split's lengths and every-64th-pair counts, checked against each other and the
 * ids the header announces. */
static bool get_lengths(In *in, Dataset *d, uint64_t n, uint64_t n_ids) {
    if (n == 0 || n > 2000000000 || n > (in->n - in->at) / 4) return in->bad = true, false;
    const unsigned char *ls = take(in, (size_t)n * 2), *lt = take(in, (size_t)n * 2);
    skip_pad8(in);
    const unsigned char *e64 = take(in, ((size_t)n / 64 + 1) * 8);
    if (!ls || !lt || !e64) return false;
    d->n = (int)n;
    d->n_ids = n_ids;
    d->src_len = s2s_xmalloc((size_t)n * sizeof *d->src_len);
    d->trg_len = s2s_xmalloc((size_t)n * sizeof *d->trg_len);
    d->every64 = s2s_xmalloc(((size_t)n / 64 + 1) * sizeof *d->every64);
    memcpy(d->every64, e64, ((size_t)n / 64 + 1) * 8);
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        d->src_len[i] = ls[2 * i] | ls[2 * i + 1] << 8;
        d->trg_len[i] = lt[2 * i] | lt[2 * i + 1] << 8;
        if (i % 64 == 0 && d->every64[i / 64] != at) return in->bad = true, false;
        if (d->src_len[i] < 1 || d->trg_len[i] < 2) return in->bad = true, false;
        at += (uint64_t)d->src_len[i] + (uint64_t)d->trg_len[i];
    }
    if (at != n_ids) in->bad = true;
    return !in->bad;
}

/* The header's fields, checked against this version, the key and the file's size. */
typedef struct Header {
    uint64_t payload, index_at, pairs, ids;
    uint32_t crc, id_bytes;
} Header;

static S2sStatus check_header(const unsigned char *b, size_t len, const Digest *key, const char *path, Header *h, S2sError *err) {
    if (len < HEADER || memcmp(b, MAGIC, 7) != 0)
        return s2s_fail(err, S2S_ERR_CORRUPT, "%s: not a prepared data file", path);
    if (b[7] != '0' + PREPARED_VERSION)
        return s2s_fail(err, S2S_ERR_CORRUPT, "%s: a prepared data file of version %c; this build reads version %d", path,
                        b[7], PREPARED_VERSION);
    uint64_t f[6];
    memcpy(f, b + FIELDS_AT, sizeof f);
    *h = (Header){f[0], f[2], f[3], f[4], (uint32_t)f[1], (uint32_t)(f[1] >> 32)};
    if (memcmp(b + 8, key->b, DIGEST_BYTES) != 0) {
        Digest got;
        memcpy(got.b, b + 8, DIGEST_BYTES);
        char hg[2 * DIGEST_BYTES + 1], hk[2 * DIGEST_BYTES + 1];
        digest_hex(&got, hg);
        digest_hex(key, hk);
        return s2s_fail(err, S2S_ERR_CORRUPT, "%s: prepared for other data or settings (key %.16s…, expected %.16s…)", path,
                        hg, hk);
    }
    if (h->payload != len - HEADER)
        return s2s_fail(err, S2S_ERR_CORRUPT, "%s: truncated or extended: %zu bytes after the header, the header says %" PRIu64,
                        path, len - HEADER, h->payload);
    if ((h->id_bytes != 2 && h->id_bytes != 4) || h->ids > (len - HEADER) / h->id_bytes ||
        h->index_at < HEADER + h->ids * h->id_bytes || h->index_at > len || h->index_at % 8)
        return s2s_fail(err, S2S_ERR_CORRUPT, "%s: a prepared data file whose header does not hold together", path);
    return S2S_OK;
}

/* The index (the file's bytes from index_at on) into td; the training split streams from fd. */
static bool parse_index(const unsigned char *b, size_t n, const Header *h, TaskData *td, const char *path, S2sError *err) {
    In in = {b, n, 0, false};
    const void *fp = take(&in, DIGEST_BYTES);
    if (fp) memcpy(td->fingerprint.b, fp, DIGEST_BYTES), td->has_fingerprint = true;
    bool ok = get_counts(&in, &td->train_counts) && (uint64_t)td->train_counts.kept == h->pairs &&
              get_lengths(&in, &td->train, h->pairs, h->ids);
    ok = ok && get_vocab(&in, &td->src_vocab, NULL, path, err) && get_vocab(&in, &td->trg_vocab, &td->src_vocab, path, err);
    ok = ok && get_dataset(&in, &td->valid, td->src_vocab.size, td->trg_vocab.size) &&
         get_dataset(&in, &td->test, td->src_vocab.size, td->trg_vocab.size);
    ok = ok && get_lines(&in, &td->valid_refs, td->valid.n) && get_lines(&in, &td->test_refs, td->test.n) &&
         get_lines(&in, &td->train_src_text, td->train.n) && get_lines(&in, &td->train_trg_text, td->train.n);
    return ok && !in.bad && in.at == in.n;
}

/* One pass over the payload: its CRC into *crc, and (d not NULL) every training id checked
 * within its vocabulary (false: one is not). *read_ok false: the file could not be read whole. */
static bool check_ids(int fd, const Header *h, const Dataset *d, size_t len, uint32_t *crc_out, bool *read_ok) {
    enum { STEP = 1 << 22 };
    unsigned char *buf = s2s_xmalloc(STEP);
    uLong crc = crc32(0L, Z_NULL, 0);
    uint64_t ids_end = HEADER + h->ids * h->id_bytes;
    int pair = 0, k = 0;
    bool ok = true;
    *read_ok = true;
    for (uint64_t at = HEADER; at < len;) {
        size_t want = len - at < STEP ? (size_t)(len - at) : STEP;
        if (pread(fd, buf, want, (off_t)at) != (ssize_t)want) { /* an error, or a file cut short since */
            *read_ok = false;
            break;
        }
        crc = crc_more(crc, buf, want);
        for (size_t i = 0; d && ok && at + i < ids_end && i < want; i += h->id_bytes) {
            uint32_t v = buf[i] | (uint32_t)buf[i + 1] << 8;
            if (h->id_bytes == 4) v |= (uint32_t)buf[i + 2] << 16 | (uint32_t)buf[i + 3] << 24;
            ok = v < (uint32_t)(k < d->src_len[pair] ? d->vocab_src : d->vocab_trg);
            if (++k == d->src_len[pair] + d->trg_len[pair]) pair++, k = 0;
        }
        at += want; /* HEADER and STEP are multiples of 4: no id straddles two steps */
    }
    free(buf);
    *crc_out = (uint32_t)crc;
    return ok;
}

/* A prepared file open as fd into td: the header, then the index read into memory, then one
 * pass over the ids; td's training split keeps fd (closed with it). */
static S2sStatus read_fd(int fd, const char *path, const Digest *key, TaskData *td, S2sError *err) {
    memset(td, 0, sizeof *td);
    struct stat sb;
    unsigned char hb[HEADER];
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return s2s_fail(err, S2S_ERR_CORRUPT, "%s: not a regular file", path);
    }
    size_t len = (size_t)sb.st_size;
    FileStamp before; /* the file as it is checked whole: it must be so after the check too */
    file_stamp(fd, &before);
    Header h = {0};
    S2sStatus st = len >= HEADER && pread(fd, hb, HEADER, 0) == HEADER ? check_header(hb, len, key, path, &h, err)
                                                                        : s2s_fail(err, S2S_ERR_CORRUPT, "%s: not a prepared data file", path);
    if (st) {
        close(fd);
        return st;
    }
    size_t n = len - (size_t)h.index_at;
    unsigned char *index = s2s_xmalloc(n ? n : 1);
    Dataset *d = &td->train;
    d->streamed = true;
    d->fd = fd;
    d->id_bytes = (int)h.id_bytes;
    d->ids_at = HEADER;
    bool parsed = pread(fd, index, n, (off_t)h.index_at) == (ssize_t)n && parse_index(index, n, &h, td, path, err);
    free(index);
    d->vocab_src = td->src_vocab.size;
    d->vocab_trg = td->trg_vocab.size;
    uint32_t crc;
    bool read_ok, ids_ok = check_ids(fd, &h, parsed ? d : NULL, len, &crc, &read_ok);
    read_ok = read_ok && file_stamp(fd, &d->stamp) && file_stamp_same_writes(&before, &d->stamp);
    if (read_ok && crc == h.crc && parsed && ids_ok) return S2S_OK;
    task_free(td); /* closes fd */
    if (!read_ok) return s2s_fail(err, S2S_ERR_CORRUPT, "%s: cannot be read whole", path);
    if (crc != h.crc) return s2s_fail(err, S2S_ERR_CORRUPT, "%s: damaged (CRC-32 %08x, the header says %08x)", path, crc, h.crc);
    return s2s_fail(err, S2S_ERR_CORRUPT, "%s: a prepared data file whose contents do not hold together (%s)", path,
                    parsed ? "an id past its vocabulary" : "its index");
}

S2sStatus prepared_read(const char *path, const Digest *key, TaskData *td, S2sError *err) {
    memset(td, 0, sizeof *td);
    int fd;
    if (file_open_regular(path, O_RDONLY | O_NOFOLLOW, &fd, err)) { /* a FIFO planted there never blocks */
        if (errno == ENOENT) return s2s_fail(err, S2S_ERR_IO, "%s: not prepared yet", path);
        return errno == EINVAL ? S2S_ERR_CORRUPT : S2S_ERR_IO; /* not a file: made anew */
    }
    return read_fd(fd, path, key, td, err);
}

S2sStatus prepared_parse(const void *buf, size_t len, const Digest *key, const char *path, TaskData *td, S2sError *err) {
    memset(td, 0, sizeof *td);
    FILE *f = tmpfile(); /* the reader streams from a descriptor */
    if (!f) return s2s_fail(err, S2S_ERR_IO, "a temporary file: %s", strerror(errno));
    int fd = dup(fileno(f));
    bool ok = fd >= 0 && fwrite(buf, 1, len, f) == len && fflush(f) == 0;
    fclose(f);
    if (!ok) {
        if (fd >= 0) close(fd);
        return s2s_fail(err, S2S_ERR_IO, "a temporary file: cannot write");
    }
    return read_fd(fd, path, key, td, err);
}
