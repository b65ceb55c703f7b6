/* ops_internal.h — what the op files share with tape.c: the backward functions for the
 * op table and small helpers; the products through the GEMM back end (gemm_internal.h).
 * Not a public header. */
#ifndef S2S_OPS_INTERNAL_H
#define S2S_OPS_INTERNAL_H

#include "gemm_internal.h"
#include "s2s/common.h"
#include "s2s/ops.h"

#include <string.h>

typedef void (*OpBackward)(Tape *t, const TapeNode *n);

void op_matmul_backward(Tape *t, const TapeNode *n);
void op_linear_backward(Tape *t, const TapeNode *n);
void op_add_backward(Tape *t, const TapeNode *n);
void op_add_bias_backward(Tape *t, const TapeNode *n);
void op_mul_backward(Tape *t, const TapeNode *n);
void op_scale_backward(Tape *t, const TapeNode *n);
void op_tanh_backward(Tape *t, const TapeNode *n);
void op_sigmoid_backward(Tape *t, const TapeNode *n);
void op_relu_backward(Tape *t, const TapeNode *n);
void op_exp_backward(Tape *t, const TapeNode *n);
void op_log_backward(Tape *t, const TapeNode *n);
void op_softmax_backward(Tape *t, const TapeNode *n);
void op_cross_entropy_backward(Tape *t, const TapeNode *n);
void op_linear_xent_backward(Tape *t, const TapeNode *n);
/* db (cols) += column sums of dy (rows, cols), columns split over the threads (ops_matmul.c). */
void ops_bias_grad(float *db, const float *dy, int rows, int cols);
void ops_argmax_cache_free(struct ArgmaxCache *c);
void op_gather_rows_backward(Tape *t, const TapeNode *n);
void op_concat_backward(Tape *t, const TapeNode *n);
void op_slice_backward(Tape *t, const TapeNode *n);
void op_dropout_backward(Tape *t, const TapeNode *n);
void op_sum_backward(Tape *t, const TapeNode *n);
void op_mean_backward(Tape *t, const TapeNode *n);
void op_rnn_seq_backward(Tape *t, const TapeNode *n);
void op_additive_scores_backward(Tape *t, const TapeNode *n);
void op_layer_norm_backward(Tape *t, const TapeNode *n);
void op_gelu_backward(Tape *t, const TapeNode *n);

static inline Tensor *tape_like(Tape *t, const Tensor *x) { return tape_tensor(t, x->ndim, x->shape); }

#endif
