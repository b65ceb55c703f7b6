/* test_viz.c — PNG files that read back, a heatmap whose cells have the colour of their
 * weights, labels drawn (or not, without a font), plots, and ./attend on every worked
 * exercise and on bad input. */
#include "test_util.h"
#include "s2s/viz.h"

#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char *tmp_png(const char *name) {
    static char p[128];
    snprintf(p, sizeof p, "/tmp/s2s_viz_%d_%s.png", (int)getpid(), name);
    return p;
}

Test(viz, png_round_trip) {
    Image im;
    S2sError err;
    cr_assert_eq(image_new(&im, 7, 5, (Rgb){10, 20, 30}, &err), S2S_OK);
    image_fill_rect(&im, 2, 1, 3, 2, (Rgb){200, 100, 50});
    char *p = tmp_png("rt");
    cr_assert_eq(png_write(p, &im, &err), S2S_OK, "%s", err.msg);
    Image back;
    cr_assert_eq(png_read(p, &back, &err), S2S_OK, "%s", err.msg);
    cr_expect(back.w == 7 && back.h == 5);
    cr_expect_eq(memcmp(back.rgb, im.rgb, 7 * 5 * 3), 0);
    image_free(&im);
    image_free(&back);
    unlink(p);
    cr_expect_eq(png_read("/nonexistent.png", &back, &err), S2S_ERR_IO);
}

Test(viz, colormap_is_monotone_in_brightness) {
    double last = -1;
    for (int i = 0; i <= 20; i++) {
        Rgb c = viz_colormap(i / 20.0f);
        double y = 0.2126 * c.r + 0.7152 * c.g + 0.0722 * c.b;
        cr_expect_gt(y, last, "brightness at %d/20", i);
        last = y;
    }
}

static void heatmap_case(Font *font) {
    enum { R = 3, C = 4 };
    const float w[R * C] = {0.0f, 0.1f, 0.2f, 0.7f, 1.0f, 0.0f, 0.0f, 0.0f, 0.25f, 0.25f, 0.25f, 0.25f};
    const char *rows[R] = {"der", "fährt", "<eos>"}, *cols[C] = {"ein", "mann", "straße", "."};
    Heatmap hm = {w, R, C, rows, cols, "test heatmap"};
    char *p = tmp_png(font ? "hm_font" : "hm_nofont");
    S2sError err;
    cr_assert_eq(heatmap_write_png(p, &hm, font, &err), S2S_OK, "%s", err.msg);
    Image im;
    cr_assert_eq(png_read(p, &im, &err), S2S_OK, "%s", err.msg);
    HeatmapLayout L = heatmap_layout(&hm, font);
    cr_expect(im.w == L.width && im.h == L.height);
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++) { /* the centre of every cell has its weight's colour */
            Rgb want = viz_colormap(w[i * C + j]);
            Rgb got = image_get(&im, L.x0 + j * L.cell + L.cell / 2, L.y0 + i * L.cell + L.cell / 2);
            cr_expect(got.r == want.r && got.g == want.g && got.b == want.b, "cell (%d, %d)", i, j);
        }
    /* labels: dark pixels left of the grid and above it, only with a font */
    int dark = 0;
    for (int y = L.y0; y < L.y0 + R * L.cell; y++)
        for (int x = 0; x < L.x0; x++) dark += image_get(&im, x, y).r < 100;
    for (int y = 0; y < L.y0; y++)
        for (int x = L.x0; x < L.x0 + C * L.cell; x++) dark += image_get(&im, x, y).r < 100;
    if (font) cr_expect_gt(dark, 50, "row and column labels are drawn");
    else cr_expect_eq(L.x0, 12, "without a font there is no label margin");
    image_free(&im);
    unlink(p);
}

Test(viz, heatmap_cells_and_labels) {
    Font *font = font_open(NULL);
    cr_assert(font != NULL, "DejaVu Sans should be installed (fonts-dejavu-core)");
    heatmap_case(font);
    font_close(font);
}

/* Several heatmaps in one picture (multi-head attention): panels in cells of the largest's
 * size, per_row a row, each cell of each panel the colour of its weight. */
