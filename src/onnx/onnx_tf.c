/* onnx_tf.c — the Transformer (numerics.md) as two ONNX graphs.
 *
 * Batch-first inside the graphs: (B, S, d). The encoder gives the memory's cross-attention keys
 * and values of every decoder layer, made once as s2s makes them on the first step, and the
 * decoder's empty self-attention caches; a decoder step appends the new token's key and value
 * to each layer's cache and returns the caches (keys kept as (B, heads, dh, T), so the scores
 * are one MatMul without a transpose a step). The step's position is the caches' length.
 * Sinusoidal positions are computed in the graph in double, as s2s computes them. */
#include "onnx_internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Tf {
    OnnxSource *s;
    int d, heads, dh, ff, enc_layers, dec_layers, V_src, V;
    bool pre, gelu, learned;
    int max_positions;
} Tf;

static const char *w2(OnnxGraph *g, Tf *t, const char *pre, const char *name, int64_t m, int64_t n, bool tr) {
    char full[160];
    snprintf(full, sizeof full, "%s%s", pre, name);
    return onnx_weight(g, t->s, full, m, n, 0, -1, tr);
}

/* x (B, T, in) W^T + b, for the weight pre+name (m, in) */
static const char *linear3(OnnxGraph *g, Tf *t, const char *x, const char *pre, const char *name, int64_t m, int64_t in) {
    char w[160], b[160];
    snprintf(w, sizeof w, "%s.weight", name), snprintf(b, sizeof b, "%s.bias", name);
    const char *bias = w2(g, t, pre, b, m, 0, false);
    if (t->s->int8) {
        char full[200];
        snprintf(full, sizeof full, "%s%s", pre, w);
        return onnx_linear_q8(g, t->s, x, full, m, in, 0, -1, bias);
    }
    return onnx_op2(g, "Add", onnx_op2(g, "MatMul", x, w2(g, t, pre, w, m, in, true)), bias);
}

static const char *layer_norm(OnnxGraph *g, Tf *t, const char *x, const char *pre, const char *name) {
    char w[160], b[160];
    snprintf(w, sizeof w, "%s.weight", name), snprintf(b, sizeof b, "%s.bias", name);
    const char *in[3] = {x, w2(g, t, pre, w, t->d, 0, false), w2(g, t, pre, b, t->d, 0, false)};
    OnnxNode *n = onnx_node(g, "LayerNormalization", 3, in, 1);
    onnx_attr_i(n, "axis", -1);
    onnx_attr_f(n, "epsilon", 1e-5f);
    return onnx_out(n, 0);
}

/* One of q, k, v (k = 0, 1, 2) of in_proj for x (B, T, d), split into heads: (B, heads, T, dh), or
 * keys as (B, heads, dh, T) */
static const char *project(OnnxGraph *g, Tf *t, const char *x, const char *attn, int k, bool keys) {
    char w[160], b[160];
    snprintf(w, sizeof w, "%s.in_proj_weight", attn), snprintf(b, sizeof b, "%s.in_proj_bias", attn);
    const char *bias = onnx_weight(g, t->s, b, 3 * t->d, 0, k * t->d, t->d, false);
    const char *y = t->s->int8 ? onnx_linear_q8(g, t->s, x, w, 3 * t->d, t->d, k * t->d, t->d, bias)
                               : onnx_op2(g, "Add", onnx_op2(g, "MatMul", x, onnx_weight(g, t->s, w, 3 * t->d, t->d, k * t->d,
                                                                                         t->d, true)),
                                          bias);
    y = onnx_reshape(g, y, 4, (int64_t[]){0, -1, t->heads, t->dh});
    return onnx_transpose(g, y, 4, keys ? (int64_t[]){0, 2, 3, 1} : (int64_t[]){0, 2, 1, 3});
}

/* softmax(q kᵀ / √dh + bias) v, heads side by side, through out_proj: q (B, h, T, dh), keys
 * (B, h, dh, S), values (B, h, S, dh), bias broadcast to (B, h, T, S) or NULL → (B, T, d); the
 * weights (B, h, T, S) into *w when w */
