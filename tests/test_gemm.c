/* test_gemm.c — the GEMM back ends: float32 on oneDNN and on OpenBLAS against double
 * products; bfloat16: rounding, GEMMs and their backward on a bf16 tape against
 * double-precision products of the rounded operands, the recurrence close to float32, and
 * NaN kept; dots summed in the written order. Frozen weights and plans: test_gemm_plans.c;
 * int8 and the argmax: test_gemm_int8.c. */
#include "test_gemm.h"


Test(gemm, rounds_to_nearest_bf16_ties_to_even) {
    struct { uint32_t in; uint16_t out; } cases[] = {
        {0x3f800000u, 0x3f80}, /* 1 exactly */
        {0x3f808000u, 0x3f80}, /* halfway, even below: down */
        {0x3f818000u, 0x3f82}, /* halfway, odd below: up to even */
        {0x3f808001u, 0x3f81}, /* just above halfway: up */
        {0x3f807fffu, 0x3f80}, /* just below halfway: down */
        {0xbf818000u, 0xbf82}, /* sign kept */
        {0x7f800000u, 0x7f80}, /* +Inf */
        {0xff800000u, 0xff80}, /* -Inf */
        {0x7f7fffffu, 0x7f80}, /* FLT_MAX rounds to Inf, as round-to-nearest must */
        {0x00000001u, 0x0000}, /* smallest subnormal: to zero */
        {0x80000000u, 0x8000}, /* -0 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t b;
        float x = from_bits(cases[i].in);
        bf16_from_f32(&x, &b, 1);
        cr_expect_eq(b, cases[i].out, "0x%08x -> 0x%04x, expected 0x%04x", cases[i].in, b, cases[i].out);
    }
    /* NaNs, even one whose rounding would carry into the exponent, stay NaN */
    uint32_t nans[] = {0x7fc00000u, 0x7fffffffu, 0xffffffffu, 0x7f800001u};
    for (size_t i = 0; i < 4; i++) {
        float x = from_bits(nans[i]);
        cr_expect(isnan(round_bf16(x)), "NaN 0x%08x became 0x%08x", nans[i], bits(round_bf16(x)));
    }
    cr_expect_eq(bf16_to_f32(0x3f80), 1.0f);
    cr_expect_eq(bf16_to_f32(0xc040), -3.0f);
}


/* Element (i, j) of op(X) for a tensor stored (rows × cols) or, batched, (nb × rows × cols). */
static double ref_product(const Tensor *a, const Tensor *b, int flags, int bi, int i, int j, int K, bool round) {
    bool ta = flags & MM_TRANS_A, tb = flags & MM_TRANS_B;
    int ac = a->shape[a->ndim - 1], bc = b->shape[b->ndim - 1];
    size_t ao = a->ndim == 3 ? (size_t)bi * a->shape[1] * ac : 0, bo = b->ndim == 3 ? (size_t)bi * b->shape[1] * bc : 0;
    double s = 0;
    for (int k = 0; k < K; k++) {
        float x = a->data[ao + (ta ? (size_t)k * ac + i : (size_t)i * ac + k)];
        float y = b->data[bo + (tb ? (size_t)j * bc + k : (size_t)k * bc + j)];
        s += round ? (double)round_bf16(x) * round_bf16(y) : (double)x * y;
    }
    return s;
}

/* Random operands of op(A) (M × K) and op(B) (K × N), stored transposed when flags say so,
 * batched (nb × …) when nb > 0; A keeps a gradient, B when b_grad. */
static void make_operands(int flags, int nb, int M, int N, int K, uint64_t seed, bool b_grad, Tensor **a, Tensor **b) {
    bool ta = flags & MM_TRANS_A, tb = flags & MM_TRANS_B;
    Rng rng;
    rng_init(&rng, seed, 0);
    *a = nb ? tensor_new(3, ta ? SH(nb, K, M) : SH(nb, M, K), true) : tensor_new(2, ta ? SH(K, M) : SH(M, K), true);
    *b = nb ? tensor_new(3, tb ? SH(nb, N, K) : SH(nb, K, N), b_grad) : tensor_new(2, tb ? SH(N, K) : SH(K, N), b_grad);
    tu_fill(*a, &rng, -1, 1);
    tu_fill(*b, &rng, -1, 1);
}

/* Forward C = op(A) op(B) and backward with a random seed dC, on a bf16 tape: every value
 * equals the double-precision product of the bf16-rounded operands to float32 accumulation
 * accuracy, and is visibly different from the float32 product (the path really is bf16). */
static void check_matmul_path(int flags, int nb, int M, int N, int K, bool prim) {
    bool ta = flags & MM_TRANS_A, tb = flags & MM_TRANS_B;
    Tensor *a, *b;
    make_operands(flags, nb, M, N, K, 7, true, &a, &b);
    Rng rng;
    rng_init(&rng, 8, 0);
    Tape t;
    tape_init(&t, 1 << 16);
    t.eng.precision = PRECISION_BF16;
    t.eng.bf16_matmul = prim;
    t.grad_enabled = true;
    Tensor *c = op_matmul(&t, a, b, flags);
    int nbat = nb ? nb : 1;
    double worst = 0, moved = 0;
    for (int bi = 0; bi < nbat; bi++)
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                float got = c->data[((size_t)bi * M + i) * N + j];
                double want = ref_product(a, b, flags, bi, i, j, K, true);
                worst = fmax(worst, fabs(got - want));
                moved = fmax(moved, fabs(got - ref_product(a, b, flags, bi, i, j, K, false)));
            }
    cr_expect_lt(worst, 1e-5 * K, "bf16 forward off by %g", worst);
    cr_expect_gt(moved, 1e-4, "the product equals float32's: no bf16 rounding happened");
    /* backward: dA = dC op(B)^T (transposed back), dB likewise, from a bf16-rounded seed */
    Tensor *dc = tensor_new(c->ndim, c->shape, false);
    tu_fill(dc, &rng, -1, 1);
    tape_backward_seed(&t, c, dc->data);
    for (int bi = 0; bi < nbat; bi++) {
        for (int i = 0; i < M; i++)
            for (int k = 0; k < K; k++) {
                double s = 0;
                for (int j = 0; j < N; j++) {
                    int bc = b->shape[b->ndim - 1];
                    size_t bo = b->ndim == 3 ? (size_t)bi * b->shape[1] * bc : 0;
                    float y = b->data[bo + (tb ? (size_t)j * bc + k : (size_t)k * bc + j)];
                    s += (double)round_bf16(dc->data[((size_t)bi * M + i) * N + j]) * round_bf16(y);
                }
                int ac = a->shape[a->ndim - 1];
                size_t ao = a->ndim == 3 ? (size_t)bi * a->shape[1] * ac : 0;
                float got = a->grad[ao + (ta ? (size_t)k * ac + i : (size_t)i * ac + k)];
                cr_expect_lt(fabs(got - s), 1e-5 * N, "dA[%d,%d,%d] = %g, expected %g", bi, i, k, got, s);
            }
    }
    tape_free(&t);
    tensor_free(a);
    tensor_free(b);
    tensor_free(dc);
}

