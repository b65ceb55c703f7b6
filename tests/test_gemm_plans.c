/* test_gemm_plans.c — products against frozen weights (packed, repacked when they change),
 * oneDNN's cached plans, the paths thin products take, logsumexp, the per-shape statistics,
 * the bias on every path, the rows kernel, and the chunked linear + cross-entropy. */
#include "test_gemm.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>


/* C = A op(W) (A: M x K, W: K x K square) through the GEMM entry with W offered as a frozen
 * weight, against double products (of bf16-rounded operands on a bf16 tape); the worst error
 * scaled by K. */
static double frozen_error(Tape *t, bool tb, const Tensor *a, const Tensor *w, float *c) {
    int M = a->shape[0], K = a->shape[1];
    bool r = tape_bf16(t) && M >= 8; /* thinner products stay float32 (GEMM_BF16_MIN_SIDE) */
    tape_reset(t);
    tape_gemm_op(t, false, tb, M, K, K, 1.0f, a->data, K, NULL, w->data, K, NULL, w, 0.0f, c, K);
    double worst = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < K; j++) {
            double s = 0;
            for (int k = 0; k < K; k++) {
                float x = a->data[(size_t)i * K + k], y = tb ? w->data[(size_t)j * K + k] : w->data[(size_t)k * K + j];
                s += r ? (double)round_bf16(x) * round_bf16(y) : (double)x * y;
            }
            worst = fmax(worst, fabs(c[(size_t)i * K + j] - s) / K);
        }
    return worst;
}

/* A frozen weight is multiplied in a layout packed once (gemm.c): the products stay right,
 * the packed copy is reused while the stamp holds (same bits), and a new stamp after the
 * weight changed packs again. The weight is square and packed both as W and as W^T: same
 * address, same stamp, same shape, different matrices. */
Test(gemm, frozen_weights_packed_and_repacked_when_they_change) {
    bool bf16_ok = gemm_bf16_check("test", &(S2sError){0}) == S2S_OK;
    for (int prec = 0; prec < (bf16_ok ? 2 : 1); prec++) {
        int rows[] = {3, 40, 1100}; /* 1100: taller than packing is used for */
        for (int r = 0; r < 3; r++) {
            int M = rows[r], K = 48;
            Rng rng;
            rng_init(&rng, 21 + (uint64_t)r, 0);
            Tensor *a = tensor_new(2, SH(M, K), false), *w = tensor_new(2, SH(K, K), false);
            tu_fill(a, &rng, -1, 1);
            tu_fill(w, &rng, -1, 1);
            Tape t;
            tape_init(&t, 1 << 20);
            t.eng.precision = (prec == 1) ? PRECISION_BF16 : PRECISION_FP32;
            double tol = prec ? 1e-6 : 1e-7;
            const char *pn = prec ? "bf16" : "fp32";
            float *c1 = malloc((size_t)M * K * sizeof *c1), *c2 = malloc((size_t)M * K * sizeof *c2);
            w->frozen = 1;
            for (int tb = 1; tb >= 0; tb--) { /* W^T packed first, then W under the same stamp */
                cr_expect_lt(frozen_error(&t, tb, a, w, c1), tol, "%s M=%d tb=%d: first use", pn, M, tb);
                cr_expect_lt(frozen_error(&t, tb, a, w, c2), tol, "%s M=%d tb=%d: reused", pn, M, tb);
                cr_expect_eq(memcmp(c1, c2, (size_t)M * K * sizeof *c1), 0, "M=%d tb=%d: same stamp, other bits", M, tb);
            }
            for (size_t e = 0; e < w->size; e++) w->data[e] = -0.5f * w->data[e] + 0.25f; /* an update */
            w->frozen = 2;
            for (int tb = 1; tb >= 0; tb--)
                cr_expect_lt(frozen_error(&t, tb, a, w, c1), tol, "%s M=%d tb=%d: the weight changed, its stale packing was used",
                             pn, M, tb);
            w->frozen = 0;
            cr_expect_lt(frozen_error(&t, true, a, w, c1), tol, "%s M=%d: thawed", pn, M);
            free(c1);
            free(c2);
            tape_free(&t);
            tensor_free(a);
            tensor_free(w);
        }
    }
}


