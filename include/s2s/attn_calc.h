/* attn_calc.h — the attention calculator behind ./attend: scaled or plain dot-product
 * attention of queries over keys and values, optional projections (X·W convention), several
 * heads, a causal mask and an output projection, as in the course's worked exercises.
 *
 * Matrices are plain heap tensors owned by the input (AttnCalcInput: attn_calc_parse reads
 * them from JSON, attn_calc_input_free frees them) or by the result (attn_calc_free). */
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
    Tensor *owned[8 + 6 * ATTN_CALC_MAX_HEADS]; /* the matrices attn_calc_parse read */
    int n_owned;
} AttnCalcInput;

/* The calculator's input from JSON (the keys ./attend documents: Q, K, V or X, W_q, W_k, W_v,
 * heads as a count or a list of objects, W_o, scaled, causal): unknown or repeated keys,
 * ragged or oversized matrices and numbers past float range are S2S_ERR_CONFIG with a
 * message naming them. The matrices belong to in until attn_calc_input_free. */
S2sStatus attn_calc_parse(const char *json, AttnCalcInput *in, S2sError *err);
void attn_calc_input_free(AttnCalcInput *in);

typedef struct AttnCalcResult {
    int n_heads;
    Tensor *scores[ATTN_CALC_MAX_HEADS];  /* (nq, nk), before the mask */
    Tensor *weights[ATTN_CALC_MAX_HEADS]; /* (nq, nk) */
    Tensor *outputs[ATTN_CALC_MAX_HEADS]; /* (nq, dv) */
    Tensor *q[ATTN_CALC_MAX_HEADS], *k[ATTN_CALC_MAX_HEADS], *v[ATTN_CALC_MAX_HEADS]; /* each head's Q, K, V as
                                                                                         scored (projected, split) */
    Tensor *output;    /* concat of heads, times W_o when given */
} AttnCalcResult;

/* Checks every shape (errors name the matrices and their shapes) and computes; results past
 * float range are an error, never silent infinities. */
S2sStatus attn_calc(const AttnCalcInput *in, AttnCalcResult *out, S2sError *err);
void attn_calc_free(AttnCalcResult *r);
/* The result as JSON (./attend --json): {"heads": [{"Q", "K", "V", "scores", "weights", "output"}...],
 * "output"}, digits enough to read every float back
 * exactly; malloc'd. */
char *attn_calc_to_json(const AttnCalcResult *r);

#endif
