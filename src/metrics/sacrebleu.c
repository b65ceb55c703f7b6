/* sacrebleu.c — sacreBLEU 2.x's BLEU and chrF (see sacrebleu.h). Text is handled as Unicode
 * code points, as Python handles str: whitespace, lowercasing and character n-grams. */
#include "s2s/sacrebleu.h"
#include "s2s/data.h"
#include "s2s/text.h"
#include "unicode_tables.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const SB_TOKENIZE_NAMES[SB_TOK_COUNT] = {"13a", "intl", "none", "char"};
const char *const SB_SMOOTH_NAMES[SB_SMOOTH_COUNT] = {"exp", "none", "floor", "add-k"};

SbBleuOpts sb_bleu_defaults(void) {
    return (SbBleuOpts){.tokenize = SB_TOK_13A, .smooth = SB_SMOOTH_EXP, .smooth_value = -1.0, .max_order = 4};
}

SbChrfOpts sb_chrf_defaults(void) { return (SbChrfOpts){.char_order = 6, .word_order = 0, .beta = 2}; }

/* ---- code points ---- */

typedef struct Cps {
    uint32_t *c;
    size_t n, cap;
} Cps;

static void cps_swap(Cps *a, Cps *b) {
    Cps t = *a;
    *a = *b;
    *b = t;
}

static void cps_push(Cps *s, uint32_t c) {
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->c = s2s_xrealloc(s->c, s->cap * sizeof *s->c);
    }
    s->c[s->n++] = c;
}

/* valid UTF-8 (the readers check it) into code points */
static void cps_decode(Cps *s, const char *str) {
    s->n = 0;
    while (*str) {
        uint32_t c;
        str += utf8_next(str, &c);
        cps_push(s, c);
    }
}

static char *cps_encode(const uint32_t *c, size_t n) {
    char *s = s2s_xmalloc(4 * n + 1), *o = s;
    for (size_t i = 0; i < n; i++) o += utf8_put(c[i], o);
    *o = '\0';
    return s;
}

static bool in_ranges(const uint32_t (*r)[2], size_t n, uint32_t c) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c < r[mid][0]) hi = mid;
        else if (c > r[mid][1]) lo = mid + 1;
        else return true;
    }
    return false;
}
#define IN(table, c) in_ranges(table, sizeof table / sizeof table[0], c)

static bool is_space(uint32_t c) { return c == ' ' || (c >= 0x80 || c < 0x20 ? IN(UNICODE_SPACE, c) : false); }

static uint32_t lower1(uint32_t c) {
    if (c < 0x80) return c >= 'A' && c <= 'Z' ? c + 32 : c;
    size_t lo = 0, hi = sizeof UNICODE_LOWER / sizeof UNICODE_LOWER[0];
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c < UNICODE_LOWER[mid][0]) hi = mid;
        else if (c > UNICODE_LOWER[mid][0]) lo = mid + 1;
        else return UNICODE_LOWER[mid][1];
    }
    return c;
}

/* Python's str.lower(): one-to-one maps, U+0130 → "i̇", and a capital sigma that ends a
 * word (a cased letter before it, none after, case-ignorable characters skipped) → ς. */
static void cps_lower(const Cps *in, Cps *out) {
    out->n = 0;
    for (size_t i = 0; i < in->n; i++) {
        uint32_t c = in->c[i];
        if (c == 0x130) {
            cps_push(out, 'i');
            cps_push(out, 0x307);
        } else if (c == 0x3A3) {
            size_t j = i;
            while (j > 0 && IN(UNICODE_CASE_IGNORABLE, in->c[j - 1])) j--;
            bool final = j > 0 && IN(UNICODE_CASED, in->c[j - 1]);
            if (final) {
                size_t k = i + 1;
                while (k < in->n && IN(UNICODE_CASE_IGNORABLE, in->c[k])) k++;
                final = k == in->n || !IN(UNICODE_CASED, in->c[k]);
            }
            cps_push(out, final ? 0x3C2 : 0x3C3);
        } else {
            cps_push(out, lower1(c));
        }
    }
}