static const char *attend(OnnxGraph *g, Tf *t, const char *q, const char *keys, const char *values, const char *bias,
                          const char *attn, const char **w) {
    const char *sc = onnx_op2(g, "Mul", onnx_op2(g, "MatMul", q, keys), onnx_scalar_f32(g, 1.0f / sqrtf((float)t->dh)));
    if (bias) sc = onnx_op2(g, "Add", sc, bias);
    const char *a = onnx_softmax(g, sc);
    if (w) *w = a;
    const char *ctx = onnx_transpose(g, onnx_op2(g, "MatMul", a, values), 4, (int64_t[]){0, 2, 1, 3});
    char o[160];
    snprintf(o, sizeof o, "%s.out_proj", attn);
    return linear3(g, t, onnx_reshape(g, ctx, 3, (int64_t[]){0, 0, t->d}), "", o, t->d, t->d);
}

static const char *feed_forward(OnnxGraph *g, Tf *t, const char *x, const char *pre) {
    const char *h = linear3(g, t, x, pre, "linear1", t->ff, t->d);
    if (t->gelu) /* exact: x Φ(x) = x (1 + erf(x / √2)) / 2 */
        h = onnx_op2(g, "Mul", onnx_op2(g, "Mul", h, onnx_scalar_f32(g, 0.5f)),
                     onnx_op2(g, "Add", onnx_scalar_f32(g, 1.0f),
                              onnx_op1(g, "Erf", onnx_op2(g, "Mul", h, onnx_scalar_f32(g, 0.70710678118654752f)))));
    else h = onnx_op1(g, "Relu", h);
    return linear3(g, t, h, pre, "linear2", t->d, t->ff);
}

/* x + f(norm(x)) (pre-norm) or norm(x + f(x)) (post-norm), fx the sublayer's output for the input
 * sub_in gave it */
static const char *residual(OnnxGraph *g, Tf *t, const char *x, const char *fx, const char *pre, const char *norm) {
    const char *y = onnx_op2(g, "Add", x, fx);
    return t->pre ? y : layer_norm(g, t, y, pre, norm);
}

/* the sublayer's input: norm(x) under pre-norm, x under post-norm */
static const char *sub_in(OnnxGraph *g, Tf *t, const char *x, const char *pre, const char *norm) {
    return t->pre ? layer_norm(g, t, x, pre, norm) : x;
}

/* √d · emb[ids] + P[positions] for ids (B, T) at positions pos (T) int64 */
static const char *embed(OnnxGraph *g, Tf *t, const char *ids, const char *pos, bool src) {
    Tie tie = t->s->cfg.model.tie_embeddings;
    bool tied = src ? tie == TIE_ALL : tie != TIE_NONE;
    const char *e = onnx_weight(g, t->s, tied ? "generator.weight" : src ? "src_embed.weight" : "trg_embed.weight",
                                src ? t->V_src : t->V, t->d, 0, -1, false);
    const char *x = onnx_op2(g, "Mul", onnx_op2(g, "Gather", e, ids), onnx_scalar_f32(g, sqrtf((float)t->d)));
    const char *p;
    if (t->learned) { /* positions past the table take its last row */
        const char *w = onnx_weight(g, t->s, src ? "src_pos.weight" : "trg_pos.weight", t->max_positions, t->d, 0, -1, false);
        p = onnx_op2(g, "Gather", w, onnx_op2(g, "Min", pos, onnx_scalar_i64(g, t->max_positions - 1)));
    } else { /* sin at even features, cos at odd, in double: angle = pos · exp(−ln(10000) · k / d) */
        int half = (t->d + 1) / 2;
        double *f = s2s_xmalloc((size_t)half * sizeof *f);
        for (int j = 0; j < half; j++) f[j] = exp(-log(10000.0) * (double)(2 * j) / (double)t->d);
        const char *freq = onnx_const_f64(g, half, f);
        free(f);
        OnnxNode *c = onnx_node(g, "Cast", 1, &pos, 1);
        onnx_attr_i(c, "to", ONNX_DOUBLE);
        const char *angle = onnx_op2(g, "Mul", onnx_unsqueeze(g, onnx_out(c, 0), 1), freq); /* (T, half) */
        const char *sc[2] = {onnx_unsqueeze(g, onnx_op1(g, "Sin", angle), 2), onnx_unsqueeze(g, onnx_op1(g, "Cos", angle), 2)};
        const char *both = onnx_reshape(g, onnx_concat(g, 2, sc, 2), 2, (int64_t[]){0, -1}); /* (T, 2·half) */
        if (2 * half != t->d)
            both = onnx_out(onnx_node(g, "Slice", 4,
                                      (const char *[]){both, onnx_ints1(g, 0), onnx_ints1(g, t->d), onnx_ints1(g, 1)}, 1),
                            0);
        OnnxNode *f32 = onnx_node(g, "Cast", 1, &both, 1);
        onnx_attr_i(f32, "to", ONNX_FLOAT);
        p = onnx_out(f32, 0);
    }
    return onnx_op2(g, "Add", x, onnx_unsqueeze(g, p, 0));
}

