/* checkpoint.c — writing and checked reading of model files. */
#include "s2s/checkpoint.h"
#include "s2s/file.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define MAGIC "S2SMODEL"
#define MAX_SECTIONS 64
#define MAX_TENSORS 4096
#define MAX_VOCAB 50000000
#define MAX_TOKEN 4096
#define MAX_FILE ((size_t)1 << 36)

static bool little_endian(void) {
    const uint16_t one = 1;
    return *(const unsigned char *)&one == 1;
}

/* ---- writing: a growable buffer for the small sections, streamed floats for the rest ---- */
typedef struct Out {
    FILE *f;
    uLong crc;
    bool failed;
} Out;

static void put(Out *o, const void *p, size_t n) {
    if (o->failed || n == 0) return;
    if (fwrite(p, 1, n, o->f) != n) o->failed = true;
    const unsigned char *b = p;
    while (n) { /* zlib's crc32 takes uInt lengths */
        uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
        o->crc = crc32(o->crc, b, k);
        b += k;
        n -= k;
    }
}

static void put_u16(Out *o, uint16_t v) { put(o, (unsigned char[]){v & 255, v >> 8}, 2); }
static void put_u32(Out *o, uint32_t v) {
    unsigned char b[4] = {v & 255, (v >> 8) & 255, (v >> 16) & 255, v >> 24};
    put(o, b, 4);
}
static void put_u64(Out *o, uint64_t v) {
    put_u32(o, (uint32_t)v);
    put_u32(o, (uint32_t)(v >> 32));
}
static void section(Out *o, const char tag[4], uint64_t len) {
    put(o, tag, 4);
    put_u64(o, len);
}

static uint64_t vocab_bytes(const char *const *t, int n) {
    uint64_t b = 4;
    for (int i = 0; i < n; i++) b += 4 + strlen(t[i]);
    return b;
}

static void put_vocab(Out *o, const char tag[4], const char *const *t, int n) {
    section(o, tag, vocab_bytes(t, n));
    put_u32(o, (uint32_t)n);
    for (int i = 0; i < n; i++) {
        put_u32(o, (uint32_t)strlen(t[i]));
        put(o, t[i], strlen(t[i]));
    }
}

static void put_floats(Out *o, const char tag[4], const ParamStore *ps, const float *block) {
    uint64_t total = 0;
    for (int i = 0; i < ps->count; i++) total += ps->items[i].t->size * 4;
    section(o, tag, total);
    for (int i = 0; i < ps->count; i++) put(o, block + ps->items[i].offset, ps->items[i].t->size * 4);
}

static S2sStatus open_tmp(Out *o, FileTmp *t, const char *path, S2sError *err) {
    S2sStatus st = file_tmp_open(t, path, err);
    o->f = t->f;
    o->crc = crc32(0L, Z_NULL, 0);
    o->failed = false;
    return st;
}

S2sStatus ckpt_save(const char *path, const CkptSave *s, S2sError *err) {
    S2S_ASSERT(little_endian());
    const ParamStore *ps = s->params;
    S2S_ASSERT(!s->with_moments || ps->m);
    S2S_ASSERT(!s->with_ema || ps->ema);
    Out o;
    FileTmp t;
    S2sStatus st = open_tmp(&o, &t, path, err);
    if (st) return st;
    put(&o, MAGIC, 8);
    put_u32(&o, CKPT_VERSION);
    put_u32(&o, 5u + (s->with_moments ? 2u : 0u) + (s->with_ema ? 1u : 0u) + (s->state_json ? 1u : 0u) +
                  (s->subword ? 1u : 0u) + (s->subword_trg ? 1u : 0u));
    section(&o, "CONF", strlen(s->config_json));
    put(&o, s->config_json, strlen(s->config_json));
    put_vocab(&o, "VSRC", s->src_tokens, s->n_src);
    put_vocab(&o, "VTRG", s->trg_tokens, s->n_trg);
    uint64_t tb = 4;
    for (int i = 0; i < ps->count; i++) tb += 2 + strlen(ps->items[i].name) + 1 + 4u * (uint64_t)ps->items[i].t->ndim;
    section(&o, "TENS", tb);
    put_u32(&o, (uint32_t)ps->count);
    for (int i = 0; i < ps->count; i++) {
        const Param *p = &ps->items[i];
        put_u16(&o, (uint16_t)strlen(p->name));
        put(&o, p->name, strlen(p->name));
        put(&o, (unsigned char[]){(unsigned char)p->t->ndim}, 1);
        for (int d = 0; d < p->t->ndim; d++) put_u32(&o, (uint32_t)p->t->shape[d]);
    }
    put_floats(&o, "DATA", ps, ps->data);
    if (s->subword) {
        section(&o, "SUBW", s->subword_len);
        put(&o, s->subword, s->subword_len);
    }
    if (s->subword_trg) {
        S2S_ASSERT(s->subword);
        section(&o, "SUBT", s->subword_trg_len);
        put(&o, s->subword_trg, s->subword_trg_len);
    }
    if (s->with_moments) {
        put_floats(&o, "MOM1", ps, ps->m);
        put_floats(&o, "MOM2", ps, ps->v);
    }
    if (s->with_ema) put_floats(&o, "EMAW", ps, ps->ema);
    if (s->state_json) {
        section(&o, "STAT", strlen(s->state_json));
        put(&o, s->state_json, strlen(s->state_json));
    }
    uLong crc = o.crc;
    put_u32(&o, (uint32_t)crc);
    return file_tmp_commit(&t, o.failed, err);
}

