/* test_gemm.c — the GEMM back ends: float32 on oneDNN and on OpenBLAS against double
 * products; bfloat16: rounding, GEMMs and their backward on a bf16 tape against
 * double-precision products of the rounded operands, the recurrence close to float32, and
 * NaN kept. */
#include "test_util.h"
#include "s2s/fastmath.h"
#include "s2s/bf16.h"
#include "s2s/gemm.h"
#include "../src/core/gemm_internal.h" /* gemm_tape_op: a product against a frozen weight */

#include <criterion/criterion.h>
#include <math.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdlib.h>
#include <string.h>

extern int omp_get_max_threads(void);

#define SH(...) ((int[]){__VA_ARGS__})

static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static float round_bf16(float x) {
    uint16_t b;
    bf16_from_f32(&x, &b, 1);
    return bf16_to_f32(b);
}

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

/* C = A op(W) (A: M x K, W: K x K square) through the GEMM entry with W offered as a frozen
 * weight, against double products (of bf16-rounded operands on a bf16 tape); the worst error
 * scaled by K. */
static double frozen_error(Tape *t, bool tb, const Tensor *a, const Tensor *w, float *c) {
    int M = a->shape[0], K = a->shape[1];
    bool r = tape_bf16(t) && M >= 8; /* thinner products stay float32 (GEMM_BF16_MIN_SIDE) */
    tape_reset(t);
    gemm_tape_op(t, false, tb, M, K, K, 1.0f, a->data, K, NULL, w->data, K, NULL, w, 0.0f, c, K);
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

/* The int8 quantisation the int8 tape promises (gemm.h), written out: x / scale rounded to
 * nearest even, clamped to ±top, scale = max |x| / top of the row (A) or weight row (W). */
static void quantise_rows(const float *x, int rows, int cols, float top, float *q, float *scale) {
    for (int r = 0; r < rows; r++) {
        float mx = 0;
        for (int c = 0; c < cols; c++) mx = fmaxf(mx, fabsf(x[(size_t)r * cols + c]));
        scale[r] = mx > 0 ? mx / top : 1.0f;
        for (int c = 0; c < cols; c++) {
            float v = nearbyintf(x[(size_t)r * cols + c] * (1.0f / scale[r]));
            q[(size_t)r * cols + c] = fminf(fmaxf(v, -top), top);
        }
    }
}

/* On an int8 tape a frozen weight's products are int8 (activations per row, weights per
 * output channel, exact integer sums): equal to the written-out quantisation to float32
 * rounding, visibly different from float32, bias added; fewer rows do not change a row's
 * bits; unfrozen weights and the backward direction stay float32. */
static void int8_products_check(void) {
    int M = 40, K = 48, N = 24;
    Rng rng;
    rng_init(&rng, 41, 0);
    Tensor *x = tensor_new(2, SH(M, K), false), *w = tensor_new(2, SH(N, K), false), *b = tensor_new(1, SH(N), false);
    tu_fill(x, &rng, -1, 1);
    tu_fill(w, &rng, -0.3f, 0.3f);
    tu_fill(b, &rng, -1, 1);
    x->data[5] = 7.5f; /* one large value: its row's scale differs from the others */
    float *qx = malloc(x->size * sizeof *qx), *sx = malloc(M * sizeof *sx), *qw = malloc(w->size * sizeof *qw),
          *sw = malloc(N * sizeof *sw);
    quantise_rows(x->data, M, K, (float)gemm_int8_act_max(), qx, sx);
    quantise_rows(w->data, N, K, (float)gemm_int8_weight_max(), qw, sw);
    Tape t;
    tape_init(&t, 1 << 20);
    t.eng.precision = PRECISION_INT8;
    t.grad_enabled = false;
    w->frozen = 7;
    Tensor *y = op_linear(&t, x, w, b);
    double worst = 0, moved = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double qs = 0, fs = 0;
            for (int k = 0; k < K; k++) {
                qs += (double)qx[(size_t)i * K + k] * qw[(size_t)j * K + k];
                fs += (double)x->data[(size_t)i * K + k] * w->data[(size_t)j * K + k];
            }
            double want = (double)sx[i] * sw[j] * qs + b->data[j], got = y->data[(size_t)i * N + j];
            worst = fmax(worst, fabs(got - want) / (fabs(want) + 1));
            moved = fmax(moved, fabs(got - (fs + b->data[j])));
        }
    cr_expect_lt(worst, 1e-6, "int8 product off the written-out quantisation by %g (relative)", worst);
    cr_expect_gt(moved, 1e-4, "the product equals float32's: no int8 happened");
    /* the row holding 7.5 moves most: its quantisation step is 7.5 / act_max */
    cr_expect_lt(moved, 0.1 * 127 / gemm_int8_act_max(), "int8 product far from float32's: %g", moved);
    /* five rows (under 8): int8 as well, each row's bits those it has among more rows (the
     * rows do not pick the path: a batch decodes as its sentences alone); a weight not
     * frozen: float32, exactly the float32 tape's bits */
    Tape t32;
    tape_init(&t32, 1 << 20);
    t32.grad_enabled = false;
    Tensor *x5 = tensor_new(2, SH(5, K), false);
    memcpy(x5->data, x->data, x5->size * sizeof(float));
    Tensor *y5 = op_linear(&t, x5, w, b);
    cr_expect_eq(memcmp(y5->data, y->data, y5->size * sizeof(float)), 0, "a 5-row product differs from the same rows among more");
    w->frozen = 0;
    Tensor *yu = op_linear(&t, x, w, b), *yf = op_linear(&t32, x, w, b);
    cr_expect_eq(memcmp(yu->data, yf->data, yu->size * sizeof(float)), 0, "an unfrozen weight went int8");
    tape_free(&t);
    tape_free(&t32);
    free(qx);
    free(sx);
    free(qw);
    free(sw);
    tensor_free(x);
    tensor_free(x5);
    tensor_free(w);
    tensor_free(b);
}