char *sb_lower(const char *s) {
    Cps a = {0}, b = {0};
    cps_decode(&a, s);
    cps_lower(&a, &b);
    char *r = cps_encode(b.c, b.n);
    free(a.c);
    free(b.c);
    return r;
}

static void cps_rstrip(Cps *s) {
    while (s->n && is_space(s->c[s->n - 1])) s->n--;
}

/* ---- 13a ---- */

static bool starts_with(const Cps *s, size_t i, const char *lit) {
    for (size_t k = 0; lit[k]; k++)
        if (i + k >= s->n || s->c[i + k] != (uint32_t)(unsigned char)lit[k]) return false;
    return true;
}

/* every occurrence of lit (ASCII), left to right, replaced by rep (ASCII) */
static void cps_replace(Cps *s, const char *lit, const char *rep, Cps *tmp) {
    tmp->n = 0;
    size_t ln = strlen(lit);
    for (size_t i = 0; i < s->n;) {
        if (starts_with(s, i, lit)) {
            for (const char *r = rep; *r; r++) cps_push(tmp, (uint32_t)(unsigned char)*r);
            i += ln;
        } else {
            cps_push(tmp, s->c[i++]);
        }
    }
    cps_swap(s, tmp);
}

/* mteval-v13a's symbols: { | } ~ [ \ ] ^ _ ` space ! " # $ % & ( ) * + : ; < = > ? @ / */
static bool is_13a_symbol(uint32_t c) {
    return (c >= 0x7B && c <= 0x7E) || (c >= 0x5B && c <= 0x60) || (c >= 0x20 && c <= 0x26) || (c >= 0x28 && c <= 0x2B) ||
           (c >= 0x3A && c <= 0x40) || c == '/';
}
static bool is_digit(uint32_t c) { return c >= '0' && c <= '9'; }
static bool is_dot_comma(uint32_t c) { return c == '.' || c == ','; }

/* One regular-expression pass of the form (A)(B) → repl, as Python's re.sub scans: left to
 * right, a match consumes both characters. kind 0: (non-digit)(.,) → "\1 \2 "; 1: (.,)(non-digit)
 * → " \1 \2"; 2: (digit)(-) → "\1 \2 ". */
static void pass_pairs(Cps *s, int kind, Cps *tmp) {
    tmp->n = 0;
    size_t i = 0;
    while (i < s->n) {
        uint32_t a = s->c[i], b = i + 1 < s->n ? s->c[i + 1] : 0;
        bool m = i + 1 < s->n && (kind == 0   ? !is_digit(a) && is_dot_comma(b)
                                  : kind == 1 ? is_dot_comma(a) && !is_digit(b)
                                              : is_digit(a) && b == '-');
        if (!m) {
            cps_push(tmp, a);
            i++;
            continue;
        }
        if (kind == 1) cps_push(tmp, ' ');
        cps_push(tmp, a);
        cps_push(tmp, ' ');
        cps_push(tmp, b);
        if (kind != 1) cps_push(tmp, ' ');
        i += 2;
    }
    cps_swap(s, tmp);
}

static void tokenize_13a(Cps *s, Cps *tmp) {
    cps_replace(s, "<skipped>", "", tmp);
    cps_replace(s, "-\n", "", tmp);
    cps_replace(s, "\n", " ", tmp);
    bool amp = false;
    for (size_t i = 0; i < s->n && !amp; i++) amp = s->c[i] == '&';
    if (amp) {
        cps_replace(s, "&quot;", "\"", tmp);
        cps_replace(s, "&amp;", "&", tmp);
        cps_replace(s, "&lt;", "<", tmp);
        cps_replace(s, "&gt;", ">", tmp);
    }
    tmp->n = 0;
    cps_push(tmp, ' ');
    for (size_t i = 0; i < s->n; i++) {
        uint32_t c = s->c[i];
        if (is_13a_symbol(c)) {
            cps_push(tmp, ' ');
            cps_push(tmp, c);
            cps_push(tmp, ' ');
        } else {
            cps_push(tmp, c);
        }
    }
    cps_push(tmp, ' ');
    cps_swap(s, tmp);
    for (int k = 0; k < 3; k++) pass_pairs(s, k, tmp);
}