/* ---- reading: a cursor that never passes the end ---- */
typedef struct In {
    const unsigned char *p, *end;
} In;

static bool take(In *in, void *dst, size_t n) {
    if ((size_t)(in->end - in->p) < n) return false;
    if (dst) memcpy(dst, in->p, n);
    in->p += n;
    return true;
}
static bool get_u32(In *in, uint32_t *v) {
    unsigned char b[4];
    if (!take(in, b, 4)) return false;
    *v = b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    return true;
}
static bool get_u16(In *in, uint16_t *v) {
    unsigned char b[2];
    if (!take(in, b, 2)) return false;
    *v = (uint16_t)(b[0] | b[1] << 8);
    return true;
}
static bool get_u64(In *in, uint64_t *v) {
    uint32_t lo, hi;
    if (!get_u32(in, &lo) || !get_u32(in, &hi)) return false;
    *v = lo | (uint64_t)hi << 32;
    return true;
}

static char *dup_text(const unsigned char *p, size_t n) {
    char *s = s2s_xmalloc(n + 1);
    memcpy(s, p, n);
    s[n] = '\0';
    return s;
}

static S2sStatus read_vocab(In sec, char ***out, int *n_out, const char *origin, const char *which, S2sError *err) {
    uint32_t n;
    if (!get_u32(&sec, &n)) return s2s_fail(err, S2S_ERR_CORRUPT, "%s: corrupt: %s vocabulary truncated", origin, which);
    if (n > MAX_VOCAB || (uint64_t)n * 4 > (uint64_t)(sec.end - sec.p))
        return s2s_fail(err, S2S_ERR_CORRUPT, "%s: corrupt: %s vocabulary claims %u entries in %zu bytes", origin, which, n,
                        (size_t)(sec.end - sec.p));
    char **t = s2s_xcalloc(n ? n : 1, sizeof *t);
    *out = t;
    *n_out = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t len;
        if (!get_u32(&sec, &len) || len > MAX_TOKEN || (size_t)(sec.end - sec.p) < len)
            return s2s_fail(err, S2S_ERR_CORRUPT, "%s: corrupt: %s vocabulary entry %u runs past its section", origin, which, i);
        if (memchr(sec.p, 0, len))
            return s2s_fail(err, S2S_ERR_CORRUPT, "%s: corrupt: %s vocabulary entry %u holds a NUL byte", origin, which, i);
        t[i] = dup_text(sec.p, len);
        sec.p += len;
        (*n_out)++;
    }
    return S2S_OK;
}

void ckpt_free(Checkpoint *c) {
    free(c->buf);
    free(c->config_json);
    free(c->state_json);
    free(c->subword);
    free(c->subword_trg);
    for (int i = 0; i < c->n_src; i++) free(c->src_tokens[i]);
    for (int i = 0; i < c->n_trg; i++) free(c->trg_tokens[i]);
    free(c->src_tokens);
    free(c->trg_tokens);
    free(c->tensors);
    memset(c, 0, sizeof *c);
}

/* The tensor table: names and shapes into t (when not NULL; n entries), the total of their
 * elements into *floats. Every count and dimension is bounded. */
