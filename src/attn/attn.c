/* attn.c — the variant table and the shared score → softmax → context path. */
#include "s2s/attn.h"
#include "s2s/common.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* l(enc), from the cache slot when there is one. */
static Tensor *projected(Tape *t, const Linear *l, Tensor *enc, Tensor **slot) {
    if (slot && *slot) return *slot;
    Tensor *k = linear_forward(t, l, enc);
    if (slot) *slot = k;
    return k;
}

static Tensor **keys_slot(AttnCache *c) { return c ? &c->keys : NULL; }

/* weights = softmax(scores, mask) (B, T, S); context = weights · enc → (T, B, D). */
static Tensor *attend(Tape *t, Tensor *scores, Tensor *enc, const uint8_t *src_mask, AttnWeights *aw) {
    int B = enc->shape[1];
    Tensor *w = op_softmax(t, scores, src_mask, B);
    aw->mean = w;
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
                             AttnWeights *aw, AttnCache *cache) {
    (void)a, (void)m, (void)cache;
    aw->mean = NULL;
    return tape_zeros(t, 3, (int[]){dec->shape[0], dec->shape[1], enc->shape[2]});
}

/* ---- meanpool: the mean of the real encoder states, the same for every step ---- */
static Tensor *meanpool_forward(Tape *t, const Attention *a, Tensor *dec, Tensor *enc, const uint8_t *m,
                                AttnWeights *aw, AttnCache *cache) {
    (void)a, (void)cache;
    int T = dec->shape[0], B = dec->shape[1], S = enc->shape[0];
    Tensor *w = tape_tensor3(t, B, T, S); /* constant: mask / length */
    float *wd = tensor_write(w);
    for (int b = 0; b < B; b++) {
        int len = 0;
        for (int s = 0; s < S; s++) len += m[b * S + s] != 0;
        for (int i = 0; i < T; i++)
            for (int s = 0; s < S; s++)
                wd[((size_t)b * T + i) * S + s] = len && m[b * S + s] ? 1.0f / (float)len : 0.0f;
    }
    aw->mean = w;
    return op_matmul(t, w, enc, MM_B_TM | MM_OUT_TM);
}

/* ---- dot: h · enc_t ---- */
static Tensor *dot_forward(Tape *t, const Attention *a, Tensor *dec, Tensor *enc, const uint8_t *m,
                           AttnWeights *aw, AttnCache *cache) {
    (void)a, (void)cache;
    return attend(t, dot_scores(t, dec, enc), enc, m, aw);
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
                                  AttnWeights *aw, AttnCache *cache) {
    Tensor *q = linear_forward(t, &a->q, dec), *k = projected(t, &a->k, enc, keys_slot(cache));
    Tensor *scores = op_scale(t, dot_scores(t, q, k), 1.0f / sqrtf((float)a->kq));
    return attend(t, scores, enc, m, aw);
}

/* ---- general (Luong's bilinear): h^T W enc_t ---- */
static void general_init(Attention *a, ParamStore *ps, const char *prefix) {
    char name[PARAM_NAME_MAX];
    snprintf(name, sizeof name, "%s.W", prefix);
    linear_init(&a->k, ps, name, a->enc_dim, a->dec_dim, false);
}

static Tensor *general_forward(Tape *t, const Attention *a, Tensor *dec, Tensor *enc, const uint8_t *m,
                               AttnWeights *aw, AttnCache *cache) {
    return attend(t, dot_scores(t, dec, projected(t, &a->k, enc, keys_slot(cache))), enc, m, aw);
}

/* ---- additive (Bahdanau): v^T tanh(W_q h + W_k enc_t), attention size kq ---- */
static void additive_init(Attention *a, ParamStore *ps, const char *prefix) {
    qk_init(a, ps, prefix, false);
    char name[PARAM_NAME_MAX];
    snprintf(name, sizeof name, "%s.v", prefix);
    a->v_a = params_add(ps, name, 1, (int[]){a->kq});
}

