/* attn.h — pluggable attention: a table of variants, indexed by the config's AttnKind.
 *
 * Every variant maps decoder states (T, B, Hd) and encoder states (S, B, D), with a source
 * mask (B, S) (1 = real token), to a context (T, B, D) for all decoder steps at once, and
 * returns its weights (B, T, S) where it has any. An Attention borrows its parameters from
 * the ParamStore (declared under PyTorch's names, prefix.W_q.weight, …). */
#ifndef S2S_ATTN_H
#define S2S_ATTN_H

#include "s2s/config.h"
#include "s2s/nn.h"

typedef struct Attention Attention;

typedef struct AttnVariant { /* its name: ATTN_KIND_NAMES[kind] */
    const char *summary;
    bool has_weights;    /* false: no weights to draw (dummy) */
    bool needs_same_dim; /* scores are h · enc_t: decoder hidden must equal encoder output */
    void (*init)(Attention *a, ParamStore *ps, const char *prefix);
    /* keys: a cache of the variant's projection of enc (NULL: none); step-by-step decoding
     * computes it on the first step only, since the encoder states do not change */
    Tensor *(*forward)(Tape *t, const Attention *a, Tensor *dec, Tensor *enc, const uint8_t *src_mask,
                       Tensor **weights, Tensor **keys);
} AttnVariant;

struct Attention {
    const AttnVariant *v;
    int dec_dim, enc_dim, kq;
    Linear q, k;  /* scaled_dot: W_q, W_k (with bias); general: k = W (no bias); additive: W_q, W_k */
    Tensor *v_a;  /* additive: v (A) */
};

extern const AttnVariant ATTN_VARIANTS[ATTN_KIND_COUNT];

/* The variant of kind k. */
const AttnVariant *attn_variant(AttnKind k);
/* Declares the variant's parameters. kq: the key/query size (scaled_dot, additive). */
void attn_init(Attention *a, const AttnVariant *v, ParamStore *ps, const char *prefix, int dec_dim,
               int enc_dim, int kq);
/* dec (T, B, Hd), enc (S, B, D), src_mask (B, S) → context (T, B, D); *weights gets
 * (B, T, S) or NULL. keys: NULL, or a slot (initially NULL) that keeps the projected keys
 * of enc between calls with the same enc (decoding). */
Tensor *attn_forward(Tape *t, const Attention *a, Tensor *dec, Tensor *enc, const uint8_t *src_mask,
                     Tensor **weights, Tensor **keys);

#endif