Test(gemm, int8_products_against_frozen_weights) { int8_products_check(); }

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
            gemm_tape(&t, false, true, M, N, K, alphas[ai], A, lda, B, ldb, betas[bi], C, ldc);
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
    gemm_tape(&t, false, true, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, first, ldc);
    for (int m = 0; m < 600; m++) { /* more shapes (here: C strides) than the cache holds */
        float c[2 * 608];
        gemm_tape(&t, false, true, 2, 8, 8, 1.0f, A, lda, B, ldb, 0.0f, c, 8 + m);
        double s = 0;
        for (int k = 0; k < 8; k++) s += (double)A[lda + k] * B[7 * ldb + k];
        cr_assert_lt(fabs(c[8 + m + 7] - s), 1e-5, "shape %d: C[1,7] = %g, expected %g", m, c[8 + m + 7], s);
    }
    memset(C, 0, (size_t)M * ldc * sizeof *C);
    gemm_tape(&t, false, true, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc);
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
    gemm_tape(&t, false, true, 40, 20, 30, 1.0f, a, 30, b, 30, 0.0f, c, 20); /* transposed B, thin: matmul */
    gemm_tape(&t, false, true, 40, 20, 30, 1.0f, a, 30, b, 30, 0.0f, c, 20);
    gemm_tape(&t, true, false, 40, 20, 30, 1.0f, a, 40, b, 20, 0.0f, c, 20); /* sgemm */
    gemm_tape(&t, false, false, 1, 20, 30, 1.0f, a, 30, b, 20, 0.0f, c, 20); /* one row */
    cr_assert_eq(st.n, 3);
    cr_expect_eq(st.items[0].path, GEMM_PATH_MATMUL);
    cr_expect_eq(st.items[0].calls, 2);
    cr_expect(st.items[0].tb && !st.items[0].ta && st.items[0].M == 40 && st.items[0].N == 20 && st.items[0].K == 30);
    cr_expect_eq(st.items[1].path, GEMM_PATH_SGEMM);
    cr_expect_eq(st.items[2].path, GEMM_PATH_ROW);
    for (int i = 0; i < 3; i++) cr_expect_gt(st.items[i].seconds, 0.0);
    cr_expect_gt(gemm_primitive_rate(&t, &st.items[1], false), 0.0);
    gemm_stats_free(&st);
    tape_free(&t);
}

/* op_linear's bias goes into the product's epilogue where the path has one (oneDNN's matmul
 * primitive: packed frozen weights, thin products; int8: int8_products_check) and into C
 * first elsewhere (sgemm, one row, OpenBLAS, bf16 GEMM): on every path the product with the
 * bias is the product without it plus the bias, the path checked in the stats. */