static Tensor *additive_forward(Tape *t, const Attention *a, Tensor *dec, Tensor *enc, const uint8_t *m,
                                AttnWeights *aw, AttnCache *cache) {
    Tensor *q = linear_forward(t, &a->q, dec), *k = projected(t, &a->k, enc, keys_slot(cache));
    return attend(t, op_additive_scores(t, q, k, a->v_a), enc, m, aw);
}

/* ---- multihead: PyTorch's nn.MultiheadAttention(embed_dim = Hd, heads, kdim = vdim = D) ----
 * q = W_q h + b_q, k = W_k enc + b_k, v = W_v enc + b_v (each E = Hd wide), split into heads
 * of E / heads; per head softmax(q_h · k_h / sqrt(E / heads)) · v_h; the heads side by side
 * through out_proj. Parameters under PyTorch's names: in_proj_weight (3E, E) when D = E, else
 * q_proj_weight (E, E), k_proj_weight (E, D), v_proj_weight (E, D); in_proj_bias (3E);
 * out_proj.weight, out_proj.bias. The heads fold into the batch for free: (T, B, E) is
 * (T, B·heads, E / heads) time-major, and the (B, S) mask row of score row (b·heads + h)·T + i
 * is b, as op_softmax maps it. */
static void multihead_init(Attention *a, ParamStore *ps, const char *prefix) {
    int E = a->dec_dim, D = a->enc_dim;
    char name[PARAM_NAME_MAX];
    Tensor *wq, *wk, *wv;
    if (D == E) {
        snprintf(name, sizeof name, "%s.in_proj_weight", prefix);
        Tensor *w = params_add(ps, name, 2, (int[]){3 * E, E});
        wq = params_view(ps, w, 0, 2, (int[]){E, E});
        wk = params_view(ps, w, (size_t)E * E, 2, (int[]){E, E});
        wv = params_view(ps, w, 2 * (size_t)E * E, 2, (int[]){E, E});
    } else {
        snprintf(name, sizeof name, "%s.q_proj_weight", prefix);
        wq = params_add(ps, name, 2, (int[]){E, E});
        snprintf(name, sizeof name, "%s.k_proj_weight", prefix);
        wk = params_add(ps, name, 2, (int[]){E, D});
        snprintf(name, sizeof name, "%s.v_proj_weight", prefix);
        wv = params_add(ps, name, 2, (int[]){E, D});
    }
    snprintf(name, sizeof name, "%s.in_proj_bias", prefix);
    Tensor *b = params_add(ps, name, 1, (int[]){3 * E});
    a->q = (Linear){wq, params_view(ps, b, 0, 1, (int[]){E})};
    a->k = (Linear){wk, params_view(ps, b, (size_t)E, 1, (int[]){E})};
    a->val = (Linear){wv, params_view(ps, b, 2 * (size_t)E, 1, (int[]){E})};
    snprintf(name, sizeof name, "%s.out_proj", prefix);
    linear_init(&a->o, ps, name, E, E, true);
}

Tensor *attn_heads_mean(Tape *t, const Tensor *w, int heads) {
    int BH = w->shape[0], T = w->shape[1], S = w->shape[2], B = BH / heads;
    S2S_ASSERT(w->ndim == 3 && heads > 0 && BH % heads == 0);
    size_t TS = (size_t)T * S;
    Tensor *m = tape_zeros(t, 3, (int[]){B, T, S});
    for (int b = 0; b < B; b++) {
        float *mb = tensor_write(m) + (size_t)b * TS;
        for (int h = 0; h < heads; h++) {
            const float *wb = tensor_read(w) + ((size_t)b * heads + h) * TS;
            for (size_t k = 0; k < TS; k++) mb[k] += wb[k];
        }
        for (size_t k = 0; k < TS; k++) mb[k] /= (float)heads;
    }
    return m;
}

