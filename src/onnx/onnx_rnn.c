/* onnx_rnn.c — the RNN encoder–decoder (numerics.md) as two ONNX graphs.
 *
 * The encoder runs ONNX's GRU/LSTM operators over the whole source (sequence_lens: each
 * sentence over its real tokens, as a packed sequence), so its final states and the backward
 * direction's start are PyTorch's; the decoder step runs one step of the same operators per
 * layer (linear_before_reset = 1 is PyTorch's GRU). The attention's projections of the
 * encoder outputs (keys, multihead's values) are made once, by the encoder, as s2s makes them
 * on the first step. Gate orders differ: PyTorch stacks GRU gates r, z, n and LSTM's i, f, g,
 * o; ONNX wants z, r, h and i, o, f, c, so the weights are restacked here. */
#include "onnx_internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Rnn {
    OnnxSource *s;
    bool lstm, bi, onehot;
    int L, E_src, E_trg, He, D, H, V_src, V, G; /* G: gates */
    AttnKind attn;
    int kq, heads, C;
} Rnn;

/* One-hot embeddings are the file's frozen V x V tensors, like learned ones: their size is shown by the file. */
static const char *embedding(OnnxGraph *g, Rnn *r, bool src) {
    int V = src ? r->V_src : r->V, E = src ? r->E_src : r->E_trg; /* one-hot: E is V */
    Tie tie = r->s->cfg.model.tie_embeddings;
    if (!r->onehot && ((src && tie == TIE_ALL) || (!src && tie != TIE_NONE)))
        return onnx_weight(g, r->s, "decoder.out.weight", V, r->H, 0, -1, false);
    return onnx_weight(g, r->s, src ? "encoder.embedding.weight" : "decoder.embedding.weight", V, E, 0, -1, false);
}

/* One layer's W (dirs, G·h, in), R (dirs, G·h, h), B (dirs, 2·G·h) in ONNX's gate order. */
static void cell_weights(OnnxGraph *g, Rnn *r, const char *prefix, const char *suffix, int dirs, int in, int h,
                         const char *out[3]) {
    static const int GRU_ORDER[3] = {1, 0, 2}, LSTM_ORDER[4] = {0, 3, 1, 2}; /* ONNX's gate k is PyTorch's ORDER[k] */
    const int *order = r->lstm ? LSTM_ORDER : GRU_ORDER;
    int G = r->G;
    float *wt[2][4] = {{NULL}};
    bool ok = true;
    for (int d = 0; d < dirs; d++) /* every tensor shown by the file before the config's sizes are allocated */
        for (int k = 0; k < 4; k++) {
            static const char *const KIND[4] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh"};
            char n[128];
            snprintf(n, sizeof n, "%s.%s%s%s", prefix, KIND[k], suffix, d ? "_reverse" : "");
            int64_t cols = k == 0 ? in : k == 1 ? h : 0;
            wt[d][k] = onnx_read(r->s, n, cols ? 2 : 1, (int64_t[]){(int64_t)G * h, cols});
            ok = ok && wt[d][k];
        }
    if (!ok) {
        for (int d = 0; d < dirs; d++)
            for (int k = 0; k < 4; k++) free(wt[d][k]);
        out[0] = out[1] = out[2] = ""; /* r->s->st says why; the graph is not written */
        return;
    }
    size_t nW = (size_t)dirs * G * h * in, nR = (size_t)dirs * G * h * h, nB = (size_t)dirs * 2 * G * h;
    float *W = s2s_xmalloc(nW * sizeof *W), *R = s2s_xmalloc(nR * sizeof *R), *B = s2s_xmalloc(nB * sizeof *B);
    for (int d = 0; d < dirs; d++) {
        const float *wi = wt[d][0], *wh = wt[d][1], *bi = wt[d][2], *bh = wt[d][3];
        for (int k = 0; k < G; k++) {
            size_t src = (size_t)order[k] * h, dst = (size_t)k * h;
            memcpy(W + ((size_t)d * G * h + dst) * in, wi + src * in, (size_t)h * in * sizeof *W);
            memcpy(R + ((size_t)d * G * h + dst) * h, wh + src * h, (size_t)h * h * sizeof *R);
            memcpy(B + (size_t)d * 2 * G * h + dst, bi + src, (size_t)h * sizeof *B);
            memcpy(B + (size_t)d * 2 * G * h + (size_t)G * h + dst, bh + src, (size_t)h * sizeof *B);
        }
        for (int k = 0; k < 4; k++) free(wt[d][k]);
    }
    char base[128];
    snprintf(base, sizeof base, "%s%s", prefix, suffix);
    char nm[160];
    snprintf(nm, sizeof nm, "%s.W", base), out[0] = onnx_init_f32(g, nm, 3, (int64_t[]){dirs, (int64_t)G * h, in}, W);
    snprintf(nm, sizeof nm, "%s.R", base), out[1] = onnx_init_f32(g, nm, 3, (int64_t[]){dirs, (int64_t)G * h, h}, R);
    snprintf(nm, sizeof nm, "%s.B", base), out[2] = onnx_init_f32(g, nm, 2, (int64_t[]){dirs, 2 * (int64_t)G * h}, B);
    free(W), free(R), free(B);
}

