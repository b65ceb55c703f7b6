/* visuals.c — attention heatmaps of decoded sentences; learning curves from a run's log. */
#include "s2s/visuals.h"
#include "s2s/rundir.h"
#include "s2s/runlog.h"

#include <cjson/cJSON.h>
#include <limits.h>
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

S2sStatus visuals_heatmap_heads(const char *path, const char *title, const Vocab *src, const Vocab *trg,
                                const DecodedAttention *a, int heads, const float *heads_attn, Font *font, S2sError *err) {
    int rows = a->nout + (a->ended ? 1 : 0), ns = a->ns;
    if (rows == 0 || ns == 0) return S2S_OK;
    const char **rl = s2s_xmalloc((size_t)rows * sizeof *rl), **cl = s2s_xmalloc((size_t)ns * sizeof *cl);
    for (int i = 0; i < a->nout; i++) rl[i] = trg->tokens[a->out[i]];
    if (a->ended) rl[a->nout] = "<eos>";
    for (int j = 0; j < ns; j++) cl[j] = src->tokens[a->src[j]];
    int n = heads + 1;
    float *w = s2s_xmalloc((size_t)n * rows * ns * sizeof *w);
    char(*titles)[96] = s2s_xmalloc((size_t)n * sizeof *titles);
    Heatmap *maps = s2s_xmalloc((size_t)n * sizeof *maps);
    for (int k = 0; k < n; k++) {
        float *wk = w + (size_t)k * rows * ns;
        for (int i = 0; i < rows; i++) {
            const float *from = k == 0 ? a->attn + (size_t)i * a->stride
                                       : heads_attn + ((size_t)i * heads + (k - 1)) * a->stride;
            memcpy(wk + (size_t)i * ns, from, (size_t)ns * sizeof *wk);
        }
        if (k == 0) snprintf(titles[k], sizeof titles[k], "%.80s", title ? title : "mean of the heads");
        else snprintf(titles[k], sizeof titles[k], "head %d of %d", k, heads);
        maps[k] = (Heatmap){wk, rows, ns, rl, cl, titles[k]};
    }
    S2sStatus st = heatmap_grid_write_png(path, maps, n, n <= 4 ? n : n <= 9 ? 3 : 4, font, err);
    free(maps);
    free(titles);
    free(w);
    free(rl);
    free(cl);
    return st;
}

S2sStatus visuals_layers(const char *path_cross, const char *path_self, const char *title, const Vocab *src,
                         const Vocab *trg, const DecodedAttention *a, int dec_layers, int enc_layers,
                         const float *const *cross, const float *const *self, Font *font, S2sError *err) {
    int rows = a->nout + (a->ended ? 1 : 0), ns = a->ns, layers = dec_layers > enc_layers ? dec_layers : enc_layers;
    if (rows == 0 || ns == 0 || dec_layers < 1 || enc_layers < 1) return S2S_OK;
    const char **rl = s2s_xmalloc((size_t)rows * sizeof *rl), **cl = s2s_xmalloc((size_t)ns * sizeof *cl);
    for (int i = 0; i < a->nout; i++) rl[i] = trg->tokens[a->out[i]];
    if (a->ended) rl[a->nout] = "<eos>";
    for (int j = 0; j < ns; j++) cl[j] = src->tokens[a->src[j]];
    char(*titles)[128] = s2s_xmalloc((size_t)layers * sizeof *titles);
    Heatmap *maps = s2s_xmalloc((size_t)layers * sizeof *maps);
    int per_row = dec_layers <= 3 ? dec_layers : dec_layers <= 6 ? 3 : 4;
    for (int l = 0; l < dec_layers; l++) {
        snprintf(titles[l], sizeof titles[l], "%.80s%slayer %d: cross-attention", title ? title : "", title ? " - " : "", l + 1);
        maps[l] = (Heatmap){cross[l], rows, ns, rl, cl, titles[l]};
    }
    S2sStatus st = heatmap_grid_write_png(path_cross, maps, dec_layers, per_row, font, err);
    per_row = enc_layers <= 3 ? enc_layers : enc_layers <= 6 ? 3 : 4;
    for (int l = 0; l < enc_layers && !st; l++) {
        snprintf(titles[l], sizeof titles[l], "%.80s%sencoder layer %d: self-attention", title ? title : "", title ? " - " : "", l + 1);
        maps[l] = (Heatmap){self[l], ns, ns, cl, cl, titles[l]};
    }
    if (!st) st = heatmap_grid_write_png(path_self, maps, enc_layers, per_row, font, err);
    free(maps);
    free(titles);
    free(rl);
    free(cl);
    return st;
}

