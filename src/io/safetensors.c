/* safetensors.c — reading and writing safetensors files (the format: safetensors.h). */
#include "s2s/safetensors.h"
#include "s2s/bf16.h"
#include "s2s/file.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *const SAFE_DTYPE_NAMES[] = {"F32", "BF16", "F16"};
static const size_t DTYPE_BYTES[] = {4, 2, 2};

/* The dtypes of the format this reader does not take: named in the refusal. */
static const char *const OTHER_DTYPES[] = {"F64", "F8_E4M3", "F8_E5M2", "I64", "I32", "I16", "I8", "U64",
                                           "U32", "U16", "U8", "BOOL", "C64"};

static uint64_t read_u64le(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* A JSON number that is a whole number in [0, 2^53] (exact in a double), into *out. */
static bool whole(const cJSON *x, uint64_t *out) {
    if (!cJSON_IsNumber(x)) return false;
    double d = x->valuedouble;
    if (!(d >= 0 && d <= 9007199254740992.0) || d != floor(d)) return false;
    *out = (uint64_t)d;
    return true;
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int by_offset(const void *a, const void *b) {
    const SafeTensor *x = a, *y = b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* The first key that an object holds twice, or NULL (sorted: a hostile header with many keys
 * stays n log n). */
static const char *duplicate_key(const cJSON *obj) {
    int n = cJSON_GetArraySize(obj);
    if (n < 2) return NULL;
    const char **keys = s2s_xmalloc((size_t)n * sizeof *keys);
    int k = 0;
    for (const cJSON *c = obj->child; c; c = c->next) keys[k++] = c->string ? c->string : "";
    qsort(keys, (size_t)n, sizeof *keys, by_name);
    const char *dup = NULL;
    for (int i = 1; i < n && !dup; i++)
        if (!strcmp(keys[i], keys[i - 1])) dup = keys[i];
    free(keys);
    return dup;
}

/* One tensor's entry: dtype, shape, offsets within data_len. */
static S2sStatus parse_tensor(SafeTensor *t, const cJSON *e, uint64_t data_len, const char *o, S2sError *err) {
    const char *nm = e->string;
#define BAD(...) s2s_fail(err, S2S_ERR_CORRUPT, __VA_ARGS__)
    if (!cJSON_IsObject(e)) return BAD("%s: tensor \"%.80s\": not an object with dtype, shape and data_offsets", o, nm);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype"), *sh = cJSON_GetObjectItemCaseSensitive(e, "shape"),
                *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsString(dt)) return BAD("%s: tensor \"%.80s\": no \"dtype\" string", o, nm);
    int d = -1;
    for (int i = 0; i < 3; i++)
        if (!strcmp(dt->valuestring, SAFE_DTYPE_NAMES[i])) d = i;
    if (d < 0) {
        bool known = false;
        for (size_t i = 0; i < sizeof OTHER_DTYPES / sizeof *OTHER_DTYPES; i++) known |= !strcmp(dt->valuestring, OTHER_DTYPES[i]);
        return BAD("%s: tensor \"%.80s\": dtype \"%.20s\" %s; weights are F32, BF16 or F16", o, nm, dt->valuestring,
                   known ? "is not a weight type this reader takes" : "is not a safetensors dtype");
    }
    t->dtype = (SafeDtype)d;
    if (!cJSON_IsArray(sh)) return BAD("%s: tensor \"%.80s\": no \"shape\" array", o, nm);
    int nd = cJSON_GetArraySize(sh);
    if (nd > SAFETENSORS_MAX_DIMS) return BAD("%s: tensor \"%.80s\": %d dimensions; at most %d", o, nm, nd, SAFETENSORS_MAX_DIMS);
    t->ndim = nd;
    uint64_t numel = 1;
    int i = 0;
    for (const cJSON *x = sh->child; x; x = x->next, i++) {
        uint64_t v;
        if (!whole(x, &v) || v > (1ull << 40))
            return BAD("%s: tensor \"%.80s\": shape entry %d is not a size (a whole number up to 2^40)", o, nm, i);
        t->shape[i] = (int64_t)v;
        if (v && numel > (1ull << 50) / v) return BAD("%s: tensor \"%.80s\": shape of more than 2^50 elements", o, nm);
        numel *= v;
    }
    uint64_t b, en;
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 || !whole(off->child, &b) || !whole(off->child->next, &en))
        return BAD("%s: tensor \"%.80s\": \"data_offsets\" is not [begin, end] in bytes", o, nm);
    if (b > en || en > data_len)
        return BAD("%s: tensor \"%.80s\": data_offsets [%llu, %llu] outside the %llu bytes of data", o, nm,
                   (unsigned long long)b, (unsigned long long)en, (unsigned long long)data_len);
    if (en - b != numel * DTYPE_BYTES[d])
        return BAD("%s: tensor \"%.80s\": %llu bytes for %llu %s values (%llu bytes)", o, nm, (unsigned long long)(en - b),
                   (unsigned long long)numel, SAFE_DTYPE_NAMES[d], (unsigned long long)(numel * DTYPE_BYTES[d]));
#undef BAD
    t->name = nm;
    t->numel = (size_t)numel;
    t->offset = (size_t)b;
    return S2S_OK;
}

/* The header text (n bytes, not NUL-terminated) over data of data_len bytes (the tensors'
 * data pointers are set once the data are read). */
static S2sStatus parse_header(SafeTensors *s, const char *txt, size_t n, uint64_t data_len, const char *o, S2sError *err) {
    size_t lead = 0;
    while (lead < n && txt[lead] == ' ') lead++;
    if (lead == n || txt[lead] != '{') return s2s_fail(err, S2S_ERR_CORRUPT, "%s: the header is not a JSON object", o);
    const char *end = NULL;
    s->header = cJSON_ParseWithLengthOpts(txt, n, &end, false);
    if (!s->header || !cJSON_IsObject(s->header)) {
        size_t at = end && end >= txt && end <= txt + n ? (size_t)(end - txt) : 0;
        return s2s_fail(err, S2S_ERR_CORRUPT, "%s: the header is not valid JSON (at byte %zu of %zu)", o, at, n);
    }
    for (const char *p = end; p < txt + n; p++)
        if (*p != ' ' && *p != '\n' && *p != '\t' && *p != '\r' && *p != 0)
            return s2s_fail(err, S2S_ERR_CORRUPT, "%s: bytes after the header's JSON object (at byte %zu)", o,
                            (size_t)(p - txt));
    const char *dup = duplicate_key(s->header);
    if (dup) return s2s_fail(err, S2S_ERR_CORRUPT, "%s: \"%.80s\" appears twice in the header", o, dup);
    int count = 0;
    for (const cJSON *e = s->header->child; e; e = e->next) {
        if (strcmp(e->string, "__metadata__")) {
            count++;
            continue;
        }
        if (!cJSON_IsObject(e)) return s2s_fail(err, S2S_ERR_CORRUPT, "%s: \"__metadata__\" is not an object", o);
        if ((dup = duplicate_key(e)))
            return s2s_fail(err, S2S_ERR_CORRUPT, "%s: \"__metadata__\" holds \"%.80s\" twice", o, dup);
        for (const cJSON *m = e->child; m; m = m->next)
            if (!cJSON_IsString(m))
                return s2s_fail(err, S2S_ERR_CORRUPT, "%s: \"__metadata__\": \"%.80s\" is not a string", o, m->string);
        s->metadata = e;
    }
    s->tensors = s2s_xcalloc((size_t)(count ? count : 1), sizeof *s->tensors);
    for (const cJSON *e = s->header->child; e; e = e->next) {
        if (!strcmp(e->string, "__metadata__")) continue;
        S2sStatus st = parse_tensor(&s->tensors[s->n], e, data_len, o, err);
        if (st) return st;
        s->n++;
    }
    /* in offset order the tensors tile the data exactly: no overlap, no gap */
    SafeTensor *sorted = s2s_xmalloc((size_t)(count ? count : 1) * sizeof *sorted);
    memcpy(sorted, s->tensors, (size_t)count * sizeof *sorted);
    qsort(sorted, (size_t)count, sizeof *sorted, by_offset);
    size_t at = 0;
    const char *prev = NULL;
    S2sStatus st = S2S_OK;
    for (int i = 0; i < count && !st; i++) {
        const SafeTensor *t = &sorted[i];
        size_t bytes = t->numel * DTYPE_BYTES[t->dtype];
        if (t->offset < at)
            st = s2s_fail(err, S2S_ERR_CORRUPT, "%s: tensor \"%.80s\" (bytes %zu..%zu) overlaps \"%.80s\"", o, t->name,
                          t->offset, t->offset + bytes, prev);
        else if (t->offset > at)
            st = s2s_fail(err, S2S_ERR_CORRUPT, "%s: bytes %zu..%zu of the data belong to no tensor", o, at, t->offset);
        at = t->offset + bytes;
        prev = t->name;
    }
    if (!st && (uint64_t)at != data_len)
        st = s2s_fail(err, S2S_ERR_CORRUPT, "%s: the tensors cover %zu of the %llu bytes of data", o, at,
                      (unsigned long long)data_len);
    free(sorted);
    return st;
}

static S2sStatus check_lengths(uint64_t file_len, uint64_t n, const char *o, S2sError *err) {
    if (file_len < 8) return s2s_fail(err, S2S_ERR_CORRUPT, "%s: %llu bytes: too short for a safetensors file", o, (unsigned long long)file_len);
    if (n > SAFETENSORS_MAX_HEADER)
        return s2s_fail(err, S2S_ERR_CORRUPT, "%s: a header of %llu bytes; safetensors allows at most %u", o,
                        (unsigned long long)n, SAFETENSORS_MAX_HEADER);
    if (n > file_len - 8)
        return s2s_fail(err, S2S_ERR_CORRUPT, "%s: a header of %llu bytes in a file of %llu: not a safetensors file, or cut short",
                        o, (unsigned long long)n, (unsigned long long)file_len);
    return S2S_OK;
}

S2sStatus safetensors_from_memory(SafeTensors *s, const void *buf, size_t len, const char *o, S2sError *err) {
    memset(s, 0, sizeof *s);
    const unsigned char *p = buf;
    uint64_t n = len >= 8 ? read_u64le(p) : 0;
    S2sStatus st = check_lengths(len, n, o, err);
    if (st) return st;
    s->len = len - 8 - (size_t)n;
    st = parse_header(s, (const char *)p + 8, (size_t)n, s->len, o, err);
    if (!st) {
        s->buf = s2s_xmalloc(s->len ? s->len : 1);
        memcpy(s->buf, p + 8 + n, s->len);
        for (int i = 0; i < s->n; i++) s->tensors[i].data = s->buf + s->tensors[i].offset;
    }
    if (st) safetensors_free(s);
    return st;
}

static bool read_at(int fd, void *dst, size_t n, uint64_t off) {
    size_t got = 0;
    while (got < n) {
        ssize_t k = pread(fd, (char *)dst + got, n - got > (1u << 30) ? (1u << 30) : n - got, (off_t)(off + got));
        if (k <= 0) return false;
        got += (size_t)k;
    }
    return true;
}

S2sStatus safetensors_load(SafeTensors *s, const char *path, S2sError *err) {
    memset(s, 0, sizeof *s);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return s2s_fail(err, S2S_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return s2s_fail(err, S2S_ERR_IO, "%s: not a regular file", path);
    }
    uint64_t size = (uint64_t)sb.st_size, n = 0;
    unsigned char head[8];
    S2sStatus st = S2S_OK;
    if (size >= 8 && !read_at(fd, head, 8, 0)) st = s2s_fail(err, S2S_ERR_IO, "%s: cannot read", path);
    if (!st && size >= 8) n = read_u64le(head);
    if (!st) st = check_lengths(size, n, path, err);
    size_t limit = s2s_memory_limit();
    if (!st && limit && size > limit)
        st = s2s_fail(err, S2S_ERR_CORRUPT, "%s: %llu bytes, more than this machine can hold (%.1f GB)", path,
                      (unsigned long long)size, (double)limit / 1e9);
    char *txt = NULL;
    if (!st) { /* the header first: nothing of the data's size is allocated before it is checked */
        txt = s2s_xmalloc((size_t)n + 1);
        if (!read_at(fd, txt, (size_t)n, 8)) st = s2s_fail(err, S2S_ERR_IO, "%s: cannot read the header", path);
    }
    if (!st) {
        s->len = (size_t)(size - 8 - n);
        st = parse_header(s, txt, (size_t)n, s->len, path, err);
    }
    if (!st) { /* the header holds: now the data */
        s->buf = malloc(s->len ? s->len : 1);
        if (!s->buf) st = s2s_fail(err, S2S_ERR_NOMEM, "%s: out of memory reading %zu bytes", path, s->len);
        else if (!read_at(fd, s->buf, s->len, 8 + n)) st = s2s_fail(err, S2S_ERR_IO, "%s: cannot read the data", path);
        for (int i = 0; !st && i < s->n; i++) s->tensors[i].data = s->buf + s->tensors[i].offset;
    }
    free(txt);
    close(fd);
    if (st) safetensors_free(s);
    return st;
}

void safetensors_free(SafeTensors *s) {
    free(s->buf);
    cJSON_Delete(s->header);
    free(s->tensors);
    memset(s, 0, sizeof *s);
}

const SafeTensor *safetensors_find(const SafeTensors *s, const char *name) {
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->tensors[i].name, name)) return &s->tensors[i];
    return NULL;
}