/* float32 products that go through cached matmul primitives (a transposed B, at most 1024
 * rows): alpha, beta and leading dimensions wider than the matrices are honoured, and more
 * shapes than the cache holds (it starts again) still give the same bits for the same shape. */
Test(gemm, matmul_plans_alpha_beta_strides_and_refill) {
    Tape t;
    tape_init(&t, 1 << 20);
    Rng rng;
    rng_init(&rng, 31, 0);
    int M = 37, N = 29, K = 50, lda = 53, ldb = 61, ldc = 33;
    float *A = malloc((size_t)M * lda * sizeof *A), *B = malloc((size_t)N * ldb * sizeof *B);
    float *C = malloc((size_t)M * ldc * sizeof *C), *C0 = malloc((size_t)M * ldc * sizeof *C0);
    for (int i = 0; i < M * lda; i++) A[i] = rng_uniform_range(&rng, -1, 1);
    for (int i = 0; i < N * ldb; i++) B[i] = rng_uniform_range(&rng, -1, 1);
    for (int i = 0; i < M * ldc; i++) C0[i] = rng_uniform_range(&rng, -1, 1);
    float alphas[] = {1.0f, 0.5f, -3.0f}, betas[] = {0.0f, 1.0f, -2.0f};
    for (int ai = 0; ai < 3; ai++)
        for (int bi = 0; bi < 3; bi++) {
            memcpy(C, C0, (size_t)M * ldc * sizeof *C);
            tape_gemm(&t, false, true, M, N, K, alphas[ai], A, lda, B, ldb, betas[bi], C, ldc);
            double worst = 0;
            for (int i = 0; i < M; i++) {
                for (int j = 0; j < N; j++) {
                    double s = 0;
                    for (int k = 0; k < K; k++) s += (double)A[(size_t)i * lda + k] * B[(size_t)j * ldb + k];
                    double want = alphas[ai] * s + betas[bi] * C0[(size_t)i * ldc + j];
                    worst = fmax(worst, fabs(C[(size_t)i * ldc + j] - want));
                }
                for (int j = N; j < ldc; j++) /* past N: untouched */
                    cr_assert_eq(bits(C[(size_t)i * ldc + j]), bits(C0[(size_t)i * ldc + j]), "C[%d,%d] written", i, j);
            }
            cr_expect_lt(worst, 1e-5, "alpha %g beta %g: off by %g", alphas[ai], betas[bi], worst);
        }
    float *first = malloc((size_t)M * ldc * sizeof *first);
    memset(first, 0, (size_t)M * ldc * sizeof *first);
    tape_gemm(&t, false, true, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, first, ldc);
    for (int m = 0; m < 600; m++) { /* more shapes (here: C strides) than the cache holds */
        float c[2 * 608];
        tape_gemm(&t, false, true, 2, 8, 8, 1.0f, A, lda, B, ldb, 0.0f, c, 8 + m);
        double s = 0;
        for (int k = 0; k < 8; k++) s += (double)A[lda + k] * B[7 * ldb + k];
        cr_assert_lt(fabs(c[8 + m + 7] - s), 1e-5, "shape %d: C[1,7] = %g, expected %g", m, c[8 + m + 7], s);
    }
    memset(C, 0, (size_t)M * ldc * sizeof *C);
    tape_gemm(&t, false, true, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc);
    cr_expect_eq(memcmp(C, first, (size_t)M * ldc * sizeof *C), 0, "the same shape after a refill gave other bits");
    free(first);
    free(A);
    free(B);
    free(C);
    free(C0);
    tape_free(&t);
}

/* A product with a side under 8 stays float32 on a bf16 tape (GEMM_BF16_MIN_SIDE). */
Test(gemm, thin_products_stay_float32) {
    Rng rng;
    rng_init(&rng, 5, 0);
    Tensor *a = tensor_new(2, SH(1, 40), false), *b = tensor_new(2, SH(40, 30), false);
    tu_fill(a, &rng, -1, 1);
    tu_fill(b, &rng, -1, 1);
    Tape t32, t16;
    tape_init(&t32, 1 << 12);
    tape_init(&t16, 1 << 12);
    t16.eng.precision = PRECISION_BF16;
    Tensor *c32 = op_matmul(&t32, a, b, 0), *c16 = op_matmul(&t16, a, b, 0);
    cr_expect_eq(memcmp(c32->data, c16->data, c32->size * sizeof(float)), 0);
    tape_free(&t32);
    tape_free(&t16);
    tensor_free(a);
    tensor_free(b);
}

