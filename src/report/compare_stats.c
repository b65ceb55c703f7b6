/* compare_stats.c — the statistics of a comparison: mean, variance and range per variant, and
 * paired bootstrap tests between variants over the test sentences. */
#include "s2s/report.h"
#include "s2s/multibleu.h"
#include "s2s/rng.h"
#include "s2s/sacrebleu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

Stat compare_stat(const double *x, int n) {
    Stat s = {n, 0, 0, 0, INFINITY, -INFINITY};
    if (n == 0) return (Stat){0, NAN, NAN, NAN, NAN, NAN};
    for (int i = 0; i < n; i++) {
        s.mean += x[i];
        s.min = fmin(s.min, x[i]);
        s.max = fmax(s.max, x[i]);
    }
    s.mean /= n;
    for (int i = 0; i < n; i++) s.var += (x[i] - s.mean) * (x[i] - s.mean);
    s.var = n > 1 ? s.var / (n - 1) : 0.0;
    s.sd = sqrt(s.var);
    return s;
}

/* Per-sentence statistics: BLEU's n-gram counts (multi-bleu's, or sacreBLEU's), or exact match. */
typedef struct SentStats {
    long c[4], t[4], hl, rl;
    SbStats sb;
    int exact;
} SentStats;

static SentStats *sentence_stats(const RunResult *r) {
    SentStats *s = s2s_xcalloc((size_t)(r->n ? r->n : 1), sizeof *s);
    if (r->sacre) {
        SbBleuOpts o = sb_bleu_defaults();
        SbStats *lines = s2s_xcalloc((size_t)(r->n ? r->n : 1), sizeof *lines);
        char *const *const refs[1] = {r->ref};
        sb_bleu_stats(&o, r->hyp, refs, 1, r->n, lines, NULL);
        for (int i = 0; i < r->n; i++) s[i].sb = lines[i];
        free(lines);
    }
    for (int i = 0; i < r->n; i++) {
        s[i].exact = strcmp(r->hyp[i], r->ref[i]) == 0;
        if (r->sacre) continue;
        Bleu b;
        bleu_init(&b);
        bleu_add_text(&b, r->hyp[i], r->ref[i]);
        memcpy(s[i].c, b.correct, sizeof s[i].c);
        memcpy(s[i].t, b.total, sizeof s[i].t);
        s[i].hl = b.hyp_len;
        s[i].rl = b.ref_len;
        bleu_free(&b);
    }
    return s;
}

