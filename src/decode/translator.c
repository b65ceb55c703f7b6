/* translator.c — lines of text → encoded sources → batched decoding → outputs in line order. */
#include "s2s/translator.h"
#include "s2s/eval.h"
#include "s2s/subword.h"
#include "s2s/visuals.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Attention rows kept for heatmaps stay under this many bytes per decoded batch. */
#define HEATMAP_BATCH_BYTES ((size_t)256 << 20)

/* A model's layer-by-layer attention maps (model_layer_maps) for one decoded sentence: the
 * sentence and its output teacher-forced (as decoding computed them). cross[l] (H, rows, ns) per decoder layer,
 * self[l] (H, ns, ns) per encoder layer, on the tape's arena: the caller copies what it keeps
 * and rewinds to *mark. */
typedef struct LineMaps {
    Dataset d;
    Batch b;
    int32_t *trg;
    ArenaMark mark;
    Tensor *cross[MODEL_MAX_LAYER_MAPS], *self[MODEL_MAX_LAYER_MAPS];
} LineMaps;

static void line_maps(const Translator *t, const DecodedAttention *a, int rows, LineMaps *lm) {
    memset(lm, 0, sizeof *lm);
    lm->trg = s2s_xmalloc((size_t)(rows + 1) * sizeof *lm->trg);
    lm->trg[0] = TOK_SOS;
    memcpy(lm->trg + 1, a->out, (size_t)(rows - 1) * sizeof *lm->trg); /* inputs <sos> out[0 .. rows − 2] */
    lm->trg[rows] = TOK_EOS; /* the last target: not an input */
    dataset_init(&lm->d);
    dataset_add(&lm->d, a->src, a->ns, lm->trg, rows + 1);
    batch_init(&lm->b);
    int zero = 0;
    batch_fill(&lm->b, &lm->d, &zero, 1);
    lm->mark = arena_mark(&t->tape->arena);
    model_layer_maps(t->tape, t->model, &lm->b, lm->cross, lm->self);
}

static void line_maps_free(const Translator *t, LineMaps *lm) {
    arena_rewind(&t->tape->arena, lm->mark);
    batch_free(&lm->b);
    dataset_free(&lm->d);
    free(lm->trg);
}

/* The attention in every layer for one decoded sentence (a family with layer maps), the heads
 * averaged. */
static S2sStatus draw_layers(const Translator *t, const DecodedAttention *a, const char *path_cross, const char *path_self,
                             const char *title, S2sError *err) {
    int rows = a->nout + (a->ended ? 1 : 0), ns = a->ns, H = model_heads(t->model), Ls, Le;
    model_layer_counts(t->model, &Ls, &Le);
    if (rows == 0 || ns == 0) return S2S_OK;
    LineMaps lm;
    line_maps(t, a, rows, &lm);
    Tensor **cross = lm.cross, **self = lm.self;
    float *cm = s2s_xcalloc((size_t)Ls * rows * ns, sizeof *cm), *sm = s2s_xcalloc((size_t)Le * ns * ns, sizeof *sm);
    const float *cp[MODEL_MAX_LAYER_MAPS], *sp[MODEL_MAX_LAYER_MAPS];
    for (int l = 0; l < Ls; l++) { /* (H, rows, ns) → the heads' mean, kept past the rewind below */
        cp[l] = cm + (size_t)l * rows * ns;
        memcpy(cm + (size_t)l * rows * ns, tensor_read(attn_heads_mean(t->tape, cross[l], H)), (size_t)rows * ns * sizeof *cm);
    }
    for (int l = 0; l < Le; l++) {
        sp[l] = sm + (size_t)l * ns * ns;
        memcpy(sm + (size_t)l * ns * ns, tensor_read(attn_heads_mean(t->tape, self[l], H)), (size_t)ns * ns * sizeof *sm);
    }
    /* each layer's heads, a picture a layer: (H, rows, ns) → (rows, H, ns) as the heads pictures take them */
    float *heads = s2s_xmalloc((size_t)Ls * rows * H * ns * sizeof *heads);
    for (int l = 0; l < Ls; l++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < rows; i++)
                memcpy(heads + (((size_t)l * rows + i) * H + h) * ns, tensor_read(cross[l]) + ((size_t)h * rows + i) * ns, (size_t)ns * sizeof *heads);
    line_maps_free(t, &lm);
    S2sStatus st = visuals_layers(path_cross, path_self, title, t->src, t->trg, a, Ls, Le, cp, sp,
                                  t->font, err);
    for (int l = 0; l < Ls && !st && H > 1; l++) { /* DIR/NNNN_layerL_heads.png */
        char path[PATH_MAX + 48], ttl[160];
        const char *dot = strrchr(path_cross, '_'); /* …/NNNN_layers.png → …/NNNN */
        snprintf(path, sizeof path, "%.*s_layer%d_heads.png", (int)(dot - path_cross), path_cross, l + 1);
        snprintf(ttl, sizeof ttl, "%.100s - layer %d - mean of %d heads", title, l + 1, H);
        DecodedAttention al = *a;
        al.attn = cp[l];
        al.stride = ns;
        st = visuals_heatmap_heads(path, ttl, t->src, t->trg, &al, H, heads + (size_t)l * rows * H * ns, t->font, err);
    }
    free(heads);
    free(cm);
    free(sm);
    return st;
}