Test(gemm, logsumexp_matches_double) {
    Rng rng;
    rng_init(&rng, 9, 0);
    int sizes[] = {1, 15, 16, 17, 33, 5921};
    float *x = malloc(5921 * sizeof *x);
    for (int k = 0; k < 6; k++) {
        int n = sizes[k];
        for (int i = 0; i < n; i++) x[i] = 20.0f * (rng_uniform(&rng) - 0.5f);
        double mx = x[0], s = 0;
        for (int i = 1; i < n; i++) mx = fmax(mx, x[i]);
        for (int i = 0; i < n; i++) s += exp(x[i] - mx);
        double want = mx + log(s), got = s2s_logsumexp(x, n);
        cr_expect(fabs(got - want) < 1e-5 * fmax(1.0, fabs(want)), "n %d: %.9g vs %.9g", n, got, want);
    }
    free(x);
}

/* The vectorised maximum is the running comparison's: the same lse bits, NaN in x[0]
 * carried, a NaN elsewhere skipped by the maximum (the sum is NaN then). */
static float lse_scalar(const float *x, int n) {
    float mx = x[0];
    for (int i = 1; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    float part[16] = {0}, sum = 0.0f;
    int i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) part[j] += s2s_expf(x[i + j] - mx);
    for (; i < n; i++) sum += s2s_expf(x[i] - mx);
    for (int j = 0; j < 16; j++) sum += part[j];
    return mx + logf(sum);
}

Test(gemm, logsumexp_is_the_scalar_maximum_bit_for_bit) {
    Rng rng;
    rng_init(&rng, 10, 0);
    float x[200];
    for (int n = 1; n <= 200; n += 7)
        for (int rep = 0; rep < 4; rep++) {
            for (int i = 0; i < n; i++) x[i] = 30.0f * (rng_uniform(&rng) - 0.5f);
            if (rep == 1) x[rng_below(&rng, (uint32_t)n)] = 40.0f; /* one clear maximum, anywhere */
            if (rep == 2) x[0] = NAN;
            if (rep == 3) x[n - 1] = -INFINITY;
            float want = lse_scalar(x, n), got = s2s_logsumexp(x, n);
            cr_expect(memcmp(&want, &got, sizeof got) == 0 || (isnan(want) && isnan(got)), "n %d case %d: %.9g vs %.9g", n,
                      rep, got, want);
            if (rep == 2) cr_expect(isnan(got), "n %d: NaN in x[0] gives %g", n, got);
        }
}

/* A tape with gemm_stats times each product under its shape and back end. */
Test(gemm, stats_record_shapes_and_paths) {
    Tape t;
    tape_init(&t, 1 << 20);
    GemmStats st = {0};
    t.eng.gemm_stats = &st;
    float a[40 * 30] = {0}, b[30 * 20] = {0}, c[40 * 20];
    tape_gemm(&t, false, true, 40, 20, 30, 1.0f, a, 30, b, 30, 0.0f, c, 20); /* transposed B, thin: matmul */
    tape_gemm(&t, false, true, 40, 20, 30, 1.0f, a, 30, b, 30, 0.0f, c, 20);
    tape_gemm(&t, true, false, 40, 20, 30, 1.0f, a, 40, b, 20, 0.0f, c, 20); /* sgemm */
    tape_gemm(&t, false, false, 1, 20, 30, 1.0f, a, 30, b, 20, 0.0f, c, 20); /* one row */
    cr_assert_eq(st.n, 3);
    cr_expect_eq(st.items[0].path, GEMM_PATH_MATMUL);
    cr_expect_eq(st.items[0].calls, 2);
    cr_expect(st.items[0].tb && !st.items[0].ta && st.items[0].M == 40 && st.items[0].N == 20 && st.items[0].K == 30);
    cr_expect_eq(st.items[1].path, GEMM_PATH_SGEMM);
    cr_expect_eq(st.items[2].path, GEMM_PATH_ROW);
    for (int i = 0; i < 3; i++) cr_expect_gt(st.items[i].seconds, 0.0);
    GemmCtx g = tape_gemm_ctx(&t);
    cr_expect_gt(gemm_primitive_rate(&g, &st.items[1], false), 0.0);
    gemm_stats_free(&st);
    tape_free(&t);
}