static void meta_entry(cJSON *a, const char *name, int axis) {
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "name", name), cJSON_AddNumberToObject(e, "batch_axis", axis);
    cJSON_AddItemToArray(a, e);
}

static void tf_encoder(OnnxGraph *g, Tf *t, cJSON *meta) {
    char pre[96], dims[64], nm[48];
    onnx_input(g, "src", ONNX_INT64, "batch,src_len");
    onnx_input(g, "src_len", ONNX_INT64, "batch");
    const char *S = onnx_op2(g, "Gather", onnx_op1(g, "Shape", "src"), onnx_scalar_i64(g, 1));
    const char *pos = onnx_op3(g, "Range", onnx_scalar_i64(g, 0), S, onnx_scalar_i64(g, 1));
    const char *real = onnx_op2(g, "Less", onnx_unsqueeze(g, pos, 0), onnx_unsqueeze(g, "src_len", 1));
    const char *bias = onnx_op3(g, "Where", real, onnx_scalar_f32(g, 0.0f), onnx_scalar_f32(g, -INFINITY)); /* (B, S) */
    const char *bias4 = onnx_unsqueeze(g, onnx_unsqueeze(g, bias, 1), 1);
    const char *x = embed(g, t, "src", pos, true);
    for (int l = 0; l < t->enc_layers; l++) {
        snprintf(pre, sizeof pre, "transformer.encoder.layers.%d.", l);
        char attn[128];
        snprintf(attn, sizeof attn, "%sself_attn", pre);
        const char *h = sub_in(g, t, x, pre, "norm1");
        x = residual(g, t, x, attend(g, t, project(g, t, h, attn, 0, false), project(g, t, h, attn, 1, true),
                                     project(g, t, h, attn, 2, false), bias4, attn, NULL),
                     pre, "norm1");
        x = residual(g, t, x, feed_forward(g, t, sub_in(g, t, x, pre, "norm2"), pre), pre, "norm2");
    }
    const char *memory = layer_norm(g, t, x, "transformer.encoder.", "norm");
    cJSON *state = cJSON_AddArrayToObject(meta, "state"), *mem = cJSON_AddArrayToObject(meta, "memory");
    onnx_output(g, bias, "src_bias", ONNX_FLOAT, "batch,src_len");
    meta_entry(mem, "src_bias", 0);
    const char *B = onnx_op2(g, "Gather", onnx_op1(g, "Shape", "src"), onnx_ints1(g, 0));
    const char *kshape = onnx_concat(g, 2, (const char *[]){B, onnx_const_i64(g, 3, (int64_t[]){t->heads, t->dh, 0})}, 0);
    const char *vshape = onnx_concat(g, 2, (const char *[]){B, onnx_const_i64(g, 3, (int64_t[]){t->heads, 0, t->dh})}, 0);
    for (int l = 0; l < t->dec_layers; l++) {
        char attn[128];
        snprintf(attn, sizeof attn, "transformer.decoder.layers.%d.multihead_attn", l);
        snprintf(nm, sizeof nm, "cross_k%d", l), snprintf(dims, sizeof dims, "batch,%d,%d,src_len", t->heads, t->dh);
        onnx_output(g, project(g, t, memory, attn, 1, true), nm, ONNX_FLOAT, dims), meta_entry(mem, nm, 0);
        snprintf(nm, sizeof nm, "cross_v%d", l), snprintf(dims, sizeof dims, "batch,%d,src_len,%d", t->heads, t->dh);
        onnx_output(g, project(g, t, memory, attn, 2, false), nm, ONNX_FLOAT, dims), meta_entry(mem, nm, 0);
        snprintf(nm, sizeof nm, "self_k%d", l), snprintf(dims, sizeof dims, "batch,%d,%d,0", t->heads, t->dh);
        onnx_output(g, onnx_zeros(g, kshape), nm, ONNX_FLOAT, dims), meta_entry(state, nm, 0);
        snprintf(nm, sizeof nm, "self_v%d", l), snprintf(dims, sizeof dims, "batch,%d,0,%d", t->heads, t->dh);
        onnx_output(g, onnx_zeros(g, vshape), nm, ONNX_FLOAT, dims), meta_entry(state, nm, 0);
    }
}