Translator translator_make(Seq2Seq *m, const Config *cfg, const Vocab *src, const Vocab *trg, Tape *tape,
                           const DecodeSettings *s) {
    S2S_ASSERT(s->beam >= 1 && s->n_best >= 1 && s->n_best <= s->beam && s->max_len >= 0);
    return (Translator){.model = m, .cfg = cfg, .src = src, .trg = trg, .tape = tape,
                        .max_len = s->max_len ? s->max_len : cfg->train.max_decode_len, .beam = s->beam,
                        .n_best = s->n_best, .alpha = s->alpha, .tokenized = s->tokenized,
                        .want_attention = s->attention};
}

/* NNNN.png, NNNN_heads.png, …: a picture of translator_run's */
static bool picture_name(const char *s) {
    size_t n = strlen(s), d = strspn(s, "0123456789");
    return d >= 4 && (s[d] == '.' || s[d] == '_') && n > 4 && !strcmp(s + n - 4, ".png");
}

S2sStatus translator_heatmaps(Translator *t, const char *dir, const FileRole *inputs, int n, S2sError *err) {
    S2sStatus st = file_mkdirs(dir, err);
    if (st) return st;
    DIR *d = opendir(dir);
    if (!d) return s2s_fail(err, S2S_ERR_IO, "%s: cannot read the folder: %s", dir, strerror(errno));
    for (struct dirent *e; !st && (e = readdir(d));)
        if (picture_name(e->d_name))
            st = s2s_fail(err, S2S_ERR_CONFIG,
                          "%s holds the pictures of an earlier translation (%s): new ones would mix with them; give a "
                          "new or empty folder, or delete them",
                          dir, e->d_name);
    closedir(d);
    if (st) return st;
    t->heatmap_dir = dir;
    t->inputs = inputs;
    t->n_inputs = n;
    return S2S_OK;
}

