/* gemm_internal.h — the GEMM back end as the ops call it: the entries gemm_tape (gemm.h),
 * gemm_tape_op and gemm_tape_bias, in front of one dispatcher (gemm.c) that picks bf16,
 * int8, a one-row product, oneDNN or OpenBLAS per call and counts the FLOPs, and the kernels
 * the ops call directly (gemm_small.c, gemm_int8.c, gemm_q8.c). Below the ops: it knows tapes (their precision, arena and
 * FLOP count), not ops. Not a public header. */
#ifndef S2S_GEMM_INTERNAL_H
#define S2S_GEMM_INTERNAL_H

#include "s2s/gemm.h"

#include <cblas.h>

/* C (1 × N) = alpha op(A) op(B) + beta C for a one-row A, on the calling thread; touches
 * nothing shared, so batched products may run it on several threads (gemm_small.c). */
void gemm_row(bool ta, bool tb, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb, float beta,
              float *C);
/* out[i] = a · b[i], K values each, summed as gemm_row sums a dot (16 partial sums in k
 * order, the tail, then the 16 in order): the same bits as gemm_row's, eight or four at a time. */
void gemm_dots(int K, const float *a, const float *const *b, int n, float *out);
/* out[i] = a_i · b_i for n pairs of rows, a_i = a + i·K and b_i = b + i·K, each summed as
 * gemm_dots sums a dot (ops_attend.c: a decoding step's queries against one position's keys). */
void gemm_dots_pairs(int K, const float *a, const float *b, int n, float *out);
/* Asks for the rows of a matrix (rows × cols floats, ld apart) to be cached: a batch's
 * time-major operands put an entry's rows far apart, where no hardware prefetcher follows. */
void gemm_prefetch_rows(const float *x, int rows, int cols, int ld);
/* C_b = op(A_b) op(B_b) + beta C_b for b < batch (operands at batch strides sa, sb, sc), when
 * the products are small (one attention head's scores or context in training): plain loops,
 * the batch split over the threads, float32 on any tape, the same bits on any thread count;
 * counts FLOPs. Returns false, doing nothing, for shapes a GEMM call serves better. */
bool gemm_small_batched(Tape *t, bool ta, bool tb, int M, int N, int K, int batch, const float *A, int lda, size_t sa,
                        const float *B, int ldb, size_t sb, float beta, float *C, int ldc, size_t sc);
/* oneDNN float32 GEMM (gemm.c). */
void gemm_f32_onednn(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                     int ldb, float beta, float *C, int ldc);
/* A bf16 copy of x in the tape's arena, for an operand used by many GEMMs of one op. */
uint16_t *gemm_bf16_copy(Tape *t, const float *x, size_t n);

/* A bf16 tape rounds only products whose both sides reach this: thinner ones (the attention
 * of one decoding step is a matrix-vector product per sentence) are memory-bound, and
 * rounding their operands would cost more than the bf16 multiply saves. */
#define GEMM_BF16_MIN_SIDE 8

/* Whether a product of M × N (any K) on this tape reads its operands in bf16: then an op
 * may hand over a bf16 copy it made as it wrote the operand (gemm_tape_op's Abf), not a
 * second pass over it. Training: both sides reach GEMM_BF16_MIN_SIDE. Decoding (no
 * gradients): a product by a weight (N a model size) does whatever its rows, one of two
 * activations (attention) never, so that no sentence's products depend on the batch it is in
 * (how many rows are left, how long the longest source is): a batch decodes as its sentences
 * alone. */
static inline bool gemm_bf16_takes(const Tape *t, int M, int N, bool by_weight) {
    if (!tape_bf16(t) || N < GEMM_BF16_MIN_SIDE) return false;
    return t->grad_enabled ? M >= GEMM_BF16_MIN_SIDE : by_weight;
}

/* Row-major C = alpha op(A) op(B) + beta C in the tape's precision; counts its FLOPs.
 * Abf/Bbf: bf16 copies of A/B (gemm_bf16_copy) or NULL; used only when the tape is bf16.
 * Bw: the weight whose data B is, or NULL: while it is frozen (Tensor.frozen), thin products
 * use a copy packed once in the kernel's layout (kept by the tape's GemmPlans). */
void gemm_tape_op(Tape *t, bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda,
                  const uint16_t *Abf, const float *B, int ldb, const uint16_t *Bbf, const Tensor *Bw, float beta,
                  float *C, int ldc);

/* A linear layer's product: C (M × N) = A W^T + bias (N, added to every row; or NULL), W
 * (N × K, rows K apart) as in gemm_tape_op. The bias goes into the product's epilogue where
 * the path has one (int8's scaling back, oneDNN's matmul primitive), else C starts as it. */
