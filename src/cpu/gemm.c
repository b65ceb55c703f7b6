/* gemm.c — the one dispatcher of the engine's matrix products: gemm_dispatch picks the
 * kernel (packed weight, bf16, int8, one row, OpenBLAS, oneDNN) by the rules of gemm.h, and
 * gemm_op and gemm_bias are its entries (FLOPs counted, the time per shape when asked). */
#include "gemm_impl.h"
#include "s2s/bf16.h"
#include "s2s/par.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct SgemmJob {
    bool ta, tb;
    int M, N, K, lda, ldb, ldc;
    float alpha, beta;
    const float *A, *B;
    float *C;
    size_t pieces, span; /* 0, or that many pieces of the span (M or N) in whole 64s */
} SgemmJob;

/* Pieces p0 … p1 as rows or columns b … e. */
static void piece_range(const SgemmJob *j, size_t p0, size_t p1, size_t *b, size_t *e) {
    size_t units = (j->span + 63) / 64;
    *b = units * p0 / j->pieces * 64, *e = units * p1 / j->pieces * 64;
    if (*e > j->span) *e = j->span;
}

/* One sgemm call on this thread alone (a pool thread or the caller). */
static void sgemm_alone(const SgemmJob *j, int M, int N, const float *A, const float *B, float *C) {
    int restore = omp_get_max_threads();
    if (restore != 1) omp_set_num_threads(1);
    dnnl_status_t s = dnnl_sgemm(j->ta ? 'T' : 'N', j->tb ? 'T' : 'N', M, N, j->K, j->alpha, A, j->lda, B, j->ldb,
                                 j->beta, C, j->ldc);
    if (restore != 1) omp_set_num_threads(restore);
    S2S_ASSERT(s == dnnl_success); /* shapes and strides are the caller's bugs */
}

/* Rows r0 … r1 of C: op(A)'s rows, all of op(B). */
static void sgemm_rows_chunk(void *ctx, size_t r0, size_t r1) {
    const SgemmJob *j = ctx;
    if (j->pieces) piece_range(j, r0, r1, &r0, &r1);
    if (r0 >= r1) return;
    const float *a = j->ta ? j->A + r0 : j->A + r0 * (size_t)j->lda;
    sgemm_alone(j, (int)(r1 - r0), j->N, a, j->B, j->C + r0 * (size_t)j->ldc);
}

/* Columns c0 … c1 of C: all of op(A), op(B)'s columns. */
static void sgemm_cols_chunk(void *ctx, size_t c0, size_t c1) {
    const SgemmJob *j = ctx;
    piece_range(j, c0, c1, &c0, &c1);
    if (c0 >= c1) return;
    const float *b = j->tb ? j->B + c0 * (size_t)j->ldb : j->B + c0;
    sgemm_alone(j, j->M, (int)(c1 - c0), j->A, b, j->C + c0);
}

/* Threaded float32 sgemm products run on the library's pool, each chunk a one-thread sgemm:
 * no OpenMP region to wake (libgomp's threads sleep at once, wait_policy.h), and a thread
 * that shares its core with another process holds up its own chunk, which the other thread
 * may take. Products whose op(B) each chunk can afford to pack again (GEMM_POOL_MAX_B) go in
 * chunks of C's rows as par_for cuts them; bigger ones (an output layer's) in
 * SGEMM_PIECES_PER_THREAD pieces a thread, cut across the operand that is not packed again:
 * C's rows where op(B) is the smaller, else its columns (the forward's n × 1,536 input packed
 * per piece, not its 1,536 × 5,921 weight). Chunks and pieces are cut by the thread count
 * alone, so a product's bits are the same whichever thread runs which. */
