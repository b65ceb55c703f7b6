/* bpe_learn.c — learning a BPE model from text (bpe.h's bpe_learn): the words counted, their
 * characters the first pieces, then the most frequent adjacent pair merged again and again,
 * the words that hold it rewritten in place (a heap of pair counts, stale entries skipped). */
#include "bpe_internal.h"
#include "s2s/hash.h"
#include "s2s/file.h"
#include "s2s/text.h"

#include <stdlib.h>
#include <string.h>

typedef struct Word {
    int32_t *sym;
    int len;
    long count;
} Word;

typedef struct PairStat {
    uint64_t key;
    long count;
    int32_t *words; /* where the pair may occur (stale entries allowed) */
    int n_words, cap_words;
} PairStat;

typedef struct Pairs {
    HashIndex index; /* a pair's key (bpe_pair_key) → its entry in s */
    PairStat *s;     /* in the order first seen */
    int32_t n, cap;
} Pairs;

/* The pair's entry, made (count 0) when new; a pointer into s, which the next call may move. */
static PairStat *pairs_get(Pairs *p, uint64_t key) {
    if (!p->index.cap) hash_index_init(&p->index, 2048);
    int32_t i = hash_index_find(&p->index, key, NULL, NULL);
    if (i < 0) {
        if (p->n == p->cap) p->s = s2s_xrealloc(p->s, (size_t)(p->cap = p->cap ? 2 * p->cap : 2048) * sizeof *p->s);
        i = p->n++;
        p->s[i] = (PairStat){.key = key};
        hash_index_add(&p->index, key, i);
    }
    return &p->s[i];
}

/* adds sign × count for each adjacent pair of w (and, adding, notes the word) */
static void count_word(Pairs *p, Heap *q, const Word *w, int32_t wi, int sign) {
    for (int k = 0; k + 1 < w->len; k++) {
        PairStat *s = pairs_get(p, bpe_pair_key(w->sym[k], w->sym[k + 1]));
        if (s->count < 0) continue; /* banned (spells a reserved piece) */
        s->count += sign * w->count;
        if (sign > 0) {
            if (!s->n_words || s->words[s->n_words - 1] != wi) {
                if (s->n_words == s->cap_words) {
                    s->cap_words = s->cap_words ? 2 * s->cap_words : 4;
                    s->words = s2s_xrealloc(s->words, (size_t)s->cap_words * sizeof *s->words);
                }
                s->words[s->n_words++] = wi;
            }
        }
        if (q) bpe_heap_push(q, (HeapItem){-s->count, s->key}); /* the most frequent first, then the smaller ids */
    }
}

typedef struct CharCount {
    uint32_t cp;
    long count;
} CharCount;

static int cmp_chars(const void *a, const void *b) {
    const CharCount *x = a, *y = b;
    if (x->count != y->count) return x->count > y->count ? -1 : 1;
    return x->cp < y->cp ? -1 : x->cp > y->cp;
}

#define WORD_MARK 0x2581u

/* The word types of the lines and their counts (wcount by the words' ids). */
static bool stopped(const atomic_int *stop) { return stop && atomic_load(stop); }

static bool count_words(char *const *lines, size_t n, Vocab *words, long **wcount, int *wcap, const atomic_int *stop) {
    vocab_init(words);
    char **toks = NULL;
    int tcap = 0;
    bool stop_now = false;
    for (size_t i = 0; i < n && !(stop_now = i % 4096 == 0 && stopped(stop)); i++) {
        char *copy = s2s_xmalloc(strlen(lines[i]) + 1);
        strcpy(copy, lines[i]);
        int k = text_split(copy, &toks, &tcap);
        for (int j = 0; j < k; j++) vocab_count(words, toks[j], wcount, wcap);
        free(copy);
    }
    free(toks);
    return !stop_now;
}

/* The characters of the words by frequency (the word mark once per word, folded with the
 * same character of the text), most frequent first; *ncc of them. */