static void draw_heatmap(const Translator *t, const Batch *b, int i, const int32_t *out, int len, const float *attn,
                         const float *heads, long line_no, TranslatedLine *r) {
    char path[PATH_MAX + 32], title[256];
    snprintf(path, sizeof path, "%s/%04ld.png", t->heatmap_dir, line_no);
    S2sError err;
    /* translator_heatmaps refused a folder with pictures; an input given a picture's name since
     * (the line's first picture) is refused here */
    if (file_distinct(t->inputs, t->n_inputs, &(FileRole){"a heatmap", path}, 1, &err)) {
        snprintf(r->warning, sizeof r->warning, "%s", err.msg);
        return;
    }
    snprintf(title, sizeof title, "%s - %s attention - line %ld", t->heatmap_name ? t->heatmap_name : "model",
             model_attention_name(t->model), line_no);
    int32_t *src = s2s_xmalloc((size_t)b->S * sizeof *src);
    for (int k = 0; k < b->src_len[i]; k++) src[k] = b->src[(size_t)k * b->B + i];
    DecodedAttention a = {src, b->src_len[i], out, len, len < model_max_output(t->max_len, b->src_len[i]), attn, b->S};
    S2sStatus st = visuals_heatmap(path, title, t->src, t->trg, &a, t->font, &err);
    if (!st && heads) { /* multihead: the heads' mean and each head, DIR/NNNN_heads.png */
        int H = model_heads(t->model);
        snprintf(path, sizeof path, "%s/%04ld_heads.png", t->heatmap_dir, line_no);
        snprintf(title, sizeof title, "line %ld - mean of %d heads", line_no, H);
        st = visuals_heatmap_heads(path, title, t->src, t->trg, &a, H, heads, t->font, &err);
    }
    int n_cross, n_self;
    model_layer_counts(t->model, &n_cross, &n_self);
    if (!st && n_cross > 0) { /* every layer: DIR/NNNN_layers.png, NNNN_encoder.png */
        char path2[PATH_MAX + 32];
        snprintf(path, sizeof path, "%s/%04ld_layers.png", t->heatmap_dir, line_no);
        snprintf(path2, sizeof path2, "%s/%04ld_encoder.png", t->heatmap_dir, line_no);
        snprintf(title, sizeof title, "line %ld", line_no);
        st = draw_layers(t, &a, path, path2, title, &err);
    }
    if (st) snprintf(r->warning, sizeof r->warning, "%s", err.msg);
    free(src);
}

/* The models that decode as one, the first model first, and their tapes; returns how many. */
static int ensemble(const Translator *t, Seq2Seq **ms, Tape **ts) {
    ms[0] = t->model;
    ts[0] = t->tape;
    for (int k = 0; k < t->n_more; k++) {
        ms[k + 1] = t->more[k];
        ts[k + 1] = t->more_tapes[k];
    }
    return 1 + t->n_more;
}

/* Row i's attention and tokens as data (want_attention); heads: (L, H, S) of a multihead RNN
 * decoder, or NULL. A model with layer maps (a Transformer) gives its layers and heads from
 * its teacher-forced maps. */
static LineAttention *line_attention(const Translator *t, const Batch *b, int i, const int32_t *out, int len,
                                     const float *attn, const float *heads) {
    LineAttention *a = s2s_xcalloc(1, sizeof *a);
    bool ended = len < model_max_output(t->max_len, b->src_len[i]); /* its own cap, not the batch's: no <eos> row it never wrote */
    int ns = b->src_len[i], rows = len + (ended ? 1 : 0);
    a->n_src = ns;
    a->n_out = rows;
    a->src = s2s_xmalloc((size_t)(ns ? ns : 1) * sizeof *a->src);
    a->out = s2s_xmalloc((size_t)(rows ? rows : 1) * sizeof *a->out);
    a->w = s2s_xmalloc(((size_t)rows * ns + 1) * sizeof *a->w);
    for (int k = 0; k < ns; k++) a->src[k] = strdup(t->src->tokens[b->src[(size_t)k * b->B + i]]);
    for (int r = 0; r < rows; r++) {
        a->out[r] = strdup(r < len ? t->trg->tokens[out[r]] : "<eos>");
        memcpy(a->w + (size_t)r * ns, attn + (size_t)r * b->S, (size_t)ns * sizeof *a->w);
    }
    int H = model_heads(t->model), n_cross, n_self;
    model_layer_counts(t->model, &n_cross, &n_self);
    if (n_cross > 0 && rows > 0 && ns > 0) { /* every decoder layer's heads */
        int32_t *src = s2s_xmalloc((size_t)ns * sizeof *src);
        for (int k = 0; k < ns; k++) src[k] = b->src[(size_t)k * b->B + i];
        DecodedAttention da = {src, ns, out, len, ended, attn, b->S};
        LineMaps lm;
        line_maps(t, &da, rows, &lm);
        a->n_layers = n_cross;
        a->n_heads = H;
        a->heads = s2s_xmalloc((size_t)a->n_layers * H * rows * ns * sizeof *a->heads);
        for (int l = 0; l < a->n_layers; l++) /* (H, rows, ns) each */
            memcpy(a->heads + (size_t)l * H * rows * ns, tensor_read(lm.cross[l]), (size_t)H * rows * ns * sizeof *a->heads);
        line_maps_free(t, &lm);
        free(src);
    } else if (heads && H > 1) { /* (L, H, S) → (1, H, rows, ns) */
        a->n_layers = 1;
        a->n_heads = H;
        a->heads = s2s_xmalloc((size_t)H * rows * ns * sizeof *a->heads);
        for (int h = 0; h < H; h++)
            for (int r = 0; r < rows; r++)
                memcpy(a->heads + ((size_t)h * rows + r) * ns, heads + ((size_t)r * H + h) * b->S, (size_t)ns * sizeof *a->heads);
    }
    return a;
}

