/* gemm_small.c — products too small for a GEMM call: a row times a matrix in a fixed sum
 * order (gemm_row, gemm_dots), and batches of small products (one head's attention). */
#include "gemm_impl.h"
#include "s2s/par.h"

#if defined(__AVX512F__) || defined(__FMA__)
#include <immintrin.h>
#endif
#include <string.h>
#include <time.h>

/* One dot in gemm_dots's order, a's values inc apart (a one-row A transposed is a column):
 * 16 partial sums so the loop vectorises. */
static inline float dot1(int K, const float *restrict a, size_t inc, const float *restrict b) {
    float part[16] = {0}, sum = 0.0f;
    int k = 0;
    for (; k + 16 <= K; k += 16)
        for (int q = 0; q < 16; q++) part[q] += a[(size_t)(k + q) * inc] * b[k + q];
    for (; k < K; k++) sum += a[(size_t)k * inc] * b[k];
    for (int q = 0; q < 16; q++) sum += part[q];
    return sum;
}

/* Four dots, each summed as dot1 sums it: four independent chains of adds where one dot
 * waits on its own, and a loaded once for the four. */
static inline void dot4(int K, const float *restrict a, const float *restrict b0, const float *restrict b1,
                        const float *restrict b2, const float *restrict b3, float *out) {
    float p0[16] = {0}, p1[16] = {0}, p2[16] = {0}, p3[16] = {0};
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
    int k = 0;
    for (; k + 16 <= K; k += 16)
        for (int q = 0; q < 16; q++) {
            float x = a[k + q];
            p0[q] += x * b0[k + q];
            p1[q] += x * b1[k + q];
            p2[q] += x * b2[k + q];
            p3[q] += x * b3[k + q];
        }
    for (; k < K; k++) {
        float x = a[k];
        s0 += x * b0[k], s1 += x * b1[k], s2 += x * b2[k], s3 += x * b3[k];
    }
    for (int q = 0; q < 16; q++) s0 += p0[q], s1 += p1[q], s2 += p2[q], s3 += p3[q];
    out[0] = s0, out[1] = s1, out[2] = s2, out[3] = s3;
}

/* Four dots of different rows, a + r·K with b + r·K: dot4's sums without its shared a. */
static inline void dot4_pairs(int K, const float *restrict a, const float *restrict b, float *out) {
    float p[4][16] = {{0}}, s[4] = {0};
    int k = 0;
    for (; k + 16 <= K; k += 16)
        for (int r = 0; r < 4; r++)
            for (int q = 0; q < 16; q++) p[r][q] += a[(size_t)r * K + k + q] * b[(size_t)r * K + k + q];
    for (; k < K; k++)
        for (int r = 0; r < 4; r++) s[r] += a[(size_t)r * K + k] * b[(size_t)r * K + k];
    for (int r = 0; r < 4; r++)
        for (int q = 0; q < 16; q++) s[r] += p[r][q];
    for (int r = 0; r < 4; r++) out[r] = s[r];
}

#if defined(__AVX__) && (defined(__clang__) || __GNUC__ >= 12)
#define DOT8 1
typedef float Dot8 __attribute__((vector_size(32)));