void gemm_tape_bias(Tape *t, int M, int N, int K, const float *A, int lda, const float *W, const uint16_t *Wbf,
                   const Tensor *Bw, const float *bias, float *C, int ldc);


/* norm[r] = the 2-norm of row r of X (rows × cols, leading dimension ld), summed in double
 * and rounded up: an upper bound (Inf or NaN where the row holds one). */
void gemm_row_norms(const float *X, int rows, int cols, int ld, float *norm);
/* l1[r] = the 1-norm of row r of X, summed in double and rounded up. */
void gemm_row_l1(const float *X, int rows, int cols, int ld, float *l1);
/* What a screen's error bound needs of each row of W, kept with its packed copy while W
 * stays frozen: 2-norms (every screen), and for int8 the 1-norms and the quantisation
 * scales (max |w_v| / 127) its products used; NULL where not made. */
typedef struct GemmScreenCols {
    const float *norm, *l1, *scale;
    const int32_t *colsum; /* int8: per row of W, the sum of its quantised values */
    int zero, act_max;     /* int8: A's offset and largest |value| (128 and 127; 63 and 63 on gemm_q8) */
    bool coarse;           /* int8: the sums came from gemm_q8 (A in 7 bits) */
} GemmScreenCols;
/* Whether an int8 tape multiplies A by op(B) = Bw^T (N columns) in int8: a frozen
 * weight offered for packing (Bw, not transposed A) of at least GEMM_BF16_MIN_SIDE columns,
 * whatever the rows (as gemm_bf16_takes decodes: the batch does not pick the path). */
bool gemm_int8_applies(const Tape *t, const Tensor *Bw, int N);
/* An int8 screen's result before scaling back: sums[m N + n] = sum_k (qa[m, k] + zero) qw[n, k]
 * exactly, and the row scales of A (NaN for a row holding an Inf or NaN). The logit is then
 * row_scale[m] * scale[n] * (float)(sums - zero colsum[n]), as an int8 tape scales back
 * (zero = 128, or 63 where gemm_q8 made them: GemmScreenCols says which). fine: A in 8 bits
 * on oneDNN even where gemm_q8 would apply (op_linear_argmax's fallback from its coarse screen). */
typedef struct GemmInt8Sums {
    int32_t *sums;    /* (M, N) */
    float *row_scale; /* (M) */
    bool fine;
} GemmInt8Sums;
/* A W^T (M × N) for a weight W (N × K) frozen by params_freeze, as an int8 tape multiplies
 * (TAPE_SCREEN_INT8: A quantised per row, W per row, exact int32 sums, left in *raw for the
 * caller to scale back), or with both operands rounded to bfloat16 (float32 accumulation), or
 * in float32, into C (leading dimension N), on any tape: op_linear_argmax's approximate
 * logits, W packed once per freeze. */
GemmScreenCols gemm_frozen_screen(Tape *t, TapeScreen kind, int M, int N, int K, const float *A, int lda,
                                  const Tensor *W, float *C, GemmInt8Sums *raw);

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
/* C (M × N, leading dimension ldc) = alpha A op(B) + beta C + bias for a frozen op(B) (K × N)
 * packed by gemm_rows_pack into gemm_rows_packed_floats: each element one chain of
 * multiply-adds over k in order, so every row has the same bits in any call (gemm_rows.c).
 * bias (N, or NULL) needs alpha 1 and beta 0; beta 0 reads nothing of C. */
size_t gemm_rows_packed_floats(int N, int K);
/* Whether float32 products by frozen weights run on gemm_rows on this CPU: where oneDNN has
 * no brgemm matmul (below AVX-512), its kernels' sums depend on the rows a call has. */
bool gemm_rows_apply(void);
/* Whether a decoding tape's products of two activations (two rows or more) run on gemm_rows:
 * where gemm_rows_apply says so, and in builds without FMA, whose own chains (gemm_small's
 * batched products) round each multiply where oneDNN's brgemm kernels fuse it, so that a
 * product alone (oneDNN) and in a batch (gemm_small) would differ. */
bool gemm_rows_for_activations(void);
void gemm_rows_pack(const float *B, int ldb, bool tb, int K, int N, float *out);
void gemm_rows(int M, int N, int K, float alpha, const float *A, int lda, const float *packed, float beta, float *C,
               int ldc, const float *bias);
/* The tape's matmul primitives and packed weights (gemm_plans.c); tape_free calls it. */
void gemm_plans_free(GemmPlans *p);

/* A weight used by many products of one op, in bf16: its snapshot (params_freeze) or a
 * copy rounded once in the arena; NULL on a float32 tape. */
static inline const uint16_t *gemm_bf16_weight(Tape *t, const Tensor *w) {
    return !tape_bf16(t) ? NULL : w->bf16 ? w->bf16 : gemm_bf16_copy(t, w->data, w->size);
}

#endif
