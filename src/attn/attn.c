/* attn.c — the variant table and the shared score → softmax → context path. */
#include "s2s/attn.h"
#include "s2s/common.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* l(enc), from the cache when there is one. */
static Tensor *projected(Tape *t, const Linear *l, Tensor *enc, Tensor **keys) {
    if (keys && *keys) return *keys;
    Tensor *k = linear_forward(t, l, enc);
    if (keys) *keys = k;
    return k;
}

/* weights = softmax(scores, mask) (B, T, S); context = weights · enc → (T, B, D). */
static Tensor *attend(Tape *t, Tensor *scores, Tensor *enc, const uint8_t *src_mask, Tensor **weights) {
    int B = enc->shape[1];
    Tensor *w = op_softmax(t, scores, src_mask, B);
    *weights = w;
    return op_matmul(t, w, enc, MM_B_TM | MM_OUT_TM);
}

/* scores (B, T, S) = q (T, B, K) · k (S, B, K)^T */
static Tensor *dot_scores(Tape *t, Tensor *q, Tensor *k) {
    return op_matmul(t, q, k, MM_A_TM | MM_B_TM | MM_TRANS_B);
}

static void no_params(Attention *a, ParamStore *ps, const char *prefix) {
    (void)a, (void)ps, (void)prefix;
}

/* ---- dummy: a zero context; the decoder sees no source beyond its initial state ---- */
static Tensor *dummy_forward(Tape *t, const Attention *a, Tensor *dec, Tensor *enc, const uint8_t *m,
                             Tensor **weights, Tensor **keys) {
    (void)a, (void)m, (void)keys;
    *weights = NULL;
    return tape_zeros(t, 3, (int[]){dec->shape[0], dec->shape[1], enc->shape[2]});
}

/* ---- meanpool: the mean of the real encoder states, the same for every step ---- */
static Tensor *meanpool_forward(Tape *t, const Attention *a, Tensor *dec, Tensor *enc, const uint8_t *m,
                                Tensor **weights, Tensor **keys) {
    (void)a, (void)keys;
    int T = dec->shape[0], B = dec->shape[1], S = enc->shape[0];
    Tensor *w = tape_tensor3(t, B, T, S); /* constant: mask / length */
    for (int b = 0; b < B; b++) {
        int len = 0;
        for (int s = 0; s < S; s++) len += m[b * S + s] != 0;
        for (int i = 0; i < T; i++)
            for (int s = 0; s < S; s++)
                w->data[((size_t)b * T + i) * S + s] = len && m[b * S + s] ? 1.0f / (float)len : 0.0f;
    }
    *weights = w;
    return op_matmul(t, w, enc, MM_B_TM | MM_OUT_TM);
}

/* ---- dot: h · enc_t ---- */
static Tensor *dot_forward(Tape *t, const Attention *a, Tensor *dec, Tensor *enc, const uint8_t *m,
                           Tensor **weights, Tensor **keys) {
    (void)a, (void)keys;
    return attend(t, dot_scores(t, dec, enc), enc, m, weights);
}

/* W_q (kq, Hd) and W_k (kq, D), as prefix.W_q / prefix.W_k */
static void qk_init(Attention *a, ParamStore *ps, const char *prefix, bool q_bias) {
    char name[PARAM_NAME_MAX];
    snprintf(name, sizeof name, "%s.W_q", prefix);
    linear_init(&a->q, ps, name, a->dec_dim, a->kq, q_bias);
    snprintf(name, sizeof name, "%s.W_k", prefix);
    linear_init(&a->k, ps, name, a->enc_dim, a->kq, true);
}

/* ---- scaled_dot: (W_q h) · (W_k enc_t) / sqrt(kq) ---- */
static void scaled_dot_init(Attention *a, ParamStore *ps, const char *prefix) { qk_init(a, ps, prefix, true); }

