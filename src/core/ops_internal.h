/* ops_internal.h — what the op files share with tape.c: the backward functions for the
 * op table and small helpers; the products through the CPU back end (tape_gemm.h).
 * Not a public header. */
#ifndef S2S_OPS_INTERNAL_H
#define S2S_OPS_INTERNAL_H

#include "tape_gemm.h"
#include "s2s/common.h"
#include "s2s/ops.h"

#include <string.h>

typedef void (*OpBackward)(Tape *t, const TapeNode *n);
/* every op's backward, from the op list (tape.h) */
#define S2S_OP_DECLARE(kind, name, backward) void backward(Tape *t, const TapeNode *n);
S2S_OPS(S2S_OP_DECLARE)
#undef S2S_OP_DECLARE

/* db (cols) += column sums of dy (rows, cols), columns split over the threads (ops_matmul.c). */
void ops_bias_grad(float *db, const float *dy, int rows, int cols);
/* y = softmax(x) over cols entries, those with m[c] = 0 left out (m NULL: none); every
 * entry masked gives zeros. (ops_softmax.c) */
void ops_softmax_row(const float *x, float *y, const uint8_t *m, int cols);
/* ops_softmax_row for nb <= OPS_SOFTMAX_BLOCK rows at once, their entries position-major
 * (x[s·nb + i], S a row): the same bits; x becomes the weights; ok the mask laid out as x, its
 * masked entries already −∞ in x, or NULL. */
enum { OPS_SOFTMAX_BLOCK = 64 };
void ops_softmax_columns(float *restrict x, const uint8_t *restrict ok, int S, int nb);
void ops_argmax_cache_free(struct ArgmaxCache *c);

static inline Tensor *tape_like(Tape *t, const Tensor *x) { return tape_tensor(t, x->ndim, x->shape); }

#endif
