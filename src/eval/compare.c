/* compare.c — run results, statistics, paired bootstrap, the summary files. */
#include "s2s/compare.h"
#include "s2s/bleu.h"
#include "s2s/file.h"
#include "s2s/config.h"
#include "s2s/data.h"
#include "s2s/rng.h"
#include "s2s/rundir.h"
#include "s2s/runlog.h"
#include "s2s/viz.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void compare_free_run(RunResult *r) {
    text_free_lines(r->hyp, r->hyp ? r->n : 0);
    text_free_lines(r->ref, r->ref ? r->n : 0);
    r->hyp = r->ref = NULL;
}

static void note_test(void *ctx, const char *type, const cJSON *j) {
    (void)j;
    if (!strcmp(type, LOG_TEST)) *(bool *)ctx = true;
}

bool compare_run_finished(const char *dir) {
    bool done = false;
    S2sError err;
    return runlog_each(dir, note_test, &done, &err) == S2S_OK && done;
}

typedef struct LogRead {
    RunResult *r;
    bool finished;
} LogRead;

static void read_line_of(void *ctx, const char *type, const cJSON *j) {
    LogRead *lr = ctx;
    RunResult *r = lr->r;
    if (!strcmp(type, LOG_EPOCH)) {
        r->best_valid_loss = fmin(r->best_valid_loss, runlog_num(j, LOG_VALID_ LOG_LOSS, INFINITY));
        r->seconds += runlog_num(j, LOG_EPOCH_S, 0.0);
        int e = (int)runlog_num(j, LOG_EPOCH, 0);
        if (e >= 1 && e <= COMPARE_MAX_EPOCHS) {
            for (int k = r->curve_n; k < e - 1; k++) r->valid_curve[k] = NAN; /* a gap */
            r->valid_curve[e - 1] =
                r->translation ? runlog_num(j, LOG_VALID_ LOG_BLEU, NAN) : 100.0 * runlog_num(j, LOG_VALID_ LOG_EXACT_MATCH, NAN);
            if (e > r->curve_n) r->curve_n = e;
        }
    } else if (!strcmp(type, LOG_TEST)) {
        lr->finished = true;
        r->epochs = (int)runlog_num(j, LOG_EPOCHS, 0);
        r->test_bleu = runlog_num(j, LOG_TEST_ LOG_BLEU, NAN);
        r->test_exact = 100.0 * runlog_num(j, LOG_TEST_ LOG_EXACT_MATCH, NAN);
        r->test_token_acc = 100.0 * runlog_num(j, LOG_TEST_ LOG_TOKEN_ACCURACY, NAN);
    }
}

S2sStatus compare_read_run(RunResult *r, const char *dir, S2sError *err) {
    memset(r, 0, sizeof *r);
    snprintf(r->dir, sizeof r->dir, "%s", dir);
    char p[600];
    snprintf(p, sizeof p, "%s/config.json", dir);
    Config cfg;
    config_defaults(&cfg);
    S2sStatus st = config_load(&cfg, p, err);
    if (st) return st;
    snprintf(r->variant, sizeof r->variant, "%s", ATTN_KIND_NAMES[cfg.model.attention]);
    r->seed = cfg.seed;
    r->translation = cfg.task.type == TASK_TRANSLATE;
    long pid;
    if (file_lock_held(dir, &pid))
        return s2s_fail(err, S2S_ERR_DATA, "%s: a run trains there now (pid %ld); its results are not final", dir, pid);
    r->best_valid_loss = INFINITY;
    LogRead lr = {r, false};
    if ((st = runlog_each(dir, read_line_of, &lr, err))) return st;
    if (!lr.finished) return s2s_fail(err, S2S_ERR_DATA, "%s: the run has not finished (no test line in its log)", dir);
    int nh, nr;
    snprintf(p, sizeof p, "%s/test.hyp", dir);
    if ((st = text_read_lines(p, &r->hyp, &nh, err))) return st;
    snprintf(p, sizeof p, "%s/test.ref", dir);
    if ((st = text_read_lines(p, &r->ref, &nr, err))) {
        text_free_lines(r->hyp, nh);
        r->hyp = NULL;
        return st;
    }
    r->n = nh;
    if (nh != nr) {
        compare_free_run(r);
        return s2s_fail(err, S2S_ERR_DATA, "%s: test.hyp has %d lines, test.ref %d", dir, nh, nr);
    }
    return S2S_OK;
}

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