/* r[i] becomes column i of the 8 × 8 matrix whose rows r held (unpack, pairs, halves). */
static inline void dot8_transpose(Dot8 *r) {
    Dot8 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = __builtin_shufflevector(r[i], r[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
        t[i + 1] = __builtin_shufflevector(r[i], r[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
    }
    for (int i = 0; i < 8; i += 4)
        for (int h = 0; h < 2; h++) {
            u[i + 2 * h] = __builtin_shufflevector(t[i + h], t[i + h + 2], 0, 1, 8, 9, 4, 5, 12, 13);
            u[i + 2 * h + 1] = __builtin_shufflevector(t[i + h], t[i + h + 2], 2, 3, 10, 11, 6, 7, 14, 15);
        }
    for (int i = 0; i < 4; i++) {
        r[i] = __builtin_shufflevector(u[i], u[i + 4], 0, 1, 2, 3, 8, 9, 10, 11);
        r[i + 4] = __builtin_shufflevector(u[i], u[i + 4], 4, 5, 6, 7, 12, 13, 14, 15);
    }
}

/* Eight dots a[r] · b[r], each summed as dot1 sums it: the 16 partial sums of a row are two
 * vectors; transposed, lane r of the q-th holds row r's partial sum q, so the 16 adds in
 * order run in the eight lanes at once (eight scalar chains of 16 adds were the cost). */
static inline void dot8(int K, const float *const a[8], const float *const b[8], float *out) {
    Dot8 lo[8], hi[8], s;
    float tail[8] = {0};
    memset(lo, 0, sizeof lo);
    memset(hi, 0, sizeof hi);
    int k = 0;
    for (; k + 16 <= K; k += 16)
        for (int r = 0; r < 8; r++) {
            Dot8 x0, y0, x1, y1;
            memcpy(&x0, a[r] + k, sizeof x0);
            memcpy(&y0, b[r] + k, sizeof y0);
            memcpy(&x1, a[r] + k + 8, sizeof x1);
            memcpy(&y1, b[r] + k + 8, sizeof y1);
            lo[r] += x0 * y0;
            hi[r] += x1 * y1;
        }
    for (; k < K; k++)
        for (int r = 0; r < 8; r++) tail[r] += a[r][k] * b[r][k];
    dot8_transpose(lo);
    dot8_transpose(hi);
    memcpy(&s, tail, sizeof s);
    for (int q = 0; q < 8; q++) s += lo[q];
    for (int q = 0; q < 8; q++) s += hi[q];
    memcpy(out, &s, sizeof s);
}
#endif

void gemm_dots_pairs(int K, const float *a, const float *b, int n, float *out) {
    int i = 0;
#ifdef DOT8
    for (; i + 8 <= n; i += 8) {
        const float *ar[8], *br[8];
        for (int r = 0; r < 8; r++) ar[r] = a + (size_t)(i + r) * K, br[r] = b + (size_t)(i + r) * K;
        dot8(K, ar, br, out + i);
    }
#endif
    for (; i + 4 <= n; i += 4) dot4_pairs(K, a + (size_t)i * K, b + (size_t)i * K, out + i);
    for (; i < n; i++) out[i] = dot1(K, a + (size_t)i * K, 1, b + (size_t)i * K);
}

void gemm_dots(int K, const float *a, const float *const *b, int n, float *out) {
    int i = 0;
#ifdef DOT8
    const float *ar[8] = {a, a, a, a, a, a, a, a};
    for (; i + 8 <= n; i += 8) dot8(K, ar, b + i, out + i);
#endif
    for (; i + 4 <= n; i += 4) dot4(K, a, b[i], b[i + 1], b[i + 2], b[i + 3], out + i);
    for (; i < n; i++) out[i] = dot1(K, a, 1, b[i]);
}

void gemm_row(bool ta, bool tb, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb, float beta,
              float *C) {
    size_t inc = ta ? (size_t)lda : 1; /* a transposed one-row A is a column of its stored matrix */
    if (tb && inc == 1) { /* C[j] = a · B[j, :], eight rows of B at a time */
        for (int j = 0; j < N; j += 8) {
            int n = N - j < 8 ? N - j : 8;
            const float *rows[8];
            float dots[8];
            for (int i = 0; i < n; i++) rows[i] = B + (size_t)(j + i) * ldb;
            gemm_dots(K, A, rows, n, dots);
            for (int i = 0; i < n; i++)
                C[j + i] = alpha * dots[i] + (beta == 0.0f ? 0.0f : beta * C[j + i]); /* beta 0: C may hold NaN */
        }
        return;
    }
    if (tb) { /* the same sums with A strided */
        for (int j = 0; j < N; j++)
            C[j] = alpha * dot1(K, A, inc, B + (size_t)j * ldb) + (beta == 0.0f ? 0.0f : beta * C[j]);
        return;
    }
    enum { CHUNK = 256 }; /* C = sum_k a[k] B[k, :], rows of B added in order, a chunk of columns at a time */
    for (int j0 = 0; j0 < N; j0 += CHUNK) {
        int n = N - j0 < CHUNK ? N - j0 : CHUNK;
        float acc[CHUNK];
        memset(acc, 0, (size_t)n * sizeof *acc); /* a head's 32 columns, not the whole chunk */
        for (int k = 0; k < K; k++) {
            const float *b = B + (size_t)k * ldb + j0;
            float ak = A[(size_t)k * inc];
            for (int j = 0; j < n; j++) acc[j] += ak * b[j];
        }
        for (int j = 0; j < n; j++) C[j0 + j] = alpha * acc[j] + (beta == 0.0f ? 0.0f : beta * C[j0 + j]);
    }
}

/* ---- batched small products: one head's attention in a training step (15×15×32) ---- */

/* op(B) row-major in SMALL_MAX_B floats, rows padded to whole vectors; rows of C of at most
 * SMALL_MAX_N; and at most SMALL_MAX_MNK multiply-adds, past which a GEMM call's overhead
 * no longer dominates. */
#define SMALL_MAX_B 8192
#define SMALL_MAX_N 256
#define SMALL_MAX_MNK (64 * 64 * 64)
/* floats a vector: the CPU's own width (a wider generic vector compiled, without AVX-512,
 * into spills and shuffles: the Transformer's attention products ran at 7 GFLOP/s) */
#if defined(__AVX512F__)
#define SMALL_VEC 16
#elif defined(__AVX__)
#define SMALL_VEC 8
#else
#define SMALL_VEC 4
#endif

static int small_pad(int n) { return (n + SMALL_VEC - 1) / SMALL_VEC * SMALL_VEC; }

static bool small_fits(int M, int N, int K) {
    return N <= SMALL_MAX_N && (size_t)K * (size_t)small_pad(N) <= SMALL_MAX_B && (size_t)M * N * K <= SMALL_MAX_MNK;
}

typedef struct SmallJob {
    bool ta, tb;
    int M, N, K, lda, ldb, ldc;
    const float *A, *B;
    size_t sa, sb, sc; /* batch strides */
    float beta;
    float *C;
} SmallJob;

typedef float SmallVec __attribute__((vector_size(SMALL_VEC * sizeof(float)))); /* gcc and clang */
/* a b + c, rounded once where the CPU has vector FMA (the same bits on every run of a
 * build). Macros, not functions: a vector passed by value changes the ABI between builds. A
 * block of C is up to SMALL_RB rows × SMALL_VB vectors kept in registers: 24 of AVX-512's
 * 32 registers, 12 of AVX2's (or SSE's) 16, with the row of B and a broadcast beside them. */
#define SMALL_RB 6
#if defined(__AVX512F__)
#define SMALL_VB 4
#define SMALL_FMA(a, b, c) ((SmallVec)_mm512_fmadd_ps((__m512)(a), (__m512)(b), (__m512)(c)))
#elif defined(__AVX__)
#define SMALL_VB 2
#if defined(__FMA__)
#define SMALL_FMA(a, b, c) ((SmallVec)_mm256_fmadd_ps((__m256)(a), (__m256)(b), (__m256)(c)))
#else
#define SMALL_FMA(a, b, c) ((a) * (b) + (c))
#endif
#else
#define SMALL_VB 2
#define SMALL_FMA(a, b, c) ((a) * (b) + (c))
#endif
#define SMALL_SPLAT(s) ((s) - (SmallVec){0}) /* x - 0 is x for every x, -0 included */

/* acc[r][v] = sum over k of op(A)(r, k) bp[k][v] for rows r < RB and vectors v < NV, k in
 * order from zero. Inlined with constant RB and NV, so the loops unroll and acc stays in
 * registers. */
static inline __attribute__((always_inline)) void small_block(const float *bp, int Np, int K, const float *A, size_t ai,
                                                              size_t ak, int RB, int NV, SmallVec acc[SMALL_RB][SMALL_VB]) {
    for (int r = 0; r < RB; r++)
        for (int v = 0; v < NV; v++) acc[r][v] = SMALL_SPLAT(0.0f);
    for (int k = 0; k < K; k++) {
        const float *b = bp + (size_t)k * Np;
        SmallVec bv[SMALL_VB];
        for (int v = 0; v < NV; v++) memcpy(&bv[v], b + v * SMALL_VEC, sizeof bv[v]);
        for (int r = 0; r < RB; r++) {
            float a = A[r * ai + k * ak];
            SmallVec x = SMALL_SPLAT(a);
            for (int v = 0; v < NV; v++) acc[r][v] = SMALL_FMA(x, bv[v], acc[r][v]);
        }
    }
}

/* bp (K, Np) = the transpose of B (N, K, rows ldb apart): 8 × 8 tiles through registers
 * (one float at a time, the strided stores were a quarter of an attention product's time),
 * the edges one by one. */
static void small_transpose(const float *restrict B, int ldb, int N, int K, float *restrict bp, int Np) {
    int n0 = 0;
#ifdef DOT8
    for (; n0 + 8 <= N; n0 += 8) {
        int k0 = 0;
        for (; k0 + 8 <= K; k0 += 8) {
            Dot8 r[8];
            for (int i = 0; i < 8; i++) memcpy(&r[i], B + (size_t)(n0 + i) * ldb + k0, sizeof r[i]);
            dot8_transpose(r);
            for (int i = 0; i < 8; i++) memcpy(bp + (size_t)(k0 + i) * Np + n0, &r[i], sizeof r[i]);
        }
        for (int n = n0; n < n0 + 8; n++)
            for (int k = k0; k < K; k++) bp[(size_t)k * Np + n] = B[(size_t)n * ldb + k];
    }
#endif
    for (int n = n0; n < N; n++)
        for (int k = 0; k < K; k++) bp[(size_t)k * Np + n] = B[(size_t)n * ldb + k];
}

/* dst[0, n) = src[0, n), zeros up to np (a multiple of SMALL_VEC): a row of an attention
 * product is 10-40 floats, and a libc call for each (a million a Transformer step) cost more
 * than the copy. Masked moves with AVX-512 or AVX2, every vector through the mask: gcc turns a
 * loop of whole-vector moves into a call to memcpy, as it would the plain copy (without AVX2). */
#if defined(__AVX512F__)
static inline void small_copy_pad(float *restrict dst, const float *restrict src, int n, int np) {
    for (int i = 0; i < np; i += 16) {
        int left = n - i;
        __mmask16 m = left >= 16 ? (__mmask16)0xffff : left > 0 ? (__mmask16)((1u << left) - 1u) : 0;
        _mm512_storeu_ps(dst + i, _mm512_maskz_loadu_ps(m, src + i));
    }
}
#elif defined(__AVX2__)
static inline void small_copy_pad(float *restrict dst, const float *restrict src, int n, int np) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int i = 0; i < np; i += 8) { /* lanes below n - i loaded, the rest zero (and never read) */
        __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(n - i), lane);
        _mm256_storeu_ps(dst + i, _mm256_maskload_ps(src + i, m));
    }
}
#else
static inline void small_copy_pad(float *restrict dst, const float *restrict src, int n, int np) {
    memcpy(dst, src, (size_t)n * sizeof *dst);
    for (int i = n; i < np; i++) dst[i] = 0.0f;
}
#endif