/* Every step-th row or column, and both sides of every 64 (where chunks and pieces meet). */
static bool checked(int i, int step) { return i % step == 0 || i % 64 == 0 || i % 64 == 63; }

/* A threaded sgemm product runs on the library's pool (gemm_f32_onednn): with op(B) at most
 * GEMM_POOL_MAX_B floats in chunks of C's rows, cut at 64-row units (1,100) and at single rows
 * (300); with a bigger op(B), in pieces of C's rows when op(A) is the bigger (2,200 × 1,100 ×
 * 1,000) and of its columns when op(B) is (1,100 × 2,200 × 500, an output layer's forward).
 * Every transpose, strides wider than the matrices, alpha and beta, against double products
 * (of the big ones every third row and column, and those where pieces meet); then the same
 * bits again while a busy child holds a core, so that the chunks land on other threads. */
Test(gemm, pool_sgemm_chunks_and_pieces_all_transposes) {
    int restore = omp_get_max_threads();
    gemm_set_threads(2);
    const struct {
        int M, N, K;
    } shapes[] = {{1100, 128, 160}, {300, 256, 256}, {2200, 1100, 1000}, {1100, 2200, 500}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int tr = 0; tr < 4; tr++) {
            bool ta = tr & 1, tb = tr & 2;
            int M = shapes[s].M, N = shapes[s].N, K = shapes[s].K;
            bool big = (long)K * N > GEMM_POOL_MAX_B, cols = (long)K * N > (long)M * K;
            cr_assert((long)M * N * K >= GEMM_SERIAL_MACS && big == (s >= 2) && cols == (s == 3));
            int step = big ? 3 : 1;
            int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 5, ldc = N + 7;
            size_t na = (size_t)(ta ? K : M) * lda, nb = (size_t)(tb ? N : K) * ldb, nc = (size_t)M * ldc;
            float *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b), *c0 = malloc(nc * sizeof *c0);
            float *c = malloc(nc * sizeof *c), *again = malloc(nc * sizeof *again);
            cr_assert(a && b && c0 && c && again);
            Rng rng;
            rng_init(&rng, 40 + s * 4 + tr, 0);
            for (size_t i = 0; i < na; i++) a[i] = rng_uniform(&rng) * 2 - 1;
            for (size_t i = 0; i < nb; i++) b[i] = rng_uniform(&rng) * 2 - 1;
            for (size_t i = 0; i < nc; i++) c0[i] = rng_uniform(&rng) * 2 - 1;
            memcpy(c, c0, nc * sizeof *c);
            Tape t;
            tape_init(&t, 1 << 20);
            GemmStats st = {0};
            t.eng.gemm_stats = &st;
            tape_gemm(&t, ta, tb, M, N, K, 0.5f, a, lda, b, ldb, 0.25f, c, ldc);
            cr_assert_eq(st.n, 1);
            /* a thin product against a transposed B takes the matmul primitive (gemm.c) */
            GemmPath path = tb && !ta && M <= PACK_MAX_ROWS ? GEMM_PATH_MATMUL : GEMM_PATH_SGEMM;
            cr_expect_eq(st.items[0].path, path, "%dx%dx%d ta %d tb %d: path %s", M, N, K, ta, tb,
                         GEMM_PATH_NAMES[st.items[0].path]);
            double worst = 0;
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                    if (!checked(i, step) || !checked(j, step)) continue;
                    double sum = 0;
                    for (int k = 0; k < K; k++)
                        sum += (double)(ta ? a[(size_t)k * lda + i] : a[(size_t)i * lda + k]) *
                               (tb ? b[(size_t)j * ldb + k] : b[(size_t)k * ldb + j]);
                    double want = 0.5 * sum + 0.25 * c0[(size_t)i * ldc + j];
                    worst = fmax(worst, fabs(c[(size_t)i * ldc + j] - want));
                }
            cr_expect_lt(worst, 1e-4, "%dx%dx%d ta %d tb %d: off by %g", M, N, K, ta, tb, worst);
            for (int i = 0; i < M; i++) /* the padding between rows is left alone */
                for (int j = N; j < ldc; j++) cr_expect_eq(bits(c[(size_t)i * ldc + j]), bits(c0[(size_t)i * ldc + j]));
            pid_t busy = fork();
            cr_assert_neq(busy, -1);
            if (busy == 0) { /* dies with the test, whatever ends it */
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                for (volatile unsigned long x = 0;; x++) {
                }
            }
            for (int r = 0; r < 3; r++) {
                memcpy(again, c0, nc * sizeof *again);
                tape_gemm(&t, ta, tb, M, N, K, 0.5f, a, lda, b, ldb, 0.25f, again, ldc);
                cr_expect(memcmp(again, c, nc * sizeof *c) == 0, "%dx%dx%d ta %d tb %d: other bits beside a busy process",
                          M, N, K, ta, tb);
            }
            kill(busy, SIGKILL);
            waitpid(busy, NULL, 0);
            gemm_stats_free(&st);
            tape_free(&t);
            free(a), free(b), free(c0), free(c), free(again);
        }
    gemm_set_threads(restore);
}