/* both bf16 paths: the GEMM call, and the matmul primitives AMX CPUs use (checked here on
 * any CPU with bf16: the primitive picks its avx512_bf16 kernels where there is no AMX) */
static void check_matmul(int flags, int nb, int M, int N, int K) {
    check_matmul_path(flags, nb, M, N, K, false);
    check_matmul_path(flags, nb, M, N, K, true);
}

Test(gemm, bf16_matmul_all_transposes) {
    tu_require_bf16();
    check_matmul(0, 0, 9, 10, 33);
    check_matmul(MM_TRANS_A, 0, 9, 10, 33);
    check_matmul(MM_TRANS_B, 0, 9, 10, 33);
    check_matmul(MM_TRANS_A | MM_TRANS_B, 0, 9, 10, 33);
    check_matmul(MM_TRANS_B, 3, 40, 48, 160); /* batched, past the small products' loops */
}

/* C = op(A) op(B) forward and dA, dB backward for a batch of small products (one attention
 * head's) on a tape of the given precision and thread count; the caller frees. */
static void small_products(int flags, int M, bool bf16, int threads, float **c_out, float **da, float **db, Tensor **ao,
                           Tensor **bo) {
    int nb = 128, N = 17, K = 32; /* N off the vector width: padded columns */
    make_operands(flags, nb, M, N, K, 11, true, ao, bo);
    Tape t;
    tape_init(&t, 1 << 20);
    t.eng.precision = (bf16) ? PRECISION_BF16 : PRECISION_FP32;
    t.grad_enabled = true;
    int restore = omp_get_max_threads();
    gemm_set_threads(threads);
    Tensor *c = op_matmul(&t, *ao, *bo, flags);
    Tensor *dc = tensor_new(c->ndim, c->shape, false);
    Rng rng;
    rng_init(&rng, 12, 0);
    tu_fill(dc, &rng, -1, 1);
    tape_backward_seed(&t, c, dc->data);
    gemm_set_threads(restore);
    *c_out = malloc(c->size * sizeof(float));
    memcpy(*c_out, c->data, c->size * sizeof(float));
    *da = malloc((*ao)->size * sizeof(float));
    memcpy(*da, (*ao)->grad, (*ao)->size * sizeof(float));
    *db = malloc((*bo)->size * sizeof(float));
    memcpy(*db, (*bo)->grad, (*bo)->size * sizeof(float));
    tensor_free(dc);
    tape_free(&t);
}