/* ---- intl (mteval-v14's international tokenisation) ---- */

static bool is_punct(uint32_t c) { return IN(UNICODE_PUNCT, c); }
static bool is_number(uint32_t c) { return IN(UNICODE_NUMBER, c); }

/* (\P{N})(\p{P}) → "\1 \2 ", then (\p{P})(\P{N}) → " \1 \2", then (\p{S}) → " \1 ", each
 * scanned as re.sub does (see pass_pairs); no padding of the line, unlike 13a */
static void tokenize_intl(Cps *s, Cps *tmp) {
    for (int kind = 0; kind < 2; kind++) {
        tmp->n = 0;
        for (size_t i = 0; i < s->n;) {
            uint32_t a = s->c[i];
            bool m = i + 1 < s->n && (kind == 0 ? !is_number(a) && is_punct(s->c[i + 1]) : is_punct(a) && !is_number(s->c[i + 1]));
            if (!m) {
                cps_push(tmp, a);
                i++;
                continue;
            }
            if (kind == 1) cps_push(tmp, ' ');
            cps_push(tmp, a);
            cps_push(tmp, ' ');
            cps_push(tmp, s->c[i + 1]);
            if (kind == 0) cps_push(tmp, ' ');
            i += 2;
        }
        cps_swap(s, tmp);
    }
    tmp->n = 0;
    for (size_t i = 0; i < s->n; i++) {
        bool sym = IN(UNICODE_SYMBOL, s->c[i]);
        if (sym) cps_push(tmp, ' ');
        cps_push(tmp, s->c[i]);
        if (sym) cps_push(tmp, ' ');
    }
    cps_swap(s, tmp);
}

/* ---- words and n-grams ---- */

typedef struct Words {
    int32_t *id;
    int n, cap;
} Words;

static void words_push(Words *w, int32_t id) {
    if (w->n == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 64;
        w->id = s2s_xrealloc(w->id, (size_t)w->cap * sizeof *w->id);
    }
    w->id[w->n++] = id;
}

/* str.split(): the runs of non-whitespace, interned */
static void split_words(const Cps *s, Vocab *v, Words *w) {
    w->n = 0;
    for (size_t i = 0; i < s->n;) {
        while (i < s->n && is_space(s->c[i])) i++;
        size_t j = i;
        while (j < s->n && !is_space(s->c[j])) j++;
        if (j > i) {
            char *tok = cps_encode(s->c + i, j - i);
            words_push(w, vocab_add(v, tok));
            free(tok);
        }
        i = j;
    }
}

typedef struct Gram {
    const int32_t *p;
    int n;
    long count;
} Gram;

static int cmp_gram(const void *a, const void *b) {
    const Gram *x = a, *y = b;
    if (x->n != y->n) return x->n < y->n ? -1 : 1;
    for (int k = 0; k < x->n; k++)
        if (x->p[k] != y->p[k]) return x->p[k] < y->p[k] ? -1 : 1;
    return 0;
}

typedef struct Grams {
    Gram *g;
    size_t n, cap;
} Grams;

static void grams_push(Grams *g, const int32_t *p, int n, long count) {
    if (g->n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 256;
        g->g = s2s_xrealloc(g->g, g->cap * sizeof *g->g);
    }
    g->g[g->n++] = (Gram){p, n, count};
}

/* The distinct n-grams of orders lo..hi of ids[0..len) with their counts, sorted (order
 * first). Appended to out from index `from`, which it returns. */