void gemm_f32_onednn(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                     int ldb, float beta, float *C, int ldc) {
    if ((long)M * N * K >= GEMM_SERIAL_MACS && omp_get_max_threads() > 1) {
        SgemmJob j = {ta, tb, M, N, K, lda, ldb, ldc, alpha, beta, A, B, C, 0, 0};
        if ((long)K * N <= GEMM_POOL_MAX_B) {
            par_for((size_t)M, (size_t)N * K, sgemm_rows_chunk, &j);
            return;
        }
        j.pieces = (size_t)omp_get_max_threads() * SGEMM_PIECES_PER_THREAD;
        bool rows = (long)K * N <= (long)M * K;
        j.span = (size_t)(rows ? M : N);
        par_for(j.pieces, (size_t)M * N * K / j.pieces, rows ? sgemm_rows_chunk : sgemm_cols_chunk, &j);
        return;
    }
    GEMM_ONEDNN(M, N, K, dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc));
}

static bool frozen_weight(const GemmWeight *Bw, const float *B, bool ta, int M) {
    if (!Bw || !Bw->frozen || ta || M > PACK_MAX_ROWS) return false;
    S2S_ASSERT(B == Bw->data);
    return true;
}

bool gemm_int8_applies(const GemmCtx *g, const GemmWeight *Bw, int N) {
    return gemm_ctx_int8(g) && Bw && Bw->frozen && N >= GEMM_BF16_MIN_SIDE;
}

typedef struct BiasFill {
    float *C;
    const float *bias;
    int N, ldc;
} BiasFill;

static void bias_fill_rows(void *ctx, size_t r0, size_t r1) {
    const BiasFill *j = ctx;
    for (size_t r = r0; r < r1; r++) memcpy(j->C + r * j->ldc, j->bias, (size_t)j->N * sizeof *j->C);
}

/* For a path without a bias in its epilogue: every row of C starts as the bias, and the
 * product adds to it (the beta to use then). */
static float bias_first(const float *bias, float *C, int M, int N, int ldc, float beta) {
    if (!bias) return beta;
    BiasFill j = {C, bias, N, ldc};
    par_for((size_t)M, (size_t)N, bias_fill_rows, &j);
    return 1.0f;
}

/* Whether a float32 product runs on gemm_rows, so that no sentence's numbers depend on the
 * batch it is in: a product by a frozen weight where oneDNN's kernels sum a row by the rows
 * around it (gemm_rows_apply), and in a call without gradients (decoding, evaluation) a
 * product of two activations of two rows or more where gemm_rows_for_activations says so
 * (one-row products have gemm_row's order everywhere). Not on an OpenBLAS engine: that back
 * end is asked for by name. */
static bool rows_takes(const GemmCtx *g, int M, bool frozen) {
    if (gemm_ctx_openblas(g) || gemm_ctx_bf16(g)) return false;
    if (frozen) return gemm_rows_apply();
    return !g->training && M >= 2 && gemm_rows_for_activations();
}

/* A product on gemm_rows: a frozen op(B) packed once per freeze, any other packed (and a
 * transposed A copied) into the arena for this call. */
static void rows_product(const GemmCtx *g, bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda,
                         const float *B, int ldb, uint64_t stamp, float beta, float *C, int ldc, const float *bias) {
    ArenaMark m = arena_mark(g->arena);
    const float *P;
    if (stamp) {
        P = gemm_rows_pack_get(gemm_plans_get(g), B, ldb, tb, stamp, N, K)->buf;
    } else {
        float *p = arena_alloc(g->arena, gemm_rows_packed_floats(N, K) * sizeof *p);
        gemm_rows_pack(B, ldb, tb, K, N, p);
        P = p;
    }
    if (ta) { /* op(A) = A^T: rows of K floats */
        float *a = arena_alloc(g->arena, (size_t)M * K * sizeof *a);
        for (int k = 0; k < K; k++)
            for (int r = 0; r < M; r++) a[(size_t)r * K + k] = A[(size_t)k * lda + r];
        A = a, lda = K;
    }
    gemm_rows(M, N, K, alpha, A, lda, P, beta, C, ldc, bias);
    arena_rewind(g->arena, m);
}

/* A layer's product (x W^T) with a bias over a short K: the matmul primitive takes it at any
 * height and adds the bias as it writes C, where sgemm and the bf16 GEMM read back a C first
 * filled with it (a Transformer's step wrote and read 170 MB that way); over a long K their
 * kernels gain more than the fill costs (GEMM_BIAS_EPILOGUE_MAX_K). */