/* Rows r < RB of a block (C's first w ≤ NV·SMALL_VEC columns) = acc + beta C, straight from
 * the registers: inlined with constant RB and NV as small_block is. Spilling acc to a stack
 * row and reading it back at other offsets (beta 1, the backward's products) stalled on every
 * load. The same two roundings (beta c, then + acc) as one element at a time. */
static inline __attribute__((always_inline)) void small_put(SmallVec acc[SMALL_RB][SMALL_VB], int RB, int NV, float *C,
                                                            size_t ldc, int w, float beta) {
    for (int r = 0; r < RB; r++) {
        float *c = C + (size_t)r * ldc;
        for (int v = 0; v < NV; v++) {
            int n0 = v * SMALL_VEC;
            if (n0 + SMALL_VEC <= w) {
                SmallVec y = acc[r][v];
                if (beta != 0.0f) { /* C may hold NaN garbage when beta is 0 */
                    SmallVec cv;
                    memcpy(&cv, c + n0, sizeof cv);
                    y = SMALL_SPLAT(beta) * cv + y;
                }
                memcpy(c + n0, &y, sizeof y);
            } else if (n0 < w) { /* the row's last, partial vector */
#if defined(__AVX512F__)
                __mmask16 m = (__mmask16)((1u << (w - n0)) - 1u);
                SmallVec y = acc[r][v];
                if (beta != 0.0f) y = SMALL_SPLAT(beta) * (SmallVec)_mm512_maskz_loadu_ps(m, c + n0) + y;
                _mm512_mask_storeu_ps(c + n0, m, (__m512)y);
#else
                float out[SMALL_VEC] __attribute__((aligned(64)));
                memcpy(out, &acc[r][v], sizeof out);
                for (int n = 0; n < w - n0; n++) c[n0 + n] = beta == 0.0f ? out[n] : beta * c[n0 + n] + out[n];
#endif
            }
        }
    }
}

