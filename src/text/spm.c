/* spm.c — SentencePiece .model files: a protobuf reader for the fields used, the normaliser
 * (a darts-clone double array of replacement rules), and the unigram segmentation of
 * SentencePiece 0.1.97 (its optimised encoder), so that the pieces equal spm_encode's. */
#include "s2s/spm.h"
#include "s2s/file.h"
#include "s2s/text.h"
#include "spm_internal.h"

#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPM_MAX_PIECES (1 << 22)
#define SPM_MAX_TRIE_RESULTS 32 /* SentencePiece keeps the first 32 prefix matches */
#define SPM_UNK_PENALTY 10.0f

/* ---- protobuf: bounded reading of varints, fixed32 and length-delimited fields ---- */

typedef struct Pb {
    const unsigned char *p, *end;
} Pb;

static bool pb_varint(Pb *b, uint64_t *v) {
    *v = 0;
    for (int shift = 0; shift < 64 && b->p < b->end; shift += 7) {
        unsigned char c = *b->p++;
        *v |= (uint64_t)(c & 0x7F) << shift;
        if (!(c & 0x80)) return true;
    }
    return false;
}

/* The next field: its number and wire type, and its payload (varint value or bytes). */
typedef struct PbField {
    uint32_t num;
    int wire;
    uint64_t v;
    Pb bytes;
} PbField;

static bool pb_next(Pb *b, PbField *f) {
    uint64_t key;
    if (!pb_varint(b, &key)) return false;
    f->num = (uint32_t)(key >> 3);
    f->wire = (int)(key & 7);
    switch (f->wire) {
    case 0: return pb_varint(b, &f->v);
    case 1:
        if (b->end - b->p < 8) return false;
        b->p += 8;
        return true;
    case 5:
        if (b->end - b->p < 4) return false;
        memcpy(&f->v, b->p, 4); /* little-endian fixed32, in the low half */
        f->v &= 0xFFFFFFFFu;
        b->p += 4;
        return true;
    case 2: {
        uint64_t n;
        if (!pb_varint(b, &n) || n > (uint64_t)(b->end - b->p)) return false;
        f->bytes = (Pb){b->p, b->p + n};
        b->p += n;
        return true;
    }
    default: return false;
    }
}

static char *pb_string(const PbField *f) {
    size_t n = (size_t)(f->bytes.end - f->bytes.p);
    char *s = s2s_xmalloc(n + 1);
    memcpy(s, f->bytes.p, n);
    s[n] = '\0';
    return s;
}

/* ---- piece lookup ---- */

typedef struct PieceLookup {
    const Spm *s;
    const char *t;
    size_t n;
} PieceLookup;

static bool same_piece(const void *ctx, int32_t id) {
    const PieceLookup *l = ctx;
    const char *p = l->s->piece[id];
    return strlen(p) == l->n && !memcmp(p, l->t, l->n);
}

int32_t spm_find_piece(const Spm *s, const char *t, size_t n) {
    if (!s->index.cap) return -1;
    return hash_index_find(&s->index, hash_fnv(HASH_FNV_BASIS, t, n), same_piece, &(PieceLookup){s, t, n});
}

static void index_pieces(Spm *s) {
    hash_index_init(&s->index, (size_t)s->n);
    for (int id = 0; id < s->n; id++) {
        if (s->type[id] != SPM_NORMAL && s->type[id] != SPM_UNUSED && s->type[id] != SPM_USER) continue;
        size_t len = strlen(s->piece[id]);
        if ((int)len > s->max_piece_bytes) s->max_piece_bytes = (int)len;
        hash_index_add(&s->index, hash_fnv(HASH_FNV_BASIS, s->piece[id], len), id);
    }
}

/* ---- reading ---- */