static S2sStatus read_table(In tens, CkptTensor *t, uint32_t *n_out, uint64_t *floats, const char *origin, S2sError *err) {
    uint32_t n;
    if (!get_u32(&tens, &n) || n > MAX_TENSORS)
        return s2s_fail(err, S2S_ERR_CORRUPT, "%s: corrupt: bad tensor count", origin);
    *n_out = n;
    *floats = 0;
    for (uint32_t i = 0; i < n; i++) {
        char name[PARAM_NAME_MAX];
        uint16_t nl;
        unsigned char nd;
        if (!get_u16(&tens, &nl) || nl >= PARAM_NAME_MAX || !take(&tens, name, nl) || !take(&tens, &nd, 1) || nd < 1 ||
            nd > S2S_MAX_DIMS)
            return s2s_fail(err, S2S_ERR_CORRUPT, "%s: corrupt: tensor table entry %u is malformed", origin, i);
        name[nl] = '\0';
        uint64_t size = 1;
        int shape[S2S_MAX_DIMS];
        for (int d = 0; d < nd; d++) {
            uint32_t dim;
            if (!get_u32(&tens, &dim) || dim > (1u << 28))
                return s2s_fail(err, S2S_ERR_CORRUPT, "%s: corrupt: tensor \"%s\" has a bad shape", origin, name);
            shape[d] = (int)dim;
            size *= dim;
        }
        if (size > (1ull << 32))
            return s2s_fail(err, S2S_ERR_CORRUPT, "%s: corrupt: tensor \"%s\" is too large", origin, name);
        *floats += size;
        if (t) {
            memcpy(t[i].name, name, (size_t)nl + 1);
            t[i].ndim = nd;
            memcpy(t[i].shape, shape, sizeof shape);
            t[i].size = (size_t)size;
        }
    }
    return S2S_OK;
}

/* A float section must hold exactly the table's elements: no more, no less. */
static S2sStatus check_floats(const char *tag, uint64_t len, uint64_t floats, const char *origin, S2sError *err) {
    if (len != floats * 4)
        return s2s_fail(err, S2S_ERR_CORRUPT, "%s: corrupt: section %s has %llu bytes; the tensor table needs %llu", origin,
                        tag, (unsigned long long)len, (unsigned long long)floats * 4);
    return S2S_OK;
}