/* Batched small products (attention heads in training) run as plain loops split over the
 * threads: every transpose equals the double-precision product to float32 accuracy, the
 * gradients are the same bits on 1 and 2 threads, and a bf16 tape computes them in float32
 * (the same bits as a float32 tape). */
Test(gemm, small_batched_products_exact_on_any_thread_count) {
    int all[4] = {0, MM_TRANS_A, MM_TRANS_B, MM_TRANS_A | MM_TRANS_B};
    for (int f = 0; f < 8; f++) { /* rows in blocks of 6: 19 ends with 1 row, 23 with 3 and 2 */
        int M = f < 4 ? 19 : 23, N = 17, K = 32;
        float *c1, *da1, *db1, *c2, *da2, *db2, *c3, *da3, *db3;
        Tensor *a, *b, *a2, *b2, *a3, *b3;
        small_products(all[f % 4], M, false, 1, &c1, &da1, &db1, &a, &b);
        small_products(all[f % 4], M, false, 2, &c2, &da2, &db2, &a2, &b2);
        small_products(all[f % 4], M, true, 2, &c3, &da3, &db3, &a3, &b3);
        double worst = 0;
        for (int bi = 0; bi < 128; bi++)
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++)
                    worst = fmax(worst, fabs(c1[((size_t)bi * M + i) * N + j] - ref_product(a, b, all[f % 4], bi, i, j, K, false)));
        cr_expect_lt(worst, 1e-6 * K, "flags %d: forward off by %g", all[f % 4], worst);
        cr_expect(!memcmp(c1, c2, sizeof(float) * 128 * M * N) && !memcmp(c1, c3, sizeof(float) * 128 * M * N), "flags %d: forward bits", all[f % 4]);
        cr_expect(!memcmp(da1, da2, a->size * sizeof(float)) && !memcmp(db1, db2, b->size * sizeof(float)), "flags %d: 1 and 2 threads", all[f % 4]);
        cr_expect(!memcmp(da1, da3, a->size * sizeof(float)) && !memcmp(db1, db3, b->size * sizeof(float)), "flags %d: bf16 tape", all[f % 4]);
        /* dA = dC op(B)^T: one entry against double precision */
        Rng rng;
        rng_init(&rng, 12, 0);
        Tensor *dc = tensor_new(3, SH(128, M, N), false);
        tu_fill(dc, &rng, -1, 1);
        bool ta = all[f % 4] & MM_TRANS_A, tb = all[f % 4] & MM_TRANS_B;
        double gw = 0;
        for (int bi = 0; bi < 128; bi += 37)
            for (int i = 0; i < M; i++)
                for (int k = 0; k < K; k++) {
                    double s = 0;
                    for (int j = 0; j < N; j++)
                        s += (double)dc->data[((size_t)bi * M + i) * N + j] *
                             b->data[(size_t)bi * N * K + (tb ? (size_t)j * K + k : (size_t)k * N + j)];
                    gw = fmax(gw, fabs(da1[(size_t)bi * M * K + (ta ? (size_t)k * M + i : (size_t)i * K + k)] - s));
                }
        cr_expect_lt(gw, 1e-6 * N, "flags %d: dA off by %g", all[f % 4], gw);
        tensor_free(dc);
        float *bufs[9] = {c1, da1, db1, c2, da2, db2, c3, da3, db3};
        for (int i = 0; i < 9; i++) free(bufs[i]);
        Tensor *ts[6] = {a, b, a2, b2, a3, b3};
        for (int i = 0; i < 6; i++) tensor_free(ts[i]);
    }
}

/* A time-major operand is strided (leading dimension B·H): the conversion must follow it. */
/* The batched small products' write-back: beta 0 over NaN garbage, beta 0.5 onto what C
 * held, widths inside one vector, at its edge and over several blocks of vectors, C's rows
 * wider than N (the padding untouched), every transpose, 1 and 2 threads with the same bits;
 * against double products. */
