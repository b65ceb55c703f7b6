/* multibleu.c — multi-bleu.perl's corpus BLEU. */
#include "s2s/multibleu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void bleu_init(Bleu *b) {
    memset(b, 0, sizeof *b);
    vocab_init(&b->words);
}

void bleu_free(Bleu *b) {
    vocab_free(&b->words);
    free(b->buf);
    free(b->grams);
    memset(b, 0, sizeof *b);
}

static int cmp_gram(const void *a, const void *b) {
    const BleuGram *x = a, *y = b;
    for (int k = 0; k < 4; k++)
        if (x->w[k] != y->w[k]) return x->w[k] < y->w[k] ? -1 : 1;
    return 0;
}

/* The n-grams of ids[0..len) into g (unused words −1), sorted. */
static int grams(BleuGram *g, const int32_t *ids, int len, int n) {
    int k = len - n + 1;
    for (int i = 0; i < k; i++)
        for (int j = 0; j < 4; j++) g[i].w[j] = j < n ? ids[i + j] : -1;
    qsort(g, (size_t)(k > 0 ? k : 0), sizeof *g, cmp_gram);
    return k > 0 ? k : 0;
}

/* Clipped matches of order n: for each distinct hypothesis n-gram, min(count in hyp, count in
 * ref). Both sides sorted and walked together: O(L log L), so a sentence of a million tokens
 * costs seconds, not hours. */
static long clipped(Bleu *b, const int32_t *h, int nh, const int32_t *r, int nr, int n) {
    BleuGram *gh = b->grams, *gr = b->grams + nh;
    int kh = grams(gh, h, nh, n), kr = grams(gr, r, nr, n);
    long match = 0;
    for (int i = 0, j = 0; i < kh;) {
        int i2 = i;
        while (i2 < kh && cmp_gram(&gh[i2], &gh[i]) == 0) i2++;
        while (j < kr && cmp_gram(&gr[j], &gh[i]) < 0) j++;
        int j2 = j;
        while (j2 < kr && cmp_gram(&gr[j2], &gh[i]) == 0) j2++;
        match += i2 - i < j2 - j ? i2 - i : j2 - j;
        i = i2;
        j = j2;
    }
    return match;
}

void bleu_add_tokens(Bleu *b, const char *const *hyp, int nh, const char *const *ref, int nr) {
    if (!b->buf || nh + nr > b->cap) {
        b->cap = 2 * (nh + nr) + 16;
        b->buf = s2s_xrealloc(b->buf, (size_t)b->cap * sizeof *b->buf);
        b->grams = s2s_xrealloc(b->grams, (size_t)b->cap * sizeof *b->grams);
    }
    int32_t *h = b->buf, *r = b->buf + nh;
    for (int i = 0; i < nh; i++) h[i] = vocab_add(&b->words, hyp[i]);
    for (int i = 0; i < nr; i++) r[i] = vocab_add(&b->words, ref[i]);
    b->hyp_len += nh;
    b->ref_len += nr;
    for (int n = 1; n <= 4; n++) {
        if (nh >= n) b->total[n - 1] += nh - n + 1;
        b->correct[n - 1] += clipped(b, h, nh, r, nr, n);
    }
}

void bleu_add_text(Bleu *b, const char *hyp, const char *ref) {
    char *h = strdup(hyp), *r = strdup(ref);
    char **th = NULL, **tr = NULL;
    int ch = 0, cr = 0;
    int nh = text_split(h, &th, &ch), nr = text_split(r, &tr, &cr);
    bleu_add_tokens(b, (const char *const *)th, nh, (const char *const *)tr, nr);
    free(th);
    free(tr);
    free(h);
    free(r);
}

BleuScore bleu_score(const Bleu *b) {
    BleuScore s;
    memset(&s, 0, sizeof s);
    s.hyp_len = b->hyp_len;
    s.ref_len = b->ref_len;
    if (b->ref_len == 0) return s; /* multi-bleu prints all zeros here */
    double logsum = 0.0;
    bool zero = false;
    for (int n = 0; n < 4; n++) {
        double p = b->total[n] ? (double)b->correct[n] / (double)b->total[n] : 0.0;
        s.precision[n] = 100.0 * p;
        if (p == 0.0) zero = true; /* multi-bleu's my_log(0) = -9999999999 */
        else logsum += log(p);
    }
    s.ratio = (double)b->hyp_len / (double)b->ref_len;
    /* multi-bleu divides by the hypothesis length here; an empty output gets BP 0 */
    s.bp = b->hyp_len == 0 ? 0.0 : b->hyp_len < b->ref_len ? exp(1.0 - (double)b->ref_len / (double)b->hyp_len) : 1.0;
    s.bleu = zero ? 0.0 : 100.0 * s.bp * exp(logsum / 4.0);
    return s;
}

void bleu_format(const BleuScore *s, char *buf, size_t n) {
    if (s->ref_len == 0) {
        snprintf(buf, n, "BLEU = 0, 0/0/0/0 (BP=0, ratio=0, hyp_len=0, ref_len=0)");
        return;
    }
    snprintf(buf, n, "BLEU = %.2f, %.1f/%.1f/%.1f/%.1f (BP=%.3f, ratio=%.3f, hyp_len=%ld, ref_len=%ld)", s->bleu,
             s->precision[0], s->precision[1], s->precision[2], s->precision[3], s->bp, s->ratio, s->hyp_len, s->ref_len);
}