/* A threaded product by a packed (frozen) weight runs on the pool in pieces of whole 16-row
 * tiles, each a one-thread primitive (gemm_plans.c): both layouts of the weight, beta 0 over
 * NaN and 0.5 over values, a bias, rows of A and C wider than the matrices (C's padding
 * untouched), against double products (of bf16-rounded operands on a bf16 tape); the same bits
 * three times. M = 200: pieces of 96 and 104 rows. */
Test(gemm, packed_products_in_pieces_on_the_pool) {
    bool bf16_ok = gemm_bf16_check("test", &(S2sError){0}) == S2S_OK && !gemm_cpu_has_amx();
    const int M = 200, N = 384, K = 384, lda = K + 5, ldc = N + 3;
    int restore = omp_get_max_threads();
    Rng rng;
    rng_init(&rng, 41, 0);
    Tensor *w = tensor_new(2, SH(N, K), false);
    tu_fill(w, &rng, -1, 1);
    w->frozen = 7;
    float *a = malloc((size_t)M * lda * sizeof *a), *bias = malloc((size_t)N * sizeof *bias);
    float *c0 = malloc((size_t)M * ldc * sizeof *c0), *c = malloc((size_t)M * ldc * sizeof *c);
    float *first = malloc((size_t)M * ldc * sizeof *first);
    for (int i = 0; i < M * lda; i++) a[i] = rng_uniform(&rng) * 2 - 1;
    for (int i = 0; i < N; i++) bias[i] = rng_uniform(&rng) - 0.5f;
    for (int i = 0; i < M * ldc; i++) c0[i] = rng_uniform(&rng) * 2 - 1;
    gemm_set_threads(2);
    for (int prec = 0; prec < (bf16_ok ? 2 : 1); prec++)
        for (int v = 0; v < 4; v++) { /* 0, 1: tb with beta 0 and 0.5; 2: B plain; 3: a bias */
            bool tb = v != 2, with_bias = v == 3;
            float beta = v == 1 ? 0.5f : 0.0f;
            Tape t;
            tape_init(&t, 1 << 22);
            t.eng.precision = prec ? PRECISION_BF16 : PRECISION_FP32;
            for (int run = 0; run < 3; run++) {
                memcpy(c, c0, (size_t)M * ldc * sizeof *c);
                for (int i = 0; beta == 0.0f && i < M; i++)
                    for (int j = 0; j < N; j++) c[(size_t)i * ldc + j] = NAN; /* garbage beta 0 ignores */
                if (with_bias) tape_gemm_bias(&t, M, N, K, a, lda, w->data, NULL, w, bias, c, ldc);
                else tape_gemm_op(&t, false, tb, M, N, K, 1.0f, a, lda, NULL, w->data, K, NULL, w, beta, c, ldc);
                if (run == 0) memcpy(first, c, (size_t)M * ldc * sizeof *c);
                else cr_expect_eq(memcmp(first, c, (size_t)M * ldc * sizeof *c), 0, "prec %d case %d: run %d other bits", prec, v, run);
                tape_reset(&t);
            }
            double worst = 0;
            long padding = 0;
            for (int i = 0; i < M; i++) {
                for (int j = 0; j < N; j++) {
                    double s = with_bias ? bias[j] : beta * (double)c0[(size_t)i * ldc + j];
                    for (int k = 0; k < K; k++) { /* op(W)[k, j]: W[j, k] when tb, else W[k, j] (square) */
                        float x = a[(size_t)i * lda + k], y = tb ? w->data[(size_t)j * K + k] : w->data[(size_t)k * N + j];
                        s += prec ? (double)round_bf16(x) * round_bf16(y) : (double)x * y;
                    }
                    float got = first[(size_t)i * ldc + j];
                    worst = fmax(worst, isnan(got) ? INFINITY : fabs(got - s));
                }
                for (int j = N; j < ldc; j++) padding += memcmp(&first[(size_t)i * ldc + j], &c0[(size_t)i * ldc + j], sizeof *c) != 0;
            }
            cr_expect_lt(worst, 1e-5 * K, "prec %d case %d: off by %g", prec, v, worst);
            cr_expect_eq(padding, 0, "prec %d case %d: C's padding written", prec, v);
            tape_free(&t);
        }
    gemm_set_threads(restore);
    free(a), free(bias), free(c0), free(c), free(first);
    tensor_free(w);
}