Test(viz, heatmap_grid_panels) {
    enum { R = 2, C = 3, N = 3 };
    float w[N][R * C];
    for (int k = 0; k < N; k++)
        for (int i = 0; i < R * C; i++) w[k][i] = (float)((k * 7 + i * 3) % 10) / 9.0f;
    const char *rows[R] = {"a", "b"}, *cols[C] = {"x", "y", "z"};
    Font *font = font_open(NULL);
    Heatmap maps[N];
    const char *titles[N] = {"mean of the heads", "head 1 of 2", "head 2 of 2"};
    for (int k = 0; k < N; k++) maps[k] = (Heatmap){w[k], R, C, rows, cols, titles[k]};
    char *p = tmp_png("grid");
    S2sError err;
    cr_assert_eq(heatmap_grid_write_png(p, maps, N, 2, font, &err), S2S_OK, "%s", err.msg);
    Image im;
    cr_assert_eq(png_read(p, &im, &err), S2S_OK, "%s", err.msg);
    int cw = 0, ch = 0;
    for (int k = 0; k < N; k++) {
        HeatmapLayout L = heatmap_layout(&maps[k], font);
        cw = L.width > cw ? L.width : cw;
        ch = L.height > ch ? L.height : ch;
    }
    cr_expect(im.w == 2 * cw && im.h == 2 * ch, "%d x %d, cells %d x %d", im.w, im.h, cw, ch);
    for (int k = 0; k < N; k++) {
        HeatmapLayout L = heatmap_layout(&maps[k], font);
        int ox = (k % 2) * cw, oy = (k / 2) * ch;
        for (int i = 0; i < R; i++)
            for (int j = 0; j < C; j++) {
                Rgb want = viz_colormap(w[k][i * C + j]);
                Rgb got = image_get(&im, ox + L.x0 + j * L.cell + L.cell / 2, oy + L.y0 + i * L.cell + L.cell / 2);
                cr_expect(got.r == want.r && got.g == want.g && got.b == want.b, "panel %d cell (%d, %d)", k, i, j);
            }
    }
    image_free(&im);
    unlink(p);
    font_close(font);
}

Test(viz, heatmap_without_a_font) {
    cr_expect_null(font_open("/nonexistent/font.ttf"));
    heatmap_case(NULL);
}

/* D7: a heatmap of a very long input shrinks its cells (no labels below 6 pixels), and one too
 * large to draw is an error to warn about, never an abort. */
Test(viz, huge_heatmaps_shrink_or_are_refused) {
    Font *font = font_open(NULL);
    S2sError err;
    char *path = tmp_png("huge");
    int rows = 3000, cols = 7;
    float *w = calloc((size_t)rows * cols, sizeof *w);
    Heatmap hm = {w, rows, cols, NULL, NULL, "t"};
    HeatmapLayout L = heatmap_layout(&hm, font);
    cr_expect(L.cell == 2 && L.height <= IMAGE_MAX_SIDE, "cell %d, height %d", L.cell, L.height);
    cr_expect_eq(heatmap_write_png(path, &hm, font, &err), S2S_OK, "%s", err.msg);
    Image im;
    cr_assert_eq(png_read(path, &im, &err), S2S_OK);
    cr_expect_eq(im.w, L.width);
    image_free(&im);
    free(w);
    rows = 20000;
    w = calloc((size_t)rows * cols, sizeof *w);
    hm = (Heatmap){w, rows, cols, NULL, NULL, "t"};
    cr_expect_eq(heatmap_write_png(path, &hm, font, &err), S2S_ERR_DATA);
    cr_expect(strstr(err.msg, "20000 x 7 attention weights") && strstr(err.msg, "too large to draw"), "%s", err.msg);
    free(w);
    cr_expect_eq(image_new(&im, 100000, 2, (Rgb){0, 0, 0}, &err), S2S_ERR_DATA);
    font_close(font);
    unlink(path);
}

