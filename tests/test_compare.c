/* test_compare.c — a reversal comparison (dummy vs dot, 3 seeds) end to end: its table
 * equals the runs' own logs, a second call trains nothing, and --runs tabulates the same;
 * the statistics by hand. */
#include "test_util.h"
#include "s2s/compare.h"
#include "s2s/viz.h"

#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

Test(compare, stat_by_hand) {
    double x[4] = {2, 4, 4, 6};
    Stat s = compare_stat(x, 4);
    cr_expect_float_eq(s.mean, 4.0, 1e-12);
    cr_expect_float_eq(s.var, 8.0 / 3.0, 1e-12, "sample variance (n − 1)");
    cr_expect_float_eq(s.sd, sqrt(8.0 / 3.0), 1e-12);
    cr_expect(s.min == 2 && s.max == 6);
    Stat one = compare_stat(x, 1);
    cr_expect(one.var == 0.0 && one.mean == 2.0);
}

/* From a run's own log: the test exact match (%) and the lowest validation loss of its epochs. */
static double from_log(const char *dir, bool valid_loss) {
    char p[1024];
    snprintf(p, sizeof p, "%s/log.jsonl", dir);
    FILE *f = fopen(p, "r");
    cr_assert(f != NULL, "%s", p);
    char line[1 << 14];
    double v = valid_loss ? INFINITY : NAN;
    while (fgets(line, sizeof line, f)) {
        const char *type = valid_loss ? "\"type\":\"epoch\"" : "\"type\":\"test\"";
        if (!strstr(line, type)) continue;
        cJSON *j = cJSON_Parse(line);
        if (valid_loss) v = fmin(v, cJSON_GetObjectItem(j, "valid_loss")->valuedouble);
        else v = 100.0 * cJSON_GetObjectItem(j, "test_exact_match")->valuedouble;
        cJSON_Delete(j);
    }
    fclose(f);
    return v;
}

/* A run's validation exact match (%) by epoch, from its log; returns the epochs read. */
static int curve_from_log(const char *dir, double *out, int cap) {
    char p[1024];
    snprintf(p, sizeof p, "%s/log.jsonl", dir);
    FILE *f = fopen(p, "r");
    cr_assert(f != NULL, "%s", p);
    char line[1 << 14];
    int n = 0;
    while (fgets(line, sizeof line, f) && n < cap) {
        if (!strstr(line, "\"type\":\"epoch\"")) continue;
        cJSON *j = cJSON_Parse(line);
        out[n++] = 100.0 * cJSON_GetObjectItem(j, "valid_exact_match")->valuedouble;
        cJSON_Delete(j);
    }
    fclose(f);
    return n;
}