/* op_linear's bias goes into the product's epilogue where the path has one (oneDNN's matmul
 * primitive: packed frozen weights, thin products, and any product of K up to
 * GEMM_BIAS_EPILOGUE_MAX_K; int8: int8_products_check) and into C first elsewhere (sgemm and
 * bf16 GEMM over a longer K, one row, OpenBLAS): on every path the product with the bias is
 * the product without it plus the bias, the path with the bias checked in the stats. */
Test(gemm, linear_bias_on_every_path) {
    bool bf16_ok = gemm_bf16_check("test", &(S2sError){0}) == S2S_OK;
    enum { SHORT = 48, LONG = GEMM_BIAS_EPILOGUE_MAX_K + 16 };
    struct {
        int M, K;
        bool frozen, bf16, bf16_matmul, openblas;
        GemmPath path;
    } cases[] = {
        {40, SHORT, true, false, false, false, gemm_rows_apply() ? GEMM_PATH_ROWS : GEMM_PATH_PACKED},
        {40, SHORT, false, false, false, false, GEMM_PATH_MATMUL},
        {1100, LONG, false, false, false, false, GEMM_PATH_SGEMM},
        {1100, SHORT, false, false, false, false, GEMM_PATH_MATMUL},
        {1, SHORT, false, false, false, false, GEMM_PATH_ROW},
        {40, SHORT, false, false, false, true, GEMM_PATH_OPENBLAS},
        {40, SHORT, true, true, false, false, GEMM_PATH_BF16_PACKED},
        {40, LONG, false, true, false, false, GEMM_PATH_BF16_GEMM},
        {40, SHORT, false, true, false, false, GEMM_PATH_BF16_MATMUL},
        {40, LONG, false, true, true, false, GEMM_PATH_BF16_MATMUL},
        {1100, SHORT, true, false, false, false, gemm_rows_apply() ? GEMM_PATH_ROWS : GEMM_PATH_PACKED},
    };
    int N = 24;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        if (cases[c].bf16 && !bf16_ok) continue;
        int M = cases[c].M, K = cases[c].K;
        Rng rng;
        rng_init(&rng, 5 + c, 0);
        Tensor *x = tensor_new(2, SH(M, K), false), *w = tensor_new(2, SH(N, K), false), *b = tensor_new(1, SH(N), false);
        tu_fill(x, &rng, -1, 1);
        tu_fill(w, &rng, -1, 1);
        tu_fill(b, &rng, 2, 3); /* far from zero: a bias left out shows */
        w->frozen = cases[c].frozen ? 3 : 0;
        Tape t;
        tape_init(&t, 1 << 20);
        /* frozen weights are offered outside training; the other cases as a training step
         * multiplies (a tape without gradients takes gemm_rows where it applies: below) */
        t.grad_enabled = !cases[c].frozen;
        t.eng.precision = (cases[c].bf16) ? PRECISION_BF16 : PRECISION_FP32;
        t.eng.bf16_matmul = cases[c].bf16_matmul;
        t.eng.gemm = (cases[c].openblas) ? GEMM_LIB_OPENBLAS : GEMM_LIB_ONEDNN;
        Tensor *y0 = op_linear(&t, x, w, NULL); /* the path without a bias may be another */
        GemmStats st = {0};
        t.eng.gemm_stats = &st;
        Tensor *y = op_linear(&t, x, w, b);
        cr_assert_eq(st.n, 1, "case %zu: %d shapes", c, st.n);
        cr_expect_eq(st.items[0].path, cases[c].path, "case %zu: path %s, want %s", c, GEMM_PATH_NAMES[st.items[0].path],
                     GEMM_PATH_NAMES[cases[c].path]);
        double worst = 0;
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++)
                worst = fmax(worst, fabs((double)y->data[(size_t)i * N + j] - ((double)y0->data[(size_t)i * N + j] + b->data[j])));
        cr_expect_lt(worst, 1e-5, "case %zu (%s): with the bias off the product plus the bias by %g", c,
                     GEMM_PATH_NAMES[cases[c].path], worst);
        gemm_stats_free(&st);
        tape_free(&t);
        tensor_free(x);
        tensor_free(w);
        tensor_free(b);
    }
}