Test(viz, plot_writes_a_valid_png) {
    double x[3] = {1, 2, 3}, a[3] = {3.0, 2.0, 1.5}, b[3] = {2.5, NAN, 1.9};
    Plot p = {"t", "epoch", "loss", x, 3, {{"train", a, {31, 119, 180}}, {"valid", b, {255, 127, 14}}}, 2};
    Font *font = font_open(NULL);
    S2sError err;
    char *path = tmp_png("plot");
    cr_assert_eq(plot_write_png(path, &p, font, &err), S2S_OK, "%s", err.msg);
    Image im;
    cr_assert_eq(png_read(path, &im, &err), S2S_OK);
    int blue = 0;
    for (size_t i = 0; i < (size_t)im.w * im.h; i++) blue += im.rgb[3 * i] == 31 && im.rgb[3 * i + 1] == 119 && im.rgb[3 * i + 2] == 180;
    cr_expect_gt(blue, 100, "the train series is drawn");
    /* the line steps over the missing point: orange pixels in every column from the first
     * point to the last, not only the two markers */
    int x0 = im.w, x1 = -1, gap = 0;
    for (int px = 0; px < im.w; px++)
        for (int py = 40; py < im.h; py++) { /* below the legend */
            const uint8_t *c = im.rgb + 3 * ((size_t)py * im.w + px);
            if (c[0] == 255 && c[1] == 127 && c[2] == 14) {
                if (px < x0) x0 = px;
                if (px > x1) x1 = px;
            }
        }
    for (int px = x0; px <= x1; px++) {
        int any = 0;
        for (int py = 40; py < im.h; py++) {
            const uint8_t *c = im.rgb + 3 * ((size_t)py * im.w + px);
            any |= c[0] == 255 && c[1] == 127 && c[2] == 14;
        }
        gap += !any;
    }
    cr_expect_gt(x1 - x0, 200, "the valid series spans the plot");
    cr_expect_eq(gap, 0, "%d columns without the valid series between its first and last point", gap);
    image_free(&im);
    font_close(font);
    unlink(path);
}

/* ---- ./attend ---- */
static cJSON *run_attend(const char *input_json, int *rc) {
    char in[128], out[128], cmd[512];
    snprintf(in, sizeof in, "/tmp/s2s_attend_%d.json", (int)getpid());
    snprintf(out, sizeof out, "/tmp/s2s_attend_%d.out", (int)getpid());
    FILE *f = fopen(in, "w");
    fputs(input_json, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s/attend %s --json > %s 2>&1", tu_bin(), in, out);
    int st = system(cmd);
    *rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    cJSON *j = tu_json_load(out);
    unlink(in);
    unlink(out);
    return j;
}

static void expect_matrix(const char *what, const cJSON *got, const cJSON *want) {
    double g[256], w[256];
    long ng = tu_json_flatten(got, g, 256), nw = tu_json_flatten(want, w, 256);
    cr_assert_eq(ng, nw, "%s: %ld values, expected %ld", what, ng, nw);
    for (long i = 0; i < ng; i++)
        cr_expect(fabs(g[i] - w[i]) <= 1e-5 * fabs(w[i]) + 1e-6, "%s[%ld]: %.9g, expected %.9g", what, i, g[i], w[i]);
}

Test(attend, reproduces_every_worked_exercise) {
    const char *path = tu_golden_path("exercises.json");
    cJSON *ex = tu_json_load(path);
    cr_assert(ex != NULL, "cannot read %s", path);
    const cJSON *head1 = NULL, *head2 = NULL, *e;
    cJSON_ArrayForEach(e, ex) {
        const char *name = cJSON_GetObjectItem(e, "name")->valuestring;
        if (!strcmp(name, "self_attention_head1")) head1 = e;
        if (!strcmp(name, "self_attention_head2")) head2 = e;
    }
    int n = 0;
    cJSON_ArrayForEach(e, ex) {
        const char *name = cJSON_GetObjectItem(e, "name")->valuestring;
        cJSON *in = cJSON_CreateObject();
        if (!strcmp(name, "two_heads_output")) { /* the two heads of Question 1, then W_O */
            cJSON *hs = cJSON_AddArrayToObject(in, "heads");
            const cJSON *src[2] = {head1, head2};
            for (int h = 0; h < 2; h++) {
                cJSON *x = cJSON_CreateObject();
                cJSON_AddItemToObject(x, "Q", cJSON_Duplicate(cJSON_GetObjectItem(src[h], "Q"), 1));
                cJSON_AddItemToObject(x, "K", cJSON_Duplicate(cJSON_GetObjectItem(src[h], "K"), 1));
                cJSON_AddItemToObject(x, "V", cJSON_Duplicate(cJSON_GetObjectItem(src[h], "V"), 1));
                cJSON_AddItemToArray(hs, x);
            }
            cJSON_AddItemToObject(in, "W_o", cJSON_Duplicate(cJSON_GetObjectItem(e, "WO"), 1));
        } else {
            const char *keys[] = {"Q", "K", "V", "scaled"};
            for (int k = 0; k < 4; k++) cJSON_AddItemToObject(in, keys[k], cJSON_Duplicate(cJSON_GetObjectItem(e, keys[k]), 1));
            if (!strncmp(name, "causal", 6)) cJSON_AddTrueToObject(in, "causal");
        }
        char *txt = cJSON_PrintUnformatted(in);
        int rc;
        cJSON *got = run_attend(txt, &rc);
        cr_assert_eq(rc, 0, "%s: attend failed", name);
        cr_assert(got != NULL, "%s: attend printed no JSON", name);
        const cJSON *h0 = cJSON_GetArrayItem(cJSON_GetObjectItem(got, "heads"), 0);
        if (cJSON_GetObjectItem(e, "scores")) expect_matrix(name, cJSON_GetObjectItem(h0, "scores"), cJSON_GetObjectItem(e, "scores"));
        if (cJSON_GetObjectItem(e, "weights")) expect_matrix(name, cJSON_GetObjectItem(h0, "weights"), cJSON_GetObjectItem(e, "weights"));
        expect_matrix(name, cJSON_GetObjectItem(got, "output"), cJSON_GetObjectItem(e, "output"));
        free(txt);
        cJSON_Delete(in);
        cJSON_Delete(got);
        n++;
    }
    cr_expect_eq(n, 10);
    cJSON_Delete(ex);
}

Test(attend, splits_heads_and_projects) {
    /* the same two heads as one input split in two, through W_q, W_k, W_v = [W1 | W2] */
    const char *in = "{\"X\": [[1,0],[0,1],[1,1]], \"W_q\": [[1,0,2,0],[0,1,0,2]], \"W_k\": [[1,0,1,1],[0,1,1,1]],"
                     " \"W_v\": [[1,2,0,1],[3,4,1,0]], \"heads\": 2}";
    int rc;
    cJSON *got = run_attend(in, &rc);
    cr_assert_eq(rc, 0);
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(got, "heads")), 2);
    double out[16];
    cr_assert_eq(tu_json_flatten(cJSON_GetObjectItem(got, "output"), out, 16), 12, "(3, 4): both heads' outputs side by side");
    cJSON_Delete(got);
}

