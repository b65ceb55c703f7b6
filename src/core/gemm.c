/* gemm.c — oneDNN float32 and bfloat16 matrix products, thread settings (see gemm.h). */
#include "gemm_internal.h"
#include "s2s/bf16.h"

#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>
#include <string.h>

/* Exported by libdnnl 2.x but declared only in its test headers: row-major
 * C = alpha op(A) op(B) + beta C with bfloat16 A and B, float32 C and accumulation. */
extern dnnl_status_t dnnl_gemm_bf16bf16f32(char transa, char transb, dnnl_dim_t M, dnnl_dim_t N, dnnl_dim_t K,
                                           float alpha, const uint16_t *A, dnnl_dim_t lda, const uint16_t *B,
                                           dnnl_dim_t ldb, float beta, float *C, dnnl_dim_t ldc);
/* libgomp, oneDNN's threading runtime (declared here: clang has no omp.h without libomp) */
extern void omp_set_num_threads(int n);
extern int omp_get_max_threads(void);

/* Products below this many multiply-adds run on one thread: waking OpenMP's threads costs
 * more than they save, and far more when the cores are busy with other work. */
#define GEMM_SERIAL_MACS (1L << 24)

void gemm_set_threads(int n) {
    if (n <= 0) return;
    openblas_set_num_threads(n);
    omp_set_num_threads(n);
}

const char *gemm_openblas_core(void) {
    const char *core = openblas_get_corename();
    return core ? core : "unknown";
}

S2sStatus gemm_bf16_check(const char *what, S2sError *err) {
    enum { N = 8 };
    uint16_t a[N * N], b[N * N];
    float ones[N * N], c[N * N];
    for (int i = 0; i < N * N; i++) ones[i] = 1.0f;
    bf16_from_f32(ones, a, N * N);
    bf16_from_f32(ones, b, N * N);
    dnnl_status_t s = dnnl_gemm_bf16bf16f32('N', 'N', N, N, N, 1.0f, a, N, b, N, 0.0f, c, N);
    if (s != dnnl_success || c[0] != (float)N || c[N * N - 1] != (float)N)
        return s2s_fail(err, S2S_ERR_CONFIG, "%s: oneDNN cannot run bfloat16 GEMMs on this CPU (status %d); use \"fp32\"",
                        what, (int)s);
    return S2S_OK;
}

/* The stored matrix behind op(X) (rows × cols with leading dimension ld), packed into bf16. */
static const uint16_t *to_bf16(Tape *t, const float *x, int rows, int cols, int ld) {
    uint16_t *y = arena_alloc(&t->arena, (size_t)rows * cols * sizeof *y);
    if (ld == cols) {
        bf16_from_f32(x, y, (size_t)rows * cols);
    } else {
        for (int r = 0; r < rows; r++) bf16_from_f32(x + (size_t)r * ld, y + (size_t)r * cols, (size_t)cols);
    }
    return y;
}

/* Runs one oneDNN product, on one thread when it is small (GEMM_SERIAL_MACS). */
#define GEMM_ONEDNN(M, N, K, call)                                              \
    do {                                                                        \
        int threads_ = omp_get_max_threads();                                   \
        bool serial_ = threads_ > 1 && (long)(M) * (N) * (K) < GEMM_SERIAL_MACS; \
        if (serial_) omp_set_num_threads(1);                                    \
        dnnl_status_t s_ = (call);                                              \
        if (serial_) omp_set_num_threads(threads_);                             \
        S2S_ASSERT(s_ == dnnl_success); /* shapes and strides are the caller's bugs */ \
    } while (0)

void gemm_f32_onednn(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                     int ldb, float beta, float *C, int ldc) {
    GEMM_ONEDNN(M, N, K, dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc));
}

void gemm_row(bool ta, bool tb, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb, float beta,
              float *C) {
    size_t inc = ta ? (size_t)lda : 1; /* a transposed one-row A is a column of its stored matrix */
    if (tb) { /* C[j] = a · B[j, :]: 16 partial sums so the loop vectorises */
        for (int j = 0; j < N; j++) {
            const float *b = B + (size_t)j * ldb;
            float part[16] = {0}, sum = 0.0f;
            int k = 0;
            for (; k + 16 <= K; k += 16)
                for (int q = 0; q < 16; q++) part[q] += A[(size_t)(k + q) * inc] * b[k + q];
            for (; k < K; k++) sum += A[(size_t)k * inc] * b[k];
            for (int q = 0; q < 16; q++) sum += part[q];
            C[j] = alpha * sum + (beta == 0.0f ? 0.0f : beta * C[j]); /* beta 0: C may hold NaN garbage */
        }
        return;
    }
    enum { CHUNK = 256 }; /* C = sum_k a[k] B[k, :], rows of B added in order, a chunk of columns at a time */
    for (int j0 = 0; j0 < N; j0 += CHUNK) {
        int n = N - j0 < CHUNK ? N - j0 : CHUNK;
        float acc[CHUNK] = {0};
        for (int k = 0; k < K; k++) {
            const float *b = B + (size_t)k * ldb + j0;
            float ak = A[(size_t)k * inc];
            for (int j = 0; j < n; j++) acc[j] += ak * b[j];
        }
        for (int j = 0; j < n; j++) C[j0 + j] = alpha * acc[j] + (beta == 0.0f ? 0.0f : beta * C[j0 + j]);
    }
}

void gemm_bf16_tape(Tape *t, bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda,
                    const uint16_t *Abf, const float *B, int ldb, const uint16_t *Bbf, float beta, float *C, int ldc) {
    ArenaMark m = arena_mark(&t->arena);
    if (!Abf) {
        Abf = to_bf16(t, A, ta ? K : M, ta ? M : K, lda);
        lda = ta ? M : K;
    }
    if (!Bbf) {
        Bbf = to_bf16(t, B, tb ? N : K, tb ? K : N, ldb);
        ldb = tb ? K : N;
    }
    /* gemm_bf16_check ran before any tape turned bf16 on */
    GEMM_ONEDNN(M, N, K, dnnl_gemm_bf16bf16f32(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, Abf, lda, Bbf, ldb, beta, C, ldc));
    arena_rewind(&t->arena, m);
}

uint16_t *gemm_bf16_copy(Tape *t, const float *x, size_t n) {
    uint16_t *y = arena_alloc(&t->arena, n * sizeof *y);
    bf16_from_f32(x, y, n);
    return y;
}

void gemm_tape(Tape *t, bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda,
               const float *B, int ldb, float beta, float *C, int ldc) {
    s2s_gemm(t, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