Test(gemm, small_batched_beta_widths_and_padding) {
    const int widths[] = {5, 16, 17, 40, 70}, nb = 9, M = 13, K = 32, pad = 3;
    int restore = omp_get_max_threads();
    Rng rng;
    rng_init(&rng, 31, 0);
    for (size_t wi = 0; wi < sizeof widths / sizeof *widths; wi++)
        for (int f = 0; f < 8; f++) {
            int N = widths[wi], ldc = N + pad;
            bool ta = f & 1, tb = f & 2;
            float beta = f & 4 ? 0.5f : 0.0f;
            int lda = ta ? M : K, ldb = tb ? K : N;
            size_t sa = (size_t)M * K, sb = (size_t)K * N, sc = (size_t)M * ldc;
            float *A = malloc(nb * sa * sizeof *A), *B = malloc(nb * sb * sizeof *B), *C0 = malloc(nb * sc * sizeof *C0);
            float *C[2] = {malloc(nb * sc * sizeof(float)), malloc(nb * sc * sizeof(float))};
            for (size_t i = 0; i < nb * sa; i++) A[i] = rng_uniform(&rng) * 2 - 1;
            for (size_t i = 0; i < nb * sb; i++) B[i] = rng_uniform(&rng) * 2 - 1;
            for (size_t i = 0; i < nb * sc; i++) C0[i] = beta != 0.0f ? rng_uniform(&rng) * 2 - 1 : NAN;
            for (int th = 1; th <= 2; th++) {
                memcpy(C[th - 1], C0, nb * sc * sizeof(float));
                Tape t;
                tape_init(&t, 1 << 16);
                gemm_set_threads(th);
                bool took = tape_gemm_small(&t, ta, tb, M, N, K, nb, A, lda, sa, B, ldb, sb, beta, C[th - 1], ldc, sc);
                gemm_set_threads(restore);
                tape_free(&t);
                cr_assert(took, "N=%d: the small path declined", N);
            }
            double worst = 0;
            long padding = 0;
            for (int b = 0; b < nb; b++)
                for (int i = 0; i < M; i++) {
                    const float *a = A + b * sa, *bb = B + b * sb;
                    for (int j = 0; j < N; j++) {
                        double s = 0;
                        for (int k = 0; k < K; k++)
                            s += (double)(ta ? a[(size_t)k * lda + i] : a[(size_t)i * lda + k]) *
                                 (tb ? bb[(size_t)j * ldb + k] : bb[(size_t)k * ldb + j]);
                        size_t e = b * sc + (size_t)i * ldc + j;
                        if (beta != 0.0f) s += (double)beta * C0[e];
                        worst = fmax(worst, isnan(C[0][e]) ? INFINITY : fabs(C[0][e] - s));
                    }
                    for (int j = N; j < ldc; j++)
                        padding += memcmp(&C[0][b * sc + (size_t)i * ldc + j], &C0[b * sc + (size_t)i * ldc + j], sizeof(float)) != 0;
                }
            cr_expect_lt(worst, 1e-6 * K, "N=%d ta=%d tb=%d beta=%g: off by %g", N, ta, tb, beta, worst);
            cr_expect_eq(padding, 0, "N=%d ta=%d tb=%d beta=%g: C's padding written", N, ta, tb, beta);
            cr_expect_eq(memcmp(C[0], C[1], nb * sc * sizeof(float)), 0, "N=%d ta=%d tb=%d beta=%g: 1 and 2 threads", N, ta,
                         tb, beta);
            free(A), free(B), free(C0), free(C[0]), free(C[1]);
        }
}

Test(gemm, bf16_time_major_operands_match_float32_closely) {
    tu_require_bf16();
    Rng rng;
    rng_init(&rng, 3, 0);
    Tensor *dec = tensor_new(3, SH(9, 3, 16), false), *enc = tensor_new(3, SH(11, 3, 16), false); /* (T,B,H), (S,B,H) */
    tu_fill(dec, &rng, -1, 1);
    tu_fill(enc, &rng, -1, 1);
    Tape t32, t16;
    tape_init(&t32, 1 << 16);
    tape_init(&t16, 1 << 16);
    t16.eng.precision = PRECISION_BF16;
    int flags = MM_A_TM | MM_B_TM | MM_TRANS_B;
    Tensor *s32 = op_matmul(&t32, dec, enc, flags), *s16 = op_matmul(&t16, dec, enc, flags); /* (B,T,S) */
    double *want = malloc(s32->size * sizeof *want);
    for (size_t i = 0; i < s32->size; i++) want[i] = s32->data[i];
    char why[256];
    cr_expect(tu_close(s16->data, want, s32->size, 2e-2, why, sizeof why), "%s", why);
    free(want);
    tape_free(&t32);
    tape_free(&t16);
    tensor_free(dec);
    tensor_free(enc);
}