static CharCount *count_chars(const Vocab *words, const long *wcount, int wcap, size_t *ncc_out) {
    CharCount *cc = NULL;
    size_t ncc = 0, ccap = 0;
    long total_words = 0;
    for (int id = 0; id < words->size; id++) {
        if (id >= wcap || !wcount[id]) continue;
        total_words += wcount[id];
        for (const char *s = words->tokens[id]; *s;) {
            uint32_t cp;
            s += utf8_next(s, &cp);
            size_t k = 0;
            while (k < ncc && cc[k].cp != cp) k++; /* few distinct characters: a scan will do */
            if (k == ncc) {
                if (ncc == ccap) {
                    ccap = ccap ? 2 * ccap : 256;
                    cc = s2s_xrealloc(cc, ccap * sizeof *cc);
                }
                cc[ncc++] = (CharCount){cp, 0};
            }
            cc[k].count += wcount[id];
        }
    }
    if (total_words) {
        if (ncc == ccap) cc = s2s_xrealloc(cc, (ccap = ccap + 1) * sizeof *cc);
        cc[ncc++] = (CharCount){WORD_MARK, total_words};
        /* the mark may also be a character of the text: fold the two */
        size_t w = 0;
        for (size_t k = 0; k < ncc; k++) {
            size_t j = 0;
            while (j < w && cc[j].cp != cc[k].cp) j++;
            if (j < w) cc[j].count += cc[k].count;
            else cc[w++] = cc[k];
        }
        ncc = w;
    }
    if (ncc) qsort(cc, ncc, sizeof *cc, cmp_chars);
    *ncc_out = ncc;
    return cc;
}

/* The words as symbol ids: the word mark, then each character's piece; *nw of them. */
static Word *word_symbols(const Bpe *b, const Vocab *words, const long *wcount, int wcap, int *nw_out) {
    Word *ws = s2s_xmalloc((size_t)(words->size ? words->size : 1) * sizeof *ws); /* at most one a word: no regrowth */
    int nw = 0;
    for (int id = 0; id < words->size; id++) {
        if (id >= wcap || !wcount[id]) continue;
        Word *w = &ws[nw++];
        w->count = wcount[id];
        w->len = 0;
        w->sym = s2s_xmalloc((strlen(words->tokens[id]) + 1) * sizeof *w->sym);
        char t[5];
        t[utf8_put(WORD_MARK, t)] = '\0';
        w->sym[w->len++] = bpe_textmap_find(&b->text, b->pieces.tokens, t);
        for (const char *s = words->tokens[id]; *s;) {
            uint32_t cp;
            size_t k = utf8_next(s, &cp);
            memcpy(t, s, k);
            t[k] = '\0';
            s += k;
            w->sym[w->len++] = bpe_textmap_find(&b->text, b->pieces.tokens, t);
        }
    }
    *nw_out = nw;
    return ws;
}

/* Rewrites the words that hold the pair (l, r) merged into m: their pairs out, the merge,
 * their pairs in. visited: the merge number that last rewrote each word. */
static void rewrite_words(Pairs *pairs, Heap *heap, Word *ws, PairStat *s, int32_t l, int32_t r, int32_t m, int learned,
                          int32_t *visited) {
    int32_t *list = s->words;
    int nlist = s->n_words;
    s->words = NULL;
    s->n_words = s->cap_words = 0;
    for (int k = 0; k < nlist; k++) {
        int32_t wi = list[k];
        if (visited[wi] == learned) continue;
        visited[wi] = learned;
        Word *w = &ws[wi];
        bool has = false;
        for (int j = 0; j + 1 < w->len && !has; j++) has = w->sym[j] == l && w->sym[j + 1] == r;
        if (!has) continue;
        count_word(pairs, heap, w, wi, -1);
        int out = 0;
        for (int j = 0; j < w->len; j++) {
            if (j + 1 < w->len && w->sym[j] == l && w->sym[j + 1] == r) {
                w->sym[out++] = m;
                j++;
            } else {
                w->sym[out++] = w->sym[j];
            }
        }
        w->len = out;
        count_word(pairs, heap, w, wi, +1);
    }
    free(list);
}

/* Merges the most frequent pair (then the smaller ids) until target merges, or no pair is
 * seen min_count times; *learned counts them. false: stopped. */