static S2sStatus read_normalizer(Spm *s, Pb b, const char *origin, S2sError *err) {
    PbField f;
    while (b.p < b.end) {
        if (!pb_next(&b, &f)) return s2s_fail(err, S2S_ERR_CORRUPT, "%s: corrupt normalizer_spec", origin);
        if (f.num == 2 && f.wire == 2) { /* precompiled_charsmap: u32 trie bytes, the trie, the strings */
            size_t n = (size_t)(f.bytes.end - f.bytes.p);
            if (n == 0) continue;
            uint32_t tb;
            if (n <= 4) return s2s_fail(err, S2S_ERR_CORRUPT, "%s: corrupt normalisation rules (%zu bytes)", origin, n);
            memcpy(&tb, f.bytes.p, 4);
            if (tb >= n - 4 || tb % 4 || tb == 0)
                return s2s_fail(err, S2S_ERR_CORRUPT, "%s: corrupt normalisation rules (a trie of %u bytes in %zu)", origin, tb, n);
            s->n_units = tb / 4;
            s->trie = s2s_xmalloc(tb);
            memcpy(s->trie, f.bytes.p + 4, tb);
            s->norm_len = n - 4 - tb;
            s->norm = s2s_xmalloc(s->norm_len + 1);
            memcpy(s->norm, f.bytes.p + 4 + tb, s->norm_len);
            s->norm[s->norm_len] = '\0';
        } else if (f.num == 3 && f.wire == 0) {
            s->add_dummy_prefix = f.v != 0;
        } else if (f.num == 4 && f.wire == 0) {
            s->remove_extra_whitespaces = f.v != 0;
        } else if (f.num == 5 && f.wire == 0) {
            s->escape_whitespaces = f.v != 0;
        }
    }
    return S2S_OK;
}

static S2sStatus read_piece(Spm *s, Pb b, const char *origin, S2sError *err) {
    if (s->n == SPM_MAX_PIECES) return s2s_fail(err, S2S_ERR_CORRUPT, "%s: more than %d pieces", origin, SPM_MAX_PIECES);
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 1024;
        s->piece = s2s_xrealloc(s->piece, (size_t)s->cap * sizeof *s->piece);
        s->score = s2s_xrealloc(s->score, (size_t)s->cap * sizeof *s->score);
        s->type = s2s_xrealloc(s->type, (size_t)s->cap * sizeof *s->type);
    }
    char *text = NULL;
    float score = 0;
    int type = SPM_NORMAL;
    PbField f;
    while (b.p < b.end) {
        if (!pb_next(&b, &f)) {
            free(text);
            return s2s_fail(err, S2S_ERR_CORRUPT, "%s: corrupt piece %d", origin, s->n);
        }
        if (f.num == 1 && f.wire == 2) {
            free(text);
            text = pb_string(&f);
        } else if (f.num == 2 && f.wire == 5) {
            uint32_t u = (uint32_t)f.v;
            memcpy(&score, &u, 4);
        } else if (f.num == 3 && f.wire == 0) {
            type = (int)f.v;
        }
    }
    if (!text || !*text || !utf8_valid(text, strlen(text)) || type < SPM_NORMAL || type > SPM_BYTE) {
        free(text);
        return s2s_fail(err, S2S_ERR_CORRUPT, "%s: piece %d is empty, not UTF-8 or of an unknown type", origin, s->n);
    }
    s->piece[s->n] = text;
    s->score[s->n] = score;
    s->type[s->n] = (uint8_t)type;
    s->n++;
    return S2S_OK;
}

