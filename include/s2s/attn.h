/* attn.h — pluggable attention: a table of variants, indexed by the config's AttnKind.
 *
 * Every variant maps decoder states (T, B, Hd) and encoder states (S, B, D), with a source
 * mask (B, S) (1 = real token), to a context (T, B, C) for all decoder steps at once (C is
 * D, or Hd for multihead, whose output projection maps back to the query's size), and
 * returns its weights (B, T, S) where it has any (multihead: the heads' mean; each head's
 * as well on request). An Attention borrows its parameters from the ParamStore (declared
 * under PyTorch's names, prefix.W_q.weight, prefix.in_proj_weight, …). */
#ifndef S2S_ATTN_H
#define S2S_ATTN_H

#include "s2s/config.h"
#include "s2s/nn.h"

typedef struct Attention Attention;

/* What step-by-step decoding keeps between calls with the same enc: the variant's projections
 * of it (keys; values for multihead), made on the first call. Both NULL at first. */
typedef struct AttnCache {
    Tensor *keys, *values;
} AttnCache;

/* The weights a forward call hands back: mean over heads (B, T, S), and with heads > 1,
 * when asked (want_heads), each head's (B·heads, T, S), head-minor. skip: the caller reads
 * none, and a model that makes them only to hand them back (the Transformer) makes none. */
typedef struct AttnWeights {
    Tensor *mean;
    Tensor *heads;
    bool want_heads;
    bool skip;
} AttnWeights;

typedef struct AttnVariant { /* its name: ATTN_KIND_NAMES[kind] */
    const char *summary;
    bool has_weights;    /* false: no weights to draw (dummy) */
    bool needs_same_dim; /* scores are h · enc_t: decoder hidden must equal encoder output */
    /* its widths (attn_widths): the context is as wide as the decoder's state (ctx_is_dec) or
     * as the encoder's outputs; it runs model.heads heads or one; it projects keys (and values)
     * of keys_kq · kq + keys_dec · decoder width numbers per source position */
    bool ctx_is_dec, has_heads;
    int keys_kq, keys_dec;
    void (*init)(Attention *a, ParamStore *ps, const char *prefix);
    /* cache: the variant's projections of enc (NULL: none); step-by-step decoding computes
     * them on the first step only, since the encoder states do not change */
    Tensor *(*forward)(Tape *t, const Attention *a, Tensor *dec, Tensor *enc, const uint8_t *src_mask,
                       AttnWeights *w, AttnCache *cache);
} AttnVariant;

/* A variant's sizes for a decoder state of dec_dim and encoder outputs of enc_dim. */
typedef struct AttnWidths {
    int ctx;   /* the context's width */
    int heads; /* 1, or model.heads */
    int keys;  /* numbers projected per source position (0: none) */
} AttnWidths;
AttnWidths attn_widths(const AttnVariant *v, int dec_dim, int enc_dim, int kq, int heads);

struct Attention {
    const AttnVariant *v;
    int dec_dim, enc_dim, kq, heads;
    int ctx_dim;  /* the context's size: enc_dim, or dec_dim for multihead */
    Linear q, k;  /* scaled_dot: W_q, W_k (with bias); general: k = W (no bias); additive: W_q, W_k;
                   * multihead: the query and key projections (views of in_proj_*, or q/k_proj_weight) */
    Linear val, o; /* multihead: the value projection, and out_proj */
    Tensor *v_a;  /* additive: v (A) */
};

extern const AttnVariant ATTN_VARIANTS[ATTN_KIND_COUNT];

/* The variant of kind k. */
const AttnVariant *attn_variant(AttnKind k);
/* Declares the variant's parameters. kq: the key/query size (scaled_dot, additive); heads:
 * multihead's (dividing dec_dim). */
void attn_init(Attention *a, const AttnVariant *v, ParamStore *ps, const char *prefix, int dec_dim,
               int enc_dim, int kq, int heads);
/* dec (T, B, Hd), enc (S, B, D), src_mask (B, S) → context (T, B, a->ctx_dim); *weights gets
 * (B, T, S) or NULL. cache: NULL, or one (initially zeroed) that keeps the projections of enc
 * between calls with the same enc (decoding). */
Tensor *attn_forward(Tape *t, const Attention *a, Tensor *dec, Tensor *enc, const uint8_t *src_mask,
                     Tensor **weights, AttnCache *cache);
/* The mean over heads of w (B·heads, T, S), head-minor → (B, T, S) on the tape, without a
 * gradient: the weights pictures and metrics show (multihead, the Transformer's layers). */
Tensor *attn_heads_mean(Tape *t, const Tensor *w, int heads);
/* The same, with each head's weights too (w->heads, when w->want_heads and heads > 1). */
Tensor *attn_forward_heads(Tape *t, const Attention *a, Tensor *dec, Tensor *enc, const uint8_t *src_mask,
                           AttnWeights *w, AttnCache *cache);

#endif