static size_t count_grams(Grams *out, const int32_t *ids, int len, int lo, int hi) {
    size_t from = out->n;
    for (int n = lo; n <= hi; n++)
        for (int i = 0; i + n <= len; i++) grams_push(out, ids + i, n, 1);
    if (out->n == from) return from; /* none (an empty line): out->g may still be NULL */
    qsort(out->g + from, out->n - from, sizeof *out->g, cmp_gram);
    size_t w = from;
    for (size_t i = from; i < out->n; i++) {
        if (w > from && cmp_gram(&out->g[w - 1], &out->g[i]) == 0) out->g[w - 1].count++;
        else out->g[w++] = out->g[i];
    }
    out->n = w;
    return from;
}

/* Counts of a sorted distinct run against another: for each order n (1-based index n-1),
 * the summed counts of a and the clipped matches min(count_a, count_b). */
static void match_grams(const Gram *a, size_t na, const Gram *b, size_t nb, double *total, double *match) {
    size_t j = 0;
    for (size_t i = 0; i < na; i++) {
        total[a[i].n - 1] += (double)a[i].count;
        while (j < nb && cmp_gram(&b[j], &a[i]) < 0) j++;
        if (j < nb && cmp_gram(&b[j], &a[i]) == 0) match[a[i].n - 1] += (double)(a[i].count < b[j].count ? a[i].count : b[j].count);
    }
}

/* A line as sacreBLEU's BLEU sees it: right-stripped, lowercased, tokenised, split. */
typedef struct Scratch {
    Cps a, b, tmp;
    Vocab v;
} Scratch;

static void scratch_free(Scratch *x) {
    free(x->a.c);
    free(x->b.c);
    free(x->tmp.c);
    vocab_free(&x->v);
}

/* A line into x->a: decoded, lowercased as Python's str.lower() if asked, right-stripped (BLEU
 * strips; sacreBLEU's command line strips every line it reads, for chrF too). */
static void read_line(Scratch *x, const char *line, bool lowercase) {
    cps_decode(&x->a, line);
    if (lowercase) {
        cps_lower(&x->a, &x->b);
        cps_swap(&x->a, &x->b);
    }
    cps_rstrip(&x->a);
}

static void prepare_bleu(const SbBleuOpts *o, const char *line, Scratch *x, Words *out) {
    read_line(x, line, o->lowercase);
    if (o->tokenize == SB_TOK_13A) tokenize_13a(&x->a, &x->tmp);
    if (o->tokenize == SB_TOK_INTL) tokenize_intl(&x->a, &x->tmp);
    /* char: " ".join(characters), then split: every non-whitespace character a token */
    if (o->tokenize == SB_TOK_CHAR) {
        out->n = 0;
        for (size_t i = 0; i < x->a.n; i++) {
            if (is_space(x->a.c[i])) continue;
            char *tok = cps_encode(x->a.c + i, 1);
            words_push(out, vocab_add(&x->v, tok));
            free(tok);
        }
        return;
    }
    split_words(&x->a, &x->v, out);
}

void sb_bleu_stats(const SbBleuOpts *o, char *const *hyp, char *const *const *refs, int nrefs, int n, SbStats *lines,
                   SbStats *sum) {
    S2S_ASSERT(o->max_order >= 1 && o->max_order <= SB_MAX_ORDER && nrefs >= 1);
    int N = o->max_order;
    if (sum) memset(sum, 0, sizeof *sum);
    Scratch x;
    memset(&x, 0, sizeof x);
    vocab_init(&x.v);
    Words hw = {0}, *rw = s2s_xcalloc((size_t)nrefs, sizeof *rw);
    Grams hg = {0}, rg = {0}, mx = {0};
    for (int i = 0; i < n; i++) {
        SbStats st;
        memset(&st, 0, sizeof st);
        prepare_bleu(o, hyp[i], &x, &hw);
        hg.n = rg.n = mx.n = 0;
        count_grams(&hg, hw.id, hw.n, 1, N);
        long closest = -1, diff = -1;
        for (int r = 0; r < nrefs; r++) {
            prepare_bleu(o, refs[r][i], &x, &rw[r]);
            long len = rw[r].n, d = labs((long)hw.n - len);
            if (diff < 0 || d < diff || (d == diff && len < closest)) {
                diff = d;
                closest = len;
            }
            count_grams(&rg, rw[r].id, rw[r].n, 1, N);
        }
        /* the largest count of each n-gram over the references */
        if (rg.n) qsort(rg.g, rg.n, sizeof *rg.g, cmp_gram);
        for (size_t k = 0; k < rg.n; k++) {
            if (mx.n && cmp_gram(&mx.g[mx.n - 1], &rg.g[k]) == 0) {
                if (rg.g[k].count > mx.g[mx.n - 1].count) mx.g[mx.n - 1].count = rg.g[k].count;
            } else {
                grams_push(&mx, rg.g[k].p, rg.g[k].n, rg.g[k].count);
            }
        }
        match_grams(hg.g, hg.n, mx.g, mx.n, st.totals, st.counts);
        st.sys_len = hw.n;
        st.ref_len = closest;
        if (lines) lines[i] = st;
        if (sum) sb_stats_add(sum, &st);
    }
    for (int r = 0; r < nrefs; r++) free(rw[r].id);
    free(rw);
    free(hw.id);
    free(hg.g);
    free(rg.g);
    free(mx.g);
    scratch_free(&x);
}

