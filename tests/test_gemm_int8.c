/* test_gemm_int8.c — int8 products against the quantisation they promise, our own q8 kernel,
 * the screens greedy decoding bounds its errors with, and op_linear_argmax against an exact
 * scan. */
#include "test_gemm.h"

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
        tape_gemm(&t, false, tb, M, N, K, 1.0f, A, K, B, ldb, 0.0f, all, N);
        for (int blk = 2; blk <= 7; blk += 5) {
            for (int r0 = 0; r0 < M; r0 += blk) {
                int m = M - r0 < blk ? M - r0 : blk;
                if (m < 2) { memcpy(part + (size_t)r0 * N, all + (size_t)r0 * N, sizeof(float) * (size_t)N); continue; }
                tape_gemm(&t, false, tb, m, N, K, 1.0f, A + (size_t)r0 * K, K, B, ldb, 0.0f, part + (size_t)r0 * N, N);
            }
            cr_expect_eq(memcmp(part, all, sizeof(float) * (size_t)M * N), 0, "tb %d: blocks of %d differ from 300 rows", tb, blk);
        }
    }
    /* op(A) = A^T (A stored K x M) gives the rows of A's columns alone as well */
    float *At = malloc(sizeof(float) * (size_t)M * K);
    for (int r = 0; r < M; r++)
        for (int k = 0; k < K; k++) At[(size_t)k * M + r] = A[(size_t)r * K + k];
    float *viaT = malloc(sizeof(float) * (size_t)M * N);
    tape_gemm(&t, true, false, M, N, K, 1.0f, At, M, B, N, 0.0f, viaT, N);
    tape_gemm(&t, false, false, M, N, K, 1.0f, A, K, B, N, 0.0f, all, N);
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