static bool bias_in_epilogue(const float *bias, bool ta, bool tb, int K) {
    return bias && tb && !ta && K <= GEMM_BIAS_EPILOGUE_MAX_K;
}

/* The product (M, N, K > 0) by the back end the rules pick; returns that back end's name.
 * bias (alpha 1, beta 0): in the epilogue of the int8 and matmul paths, else C first. */
static GemmPath gemm_dispatch(const GemmCtx *g, bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda,
                              const uint16_t *Abf, const float *B, int ldb, const uint16_t *Bbf, const GemmWeight *Bw,
                              float beta, float *C, int ldc, const float *bias) {
    S2S_ASSERT(!bias || (alpha == 1.0f && beta == 0.0f));
    if (Bw && Bw->frozen && !ta && M > PACK_MAX_ROWS) { /* a frozen weight's rows in pieces its packed
                                                         * plans serve: every row through one kernel */
        GemmPath path = GEMM_PATH_PACKED;
        for (int r0 = 0; r0 < M; r0 += PACK_MAX_ROWS) {
            int m = M - r0 < PACK_MAX_ROWS ? M - r0 : PACK_MAX_ROWS;
            path = gemm_dispatch(g, ta, tb, m, N, K, alpha, A + (size_t)r0 * lda, lda, Abf ? Abf + (size_t)r0 * lda : NULL,
                                 B, ldb, Bbf, Bw, beta, C + (size_t)r0 * ldc, ldc, bias);
        }
        return path;
    }
    PlanKey k;
    memset(&k, 0, sizeof k);
    k.M = M, k.N = N, k.K = K, k.lda = lda, k.ldb = ldb, k.ldc = ldc, k.ta = ta, k.tb = tb;
    if (!ta && gemm_int8_applies(g, Bw, N)) {
        S2S_ASSERT(B == Bw->data);
        const Pack *pk = gemm_int8_run(g, &k, alpha, beta, A, lda, B, ldb, Bw->frozen, C, ldc, bias, NULL, false);
        return pk->q8 ? GEMM_PATH_Q8 : GEMM_PATH_INT8;
    }
    bool frozen = frozen_weight(Bw, B, ta, M);
    if (gemm_bf16_takes(g, M, N, Bw != NULL)) {
        GemmPath path = GEMM_PATH_BF16_PACKED;
        ArenaMark m = arena_mark(g->arena);
        if (!Abf) {
            Abf = gemm_to_bf16(g, A, ta ? K : M, ta ? M : K, lda);
            k.lda = lda = ta ? M : K;
        }
        k.bf16 = 1;
        if (frozen) { /* packed from the float32 weight, rounded by the reorder */
            gemm_matmul_run(g, &k, alpha, beta, Abf, B, Bw->frozen, C, bias);
        } else {
            if (!Bbf) {
                Bbf = gemm_to_bf16(g, B, tb ? N : K, tb ? K : N, ldb);
                k.ldb = ldb = tb ? K : N;
            }
            /* only the matmul primitive reaches AMX in oneDNN 2.x */
            if (g->bf16_matmul || bias_in_epilogue(bias, ta, tb, K)) {
                gemm_matmul_run(g, &k, alpha, beta, Abf, Bbf, 0, C, bias);
                path = GEMM_PATH_BF16_MATMUL;
            } else { /* gemm_bf16_check ran before any engine turned bf16 on */
                beta = bias_first(bias, C, M, N, ldc, beta);
                GEMM_ONEDNN(M, N, K, dnnl_gemm_bf16bf16f32(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, Abf, lda, Bbf,
                                                          ldb, beta, C, ldc));
                path = GEMM_PATH_BF16_GEMM;
            }
        }
        arena_rewind(g->arena, m);
        return path;
    }
    if (rows_takes(g, M, frozen)) {
        rows_product(g, ta, tb, M, N, K, alpha, A, lda, B, ldb, frozen ? Bw->frozen : 0, beta, C, ldc, bias);
        return GEMM_PATH_ROWS;
    }
    if (M == 1 && !frozen) { /* a row times a matrix (one decoding step's attention): a GEMM's
                              * packing, or waking BLAS threads for it, would cost more than the
                              * product; a frozen weight is packed already, and one row of it goes
                              * through the same kernel as many (a sentence decodes as in a batch) */
        gemm_row(ta, tb, N, K, alpha, A, lda, B, ldb, bias_first(bias, C, M, N, ldc, beta), C);
        return GEMM_PATH_ROW;
    }
    if (gemm_ctx_openblas(g)) {
        beta = bias_first(bias, C, M, N, ldc, beta);
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A,
                    lda, B, ldb, beta, C, ldc);
        return GEMM_PATH_OPENBLAS;
    }
    /* dnnl_sgemm repacks a transposed B on every call: thin products against one go faster
     * through the matmul primitive, and faster still with a frozen weight packed once */
    if (frozen || (tb && !ta && M <= PACK_MAX_ROWS) || bias_in_epilogue(bias, ta, tb, K)) {
        gemm_matmul_run(g, &k, alpha, beta, A, B, frozen ? Bw->frozen : 0, C, bias);
        return frozen ? GEMM_PATH_PACKED : GEMM_PATH_MATMUL;
    }
    gemm_f32_onednn(ta, tb, M, N, K, alpha, A, lda, B, ldb, bias_first(bias, C, M, N, ldc, beta), C, ldc);
    return GEMM_PATH_SGEMM;
}

