/* bootstrap.c — the paired bootstrap test of two systems' sacreBLEU on the same lines
 * (sacrebleu.h; Koehn, 2004). */
#include "s2s/rng.h"
#include "s2s/sacrebleu.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* BLEU of the lines idx[0..n) (a multiset) of per-line statistics s. */
static double bleu_on(const SbBleuOpts *o, const SbStats *s, const int *idx, int n) {
    SbStats sum;
    memset(&sum, 0, sizeof sum);
    for (int i = 0; i < n; i++) sb_stats_add(&sum, &s[idx[i]]);
    SbBleu b;
    sb_bleu_score(o, &sum, &b);
    return b.score;
}

void sb_paired_bootstrap(const SbBleuOpts *o, const SbStats *a, const SbStats *b, int n, int resamples, uint64_t seed,
                         SbPaired *out) {
    S2S_ASSERT(n > 0 && resamples > 0);
    int *idx = s2s_xmalloc((size_t)n * sizeof *idx);
    for (int i = 0; i < n; i++) idx[i] = i;
    out->a = bleu_on(o, a, idx, n);
    out->b = bleu_on(o, b, idx, n);
    out->diff = out->b - out->a;
    double *diffs = s2s_xmalloc((size_t)resamples * sizeof *diffs);
    Rng rng;
    rng_init(&rng, seed, 77);
    int against = 0;
    for (int k = 0; k < resamples; k++) {
        for (int i = 0; i < n; i++) idx[i] = (int)rng_below(&rng, (uint32_t)n);
        diffs[k] = bleu_on(o, b, idx, n) - bleu_on(o, a, idx, n);
        against += out->diff >= 0 ? diffs[k] <= 0 : diffs[k] >= 0; /* the sign lost (or never had) */
    }
    qsort(diffs, (size_t)resamples, sizeof *diffs, cmp_double);
    out->lo = diffs[(int)(0.025 * (resamples - 1))];
    out->hi = diffs[(int)ceil(0.975 * (resamples - 1))];
    out->p = (double)against / resamples;
    free(diffs);
    free(idx);
}