void sb_stats_add(SbStats *sum, const SbStats *s) {
    for (int m = 0; m < SB_MAX_ORDER; m++) {
        sum->counts[m] += s->counts[m];
        sum->totals[m] += s->totals[m];
    }
    sum->sys_len += s->sys_len;
    sum->ref_len += s->ref_len;
}

/* sacreBLEU's compute_bleu */
void sb_bleu_score(const SbBleuOpts *o, const SbStats *st, SbBleu *out) {
    int N = o->max_order;
    memset(out, 0, sizeof *out);
    double correct[SB_MAX_ORDER], total[SB_MAX_ORDER];
    memcpy(correct, st->counts, sizeof correct);
    memcpy(total, st->totals, sizeof total);
    out->sys_len = st->sys_len;
    out->ref_len = st->ref_len;
    double k = o->smooth_value >= 0 ? o->smooth_value : o->smooth == SB_SMOOTH_FLOOR ? 0.1 : 1.0;
    out->bp = out->sys_len < out->ref_len ? (out->sys_len > 0 ? exp(1.0 - (double)out->ref_len / (double)out->sys_len) : 0.0) : 1.0;
    out->ratio = out->ref_len ? (double)out->sys_len / (double)out->ref_len : 0.0;
    bool any = false;
    for (int m = 0; m < N; m++) any = any || correct[m] != 0;
    if (any) {
        double smooth_mteval = 1.0;
        for (int m = 0; m < N; m++) {
            if (o->smooth == SB_SMOOTH_ADD_K && m > 0) {
                correct[m] += k;
                total[m] += k;
            }
            if (total[m] == 0) break;
            if (correct[m] == 0) {
                if (o->smooth == SB_SMOOTH_EXP) {
                    smooth_mteval *= 2;
                    out->precision[m] = 100.0 / (smooth_mteval * total[m]);
                } else if (o->smooth == SB_SMOOTH_FLOOR) {
                    out->precision[m] = 100.0 * k / total[m];
                }
            } else {
                out->precision[m] = 100.0 * correct[m] / total[m];
            }
        }
        double logsum = 0;
        for (int m = 0; m < N; m++) logsum += out->precision[m] > 0 ? log(out->precision[m]) : -9999999999.0;
        out->score = out->bp * exp(logsum / N);
    }
    memcpy(out->counts, correct, sizeof correct);
    memcpy(out->totals, total, sizeof total);
}

void sb_bleu(const SbBleuOpts *o, char *const *hyp, char *const *const *refs, int nrefs, int n, SbBleu *out) {
    SbStats sum;
    sb_bleu_stats(o, hyp, refs, nrefs, n, NULL, &sum);
    sb_bleu_score(o, &sum, out);
}

/* ---- chrF ---- */

static bool is_ascii_punct(uint32_t c) {
    return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) || (c >= 0x7B && c <= 0x7E);
}

