/* compare_report.c — a comparison's summary files: Markdown (printed too), CSV, JSON, the
 * bar chart of the test metric and the validation curves; and the whole table made from the
 * runs' folders (compare_tabulate: compare_runs.c reads, compare_stats.c tests, this writes). */
#include "s2s/report.h"
#include "s2s/file.h"
#include "s2s/viz.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* a figure the runs do not have (a fixed system's loss, outputs' token accuracy) is a dash */
static void fmt_stat(char *b, size_t n, const Stat *s, int digits) {
    if (!isfinite(s->mean)) snprintf(b, n, "—");
    else if (s->n > 1) snprintf(b, n, "%.*f ± %.*f", digits, s->mean, digits, s->sd);
    else snprintf(b, n, "%.*f", digits, s->mean);
}

/* a sample variance needs two runs: one run shows a dash, not a zero */
static void fmt_var(char *b, size_t n, const Stat *s, int digits) {
    if (s->n > 1 && isfinite(s->var)) snprintf(b, n, "%.*f", digits, s->var);
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
             c->translation ? c->metric_name : "exact match");
    Plot p = {title, "epoch", c->metric_name, x, n, {{0}}, 0};
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

/* summary.md: the homework's table (mean and variance of the test metric and of the best
 * validation loss), with sd, range, epochs, time and the tests. Time is the sum of the
 * training epochs (validation and test decoding excluded). */
static void summary_md(const Comparison *c, Text *t) {
#define MD(...) text_add(t, __VA_ARGS__)
    if (c->outputs[0])
        MD("Test outputs: each run's %s, scored here (not its log's test line, which scores test.hyp).\n\n", c->outputs);
    MD("| %s | runs | test %s (mean ± sd) | variance | min | max |%s best valid loss (mean ± sd) | variance | epochs | "
       "minutes training |\n",
       c->header[0] ? c->header : "attention", c->metric_name, c->translation ? "" : " token acc (%) |");
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
        char ep[32] = "—", mins[32] = "—";
        if (!s->fixed) {
            snprintf(ep, sizeof ep, "%.1f", s->epochs.mean);
            snprintf(mins, sizeof mins, "%.1f", s->seconds.mean / 60.0);
        }
        MD("| %s | %d | %s | %s | %.2f | %.2f |%s %s | %s | %s | %s |\n", s->name, s->runs, m, mv, s->metric.min,
           s->metric.max, c->translation ? "" : ta, vl, vv, ep, mins);
    }
    /* every run's test metric, by seed: the values behind the means */
    MD("\nTest %s by run (seed: value):\n\n", c->metric_name);
    for (int v = 0; v < c->n_variants; v++) {
        const VariantSummary *s = &c->v[v];
        if (s->fixed) {
            MD("- %s (the outputs %s): %.2f\n", s->name, s->outputs, s->metric.mean);
            continue;
        }
        MD("- %s:", s->name);
        for (int i = 0; i < s->n_points; i++) MD("%s %ld: %.2f", i ? "," : "", s->point_seeds[i], s->points[i]);
        MD("%s\n", s->runs > s->n_points ? ", …" : "");
    }
    if (c->n_pairs) {
        bool fixed = false;
        for (int v = 0; v < c->n_variants; v++) fixed |= c->v[v].fixed;
        MD("\nPaired bootstrap over the test sentences (%d resamples, runs paired by seed%s):\n\n", c->resamples,
           fixed ? "; a fixed system with every run" : "");
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
#undef MD
}

/* summary.csv: a row a variant */
static void summary_csv(const Comparison *c, Text *t) {
#define MD(...) text_add(t, __VA_ARGS__)
    /* new columns go at the end, so readers by position keep working */
    MD("variant,runs,metric,mean,sd,variance,min,max,token_acc_mean,valid_loss_mean,epochs_mean,seconds_mean,"
       "token_acc_sd,valid_loss_sd,valid_loss_variance,valid_loss_min,valid_loss_max\n");
    for (int v = 0; v < c->n_variants; v++) {
        const VariantSummary *s = &c->v[v];
        MD("%s,%d,%s,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.2f,%.1f,%.6f,%.6f,%.6f,%.6f,%.6f\n", s->name, s->runs,
           c->metric_key, s->metric.mean, s->metric.sd, s->metric.var, s->metric.min, s->metric.max,
           s->token_acc.mean, s->valid_loss.mean, s->epochs.mean, s->seconds.mean, s->token_acc.sd, s->valid_loss.sd,
           s->valid_loss.var, s->valid_loss.min, s->valid_loss.max);
    }
#undef MD
}

