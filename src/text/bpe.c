/* bpe.c — byte-pair-encoding subword models (see bpe.h): the pieces and merges, encoding
 * (with BPE-dropout), decoding and the model file; learning is bpe_learn.c. */
#include "bpe_internal.h"
#include "s2s/file.h"
#include "s2s/text.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- pieces: id → text, and text → id for characters and merges ---- */

uint64_t bpe_pair_key(int32_t l, int32_t r) { return (uint64_t)(uint32_t)l << 32 | (uint32_t)r; }

/* text → id of a character or merged piece (ids in b->pieces.tokens are the truth) */

typedef struct TextLookup {
    char *const *tokens;
    const char *s;
} TextLookup;

static bool same_text(const void *ctx, int32_t id) {
    const TextLookup *l = ctx;
    return !strcmp(l->tokens[id], l->s);
}

int32_t bpe_textmap_find(const HashIndex *m, char *const *tokens, const char *s) {
    return hash_index_find(m, hash_str(s), same_text, &(TextLookup){tokens, s});
}

void bpe_init(Bpe *b) {
    memset(b, 0, sizeof *b);
    vocab_init(&b->pieces);
    hash_index_init(&b->ranks, 512);
    hash_index_init(&b->text, 512);
    char name[8];
    for (int k = 0; k < BPE_BYTES; k++) {
        snprintf(name, sizeof name, "<0x%02X>", k);
        vocab_add(&b->pieces, name);
    }
}

void bpe_free(Bpe *b) {
    vocab_free(&b->pieces);
    free(b->merges);
    hash_index_free(&b->ranks);
    hash_index_free(&b->text);
    memset(b, 0, sizeof *b);
}

int bpe_size(const Bpe *b) { return b->pieces.size; }
const char *bpe_piece(const Bpe *b, int id) { return id >= 0 && id < b->pieces.size ? b->pieces.tokens[id] : NULL; }

int32_t bpe_piece_id(const Bpe *b, const char *piece) {
    int32_t id = bpe_textmap_find(&b->text, b->pieces.tokens, piece);
    if (id >= 0) return id;
    id = vocab_find(&b->pieces, piece); /* bytes and specials */
    return id >= 0 && id < BPE_FIRST_CHAR ? id : TOK_UNK;
}

/* A character: in the vocabulary's own index too (encoding looks characters up there). */
int32_t bpe_add_char(Bpe *b, const char *text) {
    int32_t id = vocab_add(&b->pieces, text);
    S2S_ASSERT(id == b->pieces.size - 1); /* new: the callers check */
    hash_index_add(&b->text, hash_str(text), id);
    return id;
}

/* A merge's piece: an existing character's or merge's id when the text is one (two merge
 * paths can spell the same piece), else appended past the vocabulary's index, which would
 * fold it into a special or a byte piece of the same spelling. No vocab_add follows. */
static int32_t add_merged(Bpe *b, const char *text) {
    int32_t id = bpe_textmap_find(&b->text, b->pieces.tokens, text);
    if (id >= 0) return id;
    Vocab *v = &b->pieces;
    if (v->size == v->cap) {
        v->cap = v->cap ? 2 * v->cap : 1024;
        v->tokens = s2s_xrealloc(v->tokens, (size_t)v->cap * sizeof *v->tokens);
    }
    size_t n = strlen(text) + 1;
    v->tokens[v->size] = memcpy(s2s_xmalloc(n), text, n);
    id = v->size++;
    hash_index_add(&b->text, hash_str(text), id);
    return id;
}

static void rank_put(Bpe *b, uint64_t key, int32_t rank) {
    if (hash_index_find(&b->ranks, key, NULL, NULL) < 0) hash_index_add(&b->ranks, key, rank); /* a pair's first merge */
}

static int32_t rank_of(const Bpe *b, int32_t l, int32_t r) { return hash_index_find(&b->ranks, bpe_pair_key(l, r), NULL, NULL); }