/* Each decoder layer's keys STEM_k{l} (batch, h, dh, axis) and values STEM_v{l} (batch, h, axis,
 * dh) as inputs. */
static void kv_inputs(OnnxGraph *g, Tf *t, const char *stem, const char *batch, const char *axis) {
    char nm[48], dims[96];
    for (int l = 0; l < t->dec_layers; l++) {
        snprintf(nm, sizeof nm, "%s_k%d", stem, l), snprintf(dims, sizeof dims, "%s,%d,%d,%s", batch, t->heads, t->dh, axis);
        onnx_input(g, nm, ONNX_FLOAT, dims);
        snprintf(nm, sizeof nm, "%s_v%d", stem, l), snprintf(dims, sizeof dims, "%s,%d,%s,%d", batch, t->heads, axis, t->dh);
        onnx_input(g, nm, ONNX_FLOAT, dims);
    }
}

static void tf_decoder(OnnxGraph *g, Tf *t) {
    char pre[96], dims[64], nm[48];
    const char *self_k[TF_ONNX_MAX_LAYERS], *self_v[TF_ONNX_MAX_LAYERS], *weights = NULL;
    onnx_input(g, "y", ONNX_INT64, "batch");
    onnx_input(g, "rows", ONNX_INT64, "batch"); /* the caches as the last step left them: this step's rows */
    kv_inputs(g, t, "self", "state_batch", "past");
    onnx_input(g, "src_bias", ONNX_FLOAT, "batch,src_len");
    kv_inputs(g, t, "cross", "batch", "src_len");
    const char *pos = onnx_op3(g, "Slice", onnx_op1(g, "Shape", "self_k0"), onnx_ints1(g, 3), onnx_ints1(g, 4)); /* (1): the cache's length */
    const char *x = embed(g, t, onnx_unsqueeze(g, "y", 1), pos, false);                         /* (B, 1, d) */
    const char *bias4 = onnx_unsqueeze(g, onnx_unsqueeze(g, "src_bias", 1), 1);
    for (int l = 0; l < t->dec_layers; l++) {
        snprintf(pre, sizeof pre, "transformer.decoder.layers.%d.", l);
        char sa[128], ca[128], k[32], v[32], ck[32], cv[32];
        snprintf(sa, sizeof sa, "%sself_attn", pre), snprintf(ca, sizeof ca, "%smultihead_attn", pre);
        snprintf(k, sizeof k, "self_k%d", l), snprintf(v, sizeof v, "self_v%d", l);
        snprintf(ck, sizeof ck, "cross_k%d", l), snprintf(cv, sizeof cv, "cross_v%d", l);
        const char *h = sub_in(g, t, x, pre, "norm1");
        self_k[l] = onnx_concat(g, 2, (const char *[]){onnx_gather(g, k, "rows", 0), project(g, t, h, sa, 1, true)}, 3);
        self_v[l] = onnx_concat(g, 2, (const char *[]){onnx_gather(g, v, "rows", 0), project(g, t, h, sa, 2, false)}, 2);
        x = residual(g, t, x, attend(g, t, project(g, t, h, sa, 0, false), self_k[l], self_v[l], NULL, sa, NULL), pre, "norm1");
        h = sub_in(g, t, x, pre, "norm2");
        const char **w = l == t->dec_layers - 1 ? &weights : NULL;
        x = residual(g, t, x, attend(g, t, project(g, t, h, ca, 0, false), ck, cv, bias4, ca, w), pre, "norm2");
        x = residual(g, t, x, feed_forward(g, t, sub_in(g, t, x, pre, "norm3"), pre), pre, "norm3");
    }
    const char *out = onnx_reshape(g, layer_norm(g, t, x, "transformer.decoder.", "norm"), 2, (int64_t[]){0, t->d});
    const char *gb = onnx_weight(g, t->s, "generator.bias", t->V, 0, 0, -1, false);
    const char *logits = t->s->int8 ? onnx_linear_q8(g, t->s, out, "generator.weight", t->V, t->d, 0, -1, gb)
                                    : onnx_gemm(g, out, onnx_weight(g, t->s, "generator.weight", t->V, t->d, 0, -1, false), gb);
    snprintf(dims, sizeof dims, "batch,%d", t->V), onnx_output(g, logits, "logits", ONNX_FLOAT, dims);
    onnx_output(g, onnx_log_softmax(g, logits), "log_probs", ONNX_FLOAT, dims); /* beam search's scores */
    for (int l = 0; l < t->dec_layers; l++) {
        snprintf(nm, sizeof nm, "self_k%d_out", l), snprintf(dims, sizeof dims, "batch,%d,%d,past_1", t->heads, t->dh);
        onnx_output(g, self_k[l], nm, ONNX_FLOAT, dims);
        snprintf(nm, sizeof nm, "self_v%d_out", l), snprintf(dims, sizeof dims, "batch,%d,past_1,%d", t->heads, t->dh);
        onnx_output(g, self_v[l], nm, ONNX_FLOAT, dims);
    }
    OnnxNode *mean = onnx_node(g, "ReduceMean", 1, &weights, 1); /* the last layer's cross-attention, mean over heads */
    onnx_attr_ints(mean, "axes", 2, (int64_t[]){1, 2});
    onnx_attr_i(mean, "keepdims", 0);
    onnx_output(g, onnx_out(mean, 0), "attention", ONNX_FLOAT, "batch,src_len");
}