static S2sStatus parse(Checkpoint *c, const char *origin, S2sError *err) {
    In in = {c->buf, c->buf + c->len};
    char magic[8];
    if (!take(&in, magic, 8) || memcmp(magic, MAGIC, 8) != 0)
        return s2s_fail(err, S2S_ERR_CORRUPT, "%s: not an s2s model file (bad magic)", origin);
    uint32_t version, n_sec;
    if (!get_u32(&in, &version)) return s2s_fail(err, S2S_ERR_CORRUPT, "%s: corrupt: truncated header", origin);
    if (version != CKPT_VERSION)
        return s2s_fail(err, S2S_ERR_VERSION, "%s: model file format version %u; this build reads version %u", origin,
                        version, CKPT_VERSION);
    if (c->len < 8 + 4 + 4 + 4) return s2s_fail(err, S2S_ERR_CORRUPT, "%s: corrupt: truncated header", origin);
    uint32_t stored;
    In tail = {c->buf + c->len - 4, c->buf + c->len};
    get_u32(&tail, &stored);
    uLong crc = crc32(0L, Z_NULL, 0);
    for (size_t off = 0; off < c->len - 4;) {
        uInt k = (c->len - 4 - off) > (1u << 30) ? (1u << 30) : (uInt)(c->len - 4 - off);
        crc = crc32(crc, c->buf + off, k);
        off += k;
    }
    if ((uint32_t)crc != stored)
        return s2s_fail(err, S2S_ERR_CORRUPT, "%s: corrupt: checksum mismatch (truncated or damaged file)", origin);
    in.end = c->buf + c->len - 4;
    if (!get_u32(&in, &n_sec) || n_sec > MAX_SECTIONS)
        return s2s_fail(err, S2S_ERR_CORRUPT, "%s: corrupt: bad section count", origin);
    In data = {0}, mom[2] = {{0}, {0}}, tens = {0}, ema = {0};
    bool have_conf = false, have_src = false, have_trg = false;
    for (uint32_t s = 0; s < n_sec; s++) {
        char tag[5] = {0};
        uint64_t len;
        if (!take(&in, tag, 4) || !get_u64(&in, &len))
            return s2s_fail(err, S2S_ERR_CORRUPT, "%s: corrupt: section %u header truncated", origin, s);
        if (len > (uint64_t)(in.end - in.p))
            return s2s_fail(err, S2S_ERR_CORRUPT, "%s: corrupt: section %s needs %llu bytes, %zu remain", origin, tag,
                            (unsigned long long)len, (size_t)(in.end - in.p));
        In sec = {in.p, in.p + len};
        in.p += len;
        S2sStatus st = S2S_OK;
        if (!strcmp(tag, "CONF")) {
            free(c->config_json);
            c->config_json = dup_text(sec.p, (size_t)len);
            have_conf = true;
        } else if (!strcmp(tag, "STAT")) {
            free(c->state_json);
            c->state_json = dup_text(sec.p, (size_t)len);
        } else if (!strcmp(tag, "SUBW")) {
            free(c->subword);
            c->subword = dup_text(sec.p, (size_t)len);
            c->subword_len = (size_t)len;
        } else if (!strcmp(tag, "SUBT")) {
            free(c->subword_trg);
            c->subword_trg = dup_text(sec.p, (size_t)len);
            c->subword_trg_len = (size_t)len;
        } else if (!strcmp(tag, "VSRC") && !have_src) {
            st = read_vocab(sec, &c->src_tokens, &c->n_src, origin, "source", err);
            have_src = true;
        } else if (!strcmp(tag, "VTRG") && !have_trg) {
            st = read_vocab(sec, &c->trg_tokens, &c->n_trg, origin, "target", err);
            have_trg = true;
        } else if (!strcmp(tag, "TENS")) {
            tens = sec;
        } else if (!strcmp(tag, "DATA")) {
            data = sec;
        } else if (!strcmp(tag, "MOM1")) {
            mom[0] = sec;
        } else if (!strcmp(tag, "MOM2")) {
            mom[1] = sec;
        } else if (!strcmp(tag, "EMAW")) {
            ema = sec;
        } /* unknown sections are skipped: later minor additions stay readable */
        if (st) return st;
    }
    if (!have_conf || !have_src || !have_trg || !tens.p || !data.p)
        return s2s_fail(err, S2S_ERR_CORRUPT, "%s: corrupt: a required section is missing", origin);
    uint32_t n;
    uint64_t floats;
    S2sStatus st = read_table(tens, NULL, &n, &floats, origin, err);
    if (st) return st;
    c->tensors = s2s_xcalloc(n ? n : 1, sizeof *c->tensors);
    read_table(tens, c->tensors, &n, &floats, origin, err);
    c->has_moments = mom[0].p && mom[1].p;
    if ((st = check_floats("DATA", (uint64_t)(data.end - data.p), floats, origin, err))) return st;
    for (int k = 0; k < 2; k++)
        if (mom[k].p && (st = check_floats(k ? "MOM2" : "MOM1", (uint64_t)(mom[k].end - mom[k].p), floats, origin, err)))
            return st;
    c->has_ema = ema.p != NULL;
    if (ema.p && (st = check_floats("EMAW", (uint64_t)(ema.end - ema.p), floats, origin, err))) return st;
    uint64_t off = 0;
    for (uint32_t i = 0; i < n; i++) {
        CkptTensor *t = &c->tensors[i];
        t->data = data.p + off;
        if (c->has_moments) {
            t->m = mom[0].p + off;
            t->v = mom[1].p + off;
        }
        if (c->has_ema) t->ema = ema.p + off;
        off += (uint64_t)t->size * 4;
        c->n_tensors++;
    }
    return S2S_OK;
}

S2sStatus ckpt_from_memory(Checkpoint *c, const void *buf, size_t len, const char *origin, S2sError *err) {
    memset(c, 0, sizeof *c);
    c->buf = s2s_xmalloc(len ? len : 1);
    memcpy(c->buf, buf, len);
    c->len = len;
    S2sStatus st = parse(c, origin, err);
    if (st) ckpt_free(c);
    return st;
}

/* The structure of a file on disk before it is read whole: the header, the section headers
 * (which must end exactly at the checksum), and the float sections against the tensor table.
 * A damaged or crafted file of any size costs a few small reads, never an allocation or a
 * read of its size (a sparse 8 GiB file with a valid magic is refused here). */