void bpe_add_merge(Bpe *b, int32_t l, int32_t r) {
    const char *tl = b->pieces.tokens[l], *tr = b->pieces.tokens[r];
    size_t nl = strlen(tl), nr = strlen(tr);
    char *t = s2s_xmalloc(nl + nr + 1);
    memcpy(t, tl, nl);
    memcpy(t + nl, tr, nr + 1);
    int32_t id = add_merged(b, t);
    free(t);
    if (b->n_merges == b->cap_merges) {
        b->cap_merges = b->cap_merges ? 2 * b->cap_merges : 1024;
        b->merges = s2s_xrealloc(b->merges, (size_t)b->cap_merges * sizeof *b->merges);
    }
    rank_put(b, bpe_pair_key(l, r), b->n_merges);
    b->merges[b->n_merges++] = (BpeMerge){l, r, id};
}

/* Whether left + right spells a special or a byte piece. */
bool bpe_spells_reserved(const Bpe *b, int32_t l, int32_t r) {
    const char *tl = b->pieces.tokens[l], *tr = b->pieces.tokens[r];
    if (tl[0] != '<') return false;
    char t[16];
    size_t nl = strlen(tl), nr = strlen(tr);
    if (nl + nr >= sizeof t) return false;
    memcpy(t, tl, nl);
    memcpy(t + nl, tr, nr + 1);
    int32_t id = vocab_find(&b->pieces, t);
    return id >= 0 && id < BPE_FIRST_CHAR;
}

/* ---- the heap learning and encoding share ---- */

static bool heap_before(const HeapItem *a, const HeapItem *b) { return a->first != b->first ? a->first < b->first : a->second < b->second; }

void bpe_heap_push(Heap *q, HeapItem it) {
    if (q->n == q->cap) {
        q->cap = q->cap ? 2 * q->cap : 64;
        q->h = s2s_xrealloc(q->h, q->cap * sizeof *q->h);
    }
    size_t i = q->n++;
    while (i && heap_before(&it, &q->h[(i - 1) / 2])) {
        q->h[i] = q->h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    q->h[i] = it;
}

HeapItem bpe_heap_pop(Heap *q) {
    HeapItem top = q->h[0], last = q->h[--q->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= q->n) break;
        if (c + 1 < q->n && heap_before(&q->h[c + 1], &q->h[c])) c++;
        if (!heap_before(&q->h[c], &last)) break;
        q->h[i] = q->h[c];
        i = c;
    }
    if (q->n) q->h[i] = last;
    return top;
}

/* ---- encoding ---- */

typedef struct Seq {
    int32_t *sym, *prev, *next;
    int n, cap;
} Seq;

static void seq_push(Seq *s, int32_t sym) {
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->sym = s2s_xrealloc(s->sym, (size_t)s->cap * sizeof *s->sym);
        s->prev = s2s_xrealloc(s->prev, (size_t)s->cap * sizeof *s->prev);
        s->next = s2s_xrealloc(s->next, (size_t)s->cap * sizeof *s->next);
    }
    s->sym[s->n] = sym;
    s->prev[s->n] = s->n - 1;
    s->next[s->n] = s->n + 1;
    s->n++;
}

static int32_t char_id(const Bpe *b, const char *s, size_t len) {
    char t[5];
    memcpy(t, s, len);
    t[len] = '\0';
    int32_t id = vocab_find(&b->pieces, t);
    return id >= BPE_FIRST_CHAR && id < BPE_FIRST_CHAR + b->n_chars ? id : -1;
}

static void push_ids(int32_t **ids, int *cap, int *n, int32_t id) {
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 64;
        *ids = s2s_xrealloc(*ids, (size_t)*cap * sizeof **ids);
    }
    (*ids)[(*n)++] = id;
}