S2sStatus onnx_tf_graphs(OnnxSource *s, OnnxGraph *enc, OnnxGraph *dec, void *meta, S2sError *err) {
    const ConfigModel *m = &s->cfg.model;
    Tf t = {.s = s, .d = m->d_model, .heads = m->heads, .ff = m->ff, .V_src = s->n_src, .V = s->n_trg,
            .enc_layers = m->encoder_layers ? m->encoder_layers : m->layers,
            .dec_layers = m->decoder_layers ? m->decoder_layers : m->layers, .pre = m->norm == NORM_PRE,
            .gelu = m->activation == ACTIVATION_GELU, .learned = m->positions == POSITIONS_LEARNED,
            .max_positions = m->max_positions};
    if (t.heads < 1 || t.d % t.heads)
        return s2s_fail(err, S2S_ERR_DATA, "%s: model.heads %d does not divide d_model %d", s->origin, t.heads, t.d);
    if (t.enc_layers < 1 || t.dec_layers < 1 || t.enc_layers > TF_ONNX_MAX_LAYERS || t.dec_layers > TF_ONNX_MAX_LAYERS)
        return s2s_fail(err, S2S_ERR_DATA, "%s: %d encoder and %d decoder layers: the ONNX export takes 1 to %d each",
                        s->origin, t.enc_layers, t.dec_layers, TF_ONNX_MAX_LAYERS);
    t.dh = t.d / t.heads;
    tf_encoder(enc, &t, meta);
    tf_decoder(dec, &t);
    return s->st ? s2s_fail(err, s->st, "%s", s->err.msg) : S2S_OK;
}