void translator_free_attention(LineAttention *a) {
    if (!a) return;
    for (int k = 0; k < a->n_src; k++) free(a->src[k]);
    for (int r = 0; r < a->n_out; r++) free(a->out[r]);
    free(a->src);
    free(a->out);
    free(a->w);
    free(a->heads);
    free(a);
}

/* Beam search keeps no attention: each row's best hypothesis (h, n_best a row) is fed back a
 * step at a time, as decoding fed it (a line decodes alike alone and in any batch), and each
 * step's weights are kept: the attention that wrote it. One model. */
static void beam_attention(const Translator *t, const Batch *b, const BeamHyp *h, const int *row_line,
                           TranslatedLine *out) {
    int nb = b->B, S = b->S, L = model_max_output(t->max_len, S), H = model_heads(t->model), steps = 0;
    for (int i = 0; i < nb; i++) {
        const BeamHyp *x = &h[(size_t)i * t->n_best];
        int rows = x->len + (x->len < model_max_output(t->max_len, b->src_len[i]) ? 1 : 0);
        if (rows > steps) steps = rows;
    }
    float *attn = s2s_xcalloc((size_t)nb * L * S, sizeof *attn); /* bounded: the batch is cut to fit */
    float *heads = H > 1 ? s2s_xcalloc((size_t)nb * L * H * S, sizeof *heads) : NULL;
    int32_t *tok = s2s_xmalloc((size_t)nb * sizeof *tok);
    tape_reset(t->tape);
    TapeMode mode = tape_enter_inference(t->tape);
    DecodeState ds;
    model_decode_start(t->tape, t->model, b, 1, steps, &ds);
    for (int s = 0; s < steps; s++) {
        for (int i = 0; i < nb; i++) { /* past its end a row is fed <eos>; those rows are not read */
            const BeamHyp *x = &h[(size_t)i * t->n_best];
            tok[i] = s == 0 ? TOK_SOS : s - 1 < x->len ? x->ids[s - 1] : TOK_EOS;
        }
        AttnWeights aw = {.want_heads = heads != NULL};
        model_decode_step_heads(t->tape, t->model, &ds, tok, &aw);
        for (int i = 0; i < nb; i++) {
            if (aw.mean) memcpy(attn + ((size_t)i * L + s) * S, tensor_read(aw.mean) + (size_t)i * S, (size_t)S * sizeof *attn);
            if (heads && aw.heads) /* (N·H, 1, S): row i's heads are rows i·H … */
                memcpy(heads + ((size_t)i * L + s) * H * S, tensor_read(aw.heads) + (size_t)i * H * S,
                       (size_t)H * S * sizeof *heads);
        }
        model_decode_settle(t->tape, t->model, &ds, s);
    }
    tape_leave(t->tape, mode);
    for (int i = 0; i < nb; i++) {
        const BeamHyp *x = &h[(size_t)i * t->n_best];
        if (x->ids)
            out[row_line[b->index[i]]].attention = line_attention(t, b, i, x->ids, x->len, attn + (size_t)i * L * S,
                                                                  heads ? heads + (size_t)i * L * H * S : NULL);
    }
    free(tok);
    free(heads);
    free(attn);
}