/* One line's n-grams: characters of orders 1..C (code points as ids) and words of orders
 * 1..W (chrF++: punctuation split off), each kind in its own sorted run. */
typedef struct ChrfLine {
    Cps chars;
    Words words;
    Grams cg, wg;
} ChrfLine;

static void push_word(const uint32_t *c, size_t n, Vocab *v, Words *w) {
    char *tok = cps_encode(c, n);
    words_push(w, vocab_add(v, tok));
    free(tok);
}

static void chrf_line(const SbChrfOpts *o, const char *line, Scratch *x, ChrfLine *L) {
    read_line(x, line, o->lowercase);
    const Cps *s = &x->a;
    L->chars.n = 0;
    for (size_t i = 0; i < s->n; i++)
        if (o->whitespace || !is_space(s->c[i])) cps_push(&L->chars, s->c[i]);
    L->cg.n = L->wg.n = 0;
    count_grams(&L->cg, (const int32_t *)L->chars.c, (int)L->chars.n, 1, o->char_order);
    L->words.n = 0;
    if (o->word_order == 0) return;
    /* str.split()'s words; one longer than a character loses a final (else an initial) ASCII
     * punctuation mark to a word of its own */
    for (size_t i = 0; i < s->n;) {
        while (i < s->n && is_space(s->c[i])) i++;
        size_t j = i;
        while (j < s->n && !is_space(s->c[j])) j++;
        if (j - i > 1 && is_ascii_punct(s->c[j - 1])) {
            push_word(s->c + i, j - 1 - i, &x->v, &L->words);
            push_word(s->c + j - 1, 1, &x->v, &L->words);
        } else if (j - i > 1 && is_ascii_punct(s->c[i])) {
            push_word(s->c + i, 1, &x->v, &L->words);
            push_word(s->c + i + 1, j - i - 1, &x->v, &L->words);
        } else if (j > i) {
            push_word(s->c + i, j - i, &x->v, &L->words);
        }
        i = j;
    }
    count_grams(&L->wg, L->words.id, L->words.n, 1, o->word_order);
}

/* st[3 k .. 3 k + 2] for each order k (characters, then words): hypothesis n-grams (0 where
 * the reference has none of that order), reference n-grams, matches */
static void chrf_kind(const Grams *h, const Grams *r, int orders, double *st) {
    double ht[SB_MAX_ORDER] = {0}, rt[SB_MAX_ORDER] = {0}, m[SB_MAX_ORDER] = {0};
    match_grams(h->g, h->n, r->g, r->n, ht, m);
    for (size_t k = 0; k < r->n; k++) rt[r->g[k].n - 1] += (double)r->g[k].count;
    for (int k = 0; k < orders; k++) {
        st[3 * k] = rt[k] > 0 ? ht[k] : 0;
        st[3 * k + 1] = rt[k];
        st[3 * k + 2] = m[k];
    }
}

static double chrf_f(const SbChrfOpts *o, const double *st) {
    const double eps = 1e-16;
    int orders = o->char_order + o->word_order, eff = 0;
    double factor = (double)o->beta * o->beta, score = 0, avg_p = 0, avg_r = 0;
    for (int k = 0; k < orders; k++) {
        double nh = st[3 * k], nr = st[3 * k + 1], nm = st[3 * k + 2];
        double p = nh > 0 ? nm / nh : eps, r = nr > 0 ? nm / nr : eps, d = factor * p + r;
        score += d > 0 ? (1 + factor) * p * r / d : eps;
        if (nh > 0 && nr > 0) {
            avg_p += p;
            avg_r += r;
            eff++;
        }
    }
    if (o->eps_smoothing) return 100 * score / orders;
    if (eff == 0) avg_p = avg_r = 0;
    else {
        avg_p /= eff;
        avg_r /= eff;
    }
    if (avg_p + avg_r == 0) return 0.0;
    return 100 * (1 + factor) * avg_p * avg_r / (factor * avg_p + avg_r);
}