Test(gemm, linear_bias_on_every_path) {
    bool bf16_ok = gemm_bf16_check("test", &(S2sError){0}) == S2S_OK;
    struct {
        int M;
        bool frozen, bf16, bf16_matmul, openblas;
        GemmPath path;
    } cases[] = {
        {40, true, false, false, false, gemm_rows_apply() ? GEMM_PATH_ROWS : GEMM_PATH_PACKED},
        {40, false, false, false, false, GEMM_PATH_MATMUL},
        {1100, false, false, false, false, GEMM_PATH_SGEMM},    {1, false, false, false, false, GEMM_PATH_ROW},
        {40, false, false, false, true, GEMM_PATH_OPENBLAS},    {40, true, true, false, false, GEMM_PATH_BF16_PACKED},
        {40, false, true, false, false, GEMM_PATH_BF16_GEMM},   {40, false, true, true, false, GEMM_PATH_BF16_MATMUL},
        {1100, true, false, false, false, gemm_rows_apply() ? GEMM_PATH_ROWS : GEMM_PATH_PACKED},
    };
    int K = 48, N = 24;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        if (cases[c].bf16 && !bf16_ok) continue;
        int M = cases[c].M;
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
        GemmStats st = {0};
        t.eng.gemm_stats = &st;
        Tensor *y = op_linear(&t, x, w, b), *y0 = op_linear(&t, x, w, NULL);
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

/* The pick op_linear_argmax promises, written out: gemm_row's dot plus the bias for every
 * allowed column, one scan keeping a later column only when strictly higher. */
static int32_t scan_pick(const float *x, const Tensor *w, const Tensor *b, const uint8_t *allowed) {
    int V = w->shape[0], D = w->shape[1];
    int32_t best = -1;
    float mx = 0;
    for (int v = 0; v < V; v++) {
        if (allowed && !allowed[v]) continue;
        float z;
        gemm_row(false, true, 1, D, 1.0f, x, D, w->data + (size_t)v * D, D, 0.0f, &z);
        if (b) z += b->data[v];
        if (best < 0 || z > mx) {
            mx = z;
            best = v;
        }
    }
    return best;
}

/* Greedy's pick through each screen (float32, bf16 where this CPU runs it, int8), frozen
 * and not, against the written-out scan, on rows made hard: columns tied exactly (copies of one
 * weight row, at the top), columns a rounding apart (a copy plus 1e-6, beyond a bf16
 * screen's reach), a cluster of columns within bf16's rounding of each other, the top
 * column not allowed, Inf and NaN in x, a weight overflowing,
 * no bias, and vocabulary sizes around the 16-wide lanes and 64-wide blocks. */
static void argmax_scan_check(void) {
    bool bf16_ok = gemm_bf16_check("test", &(S2sError){0}) == S2S_OK;
    int sizes[][2] = {{5, 3}, {19, 64}, {33, 200}, {64, 32}, {129, 40}, {300, 96}, {1200, 48}};
    for (int si = 0; si < 7; si++) {
        int V = sizes[si][0], D = sizes[si][1], N = 48;
        Rng rng;
        rng_init(&rng, 500 + (uint64_t)si, 0);
        Tensor *w = tensor_new(2, SH(V, D), false), *b = tensor_new(1, SH(V), false), *x = tensor_new(2, SH(N, D), false);
        tu_fill(w, &rng, -0.2f, 0.2f);
        tu_fill(b, &rng, -0.5f, 0.5f);
        tu_fill(x, &rng, -1, 1);
        int top = V > 4 ? 4 : 1, twin = V - 1, near = V > 6 ? V / 2 : 2;
        /* column `twin` copies `top`; `near` is `top` a rounding apart */
        memcpy(w->data + (size_t)twin * D, w->data + (size_t)top * D, (size_t)D * sizeof(float));
        memcpy(w->data + (size_t)near * D, w->data + (size_t)top * D, (size_t)D * sizeof(float));
        w->data[(size_t)near * D] *= 1.000001f;
        b->data[twin] = b->data[near] = b->data[top] = 3.0f;
        /* a cluster around `top` closer than bf16's rounding: the screen's order is not the
         * exact one, and only its bounds keep the winner among the candidates */
        for (int v = 5; v < V && v < 45; v += 2) {
            if (v == twin || v == near) continue;
            for (int k = 0; k < D; k++)
                w->data[(size_t)v * D + k] = w->data[(size_t)top * D + k] * (1.0f + 0x1p-8f * rng_uniform_range(&rng, -1, 1));
            b->data[v] = 3.0f;
        }
        uint8_t *allowed = malloc((size_t)V);
        for (int v = 0; v < V; v++) allowed[v] = v != 0 && v != 2 % V;
        for (int r = 0; r < N; r++) {
            float *row = x->data + (size_t)r * D;
            switch (r % 8) {
            case 1: row[r % D] = NAN; break;
            case 2: row[0] = INFINITY; break;
            case 3: for (int k = 0; k < D; k++) row[k] = 0.0f; break; /* every logit its bias */
            case 4: for (int k = 0; k < D; k++) row[k] *= 1e-30f; break;
            default: break;
            }
        }
        for (int screen = TAPE_SCREEN_F32; screen <= TAPE_SCREEN_INT8; screen++)
            for (int frozen = 0; frozen < 2; frozen++)
                for (int variant = 0; variant < 3; variant++) { /* bias and mask, no bias, no mask */
                    const Tensor *bb = variant == 1 ? NULL : b;
                    const uint8_t *al = variant == 2 ? NULL : allowed;
                    if (screen == TAPE_SCREEN_BF16 && !bf16_ok) continue;
                    Tape t;
                    tape_init(&t, 1 << 20);
                    t.screen = (TapeScreen)screen;
                    t.screen_check = true;
                    w->frozen = frozen ? 7 : 0;
                    int32_t got[48];
                    op_linear_argmax(&t, x, w, bb, al, got);
                    for (int r = 0; r < N; r++) {
                        int32_t want = scan_pick(x->data + (size_t)r * D, w, bb, al);
                        cr_expect_eq(got[r], want, "V=%d D=%d screen %d frozen %d variant %d row %d: picked %d, the scan %d",
                                     V, D, screen, frozen, variant, r, got[r], want);
                    }
                    tape_free(&t);
                }
        /* a weight row too large for its bounds: Inf logits, decided by the exact scan */
        for (int k = 0; k < D; k++) w->data[(size_t)(V / 3) * D + k] = 3e38f;
        for (int screen = TAPE_SCREEN_F32; screen <= TAPE_SCREEN_INT8; screen++) {
            if (screen == TAPE_SCREEN_BF16 && !bf16_ok) continue;
            Tape t;
            tape_init(&t, 1 << 20);
            t.screen = (TapeScreen)screen;
            w->frozen = 8;
            int32_t got[48];
            op_linear_argmax(&t, x, w, b, NULL, got);
            for (int r = 0; r < N; r++)
                cr_expect_eq(got[r], scan_pick(x->data + (size_t)r * D, w, b, NULL), "V=%d overflow, screen %d row %d", V,
                             screen, r);
            tape_free(&t);
        }
        free(allowed);
        tensor_free(w);
        tensor_free(b);
        tensor_free(x);
    }
}

Test(gemm, linear_argmax_matches_exact_scan) { argmax_scan_check(); }

/* Without AVX-512 VNNI, oneDNN's int8 kernels add pairs of u8 × s8 products in saturating
 * int16: the weights then take 7 bits, and the products and int8 picks above stay exact (on
 * gemm_q8 in builds with AVX2, the activations in 7 bits too). Limited to AVX2 kernels here
 * (this test's process has made none yet), on any x86 CPU. */
Test(gemm, int8_exact_on_kernels_without_vnni) {
    cr_assert_eq(dnnl_set_max_cpu_isa(dnnl_cpu_isa_avx2), dnnl_success, "oneDNN refused to be limited to AVX2");
    cr_assert_eq(gemm_int8_weight_max(), 63);
    cr_assert_eq(gemm_int8_act_max(), gemm_q8_available() ? 63 : 127);
    int8_products_check();
    argmax_scan_check();
}

/* gemm_q8 (AVX2 builds) against int64 sums: shapes around its 4-row kernels, 16-column
 * blocks and 8-byte steps, one split over the threads (130 × 200 × 512), a C wider than N
 * (the gap untouched); then the extremes its int16 pair sums must hold, every product
 * 126 · ±63, over K = 65,536 (the largest K it takes). */
Test(gemm, q8_products_exact) {
    if (!gemm_q8_available()) cr_skip_test("a build without AVX2 has no gemm_q8");
    int shapes[][3] = {{1, 1, 1}, {3, 17, 5}, {4, 16, 8}, {7, 33, 13}, {9, 31, 1537}, {130, 200, 512}, {2, 17, 65536}};
    Rng rng;
    rng_init(&rng, 31, 0);
    for (int si = 0; si < 7; si++) {
        int M = shapes[si][0], N = shapes[si][1], K = shapes[si][2], lda = gemm_q8_lda(K), ldc = N + 3;
        bool extreme = K == 65536;
        uint8_t *a = calloc((size_t)M * lda, 1);
        int8_t *w = malloc((size_t)N * K), *packed = malloc(gemm_q8_packed_bytes(N, K));
        int32_t *c = malloc((size_t)M * ldc * sizeof *c);
        for (int m = 0; m < M; m++)
            for (int k = 0; k < K; k++)
                a[(size_t)m * lda + k] = extreme ? GEMM_Q8_A_MAX : (uint8_t)rng_below(&rng, GEMM_Q8_A_MAX + 1);
        for (int n = 0; n < N; n++)
            for (int k = 0; k < K; k++)
                w[(size_t)n * K + k] = extreme ? (int8_t)(n % 2 ? GEMM_Q8_W_MAX : -GEMM_Q8_W_MAX)
                                               : (int8_t)((int)rng_below(&rng, 2 * GEMM_Q8_W_MAX + 1) - GEMM_Q8_W_MAX);
        for (size_t i = 0; i < (size_t)M * ldc; i++) c[i] = -7;
        gemm_q8_pack(w, N, K, packed);
        gemm_q8(a, M, K, packed, N, c, ldc);
        long wrong = 0, gap = 0;
        for (int m = 0; m < M; m++) {
            for (int n = 0; n < N; n++) {
                int64_t want = 0;
                for (int k = 0; k < K; k++) want += (int64_t)a[(size_t)m * lda + k] * w[(size_t)n * K + k];
                wrong += c[(size_t)m * ldc + n] != want;
            }
            for (int n = N; n < ldc; n++) gap += c[(size_t)m * ldc + n] != -7;
        }
        cr_expect_eq(wrong, 0, "%d × %d × %d: %ld of %d sums wrong", M, N, K, wrong, M * N);
        cr_expect_eq(gap, 0, "%d × %d × %d: %ld values written past N", M, N, K, gap);
        if (extreme) cr_expect_eq(c[1], (int32_t)K * GEMM_Q8_A_MAX * GEMM_Q8_W_MAX, "the largest sum");
        free(a);
        free(w);
        free(packed);
        free(c);
    }
}

static long path_calls(const GemmStats *st, GemmPath path) {
    long n = 0;
    for (int i = 0; i < st->n; i++) n += st->items[i].path == path ? st->items[i].calls : 0;
    return n;
}

/* The int8 screen runs coarse (gemm_q8) on kernels without VNNI until a call leaves too many
 * exact logits, then fine (oneDNN's 8-bit A) for the next calls; the picks are the scan's
 * either way. Crowded logits (every weight row within 0.1 % of one row) switch it after one
 * call; one column far ahead (its bias +10) keeps it coarse. oneDNN limited to AVX2 here, as
 * above, so the rule is tested on any x86 CPU. */
Test(gemm, int8_screen_goes_fine_where_coarse_leaves_too_much) {
    if (!gemm_q8_available()) cr_skip_test("a build without AVX2 has no gemm_q8");
    cr_assert_eq(dnnl_set_max_cpu_isa(dnnl_cpu_isa_avx2), dnnl_success, "oneDNN refused to be limited to AVX2");
    int V = 600, D = 64, N = 32;
    Rng rng;
    rng_init(&rng, 41, 0);
    Tensor *w = tensor_new(2, SH(V, D), false), *b = tensor_new(1, SH(V), false), *x = tensor_new(2, SH(N, D), false);
    tu_fill(x, &rng, -1, 1);
    for (int crowded = 1; crowded >= 0; crowded--) {
        tu_fill(w, &rng, -0.2f, 0.2f);
        tu_fill(b, &rng, -0.01f, 0.01f);
        if (crowded)
            for (int v = 1; v < V; v++)
                for (int k = 0; k < D; k++)
                    w->data[(size_t)v * D + k] = w->data[k] * (1.0f + 1e-3f * rng_uniform_range(&rng, -1, 1));
        else
            b->data[V / 2] = 10.0f;
        w->frozen = b->frozen = 5 + (uint64_t)crowded;
        Tape t;
        tape_init(&t, 1 << 20);
        t.screen = TAPE_SCREEN_INT8;
        GemmStats st = {0};
        t.eng.gemm_stats = &st;
        for (int call = 0; call < 2; call++) {
            int32_t got[32];
            op_linear_argmax(&t, x, w, b, NULL, got);
            int wrong = 0;
            for (int r = 0; r < N; r++) wrong += got[r] != scan_pick(x->data + (size_t)r * D, w, b, NULL);
            cr_expect_eq(wrong, 0, "crowded %d call %d: %d rows picked another column than the scan", crowded, call,
                         wrong);
            bool coarse = call == 0 || !crowded;
            cr_expect_eq(path_calls(&st, GEMM_PATH_Q8), call + 1 - (coarse ? 0 : 1),
                         "crowded %d call %d: %ld coarse screens", crowded, call, path_calls(&st, GEMM_PATH_Q8));
            cr_expect_eq(path_calls(&st, GEMM_PATH_INT8), coarse ? 0 : 1, "crowded %d call %d: %ld fine screens",
                         crowded, call, path_calls(&st, GEMM_PATH_INT8));
        }
        if (crowded)
            cr_expect_gt(st.argmax_exact, (long)N * (V / 256 + 1), "crowded rows left only %ld exact logits",
                         st.argmax_exact);
        else
            cr_expect_eq(st.argmax_exact, 0, "a column 10 ahead needs no exact logit: %ld", st.argmax_exact);
        gemm_stats_free(&st);
        tape_free(&t);
    }
    tensor_free(w);
    tensor_free(b);
    tensor_free(x);
}

/* The coarse screen's bound where its error is worst: every x_k but the first 0.49 of a
 * 7-bit step (1/63 of max |x|), all rounded down to 0, against column 0 of equal weights,
 * whose exact logit is then 0.49 · 63 steps above its screen value; column 1 (one weight,
 * on x_0, which quantises exactly) lies between the two. Only a bound covering that error
 * keeps column 0, the exact winner; one made for 8-bit x (half as wide) drops it. */
Test(gemm, int8_coarse_screen_bound_holds_at_its_worst) {
    if (!gemm_q8_available()) cr_skip_test("a build without AVX2 has no gemm_q8");
    cr_assert_eq(dnnl_set_max_cpu_isa(dnnl_cpu_isa_avx2), dnnl_success, "oneDNN refused to be limited to AVX2");
    int V = 20, D = 64, N = 8;
    float c = 0.5f;
    Tensor *w = tensor_new(2, SH(V, D), false), *x = tensor_new(2, SH(N, D), false);
    for (int k = 0; k < D; k++) w->data[k] = c;
    w->data[D] = c + 0.4f * (float)(D - 1) * c / 63.0f; /* the screen's values: c and this; exact: c (1 + 0.49) */
    for (int r = 0; r < N; r++)
        for (int k = 0; k < D; k++) x->data[(size_t)r * D + k] = k == 0 ? 1.0f : 0.49f / 63.0f;
    w->frozen = 9;
    for (int screen = TAPE_SCREEN_F32; screen <= TAPE_SCREEN_INT8; screen++) {
        if (screen == TAPE_SCREEN_BF16) continue; /* not on this AVX2-limited process */
        Tape t;
        tape_init(&t, 1 << 20);
        t.screen = (TapeScreen)screen;
        GemmStats st = {0};
        t.eng.gemm_stats = &st;
        int32_t got[8];
        op_linear_argmax(&t, x, w, NULL, NULL, got);
        for (int r = 0; r < N; r++)
            cr_expect_eq(got[r], 0, "screen %d row %d: picked %d; the exact logits pick 0 (the scan: %d)", screen, r,
                         got[r], scan_pick(x->data + (size_t)r * D, w, NULL, NULL));
        if (screen == TAPE_SCREEN_INT8) cr_expect_eq(path_calls(&st, GEMM_PATH_Q8), 1, "the coarse screen did not run");
        gemm_stats_free(&st);
        tape_free(&t);
    }
    tensor_free(w);
    tensor_free(x);
}

/* op_linear_argmax keeps its bound's per-column factors per frozen weight and bias: on one
 * tape, the same weights picked twice, then weights scaled 4096-fold and frozen again (a new
 * stamp), then another bias at the same stamp, each against the written-out scan. Factors
 * kept from before the change would bound the scaled screen's errors 4096 times too tightly
 * (the int8 screen's then pick another column in a row of this set). */
Test(gemm, linear_argmax_factors_follow_the_freeze) {
    bool bf16_ok = gemm_bf16_check("test", &(S2sError){0}) == S2S_OK;
    int V = 300, D = 96, N = 64;
    Rng rng;
    rng_init(&rng, 77, 0);
    Tensor *w = tensor_new(2, SH(V, D), false), *b = tensor_new(1, SH(V), false), *b2 = tensor_new(1, SH(V), false);
    Tensor *x = tensor_new(2, SH(N, D), false);
    tu_fill(w, &rng, -0.2f, 0.2f);
    tu_fill(b, &rng, -0.5f, 0.5f);
    tu_fill(b2, &rng, -0.5f, 0.5f);
    tu_fill(x, &rng, -1, 1);
    for (int v = 5; v < V; v += 3) /* a cluster within bf16's rounding of column 4 */
        for (int k = 0; k < D; k++)
            w->data[(size_t)v * D + k] = w->data[4 * (size_t)D + k] * (1.0f + 0x1p-8f * rng_uniform_range(&rng, -1, 1));
    for (int screen = TAPE_SCREEN_F32; screen <= TAPE_SCREEN_INT8; screen++) {
        if (screen == TAPE_SCREEN_BF16 && !bf16_ok) continue;
        Tape t;
        tape_init(&t, 1 << 20);
        t.screen = (TapeScreen)screen;
        t.screen_check = true;
        uint64_t stamp = 100 * (uint64_t)screen;
        for (int round = 0; round < 4; round++) {
            if (round == 2) { /* new weights, frozen again */
                for (size_t k = 0; k < w->size; k++) w->data[k] *= 4096.0f;
                for (int v = 0; v < V; v++) b->data[v] *= 4096.0f;
                stamp++;
            }
            const Tensor *bb = round == 3 ? b2 : b;
            w->frozen = b->frozen = b2->frozen = stamp;
            int32_t got[64];
            op_linear_argmax(&t, x, w, bb, NULL, got);
            int wrong = 0;
            for (int r = 0; r < N; r++) wrong += got[r] != scan_pick(x->data + (size_t)r * D, w, bb, NULL);
            cr_expect_eq(wrong, 0, "screen %d round %d: %d of %d rows picked another column than the scan", screen, round,
                         wrong, N);
        }
        cr_expect(t.eng.argmax_cache != NULL, "screen %d: frozen weights keep their factors", screen);
        tape_free(&t);
    }
    tensor_free(w);
    tensor_free(b);
    tensor_free(b2);
    tensor_free(x);
}

/* An int8 tape's own pick (op_linear_int8_argmax) against op_linear's int8 logits scanned
 * with the same rule (the first allowed column, then only a strictly higher logit): tied
 * columns (copied weight rows and biases), the first allowed column tied with later ones (no
 * mask), a column not allowed tied with the allowed ones after it,
 * a NaN and an Inf in x (every logit NaN: the first allowed column), rows of zeros, no bias,
 * no mask, vocabulary sizes around the 16-wide blocks; and no pick where op_linear would not
 * multiply in int8 (under 8 rows, the weight not frozen, a float32 tape, training). */
Test(gemm, linear_int8_argmax_equals_the_int8_logits_scan) {
    int sizes[][2] = {{8, 16}, {17, 40}, {33, 64}, {300, 96}};
    for (int si = 0; si < 4; si++) {
        int V = sizes[si][0], D = sizes[si][1], N = 40;
        Rng rng;
        rng_init(&rng, 90 + si, 0);
        Tensor *w = tensor_new(2, SH(V, D), false), *b = tensor_new(1, SH(V), false), *x = tensor_new(2, SH(N, D), false);
        tu_fill(w, &rng, -0.5f, 0.5f);
        tu_fill(b, &rng, -0.2f, 0.2f);
        tu_fill(x, &rng, -1, 1);
        int top = V - 2; /* a column copied to the front and the back: exact ties */
        for (int k = 0; k < D; k++) w->data[(size_t)top * D + k] = 0.9f * (k % 2 ? 1.0f : -1.0f);
        memcpy(w->data + (size_t)3 * D, w->data + (size_t)top * D, (size_t)D * sizeof(float));
        memcpy(w->data + (size_t)(V - 1) * D, w->data + (size_t)top * D, (size_t)D * sizeof(float));
        b->data[3] = b->data[top] = b->data[V - 1] = 0.1f;
        for (int c = 0; c < 3; c += 2) { /* 0: the first allowed column without the mask; 2: masked, before 3 */
            memcpy(w->data + (size_t)c * D, w->data + (size_t)top * D, (size_t)D * sizeof(float));
            b->data[c] = 0.1f;
        }
        uint8_t *allowed = malloc((size_t)V);
        memset(allowed, 1, (size_t)V);
        allowed[0] = allowed[2] = 0;
        for (int r = 0; r < N; r++) {
            float *row = x->data + (size_t)r * D;
            switch (r % 6) {
            case 1: for (int k = 0; k < D; k++) row[k] = 0.9f * (k % 2 ? 1.0f : -1.0f); break; /* the copies win */
            case 2: row[r % D] = NAN; break;
            case 3: row[0] = INFINITY; break;
            case 4: for (int k = 0; k < D; k++) row[k] = 0.0f; break;
            default: break;
            }
        }
        w->frozen = 11;
        for (int variant = 0; variant < 3; variant++) { /* bias and mask, no bias, no mask */
            const Tensor *bb = variant == 1 ? NULL : b;
            const uint8_t *al = variant == 2 ? NULL : allowed;
            Tape t;
            tape_init(&t, 1 << 20);
            t.eng.precision = PRECISION_INT8;
            t.grad_enabled = false;
            int32_t got[40];
            cr_assert(op_linear_int8_argmax(&t, x, w, bb, al, got), "V=%d: no int8 pick", V);
            Tensor *y = op_linear(&t, x, w, (Tensor *)bb);
            int ties = 0;
            for (int r = 0; r < N; r++) {
                const float *z = y->data + (size_t)r * V;
                int32_t want = -1;
                for (int v = 0; v < V; v++) {
                    if (al && !al[v]) continue;
                    if (want < 0 || z[v] > z[want]) want = v;
                }
                ties += want == (al ? 3 : 0) && r % 6 == 1;
                cr_expect_eq(got[r], want, "V=%d variant %d row %d: picked %d, the int8 logits' scan %d", V, variant, r,
                             got[r], want);
            }
            cr_expect_gt(ties, 0, "V=%d variant %d: no row tied its first allowed column with later ones", V, variant);
            int32_t none[40];
            Tensor x5 = *x;
            x5.shape[0] = 5, x5.size = (size_t)5 * D;
            cr_expect(op_linear_int8_argmax(&t, &x5, w, bb, al, none), "5 rows: int8 too (the rows do not pick the path)");
            for (int r = 0; r < 5; r++) cr_expect_eq(none[r], got[r], "V=%d variant %d row %d: alone %d, among more %d", V, variant, r, none[r], got[r]);
            w->frozen = 0;
            cr_expect(!op_linear_int8_argmax(&t, x, w, bb, al, none), "a weight not frozen: float32");
            w->frozen = 11;
            t.grad_enabled = true;
            cr_expect(!op_linear_int8_argmax(&t, x, w, bb, al, none), "training: op_linear does not offer the weight");
            t.grad_enabled = false;
            t.eng.precision = PRECISION_FP32;
            cr_expect(!op_linear_int8_argmax(&t, x, w, bb, al, none), "a float32 tape");
            tape_free(&t);
        }
        free(allowed);
        tensor_free(w);
        tensor_free(b);
        tensor_free(x);
    }
}

/* Two columns whose order bf16 rounding turns round: exact logits 1 + 0.49 h and 1 + 0.41 h
 * (h = 2^-7, bf16's spacing at 1), rounded ones 1 and 1 + 0.9 h. Only the screen's error
 * bound keeps the true winner among the columns computed exactly. */
Test(gemm, linear_argmax_survives_a_rounding_that_reorders) {
    int V = 20, D = 16;
    float h = 0x1p-7f;
    Tensor *w = tensor_new(2, SH(V, D), false), *x = tensor_new(2, SH(2, D), false);
    w->data[3 * D] = 1.0f + 0.49f * h; /* bf16: 1 */
    w->data[9 * D] = 1.0f + 0.51f * h; /* bf16: 1 + h */
    w->data[9 * D + 1] = -0.1f * h;    /* about exact in bf16 */
    x->data[0] = x->data[1] = 1.0f;
    x->data[D] = x->data[D + 1] = -1.0f; /* the second row: the other way round, column 3 loses */
    w->frozen = 3;
    for (int screen = TAPE_SCREEN_AUTO; screen <= TAPE_SCREEN_INT8; screen++) {
        if (screen == TAPE_SCREEN_BF16 && gemm_bf16_check("test", &(S2sError){0}) != S2S_OK) continue;
        Tape t;
        tape_init(&t, 1 << 20);
        t.screen = (TapeScreen)screen;
        int32_t got[2];
        op_linear_argmax(&t, x, w, NULL, NULL, got);
        cr_expect_eq(got[0], 3, "screen %d: picked %d, exact logits pick 3", screen, got[0]);
        cr_expect_eq(got[1], 0, "screen %d: picked %d, exact logits pick 0 (all of 0 … 19 but 3 and 9 are 0)", screen,
                     got[1]);
        tape_free(&t);
    }
    tensor_free(w);
    tensor_free(x);
}

/* Where gemm_rows_for_activations applies, a decoding tape's products of activations (attention
 * against the encoder states) sum each row alone too: rows in blocks of 2 and 7 equal the
 * same rows among 300, B transposed or not, A transposed or not. */
Test(gemm, decoding_products_of_activations_sum_each_row_alone) {
    if (!gemm_rows_for_activations()) TU_SKIP("oneDNN's brgemm kernels and this build's FMA chains agree: gemm_rows does not apply");
    int M = 300, K = 37, N = 29;
    Rng rng;
    rng_init(&rng, 81, 0);
    float *A = malloc(sizeof(float) * (size_t)M * K), *B = malloc(sizeof(float) * (size_t)K * N);
    float *all = malloc(sizeof(float) * (size_t)M * N), *part = malloc(sizeof(float) * (size_t)M * N);
    for (int i = 0; i < M * K; i++) A[i] = rng_uniform_range(&rng, -1, 1);
    for (int i = 0; i < K * N; i++) B[i] = rng_uniform_range(&rng, -1, 1);
    Tape t;
    tape_init(&t, 1 << 22);
    t.grad_enabled = false;
    for (int tb = 0; tb < 2; tb++) {
        int ldb = tb ? K : N;
        gemm_tape(&t, false, tb, M, N, K, 1.0f, A, K, B, ldb, 0.0f, all, N);
        for (int blk = 2; blk <= 7; blk += 5) {
            for (int r0 = 0; r0 < M; r0 += blk) {
                int m = M - r0 < blk ? M - r0 : blk;
                if (m < 2) { memcpy(part + (size_t)r0 * N, all + (size_t)r0 * N, sizeof(float) * (size_t)N); continue; }
                gemm_tape(&t, false, tb, m, N, K, 1.0f, A + (size_t)r0 * K, K, B, ldb, 0.0f, part + (size_t)r0 * N, N);
            }
            cr_expect_eq(memcmp(part, all, sizeof(float) * (size_t)M * N), 0, "tb %d: blocks of %d differ from 300 rows", tb, blk);
        }
    }
    /* op(A) = A^T (A stored K x M) gives the rows of A's columns alone as well */
    float *At = malloc(sizeof(float) * (size_t)M * K);
    for (int r = 0; r < M; r++)
        for (int k = 0; k < K; k++) At[(size_t)k * M + r] = A[(size_t)r * K + k];
    float *viaT = malloc(sizeof(float) * (size_t)M * N);
    gemm_tape(&t, true, false, M, N, K, 1.0f, At, M, B, N, 0.0f, viaT, N);
    gemm_tape(&t, false, false, M, N, K, 1.0f, A, K, B, N, 0.0f, all, N);
    cr_expect_eq(memcmp(viaT, all, sizeof(float) * (size_t)M * N), 0, "A transposed differs from A");
    tape_free(&t);
    free(A), free(B), free(all), free(part), free(At), free(viaT);
}

/* When decoding, a row's product by a frozen weight has the same bits however many rows come
 * with it (1, 7, or 1,500: past the packed plans' 1,024 rows), in float32, bf16 (where the
 * CPU has it) and int8: no batch picks another kernel for a sentence (test_trust.c's decode
 * suite checks it end to end). The second shape's int8 sums (300 × 1,100) take more than
 * 1 MiB: they are made and turned to floats a block of rows at a time. */
Test(gemm, a_row_by_a_frozen_weight_is_the_same_in_any_batch) {
    const int shapes[2][4] = {{1500, 40, 24, 499}, {300, 40, 1100, 97}}; /* M, K, N, the rows' stride */
    for (int sh = 0; sh < 2; sh++) {
        int M = shapes[sh][0], K = shapes[sh][1], N = shapes[sh][2], step = shapes[sh][3];
        Rng rng;
        rng_init(&rng, 77, 0);
        Tensor *x = tensor_new(2, SH(M, K), false), *w = tensor_new(2, SH(N, K), false), *b = tensor_new(1, SH(N), false);
        tu_fill(x, &rng, -1, 1);
        tu_fill(w, &rng, -0.3f, 0.3f);
        tu_fill(b, &rng, -1, 1);
        S2sError err;
        bool has_bf16 = gemm_bf16_check("this CPU", &err) == S2S_OK;
        for (int prec = 0; prec < 3; prec++) {
            if (prec == 1 && !has_bf16) continue;
            Tape t;
            tape_init(&t, 1 << 23);
            t.eng.precision = (Precision)prec; /* 0 fp32, 1 bf16, 2 int8 */
            t.grad_enabled = false;
            w->frozen = 40 + prec;
            Tensor *all = op_linear(&t, x, w, b);
            const int rows[2] = {1, 7};
            for (int k = 0; k < 2; k++)
                for (int r0 = 0; r0 + rows[k] <= M; r0 += step) {
                    Tensor xs = *x;
                    xs.data = x->data + (size_t)r0 * K;
                    xs.shape[0] = rows[k], xs.size = (size_t)rows[k] * K;
                    Tensor *part = op_linear(&t, &xs, w, b);
                    cr_expect_eq(memcmp(part->data, all->data + (size_t)r0 * N, part->size * sizeof(float)), 0,
                                 "%d x %d, precision %d: rows %d..%d alone differ from the same rows among %d", M, N, prec,
                                 r0, r0 + rows[k], M);
                }
            tape_free(&t);
        }
        w->frozen = 0;
        tensor_free(x);
        tensor_free(w);
        tensor_free(b);
    }
}
