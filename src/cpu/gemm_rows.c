/* gemm_rows.c — float32 products in which every row of A is summed alone, the same bits
 * whatever the rows around it (see gemm_internal.h): by a frozen weight, and on decoding
 * calls by another activation.
 *
 * From AVX-512 on, oneDNN's float32 matmul runs brgemm kernels whose k order is the same for
 * every row; below it (AVX2: Zen 3, older Xeons) it runs its gemm:jit kernels, which pick
 * their blocking by the number of rows, so a sentence's logits differed alone and in a batch
 * by an ulp (OpenBLAS's sgemm alike). Here each C[r, n] is one chain of multiply-adds over k
 * in order (fused where the build has FMA), then the epilogue; how many rows a call has,
 * where a row sits among them and how the threads split the columns change nothing.
 * Owns nothing; the caller owns every buffer. */
#include "gemm_internal.h"
#include "s2s/par.h"

#include <stdlib.h>
#include <string.h>
#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define ROWS_FMA 1
#endif

enum {
    RW_COLS = 16, /* columns a panel: two vectors of eight */
    RW_ROWS = 6,  /* rows of A a kernel call: 12 accumulators, 2 weight vectors, a broadcast */
    RW_KC = 256,  /* k a block: a panel's slice (16 KiB) stays in L1 while a chunk's rows pass */
    RW_MC = 384   /* rows a chunk: its block of A (384 KiB) stays in L2 while every panel passes */
};
_Static_assert(RW_MC % RW_ROWS == 0, "a chunk is whole tiles: rows_panels lays its partial sums out so");

size_t gemm_rows_packed_floats(int N, int K) { return (size_t)(N + RW_COLS - 1) / RW_COLS * RW_COLS * (size_t)K; }

/* Panel jb holds columns 16 jb … of op(B), k-major: [k][16], zero past N. */
void gemm_rows_pack(const float *B, int ldb, bool tb, int K, int N, float *out) {
    for (int n0 = 0; n0 < N; n0 += RW_COLS) {
        float *panel = out + (size_t)n0 * K;
        int cols = N - n0 < RW_COLS ? N - n0 : RW_COLS;
        if (tb) { /* op(B)[k, n] = B[n, k]: each of the panel's columns is a row of B */
            for (int c = 0; c < cols; c++) {
                const float *b = B + (size_t)(n0 + c) * ldb;
                for (int k = 0; k < K; k++) panel[(size_t)k * RW_COLS + c] = b[k];
            }
        } else { /* op(B)[k, n] = B[k, n]: a panel's row is a piece of a row of B */
            for (int k = 0; k < K; k++) memcpy(panel + (size_t)k * RW_COLS, B + (size_t)k * ldb + n0, (size_t)cols * sizeof *panel);
        }
        if (cols < RW_COLS)
            for (int k = 0; k < K; k++) memset(panel + (size_t)k * RW_COLS + cols, 0, (size_t)(RW_COLS - cols) * sizeof *panel);
    }
}

typedef struct RowsJob {
    const float *A, *P, *bias;
    int M, N, K, lda, ldc;
    float alpha, beta;
    float *C;
} RowsJob;

/* acc[r][c] (rows r < MR, a constant once inlined) = init[r][c] (0 without) + sum over k in
 * order of A[r, k] P[k, c]: the chains of one block of k, continued from where the block
 * before left them (a float stored and loaded again is the same float). Named vector
 * accumulators (an array of them the compiler kept on the stack, storing each at every k);
 * the rows a call leaves out are dead code. */