double sb_chrf(const SbChrfOpts *o, char *const *hyp, char *const *const *refs, int nrefs, int n) {
    S2S_ASSERT(o->char_order >= 0 && o->word_order >= 0 && o->char_order + o->word_order >= 1 && nrefs >= 1);
    S2S_ASSERT(o->char_order <= SB_MAX_ORDER && o->word_order <= SB_MAX_ORDER);
    int orders = o->char_order + o->word_order;
    Scratch x;
    memset(&x, 0, sizeof x);
    vocab_init(&x.v);
    ChrfLine h, r;
    memset(&h, 0, sizeof h);
    memset(&r, 0, sizeof r);
    double total[3 * 2 * SB_MAX_ORDER] = {0}, st[3 * 2 * SB_MAX_ORDER], best[3 * 2 * SB_MAX_ORDER];
    for (int i = 0; i < n; i++) {
        chrf_line(o, hyp[i], &x, &h);
        double best_f = -1.0;
        for (int k = 0; k < nrefs; k++) {
            chrf_line(o, refs[k][i], &x, &r);
            chrf_kind(&h.cg, &r.cg, o->char_order, st);
            chrf_kind(&h.wg, &r.wg, o->word_order, st + 3 * o->char_order);
            double f = chrf_f(o, st);
            if (f > best_f) { /* the first of equals */
                best_f = f;
                memcpy(best, st, (size_t)(3 * orders) * sizeof *st);
            }
        }
        for (int k = 0; k < 3 * orders; k++) total[k] += best[k];
    }
    double score = chrf_f(o, total);
    ChrfLine *ls[2] = {&h, &r};
    for (int k = 0; k < 2; k++) {
        free(ls[k]->chars.c);
        free(ls[k]->words.id);
        free(ls[k]->cg.g);
        free(ls[k]->wg.g);
    }
    scratch_free(&x);
    return score;
}

/* ---- formats ---- */

void sb_bleu_format(const SbBleuOpts *o, const SbBleu *s, int nrefs, int width, char *buf, size_t cap) {
    char smooth[32];
    double k = o->smooth_value >= 0 ? o->smooth_value : o->smooth == SB_SMOOTH_FLOOR ? 0.1 : 1.0;
    if (o->smooth == SB_SMOOTH_FLOOR || o->smooth == SB_SMOOTH_ADD_K) snprintf(smooth, sizeof smooth, "%s[%.2f]", SB_SMOOTH_NAMES[o->smooth], k);
    else snprintf(smooth, sizeof smooth, "%s", SB_SMOOTH_NAMES[o->smooth]);
    size_t w = (size_t)snprintf(buf, cap, "BLEU|nrefs:%d|case:%s|eff:no|tok:%s|smooth:%s|version:%s = %.*f ", nrefs,
                                o->lowercase ? "lc" : "mixed", SB_TOKENIZE_NAMES[o->tokenize], smooth, SACREBLEU_VERSION, width,
                                s->score);
    for (int m = 0; m < o->max_order && w < cap; m++)
        w += (size_t)snprintf(buf + w, cap - w, "%s%.1f", m ? "/" : "", s->precision[m]);
    if (w < cap)
        snprintf(buf + w, cap - w, " (BP = %.3f ratio = %.3f hyp_len = %ld ref_len = %ld)", s->bp, s->ratio, s->sys_len,
                 s->ref_len);
}

void sb_chrf_format(const SbChrfOpts *o, double score, int nrefs, int width, char *buf, size_t cap) {
    char plus[SB_MAX_ORDER + 1];
    int p = o->word_order < SB_MAX_ORDER ? o->word_order : SB_MAX_ORDER;
    memset(plus, '+', (size_t)p);
    plus[p] = '\0';
    snprintf(buf, cap, "chrF%d%s|nrefs:%d|case:%s|eff:%s|nc:%d|nw:%d|space:%s|version:%s = %.*f", o->beta, plus, nrefs,
             o->lowercase ? "lc" : "mixed", o->eps_smoothing ? "no" : "yes", o->char_order, o->word_order,
             o->whitespace ? "yes" : "no", SACREBLEU_VERSION, width, score);
}
