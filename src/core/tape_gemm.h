/* tape_gemm.h — the ops' products on a tape: each wrapper makes the call's GemmCtx from the
 * tape (tape_gemm_ctx) and a GemmWeight from the weight tensor, then calls the CPU back end
 * (gemm.h). The one place the graph turns tensors into the back end's buffers. Not a public
 * header. */
#ifndef S2S_TAPE_GEMM_H
#define S2S_TAPE_GEMM_H

#include "s2s/gemm.h"
#include "s2s/tape.h"

/* w's data and freeze stamp in *out, or NULL for no weight. */
static inline const GemmWeight *tape_gemm_weight(const Tensor *w, GemmWeight *out) {
    if (!w) return NULL;
    *out = (GemmWeight){w->data, w->frozen};
    return out;
}

/* gemm_op on the tape; Bw: the weight tensor whose data B is, or NULL. */
static inline void tape_gemm_op(Tape *t, bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda,
                                const uint16_t *Abf, const float *B, int ldb, const uint16_t *Bbf, const Tensor *Bw,
                                float beta, float *C, int ldc) {
    GemmCtx g = tape_gemm_ctx(t);
    GemmWeight w;
    gemm_op(&g, ta, tb, M, N, K, alpha, A, lda, Abf, B, ldb, Bbf, tape_gemm_weight(Bw, &w), beta, C, ldc);
}

/* gemm_bias on the tape: C = A W^T + bias, Bw as in tape_gemm_op. */
static inline void tape_gemm_bias(Tape *t, int M, int N, int K, const float *A, int lda, const float *W,
                                  const uint16_t *Wbf, const Tensor *Bw, const float *bias, float *C, int ldc) {
    GemmCtx g = tape_gemm_ctx(t);
    GemmWeight w;
    gemm_bias(&g, M, N, K, A, lda, W, Wbf, tape_gemm_weight(Bw, &w), bias, C, ldc);
}

static inline bool tape_gemm_small(Tape *t, bool ta, bool tb, int M, int N, int K, int batch, const float *A, int lda,
                                   size_t sa, const float *B, int ldb, size_t sb, float beta, float *C, int ldc,
                                   size_t sc) {
    GemmCtx g = tape_gemm_ctx(t);
    return gemm_small_batched(&g, ta, tb, M, N, K, batch, A, lda, sa, B, ldb, sb, beta, C, ldc, sc);
}

/* A bf16 copy of x in the tape's arena (gemm_bf16_copy). */
static inline uint16_t *tape_bf16_copy(Tape *t, const float *x, size_t n) {
    GemmCtx g = tape_gemm_ctx(t);
    return gemm_bf16_copy(&g, x, n);
}

static inline bool tape_bf16_takes(Tape *t, int M, int N, bool by_weight) {
    GemmCtx g = tape_gemm_ctx(t);
    return gemm_bf16_takes(&g, M, N, by_weight);
}

static inline bool tape_int8_applies(Tape *t, const Tensor *Bw, int N) {
    GemmCtx g = tape_gemm_ctx(t);
    GemmWeight w;
    return gemm_int8_applies(&g, tape_gemm_weight(Bw, &w), N);
}

/* gemm_frozen_screen for a frozen weight tensor W (N × K), a screen chosen (not auto). */
static inline GemmScreenCols tape_frozen_screen(Tape *t, TapeScreen kind, int M, int N, int K, const float *A, int lda,
                                                const Tensor *W, float *C, GemmInt8Sums *raw) {
    S2S_ASSERT(W->frozen && W->ndim == 2 && W->shape[0] == N && W->shape[1] == K && kind != TAPE_SCREEN_AUTO);
    GemmScreen screen = kind == TAPE_SCREEN_INT8 ? GEMM_SCREEN_INT8 : kind == TAPE_SCREEN_BF16 ? GEMM_SCREEN_BF16
                                                                                                 : GEMM_SCREEN_F32;
    GemmCtx g = tape_gemm_ctx(t);
    GemmWeight w;
    return gemm_frozen_screen(&g, screen, M, N, K, A, lda, tape_gemm_weight(W, &w), C, raw);
}

/* A weight used by many products of one op, in bf16: its snapshot (params_freeze) or a
 * copy rounded once in the arena; NULL on a float32 tape. */
static inline const uint16_t *tape_bf16_weight(Tape *t, const Tensor *w) {
    return !tape_bf16(t) ? NULL : w->bf16 ? w->bf16 : tape_bf16_copy(t, w->data, w->size);
}

#endif