/* C = op(A) op(B) + beta C for one batch entry: op(B) copied into bp (K, Np) with zero
 * padding, then C in blocks kept in registers: the same bits on any thread, for any split
 * of the batch. */
static void small_one(const SmallJob *j, const float *A, const float *B, float *C) {
    float bp[SMALL_MAX_B] __attribute__((aligned(64)));
    int M = j->M, N = j->N, K = j->K, Np = small_pad(N);
    if (j->tb) { /* each row's last vector zeroed first, the transpose's columns then over it:
                  * a loop of zeros after it became a memset call per row */
        SmallVec zero = SMALL_SPLAT(0.0f);
        if (N < Np)
            for (int k = 0; k < K; k++) memcpy(bp + (size_t)k * Np + Np - SMALL_VEC, &zero, sizeof zero);
        small_transpose(B, j->ldb, N, K, bp, Np);
    } else {
        for (int k = 0; k < K; k++) small_copy_pad(bp + (size_t)k * Np, B + (size_t)k * j->ldb, N, Np);
    }
    size_t ai = j->ta ? 1 : (size_t)j->lda, ak = j->ta ? (size_t)j->lda : 1; /* op(A)(i, k) = A[i ai + k ak] */
    for (int n0 = 0; n0 < Np; n0 += SMALL_VB * SMALL_VEC) {
        int nv = (Np - n0) / SMALL_VEC < SMALL_VB ? (Np - n0) / SMALL_VEC : SMALL_VB;
        int w = N - n0 < SMALL_VB * SMALL_VEC ? N - n0 : SMALL_VB * SMALL_VEC;
        for (int i0 = 0; i0 < M;) {
            int left = M - i0, rb = left >= SMALL_RB ? SMALL_RB : left >= 3 ? 3 : left; /* 15 rows: 6, 6, 3 */
            SmallVec acc[SMALL_RB][SMALL_VB];
            const float *a = A + i0 * ai;
            float *c = C + (size_t)i0 * j->ldc + n0;
#define SMALL_RUN(RB, NV)                                                                         \
    small_block(bp + n0, Np, K, a, ai, ak, RB, NV, acc);                                            \
    small_put(acc, RB, NV, c, (size_t)j->ldc, w, j->beta);                                          \
    break;
#define SMALL_CASE(NV)                                                                              \
    case NV:                                                                                        \
        switch (rb) {                                                                               \
        case SMALL_RB: SMALL_RUN(SMALL_RB, NV)                                                      \
        case 3: SMALL_RUN(3, NV)                                                                    \
        case 2: SMALL_RUN(2, NV)                                                                    \
        default: SMALL_RUN(1, NV)                                                                   \
        }                                                                                           \
        break;
            switch (nv) {
                SMALL_CASE(1)
                SMALL_CASE(2)
#if SMALL_VB == 4
                SMALL_CASE(3)
                SMALL_CASE(4)
#endif
            }
#undef SMALL_CASE
#undef SMALL_RUN
            i0 += rb;
        }
    }
}

