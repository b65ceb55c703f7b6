/* gemm_q8.c — exact int8 products for AVX2 CPUs without VNNI (see gemm_internal.h).
 *
 * vpmaddubsw multiplies u8 by s8 and adds pairs in saturating int16; oneDNN's kernels then
 * widen each pair sum to int32 (vpmaddwd) at once, which halves their rate: 128 × 5921 ×
 * 1536 (the greedy screen's product) ran at 204–249 GOP/s on two Zen 3 cores. With
 * activations of 7 bits (0 … 126) and weights of ±63, two pair sums still fit in int16
 * (4 · 126 · 63 = 31,752), so they are added before widening: one vpmaddwd per 64 products,
 * 267–325 GOP/s on the same shape. The sums are exact, so any split over the threads gives
 * the same numbers. Owns nothing; the caller owns every buffer. */
#include "gemm_internal.h"
#include "s2s/par.h"

#include <string.h>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

enum {
    Q8_COLS = 16, /* columns a block: two vectors of eight int32 sums */
    Q8_KSTEP = 8, /* k a step: two groups of four bytes, their pair sums added in int16 */
    Q8_ROWS = 4   /* rows of A a kernel call (8 accumulators + 4 weight vectors in 16 registers) */
};

bool gemm_q8_available(void) {
#if defined(__AVX2__)
    return true;
#else
    return false;
#endif
}

int gemm_q8_lda(int K) { return (K + Q8_KSTEP - 1) / Q8_KSTEP * Q8_KSTEP; }

size_t gemm_q8_packed_bytes(int N, int K) {
    return (size_t)(N + Q8_COLS - 1) / Q8_COLS * Q8_COLS * (size_t)gemm_q8_lda(K);
}

/* Block jb (columns 16 jb …), step g (k = 8 g …) is 128 bytes: for each half h (k = 8 g +
 * 4 h …) two vectors of eight columns, each column's four bytes of k together, as vpmaddubsw
 * pairs them with a broadcast of four bytes of a row of A. Padding is zero. */
void gemm_q8_pack(const int8_t *qw, int N, int K, int8_t *out) {
    int Kp = gemm_q8_lda(K);
    memset(out, 0, gemm_q8_packed_bytes(N, K));
    for (int n = 0; n < N; n++) {
        int8_t *blk = out + (size_t)(n / Q8_COLS) * Q8_COLS * Kp;
        int c = n % Q8_COLS, at = (c / 8) * 32 + (c % 8) * 4;
        const int8_t *w = qw + (size_t)n * K;
        for (int k = 0; k < K; k++) blk[(size_t)(k / 8) * 128 + ((k / 4) % 2) * 64 + at + k % 4] = w[k];
    }
}

typedef struct Q8Job {
    const uint8_t *A;
    const int8_t *B;
    int M, N, Kp, ldc;
    int32_t *C;
} Q8Job;

#if defined(__AVX2__)
/* C[r, 0..15] = sum_k A[r, k] B[k, 0..15] for rows r < MR (a constant once inlined) of one
 * block; `cols` of the 16 are stored. */
static inline __attribute__((always_inline)) void q8_block(const uint8_t *A, int lda, const int8_t *B, int steps,
                                                           int32_t *C, int ldc, int MR, int cols) {
    __m256i acc[Q8_ROWS][2];
    for (int r = 0; r < Q8_ROWS; r++) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
    const __m256i ones = _mm256_set1_epi16(1);
    for (int g = 0; g < steps; g++) {
        const int8_t *b = B + (size_t)g * 128;
        __m256i b00 = _mm256_loadu_si256((const __m256i *)b);
        __m256i b01 = _mm256_loadu_si256((const __m256i *)(b + 32));
        __m256i b10 = _mm256_loadu_si256((const __m256i *)(b + 64));
        __m256i b11 = _mm256_loadu_si256((const __m256i *)(b + 96));
        _Pragma("GCC unroll 4") for (int r = 0; r < MR; r++) {
            int32_t x0, x1;
            memcpy(&x0, A + (size_t)r * lda + 8 * g, 4);
            memcpy(&x1, A + (size_t)r * lda + 8 * g + 4, 4);
            __m256i a0 = _mm256_set1_epi32(x0), a1 = _mm256_set1_epi32(x1);
            __m256i p0 = _mm256_add_epi16(_mm256_maddubs_epi16(a0, b00), _mm256_maddubs_epi16(a1, b10));
            __m256i p1 = _mm256_add_epi16(_mm256_maddubs_epi16(a0, b01), _mm256_maddubs_epi16(a1, b11));
            acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(p0, ones));
            acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(p1, ones));
        }
    }
    for (int r = 0; r < MR; r++) {
        int32_t *c = C + (size_t)r * ldc;
        if (cols == Q8_COLS) {
            _mm256_storeu_si256((__m256i *)c, acc[r][0]);
            _mm256_storeu_si256((__m256i *)(c + 8), acc[r][1]);
        } else { /* the last block: C ends before the padding */
            int32_t tmp[Q8_COLS];
            _mm256_storeu_si256((__m256i *)tmp, acc[r][0]);
            _mm256_storeu_si256((__m256i *)(tmp + 8), acc[r][1]);
            memcpy(c, tmp, (size_t)cols * sizeof *c);
        }
    }
}

/* Blocks [b0, b1): each block's weights (Kp × 16 bytes) stay in L1 while every row passes. */
static void q8_blocks(void *ctx, size_t b0, size_t b1) {
    const Q8Job *j = ctx;
    int steps = j->Kp / Q8_KSTEP;
    for (size_t jb = b0; jb < b1; jb++) {
        const int8_t *B = j->B + jb * Q8_COLS * (size_t)j->Kp;
        int n0 = (int)jb * Q8_COLS, cols = j->N - n0 < Q8_COLS ? j->N - n0 : Q8_COLS;
        int32_t *C = j->C + n0;
        int r = 0;
        for (; r + Q8_ROWS <= j->M; r += Q8_ROWS)
            q8_block(j->A + (size_t)r * j->Kp, j->Kp, B, steps, C + (size_t)r * j->ldc, j->ldc, Q8_ROWS, cols);
        switch (j->M - r) {
        case 3: q8_block(j->A + (size_t)r * j->Kp, j->Kp, B, steps, C + (size_t)r * j->ldc, j->ldc, 3, cols); break;
        case 2: q8_block(j->A + (size_t)r * j->Kp, j->Kp, B, steps, C + (size_t)r * j->ldc, j->ldc, 2, cols); break;
        case 1: q8_block(j->A + (size_t)r * j->Kp, j->Kp, B, steps, C + (size_t)r * j->ldc, j->ldc, 1, cols); break;
        default: break;
        }
    }
}
#endif

void gemm_q8(const uint8_t *A, int M, int K, const int8_t *packed, int N, int32_t *C, int ldc) {
    S2S_ASSERT(gemm_q8_available() && M > 0 && N > 0 && K > 0 && ldc >= N && K <= 65536);
#if defined(__AVX2__)
    Q8Job j = {.A = A, .B = packed, .M = M, .N = N, .Kp = gemm_q8_lda(K), .ldc = ldc, .C = C};
    size_t blocks = (size_t)(N + Q8_COLS - 1) / Q8_COLS;
    par_for(blocks, (size_t)M * j.Kp * Q8_COLS / 8, q8_blocks, &j);
#else
    (void)A, (void)packed, (void)C;
#endif
}
