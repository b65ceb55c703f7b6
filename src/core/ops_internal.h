/* ops_internal.h — what the op files share with tape.c: the backward functions for the
 * op table and small helpers. Not a public header. */
#ifndef S2S_OPS_INTERNAL_H
#define S2S_OPS_INTERNAL_H

#include "s2s/common.h"
#include "s2s/ops.h"

#include <cblas.h>

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
void op_gather_rows_backward(Tape *t, const TapeNode *n);
void op_concat_backward(Tape *t, const TapeNode *n);
void op_slice_backward(Tape *t, const TapeNode *n);
void op_dropout_backward(Tape *t, const TapeNode *n);
void op_sum_backward(Tape *t, const TapeNode *n);
void op_mean_backward(Tape *t, const TapeNode *n);
void op_rnn_seq_backward(Tape *t, const TapeNode *n);
void op_additive_scores_backward(Tape *t, const TapeNode *n);

/* Row-major sgemm: C = alpha op(A) op(B) + beta C; counts its FLOPs on the tape. */
static inline void s2s_gemm(Tape *t, bool ta, bool tb, int M, int N, int K, float alpha,
                            const float *A, int lda, const float *B, int ldb, float beta,
                            float *C, int ldc) {
    if (M == 0 || N == 0) return;
    t->flops += 2.0 * M * N * K;
    if (K == 0) { /* BLAS would still scale C by beta; keep that contract explicit */
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) C[(size_t)i * ldc + j] *= beta;
        return;
    }
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

static inline Tensor *tape_like(Tape *t, const Tensor *x) { return tape_tensor(t, x->ndim, x->shape); }

#endif