/* A GRU direction forward and backward in bf16 stays within bf16 accuracy of float32. */
/* On a bf16 tape a sequence's row passes also write the state (forward) and the d
 * pre-activations (backward) in bf16 for the next recurrent product; one step alone (S = 1)
 * leaves the rounding to the product. So the sequence must give the bits of its steps run one
 * at a time, each from the state the last left: outputs, final states, d xg, d h0 and d c0
 * (dW and db sum in another order), for a GRU and an LSTM, both directions, with rows ending
 * at different steps (padding) and, reversed, a nonzero initial state (the states kept). */
Test(gemm, bf16_sequence_equals_its_steps) {
    tu_require_bf16();
    enum { S = 5, B = 8, H = 16 };
    int lens[B] = {5, 3, 5, 1, 4, 5, 2, 5};
    uint8_t active[S * B];
    for (int s = 0; s < S; s++)
        for (int b = 0; b < B; b++) active[s * B + b] = s < lens[b];
    int32_t last[B];
    for (int b = 0; b < B; b++) last[b] = B + b; /* rows of (2 B, H): a step's final state */
    for (int kind = 0; kind < 2; kind++)
        for (int reverse = 0; reverse < 2; reverse++) {
            bool lstm = kind == 1;
            int G = (lstm ? 4 : 3) * H;
            Rng rng;
            rng_init(&rng, 13 + (uint64_t)(2 * kind + reverse), 0);
            Tensor *xg = tensor_new(2, SH(S * B, G), true), *h0 = tensor_new(2, SH(B, H), true);
            Tensor *c0 = lstm ? tensor_new(2, SH(B, H), true) : NULL;
            Tensor *w = tensor_new(2, SH(G, H), true), *bh = tensor_new(1, SH(G), true);
            tu_fill(xg, &rng, -1, 1);
            tu_fill(h0, &rng, -1, 1);
            if (c0) tu_fill(c0, &rng, -1, 1);
            tu_fill(w, &rng, -0.5f, 0.5f);
            tu_fill(bh, &rng, -0.5f, 0.5f);
            float *seed = malloc((size_t)(S + 1) * B * H * sizeof *seed);
            for (int i = 0; i < (S + 1) * B * H; i++) seed[i] = rng_uniform_range(&rng, -1, 1);
            /* the whole sequence */
            Tape t;
            tape_init(&t, 1 << 20);
            t.eng.precision = PRECISION_BF16;
            t.grad_enabled = true;
            Tensor *cells = NULL;
            Tensor *y = op_rnn_seq(&t, lstm ? CELL_LSTM : CELL_GRU, xg, h0, c0, w, bh, active, reverse, &cells);
            float *yw = malloc(y->size * sizeof *yw), *cw = lstm ? malloc(cells->size * sizeof *cw) : NULL;
            memcpy(yw, y->data, y->size * sizeof *yw);
            if (lstm) memcpy(cw, cells->data, cells->size * sizeof *cw);
            tape_backward_seed(&t, y, seed);
            /* one step at a time, in the order the sequence takes them */
            Tape u;
            tape_init(&u, 1 << 20);
            u.eng.precision = PRECISION_BF16;
            u.grad_enabled = true;
            Tensor *xs[S], *ys[S], *cs[S], *h = tensor_new(2, SH(B, H), true), *c = lstm ? tensor_new(2, SH(B, H), true) : NULL;
            memcpy(h->data, h0->data, h0->size * sizeof(float));
            if (c) memcpy(c->data, c0->data, c0->size * sizeof(float));
            Tensor *hk = h, *ck = c, *loss = NULL;
            for (int k = 0; k < S; k++) {
                int st = reverse ? S - 1 - k : k;
                xs[st] = tensor_new(2, SH(B, G), true);
                memcpy(xs[st]->data, xg->data + (size_t)st * B * G, (size_t)B * G * sizeof(float));
                ys[st] = op_rnn_seq(&u, lstm ? CELL_LSTM : CELL_GRU, xs[st], hk, ck, w, bh, active + st * B, false, &cs[st]);
                Tensor *coef = tape_tensor3(&u, 2, B, H); /* this step's output's seed; the final state's at the end */
                memcpy(coef->data, seed + (size_t)st * B * H, (size_t)B * H * sizeof(float));
                for (int i = 0; i < B * H; i++) coef->data[B * H + i] = k == S - 1 ? seed[(size_t)S * B * H + i] : 0.0f;
                Tensor *part = op_sum(&u, op_mul(&u, ys[st], coef));
                loss = loss ? op_add(&u, loss, part) : part;
                hk = op_gather_rows(&u, tape_reshape2(&u, ys[st], 2 * B, H), last, B);
                if (lstm) ck = op_gather_rows(&u, tape_reshape2(&u, cs[st], 2 * B, H), last, B);
            }
            long off = 0;
            for (int s = 0; s < S; s++) {
                off += memcmp(yw + (size_t)s * B * H, ys[s]->data, (size_t)B * H * sizeof(float)) != 0;
                if (lstm) off += memcmp(cw + (size_t)s * B * H, cs[s]->data, (size_t)B * H * sizeof(float)) != 0;
            }
            off += memcmp(yw + (size_t)S * B * H, hk->data, (size_t)B * H * sizeof(float)) != 0;
            if (lstm) off += memcmp(cw + (size_t)S * B * H, ck->data, (size_t)B * H * sizeof(float)) != 0;
            cr_expect_eq(off, 0, "kind %d reverse %d: %ld forward values differ from the steps'", kind, reverse, off);
            tape_backward(&u, loss);
            long dx = 0;
            for (int s = 0; s < S; s++)
                dx += memcmp(xg->grad + (size_t)s * B * G, xs[s]->grad, (size_t)B * G * sizeof(float)) != 0;
            cr_expect_eq(dx, 0, "kind %d reverse %d: d xg differs from the steps' at %ld steps", kind, reverse, dx);
            cr_expect_eq(memcmp(h0->grad, h->grad, h0->size * sizeof(float)), 0, "kind %d reverse %d: d h0 differs", kind,
                         reverse);
            if (lstm)
                cr_expect_eq(memcmp(c0->grad, c->grad, c0->size * sizeof(float)), 0, "reverse %d: d c0 differs", reverse);
            tape_free(&t);
            tape_free(&u);
            for (int s = 0; s < S; s++) tensor_free(xs[s]);
            tensor_free(h);
            if (c) tensor_free(c);
            free(seed);
            free(yw);
            free(cw);
            tensor_free(xg);
            tensor_free(h0);
            if (c0) tensor_free(c0);
            tensor_free(w);
            tensor_free(bh);
        }
}