/* One batch: its rows' outputs into out[row_line[row]]. */
static void decode_batch(const Translator *t, const Batch *b, const int *row_line, long first_line, TranslatedLine *out) {
    int nb = b->B, L = model_max_output(t->max_len, b->S);
    tape_reset(t->tape);
    if (t->beam == 1 && t->n_more == 0) {
        int32_t *o = s2s_xmalloc((size_t)nb * L * sizeof *o);
        int *ol = s2s_xmalloc((size_t)nb * sizeof *ol);
        bool draw = t->heatmap_dir && model_has_attention(t->model), keep = t->want_attention && model_has_attention(t->model);
        float *attn = draw || keep ? s2s_xmalloc((size_t)nb * L * b->S * sizeof *attn) : NULL; /* bounded: the batch is cut to fit */
        int H = model_heads(t->model);
        float *heads = (draw || keep) && H > 1 ? s2s_xmalloc((size_t)nb * L * H * b->S * sizeof *heads) : NULL;
        model_greedy_heads(t->tape, t->model, b, t->max_len, o, ol, attn, heads);
        for (int i = 0; i < nb; i++) {
            int line = row_line[b->index[i]];
            out[line].text[0] = task_decode_target(&t->cfg->task, t->trg, o + (size_t)i * L, ol[i]);
            out[line].n_hyps = 1;
            if (keep)
                out[line].attention = line_attention(t, b, i, o + (size_t)i * L, ol[i], attn + (size_t)i * L * b->S,
                                                     heads ? heads + (size_t)i * L * H * b->S : NULL);
            if (draw)
                draw_heatmap(t, b, i, o + (size_t)i * L, ol[i], attn + (size_t)i * L * b->S,
                             heads ? heads + (size_t)i * L * H * b->S : NULL, first_line + line, &out[line]);
        }
        free(attn);
        free(heads);
        free(o);
        free(ol);
        return;
    }
    BeamHyp *h = s2s_xcalloc((size_t)nb * t->n_best, sizeof *h);
    Seq2Seq *ms[MODEL_MAX_ENSEMBLE];
    Tape *ts[MODEL_MAX_ENSEMBLE];
    int n_models = ensemble(t, ms, ts);
    for (int k = 1; k < n_models; k++) tape_reset(ts[k]);
    model_beam_ensemble(ts, ms, n_models, b, t->beam, t->max_len, t->alpha, t->n_best, h);
    for (int i = 0; i < nb; i++) {
        int line = row_line[b->index[i]];
        for (int j = 0; j < t->n_best; j++) {
            BeamHyp *x = &h[(size_t)i * t->n_best + j];
            out[line].text[j] = x->ids || j == 0 ? task_decode_target(&t->cfg->task, t->trg, x->ids, x->len) : NULL;
            out[line].score[j] = x->norm;
            out[line].logprob[j] = x->score;
            if (x->ids) out[line].n_hyps = j + 1;
        }
    }
    if (t->want_attention && n_models == 1 && model_has_attention(t->model)) beam_attention(t, b, h, row_line, out);
    beam_hyps_free(h, nb * t->n_best);
    free(h);
}