static S2sStatus check_layout(int fd, uint64_t size, const char *path, S2sError *err) {
    unsigned char h[16];
    if (size < sizeof h + 4 || pread(fd, h, 8, 0) != 8 || memcmp(h, MAGIC, 8) != 0)
        return s2s_fail(err, S2S_ERR_CORRUPT, "%s: not an s2s model file (bad magic)", path);
    if (pread(fd, h, sizeof h, 0) != (ssize_t)sizeof h) return s2s_fail(err, S2S_ERR_IO, "%s: read error", path);
    In in = {h + 8, h + sizeof h};
    uint32_t version, n_sec;
    get_u32(&in, &version);
    get_u32(&in, &n_sec);
    if (version != CKPT_VERSION)
        return s2s_fail(err, S2S_ERR_VERSION, "%s: model file format version %u; this build reads version %u", path, version,
                        CKPT_VERSION);
    if (n_sec > MAX_SECTIONS) return s2s_fail(err, S2S_ERR_CORRUPT, "%s: corrupt: bad section count", path);
    uint64_t off = sizeof h, end = size - 4, lens[5] = {0, 0, 0, 0, 0}, tens_off = 0;
    bool seen[5] = {false, false, false, false, false};
    static const char *const FLOATS[5] = {"TENS", "DATA", "MOM1", "MOM2", "EMAW"};
    for (uint32_t s = 0; s < n_sec; s++) {
        unsigned char sh[12];
        if (end - off < sizeof sh || pread(fd, sh, sizeof sh, (off_t)off) != (ssize_t)sizeof sh)
            return s2s_fail(err, S2S_ERR_CORRUPT, "%s: corrupt: section %u header truncated", path, s);
        In x = {sh + 4, sh + sizeof sh};
        uint64_t len;
        get_u64(&x, &len);
        off += sizeof sh;
        if (len > end - off)
            return s2s_fail(err, S2S_ERR_CORRUPT, "%s: corrupt: section %.4s needs %llu bytes, %llu remain", path, (char *)sh,
                            (unsigned long long)len, (unsigned long long)(end - off));
        for (int k = 0; k < 5; k++)
            if (!seen[k] && memcmp(sh, FLOATS[k], 4) == 0) {
                seen[k] = true;
                lens[k] = len;
                if (k == 0) tens_off = off;
            }
        off += len;
    }
    if (off != end)
        return s2s_fail(err, S2S_ERR_CORRUPT, "%s: corrupt: the sections end at byte %llu of %llu (truncated or padded)", path,
                        (unsigned long long)off, (unsigned long long)size);
    if (!seen[0] || !seen[1]) return s2s_fail(err, S2S_ERR_CORRUPT, "%s: corrupt: a required section is missing", path);
    if (lens[0] > 4 + (uint64_t)MAX_TENSORS * (2 + PARAM_NAME_MAX + 1 + 4 * S2S_MAX_DIMS))
        return s2s_fail(err, S2S_ERR_CORRUPT, "%s: corrupt: the tensor table is too long", path);
    unsigned char *tb = malloc(lens[0] ? lens[0] : 1);
    if (!tb) return s2s_fail(err, S2S_ERR_NOMEM, "%s: out of memory", path);
    S2sStatus st = S2S_OK;
    if (pread(fd, tb, lens[0], (off_t)tens_off) != (ssize_t)lens[0]) st = s2s_fail(err, S2S_ERR_IO, "%s: read error", path);
    uint32_t n;
    uint64_t floats = 0;
    if (!st) st = read_table((In){tb, tb + lens[0]}, NULL, &n, &floats, path, err);
    free(tb);
    for (int k = 1; k < 5 && !st; k++)
        if (seen[k]) st = check_floats(FLOATS[k], lens[k], floats, path, err);
    return st;
}

S2sStatus ckpt_load(Checkpoint *c, const char *path, S2sError *err) {
    memset(c, 0, sizeof *c);
    int fd;
    S2sStatus st = file_open_regular(path, O_RDONLY, &fd, err); /* a FIFO where a model was never blocks */
    if (st) return st;
    st = ckpt_load_fd(c, fd, path, err);
    close(fd);
    return st;
}