/* the merges of one word, lowest rank first (leftmost among equals), in O(L log L). With
 * dropout (BPE-dropout, Provilkov et al. 2020): at each merge every applicable merge is left
 * out with that probability, the best one kept is made, and the word stops when none is kept. */
static void encode_word(const Bpe *b, Seq *s, Heap *q, Heap *aside, float dropout, Rng *rng, int32_t **ids, int *cap,
                        int *n) {
    q->n = 0;
    for (int i = 0; i + 1 < s->n; i++) {
        int32_t r = rank_of(b, s->sym[i], s->sym[i + 1]);
        if (r >= 0) bpe_heap_push(q, (HeapItem){r, (uint64_t)i});
    }
    while (q->n) {
        HeapItem c = bpe_heap_pop(q);
        int i = (int)c.second, j = s->next[i];
        if (s->sym[i] < 0 || j >= s->n || rank_of(b, s->sym[i], s->sym[j]) != c.first) continue; /* stale */
        if (dropout > 0 && rng_uniform(rng) < dropout) { /* left out of this merge only */
            bpe_heap_push(aside, c); /* when every candidate is left out, the heap empties: the word is done */
            continue;
        }
        s->sym[i] = b->merges[c.first].piece;
        s->sym[j] = -1; /* gone */
        s->next[i] = s->next[j];
        if (s->next[j] < s->n) s->prev[s->next[j]] = i;
        if (s->prev[i] >= 0) {
            int32_t r = rank_of(b, s->sym[s->prev[i]], s->sym[i]);
            if (r >= 0) bpe_heap_push(q, (HeapItem){r, (uint64_t)s->prev[i]});
        }
        if (s->next[i] < s->n) {
            int32_t r = rank_of(b, s->sym[i], s->sym[s->next[i]]);
            if (r >= 0) bpe_heap_push(q, (HeapItem){r, (uint64_t)i});
        }
        while (aside->n) bpe_heap_push(q, bpe_heap_pop(aside)); /* candidates again for the next merge */
    }
    aside->n = 0;
    for (int i = 0; i < s->n; i = s->next[i]) push_ids(ids, cap, n, s->sym[i]);
}

int bpe_encode(const Bpe *b, const char *line, int32_t **ids, int *cap) {
    return bpe_encode_sampled(b, line, 0, NULL, ids, cap);
}

int bpe_encode_sampled(const Bpe *b, const char *line, float dropout, Rng *rng, int32_t **ids, int *cap) {
    S2S_ASSERT(dropout == 0 || (dropout > 0 && dropout <= 1 && rng));
    int n = 0;
    Seq s = {0};
    Heap q = {0}, aside = {0};
    int32_t mark = char_id(b, BPE_WORD_MARK, 3);
    const char *p = line;
    while (*p) {
        while (*p && text_is_space(*p)) p++;
        if (!*p) break;
        s.n = 0;
        if (mark >= 0) seq_push(&s, mark);
        else
            for (int k = 0; k < 3; k++) seq_push(&s, BPE_FIRST_BYTE + (unsigned char)BPE_WORD_MARK[k]);
        while (*p && !text_is_space(*p)) {
            uint32_t cp;
            size_t k = utf8_next(p, &cp);
            int32_t id = char_id(b, p, k);
            if (id >= 0) seq_push(&s, id);
            else /* never seen: its bytes */
                for (size_t j = 0; j < k; j++) seq_push(&s, BPE_FIRST_BYTE + (unsigned char)p[j]);
            p += k;
        }
        encode_word(b, &s, &q, &aside, dropout, rng, ids, cap, &n);
    }
    free(s.sym);
    free(s.prev);
    free(s.next);
    free(q.h);
    free(aside.h);
    return n;
}