/* ONNX's GRU or LSTM node over x (S, B, in): outputs Y (S, dirs, B, h), Y_h, Y_c (LSTM). */
static OnnxNode *rnn_node(OnnxGraph *g, Rnn *r, const char *x, const char *w[3], const char *lens, const char *h0,
                          const char *c0, int h, bool bi) {
    const char *in[7] = {x, w[0], w[1], w[2], lens ? lens : "", h0 ? h0 : "", c0 ? c0 : ""};
    int n_in = r->lstm && c0 ? 7 : h0 ? 6 : 5;
    OnnxNode *n = onnx_node(g, r->lstm ? "LSTM" : "GRU", n_in, in, r->lstm ? 3 : 2);
    onnx_attr_i(n, "hidden_size", h);
    onnx_attr_s(n, "direction", bi ? "bidirectional" : "forward");
    if (!r->lstm) onnx_attr_i(n, "linear_before_reset", 1);
    return n;
}

/* x (B, in) W[r0 .. r0 + rows)^T + b (rows -1: all m; b an initializer or NULL): a Gemm, or with
 * --int8 ONNX Runtime's dynamic quantisation (onnx_linear_q8). The cells stay float32: ONNX's GRU
 * and LSTM operators have no integer form. */
static const char *linear(OnnxGraph *g, Rnn *r, const char *x, const char *name, int64_t m, int64_t in, int64_t r0,
                          int64_t rows, const char *b) {
    if (r->s->int8) return onnx_linear_q8(g, r->s, x, name, m, in, r0, rows, b);
    return onnx_gemm(g, x, onnx_weight(g, r->s, name, m, in, r0, rows, false), b);
}

/* x (B, S, in) W^T + b as MatMul and Add (b NULL: none), or in int8 as linear() */
static const char *linear3(OnnxGraph *g, Rnn *r, const char *x, const char *name, int64_t m, int64_t in, int64_t r0,
                           int64_t rows, const char *b) {
    if (r->s->int8) return onnx_linear_q8(g, r->s, x, name, m, in, r0, rows, b);
    const char *y = onnx_op2(g, "MatMul", x, onnx_weight(g, r->s, name, m, in, r0, rows, true));
    return b ? onnx_op2(g, "Add", y, b) : y;
}

