/* attn_calc.h — the attention calculator behind ./attend: scaled or plain dot-product
 * attention of queries over keys and values, optional projections (X·W convention), several
 * heads, a causal mask and an output projection, as in the course's worked exercises.
 *
 * Matrices are plain heap tensors owned by the caller (AttnCalcInput) or by the result
 * (attn_calc_free). */
#ifndef S2S_ATTN_CALC_H
#define S2S_ATTN_CALC_H

#include "s2s/common.h"
#include "s2s/tensor.h"

#define ATTN_CALC_MAX_HEADS 16

typedef struct AttnCalcHead {
    Tensor *q, *k, *v;       /* (nq, dx), (nk, dx), (nk, dx) before projection */
    Tensor *w_q, *w_k, *w_v; /* this head's own projections (X·W), or NULL: the input's */
} AttnCalcHead;

typedef struct AttnCalcInput {
    AttnCalcHead heads[ATTN_CALC_MAX_HEADS]; /* explicit per-head inputs, or one to split */
    int n_heads;       /* explicit heads given */
    int split;         /* split one head's columns into this many heads (≥ 1; one head only) */
    Tensor *w_q, *w_k, *w_v; /* optional projections of every head without its own */
    Tensor *w_o;       /* optional output projection of the concatenated heads */
    bool scaled, causal;
} AttnCalcInput;

typedef struct AttnCalcResult {
    int n_heads;
    Tensor *scores[ATTN_CALC_MAX_HEADS];  /* (nq, nk), before the mask */
    Tensor *weights[ATTN_CALC_MAX_HEADS]; /* (nq, nk) */
    Tensor *outputs[ATTN_CALC_MAX_HEADS]; /* (nq, dv) */
    Tensor *output;    /* concat of heads, times W_o when given */
} AttnCalcResult;

/* Checks every shape (errors name the matrices and their shapes) and computes; results past
 * float range are an error, never silent infinities. */
S2sStatus attn_calc(const AttnCalcInput *in, AttnCalcResult *out, S2sError *err);
void attn_calc_free(AttnCalcResult *r);

#endif