/* Per-sentence statistics: BLEU's n-gram counts, or exact match. */
typedef struct SentStats {
    long c[4], t[4], hl, rl;
    int exact;
} SentStats;

static SentStats *sentence_stats(const RunResult *r) {
    SentStats *s = s2s_xcalloc((size_t)r->n, sizeof *s);
    for (int i = 0; i < r->n; i++) {
        Bleu b;
        bleu_init(&b);
        bleu_add_text(&b, r->hyp[i], r->ref[i]);
        memcpy(s[i].c, b.correct, sizeof s[i].c);
        memcpy(s[i].t, b.total, sizeof s[i].t);
        s[i].hl = b.hyp_len;
        s[i].rl = b.ref_len;
        s[i].exact = strcmp(r->hyp[i], r->ref[i]) == 0;
        bleu_free(&b);
    }
    return s;
}

/* The metric over a multiset of sentences (idx), as the full-corpus metric would be. */
static double metric_on(const SentStats *s, const int *idx, int n, bool bleu) {
    if (!bleu) {
        long e = 0;
        for (int i = 0; i < n; i++) e += s[idx[i]].exact;
        return n ? 100.0 * e / n : 0.0;
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

S2sStatus compare_summarize(const RunResult *runs, int n, int resamples, Comparison *c, S2sError *err) {
    memset(c, 0, sizeof *c);
    if (n == 0) return s2s_fail(err, S2S_ERR_DATA, "no finished runs to compare");
    c->translation = runs[0].translation;
    c->metric_name = c->translation ? "BLEU" : "exact match (%)";
    c->resamples = resamples;
    int *var_of = s2s_xmalloc((size_t)n * sizeof *var_of);
    for (int i = 0; i < n; i++) {
        if (runs[i].translation != c->translation) {
            free(var_of);
            return s2s_fail(err, S2S_ERR_DATA, "%s: a %s run among %s runs", runs[i].dir, runs[i].translation ? "translation" : "reversal",
                            c->translation ? "translation" : "reversal");
        }
        int v = 0;
        while (v < c->n_variants && strcmp(c->v[v].name, runs[i].variant)) v++;
        if (v == c->n_variants) {
            if (v == COMPARE_MAX_VARIANTS) {
                free(var_of);
                return s2s_fail(err, S2S_ERR_DATA, "more than %d variants", COMPARE_MAX_VARIANTS);
            }
            snprintf(c->v[c->n_variants++].name, sizeof c->v[0].name, "%s", runs[i].variant);
        }
        var_of[i] = v;
    }
    double *buf = s2s_xmalloc((size_t)n * 5 * sizeof *buf);
    for (int v = 0; v < c->n_variants; v++) {
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
    free(buf);
    /* paired bootstrap between every two variants, over the seeds both have */
    SentStats **ss = s2s_xmalloc((size_t)n * sizeof *ss);
    for (int i = 0; i < n; i++) ss[i] = sentence_stats(&runs[i]);
    for (int a = 0; a < c->n_variants; a++)
        for (int b = a + 1; b < c->n_variants; b++) {
            int *pa = s2s_xmalloc((size_t)n * sizeof *pa), *pb = s2s_xmalloc((size_t)n * sizeof *pb), np = 0;
            for (int i = 0; i < n; i++) {
                if (var_of[i] != a) continue;
                for (int j = 0; j < n; j++)
                    if (var_of[j] == b && runs[j].seed == runs[i].seed && runs[j].n == runs[i].n) {
                        pa[np] = i;
                        pb[np++] = j;
                        break;
                    }
            }
            PairTest *pt = &c->pairs[c->n_pairs++];
            *pt = (PairTest){a, b, np, NAN, NAN, NAN, NAN};
            if (!np) {
                free(pa);
                free(pb);
                continue;
            }
            int N = runs[pa[0]].n;
            int *idx = s2s_xmalloc((size_t)N * sizeof *idx);
            for (int i = 0; i < N; i++) idx[i] = i;
            double d = 0;
            for (int s = 0; s < np; s++) d += metric_on(ss[pa[s]], idx, N, c->translation) - metric_on(ss[pb[s]], idx, N, c->translation);
            pt->diff = d / np;
            double *diffs = s2s_xmalloc((size_t)resamples * sizeof *diffs);
            Rng rng;
            rng_init(&rng, 12345, 77);
            int against = 0;
            for (int k = 0; k < resamples; k++) {
                for (int i = 0; i < N; i++) idx[i] = (int)rng_below(&rng, (uint32_t)N);
                double x = 0;
                for (int s = 0; s < np; s++)
                    x += metric_on(ss[pa[s]], idx, N, c->translation) - metric_on(ss[pb[s]], idx, N, c->translation);
                diffs[k] = x / np;
                against += pt->diff >= 0 ? diffs[k] <= 0 : diffs[k] >= 0;
            }
            qsort(diffs, (size_t)resamples, sizeof *diffs, cmp_double);
            pt->lo = diffs[(int)(0.025 * (resamples - 1))];
            pt->hi = diffs[(int)ceil(0.975 * (resamples - 1))];
            pt->p = (double)against / resamples;
            free(diffs);
            free(idx);
            free(pa);
            free(pb);
        }
    for (int i = 0; i < n; i++) free(ss[i]);
    free(ss);
    free(var_of);
    return S2S_OK;
}

static void fmt_stat(char *b, size_t n, const Stat *s, int digits) {
    if (s->n > 1) snprintf(b, n, "%.*f ± %.*f", digits, s->mean, digits, s->sd);
    else snprintf(b, n, "%.*f", digits, s->mean);
}

/* a sample variance needs two runs: one run shows a dash, not a zero */
static void fmt_var(char *b, size_t n, const Stat *s, int digits) {
    if (s->n > 1) snprintf(b, n, "%.*f", digits, s->var);
    else snprintf(b, n, "—");
}

/* curves.png: the validation metric by epoch, one line per variant (mean over its runs):
 * whether a variant had converged when training stopped. */
static S2sStatus write_curves(const Comparison *c, const char *dir, Font *font, S2sError *err) {
    static const Rgb colors[PLOT_MAX_SERIES] = {{31, 119, 180}, {255, 127, 14}, {44, 160, 44},  {214, 39, 40},
                                                {148, 103, 189}, {140, 86, 75},  {227, 119, 194}, {127, 127, 127}};
    int n = 0;
    for (int v = 0; v < c->n_variants; v++) n = c->v[v].curve_n > n ? c->v[v].curve_n : n;
    if (n == 0) return S2S_OK; /* no epoch lines: nothing to draw */
    double x[COMPARE_MAX_EPOCHS], y[PLOT_MAX_SERIES][COMPARE_MAX_EPOCHS];
    char title[96];
    snprintf(title, sizeof title, "validation %s, mean over seeds",
             c->translation ? "BLEU" : "exact match");
    Plot p = {title, "epoch", c->translation ? "BLEU" : "exact match (%)", x, n, {{0}}, 0};
    for (int e = 0; e < n; e++) x[e] = e + 1;
    for (int v = 0; v < c->n_variants && v < PLOT_MAX_SERIES; v++) {
        for (int e = 0; e < n; e++) y[v][e] = e < c->v[v].curve_n ? c->v[v].curve[e] : NAN;
        p.series[p.n_series++] = (Series){c->v[v].name, y[v], colors[v]};
    }
    char path[700];
    snprintf(path, sizeof path, "%s/curves.png", dir);
    return plot_write_png(path, &p, font, err);
}

/* A growing text buffer for the Markdown and CSV files. */
typedef struct Text {
    char *s;
    size_t len, cap;
} Text;

__attribute__((format(printf, 2, 3))) static void text_add(Text *t, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        S2S_ASSERT(n >= 0);
        if ((size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        t->cap = 2 * (t->cap + (size_t)n);
        t->s = s2s_xrealloc(t->s, t->cap);
    }
}

S2sStatus compare_write(const Comparison *c, const char *dir, FILE *out, S2sError *err) {
    /* Markdown: the homework's table (mean and variance of the test metric and of the best
     * validation loss), with sd, range, epochs, time and the tests. Time is the sum of the
     * training epochs (validation and test decoding excluded). */
    Text tx = {s2s_xmalloc(4096), 0, 4096};
#define MD(...) text_add(&tx, __VA_ARGS__)
    MD("| attention | runs | test %s (mean ± sd) | variance | min | max |%s best valid loss (mean ± sd) | variance | epochs | "
       "minutes training |\n",
       c->metric_name, c->translation ? "" : " token acc (%) |");
    MD("|---|---|---|---|---|---|%s---|---|---|---|\n", c->translation ? "" : "---|");
    for (int v = 0; v < c->n_variants; v++) {
        const VariantSummary *s = &c->v[v];
        char m[64], mv[32], ta[64] = "", vl[64], vv[32];
        /* the homework's precision: BLEU 2 decimals, variance 3; loss 3, its variance 4 */
        fmt_stat(m, sizeof m, &s->metric, 2);
        fmt_var(mv, sizeof mv, &s->metric, 3);
        fmt_stat(vl, sizeof vl, &s->valid_loss, 3);
        fmt_var(vv, sizeof vv, &s->valid_loss, 4);
        if (!c->translation) {
            ta[0] = ' ';
            fmt_stat(ta + 1, sizeof ta - 1, &s->token_acc, 2);
            strcat(ta, " |");
        }
        MD("| %s | %d | %s | %s | %.2f | %.2f |%s %s | %s | %.1f | %.1f |\n", s->name, s->runs, m, mv, s->metric.min,
           s->metric.max, c->translation ? "" : ta, vl, vv, s->epochs.mean, s->seconds.mean / 60.0);
    }
    /* every run's test metric, by seed: the values behind the means */
    MD("\nTest %s by run (seed: value):\n\n", c->metric_name);
    for (int v = 0; v < c->n_variants; v++) {
        const VariantSummary *s = &c->v[v];
        MD("- %s:", s->name);
        for (int i = 0; i < s->n_points; i++) MD("%s %ld: %.2f", i ? "," : "", s->point_seeds[i], s->points[i]);
        MD("%s\n", s->runs > s->n_points ? ", …" : "");
    }
    if (c->n_pairs) {
        MD("\nPaired bootstrap over the test sentences (%d resamples, runs paired by seed):\n\n", c->resamples);
        MD("| A − B | seeds | difference | 95%% interval | p |\n|---|---|---|---|---|\n");
        for (int i = 0; i < c->n_pairs; i++) {
            const PairTest *p = &c->pairs[i];
            if (!p->seeds) MD("| %s − %s | 0 | | | |\n", c->v[p->a].name, c->v[p->b].name);
            else if (p->p > 0)
                MD("| %s − %s | %d | %+.2f | [%+.2f, %+.2f] | %.3f |\n", c->v[p->a].name, c->v[p->b].name, p->seeds, p->diff,
                   p->lo, p->hi, p->p);
            else /* no resample went the other way: p is below one in `resamples` */
                MD("| %s − %s | %d | %+.2f | [%+.2f, %+.2f] | < %.3f |\n", c->v[p->a].name, c->v[p->b].name, p->seeds,
                   p->diff, p->lo, p->hi, 1.0 / c->resamples);
        }
    }
    char path[700];
    snprintf(path, sizeof path, "%s/summary.md", dir);
    S2sStatus st = file_write_atomic(path, tx.s, tx.len, err);
    if (out) fputs(tx.s, out);
    /* CSV */
    tx.len = 0;
    /* new columns go at the end, so readers by position keep working */
    MD("variant,runs,metric,mean,sd,variance,min,max,token_acc_mean,valid_loss_mean,epochs_mean,seconds_mean,"
       "token_acc_sd,valid_loss_sd,valid_loss_variance,valid_loss_min,valid_loss_max\n");
    for (int v = 0; v < c->n_variants && !st; v++) {
        const VariantSummary *s = &c->v[v];
        MD("%s,%d,%s,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.2f,%.1f,%.6f,%.6f,%.6f,%.6f,%.6f\n", s->name, s->runs,
           c->translation ? "bleu" : "exact_match", s->metric.mean, s->metric.sd, s->metric.var, s->metric.min, s->metric.max,
           s->token_acc.mean, s->valid_loss.mean, s->epochs.mean, s->seconds.mean, s->token_acc.sd, s->valid_loss.sd,
           s->valid_loss.var, s->valid_loss.min, s->valid_loss.max);
    }
    snprintf(path, sizeof path, "%s/summary.csv", dir);
    if (!st) st = file_write_atomic(path, tx.s, tx.len, err);
#undef MD
    free(tx.s);
    /* JSON */
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "metric", c->translation ? "bleu" : "exact_match");
    cJSON *vs = cJSON_AddArrayToObject(j, "variants");
    for (int v = 0; v < c->n_variants; v++) {
        const VariantSummary *s = &c->v[v];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "attention", s->name);
        cJSON_AddNumberToObject(o, "runs", s->runs);
        const Stat *st4[5] = {&s->metric, &s->token_acc, &s->valid_loss, &s->epochs, &s->seconds};
        const char *names[5] = {"test_metric", "test_token_accuracy", "best_valid_loss", "epochs", "seconds"};
        for (int k = 0; k < 5; k++) {
            if (k == 1 && c->translation) continue;
            cJSON *x = cJSON_AddObjectToObject(o, names[k]);
            cJSON_AddNumberToObject(x, "mean", st4[k]->mean);
            cJSON_AddNumberToObject(x, "variance", st4[k]->var);
            cJSON_AddNumberToObject(x, "sd", st4[k]->sd);
            cJSON_AddNumberToObject(x, "min", st4[k]->min);
            cJSON_AddNumberToObject(x, "max", st4[k]->max);
        }
        cJSON *rs = cJSON_AddArrayToObject(o, "by_seed"); /* [{seed, test_metric}] */
        for (int i = 0; i < s->n_points; i++) {
            cJSON *x = cJSON_CreateObject();
            cJSON_AddNumberToObject(x, "seed", (double)s->point_seeds[i]);
            cJSON_AddNumberToObject(x, "test_metric", s->points[i]);
            cJSON_AddItemToArray(rs, x);
        }
        cJSON *cv = cJSON_AddArrayToObject(o, "valid_curve"); /* by epoch, mean over runs; null: none */
        for (int e = 0; e < s->curve_n; e++)
            cJSON_AddItemToArray(cv, isfinite(s->curve[e]) ? cJSON_CreateNumber(s->curve[e]) : cJSON_CreateNull());
        cJSON_AddItemToArray(vs, o);
    }
    cJSON *ps = cJSON_AddArrayToObject(j, "paired_bootstrap");
    for (int i = 0; i < c->n_pairs; i++) {
        const PairTest *p = &c->pairs[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "a", c->v[p->a].name);
        cJSON_AddStringToObject(o, "b", c->v[p->b].name);
        cJSON_AddNumberToObject(o, "seeds", p->seeds);
        if (p->seeds) {
            cJSON_AddNumberToObject(o, "difference", p->diff);
            cJSON_AddNumberToObject(o, "ci_low", p->lo);
            cJSON_AddNumberToObject(o, "ci_high", p->hi);
            cJSON_AddNumberToObject(o, "p", p->p);
        }
        cJSON_AddItemToArray(ps, o);
    }
    cJSON_AddNumberToObject(j, "resamples", c->resamples);
    char *txt = cJSON_Print(j);
    cJSON_Delete(j);
    snprintf(path, sizeof path, "%s/summary.json", dir);
    if (!st) st = file_write_atomic(path, txt, strlen(txt), err);
    free(txt);
    /* bars (mean) with ±sd error bars and a point for every run */
    if (!st) {
        Font *font = font_open(NULL);
        int W = 100 + 120 * c->n_variants, H = 420, left = 60, top = 40, ph = 300;
        W = W < 460 ? 460 : W; /* room for the title */
        Image im;
        if ((st = image_new(&im, W, H, (Rgb){255, 255, 255}, err))) {
            font_close(font);
            return st;
        }
        double top_v = 0;
        for (int v = 0; v < c->n_variants; v++) top_v = fmax(top_v, fmax(c->v[v].metric.max, c->v[v].metric.mean + c->v[v].metric.sd));
        top_v = top_v > 0 ? ceil(top_v / 10.0) * 10.0 : 1.0;
        const Rgb bar = {31, 119, 180}, black = {20, 20, 20};
        image_line(&im, left, top, left, top + ph, black);
        image_line(&im, left, top + ph, W - 20, top + ph, black);
        for (int k = 0; k <= 5; k++) {
            char b[16];
            snprintf(b, sizeof b, "%.0f", top_v * k / 5);
            int y = top + ph - ph * k / 5;
            image_line(&im, left - 4, y, left, y, black);
            if (font) font_draw(font, &im, left - 8 - font_width(font, 11, b), y - 7, 11, b, black, false);
        }
#define Y(v) (top + ph - (int)lround((v) / top_v * ph))
        for (int v = 0; v < c->n_variants; v++) {
            const Stat *s = &c->v[v].metric;
            int x = left + 40 + v * 120;
            if (isfinite(s->mean)) image_fill_rect(&im, x, Y(s->mean), 60, top + ph - Y(s->mean), bar);
            if (s->n > 1 && isfinite(s->sd)) {
                image_line(&im, x + 30, Y(s->mean - s->sd), x + 30, Y(s->mean + s->sd), black);
                image_line(&im, x + 20, Y(s->mean + s->sd), x + 40, Y(s->mean + s->sd), black);
                image_line(&im, x + 20, Y(s->mean - s->sd), x + 40, Y(s->mean - s->sd), black);
            }
            /* runs as dots spread across the bar, so equal values stay visible */
            int np = c->v[v].n_points;
            for (int i = 0; i < np; i++) {
                double pv = c->v[v].points[i];
                if (!isfinite(pv)) continue;
                int px = x + 30 + (np > 1 ? (int)lround(40.0 * i / (np - 1)) - 20 : 0);
                image_fill_rect(&im, px - 3, Y(pv) - 3, 7, 7, (Rgb){255, 127, 14});
                image_fill_rect(&im, px - 2, Y(pv) - 2, 5, 5, (Rgb){255, 187, 120});
            }
            if (font) {
                font_draw(font, &im, x + 30 - font_width(font, 12, c->v[v].name) / 2, top + ph + 8, 12, c->v[v].name, black, false);
                char b[32];
                snprintf(b, sizeof b, "%.2f", s->mean);
                double above = fmax(s->max, s->mean + (s->n > 1 ? s->sd : 0.0)); /* clear of the dots and the bar */
                font_draw(font, &im, x + 30 - font_width(font, 11, b) / 2, Y(above) - 20, 11, b, black, false);
            }
        }
#undef Y
        if (font) {
            char t[96];
            snprintf(t, sizeof t, "test %s by attention variant (mean ± sd; dots: runs)", c->metric_name);
            font_draw(font, &im, left, 10, 14, t, black, false);
        }
        snprintf(path, sizeof path, "%s/summary.png", dir);
        st = png_write(path, &im, err);
        image_free(&im);
        if (!st) st = write_curves(c, dir, font, err);
        font_close(font);
    }
    return st;
}
