/* visuals.c — attention heatmaps of decoded sentences; learning curves from a run's log. */
#include "s2s/visuals.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

S2sStatus visuals_heatmap(const char *path, const char *title, const Vocab *src, const Vocab *trg,
                          const DecodedAttention *a, Font *font, S2sError *err) {
    int rows = a->nout + (a->ended ? 1 : 0);
    if (rows == 0 || a->ns == 0) return S2S_OK; /* nothing to draw */
    const char **rl = s2s_xmalloc((size_t)rows * sizeof *rl), **cl = s2s_xmalloc((size_t)a->ns * sizeof *cl);
    for (int i = 0; i < a->nout; i++) rl[i] = trg->tokens[a->out[i]];
    if (a->ended) rl[a->nout] = "<eos>";
    for (int j = 0; j < a->ns; j++) cl[j] = src->tokens[a->src[j]];
    float *w = s2s_xmalloc((size_t)rows * a->ns * sizeof *w);
    for (int i = 0; i < rows; i++) memcpy(w + (size_t)i * a->ns, a->attn + (size_t)i * a->stride, (size_t)a->ns * sizeof *w);
    Heatmap hm = {w, rows, a->ns, rl, cl, title};
    S2sStatus st = heatmap_write_png(path, &hm, font, err);
    free(w);
    free(rl);
    free(cl);
    return st;
}

S2sStatus visuals_curves(const char *dir, const char *title, Font *font, S2sError *err) {
    char path[1024];
    snprintf(path, sizeof path, "%s/log.jsonl", dir);
    FILE *f = fopen(path, "rb");
    if (!f) return s2s_fail(err, S2S_ERR_IO, "%s: cannot open", path);
    int cap = 64, n = 0;
    double *x = s2s_xmalloc((size_t)cap * sizeof *x), *tl = s2s_xmalloc((size_t)cap * sizeof *tl),
           *vl = s2s_xmalloc((size_t)cap * sizeof *vl), *mv = s2s_xmalloc((size_t)cap * sizeof *mv);
    const char *metric = "valid_exact_match";
    char line[1 << 14];
    while (fgets(line, sizeof line, f)) {
        if (!strstr(line, "\"type\":\"epoch\"")) continue;
        cJSON *j = cJSON_Parse(line);
        if (!j) continue;
        if (n == cap) {
            cap *= 2;
            x = s2s_xrealloc(x, (size_t)cap * sizeof *x);
            tl = s2s_xrealloc(tl, (size_t)cap * sizeof *tl);
            vl = s2s_xrealloc(vl, (size_t)cap * sizeof *vl);
            mv = s2s_xrealloc(mv, (size_t)cap * sizeof *mv);
        }
        const cJSON *bleu = cJSON_GetObjectItemCaseSensitive(j, "valid_bleu");
        if (bleu) metric = "valid_bleu";
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "epoch"), *a = cJSON_GetObjectItemCaseSensitive(j, "train_loss"),
                    *b = cJSON_GetObjectItemCaseSensitive(j, "valid_loss"), *m = cJSON_GetObjectItemCaseSensitive(j, metric);
        x[n] = cJSON_IsNumber(e) ? e->valuedouble : n + 1;
        tl[n] = cJSON_IsNumber(a) ? a->valuedouble : NAN;
        vl[n] = cJSON_IsNumber(b) ? b->valuedouble : NAN;
        mv[n] = cJSON_IsNumber(m) ? m->valuedouble * (bleu ? 1.0 : 100.0) : NAN;
        n++;
        cJSON_Delete(j);
    }
    fclose(f);
    S2sStatus st = S2S_OK;
    if (n > 0) {
        bool is_bleu = !strcmp(metric, "valid_bleu");
        Plot loss = {title, "epoch", "loss (nats per token)", x, n, {{"train", tl, {31, 119, 180}}, {"validation", vl, {255, 127, 14}}}, 2};
        Plot met = {is_bleu ? "validation BLEU (greedy)" : "validation exact match (greedy)", "epoch",
                    is_bleu ? "BLEU" : "exact match (%)", x, n, {{is_bleu ? "BLEU" : "exact match", mv, {44, 160, 44}}}, 1};
        Image im;
        st = image_new(&im, 720, 840, (Rgb){255, 255, 255}, err);
        if (!st) st = plot_draw(&im, 0, 0, 720, 420, &loss, font, err);
        if (!st) st = plot_draw(&im, 0, 420, 720, 420, &met, font, err);
        snprintf(path, sizeof path, "%s/curves.png", dir);
        if (!st) st = png_write(path, &im, err);
        image_free(&im);
    }
    free(x);
    free(tl);
    free(vl);
    free(mv);
    return st;
}