void gemm_prefetch_rows(const float *x, int rows, int cols, int ld) {
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c += 16) __builtin_prefetch(x + (size_t)r * ld + c);
}

static void small_range(void *ctx, size_t b0, size_t b1) {
    const SmallJob *j = ctx;
    enum { AHEAD = 2 }; /* time-major operands put an entry's rows far apart (B·heads·d): no
                         * hardware prefetcher follows them, so the loads are asked for early */
    for (size_t b = b0; b < b1; b++) {
        if (b + AHEAD < b1) {
            size_t n = b + AHEAD;
            gemm_prefetch_rows(j->A + n * j->sa, j->ta ? j->K : j->M, j->ta ? j->M : j->K, j->lda);
            gemm_prefetch_rows(j->B + n * j->sb, j->tb ? j->N : j->K, j->tb ? j->K : j->N, j->ldb);
            gemm_prefetch_rows(j->C + n * j->sc, j->M, j->N, j->ldc);
        }
        small_one(j, j->A + b * j->sa, j->B + b * j->sb, j->C + b * j->sc);
    }
}

bool gemm_small_batched(const GemmCtx *g, bool ta, bool tb, int M, int N, int K, int batch, const float *A, int lda, size_t sa,
                        const float *B, int ldb, size_t sb, float beta, float *C, int ldc, size_t sc) {
    if (batch < 2 || M < 2 || N < 1 || K < 1 || !small_fits(M, N, K)) return false;
    *g->flops += 2.0 * M * N * K * batch;
    SmallJob j = {ta, tb, M, N, K, lda, ldb, ldc, A, B, sa, sb, sc, beta, C};
    struct timespec t0, t1;
    if (g->stats) clock_gettime(CLOCK_MONOTONIC, &t0);
    par_for((size_t)batch, (size_t)M * N * K, small_range, &j);
    if (g->stats) {
        clock_gettime(CLOCK_MONOTONIC, &t1);
        GemmShapeStat x = {.path = GEMM_PATH_SMALL, .ta = ta, .tb = tb, .M = M, .N = N, .K = K};
        gemm_stats_add(g->stats, &x, batch, (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    }
    return true;
}