/* gemm_rows on any CPU: against double products (both layouts of B, alpha, beta, a bias,
 * tails of rows and columns), and every row the same bits whatever the rows of the call. */
Test(gemm, rows_kernel_sums_each_row_alone) {
    const int shapes[][3] = {{1, 1, 1}, {7, 5, 3}, {13, 17, 40}, {200, 33, 512}, {6, 16, 64}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int tb = 0; tb < 2; tb++)
            for (int mode = 0; mode < 3; mode++) { /* plain, alpha and beta, bias */
                int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], ldb = tb ? K + 3 : N + 2, lda = K + 1;
                Rng rng;
                rng_init(&rng, 90 + (uint64_t)s, 0);
                float *A = malloc(sizeof(float) * (size_t)M * lda), *B = malloc(sizeof(float) * (size_t)(tb ? N : K) * ldb);
                float *C = malloc(sizeof(float) * (size_t)M * N), *C0 = malloc(sizeof(float) * (size_t)M * N);
                float *bias = malloc(sizeof(float) * (size_t)N), *P = malloc(sizeof(float) * gemm_rows_packed_floats(N, K));
                for (int i = 0; i < M * lda; i++) A[i] = rng_uniform_range(&rng, -1, 1);
                for (int i = 0; i < (tb ? N : K) * ldb; i++) B[i] = rng_uniform_range(&rng, -1, 1);
                for (int i = 0; i < M * N; i++) C0[i] = C[i] = rng_uniform_range(&rng, -1, 1);
                for (int i = 0; i < N; i++) bias[i] = rng_uniform_range(&rng, 2, 3);
                float alpha = mode == 1 ? 0.5f : 1.0f, beta = mode == 1 ? 2.0f : 0.0f;
                gemm_rows_pack(B, ldb, tb, K, N, P);
                gemm_rows(M, N, K, alpha, A, lda, P, beta, C, N, mode == 2 ? bias : NULL);
                double worst = 0;
                for (int r = 0; r < M; r++)
                    for (int n = 0; n < N; n++) {
                        double want = 0;
                        for (int k = 0; k < K; k++)
                            want += (double)A[(size_t)r * lda + k] * (tb ? B[(size_t)n * ldb + k] : B[(size_t)k * ldb + n]);
                        want = alpha * want + beta * C0[(size_t)r * N + n] + (mode == 2 ? bias[n] : 0.0);
                        worst = fmax(worst, fabs(want - C[(size_t)r * N + n]) / (1.0 + fabs(want)));
                    }
                cr_expect_lt(worst, 1e-5 * sqrt((double)K), "%d x %d x %d tb %d mode %d: off by %g", M, N, K, tb, mode, worst);
                for (int r = 0; r < M; r++) { /* each row alone, beta's C as it was */
                    float row[64 * 8];
                    S2S_ASSERT(N <= 64 * 8);
                    memcpy(row, C0 + (size_t)r * N, sizeof(float) * (size_t)N);
                    gemm_rows(1, N, K, alpha, A + (size_t)r * lda, lda, P, beta, row, N, mode == 2 ? bias : NULL);
                    cr_expect_eq(memcmp(row, C + (size_t)r * N, sizeof(float) * (size_t)N), 0,
                                 "%d x %d x %d tb %d mode %d: row %d alone differs", M, N, K, tb, mode, r);
                }
                free(A), free(B), free(C), free(C0), free(bias), free(P);
            }
}