/* enc (B, S, D) → what the variant projects once: keys, and multihead's values */
static void attn_memories(OnnxGraph *g, Rnn *r, const char *enc, const char **keys, const char **values) {
    const char *p = "decoder.attention";
    char n[128];
    *keys = *values = NULL;
    switch (r->attn) {
    case ATTN_DUMMY:
    case ATTN_MEANPOOL:
    case ATTN_DOT: return;
    case ATTN_SCALED_DOT:
    case ATTN_ADDITIVE:
        snprintf(n, sizeof n, "%s.W_k.bias", p);
        const char *b = onnx_weight(g, r->s, n, r->kq, 0, 0, -1, false);
        snprintf(n, sizeof n, "%s.W_k.weight", p);
        *keys = linear3(g, r, enc, n, r->kq, r->D, 0, -1, b);
        return;
    case ATTN_GENERAL:
        snprintf(n, sizeof n, "%s.W.weight", p);
        *keys = linear3(g, r, enc, n, r->H, r->D, 0, -1, NULL);
        return;
    case ATTN_MULTIHEAD: {
        int H = r->H, dh = H / r->heads;
        bool packed = r->D == H;
        snprintf(n, sizeof n, "%s.in_proj_bias", p);
        const char *bk = onnx_weight(g, r->s, n, 3 * H, 0, H, H, false), *bv = onnx_weight(g, r->s, n, 3 * H, 0, 2 * H, H, false);
        const char *k, *v;
        if (packed) {
            snprintf(n, sizeof n, "%s.in_proj_weight", p);
            k = linear3(g, r, enc, n, 3 * H, H, H, H, bk), v = linear3(g, r, enc, n, 3 * H, H, 2 * H, H, bv);
        } else {
            snprintf(n, sizeof n, "%s.k_proj_weight", p), k = linear3(g, r, enc, n, H, r->D, 0, -1, bk);
            snprintf(n, sizeof n, "%s.v_proj_weight", p), v = linear3(g, r, enc, n, H, r->D, 0, -1, bv);
        }
        int64_t split[4] = {0, 0, r->heads, dh};
        *keys = onnx_transpose(g, onnx_reshape(g, k, 4, split), 4, (int64_t[]){0, 2, 3, 1});   /* (B, heads, dh, S) */
        *values = onnx_transpose(g, onnx_reshape(g, v, 4, split), 4, (int64_t[]){0, 2, 1, 3}); /* (B, heads, S, dh) */
        return;
    }
    }
}

static void rnn_encoder(OnnxGraph *g, Rnn *r, cJSON *meta) {
    char dims[64];
    onnx_input(g, "src", ONNX_INT64, "batch,src_len");
    onnx_input(g, "src_len", ONNX_INT64, "batch");
    const char *x = onnx_transpose(g, onnx_op2(g, "Gather", embedding(g, r, true), "src"), 3, (int64_t[]){1, 0, 2});
    OnnxNode *cast = onnx_node(g, "Cast", 1, (const char *[]){"src_len"}, 1);
    onnx_attr_i(cast, "to", 6); /* int32, as sequence_lens wants */
    const char *lens = onnx_out(cast, 0), *hs[16], *cs[16];
    int dirs = r->bi ? 2 : 1;
    for (int k = 0; k < r->L; k++) {
        const char *w[3];
        char suf[24];
        snprintf(suf, sizeof suf, "_l%d", k);
        cell_weights(g, r, "encoder.rnn", suf, dirs, k ? r->D : r->E_src, r->He, w);
        OnnxNode *n = rnn_node(g, r, x, w, lens, NULL, NULL, r->He, r->bi);
        x = onnx_reshape(g, onnx_transpose(g, onnx_out(n, 0), 4, (int64_t[]){0, 2, 1, 3}), 3, (int64_t[]){0, 0, -1});
        hs[k] = onnx_out(n, 1), cs[k] = r->lstm ? onnx_out(n, 2) : NULL;
    }
    const char *enc = onnx_transpose(g, x, 3, (int64_t[]){1, 0, 2}); /* (B, S, D) */
    const char *h0, *c0 = NULL;
    if (r->bi) { /* h₀ of each layer: ReLU(fc([h→_last ; h←_first])) */
        const char *fb = onnx_weight(g, r->s, "encoder.fc.bias", r->H, 0, 0, -1, false);
        for (int k = 0; k < r->L; k++) {
            const char *both = onnx_reshape(g, onnx_transpose(g, hs[k], 3, (int64_t[]){1, 0, 2}), 2, (int64_t[]){0, -1});
            hs[k] = onnx_unsqueeze(g, onnx_op1(g, "Relu", linear(g, r, both, "encoder.fc.weight", r->H, r->D, 0, -1, fb)), 0);
        }
        h0 = onnx_concat(g, r->L, hs, 0);
        if (r->lstm) c0 = onnx_zeros(g, onnx_op1(g, "Shape", h0));
    } else {
        h0 = onnx_concat(g, r->L, hs, 0);
        if (r->lstm) c0 = onnx_concat(g, r->L, cs, 0);
    }
    /* src_bias (B, S): 0 at real tokens, -inf at pads, added to the scores */
    const char *S = onnx_op2(g, "Gather", onnx_op1(g, "Shape", "src"), onnx_scalar_i64(g, 1));
    const char *pos = onnx_op3(g, "Range", onnx_scalar_i64(g, 0), S, onnx_scalar_i64(g, 1));
    const char *real = onnx_op2(g, "Less", onnx_unsqueeze(g, pos, 0), onnx_unsqueeze(g, "src_len", 1));
    const char *bias = onnx_op3(g, "Where", real, onnx_scalar_f32(g, 0.0f), onnx_scalar_f32(g, -INFINITY));
    const char *keys, *values;
    attn_memories(g, r, enc, &keys, &values);

    cJSON *state = cJSON_AddArrayToObject(meta, "state"), *mem = cJSON_AddArrayToObject(meta, "memory");
    snprintf(dims, sizeof dims, "%d,batch,%d", r->L, r->H);
    onnx_output(g, h0, "h", ONNX_FLOAT, dims);
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "name", "h"), cJSON_AddNumberToObject(e, "batch_axis", 1), cJSON_AddItemToArray(state, e);
    if (c0) {
        onnx_output(g, c0, "c", ONNX_FLOAT, dims);
        e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", "c"), cJSON_AddNumberToObject(e, "batch_axis", 1), cJSON_AddItemToArray(state, e);
    }
    struct { const char *t, *name; } m[4] = {{enc, "enc"}, {bias, "src_bias"}, {keys, "keys"}, {values, "values"}};
    for (int i = 0; i < 4; i++) {
        if (!m[i].t) continue;
        e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", m[i].name), cJSON_AddNumberToObject(e, "batch_axis", 0);
        cJSON_AddItemToArray(mem, e);
    }
    snprintf(dims, sizeof dims, "batch,src_len,%d", r->D), onnx_output(g, enc, "enc", ONNX_FLOAT, dims);
    onnx_output(g, bias, "src_bias", ONNX_FLOAT, "batch,src_len");
    int dh = r->attn == ATTN_MULTIHEAD ? r->H / r->heads : 0;
    int kw = r->attn == ATTN_GENERAL ? r->H : r->kq;
    if (keys && dh) snprintf(dims, sizeof dims, "batch,%d,%d,src_len", r->heads, dh);
    else snprintf(dims, sizeof dims, "batch,src_len,%d", kw);
    if (keys) onnx_output(g, keys, "keys", ONNX_FLOAT, dims);
    snprintf(dims, sizeof dims, "batch,%d,src_len,%d", r->heads, dh);
    if (values) onnx_output(g, values, "values", ONNX_FLOAT, dims);
}

