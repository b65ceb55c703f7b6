/* gemm_internal.h — what the CPU back end's files share (gemm.h is what the engine calls):
 * oneDNN's float32 GEMM, our own kernels for CPUs without VNNI or without AVX-512 (gemm_q8.c,
 * gemm_rows.c), and the thread rule for small products. Not for the ops. */
#ifndef S2S_GEMM_INTERNAL_H
#define S2S_GEMM_INTERNAL_H

#include "s2s/gemm.h"

#include <cblas.h>

/* oneDNN float32 GEMM (gemm.c). */
void gemm_f32_onednn(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                     int ldb, float beta, float *C, int ldc);

/* Exact int8 products for AVX2 CPUs without VNNI (gemm_q8.c): A (M × K, u8 at most
 * GEMM_Q8_A_MAX, rows gemm_q8_lda(K) bytes apart, zero past K) times W^T for W (N × K, s8 of
 * at most ±GEMM_Q8_W_MAX, row-major) packed by gemm_q8_pack into gemm_q8_packed_bytes; C
 * (M × N, leading dimension ldc) = the int32 sums. Two pair sums of vpmaddubsw are added in
 * int16 before widening, which those limits keep exact. Available where the build has AVX2. */
#define GEMM_Q8_A_MAX 126
#define GEMM_Q8_W_MAX 63
bool gemm_q8_available(void);
int gemm_q8_lda(int K);
size_t gemm_q8_packed_bytes(int N, int K);
void gemm_q8_pack(const int8_t *qw, int N, int K, int8_t *out);
void gemm_q8(const uint8_t *A, int M, int K, const int8_t *packed, int N, int32_t *C, int ldc);

/* Products below this many multiply-adds run on one thread: waking OpenMP's threads costs
 * more than they save, and far more when the cores are busy with other work. */
#define GEMM_SERIAL_MACS (1L << 24)
/* Products at most this tall multiply a frozen weight in the layout its kernel wants (packed
 * once per freeze): decoding steps and recurrent steps, where the GEMM call repacks the
 * weight every time. Taller ones (a whole sequence's output layer) pack as they go anyway.
 * Thin products against any transposed B take the matmul primitive up to it too (gemm.c). */
#define PACK_MAX_ROWS 1024
/* float32 sgemm products whose op(B) has at most this many floats run on the library's pool
 * in chunks of rows (gemm_f32_onednn), each chunk packing op(B) again; bigger ones (an output
 * layer's 5,921 × 1,536) in SGEMM_PIECES_PER_THREAD pieces a thread, cut so that the smaller
 * operand is the one packed again. 2 cores, an RNN's step, the sgemm path: quiet, four pieces
 * a thread 424-431 GFLOP/s, two 442-456, one 455-458 (oneDNN's own threads 437-463); beside a
 * busy process, two 272-274, one 275-276, oneDNN's static split 245-250. */
#define GEMM_POOL_MAX_B (1L << 20)
#define SGEMM_PIECES_PER_THREAD 2
/* Products with a bias and at most this K run through the matmul primitive at any height:
 * float32, 2 cores, a Transformer's (1,408, 256, 256) 385 GFLOP/s through sgemm and a filled
 * C, 439 through the primitive; an RNN's output layer (3,095, 5,921, 1,536) 492 against 449. */
#define GEMM_BIAS_EPILOGUE_MAX_K 512
/* C (M × N, leading dimension ldc) = alpha A op(B) + beta C + bias for a frozen op(B) (K × N)
 * packed by gemm_rows_pack into gemm_rows_packed_floats: each element one chain of
 * multiply-adds over k in order, so every row has the same bits in any call (gemm_rows.c).
 * bias (N, or NULL) needs alpha 1 and beta 0; beta 0 reads nothing of C. */
size_t gemm_rows_packed_floats(int N, int K);
/* Whether float32 products by frozen weights run on gemm_rows on this CPU: where oneDNN has
 * no brgemm matmul (below AVX-512), its kernels' sums depend on the rows a call has. */
bool gemm_rows_apply(void);
/* Whether a decoding call's products of two activations (two rows or more) run on gemm_rows:
 * where gemm_rows_apply says so, and in builds without FMA, whose own chains (gemm_small's
 * batched products) round each multiply where oneDNN's brgemm kernels fuse it, so that a
 * product alone (oneDNN) and in a batch (gemm_small) would differ. */
bool gemm_rows_for_activations(void);
void gemm_rows_pack(const float *B, int ldb, bool tb, int K, int N, float *out);
void gemm_rows(int M, int N, int K, float alpha, const float *A, int lda, const float *packed, float beta, float *C,
               int ldc, const float *bias);
#endif