/* summary.json: every variant's statistics, runs and curve, and the paired tests */
static char *summary_json(const Comparison *c) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "metric", c->metric_key);
    cJSON_AddStringToObject(j, "varies", c->header);
    if (c->outputs[0]) cJSON_AddStringToObject(j, "outputs", c->outputs);
    cJSON *vs = cJSON_AddArrayToObject(j, "variants");
    for (int v = 0; v < c->n_variants; v++) {
        const VariantSummary *s = &c->v[v];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "attention", s->name); /* the variant's name, under its first key's name */
        cJSON_AddStringToObject(o, "variant", s->name);
        cJSON_AddNumberToObject(o, "runs", s->runs);
        if (s->fixed) cJSON_AddStringToObject(o, "outputs", s->outputs); /* a fixed system */
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
    return txt;
}

/* summary.png: bars (mean) with ±sd error bars and a point for every run; then curves.png */
static S2sStatus summary_pictures(const Comparison *c, const char *dir, S2sError *err) {
    char path[700];
    S2sStatus st;
    Font *font = font_open(NULL);
    BarGroup g[COMPARE_MAX_VARIANTS];
    for (int v = 0; v < c->n_variants; v++) {
        const Stat *m = &c->v[v].metric;
        g[v] = (BarGroup){c->v[v].name, m->mean, m->sd, m->max, m->n, c->v[v].points, c->v[v].n_points};
    }
    char title[COMPARE_NAME + 64];
    snprintf(title, sizeof title, "test %s by %s (mean ± sd; dots: runs)", c->metric_name,
             c->header[0] && strcmp(c->header, "attention") ? c->header : "attention variant");
    BarChart chart = {title, g, c->n_variants};
    snprintf(path, sizeof path, "%s/summary.png", dir);
    st = bars_write_png(path, &chart, font, err);
    if (!st) st = write_curves(c, dir, font, err);
    font_close(font);
    return st;
}

S2sStatus compare_write(const Comparison *c, const char *dir, FILE *out, S2sError *err) {
    Text tx = {s2s_xmalloc(4096), 0, 4096};
    summary_md(c, &tx);
    char path[700];
    snprintf(path, sizeof path, "%s/summary.md", dir);
    S2sStatus st = file_write_atomic(path, tx.s, tx.len, err);
    if (out) fputs(tx.s, out);
    if (!st) {
        tx.len = 0;
        summary_csv(c, &tx);
        snprintf(path, sizeof path, "%s/summary.csv", dir);
        st = file_write_atomic(path, tx.s, tx.len, err);
    }
    free(tx.s);
    if (!st) {
        char *txt = summary_json(c);
        snprintf(path, sizeof path, "%s/summary.json", dir);
        st = file_write_atomic(path, txt, strlen(txt), err);
        free(txt);
    }
    return st ? st : summary_pictures(c, dir, err);
}


int compare_tabulate(const CompareInput *in, int n, const char *outputs, const char *outdir, FILE *out, FILE *errs) {
    S2sError err;
    int bad = 0, n_ok = 0, n_fixed = 0;
    RunResult *res = s2s_xcalloc((size_t)(n ? n : 1), sizeof *res);
    for (int i = 0; i < n; i++) {
        S2S_ASSERT(in[i].fixed || !n_fixed); /* systems come after the runs, whose references they take */
        if (in[i].fixed) {
            n_fixed++;
            if (bad || !n_ok) continue;
            if (compare_read_system(&res[n_ok], in[i].label, in[i].path, &res[0], &err)) {
                fprintf(errs, "compare: --against %s\n", err.msg);
                bad++;
            } else n_ok++;
        } else if (compare_read_run(&res[n_ok], in[i].path, outputs, &err)) {
            fprintf(errs, "compare: %s\n", err.msg);
            bad++;
        } else {
            memcpy(res[n_ok++].label, in[i].label, sizeof in[i].label);
        }
    }
    Comparison c;
    if (n_fixed && (bad || !n_ok)) {
        fprintf(errs, "compare: no table: %s\n", n_ok ? "a system is tested against every run, so every run must be read" : "no run was read");
        bad += !bad;
    } else if (compare_summarize(res, n_ok, 1000, &c, &err) ||
               file_mkdirs(outdir, &err) || compare_write(&c, outdir, out, &err)) {
        fprintf(errs, "compare: %s\n", err.msg);
        bad++;
    } else {
        fprintf(out, "compare: %s/summary.{md,csv,json,png}\n", outdir);
    }
    for (int i = 0; i < n_ok; i++) compare_free_run(&res[i]);
    free(res);
    return bad;
}