Test(gemm, bf16_recurrence_close_to_float32) {
    tu_require_bf16();
    int S = 5, B = 8, H = 8, G = 3 * H; /* every product at least 8 wide: all take the bf16 path */
    Rng rng;
    rng_init(&rng, 11, 0);
    Tensor *xg = tensor_new(2, SH(S * B, G), true), *h0 = tensor_new(2, SH(B, H), true);
    Tensor *w = tensor_new(2, SH(G, H), true), *bh = tensor_new(1, SH(G), true);
    tu_fill(xg, &rng, -1, 1);
    tu_fill(h0, &rng, -1, 1);
    tu_fill(w, &rng, -0.5f, 0.5f);
    tu_fill(bh, &rng, -0.5f, 0.5f);
    float *y32 = malloc((size_t)(S + 1) * B * H * sizeof *y32), *dw32 = malloc((size_t)G * H * sizeof *dw32);
    for (int pass = 0; pass < 3; pass++) { /* float32, bf16, bf16 recomputing W_hn h in backward */
        Tape t;
        tape_init(&t, 1 << 16);
        t.eng.precision = (pass >= 1) ? PRECISION_BF16 : PRECISION_FP32;
        t.recompute = pass == 2;
        t.grad_enabled = true;
        memset(w->grad, 0, w->size * sizeof(float));
        Tensor *y = op_rnn_seq(&t, CELL_GRU, xg, h0, NULL, w, bh, NULL, false, NULL);
        float *seed = malloc(y->size * sizeof *seed);
        for (size_t i = 0; i < y->size; i++) seed[i] = (float)((int)(i % 7) - 3) * 0.25f; /* int: size_t would wrap to 1.8e19 */
        tape_backward_seed(&t, y, seed);
        free(seed);
        if (pass == 0) {
            memcpy(y32, y->data, y->size * sizeof(float));
            memcpy(dw32, w->grad, w->size * sizeof(float));
        } else {
            double worst_y = 0, worst_g = 0, scale = 0;
            for (size_t i = 0; i < y->size; i++) worst_y = fmax(worst_y, fabs(y->data[i] - y32[i]));
            for (size_t i = 0; i < w->size; i++) {
                worst_g = fmax(worst_g, fabs(w->grad[i] - dw32[i]));
                scale = fmax(scale, fabs(dw32[i]));
            }
            cr_expect_lt(worst_y, 2e-2, "bf16 GRU outputs differ from float32 by %g", worst_y);
            cr_expect_gt(worst_y, 0.0, "bf16 GRU equals float32 exactly: no bf16 rounding happened");
            cr_expect_lt(worst_g, 3e-2 * scale, "bf16 dW_hh differs by %g (scale %g, pass %d)", worst_g, scale, pass);
        }
        tape_free(&t);
    }
    free(y32);
    free(dw32);
    tensor_free(xg);
    tensor_free(h0);
    tensor_free(w);
    tensor_free(bh);
}