static Tensor *scaled_dot_forward(Tape *t, const Attention *a, Tensor *dec, Tensor *enc, const uint8_t *m,
                                  Tensor **weights, Tensor **keys) {
    Tensor *q = linear_forward(t, &a->q, dec), *k = projected(t, &a->k, enc, keys);
    Tensor *scores = op_scale(t, dot_scores(t, q, k), 1.0f / sqrtf((float)a->kq));
    return attend(t, scores, enc, m, weights);
}

/* ---- general (Luong's bilinear): h^T W enc_t ---- */
static void general_init(Attention *a, ParamStore *ps, const char *prefix) {
    char name[PARAM_NAME_MAX];
    snprintf(name, sizeof name, "%s.W", prefix);
    linear_init(&a->k, ps, name, a->enc_dim, a->dec_dim, false);
}

static Tensor *general_forward(Tape *t, const Attention *a, Tensor *dec, Tensor *enc, const uint8_t *m,
                               Tensor **weights, Tensor **keys) {
    return attend(t, dot_scores(t, dec, projected(t, &a->k, enc, keys)), enc, m, weights);
}

/* ---- additive (Bahdanau): v^T tanh(W_q h + W_k enc_t), attention size kq ---- */
static void additive_init(Attention *a, ParamStore *ps, const char *prefix) {
    qk_init(a, ps, prefix, false);
    char name[PARAM_NAME_MAX];
    snprintf(name, sizeof name, "%s.v", prefix);
    a->v_a = params_add(ps, name, 1, (int[]){a->kq});
}

static Tensor *additive_forward(Tape *t, const Attention *a, Tensor *dec, Tensor *enc, const uint8_t *m,
                                Tensor **weights, Tensor **keys) {
    Tensor *q = linear_forward(t, &a->q, dec), *k = projected(t, &a->k, enc, keys);
    return attend(t, op_additive_scores(t, q, k, a->v_a), enc, m, weights);
}

const AttnVariant ATTN_VARIANTS[ATTN_KIND_COUNT] = {
    [ATTN_DUMMY] = {"zero context (no attention)", false, false, no_params, dummy_forward},
    [ATTN_MEANPOOL] = {"mean of the encoder states", true, false, no_params, meanpool_forward},
    [ATTN_DOT] = {"h . enc_t (needs decoder_hidden = encoder output size)", true, true, no_params, dot_forward},
    [ATTN_SCALED_DOT] = {"(W_q h) . (W_k enc_t) / sqrt(kq)", true, false, scaled_dot_init, scaled_dot_forward},
    [ATTN_GENERAL] = {"h^T W enc_t (Luong's bilinear)", true, false, general_init, general_forward},
    [ATTN_ADDITIVE] = {"v^T tanh(W_q h + W_k enc_t) (Bahdanau), size kq", true, false, additive_init, additive_forward},
};

const AttnVariant *attn_variant(AttnKind k) {
    S2S_ASSERT((int)k >= 0 && (int)k < ATTN_KIND_COUNT);
    return &ATTN_VARIANTS[k];
}

void attn_init(Attention *a, const AttnVariant *v, ParamStore *ps, const char *prefix, int dec_dim,
               int enc_dim, int kq) {
    memset(a, 0, sizeof *a);
    a->v = v;
    a->dec_dim = dec_dim;
    a->enc_dim = enc_dim;
    a->kq = kq;
    S2S_ASSERT(!v->needs_same_dim || dec_dim == enc_dim);
    v->init(a, ps, prefix);
}

Tensor *attn_forward(Tape *t, const Attention *a, Tensor *dec, Tensor *enc, const uint8_t *src_mask,
                     Tensor **weights, Tensor **keys) {
    S2S_ASSERT(dec->ndim == 3 && enc->ndim == 3 && dec->shape[1] == enc->shape[1]);
    Tensor *w = NULL;
    Tensor *ctx = a->v->forward(t, a, dec, enc, src_mask, &w, keys);
    if (weights) *weights = w;
    return ctx;
}