const char *const GEMM_PATH_NAMES[GEMM_PATH_COUNT] = {
    "row",         "sgemm",       "openblas", "matmul", "matmul_packed", "bf16_gemm",
    "bf16_matmul", "bf16_packed", "int8",     "small",  "q8",  "rows"};

void gemm_stats_free(GemmStats *st) {
    free(st->items);
    memset(st, 0, sizeof *st);
}

static void gemm_timed(const GemmCtx *g, bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda,
                     const uint16_t *Abf, const float *B, int ldb, const uint16_t *Bbf, const GemmWeight *Bw, float beta,
                     float *C, int ldc, const float *bias) {
    if (M == 0 || N == 0) return;
    *g->flops += 2.0 * M * N * K;
    if (K == 0) { /* BLAS would still scale C by beta; keep that contract explicit */
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++)
                C[(size_t)i * ldc + j] = bias ? bias[j] : beta == 0.0f ? 0.0f : beta * C[(size_t)i * ldc + j];
        return;
    }
    if (!g->stats) {
        gemm_dispatch(g, ta, tb, M, N, K, alpha, A, lda, Abf, B, ldb, Bbf, Bw, beta, C, ldc, bias);
        return;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    GemmPath path = gemm_dispatch(g, ta, tb, M, N, K, alpha, A, lda, Abf, B, ldb, Bbf, Bw, beta, C, ldc, bias);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    GemmShapeStat x = {.path = path, .ta = ta, .tb = tb, .M = M, .N = N, .K = K};
    gemm_stats_add(g->stats, &x, 1, (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
}

void gemm_op(const GemmCtx *g, bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda,
             const uint16_t *Abf, const float *B, int ldb, const uint16_t *Bbf, const GemmWeight *Bw, float beta,
             float *C, int ldc) {
    gemm_timed(g, ta, tb, M, N, K, alpha, A, lda, Abf, B, ldb, Bbf, Bw, beta, C, ldc, NULL);
}

void gemm_bias(const GemmCtx *g, int M, int N, int K, const float *A, int lda, const float *W, const uint16_t *Wbf,
               const GemmWeight *Bw, const float *bias, float *C, int ldc) {
    gemm_timed(g, false, true, M, N, K, 1.0f, A, lda, NULL, W, K, Wbf, Bw, 0.0f, C, ldc, bias);
}

uint16_t *gemm_bf16_copy(const GemmCtx *g, const float *x, size_t n) {
    uint16_t *y = arena_alloc(g->arena, n * sizeof *y);
    par_bf16_from_f32(x, y, n);
    return y;
}