/* The epoch lines of a log, and the validations within epochs (train.valid_every), as
 * columns: epochs trained, train loss (epoch ends only: NaN, which the plot steps over, at the
 * others), validation loss and metric. */
typedef struct Curves {
    double *x, *tl, *vl, *mv;
    int n, cap;
    bool bleu; /* the metric is BLEU (translation), else exact match (%) */
    bool sacre; /* sacreBLEU on raw text (subword tasks), not multi-bleu on words */
} Curves;

static void add_point(void *ctx, const char *type, const cJSON *j) {
    Curves *c = ctx;
    bool within = strcmp(type, LOG_VALID) == 0;
    if (!within && strcmp(type, LOG_EPOCH) != 0) return;
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 64;
        c->x = s2s_xrealloc(c->x, (size_t)c->cap * sizeof *c->x);
        c->tl = s2s_xrealloc(c->tl, (size_t)c->cap * sizeof *c->tl);
        c->vl = s2s_xrealloc(c->vl, (size_t)c->cap * sizeof *c->vl);
        c->mv = s2s_xrealloc(c->mv, (size_t)c->cap * sizeof *c->mv);
    }
    if (cJSON_GetObjectItemCaseSensitive(j, LOG_VALID_ LOG_BLEU)) c->bleu = true;
    if (cJSON_GetObjectItemCaseSensitive(j, LOG_VALID_ LOG_SACREBLEU)) c->bleu = c->sacre = true;
    double epoch = runlog_num(j, LOG_EPOCH, c->n + 1);
    c->x[c->n] = within ? runlog_num(j, LOG_EPOCHS_DONE, epoch - 0.5) : epoch;
    c->tl[c->n] = within ? NAN : runlog_num(j, LOG_TRAIN_LOSS, NAN);
    c->vl[c->n] = runlog_num(j, LOG_VALID_ LOG_LOSS, NAN);
    c->mv[c->n] = c->bleu ? runlog_num(j, c->sacre ? LOG_VALID_ LOG_SACREBLEU : LOG_VALID_ LOG_BLEU, NAN)
                          : 100.0 * runlog_num(j, LOG_VALID_ LOG_EXACT_MATCH, NAN);
    c->n++;
}

S2sStatus visuals_curves(const char *dir, const char *title, Font *font, S2sError *err) {
    Curves c = {0};
    S2sStatus st = runlog_each(dir, add_point, &c, err);
    if (!st && c.n > 0) {
        Plot loss = {title, "epoch", "loss (nats per token)", c.x, c.n,
                     {{"train", c.tl, {31, 119, 180}}, {"validation", c.vl, {255, 127, 14}}}, 2};
        const char *name = c.sacre ? "sacreBLEU" : "BLEU";
        char mtitle[64];
        snprintf(mtitle, sizeof mtitle, "validation %s (greedy)", c.bleu ? name : "exact match");
        Plot met = {mtitle, "epoch", c.bleu ? name : "exact match (%)", c.x, c.n, {{c.bleu ? name : "exact match", c.mv, {44, 160, 44}}}, 1};
        Image im;
        st = image_new(&im, 720, 840, (Rgb){255, 255, 255}, err);
        if (!st) st = plot_draw(&im, 0, 0, 720, 420, &loss, font, err);
        if (!st) st = plot_draw(&im, 0, 420, 720, 420, &met, font, err);
        char path[PATH_MAX + 16];
        rundir_path(path, sizeof path, dir, RUN_CURVES);
        if (!st) st = png_write(path, &im, err);
        image_free(&im);
    }
    free(c.x);
    free(c.tl);
    free(c.vl);
    free(c.mv);
    return st;
}
