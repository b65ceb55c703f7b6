/* mha.c — the scaled-dot multi-head attention core that the multihead attention variant and
 * the Transformer's self- and cross-attention (training and cached decoding) share. */
#include "s2s/nn.h"

#include <math.h>

/* A decoding step (one query row, no gradient): fused, the same bits; NULL for anything
 * else. One sentence·head alone is a single product, which op_matmul sums in another order. */
static Tensor *fused_step(Tape *t, Tensor *q, Tensor *k, Tensor *v, int heads, const uint8_t *mask, int mask_rows,
                          const int32_t *slot, Tensor **weights) {
    int B = q->shape[1], S = k->shape[0], W = k->shape[1], E = q->shape[2], Dh = E / heads;
    if (q->shape[0] != 1 || B * heads == 1 || tape_wants(t, q, k, v)) return NULL;
    Tensor *qh = tape_reshape3(t, q, 1, B * heads, Dh), *kh = tape_reshape3(t, k, S, W * heads, Dh);
    Tensor *vh = tape_reshape3(t, v, S, W * heads, Dh);
    Tensor *ctx = op_attend_row(t, qh, kh, vh, 1.0f / sqrtf((float)Dh), mask, mask_rows, slot, heads, weights);
    return tape_reshape3(t, ctx, 1, B, E);
}

/* k and v (S, W, E): W = B, or wider with slots */
static void check_shapes(const Tensor *q, const Tensor *k, const Tensor *v, int heads, bool slots) {
    int B = q->shape[1], S = k->shape[0], E = q->shape[2], W = k->shape[1];
    S2S_ASSERT(q->ndim == 3 && k->ndim == 3 && v->ndim == 3 && heads > 0 && E % heads == 0);
    S2S_ASSERT((W == B || (slots && W > B)) && v->shape[1] == W && k->shape[2] == E && v->shape[2] == E && v->shape[0] == S);
}

Tensor *mha_step_slots(Tape *t, Tensor *q, Tensor *k, Tensor *v, int heads, const uint8_t *mask, int mask_rows,
                       const int32_t *slot, Tensor **weights) {
    check_shapes(q, k, v, heads, slot != NULL);
    return fused_step(t, q, k, v, heads, mask, mask_rows, slot, weights);
}

Tensor *mha_forward(Tape *t, Tensor *q, Tensor *k, Tensor *v, int heads, const uint8_t *mask, int mask_rows,
                    float drop_p, Rng *drop_rng, Tensor **weights) {
    check_shapes(q, k, v, heads, false);
    Tensor *fused = drop_rng && drop_p > 0 ? NULL : fused_step(t, q, k, v, heads, mask, mask_rows, NULL, weights);
    if (fused) return fused;
    int T = q->shape[0], B = q->shape[1], S = k->shape[0], E = q->shape[2], Dh = E / heads;
    Tensor *qh = tape_reshape3(t, q, T, B * heads, Dh), *kh = tape_reshape3(t, k, S, B * heads, Dh);
    Tensor *vh = tape_reshape3(t, v, S, B * heads, Dh);
    /* PyTorch scales q before the product; the same up to rounding */
    Tensor *scores = op_scale(t, op_matmul(t, qh, kh, MM_A_TM | MM_B_TM | MM_TRANS_B), 1.0f / sqrtf((float)Dh));
    Tensor *p = op_softmax(t, scores, mask, mask_rows); /* (B·heads, T, S) */
    if (weights) *weights = p;
    if (drop_rng && drop_p > 0) p = op_dropout(t, p, drop_p, drop_rng);
    Tensor *ctx = op_matmul(t, p, vh, MM_B_TM | MM_OUT_TM); /* (T, B·heads, Dh) */
    return tape_reshape3(t, ctx, T, B, E);
}
