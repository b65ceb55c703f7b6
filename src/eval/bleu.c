/* bleu.c — multi-bleu.perl's corpus BLEU. */
#include "s2s/bleu.h"

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
    memset(b, 0, sizeof *b);
}

static bool ngram_eq(const int32_t *a, const int32_t *b, int n) {
    for (int k = 0; k < n; k++)
        if (a[k] != b[k]) return false;
    return true;
}

/* Clipped matches of order n: for each distinct hypothesis n-gram, min(count in hyp, count in ref). */
static long clipped(const int32_t *h, int nh, const int32_t *r, int nr, int n) {
    long match = 0;
    for (int i = 0; i + n <= nh; i++) {
        bool first = true; /* count each distinct n-gram once, at its first occurrence */
        for (int j = 0; j < i && first; j++) first = !ngram_eq(h + i, h + j, n);
        if (!first) continue;
        long ch = 0, cr = 0;
        for (int j = i; j + n <= nh; j++) ch += ngram_eq(h + i, h + j, n);
        for (int j = 0; j + n <= nr; j++) cr += ngram_eq(h + i, r + j, n);
        match += ch < cr ? ch : cr;
    }
    return match;
}

void bleu_add_tokens(Bleu *b, const char *const *hyp, int nh, const char *const *ref, int nr) {
    if (!b->buf || nh + nr > b->cap) b->buf = s2s_xrealloc(b->buf, (size_t)(b->cap = 2 * (nh + nr) + 16) * sizeof *b->buf);
    int32_t *h = b->buf, *r = b->buf + nh;
    for (int i = 0; i < nh; i++) h[i] = vocab_add(&b->words, hyp[i]);
    for (int i = 0; i < nr; i++) r[i] = vocab_add(&b->words, ref[i]);
    b->hyp_len += nh;
    b->ref_len += nr;
    for (int n = 1; n <= 4; n++) {
        if (nh >= n) b->total[n - 1] += nh - n + 1;
        b->correct[n - 1] += clipped(h, nh, r, nr, n);
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