static bool merge_pairs(Bpe *b, Word *ws, int nw, int target, int min_count, int *learned, const atomic_int *stop) {
    Pairs pairs = {0};
    Heap heap = {0};
    bool stop_now = false;
    for (int i = 0; i < nw && !(stop_now = i % 65536 == 0 && stopped(stop)); i++) count_word(&pairs, NULL, &ws[i], i, +1);
    for (int32_t k = 0; k < pairs.n; k++) /* the heap pops by (count, key) alone: any order in */
        if (pairs.s[k].count > 0) bpe_heap_push(&heap, (HeapItem){-pairs.s[k].count, pairs.s[k].key});
    int32_t *visited = s2s_xcalloc((size_t)(nw ? nw : 1), sizeof *visited); /* merge number + 1 that last rewrote it */
    while (!stop_now && *learned < target && heap.n) {
        if ((stop_now = stopped(stop))) break; /* a merge can take tens of milliseconds on a large text */
        HeapItem top = bpe_heap_pop(&heap);
        PairStat *s = pairs_get(&pairs, top.second);
        if (s->count != -top.first) continue; /* stale */
        if (s->count < min_count) break;
        int32_t l = (int32_t)(top.second >> 32), r = (int32_t)(uint32_t)top.second;
        if (bpe_spells_reserved(b, l, r)) { /* "<unk>" or "<0x41>" as a piece would be read as that */
            s->count = -1; /* never again: count_word keeps it below every real count */
            continue;
        }
        bpe_add_merge(b, l, r);
        int32_t m = b->merges[b->n_merges - 1].piece;
        (*learned)++;
        rewrite_words(&pairs, &heap, ws, s, l, r, m, *learned, visited);
    }
    free(visited);
    for (int32_t k = 0; k < pairs.n; k++) free(pairs.s[k].words);
    free(pairs.s);
    hash_index_free(&pairs.index);
    free(heap.h);
    return !stop_now;
}

S2sStatus bpe_learn(Bpe *b, char *const *lines, size_t n, const BpeLearnOpts *o, int *learned, S2sError *err) {
    S2S_ASSERT(b->n_merges == 0 && b->n_chars == 0);
    *learned = 0;
    Vocab words;
    long *wcount = NULL;
    int wcap = 0;
    bool going = count_words(lines, n, &words, &wcount, &wcap, o->stop);
    size_t ncc;
    CharCount *cc = count_chars(&words, wcount, wcap, &ncc);
    S2sStatus st = going ? S2S_OK : s2s_fail(err, S2S_ERR_IO, "stopped by a signal while learning the subwords; nothing was prepared");
    int base = BPE_FIRST_CHAR + (int)ncc, target = o->merges;
    if (o->vocab_size > 0 && o->vocab_size < base) {
        st = s2s_fail(err, S2S_ERR_CONFIG,
                      "a vocabulary of %d pieces cannot hold the 4 specials, 256 bytes and the text's %zu characters (%d)",
                      o->vocab_size, ncc, base);
    } else if (!st) {
        if (o->vocab_size > 0) target = o->vocab_size - base;
        for (size_t k = 0; k < ncc; k++) {
            char t[5];
            t[utf8_put(cc[k].cp, t)] = '\0';
            bpe_add_char(b, t);
        }
        b->n_chars = (int)ncc;
        int nw;
        Word *ws = word_symbols(b, &words, wcount, wcap, &nw);
        if (!merge_pairs(b, ws, nw, target, o->min_count > 0 ? o->min_count : 1, learned, o->stop))
            st = s2s_fail(err, S2S_ERR_IO, "stopped by a signal while learning the subwords (%d merges made); nothing was "
                          "prepared", *learned);
        for (int i = 0; i < nw; i++) free(ws[i].sym);
        free(ws);
    }
    free(cc);
    free(wcount);
    vocab_free(&words);
    return st;
}

S2sStatus bpe_learn_files(Bpe *b, const char *const *inputs, int n, const BpeLearnOpts *o, const char *out, int *learned,
                          S2sError *err) {
    FileRole *ins = s2s_xcalloc((size_t)(n > 0 ? n : 1), sizeof *ins);
    for (int k = 0; k < n; k++) ins[k] = (FileRole){"an input", inputs[k]};
    S2sStatus st = file_distinct(ins, n, &(FileRole){"the output", out}, 1, err);
    free(ins);
    char **all = NULL;
    size_t n_all = 0;
    for (int k = 0; k < n && !st; k++) {
        char **lines;
        int nl;
        if ((st = text_read_lines(inputs[k], &lines, &nl, err))) break;
        all = s2s_xrealloc(all, (n_all + (size_t)nl + 1) * sizeof *all);
        memcpy(all + n_all, lines, (size_t)nl * sizeof *lines);
        n_all += (size_t)nl;
        free(lines); /* the strings now belong to all */
    }
    if (!st) st = bpe_learn(b, all, n_all, o, learned, err);
    if (!st) st = bpe_save(b, out, err);
    text_free_lines(all, (int)n_all);
    return st;
}