S2sStatus spm_parse(Spm *s, const void *data, size_t len, const char *origin, S2sError *err) {
    memset(s, 0, sizeof *s);
    s->model_type = 1;
    s->add_dummy_prefix = s->remove_extra_whitespaces = s->escape_whitespaces = true; /* proto2 defaults */
    s->unk_id = -1;
    Pb b = {data, (const unsigned char *)data + len};
    PbField f;
    S2sStatus st = S2S_OK;
    while (b.p < b.end && !st) {
        if (!pb_next(&b, &f)) {
            st = s2s_fail(err, S2S_ERR_CORRUPT, "%s: not a SentencePiece model (bad protobuf)", origin);
            break;
        }
        if (f.num == 1 && f.wire == 2) st = read_piece(s, f.bytes, origin, err);
        else if (f.num == 2 && f.wire == 2) { /* trainer_spec */
            Pb t = f.bytes;
            PbField g;
            while (t.p < t.end && !st) {
                if (!pb_next(&t, &g)) st = s2s_fail(err, S2S_ERR_CORRUPT, "%s: corrupt trainer_spec", origin);
                else if (g.num == 3 && g.wire == 0) s->model_type = (int)g.v;
                else if (g.num == 35 && g.wire == 0) s->byte_fallback = g.v != 0;
                else if (g.num == 44 && g.wire == 2) {
                    free(s->unk_surface);
                    s->unk_surface = pb_string(&g);
                }
            }
        } else if (f.num == 3 && f.wire == 2) st = read_normalizer(s, f.bytes, origin, err);
    }
    if (!st && s->n == 0) st = s2s_fail(err, S2S_ERR_CORRUPT, "%s: not a SentencePiece model (no pieces)", origin);
    if (!st && s->model_type != 1 && s->model_type != 2)
        st = s2s_fail(err, S2S_ERR_DATA, "%s: a SentencePiece model of type %s: only unigram and bpe models are read", origin,
                      s->model_type == 3 ? "word" : "char");
    s->min_score = FLT_MAX;
    s->max_score = FLT_MIN;
    for (int i = 0; !st && i < s->n; i++) {
        if (s->type[i] == SPM_UNKNOWN) {
            if (s->unk_id >= 0) st = s2s_fail(err, S2S_ERR_CORRUPT, "%s: two unknown pieces", origin);
            s->unk_id = i;
        }
        if (s->type[i] == SPM_USER)
            st = s2s_fail(err, S2S_ERR_DATA, "%s: user-defined symbols (\"%s\") are not read so far", origin, s->piece[i]);
        if (s->type[i] == SPM_NORMAL) {
            if (s->score[i] < s->min_score) s->min_score = s->score[i];
            if (s->score[i] > s->max_score) s->max_score = s->score[i];
        }
    }
    if (!st && s->unk_id < 0) st = s2s_fail(err, S2S_ERR_CORRUPT, "%s: no unknown piece", origin);
    if (!st && !s->unk_surface) {
        const char def[] = " \xe2\x81\x87 ";
        s->unk_surface = s2s_xmalloc(sizeof def);
        memcpy(s->unk_surface, def, sizeof def);
    }
    if (!st) {
        index_pieces(s);
        for (int i = 0; i < 256; i++) s->byte_id[i] = -1;
        for (int i = 0; i < s->n; i++) {
            unsigned v;
            char tail;
            if (s->type[i] == SPM_BYTE && sscanf(s->piece[i], "<0x%2X>%c", &v, &tail) == 1 && v < 256) s->byte_id[v] = i;
        }
        s->raw = s2s_xmalloc(len ? len : 1);
        memcpy(s->raw, data, len);
        s->raw_len = len;
    }
    if (st) spm_free(s);
    return st;
}

S2sStatus spm_load(Spm *s, const char *path, S2sError *err) {
    char *buf;
    size_t len;
    memset(s, 0, sizeof *s);
    S2sStatus st = file_read_all(path, (size_t)1 << 30, &buf, &len, err);
    if (st) return st;
    st = spm_parse(s, buf, len, path, err);
    free(buf);
    return st;
}

void spm_free(Spm *s) {
    for (int i = 0; i < s->n; i++) free(s->piece[i]);
    free(s->piece);
    free(s->score);
    free(s->type);
    free(s->trie);
    free(s->norm);
    hash_index_free(&s->index);
    free(s->unk_surface);
    free(s->raw);
    memset(s, 0, sizeof *s);
}

/* ---- normalisation ---- */

/* darts-clone's unit fields */
static bool unit_has_leaf(uint32_t u) { return (u >> 8) & 1; }
static uint32_t unit_value(uint32_t u) { return u & ((1u << 31) - 1); }
static uint32_t unit_label(uint32_t u) { return u & ((1u << 31) | 0xFF); }
static uint32_t unit_offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }

/* The longest rule matching a prefix of in (among the first 32 matches, as SentencePiece
 * keeps): its replacement (into the strings) and length, or 0. */