void translator_run(const Translator *t, const char *const *lines, int n, long first_line, TranslatedLine *out) {
    S2S_ASSERT(t->beam >= 1 && t->n_best >= 1 && t->n_best <= t->beam && t->n_best <= TRANSLATE_MAX_NBEST);
    S2S_ASSERT(!t->heatmap_dir || (t->beam == 1 && t->n_more == 0));
    S2S_ASSERT(!t->want_attention || t->n_more == 0);
    S2S_ASSERT(t->n_more >= 0 && t->n_more < MODEL_MAX_ENSEMBLE);
    memset(out, 0, (size_t)n * sizeof *out);
    Dataset d;
    dataset_init(&d);
    int *row_line = s2s_xmalloc((size_t)(n ? n : 1) * sizeof *row_line); /* dataset row → line */
    int32_t dummy[2] = {TOK_SOS, TOK_EOS};
    int longest = 1;
    for (int i = 0; i < n; i++) {
        int32_t *ids;
        int k;
        S2sError err;
        if (!lines[i] || lines[i][0] == '\0') { /* unreadable (the caller says why), or empty: an empty output */
            out[i].status = lines[i] ? S2S_OK : S2S_ERR_DATA;
            continue;
        }
        if (task_encode_source(&t->cfg->task, t->src, lines[i], t->tokenized, &ids, &k, &err)) {
            out[i].status = err.status;
            snprintf(out[i].error, sizeof out[i].error, "%s", err.msg);
            continue;
        }
        row_line[d.n] = i;
        dataset_add(&d, ids, k, dummy, 2);
        if (k > longest) longest = k;
        free(ids);
    }
    if (d.n) {
        /* a block is sorted by length, then cut into the family's batches (model_decode_batch:
         * a Transformer's greedy batches of 32 pad less than 64, 12–19 % faster) */
        int per_batch = model_decode_batch(t->model, t->beam);
        if (t->heatmap_dir || t->want_attention) { /* B × L × S attention weights kept (and × heads per head) */
            int H = model_heads(t->model);
            size_t row = (size_t)model_max_output(t->max_len, longest) * longest * sizeof(float) * (H > 1 ? 1 + (size_t)H : 1);
            size_t fit = HEATMAP_BATCH_BYTES / (row ? row : 1);
            if (fit < (size_t)per_batch) per_batch = fit > 0 ? (int)fit : 1;
        }
        BatchPlan plan;
        batchplan_make(&plan, &d, per_batch, 0, 0, NULL);
        Batch b;
        batch_init(&b);
        for (int k = 0; k < plan.n_batches; k++) {
            batch_fill(&b, &d, plan.order + plan.start[k], plan.start[k + 1] - plan.start[k]);
            decode_batch(t, &b, row_line, first_line, out);
        }
        batch_free(&b);
        batchplan_free(&plan);
    }
    for (int i = 0; i < n; i++)
        if (!out[i].text[0]) out[i].text[0] = s2s_xcalloc(1, 1); /* "" where nothing was decoded */
    free(row_line);
    dataset_free(&d);
}

void translator_free_results(TranslatedLine *out, int n) {
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < TRANSLATE_MAX_NBEST; j++) free(out[i].text[j]);
        translator_free_attention(out[i].attention);
    }
}

S2sStatus translator_check_ensemble(const Config *first, const Vocab *src, const Vocab *trg, const Config *cfg,
                                    const Vocab *src2, const Vocab *trg2, const char *path, S2sError *err) {
    const ConfigTask *a = &first->task, *b = &cfg->task;
    if (a->type != b->type || strcmp(a->src_lang, b->src_lang) != 0 || strcmp(a->trg_lang, b->trg_lang) != 0)
        return s2s_fail(err, S2S_ERR_DATA, "%s: another task than the first model's (%s %s-%s, the first %s %s-%s)", path,
                        TASK_TYPE_NAMES[b->type], b->src_lang, b->trg_lang, TASK_TYPE_NAMES[a->type], a->src_lang,
                        a->trg_lang);
    const Vocab *v1[2] = {src, trg}, *v2[2] = {src2, trg2};
    const char *side[2] = {"source", "target"};
    for (int s = 0; s < 2; s++) {
        int i = vocab_first_difference(v1[s], v2[s]->tokens, v2[s]->size);
        if (i >= 0 && i < v1[s]->size && i < v2[s]->size)
            return s2s_fail(err, S2S_ERR_DATA,
                            "%s: another %s vocabulary than the first model's (entry %d is \"%.40s\", there \"%.40s\")",
                            path, side[s], i, v2[s]->tokens[i], v1[s]->tokens[i]);
        if (v1[s]->size != v2[s]->size)
            return s2s_fail(err, S2S_ERR_DATA, "%s: a %s vocabulary of %d entries, the first model's has %d", path, side[s],
                            v2[s]->size, v1[s]->size);
        if (!v1[s]->sub != !v2[s]->sub)
            return s2s_fail(err, S2S_ERR_DATA, "%s: %s the first model %s a subword model", path,
                            v2[s]->sub ? "has a subword model;" : "has no subword model;", v1[s]->sub ? "has" : "has not");
        if (v1[s]->sub) {
            size_t la, lb;
            char *ba = subword_bytes(v1[s]->sub, &la), *bb = subword_bytes(v2[s]->sub, &lb);
            bool same = la == lb && memcmp(ba, bb, la) == 0;
            free(ba);
            free(bb);
            if (!same) return s2s_fail(err, S2S_ERR_DATA, "%s: another %s subword model than the first model's", path, side[s]);
        }
    }
    if (a->source_markers != b->source_markers)
        return s2s_fail(err, S2S_ERR_DATA, "%s: reads its sources otherwise than the first model (task settings differ)", path);
    return S2S_OK;
}