/* op_linear_xent in chunks equals op_linear then op_cross_entropy: the loss and every
 * gradient, in float32 (37 rows: a short last chunk) and in bf16 (40 rows: every chunk at
 * least 8 rows, so every chunk's products round their operands as the whole one does). With
 * the gradients written in forward (loss_grads_early), the chunked op's own bits. */
Test(gemm, linear_xent_chunks_equal_linear_then_loss) {
    int D = 24, V = 50;
    for (int prec = 0; prec < 2; prec++) {
        if (prec == 1 && gemm_bf16_check("test", &(S2sError){0}) != S2S_OK) break;
        int N = prec ? 40 : 37;
        double tol = prec ? 1e-5 : 1e-6;
        Rng rng;
        rng_init(&rng, 51, 0);
        Tensor *x = tensor_new(2, SH(N, D), true), *w = tensor_new(2, SH(V, D), true), *b = tensor_new(1, SH(V), true);
        tu_fill(x, &rng, -1, 1);
        tu_fill(w, &rng, -1, 1);
        tu_fill(b, &rng, -1, 1);
        int32_t tg[40];
        for (int r = 0; r < N; r++) tg[r] = r % 7 == 3 ? 0 : 1 + (r * 13) % (V - 1); /* some ignored (0) */
        float *ref[4] = {NULL}, *chunked[3] = {NULL};
        float loss[3];
        double flops[3];
        int chunks[] = {0, 8, 8};
        for (int k = 0; k < 3; k++) {
            Tape t;
            tape_init(&t, 1 << 20);
            t.eng.precision = (prec == 1) ? PRECISION_BF16 : PRECISION_FP32;
            t.loss_grads_early = k == 2;
            memset(x->grad, 0, x->size * sizeof(float));
            memset(w->grad, 0, w->size * sizeof(float));
            memset(b->grad, 0, b->size * sizeof(float));
            float eps = prec ? 0.1f : 0.0f; /* the smoothed loss in bf16 */
            Tensor *l = chunks[k] ? op_linear_xent(&t, x, w, b, tg, 0, chunks[k], eps, NULL)
                                  : op_cross_entropy_consume(&t, op_linear(&t, x, w, b), tg, 0, eps, NULL);
            loss[k] = l->data[0];
            tape_backward(&t, l);
            flops[k] = t.flops;
            float *got[3] = {x->grad, w->grad, b->grad};
            size_t n[3] = {x->size, w->size, b->size};
            for (int q = 0; q < 3; q++) {
                if (k == 0) {
                    ref[q] = malloc(n[q] * sizeof(float));
                    memcpy(ref[q], got[q], n[q] * sizeof(float));
                    continue;
                }
                if (k == 2) {
                    cr_expect(memcmp(got[q], chunked[q], n[q] * sizeof(float)) == 0,
                              "%s: gradient %d written in forward differs from backward's", prec ? "bf16" : "fp32", q);
                    continue;
                }
                chunked[q] = malloc(n[q] * sizeof(float));
                memcpy(chunked[q], got[q], n[q] * sizeof(float));
                double worst = 0;
                for (size_t e = 0; e < n[q]; e++) worst = fmax(worst, fabs(got[q][e] - ref[q][e]));
                cr_expect_lt(worst, tol, "%s: gradient %d off by %g", prec ? "bf16" : "fp32", q, worst);
            }
            tape_free(&t);
        }
        cr_expect_lt(fabs((double)loss[0] - loss[1]), tol, "%s: loss %g vs %g", prec ? "bf16" : "fp32", loss[0], loss[1]);
        cr_expect_eq(loss[1], loss[2]);
        cr_expect_eq(flops[1] - flops[2], 2.0 * N * D * V, "the logits computed again: %g vs %g flops", flops[1], flops[2]);
        for (int q = 0; q < 3; q++) {
            free(ref[q]);
            free(chunked[q]);
        }
        tensor_free(x);
        tensor_free(w);
        tensor_free(b);
    }
}