static size_t longest_rule(const Spm *s, const char *in, size_t n, const char **rep) {
    if (!s->trie) return 0;
    size_t pos = 0, best = 0;
    int found = 0;
    uint32_t unit = s->trie[0];
    pos ^= unit_offset(unit);
    for (size_t i = 0; i < n; i++) {
        pos ^= (unsigned char)in[i];
        if (pos >= s->n_units) return best;
        unit = s->trie[pos];
        if (unit_label(unit) != (unsigned char)in[i]) return best;
        pos ^= unit_offset(unit);
        if (pos >= s->n_units) return best;
        if (unit_has_leaf(unit)) {
            if (found++ < SPM_MAX_TRIE_RESULTS) {
                uint32_t v = unit_value(s->trie[pos]);
                if (v < s->norm_len) {
                    best = i + 1;
                    *rep = s->norm + v;
                }
            }
        }
    }
    return best;
}

void spm_buf_put(SpmBuf *b, const char *p, size_t n) {
    if (b->n + n + 1 > b->cap) {
        b->cap = 2 * (b->n + n + 1);
        b->s = s2s_xrealloc(b->s, b->cap);
    }
    memcpy(b->s + b->n, p, n);
    b->n += n;
    b->s[b->n] = '\0';
}

/* NormalizePrefix: the replacement of the longest rule, or one character as it is (a byte that
 * starts no valid character gives U+FFFD and is consumed alone) */
static size_t normalize_prefix(const Spm *s, const char *in, size_t n, const char **out, size_t *out_n) {
    const char *rep = NULL;
    size_t k = longest_rule(s, in, n, &rep);
    if (k) {
        *out = rep;
        *out_n = strlen(rep);
        return k;
    }
    unsigned char c = (unsigned char)in[0];
    size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (!len || len > n || !utf8_valid(in, len)) {
        *out = "\xEF\xBF\xBD";
        *out_n = 3;
        return 1;
    }
    *out = in;
    *out_n = len;
    return len;
}

char *spm_normalize(const Spm *s, const char *line) {
    SpmBuf b = {0};
    spm_buf_put(&b, "", 0);
    size_t n = strlen(line);
    const char *in = line, *rep;
    size_t rn;
    if (s->remove_extra_whitespaces)
        while (n) {
            size_t k = normalize_prefix(s, in, n, &rep, &rn);
            if (!(rn == 1 && rep[0] == ' ')) break;
            in += k;
            n -= k;
        }
    if (!n) return b.s;
    const char *ws = s->escape_whitespaces ? "\xe2\x96\x81" : " ";
    size_t wsn = strlen(ws);
    if (s->add_dummy_prefix) spm_buf_put(&b, ws, wsn);
    bool prev_space = s->remove_extra_whitespaces;
    while (n) {
        size_t k = normalize_prefix(s, in, n, &rep, &rn);
        while (prev_space && rn && rep[0] == ' ') {
            rep++;
            rn--;
        }
        if (rn) {
            for (size_t i = 0; i < rn; i++) {
                if (s->escape_whitespaces && rep[i] == ' ') spm_buf_put(&b, ws, wsn);
                else spm_buf_put(&b, rep + i, 1);
            }
            prev_space = rep[rn - 1] == ' ';
        }
        in += k;
        n -= k;
        if (!s->remove_extra_whitespaces) prev_space = false;
    }
    if (s->remove_extra_whitespaces)
        while (b.n >= wsn && !memcmp(b.s + b.n - wsn, ws, wsn)) b.s[b.n -= wsn] = '\0';
    return b.s;
}

/* ---- unigram segmentation ---- */

typedef struct Best {
    int id;
    float score;
    int start;
} Best;