/* The metric over a multiset of sentences (idx), as the full-corpus metric would be. */
static double metric_on(const SentStats *s, const int *idx, int n, const Comparison *c) {
    if (!c->translation) {
        long e = 0;
        for (int i = 0; i < n; i++) e += s[idx[i]].exact;
        return n ? 100.0 * e / n : 0.0;
    }
    if (c->sacre) {
        SbStats sum;
        memset(&sum, 0, sizeof sum);
        for (int i = 0; i < n; i++) sb_stats_add(&sum, &s[idx[i]].sb);
        SbBleuOpts o = sb_bleu_defaults();
        SbBleu b;
        sb_bleu_score(&o, &sum, &b);
        return b.score;
    }
    Bleu b;
    memset(&b, 0, sizeof b);
    for (int i = 0; i < n; i++) {
        const SentStats *x = &s[idx[i]];
        for (int k = 0; k < 4; k++) {
            b.correct[k] += x->c[k];
            b.total[k] += x->t[k];
        }
        b.hyp_len += x->hl;
        b.ref_len += x->rl;
    }
    return bleu_score(&b).bleu;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Each run's variant (var_of), the variants named in order of appearance; the runs must be
 * of one task and one BLEU. */
static S2sStatus group_runs(const RunResult *runs, int n, Comparison *c, int *var_of, S2sError *err) {
    for (int i = 0; i < n; i++) {
        if (runs[i].translation != c->translation)
            return s2s_fail(err, S2S_ERR_DATA, "%s: a %s run among %s runs", runs[i].dir, runs[i].translation ? "translation" : "reversal",
                            c->translation ? "translation" : "reversal");
        if (runs[i].sacre != c->sacre) /* two BLEUs: never in one table */
            return s2s_fail(err, S2S_ERR_DATA, "%s: a %s run among %s runs (sacreBLEU on raw text and multi-bleu on words do not compare)",
                            runs[i].dir, runs[i].sacre ? "subword" : "word", c->sacre ? "subword" : "word");
        int v = 0;
        while (v < c->n_variants && strcmp(c->v[v].name, runs[i].variant)) v++;
        if (v < c->n_variants && runs[i].fixed) /* a system of its own: never pooled with runs */
            return s2s_fail(err, S2S_ERR_DATA, "%s: its name, %s, is taken by another variant", runs[i].dir, runs[i].variant);
        if (v == c->n_variants) {
            if (v == COMPARE_MAX_VARIANTS) return s2s_fail(err, S2S_ERR_DATA, "more than %d variants", COMPARE_MAX_VARIANTS);
            snprintf(c->v[c->n_variants++].name, sizeof c->v[0].name, "%s", runs[i].variant);
        }
        var_of[i] = v;
    }
    return S2S_OK;
}

/* Variant v's statistics over its runs, its runs' metrics by seed, its mean validation curve. */
static void summarize_variant(const RunResult *runs, int n, const int *var_of, int v, Comparison *c, double *buf) {
    int k = 0;
    double *m = buf, *t = buf + n, *l = buf + 2 * n, *e = buf + 3 * n, *s = buf + 4 * n;
    for (int i = 0; i < n; i++) {
        if (var_of[i] != v) continue;
        m[k] = c->translation ? runs[i].test_bleu : runs[i].test_exact;
        t[k] = runs[i].test_token_acc;
        l[k] = runs[i].best_valid_loss;
        e[k] = runs[i].epochs;
        s[k] = runs[i].seconds;
        k++;
    }
    VariantSummary *vs = &c->v[v];
    vs->runs = k;
    for (int i = 0; i < n; i++)
        if (var_of[i] == v && runs[i].fixed) {
            vs->fixed = true;
            snprintf(vs->outputs, sizeof vs->outputs, "%s", runs[i].dir);
        }
    vs->n_points = 0;
    for (int i = 0; i < n && vs->n_points < COMPARE_MAX_POINTS; i++)
        if (var_of[i] == v) {
            vs->points[vs->n_points] = m[vs->n_points];
            vs->point_seeds[vs->n_points++] = runs[i].seed;
        }
    vs->curve_n = 0;
    for (int i = 0; i < n; i++)
        if (var_of[i] == v && runs[i].curve_n > vs->curve_n) vs->curve_n = runs[i].curve_n;
    for (int ep = 0; ep < vs->curve_n; ep++) {
        double sum = 0;
        int cnt = 0;
        for (int i = 0; i < n; i++)
            if (var_of[i] == v && ep < runs[i].curve_n && isfinite(runs[i].valid_curve[ep])) {
                sum += runs[i].valid_curve[ep];
                cnt++;
            }
        vs->curve[ep] = cnt ? sum / cnt : NAN;
    }
    vs->metric = compare_stat(m, k);
    vs->token_acc = compare_stat(t, k);
    vs->valid_loss = compare_stat(l, k);
    vs->epochs = compare_stat(e, k);
    vs->seconds = compare_stat(s, k);
}

/* The paired bootstrap of variants a and b over the seeds both have (runs pa[s], pb[s]). */
static void pair_test(SentStats **ss, const int *pa, const int *pb, int np, int N, int resamples, const Comparison *c,
                      PairTest *pt) {
    int *idx = s2s_xmalloc((size_t)N * sizeof *idx);
    for (int i = 0; i < N; i++) idx[i] = i;
    double d = 0;
    for (int s = 0; s < np; s++) d += metric_on(ss[pa[s]], idx, N, c) - metric_on(ss[pb[s]], idx, N, c);
    pt->diff = d / np;
    double *diffs = s2s_xmalloc((size_t)resamples * sizeof *diffs);
    Rng rng;
    rng_init(&rng, 12345, 77);
    int against = 0;
    for (int k = 0; k < resamples; k++) {
        for (int i = 0; i < N; i++) idx[i] = (int)rng_below(&rng, (uint32_t)N);
        double x = 0;
        for (int s = 0; s < np; s++) x += metric_on(ss[pa[s]], idx, N, c) - metric_on(ss[pb[s]], idx, N, c);
        diffs[k] = x / np;
        against += pt->diff >= 0 ? diffs[k] <= 0 : diffs[k] >= 0;
    }
    qsort(diffs, (size_t)resamples, sizeof *diffs, cmp_double);
    pt->lo = diffs[(int)(0.025 * (resamples - 1))];
    pt->hi = diffs[(int)ceil(0.975 * (resamples - 1))];
    pt->p = (double)against / resamples;
    free(diffs);
    free(idx);
}

/* The metric of a run's whole outputs: for runs read with an outputs file, and fixed systems. */
static void score_outputs(RunResult *r, const SentStats *s, const Comparison *c) {
    int *idx = s2s_xmalloc((size_t)(r->n ? r->n : 1) * sizeof *idx);
    for (int i = 0; i < r->n; i++) idx[i] = i;
    double m = metric_on(s, idx, r->n, c);
    free(idx);
    if (c->translation) r->test_bleu = m;
    else r->test_exact = m;
    r->test_token_acc = NAN; /* the log's figure is of test.hyp, not of these outputs */
}

/* With a fixed system, every run must have been tested on its references. */
static S2sStatus same_references(const RunResult *runs, int n, S2sError *err) {
    const RunResult *f = &runs[n - 1];
    for (int i = 0; i < n - 1; i++) {
        bool same = runs[i].n == f->n;
        for (int k = 0; same && k < f->n; k++) same = !strcmp(runs[i].ref[k], f->ref[k]);
        if (!same)
            return s2s_fail(err, S2S_ERR_DATA, "%s: its test.ref is not the one %s is scored against", runs[i].dir, f->dir);
    }
    return S2S_OK;
}

/* Runs of variant a paired with runs of variant b: by seed, or each with a fixed system. */
static int pair_runs(const RunResult *runs, int n, const int *var_of, int a, int b, int *pa, int *pb) {
    int np = 0;
    for (int i = 0; i < n; i++) {
        if (var_of[i] != a) continue;
        for (int j = 0; j < n; j++)
            if (var_of[j] == b && (runs[i].fixed || runs[j].fixed || runs[j].seed == runs[i].seed) &&
                runs[j].n == runs[i].n) {
                pa[np] = i;
                pb[np++] = j;
                break;
            }
    }
    return np;
}

S2sStatus compare_summarize(RunResult *runs, int n, int resamples, Comparison *c, S2sError *err) {
    memset(c, 0, sizeof *c);
    if (n == 0) return s2s_fail(err, S2S_ERR_DATA, "no finished runs to compare");
    for (int i = 1; i < n; i++) S2S_ASSERT(runs[i].fixed || !runs[i - 1].fixed); /* fixed systems last */
    if (runs[0].fixed) return s2s_fail(err, S2S_ERR_DATA, "no finished runs to compare %s with", runs[0].variant);
    S2sStatus st = runs[n - 1].fixed ? same_references(runs, n, err) : S2S_OK;
    if (st) return st;
    compare_label_runs(runs, n, c->header);
    c->translation = runs[0].translation;
    c->sacre = runs[0].sacre;
    c->metric_name = !c->translation ? "exact match (%)" : c->sacre ? "sacreBLEU" : "BLEU";
    c->metric_key = !c->translation ? "exact_match" : c->sacre ? "sacrebleu" : "bleu";
    c->resamples = resamples;
    snprintf(c->outputs, sizeof c->outputs, "%s", runs[0].outputs);
    int *var_of = s2s_xmalloc((size_t)n * sizeof *var_of);
    if ((st = group_runs(runs, n, c, var_of, err))) {
        free(var_of);
        return st;
    }
    SentStats **ss = s2s_xmalloc((size_t)n * sizeof *ss);
    for (int i = 0; i < n; i++) {
        ss[i] = sentence_stats(&runs[i]);
        if (runs[i].fixed || runs[i].outputs[0]) score_outputs(&runs[i], ss[i], c);
    }
    double *buf = s2s_xmalloc((size_t)n * 5 * sizeof *buf);
    for (int v = 0; v < c->n_variants; v++) summarize_variant(runs, n, var_of, v, c, buf);
    free(buf);
    /* paired bootstrap between every two variants, over the seeds both have */
    int *pa = s2s_xmalloc((size_t)n * sizeof *pa), *pb = s2s_xmalloc((size_t)n * sizeof *pb);
    for (int a = 0; a < c->n_variants; a++)
        for (int b = a + 1; b < c->n_variants; b++) {
            int np = pair_runs(runs, n, var_of, a, b, pa, pb);
            PairTest *pt = &c->pairs[c->n_pairs++];
            *pt = (PairTest){a, b, np, NAN, NAN, NAN, NAN};
            if (np) pair_test(ss, pa, pb, np, runs[pa[0]].n, resamples, c, pt);
        }
    free(pa);
    free(pb);
    for (int i = 0; i < n; i++) free(ss[i]);
    free(ss);
    free(var_of);
    return S2S_OK;
}