char *bpe_decode(const Bpe *b, const int32_t *ids, int n) {
    size_t cap = 64, len = 0;
    char *out = s2s_xmalloc(cap);
    unsigned char bytes[64];
    int nb = 0;
    for (int k = 0; k <= n; k++) {
        int32_t id = k < n ? ids[k] : -1;
        bool is_byte = id >= BPE_FIRST_BYTE && id < BPE_FIRST_CHAR;
        if (is_byte && nb < (int)sizeof bytes) {
            bytes[nb++] = (unsigned char)(id - BPE_FIRST_BYTE);
            continue;
        }
        /* a run of bytes ends: as text where it is UTF-8, U+FFFD for each byte that is not */
        for (int i = 0; i < nb;) {
            char tmp[4];
            int take = 0;
            for (int w = 4; w >= 1 && !take; w--)
                if (i + w <= nb && utf8_valid((const char *)bytes + i, (size_t)w)) take = w;
            size_t tl = take ? (size_t)take : utf8_put(0xFFFD, tmp);
            if (len + tl + 1 > cap) out = s2s_xrealloc(out, cap = 2 * (len + tl + 1));
            memcpy(out + len, take ? (const char *)bytes + i : tmp, tl);
            len += tl;
            i += take ? take : 1;
        }
        nb = 0;
        if (is_byte) { /* the buffer was full */
            bytes[nb++] = (unsigned char)(id - BPE_FIRST_BYTE);
            continue;
        }
        if (id < 0) break;
        const char *t = id < BPE_FIRST_BYTE ? (id == TOK_UNK ? " \xe2\x81\x87 " : "") /* ⁇, as SentencePiece */
                                            : bpe_piece(b, id);
        if (!t) continue;
        for (const char *c = t; *c;) {
            if (!strncmp(c, BPE_WORD_MARK, 3)) {
                if (len + 2 > cap) out = s2s_xrealloc(out, cap *= 2);
                out[len++] = ' ';
                c += 3;
            } else {
                if (len + 2 > cap) out = s2s_xrealloc(out, cap *= 2);
                out[len++] = *c++;
            }
        }
    }
    out[len] = '\0';
    if (out[0] == ' ') memmove(out, out + 1, len);
    return out;
}

/* ---- files ---- */

#define BPE_HEADER "s2s-bpe 1"

char *bpe_format(const Bpe *b, size_t *len_out) {
    size_t cap = 256, len = 0;
    char *buf = s2s_xmalloc(cap);
    len += (size_t)snprintf(buf, cap, "%s chars=%d merges=%d\n", BPE_HEADER, b->n_chars, b->n_merges);
    for (int k = 0; k < b->n_chars + b->n_merges; k++) {
        const char *l = k < b->n_chars ? b->pieces.tokens[BPE_FIRST_CHAR + k] : b->pieces.tokens[b->merges[k - b->n_chars].left];
        const char *r = k < b->n_chars ? "" : b->pieces.tokens[b->merges[k - b->n_chars].right];
        size_t need = strlen(l) + strlen(r) + 3;
        if (len + need > cap) buf = s2s_xrealloc(buf, cap = 2 * (len + need));
        len += (size_t)snprintf(buf + len, cap - len, k < b->n_chars ? "%s%s\n" : "%s %s\n", l, r);
    }
    *len_out = len;
    return buf;
}

S2sStatus bpe_save(const Bpe *b, const char *path, S2sError *err) {
    size_t len;
    char *buf = bpe_format(b, &len);
    S2sStatus st = file_write_atomic(path, buf, len, err);
    free(buf);
    return st;
}