void translator_score(const Translator *t, const char *const *sources, const char *const *targets, int n, ScoredLine *out) {
    memset(out, 0, (size_t)n * sizeof *out);
    Dataset d;
    dataset_init(&d);
    int *row_line = s2s_xmalloc((size_t)(n ? n : 1) * sizeof *row_line);
    for (int i = 0; i < n; i++) {
        if (!sources[i] || !targets[i]) {
            out[i].status = S2S_ERR_DATA;
            continue;
        }
        int32_t *s = NULL, *y = NULL;
        int ns = 0, ny = 0;
        S2sError err;
        if (task_encode_source(&t->cfg->task, t->src, sources[i], t->tokenized, &s, &ns, &err) ||
            task_encode_target(&t->cfg->task, t->trg, targets[i], t->tokenized, &y, &ny, &err)) {
            out[i].status = err.status;
            snprintf(out[i].error, sizeof out[i].error, "%s", err.msg);
            free(s);
            continue;
        }
        int unk = -1;
        for (int k = 0; k < ny && unk < 0; k++)
            if (y[k] == TOK_UNK) unk = k;
        if (unk >= 0 || ns == 0) {
            out[i].status = S2S_ERR_DATA;
            if (ns == 0) snprintf(out[i].error, sizeof out[i].error, "an empty source has no score");
            else snprintf(out[i].error, sizeof out[i].error,
                          "the target's token %d is not in the model's vocabulary (<unk>): its score would be <unk>'s", unk + 1);
            free(s);
            free(y);
            continue;
        }
        int32_t *full = s2s_xmalloc((size_t)(ny + 2) * sizeof *full); /* <sos> target <eos> */
        full[0] = TOK_SOS;
        memcpy(full + 1, y, (size_t)ny * sizeof *y);
        full[ny + 1] = TOK_EOS;
        row_line[d.n] = i;
        dataset_add(&d, s, ns, full, ny + 2);
        free(full);
        free(s);
        free(y);
    }
    Seq2Seq *ms[MODEL_MAX_ENSEMBLE];
    Tape *ts[MODEL_MAX_ENSEMBLE];
    int n_models = ensemble(t, ms, ts);
    if (d.n) {
        BatchPlan plan;
        batchplan_make(&plan, &d, 32, 0, 0, NULL);
        Batch b;
        batch_init(&b);
        for (int k = 0; k < plan.n_batches; k++) {
            batch_fill(&b, &d, plan.order + plan.start[k], plan.start[k + 1] - plan.start[k]);
            int T1 = b.T - 1;
            float *lp = s2s_xmalloc((size_t)b.B * T1 * sizeof *lp);
            model_score_targets(ts, ms, n_models, &b, lp);
            ModelOutput lo = {0};
            if (t->score_logits) { /* the logits themselves: one model, teacher-forced as scored */
                S2S_ASSERT_MSG(n_models == 1, "logits are one model's");
                TapeMode mode = tape_enter_inference(t->tape);
                tape_reset(t->tape);
                lo = model_forward_all(t->tape, t->model, &b); /* ((T-1)·B, V), time-major */
                tape_leave(t->tape, mode);
            }
            for (int r = 0; r < b.B; r++) {
                int e = b.index[r];
                ScoredLine *o = &out[row_line[e]];
                const int32_t *y = d.ids + d.trg_off[e] + 1;
                o->n = d.trg_len[e] - 1; /* the target's tokens and <eos> */
                o->token = s2s_xmalloc((size_t)o->n * sizeof *o->token);
                o->piece = s2s_xmalloc((size_t)o->n * sizeof *o->piece);
                for (int i = 0; i < o->n; i++) {
                    o->token[i] = lp[(size_t)r * T1 + i];
                    o->total += o->token[i];
                    o->piece[i] = strdup(y[i] == TOK_EOS ? "</s>" : t->trg->tokens[y[i]]);
                }
                if (lo.logits) {
                    int V = t->model->trg_vocab;
                    o->V = V;
                    o->n_src = d.src_len[e];
                    o->src_ids = s2s_xmalloc((size_t)(o->n_src ? o->n_src : 1) * sizeof *o->src_ids);
                    memcpy(o->src_ids, d.ids + d.src_off[e], (size_t)o->n_src * sizeof *o->src_ids);
                    o->ids = s2s_xmalloc((size_t)o->n * sizeof *o->ids);
                    memcpy(o->ids, y, (size_t)o->n * sizeof *o->ids);
                    o->logits = s2s_xmalloc((size_t)o->n * V * sizeof *o->logits);
                    for (int i = 0; i < o->n; i++)
                        memcpy(o->logits + (size_t)i * V, tensor_read(lo.logits) + ((size_t)i * b.B + r) * V, (size_t)V * sizeof(float));
                }
            }
            if (lo.logits) tape_reset(t->tape);
            free(lp);
        }
        batch_free(&b);
        batchplan_free(&plan);
    }
    free(row_line);
    dataset_free(&d);
}