static inline __attribute__((always_inline)) void rows_block(const float *A, int lda, const float *P, int K, int MR,
                                                             const float (*init)[RW_COLS], float acc[RW_ROWS][RW_COLS]) {
#if defined(ROWS_FMA)
    const float *a0 = A, *a1 = A + lda, *a2 = A + 2 * (size_t)lda, *a3 = A + 3 * (size_t)lda, *a4 = A + 4 * (size_t)lda,
                *a5 = A + 5 * (size_t)lda;
    __m256 z = _mm256_setzero_ps(), c00 = z, c01 = z, c10 = z, c11 = z, c20 = z, c21 = z, c30 = z, c31 = z, c40 = z,
           c41 = z, c50 = z, c51 = z;
#define ROWS_INIT_ROW(r) \
    if (MR > r) c##r##0 = _mm256_loadu_ps(init[r]), c##r##1 = _mm256_loadu_ps(init[r] + 8);
    if (init) {
        ROWS_INIT_ROW(0) ROWS_INIT_ROW(1) ROWS_INIT_ROW(2) ROWS_INIT_ROW(3) ROWS_INIT_ROW(4) ROWS_INIT_ROW(5)
    }
#undef ROWS_INIT_ROW
#define ROWS_FMA_ROW(r)                                                                           \
    if (MR > r) {                                                                                 \
        __m256 x = _mm256_broadcast_ss(a##r + k);                                                 \
        c##r##0 = _mm256_fmadd_ps(x, w0, c##r##0), c##r##1 = _mm256_fmadd_ps(x, w1, c##r##1);    \
    }
    for (int k = 0; k < K; k++) {
        __m256 w0 = _mm256_loadu_ps(P + (size_t)k * RW_COLS), w1 = _mm256_loadu_ps(P + (size_t)k * RW_COLS + 8);
        ROWS_FMA_ROW(0) ROWS_FMA_ROW(1) ROWS_FMA_ROW(2) ROWS_FMA_ROW(3) ROWS_FMA_ROW(4) ROWS_FMA_ROW(5)
    }
#undef ROWS_FMA_ROW
#define ROWS_STORE_ROW(r) \
    if (MR > r) _mm256_storeu_ps(acc[r], c##r##0), _mm256_storeu_ps(acc[r] + 8, c##r##1);
    ROWS_STORE_ROW(0) ROWS_STORE_ROW(1) ROWS_STORE_ROW(2) ROWS_STORE_ROW(3) ROWS_STORE_ROW(4) ROWS_STORE_ROW(5)
#undef ROWS_STORE_ROW
#else /* the same chains, each multiply and add rounded (the build contracts nothing) */
    for (int r = 0; r < MR; r++)
        for (int c = 0; c < RW_COLS; c++) acc[r][c] = init ? init[r][c] : 0.0f;
    for (int k = 0; k < K; k++) {
        const float *w = P + (size_t)k * RW_COLS;
        for (int r = 0; r < MR; r++) {
            float a = A[(size_t)r * lda + k];
            for (int c = 0; c < RW_COLS; c++) acc[r][c] += a * w[c];
        }
    }
#endif
}

/* C[r, n0 + c] = alpha acc + beta C (beta 0: C is not read, it may hold NaN) + bias. */
static void rows_store(const RowsJob *j, int r0, int MR, int n0, float acc[RW_ROWS][RW_COLS]) {
    int cols = j->N - n0 < RW_COLS ? j->N - n0 : RW_COLS;
    for (int r = 0; r < MR; r++) {
        float *c = j->C + (size_t)(r0 + r) * j->ldc + n0;
        for (int q = 0; q < cols; q++) {
            float v = j->alpha == 1.0f ? acc[r][q] : j->alpha * acc[r][q];
            if (j->beta != 0.0f) v += j->beta * c[q];
            if (j->bias) v += j->bias[n0 + q];
            c[q] = v;
        }
    }
}

/* Rows r0 … r0 + MR (MR < 7) of panel jb over k in [k0, k0 + kc): the chains from init (NULL:
 * from 0), into part (the chains so far, when more blocks of k follow) or C (the last). */
static void rows_tile(const RowsJob *j, int r0, int MR, size_t jb, int k0, int kc, const float (*init)[RW_COLS],
                      float (*part)[RW_COLS]) {
    float acc[RW_ROWS][RW_COLS];
    const float *A = j->A + (size_t)r0 * j->lda + k0, *P = j->P + jb * RW_COLS * (size_t)j->K + (size_t)k0 * RW_COLS;
    switch (MR) { /* a constant MR each */
    case 6: rows_block(A, j->lda, P, kc, 6, init, acc); break;
    case 5: rows_block(A, j->lda, P, kc, 5, init, acc); break;
    case 4: rows_block(A, j->lda, P, kc, 4, init, acc); break;
    case 3: rows_block(A, j->lda, P, kc, 3, init, acc); break;
    case 2: rows_block(A, j->lda, P, kc, 2, init, acc); break;
    default: rows_block(A, j->lda, P, kc, 1, init, acc); break;
    }
    if (part) memcpy(part, acc, (size_t)MR * sizeof acc[0]);
    else rows_store(j, r0, MR, (int)jb * RW_COLS, acc);
}

/* Panels [b0, b1): a chunk of rows at a time, and within it a block of k at a time, every
 * panel passing over the chunk's block of A; the chains between blocks of k wait in part,
 * (chunk rows × panels) × 16 floats of this thread's own. */
static void rows_panels(void *ctx, size_t b0, size_t b1) {
    const RowsJob *j = ctx;
    size_t np = b1 - b0;
    /* a decoding step has a few rows: its partial sums need a few tiles, not a whole chunk */
    size_t mc = j->M < RW_MC ? (size_t)(j->M + RW_ROWS - 1) / RW_ROWS * RW_ROWS : RW_MC;
    float (*part)[RW_COLS] = j->K > RW_KC ? s2s_xmalloc(mc * np * sizeof *part) : NULL;
    for (int m0 = 0; m0 < j->M; m0 += RW_MC) {
        int m1 = j->M - m0 < RW_MC ? j->M : m0 + RW_MC;
        for (int k0 = 0; k0 < j->K; k0 += RW_KC) {
            int kc = j->K - k0 < RW_KC ? j->K - k0 : RW_KC;
            bool first = k0 == 0, last = k0 + kc == j->K;
            for (size_t jb = b0; jb < b1; jb++)
                for (int r = m0; r < m1; r += RW_ROWS) {
                    float (*p)[RW_COLS] = part ? part + ((size_t)(r - m0) * np + (jb - b0) * RW_ROWS) : NULL;
                    rows_tile(j, r, m1 - r < RW_ROWS ? m1 - r : RW_ROWS, jb, k0, kc, first ? NULL : p, last ? NULL : p);
                }
        }
    }
    free(part);
}

void gemm_rows(int M, int N, int K, float alpha, const float *A, int lda, const float *packed, float beta, float *C,
               int ldc, const float *bias) {
    S2S_ASSERT(M > 0 && N > 0 && K > 0 && lda >= K && ldc >= N && (!bias || (alpha == 1.0f && beta == 0.0f)));
    RowsJob j = {.A = A, .P = packed, .bias = bias, .M = M, .N = N, .K = K, .lda = lda, .ldc = ldc, .alpha = alpha,
                 .beta = beta, .C = C};
    size_t panels = (size_t)(N + RW_COLS - 1) / RW_COLS;
    if ((long)M * N * K < GEMM_SERIAL_MACS) rows_panels(&j, 0, panels);
    else par_for(panels, (size_t)M * K * RW_COLS, rows_panels, &j);
}