/* A NaN in an operand reaches the product, so the trainer's NaN check still fires. */
Test(gemm, bf16_keeps_nan) {
    tu_require_bf16();
    Tensor *a = tensor_new(2, SH(8, 3), false), *b = tensor_new(2, SH(3, 8), false);
    for (size_t i = 0; i < 24; i++) a->data[i] = b->data[i] = 1.0f;
    a->data[4] = NAN; /* row 1 */
    Tape t;
    tape_init(&t, 1 << 12);
    t.eng.precision = PRECISION_BF16;
    Tensor *c = op_matmul(&t, a, b, 0);
    cr_expect(!isnan(c->data[0]) && !isnan(c->data[7]));
    cr_expect(isnan(c->data[8]) && isnan(c->data[15]), "row with a NaN: %g %g", c->data[8], c->data[15]);
    tape_free(&t);
    tensor_free(a);
    tensor_free(b);
}

/* float32 on either library (oneDNN, the default, or OpenBLAS): forward and dA of every
 * transpose and a batched product within float32 accumulation error of the double product.
 * Returns how many forward values the two libraries give with different bits. */
static int check_matmul_f32(int flags, int nb, int M, int N, int K) {
    bool ta = flags & MM_TRANS_A, tb = flags & MM_TRANS_B;
    Tensor *a, *b;
    make_operands(flags, nb, M, N, K, 11, false, &a, &b);
    int nbat = nb ? nb : 1, differ = 0;
    float *first = NULL;
    for (int lib = 0; lib < 2; lib++) {
        Tape t;
        tape_init(&t, 1 << 16);
        t.eng.gemm = (lib == 1) ? GEMM_LIB_OPENBLAS : GEMM_LIB_ONEDNN;
        t.grad_enabled = true;
        memset(a->grad, 0, a->size * sizeof(float));
        Tensor *c = op_matmul(&t, a, b, flags);
        double worst = 0;
        for (int bi = 0; bi < nbat; bi++)
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++)
                    worst = fmax(worst, fabs(c->data[((size_t)bi * M + i) * N + j] - ref_product(a, b, flags, bi, i, j, K, false)));
        cr_expect_lt(worst, 1e-6 * K, "%s: float32 forward off by %g", lib ? "openblas" : "onednn", worst);
        if (!first) {
            first = malloc(c->size * sizeof *first);
            memcpy(first, c->data, c->size * sizeof *first);
        } else {
            for (size_t e = 0; e < c->size; e++) differ += bits(first[e]) != bits(c->data[e]);
        }
        /* backward with dC = 1: dA[i, k] = sum_j op(B)[k, j] */
        float *ones = malloc(c->size * sizeof *ones);
        for (size_t e = 0; e < c->size; e++) ones[e] = 1.0f;
        tape_backward_seed(&t, c, ones);
        free(ones);
        int ac = a->shape[a->ndim - 1], bc = b->shape[b->ndim - 1];
        for (int bi = 0; bi < nbat; bi++)
            for (int i = 0; i < M; i++)
                for (int k = 0; k < K; k++) {
                    size_t bo = b->ndim == 3 ? (size_t)bi * b->shape[1] * bc : 0, ao = a->ndim == 3 ? (size_t)bi * a->shape[1] * ac : 0;
                    double s = 0;
                    for (int j = 0; j < N; j++) s += b->data[bo + (tb ? (size_t)j * bc + k : (size_t)k * bc + j)];
                    float got = a->grad[ao + (ta ? (size_t)k * ac + i : (size_t)i * ac + k)];
                    cr_assert_lt(fabs(got - s), 1e-6 * N, "%s: dA[%d,%d,%d] = %g, expected %g", lib ? "openblas" : "onednn",
                                 bi, i, k, got, s);
                }
        tape_free(&t);
    }
    free(first);
    tensor_free(a);
    tensor_free(b);
    return differ;
}