/* the context (B, C) of the top state top (B, H); *weights (B, S) */
static const char *attention(OnnxGraph *g, Rnn *r, const char *top, const char **weights) {
    const char *p = "decoder.attention", *scores = NULL;
    char n[128];
    switch (r->attn) {
    case ATTN_DUMMY: {
        const char *shape = onnx_concat(g, 2, (const char *[]){onnx_op2(g, "Gather", onnx_op1(g, "Shape", top), onnx_ints1(g, 0)),
                                                          onnx_ints1(g, r->D)}, 0);
        *weights = onnx_zeros(g, onnx_op1(g, "Shape", "src_bias"));
        return onnx_zeros(g, shape);
    }
    case ATTN_MEANPOOL: *weights = onnx_softmax(g, "src_bias"); break; /* 1/len at real tokens */
    case ATTN_DOT: scores = onnx_squeeze(g, onnx_op2(g, "MatMul", "enc", onnx_unsqueeze(g, top, 2)), 2); break;
    case ATTN_GENERAL: scores = onnx_squeeze(g, onnx_op2(g, "MatMul", "keys", onnx_unsqueeze(g, top, 2)), 2); break;
    case ATTN_SCALED_DOT: {
        snprintf(n, sizeof n, "%s.W_q.bias", p);
        const char *b = onnx_weight(g, r->s, n, r->kq, 0, 0, -1, false);
        snprintf(n, sizeof n, "%s.W_q.weight", p);
        const char *q = onnx_unsqueeze(g, linear(g, r, top, n, r->kq, r->H, 0, -1, b), 2);
        scores = onnx_op2(g, "Mul", onnx_squeeze(g, onnx_op2(g, "MatMul", "keys", q), 2),
                          onnx_scalar_f32(g, 1.0f / sqrtf((float)r->kq)));
        break;
    }
    case ATTN_ADDITIVE: {
        snprintf(n, sizeof n, "%s.W_q.weight", p);
        const char *q = onnx_unsqueeze(g, linear(g, r, top, n, r->kq, r->H, 0, -1, NULL), 1);
        snprintf(n, sizeof n, "%s.v", p);
        const char *v = onnx_reshape(g, onnx_weight(g, r->s, n, r->kq, 0, 0, -1, false), 2, (int64_t[]){r->kq, 1});
        scores = onnx_squeeze(g, onnx_op2(g, "MatMul", onnx_op1(g, "Tanh", onnx_op2(g, "Add", "keys", q)), v), 2);
        break;
    }
    case ATTN_MULTIHEAD: {
        int H = r->H, dh = H / r->heads;
        snprintf(n, sizeof n, "%s.in_proj_bias", p);
        const char *bq = onnx_weight(g, r->s, n, 3 * H, 0, 0, H, false);
        snprintf(n, sizeof n, "%s.%s", p, r->D == H ? "in_proj_weight" : "q_proj_weight");
        const char *q = onnx_reshape(g, r->D == H ? linear(g, r, top, n, 3 * H, H, 0, H, bq) : linear(g, r, top, n, H, H, 0, -1, bq),
                                     4, (int64_t[]){0, r->heads, 1, dh});
        const char *sc = onnx_op2(g, "Mul", onnx_op2(g, "MatMul", q, "keys"), onnx_scalar_f32(g, 1.0f / sqrtf((float)dh)));
        const char *bias = onnx_unsqueeze(g, onnx_unsqueeze(g, "src_bias", 1), 1);
        const char *w = onnx_softmax(g, onnx_op2(g, "Add", sc, bias)); /* (B, heads, 1, S) */
        OnnxNode *mean = onnx_node(g, "ReduceMean", 1, &w, 1);
        onnx_attr_ints(mean, "axes", 2, (int64_t[]){1, 2});
        onnx_attr_i(mean, "keepdims", 0);
        *weights = onnx_out(mean, 0);
        const char *ctx = onnx_reshape(g, onnx_op2(g, "MatMul", w, "values"), 2, (int64_t[]){0, -1});
        snprintf(n, sizeof n, "%s.out_proj.bias", p);
        const char *ob = onnx_weight(g, r->s, n, H, 0, 0, -1, false);
        snprintf(n, sizeof n, "%s.out_proj.weight", p);
        return linear(g, r, ctx, n, H, H, 0, -1, ob);
    }
    }
    if (scores) *weights = onnx_softmax(g, onnx_op2(g, "Add", scores, "src_bias"));
    return onnx_squeeze(g, onnx_op2(g, "MatMul", onnx_unsqueeze(g, *weights, 1), "enc"), 1);
}