S2sStatus bpe_parse(Bpe *b, const char *text, size_t len, const char *origin, S2sError *err) {
    S2S_ASSERT(b->n_merges == 0 && b->n_chars == 0);
    if (memchr(text, '\0', len)) return s2s_fail(err, S2S_ERR_CORRUPT, "%s: a NUL byte: not a BPE model (text)", origin);
    if (!utf8_valid(text, len)) return s2s_fail(err, S2S_ERR_CORRUPT, "%s: not UTF-8 text: not a BPE model", origin);
    char *copy = s2s_xmalloc(len + 1);
    memcpy(copy, text, len);
    copy[len] = '\0';
    S2sStatus st = S2S_OK;
    char *line = copy;
    char *nl = strchr(line, '\n');
    int chars = -1, merges = -1;
    if (!nl || sscanf(line, BPE_HEADER " chars=%d merges=%d", &chars, &merges) != 2 || chars < 0 || merges < 0) {
        st = s2s_fail(err, S2S_ERR_CORRUPT, "%s:1: expected \"%s chars=N merges=M\"", origin, BPE_HEADER);
        goto out;
    }
    if ((long)chars + merges > BPE_MAX_PIECES) {
        st = s2s_fail(err, S2S_ERR_CORRUPT, "%s:1: %d characters and %d merges: more than %d pieces", origin, chars, merges,
                      BPE_MAX_PIECES);
        goto out;
    }
    line = nl + 1;
    for (long k = 0; k < (long)chars + merges; k++) {
        long no = k + 2;
        nl = strchr(line, '\n');
        if (!nl) {
            st = s2s_fail(err, S2S_ERR_CORRUPT, "%s:%ld: the file ends: the header promised %d characters and %d merges", origin,
                          no, chars, merges);
            goto out;
        }
        *nl = '\0';
        if (k < chars) {
            uint32_t cp;
            size_t n = *line ? utf8_next(line, &cp) : 0;
            if (!n || line[n] || text_is_space(*line)) {
                st = s2s_fail(err, S2S_ERR_CORRUPT, "%s:%ld: expected one character (not whitespace)", origin, no);
                goto out;
            }
            if (bpe_textmap_find(&b->text, b->pieces.tokens, line) >= 0) {
                st = s2s_fail(err, S2S_ERR_CORRUPT, "%s:%ld: the character \"%s\" twice", origin, no, line);
                goto out;
            }
            if (vocab_find(&b->pieces, line) >= 0) { /* cannot be: specials and bytes are longer */
                st = s2s_fail(err, S2S_ERR_CORRUPT, "%s:%ld: \"%s\" is already a piece", origin, no, line);
                goto out;
            }
            bpe_add_char(b, line);
            b->n_chars++;
        } else {
            char *sp = strchr(line, ' ');
            if (!sp || strchr(sp + 1, ' ')) {
                st = s2s_fail(err, S2S_ERR_CORRUPT, "%s:%ld: expected two pieces \"left right\"", origin, no);
                goto out;
            }
            *sp = '\0';
            int32_t l = bpe_textmap_find(&b->text, b->pieces.tokens, line), r = bpe_textmap_find(&b->text, b->pieces.tokens, sp + 1);
            if (l < 0 || r < 0) {
                st = s2s_fail(err, S2S_ERR_CORRUPT, "%s:%ld: \"%s\" is not a character or an earlier merge's piece", origin, no,
                              l < 0 ? line : sp + 1);
                goto out;
            }
            bpe_add_merge(b, l, r);
        }
        line = nl + 1;
    }
    if (*line) st = s2s_fail(err, S2S_ERR_CORRUPT, "%s:%d: text after the last merge", origin, chars + merges + 2);
out:
    free(copy);
    return st;
}

S2sStatus bpe_load(Bpe *b, const char *path, S2sError *err) {
    char *buf;
    size_t len;
    S2sStatus st = file_read_all(path, (size_t)256 << 20, &buf, &len, err);
    if (st) return st;
    st = bpe_parse(b, buf, len, path, err);
    free(buf);
    return st;
}

void bpe_vocab(const Bpe *b, Vocab *v) {
    vocab_init(v);
    for (int id = TOK_SPECIALS; id < b->pieces.size; id++) {
        int got = vocab_add(v, b->pieces.tokens[id]);
        S2S_ASSERT(got == id); /* piece texts are distinct (bpe_learn, bpe_parse) */
    }
}