static int one_char_len(unsigned char c) {
    static const int LEN[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return LEN[c >> 4];
}

/* Pieces of the normalised text: starts[k] and ids[k] (unknown: unk_id), np of them. */
typedef struct Seg {
    int *starts, *ids;
    int n, cap;
} Seg;

static void seg_push(Seg *g, int start, int id) {
    if (g->n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 64;
        g->starts = s2s_xrealloc(g->starts, (size_t)g->cap * sizeof *g->starts);
        g->ids = s2s_xrealloc(g->ids, (size_t)g->cap * sizeof *g->ids);
    }
    g->starts[g->n] = start;
    g->ids[g->n++] = id;
}

static void unigram(const Spm *s, const char *norm, int size, Seg *g) {
    Best *best = s2s_xmalloc((size_t)(size + 1) * sizeof *best);
    for (int i = 0; i <= size; i++) best[i] = (Best){-1, 0.0f, -1};
    const float unk_score = s->min_score - SPM_UNK_PENALTY;
    for (int start = 0; start < size;) {
        float here = best[start].score;
        int mblen = one_char_len((unsigned char)norm[start]);
        if (mblen > size - start) mblen = size - start;
        bool single = false;
        for (int end = start + 1; end <= size && end - start <= s->max_piece_bytes; end++) {
            int id = spm_find_piece(s, norm + start, (size_t)(end - start));
            if (id < 0 || s->type[id] == SPM_UNUSED) continue;
            float cand = s->score[id] + here;
            Best *t = &best[end];
            if (t->start == -1 || cand > t->score) *t = (Best){id, cand, start};
            if (end - start == mblen) single = true;
        }
        if (!single) {
            float cand = unk_score + here;
            Best *t = &best[start + mblen];
            if (t->start == -1 || cand > t->score) *t = (Best){s->unk_id, cand, start};
        }
        start += mblen;
    }
    int np = 0;
    for (int end = size; end > 0; end = best[end].start) np++;
    g->n = 0;
    for (int k = 0; k < np; k++) seg_push(g, 0, 0);
    int k = np;
    for (int end = size; end > 0; end = best[end].start) {
        k--;
        g->starts[k] = best[end].start;
        g->ids[k] = best[end].id;
    }
    free(best);
}

/* SentencePiece's BPE: characters merged pair by pair, the pair whose joined piece scores
 * highest first (the leftmost among equals); pieces marked unused split back afterwards */
typedef struct Pair {
    float score;
    int left, right, size;
} Pair;

static bool pair_before(const Pair *a, const Pair *b) { return a->score != b->score ? a->score > b->score : a->left < b->left; }

typedef struct PairHeap {
    Pair *h;
    size_t n, cap;
} PairHeap;

static void pair_push(PairHeap *q, Pair p) {
    if (q->n == q->cap) {
        q->cap = q->cap ? 2 * q->cap : 64;
        q->h = s2s_xrealloc(q->h, q->cap * sizeof *q->h);
    }
    size_t i = q->n++;
    while (i && pair_before(&p, &q->h[(i - 1) / 2])) {
        q->h[i] = q->h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    q->h[i] = p;
}

static Pair pair_pop(PairHeap *q) {
    Pair top = q->h[0], last = q->h[--q->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= q->n) break;
        if (c + 1 < q->n && pair_before(&q->h[c + 1], &q->h[c])) c++;
        if (!pair_before(&q->h[c], &last)) break;
        q->h[i] = q->h[c];
        i = c;
    }
    if (q->n) q->h[i] = last;
    return top;
}

typedef struct Sym {
    int start, len, prev, next;
} Sym;

static void maybe_pair(const Spm *s, const char *norm, const Sym *sy, int l, int r, PairHeap *q) {
    if (l < 0 || r < 0) return;
    int len = sy[l].len + sy[r].len;
    if (len > s->max_piece_bytes) return;
    int id = spm_find_piece(s, norm + sy[l].start, (size_t)len);
    if (id >= 0) pair_push(q, (Pair){s->score[id], l, r, len});
}

/* an unused piece back into the two it was merged from (found again: the pair that spells it
 * with the best score at its leftmost split, as SentencePiece remembered it) */
static void resegment(const Spm *s, const char *norm, int start, int len, Seg *g) {
    int id = spm_find_piece(s, norm + start, (size_t)len);
    if (id < 0 || s->type[id] != SPM_UNUSED) {
        seg_push(g, start, id < 0 ? s->unk_id : id);
        return;
    }
    for (int k = 1; k < len; k++) { /* the split whose halves are pieces */
        if (spm_find_piece(s, norm + start, (size_t)k) >= 0 && spm_find_piece(s, norm + start + k, (size_t)(len - k)) >= 0) {
            resegment(s, norm, start, k, g);
            resegment(s, norm, start + k, len - k, g);
            return;
        }
    }
    seg_push(g, start, id);
}

static void bpe(const Spm *s, const char *norm, int size, Seg *g) {
    Sym *sy = s2s_xmalloc((size_t)(size ? size : 1) * sizeof *sy);
    int n = 0;
    for (int i = 0; i < size;) {
        int k = one_char_len((unsigned char)norm[i]);
        if (k > size - i) k = size - i;
        sy[n] = (Sym){i, k, n - 1, i + k < size ? n + 1 : -1};
        n++;
        i += k;
    }
    PairHeap q = {0};
    for (int i = 1; i < n; i++) maybe_pair(s, norm, sy, i - 1, i, &q);
    while (q.n) {
        Pair t = pair_pop(&q);
        if (!sy[t.left].len || !sy[t.right].len || sy[t.left].len + sy[t.right].len != t.size) continue; /* stale */
        sy[t.left].len += sy[t.right].len;
        sy[t.left].next = sy[t.right].next;
        if (sy[t.right].next >= 0) sy[sy[t.right].next].prev = t.left;
        sy[t.right].len = 0;
        maybe_pair(s, norm, sy, sy[t.left].prev, t.left, &q);
        maybe_pair(s, norm, sy, t.left, sy[t.left].next, &q);
    }
    g->n = 0;
    for (int i = n ? 0 : -1; i >= 0; i = sy[i].next) resegment(s, norm, sy[i].start, sy[i].len, g);
    free(q.h);
    free(sy);
}

/* The output pieces of a line, as spm_encode makes them from the segmentation: a run of
 * unknown pieces is one, or with byte fallback each byte of it one piece. Unit k spans
 * norm[start[k] .. end[k]) (a byte piece spans one byte). Returns the normalised text. */
typedef struct Units {
    int *start, *end, *id;
    int n, cap;
} Units;

static void unit_push(Units *u, int start, int end, int id) {
    if (u->n == u->cap) {
        u->cap = u->cap ? 2 * u->cap : 64;
        u->start = s2s_xrealloc(u->start, (size_t)u->cap * sizeof *u->start);
        u->end = s2s_xrealloc(u->end, (size_t)u->cap * sizeof *u->end);
        u->id = s2s_xrealloc(u->id, (size_t)u->cap * sizeof *u->id);
    }
    u->start[u->n] = start;
    u->end[u->n] = end;
    u->id[u->n++] = id;
}

static char *units_of(const Spm *s, const char *line, Units *u) {
    char *norm = spm_normalize(s, line);
    int size = (int)strlen(norm);
    Seg g = {0};
    if (s->model_type == 2) bpe(s, norm, size, &g);
    else unigram(s, norm, size, &g);
    bool prev_unk = false;
    for (int i = 0; i < g.n; i++) {
        int a = g.starts[i], e = i + 1 < g.n ? g.starts[i + 1] : size;
        bool unk = g.ids[i] == s->unk_id;
        if (unk && s->byte_fallback) {
            for (int j = a; j < e; j++) {
                int b = s->byte_id[(unsigned char)norm[j]];
                unit_push(u, j, j + 1, b >= 0 ? b : s->unk_id);
            }
        } else if (unk && prev_unk) {
            u->end[u->n - 1] = e;
        } else {
            unit_push(u, a, e, g.ids[i]);
        }
        prev_unk = unk;
    }
    free(g.starts);
    free(g.ids);
    return norm;
}

static void units_free(Units *u) {
    free(u->start);
    free(u->end);
    free(u->id);
}

int spm_encode_ids(const Spm *s, const char *line, int32_t **ids, int *cap) {
    Units u = {0};
    free(units_of(s, line, &u));
    if (u.n > *cap) *ids = s2s_xrealloc(*ids, (size_t)(*cap = u.n) * sizeof **ids);
    memcpy(*ids, u.id, (size_t)u.n * sizeof *u.id);
    int n = u.n;
    units_free(&u);
    return n;
}

char *spm_encode_text(const Spm *s, const char *line) {
    Units u = {0};
    char *norm = units_of(s, line, &u);
    SpmBuf out = {0};
    spm_buf_put(&out, "", 0);
    for (int k = 0; k < u.n; k++) {
        if (k) spm_buf_put(&out, " ", 1);
        if (s->type[u.id[k]] == SPM_BYTE) spm_buf_put(&out, s->piece[u.id[k]], strlen(s->piece[u.id[k]]));
        else spm_buf_put(&out, norm + u.start[k], (size_t)(u.end[k] - u.start[k])); /* the piece, or the unknown text */
    }
    units_free(&u);
    free(norm);
    return out.s;
}