Test(gemm, float32_both_libraries_all_transposes) {
    int differ = 0;
    differ += check_matmul_f32(0, 0, 33, 40, 300);
    differ += check_matmul_f32(MM_TRANS_A, 0, 33, 40, 300);
    differ += check_matmul_f32(MM_TRANS_B, 0, 33, 40, 300);
    differ += check_matmul_f32(MM_TRANS_A | MM_TRANS_B, 0, 33, 40, 300);
    differ += check_matmul_f32(MM_TRANS_B, 3, 17, 24, 200);
    /* one-row products (gemm_row), plain and batched */
    check_matmul_f32(0, 0, 1, 40, 300);
    check_matmul_f32(MM_TRANS_A, 0, 1, 40, 300);
    check_matmul_f32(MM_TRANS_B, 5, 1, 24, 200);
    check_matmul_f32(0, 5, 1, 300, 24);
    /* they sum in different orders: identical bits everywhere would mean one library ran twice */
    cr_expect_gt(differ, 0, "oneDNN and OpenBLAS gave bit-identical products: the engine's gemm library is not obeyed");
}

/* The dot every exact logit and one-row product is defined by, written out: 16 partial sums
 * over k in order, the tail in order, then the 16 added in order, all in float. */
static float dot_written_out(int K, const float *a, const float *b) {
    float part[16] = {0}, sum = 0.0f;
    int k = 0;
    for (; k + 16 <= K; k += 16)
        for (int q = 0; q < 16; q++) part[q] = part[q] + a[k + q] * b[k + q];
    for (; k < K; k++) sum = sum + a[k] * b[k];
    for (int q = 0; q < 16; q++) sum = sum + part[q];
    return sum;
}

/* gemm_dots and gemm_dots_pairs (eight or four dots at a time) against the written-out dot,
 * bit for bit: K around the 16-wide partial sums (tails, none, fewer than 16), n around the
 * groups of eight and four, rows out
 * of order and repeated, values of mixed magnitude so that another order would round
 * differently, rows from about 1 down to 1e-30; then gemm_row's contiguous one-row products (through gemm_dots) against its
 * strided ones (a transposed A: its own loop) on the same values. */
Test(gemm, dots_sum_in_the_written_order) {
    int Ks[] = {1, 15, 16, 17, 48, 300, 1537};
    Rng rng;
    rng_init(&rng, 77, 0);
    for (int ki = 0; ki < 7; ki++) {
        int K = Ks[ki], R = 11;
        float *a = malloc((size_t)K * sizeof *a), *w = malloc((size_t)R * K * sizeof *w);
        float *at = malloc((size_t)K * 3 * sizeof *at); /* a as column 1 of a K x 3 matrix */
        for (int k = 0; k < K; k++) a[k] = at[(size_t)k * 3 + 1] = rng_uniform_range(&rng, -1, 1) * (k % 5 ? 1.0f : 3e3f);
        for (int i = 0; i < R * K; i++) /* row r about 10^-3r: a dot's size is no excuse for a stray addend */
            w[i] = rng_uniform_range(&rng, -1, 1) * (i % 7 ? 1.0f : 1e-3f) * powf(10.0f, -3.0f * (float)(i / K));
        for (int n = 1; n <= 19; n++) {
            const float *rows[19];
            float got[19];
            for (int i = 0; i < n; i++) rows[i] = w + (size_t)((7 * i + 3) % R) * K; /* out of order; R < 19 repeats */
            gemm_dots(K, a, rows, n, got);
            for (int i = 0; i < n; i++) {
                float want = dot_written_out(K, a, rows[i]);
                cr_expect(memcmp(&got[i], &want, sizeof want) == 0, "K=%d n=%d dot %d: %.9g, written out %.9g", K, n, i,
                          got[i], want);
            }
        }
        /* gemm_dots_pairs: row i of w against row (i + 1) mod R, n rows of each */
        float *pa = malloc((size_t)R * K * sizeof *pa), pgot[11];
        for (int i = 0; i < R * K; i++) pa[i] = w[((size_t)i + (size_t)K) % ((size_t)R * K)] * (i % 3 ? 1e3f : -1.0f);
        for (int n = 1; n <= R; n++) {
            gemm_dots_pairs(K, pa, w, n, pgot);
            for (int i = 0; i < n; i++) {
                float want = dot_written_out(K, pa + (size_t)i * K, w + (size_t)i * K);
                cr_expect(memcmp(&pgot[i], &want, sizeof want) == 0, "K=%d n=%d pair %d: %.9g, written out %.9g", K, n,
                          i, pgot[i], want);
            }
        }
        free(pa);
        float c1[11], c2[11];
        gemm_row(false, true, R, K, 1.0f, a, K, w, K, 0.0f, c1);
        gemm_row(true, true, R, K, 1.0f, at + 1, 3, w, K, 0.0f, c2);
        cr_expect(memcmp(c1, c2, sizeof c1) == 0, "K=%d: gemm_row's contiguous and strided one-row products differ", K);
        free(a);
        free(w);
        free(at);
    }
}