static void rnn_decoder(OnnxGraph *g, Rnn *r) {
    char dims[64];
    /* the state as the last step left it (state_batch rows); rows picks this step's from it */
    snprintf(dims, sizeof dims, "%d,state_batch,%d", r->L, r->H);
    onnx_input(g, "y", ONNX_INT64, "batch");
    onnx_input(g, "rows", ONNX_INT64, "batch");
    onnx_input(g, "h", ONNX_FLOAT, dims);
    if (r->lstm) onnx_input(g, "c", ONNX_FLOAT, dims);
    const char *h = onnx_gather(g, "h", "rows", 1), *c = r->lstm ? onnx_gather(g, "c", "rows", 1) : NULL;
    snprintf(dims, sizeof dims, "batch,src_len,%d", r->D), onnx_input(g, "enc", ONNX_FLOAT, dims);
    onnx_input(g, "src_bias", ONNX_FLOAT, "batch,src_len");
    int dh = r->attn == ATTN_MULTIHEAD ? r->H / r->heads : 0;
    if (r->attn == ATTN_MULTIHEAD) {
        snprintf(dims, sizeof dims, "batch,%d,%d,src_len", r->heads, dh), onnx_input(g, "keys", ONNX_FLOAT, dims);
        snprintf(dims, sizeof dims, "batch,%d,src_len,%d", r->heads, dh), onnx_input(g, "values", ONNX_FLOAT, dims);
    } else if (r->attn == ATTN_SCALED_DOT || r->attn == ATTN_ADDITIVE || r->attn == ATTN_GENERAL) {
        snprintf(dims, sizeof dims, "batch,src_len,%d", r->attn == ATTN_GENERAL ? r->H : r->kq);
        onnx_input(g, "keys", ONNX_FLOAT, dims);
    }
    const char *x = onnx_unsqueeze(g, onnx_op2(g, "Gather", embedding(g, r, false), "y"), 0); /* (1, B, E) */
    const char *hs[16], *cs[16];
    for (int k = 0; k < r->L; k++) {
        const char *w[3], *at = onnx_ints1(g, k), *to = onnx_ints1(g, k + 1), *zero = onnx_ints1(g, 0);
        char suf[24];
        suf[0] = 0; /* one layer: GRUCell's and LSTMCell's names */
        if (r->L > 1) snprintf(suf, sizeof suf, "_l%d", k);
        cell_weights(g, r, "decoder.rnn", suf, 1, k ? r->H : r->E_trg, r->H, w);
        const char *h0 = onnx_out(onnx_node(g, "Slice", 4, (const char *[]){h, at, to, zero}, 1), 0);
        const char *c0 = r->lstm ? onnx_out(onnx_node(g, "Slice", 4, (const char *[]){c, at, to, zero}, 1), 0) : NULL;
        OnnxNode *n = rnn_node(g, r, x, w, NULL, h0, c0, r->H, false);
        x = hs[k] = onnx_out(n, 1), cs[k] = r->lstm ? onnx_out(n, 2) : NULL;
    }
    const char *top = onnx_squeeze(g, hs[r->L - 1], 0), *weights = NULL; /* (B, H) */
    const char *ctx = attention(g, r, top, &weights);
    const char *cat = onnx_concat(g, 2, (const char *[]){ctx, top}, 1);
    const char *logits;
    const char *ob = onnx_weight(g, r->s, "decoder.out.bias", r->V, 0, 0, -1, false);
    if (r->s->cfg.model.combine == COMBINE_LUONG) {
        const char *t = onnx_op1(g, "Tanh", linear(g, r, cat, "decoder.W_c.weight", r->H, r->C + r->H, 0, -1, NULL));
        logits = linear(g, r, t, "decoder.out.weight", r->V, r->H, 0, -1, ob);
    } else {
        logits = linear(g, r, cat, "decoder.out.weight", r->V, r->C + r->H, 0, -1, ob);
    }
    snprintf(dims, sizeof dims, "batch,%d", r->V), onnx_output(g, logits, "logits", ONNX_FLOAT, dims);
    onnx_output(g, onnx_log_softmax(g, logits), "log_probs", ONNX_FLOAT, dims); /* beam search's scores */
    snprintf(dims, sizeof dims, "%d,batch,%d", r->L, r->H);
    onnx_output(g, onnx_concat(g, r->L, hs, 0), "h_out", ONNX_FLOAT, dims);
    if (r->lstm) onnx_output(g, onnx_concat(g, r->L, cs, 0), "c_out", ONNX_FLOAT, dims);
    onnx_output(g, weights, "attention", ONNX_FLOAT, "batch,src_len");
}