static Tensor *multihead_forward(Tape *t, const Attention *a, Tensor *dec, Tensor *enc, const uint8_t *m,
                                 AttnWeights *aw, AttnCache *cache) {
    int B = dec->shape[1], H = a->heads;
    Tensor *q = linear_forward(t, &a->q, dec);                                 /* (T, B, E) */
    Tensor *k = projected(t, &a->k, enc, cache ? &cache->keys : NULL);        /* (S, B, E) */
    Tensor *v = projected(t, &a->val, enc, cache ? &cache->values : NULL);    /* (S, B, E) */
    Tensor *w;                                                                 /* (B·H, T, S) */
    Tensor *ctx = mha_forward(t, q, k, v, H, m, B, 0.0f, NULL, &w);           /* (T, B, E) */
    aw->mean = H == 1 ? w : attn_heads_mean(t, w, H);
    aw->heads = aw->want_heads && H > 1 ? w : NULL;
    return linear_forward(t, &a->o, ctx);
}

/* summary, has_weights, needs_same_dim, ctx_is_dec, has_heads, keys_kq, keys_dec, init, forward */
const AttnVariant ATTN_VARIANTS[ATTN_KIND_COUNT] = {
    [ATTN_DUMMY] = {"zero context (no attention)", false, false, false, false, 0, 0, no_params, dummy_forward},
    [ATTN_MEANPOOL] = {"mean of the encoder states", true, false, false, false, 0, 0, no_params, meanpool_forward},
    [ATTN_DOT] = {"h . enc_t (needs decoder_hidden = encoder output size)", true, true, false, false, 0, 0, no_params,
                  dot_forward},
    [ATTN_SCALED_DOT] = {"(W_q h) . (W_k enc_t) / sqrt(kq)", true, false, false, false, 1, 0, scaled_dot_init,
                         scaled_dot_forward},
    [ATTN_GENERAL] = {"h^T W enc_t (Luong's bilinear)", true, false, false, false, 0, 1, general_init, general_forward},
    [ATTN_ADDITIVE] = {"v^T tanh(W_q h + W_k enc_t) (Bahdanau), size kq", true, false, false, false, 1, 0, additive_init,
                       additive_forward},
    [ATTN_MULTIHEAD] = {"scaled dot per head over projections of h and enc_t, heads side by side, projected (PyTorch's "
                        "nn.MultiheadAttention)",
                        true, false, true, true, 0, 2, multihead_init, multihead_forward},
};

AttnWidths attn_widths(const AttnVariant *v, int dec_dim, int enc_dim, int kq, int heads) {
    return (AttnWidths){v->ctx_is_dec ? dec_dim : enc_dim, v->has_heads ? heads : 1, v->keys_kq * kq + v->keys_dec * dec_dim};
}

const AttnVariant *attn_variant(AttnKind k) {
    S2S_ASSERT((int)k >= 0 && (int)k < ATTN_KIND_COUNT);
    return &ATTN_VARIANTS[k];
}

void attn_init(Attention *a, const AttnVariant *v, ParamStore *ps, const char *prefix, int dec_dim,
               int enc_dim, int kq, int heads) {
    memset(a, 0, sizeof *a);
    a->v = v;
    a->dec_dim = dec_dim;
    a->enc_dim = enc_dim;
    a->kq = kq;
    AttnWidths w = attn_widths(v, dec_dim, enc_dim, kq, heads);
    a->heads = w.heads;
    a->ctx_dim = w.ctx;
    S2S_ASSERT(!v->needs_same_dim || dec_dim == enc_dim);
    S2S_ASSERT(a->heads >= 1 && dec_dim % a->heads == 0);
    v->init(a, ps, prefix);
}

Tensor *attn_forward_heads(Tape *t, const Attention *a, Tensor *dec, Tensor *enc, const uint8_t *src_mask,
                           AttnWeights *w, AttnCache *cache) {
    S2S_ASSERT(dec->ndim == 3 && enc->ndim == 3 && dec->shape[1] == enc->shape[1]);
    w->mean = w->heads = NULL;
    return a->v->forward(t, a, dec, enc, src_mask, w, cache);
}

Tensor *attn_forward(Tape *t, const Attention *a, Tensor *dec, Tensor *enc, const uint8_t *src_mask,
                     Tensor **weights, AttnCache *cache) {
    AttnWeights w = {0};
    Tensor *ctx = attn_forward_heads(t, a, dec, enc, src_mask, &w, cache);
    if (weights) *weights = w.mean;
    return ctx;
}