S2sStatus ckpt_load_fd(Checkpoint *c, int fd, const char *path, S2sError *err) {
    memset(c, 0, sizeof *c);
    struct stat sb;
    S2sStatus st = S2S_OK;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) return s2s_fail(err, S2S_ERR_IO, "%s: not a regular file", path);
    uint64_t size = (uint64_t)sb.st_size;
    size_t limit = s2s_memory_limit();
    if ((limit && size > limit) || size > MAX_FILE)
        return s2s_fail(err, S2S_ERR_CORRUPT, "%s: %llu bytes, more than this machine can hold (%.1f GB)", path,
                        (unsigned long long)size, (double)limit / 1e9);
    if ((st = check_layout(fd, size, path, err))) return st;
    c->buf = malloc(size ? (size_t)size : 1);
    if (!c->buf) return s2s_fail(err, S2S_ERR_NOMEM, "%s: out of memory reading %llu bytes", path, (unsigned long long)size);
    size_t got = 0;
    while (got < size) {
        ssize_t k = pread(fd, c->buf + got, size - got > (1u << 30) ? (1u << 30) : size - got, (off_t)got);
        if (k <= 0) break;
        got += (size_t)k;
    }
    c->len = got;
    if (got != size) {
        ckpt_free(c);
        return s2s_fail(err, S2S_ERR_IO, "%s: read error", path);
    }
    st = parse(c, path, err);
    if (st) ckpt_free(c);
    return st;
}

/* A NaN or Inf in a file is never a model: it would decode as <unk> everywhere, silently. */
static S2sStatus all_finite(const float *x, size_t n, bool non_negative, const char *origin, const char *name,
                            const char *what, S2sError *err) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]) || (non_negative && x[i] < 0))
            return s2s_fail(err, S2S_ERR_CORRUPT, "%s: corrupt: the %s of \"%s\" hold %g at index %zu", origin, what, name,
                            (double)x[i], i);
    return S2S_OK;
}

S2sStatus ckpt_restore(const Checkpoint *c, ParamStore *ps, bool with_moments, const char *origin, S2sError *err) {
    if (with_moments && !c->has_moments)
        return s2s_fail(err, S2S_ERR_CORRUPT, "%s: has no optimizer state to resume from", origin);
    S2sStatus st;
    if (with_moments && (st = params_alloc_moments(ps, err))) return st;
    for (int i = 0; i < ps->count; i++) {
        const Param *p = &ps->items[i];
        const CkptTensor *t = NULL;
        for (int k = 0; k < c->n_tensors && !t; k++)
            if (!strcmp(c->tensors[k].name, p->name)) t = &c->tensors[k];
        if (!t) return s2s_fail(err, S2S_ERR_CORRUPT, "%s: tensor \"%s\" is missing", origin, p->name);
        bool same = t->ndim == p->t->ndim;
        for (int d = 0; same && d < t->ndim; d++) same = t->shape[d] == p->t->shape[d];
        if (!same)
            return s2s_fail(err, S2S_ERR_CORRUPT, "%s: tensor \"%s\" has another shape than its config implies", origin, p->name);
        memcpy(p->t->data, t->data, t->size * sizeof(float));
        if ((st = all_finite(p->t->data, t->size, false, origin, p->name, "weights", err))) return st;
        if (with_moments) {
            memcpy(ps->m + p->offset, t->m, t->size * sizeof(float));
            memcpy(ps->v + p->offset, t->v, t->size * sizeof(float));
            if ((st = all_finite(ps->m + p->offset, t->size, false, origin, p->name, "first Adam moments", err)) ||
                (st = all_finite(ps->v + p->offset, t->size, true, origin, p->name, "second Adam moments", err)))
                return st;
        }
    }
    if (c->n_tensors != ps->count)
        return s2s_fail(err, S2S_ERR_CORRUPT, "%s: has %d tensors, the model %d", origin, c->n_tensors, ps->count);
    return S2S_OK;
}

S2sStatus ckpt_restore_ema(const Checkpoint *c, ParamStore *ps, const char *origin, S2sError *err) {
    if (!c->has_ema)
        return s2s_fail(err, S2S_ERR_CORRUPT, "%s: has no moving average of the weights (train.ema_decay) to resume from",
                        origin);
    S2sStatus st = params_alloc_ema(ps, err);
    if (st) return st;
    for (int i = 0; i < ps->count; i++) { /* ckpt_restore matched every name and shape */
        const Param *p = &ps->items[i];
        for (int k = 0; k < c->n_tensors; k++)
            if (!strcmp(c->tensors[k].name, p->name)) {
                memcpy(ps->ema + p->offset, c->tensors[k].ema, c->tensors[k].size * sizeof(float));
                if ((st = all_finite(ps->ema + p->offset, c->tensors[k].size, false, origin, p->name, "moving average", err)))
                    return st;
                break;
            }
    }
    return S2S_OK;
}