S2sStatus onnx_rnn_graphs(OnnxSource *s, OnnxGraph *enc, OnnxGraph *dec, void *meta, S2sError *err) {
    const ConfigModel *m = &s->cfg.model;
    Rnn r = {.s = s, .lstm = m->cell == MODEL_CELL_LSTM, .bi = m->bidirectional, .L = m->layers,
             .onehot = m->embedding_type == EMBEDDING_ONEHOT, .He = m->encoder_hidden, .H = m->decoder_hidden,
             .V_src = s->n_src, .V = s->n_trg, .attn = m->attention, .kq = m->kq, .heads = m->heads};
    r.G = r.lstm ? 4 : 3;
    r.D = (r.bi ? 2 : 1) * r.He;
    r.E_src = r.onehot ? r.V_src : m->embedding;
    r.E_trg = r.onehot ? r.V : m->embedding;
    r.C = r.attn == ATTN_MULTIHEAD ? r.H : r.D;
    if (r.L < 1 || r.L > 16)
        return s2s_fail(err, S2S_ERR_CONFIG, "%s: model.layers %d: the ONNX export takes 1 to 16 layers", s->origin, r.L);
    if (r.attn == ATTN_MULTIHEAD && (r.heads < 1 || r.H % r.heads))
        return s2s_fail(err, S2S_ERR_DATA, "%s: model.heads %d does not divide decoder_hidden %d", s->origin, r.heads, r.H);
    rnn_encoder(enc, &r, meta);
    rnn_decoder(dec, &r);
    return s->st ? s2s_fail(err, s->st, "%s", s->err.msg) : S2S_OK;
}