Test(attend, bad_input) {
    int rc;
    cJSON *j = run_attend("{\"Q\": [[1, 2]], \"K\": [[1, 2, 3]], \"V\": [[1]]}", &rc);
    cr_expect_eq(rc, 2, "mismatched shapes");
    cJSON_Delete(j);
    j = run_attend("{\"Q\": [[1, 2]], \"K\": [[1, 2], [3]], \"V\": [[1], [2]]}", &rc);
    cr_expect_eq(rc, 2, "ragged rows");
    cJSON_Delete(j);
    j = run_attend("{\"Q\": [[1, 2]], ", &rc);
    cr_expect_eq(rc, 2, "bad JSON");
    cJSON_Delete(j);
    j = run_attend("{\"Q\": [[1]], \"K\": [[1]], \"V\": [[1]], \"Wq\": 3}", &rc);
    cr_expect_eq(rc, 2, "unknown key");
    cJSON_Delete(j);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "%s/attend --q '[[1,0]]' --k '[[1,0],[0,1]]' --v '[[1],[2]]' --causal > /dev/null 2>&1", tu_bin());
    int st = system(cmd);
    cr_expect_eq(WEXITSTATUS(st), 2, "causal needs as many queries as keys");
}

static void expect_same_json_matrix(const char *what, cJSON *a, cJSON *b) {
    double x[64], y[64];
    long n = tu_json_flatten(a, x, 64), m = tu_json_flatten(b, y, 64);
    cr_assert(n > 0 && n == m, "%s: %ld and %ld values", what, n, m);
    for (long i = 0; i < n; i++) cr_expect(fabs(x[i] - y[i]) <= 1e-6 * fabs(y[i]) + 1e-7, "%s[%ld]: %g vs %g", what, i, x[i], y[i]);
}

/* D10: a list of heads uses its projections: each head's own W_q, W_k, W_v on the shared X
 * equal the split form with W = [W1 | W2]; a head without its own takes the top level's. */