const char *safetensors_meta(const SafeTensors *s, const char *key) {
    const cJSON *v = s->metadata ? cJSON_GetObjectItemCaseSensitive(s->metadata, key) : NULL;
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static float half_to_f32(uint16_t h) {
    int e = h >> 10 & 0x1f, m = h & 0x3ff;
    float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 0x400), e - 25);
    return h & 0x8000 ? -v : v;
}

float safetensors_value(const SafeTensor *t, size_t i) {
    const unsigned char *p = t->data + i * DTYPE_BYTES[t->dtype];
    switch (t->dtype) {
    case SAFETENSORS_F32: {
        uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    case SAFETENSORS_BF16: return bf16_to_f32((uint16_t)(p[0] | p[1] << 8));
    case SAFETENSORS_F16: return half_to_f32((uint16_t)(p[0] | p[1] << 8));
    }
    S2S_ASSERT_MSG(false, "dtype %d", (int)t->dtype);
    return 0;
}

S2sStatus safetensors_save(const char *path, const SafeSaveTensor *t, int n, const char *const *keys,
                           const char *const *values, int n_meta, SafeDtype dtype, S2sError *err) {
    S2S_ASSERT_MSG(dtype == SAFETENSORS_F32 || dtype == SAFETENSORS_BF16, "the writer takes F32 or BF16");
    cJSON *h = cJSON_CreateObject();
    if (n_meta > 0) {
        cJSON *m = cJSON_AddObjectToObject(h, "__metadata__");
        for (int i = 0; i < n_meta; i++) cJSON_AddStringToObject(m, keys[i], values[i]);
    }
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        size_t numel = 1;
        cJSON *e = cJSON_AddObjectToObject(h, t[i].name), *sh = cJSON_AddArrayToObject(e, "shape");
        cJSON_AddStringToObject(e, "dtype", SAFE_DTYPE_NAMES[dtype]);
        for (int d = 0; d < t[i].ndim; d++) {
            cJSON_AddItemToArray(sh, cJSON_CreateNumber(t[i].shape[d]));
            numel *= (size_t)t[i].shape[d];
        }
        double range[2] = {(double)off, (double)(off + numel * DTYPE_BYTES[dtype])};
        cJSON_AddItemToObject(e, "data_offsets", cJSON_CreateDoubleArray(range, 2));
        off += numel * DTYPE_BYTES[dtype];
    }
    char *txt = cJSON_PrintUnformatted(h);
    cJSON_Delete(h);
    size_t len = strlen(txt), padded = (len + 7) / 8 * 8;
    FileTmp f;
    S2sStatus st = file_tmp_open(&f, path, err);
    if (st) {
        free(txt);
        return st;
    }
    unsigned char n8[8];
    for (int i = 0; i < 8; i++) n8[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    bool bad = fwrite(n8, 1, 8, f.f) != 8 || fwrite(txt, 1, len, f.f) != len;
    for (size_t i = len; i < padded && !bad; i++) bad = fputc(' ', f.f) == EOF;
    free(txt);
    enum { CHUNK = 4096 };
    float x[CHUNK];
    uint16_t y[CHUNK];
    for (int i = 0; i < n && !bad; i++) {
        size_t numel = 1;
        for (int d = 0; d < t[i].ndim; d++) numel *= (size_t)t[i].shape[d];
        for (size_t k = 0; k < numel && !bad; k += CHUNK) {
            size_t c = numel - k < CHUNK ? numel - k : CHUNK;
            memcpy(x, (const char *)t[i].data + 4 * k, 4 * c); /* the hosts we build for are little-endian */
            if (dtype == SAFETENSORS_F32) {
                bad = fwrite(x, 4, c, f.f) != c;
            } else {
                bf16_from_f32(x, y, c);
                bad = fwrite(y, 2, c, f.f) != c;
            }
        }
    }
    return file_tmp_commit(&f, bad, err);
}

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *safetensors_b64_encode(const void *bytes, size_t n) {
    const unsigned char *p = bytes;
    char *out = s2s_xmalloc((n + 2) / 3 * 4 + 1), *o = out;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        *o++ = B64[v >> 18 & 63];
        *o++ = B64[v >> 12 & 63];
        *o++ = i + 1 < n ? B64[v >> 6 & 63] : '=';
        *o++ = i + 2 < n ? B64[v & 63] : '=';
    }
    *o = 0;
    return out;
}

unsigned char *safetensors_b64_decode(const char *txt, size_t *n) {
    size_t len = strlen(txt);
    if (len % 4) return NULL;
    unsigned char *out = s2s_xmalloc(len / 4 * 3 + 1);
    size_t k = 0;
    for (size_t i = 0; i < len; i += 4) {
        uint32_t v = 0;
        int pad = 0;
        for (int j = 0; j < 4; j++) {
            char c = txt[i + j];
            const char *at = c ? strchr(B64, c) : NULL;
            if (c == '=' && i + 4 == len && j >= 2 && (j == 3 || txt[i + 3] == '=')) {
                pad++;
                v <<= 6;
                continue;
            }
            if (!at || pad) {
                free(out);
                return NULL;
            }
            v = v << 6 | (uint32_t)(at - B64);
        }
        out[k++] = (unsigned char)(v >> 16);
        if (pad < 2) out[k++] = (unsigned char)(v >> 8);
        if (pad < 1) out[k++] = (unsigned char)v;
    }
    *n = k;
    return out;
}