void translator_free_scores(ScoredLine *out, int n) {
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < out[i].n; k++) free(out[i].piece[k]);
        free(out[i].piece);
        free(out[i].token);
        free(out[i].src_ids);
        free(out[i].ids);
        free(out[i].logits);
    }
}

cJSON *translator_attention_json(const LineAttention *a) {
    cJSON *j = cJSON_CreateObject();
    cJSON *src = cJSON_AddArrayToObject(j, "source"), *out = cJSON_AddArrayToObject(j, "target"),
          *w = cJSON_AddArrayToObject(j, "weights");
    for (int k = 0; k < a->n_src; k++) cJSON_AddItemToArray(src, cJSON_CreateString(a->src[k]));
    for (int r = 0; r < a->n_out; r++) {
        cJSON_AddItemToArray(out, cJSON_CreateString(a->out[r]));
        cJSON_AddItemToArray(w, cJSON_CreateFloatArray(a->w + (size_t)r * a->n_src, a->n_src));
    }
    if (a->heads) { /* "layers": [layer][head][output row][source column] */
        cJSON *layers = cJSON_AddArrayToObject(j, "layers");
        for (int l = 0; l < a->n_layers; l++) {
            cJSON *hl = cJSON_CreateArray();
            for (int h = 0; h < a->n_heads; h++) {
                cJSON *m = cJSON_CreateArray();
                const float *p = a->heads + ((size_t)l * a->n_heads + h) * a->n_out * a->n_src;
                for (int r = 0; r < a->n_out; r++) cJSON_AddItemToArray(m, cJSON_CreateFloatArray(p + (size_t)r * a->n_src, a->n_src));
                cJSON_AddItemToArray(hl, m);
            }
            cJSON_AddItemToArray(layers, hl);
        }
    }
    return j;
}