Test(attend, a_list_of_heads_uses_its_projections) {
    const char *split = "{\"X\": [[1,0],[0,1],[1,1]], \"W_q\": [[1,0,2,0],[0,1,0,2]], \"W_k\": [[1,0,1,1],[0,1,1,1]],"
                        " \"W_v\": [[1,2,0,1],[3,4,1,0]], \"heads\": 2}";
    const char *list = "{\"X\": [[1,0],[0,1],[1,1]], \"heads\": ["
                       " {\"W_q\": [[1,0],[0,1]], \"W_k\": [[1,0],[0,1]], \"W_v\": [[1,2],[3,4]]},"
                       " {\"W_q\": [[2,0],[0,2]], \"W_k\": [[1,1],[1,1]], \"W_v\": [[0,1],[1,0]]}]}";
    const char *shared = "{\"X\": [[1,0],[0,1],[1,1]], \"W_q\": [[2,0],[0,2]], \"W_k\": [[1,1],[1,1]], \"W_v\": [[0,1],[1,0]],"
                         " \"heads\": [{\"W_q\": [[1,0],[0,1]], \"W_k\": [[1,0],[0,1]], \"W_v\": [[1,2],[3,4]]}, {}]}";
    int rc;
    cJSON *a = run_attend(split, &rc);
    cr_assert_eq(rc, 0);
    cJSON *b = run_attend(list, &rc);
    cr_assert_eq(rc, 0);
    cJSON *c = run_attend(shared, &rc);
    cr_assert_eq(rc, 0);
    expect_same_json_matrix("list vs split", cJSON_GetObjectItem(b, "output"), cJSON_GetObjectItem(a, "output"));
    expect_same_json_matrix("shared vs split", cJSON_GetObjectItem(c, "output"), cJSON_GetObjectItem(a, "output"));
    cJSON_Delete(a);
    cJSON_Delete(b);
    cJSON_Delete(c);
}

/* D13, D23, D30, D33: heads of different query counts, values past float range, keys twice,
 * too many rows, and the command line: clear messages, exit 2, never an abort. */
Test(attend, bad_input_is_named) {
    struct {
        const char *json, *says;
    } cases[] = {
        {"{\"heads\": [{\"Q\": [[1],[2]], \"K\": [[1]], \"V\": [[1]]}, {\"Q\": [[1]], \"K\": [[1]], \"V\": [[1]]}]}",
         "head 2 has 1 queries, head 1 has 2"},
        {"{\"Q\": [[1e39]], \"K\": [[1]], \"V\": [[1]]}", "within float range"},
        {"{\"Q\": [[1e30]], \"K\": [[1e30]], \"V\": [[1]]}", "the scores pass float range"},
        {"{\"Q\": [[1]], \"Q\": [[2]], \"K\": [[1]], \"V\": [[1]]}", "\"Q\" is given twice"},
        {"{\"heads\": [{\"Q\": [[1]], \"K\": [[1]], \"V\": [[1]], \"Wq\": [[1]]}]}", "heads[1].unknown key \"Wq\""},
        {"{\"heads\": [3]}", "heads[1]: expected an object"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char in[128], out[128], cmd[600];
        snprintf(in, sizeof in, "/tmp/s2s_attend_bad_%d.json", (int)getpid());
        snprintf(out, sizeof out, "/tmp/s2s_attend_bad_%d.out", (int)getpid());
        FILE *f = fopen(in, "w");
        fputs(cases[i].json, f);
        fclose(f);
        snprintf(cmd, sizeof cmd, "%s/attend %s > /dev/null 2> %s", tu_bin(), in, out);
        int st = system(cmd);
        cr_expect_eq(WEXITSTATUS(st), 2, "%s", cases[i].json);
        char *e = tu_slurp(out, NULL);
        cr_expect(e && strstr(e, cases[i].says), "%s: %s", cases[i].json, e);
        free(e);
        unlink(in);
        unlink(out);
    }
    /* 10001 rows are too many, not "empty" */
    char path[128], cmd[400];
    snprintf(path, sizeof path, "/tmp/s2s_attend_rows_%d.json", (int)getpid());
    FILE *f = fopen(path, "w");
    fputs("{\"Q\": [", f);
    for (int r = 0; r < 10001; r++) fprintf(f, "%s[1]", r ? "," : "");
    fputs("], \"K\": [[1]], \"V\": [[1]]}", f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s/attend %s 2>&1 | grep -q 'Q: 10001 x 1; a matrix here has at most 10000 rows'", tu_bin(), path);
    cr_expect_eq(system(cmd), 0);
    unlink(path);
    snprintf(cmd, sizeof cmd, "%s/attend --q '[[1]]' --k '[[1]]' --v '[[1]]' --bogus 2>&1 | grep -q 'bogus: unknown option'", tu_bin());
    cr_expect_eq(system(cmd), 0, "an unknown last option is unknown (D32)");
    snprintf(cmd, sizeof cmd, "%s/attend --q='[[1]]' --k '[[1]]' --v '[[1]]' > /dev/null", tu_bin());
    cr_expect_eq(system(cmd), 0, "--opt=value");
}