Test(compare, reversal_table_equals_the_runs_logs, .timeout = 300) {
    const char *bin = tu_bin();
    char d[] = "/tmp/s2s_cmp_XXXXXX";
    cr_assert(mkdtemp(d) != NULL);
    char cfg[256], cmd[2048];
    snprintf(cfg, sizeof cfg, "%s/r.json", d);
    FILE *f = fopen(cfg, "w");
    fputs("{\"name\": \"r\", \"task\": {\"type\": \"reverse\", \"min_len\": 3, \"max_len\": 8, \"train_size\": 4000,"
          " \"valid_size\": 100, \"test_size\": 100, \"data_seed\": 5},"
          " \"model\": {\"cell\": \"gru\", \"embedding\": 16, \"encoder_hidden\": 48, \"decoder_hidden\": 48},"
          " \"train\": {\"lr\": 0.005, \"batch_size\": 32, \"epochs\": 4}}", f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s/compare --config %s --attention dummy,dot --seeds 1,2,3 --jobs 2 --out %s/cmp > %s/out.txt 2>&1",
             bin, cfg, d, d);
    cr_assert_eq(system(cmd), 0);
    char p[512];
    snprintf(p, sizeof p, "%s/cmp/summary.json", d);
    cJSON *s = tu_json_load(p);
    cr_assert(s != NULL);
    snprintf(p, sizeof p, "%s/cmp/summary.md", d);
    char *md = tu_slurp(p, NULL);
    cr_assert(md != NULL);
    const cJSON *vs = cJSON_GetObjectItem(s, "variants");
    cr_assert_eq(cJSON_GetArraySize(vs), 2);
    const char *names[2] = {"dummy", "dot"};
    double means[2];
    for (int v = 0; v < 2; v++) {
        const cJSON *x = cJSON_GetArrayItem(vs, v);
        cr_expect_str_eq(cJSON_GetObjectItem(x, "attention")->valuestring, names[v]);
        double m[3], l[3];
        for (int k = 0; k < 3; k++) {
            char run[600];
            snprintf(run, sizeof run, "%s/cmp/%s-seed%d", d, names[v], k + 1);
            m[k] = from_log(run, false);
            l[k] = from_log(run, true);
        }
        Stat st = compare_stat(m, 3), sl = compare_stat(l, 3);
        /* the Markdown row shows the same numbers, rounded */
        char row[512];
        snprintf(row, sizeof row, "| %s | 3 | %.2f ± %.2f | %.3f | %.2f | %.2f |", names[v], st.mean, st.sd, st.var, st.min, st.max);
        cr_expect(strstr(md, row), "row %s not in\n%s", row, md);
        snprintf(row, sizeof row, "| %.3f ± %.3f | %.4f |", sl.mean, sl.sd, sl.var);
        cr_expect(strstr(md, row), "valid loss %s not in\n%s", row, md);
        snprintf(row, sizeof row, "- %s: 1: %.2f, 2: %.2f, 3: %.2f\n", names[v], m[0], m[1], m[2]);
        cr_expect(strstr(md, row), "runs by seed %s not in\n%s", row, md);
        const cJSON *bs = cJSON_GetObjectItem(x, "by_seed");
        cr_assert_eq(cJSON_GetArraySize(bs), 3);
        for (int k = 0; k < 3; k++) {
            cr_expect_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(bs, k), "seed")->valuedouble, k + 1);
            cr_expect_float_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(bs, k), "test_metric")->valuedouble, m[k], 1e-9);
        }
        /* the validation curve (curves.png) is the mean of the runs' logged curves */
        double cv[3][8];
        for (int k = 0; k < 3; k++) {
            char run[600];
            snprintf(run, sizeof run, "%s/cmp/%s-seed%d", d, names[v], k + 1);
            cr_expect_eq(curve_from_log(run, cv[k], 8), 4, "4 epochs logged");
        }
        const cJSON *jc = cJSON_GetObjectItem(x, "valid_curve");
        cr_assert_eq(cJSON_GetArraySize(jc), 4);
        for (int e = 0; e < 4; e++)
            cr_expect_float_eq(cJSON_GetArrayItem(jc, e)->valuedouble, (cv[0][e] + cv[1][e] + cv[2][e]) / 3.0, 1e-9,
                               "%s epoch %d", names[v], e + 1);
        const cJSON *bl = cJSON_GetObjectItem(x, "best_valid_loss");
        cr_expect_float_eq(cJSON_GetObjectItem(bl, "mean")->valuedouble, sl.mean, 1e-9, "%s valid loss mean", names[v]);
        cr_expect_float_eq(cJSON_GetObjectItem(bl, "variance")->valuedouble, sl.var, 1e-9, "%s valid loss variance", names[v]);
        const cJSON *tm = cJSON_GetObjectItem(x, "test_metric");
        cr_expect_float_eq(cJSON_GetObjectItem(tm, "mean")->valuedouble, st.mean, 1e-9, "%s mean", names[v]);
        cr_expect_float_eq(cJSON_GetObjectItem(tm, "variance")->valuedouble, st.var, 1e-9, "%s variance", names[v]);
        cr_expect_float_eq(cJSON_GetObjectItem(tm, "min")->valuedouble, st.min, 1e-9);
        cr_expect_float_eq(cJSON_GetObjectItem(tm, "max")->valuedouble, st.max, 1e-9);
        means[v] = st.mean;
    }
    cr_expect_gt(means[1], means[0] + 20.0, "dot attention (%.1f) beats none (%.1f) on reversal", means[1], means[0]);
    const cJSON *pt = cJSON_GetArrayItem(cJSON_GetObjectItem(s, "paired_bootstrap"), 0);
    cr_expect_float_eq(cJSON_GetObjectItem(pt, "difference")->valuedouble, means[0] - means[1], 1e-9);
    cr_expect_lt(cJSON_GetObjectItem(pt, "p")->valuedouble, 0.05);
    cJSON_Delete(s);
    free(md);
    /* the picture: every run is a dot (orange outline) */
    snprintf(p, sizeof p, "%s/cmp/summary.png", d);
    Image im;
    S2sError err;
    cr_assert_eq(png_read(p, &im, &err), S2S_OK, "%s", err.msg);
    int orange = 0;
    for (int y = 0; y < im.h; y++)
        for (int x = 0; x < im.w; x++) {
            Rgb c = image_get(&im, x, y);
            orange += c.r == 255 && c.g == 127 && c.b == 14;
        }
    image_free(&im);
    /* a dot's ring is 24 pixels; dots at equal values may overlap */
    cr_expect(orange >= 24 * 2 && orange <= 24 * 6, "%d orange pixels for 6 runs", orange);
    const char *files[] = {"summary.md", "summary.csv", "summary.png", "curves.png"};
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/cmp/%s", d, files[i]);
        cr_expect(access(p, R_OK) == 0, "%s is written", files[i]);
    }
    /* again: nothing to train */
    snprintf(cmd, sizeof cmd, "%s/compare --config %s --attention dummy,dot --seeds 1,2,3 --out %s/cmp > %s/again.txt 2>&1", bin,
             cfg, d, d);
    cr_assert_eq(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "test $(grep -c 'finished earlier' %s/again.txt) -eq 6", d);
    cr_expect_eq(system(cmd), 0, "a second call skips the finished runs");
    /* existing runs only */
    snprintf(cmd, sizeof cmd, "%s/compare --runs %s/cmp/dot-seed1 %s/cmp/dot-seed2 --out %s/only > /dev/null 2>&1", bin, d, d, d);
    cr_expect_eq(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "rm -rf %s", d);
    system(cmd);
}
