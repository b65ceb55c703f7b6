/* test_core.c — arena, RNG, tensors and views, the op table, the parameter store. */
#include "test_util.h"
#include "s2s/gemm.h"
#include "../src/core/ops_internal.h" /* ops_softmax_row: one row alone, the reference */

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

extern int omp_get_max_threads(void); /* libgomp (linked by the library), without -fopenmp */

Test(arena, aligned_and_distinct) {
    Arena a;
    arena_init(&a, 4096);
    unsigned char *p = arena_alloc(&a, 10), *q = arena_alloc(&a, 1);
    cr_expect_eq((uintptr_t)p % 64, 0);
    cr_expect_eq((uintptr_t)q % 64, 0);
    cr_expect(q >= p + 10);
    arena_free(&a);
}

Test(arena, grows_by_chaining_keeps_data_and_merges_on_reset) {
    Arena a;
    arena_init(&a, 4096);
    float *bufs[20];
    for (int i = 0; i < 20; i++) { /* 20 × 1000 floats: far past the first block */
        bufs[i] = arena_alloc(&a, 1000 * sizeof(float));
        for (int k = 0; k < 1000; k++) bufs[i][k] = (float)(i * 1000 + k);
    }
    for (int i = 0; i < 20; i++)
        for (int k = 0; k < 1000; k += 97) cr_assert_eq(bufs[i][k], (float)(i * 1000 + k));
    cr_expect_gt(arena_blocks(&a), 1);
    size_t peak = a.peak;
    cr_expect_geq(peak, 20 * 4000);
    arena_reset(&a);
    cr_expect_eq(arena_blocks(&a), 1, "a grown chain is merged into one block at reset");
    cr_expect_geq(a.capacity, peak);
    cr_expect_eq(a.used, 0);
    for (int i = 0; i < 20; i++) arena_alloc(&a, 1000 * sizeof(float));
    cr_expect_eq(arena_blocks(&a), 1, "the same step fits without growing again");
    cr_expect_eq(a.peak, peak);
    arena_free(&a);
}

Test(arena, calloc_zeroes) {
    Arena a;
    arena_init(&a, 4096);
    unsigned char *p = arena_alloc(&a, 256);
    memset(p, 0xAB, 256);
    arena_reset(&a);
    unsigned char *q = arena_calloc(&a, 256);
    for (int i = 0; i < 256; i++) cr_assert_eq(q[i], 0);
    arena_free(&a);
}

/* PCG32 reference (pcg32-demo, seed 42, sequence 54). */
Test(rng, matches_pcg32_reference) {
    Rng r;
    rng_init(&r, 42u, 54u);
    const uint32_t want[] = {0xa15c02b7, 0x7b47f409, 0xba1d3330, 0x83d2f293, 0xbfa4784b, 0xcbed606e};
    for (int i = 0; i < 6; i++) cr_expect_eq(rng_u32(&r), want[i], "output %d", i);
}

Test(rng, deterministic_and_streams_independent) {
    Rng a, b, c;
    rng_init(&a, 7, RNG_STREAM_INIT);
    rng_init(&b, 7, RNG_STREAM_INIT);
    rng_init(&c, 7, RNG_STREAM_DROPOUT);
    int same_c = 0;
    for (int i = 0; i < 1000; i++) {
        uint32_t x = rng_u32(&a), y = rng_u32(&b), z = rng_u32(&c);
        cr_assert_eq(x, y);
        same_c += x == z;
    }
    cr_expect_lt(same_c, 3);
}

Test(rng, ranges) {
    Rng r;
    rng_init(&r, 1, 1);
    double mean = 0, sq = 0;
    int counts[5] = {0};
    for (int i = 0; i < 100000; i++) {
        float u = rng_uniform(&r);
        cr_assert(u >= 0.0f && u < 1.0f);
        uint32_t k = rng_below(&r, 5);
        cr_assert_lt(k, 5u);
        counts[k]++;
        double n = rng_normal(&r);
        mean += n;
        sq += n * n;
    }
    mean /= 100000;
    sq /= 100000;
    cr_expect(mean > -0.02 && mean < 0.02, "normal mean %g", mean);
    cr_expect(sq > 0.97 && sq < 1.03, "normal variance %g", sq);
    for (int k = 0; k < 5; k++) cr_expect(counts[k] > 19000 && counts[k] < 21000, "bucket %d: %d", k, counts[k]);
    int perm[10];
    for (int i = 0; i < 10; i++) perm[i] = i;
    rng_shuffle_int(&r, perm, 10);
    int seen = 0;
    for (int i = 0; i < 10; i++) seen |= 1 << perm[i];
    cr_expect_eq(seen, 1023, "a shuffle is a permutation");
}

Test(tensor, views_share_data_and_gradients) {
    Tape t;
    tape_init(&t, 1 << 14);
    Tensor *x = tape_zeros(&t, 3, (int[]){4, 2, 3});
    for (size_t i = 0; i < x->size; i++) x->data[i] = (float)i;
    x->requires_grad = true;
    Tensor *step2 = tape_view(&t, x, 2 * 6, 2, (int[]){2, 3});
    cr_expect_eq(step2->data[0], 12.0f);
    Tensor *sub = tape_view(&t, step2, 3, 1, (int[]){3}); /* a view of a view */
    cr_expect_eq(sub->base, x);
    cr_expect_eq(sub->data[0], 15.0f);
    float *g = tensor_grad(&t, sub);
    g[1] = 5.0f;
    cr_expect_eq(tensor_grad(&t, x)[16], 5.0f, "a gradient written through a view lands in the base");
    Tensor *r = tape_reshape2(&t, x, 8, 3);
    cr_expect_eq(tensor_rows(r), 8);
    cr_expect_eq(tensor_cols(r), 3);
    char buf[48];
    cr_expect_str_eq(tensor_shape_str(x, buf, sizeof buf), "(4, 2, 3)");
    tape_free(&t);
}

Test(tape, op_table_is_complete) {
    for (int op = 0; op < OP_COUNT; op++) cr_expect(OP_NAME[op] != NULL && OP_NAME[op][0], "op %d has no name", op);
}

Test(tape, no_nodes_without_grad_or_when_disabled) {
    Tape t;
    tape_init(&t, 1 << 14);
    Tensor *a = tape_zeros(&t, 2, (int[]){2, 2});
    op_tanh(&t, a);
    cr_expect_eq(t.n_nodes, 0, "inputs without gradients record nothing");
    a->requires_grad = true;
    op_tanh(&t, a);
    cr_expect_eq(t.n_nodes, 1);
    t.grad_enabled = false;
    Tensor *y = op_tanh(&t, a);
    cr_expect_eq(t.n_nodes, 1, "inference records nothing");
    cr_expect(!y->requires_grad);
    tape_reset(&t);
    cr_expect_eq(t.n_nodes, 0);
    tape_free(&t);
}

/* x → tanh → tanh → tanh → sum: once a tensor's producer has run backward its gradient is
 * dead, and later gradients take that memory (backward holds only the live ones): five
 * gradients (loss, y3, y2, y1, x) but the arena gives only three. The gradient of x is
 * still exact. */
Test(tape, backward_reuses_dead_gradient_buffers) {
    Tape t;
    tape_init(&t, 1 << 16);
    Tensor *x = tape_tensor(&t, 2, (int[]){4, 8});
    for (size_t i = 0; i < x->size; i++) x->data[i] = 0.1f * (float)i - 1.5f;
    x->requires_grad = true;
    Tensor *y1 = op_tanh(&t, x), *y2 = op_tanh(&t, y1), *y3 = op_tanh(&t, y2);
    Tensor *loss = op_sum(&t, y3);
    size_t before = t.arena.used;
    tape_backward(&t, loss);
    /* 64-byte pieces: the loss's gradient one, each (4, 8) gradient two */
    cr_expect_eq(t.arena.used - before, (size_t)(64 + 2 * 128), "backward took %zu bytes", t.arena.used - before);
    cr_expect_eq(x->grad, y2->grad, "x's gradient reuses y2's (dead after the second tanh's backward)");
    cr_expect_neq(y1->grad, y2->grad);
    cr_expect(y1->grad != NULL && x->grad != NULL);
    for (size_t i = 0; i < x->size; i++) {
        double a = tanh((double)x->data[i]), b = tanh(a), c = tanh(b);
        double want = (1 - c * c) * (1 - b * b) * (1 - a * a);
        cr_expect_float_eq(x->grad[i], want, 1e-5, "element %zu", i);
    }
    /* the next step starts with an empty free list: the arena was reset */
    tape_reset(&t);
    cr_expect_eq(t.n_free_grads, 0);
    tape_free(&t);
}

Test(tape, dropout_is_identity_in_eval_and_scales_in_training) {
    Tape t;
    tape_init(&t, 1 << 16);
    Tensor *x = tape_tensor2(&t, 100, 100);
    for (size_t i = 0; i < x->size; i++) x->data[i] = 1.0f;
    Rng r;
    rng_init(&r, 3, RNG_STREAM_DROPOUT);
    Tensor *y = op_dropout(&t, x, 0.25f, &r);
    size_t kept = 0;
    for (size_t i = 0; i < y->size; i++) {
        cr_assert(y->data[i] == 0.0f || y->data[i] == 1.0f / 0.75f);
        kept += y->data[i] != 0.0f;
    }
    cr_expect(kept > 7300 && kept < 7700, "kept %zu of 10000 at p = 0.25", kept);
    t.training = false;
    cr_expect_eq(op_dropout(&t, x, 0.25f, &r), x);
    tape_free(&t);
}

Test(ops, softmax_masked_entries_exactly_zero) {
    Tape t;
    tape_init(&t, 1 << 14);
    Tensor *x = tape_tensor3(&t, 2, 2, 3);
    for (size_t i = 0; i < x->size; i++) x->data[i] = (float)i * 0.3f;
    const uint8_t m[] = {1, 0, 1, 0, 0, 0}; /* batch 1 entirely masked */
    Tensor *y = op_softmax(&t, x, m, 2);
    for (int r = 0; r < 2; r++) {
        cr_expect_eq(y->data[r * 3 + 1], 0.0f);
        cr_expect_float_eq(y->data[r * 3] + y->data[r * 3 + 2], 1.0f, 1e-6);
    }
    for (int i = 6; i < 12; i++) cr_expect_eq(y->data[i], 0.0f, "a fully masked row is 0, not NaN");
    tape_free(&t);
}

/* op_softmax takes short rows (attention's) in blocks side by side and long ones alone; each
 * row must keep the bits of ops_softmax_row alone: rows of 1 to 100 entries, row counts that
 * end blocks early, masks shared by 1 or 3 rows with fully masked rows, −∞, −0 and large
 * scores, on 1 and 2 threads. */
Test(ops, softmax_rows_are_each_rows_own_bits) {
    const int widths[] = {1, 7, 16, 33, 64, 65, 100}, counts[] = {1, 31, 33, 300};
    int restore = omp_get_max_threads();
    Rng rng;
    rng_init(&rng, 21, 0);
    for (size_t wi = 0; wi < sizeof widths / sizeof *widths; wi++)
        for (size_t ci = 0; ci < sizeof counts / sizeof *counts; ci++)
            for (int per = 0; per <= 3; per += 3) { /* 0: no mask */
                int S = widths[wi], R = counts[ci] * (per ? per : 1);
                Tape t;
                tape_init(&t, 1 << 22);
                Tensor *x = tape_tensor2(&t, R, S);
                tu_fill(x, &rng, -30, 30);
                for (int i = 0; i < R * S; i += 7) x->data[i] = -INFINITY;
                for (int i = 3; i < R * S; i += 11) x->data[i] = -0.0f;
                x->data[R * S / 2] = 80.0f;
                uint8_t *mask = per ? malloc((size_t)(R / per) * S) : NULL;
                for (int i = 0; per && i < R / per * S; i++) mask[i] = rng_uniform(&rng) < 0.6f;
                if (per && R / per > 1) memset(mask + S, 0, (size_t)S); /* rows per..2 per-1: nothing left */
                float *want = malloc((size_t)R * S * sizeof *want);
                for (int r = 0; r < R; r++)
                    ops_softmax_row(x->data + (size_t)r * S, want + (size_t)r * S, per ? mask + (size_t)(r / per) * S : NULL, S);
                for (int th = 1; th <= 2; th++) {
                    gemm_set_threads(th);
                    Tensor *y = op_softmax(&t, x, mask, per ? R / per : 0);
                    long off = 0;
                    for (int i = 0; i < R * S; i++) off += memcmp(&y->data[i], &want[i], sizeof *want) != 0;
                    cr_expect_eq(off, 0, "%d rows of %d (mask per %d), %d threads: %ld entries differ", R, S, per, th, off);
                }
                gemm_set_threads(restore);
                free(want);
                free(mask);
                tape_free(&t);
            }
}

/* Each column's sum in row order, added to what db held: the bits of the plain loop, for
 * widths inside one block, at its edge, past it with a narrower last block, on 1 and 2 threads. */
Test(ops, bias_grad_is_the_row_order_sum_bit_for_bit) {
    const int widths[] = {1, 63, 64, 65, 200, 1030}, rows[] = {1, 7, 300};
    int restore = omp_get_max_threads();
    Rng rng;
    rng_init(&rng, 23, 0);
    for (size_t wi = 0; wi < sizeof widths / sizeof *widths; wi++)
        for (size_t ri = 0; ri < sizeof rows / sizeof *rows; ri++) {
            int C = widths[wi], R = rows[ri];
            float *dy = malloc((size_t)R * C * sizeof *dy), *db0 = malloc((size_t)C * sizeof *db0);
            float *want = malloc((size_t)C * sizeof *want), *db = malloc((size_t)(C + 1) * sizeof *db);
            for (int i = 0; i < R * C; i++) dy[i] = rng_uniform(&rng) * 2e3f - 1e3f;
            for (int c = 0; c < C; c++) db0[c] = want[c] = rng_uniform(&rng) * 10.0f;
            for (int r = 0; r < R; r++)
                for (int c = 0; c < C; c++) want[c] += dy[(size_t)r * C + c];
            for (int th = 1; th <= 2; th++) {
                gemm_set_threads(th);
                memcpy(db, db0, (size_t)C * sizeof *db);
                db[C] = 42.0f; /* past the end: untouched */
                ops_bias_grad(db, dy, R, C);
                cr_expect_eq(memcmp(db, want, (size_t)C * sizeof *db), 0, "%d rows of %d, %d threads", R, C, th);
                cr_expect_eq(db[C], 42.0f);
            }
            gemm_set_threads(restore);
            free(dy), free(db0), free(want), free(db);
        }
}

Test(ops, cross_entropy_ignores_and_averages) {
    Tape t;
    tape_init(&t, 1 << 14);
    Tensor *x = tape_zeros(&t, 2, (int[]){3, 4}); /* uniform: −log(1/4) per row */
    const int32_t tg[] = {1, 0, 2};
    Tensor *l = op_cross_entropy(&t, x, tg, 0);
    cr_expect_float_eq(l->data[0], logf(4.0f), 1e-6);
    const int32_t none[] = {0, 0, 0};
    cr_expect_eq(op_cross_entropy(&t, x, none, 0)->data[0], 0.0f);
    tape_free(&t);
}

/* The fused decoding attention against the ops it replaces, bit for bit: head sizes with and
 * without 16-wide blocks and tails, row counts with and without groups of four, one large
 * enough to split over the threads, masks with fully masked rows, and a row of −0 queries
 * (all its scores zero); then with each position's rows shuffled and read through slots. */
Test(ops, attend_row_is_the_composed_ops_bit_for_bit) {
    const int cases[][4] = {{2, 1, 32, 0}, {5, 7, 24, 1}, {6, 13, 7, 1}, {8, 9, 64, 0}, {520, 40, 32, 1}};
    int restore = omp_get_max_threads();
    Rng rng;
    rng_init(&rng, 11, 0);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int N = cases[c][0], S = cases[c][1], D = cases[c][2], per = N % 2 ? 1 : 2, masked = cases[c][3];
        Tape t;
        tape_init(&t, 1 << 25);
        Tensor *q = tape_tensor3(&t, 1, N, D), *k = tape_tensor3(&t, S, N, D), *v = tape_tensor3(&t, S, N, D);
        tu_fill(q, &rng, -2, 2);
        tu_fill(k, &rng, -2, 2);
        tu_fill(v, &rng, -1, 1);
        for (int i = 0; i < D; i++) q->data[i] = -0.0f; /* row 0: every product ±0, every score 0 */
        uint8_t *mask = malloc((size_t)(N / per) * S);
        for (int i = 0; i < N / per * S; i++) mask[i] = rng_uniform(&rng) < 0.7f;
        if (N / per > 1) memset(mask + S, 0, (size_t)S); /* mask row 1: nothing to attend to */
        const uint8_t *m = masked ? mask : NULL;
        float scale = 1.0f / sqrtf((float)D);
        Tensor *pw = op_softmax(&t, op_scale(&t, op_matmul(&t, q, k, MM_A_TM | MM_B_TM | MM_TRANS_B), scale), m, N / per);
        Tensor *want = op_matmul(&t, pw, v, MM_B_TM | MM_OUT_TM);
        for (int th = 1; th <= 3; th += 2) { /* 3: the large case's rows split over the threads */
            gemm_set_threads(th);
            Tensor *w = NULL, *got = op_attend_row(&t, q, k, v, scale, m, N / per, NULL, 1, &w);
            cr_assert(w && w->ndim == 3 && w->shape[0] == N && w->shape[1] == 1 && w->shape[2] == S);
            cr_assert(got->ndim == 3 && got->shape[0] == 1 && got->shape[1] == N && got->shape[2] == D);
            long off_w = 0, off_c = 0;
            for (size_t i = 0; i < w->size; i++) off_w += memcmp(&w->data[i], &pw->data[i], sizeof(float)) != 0;
            for (size_t i = 0; i < got->size; i++) off_c += memcmp(&got->data[i], &want->data[i], sizeof(float)) != 0;
            cr_expect_eq(off_w, 0, "N %d S %d D %d, %d threads: %ld weights differ", N, S, D, th, off_w);
            cr_expect_eq(off_c, 0, "N %d S %d D %d, %d threads: %ld context values differ", N, S, D, th, off_c);
            Tensor *bare = op_attend_row(&t, q, k, v, scale, m, N / per, NULL, 1, NULL); /* no weights kept */
            cr_expect_eq(memcmp(bare->data, got->data, got->size * sizeof(float)), 0,
                         "N %d S %d D %d, %d threads: the context differs without the weights", N, S, D, th);
        }
        /* each position's rows shuffled by whole slots of g rows, read back through the slots */
        int g = N % 4 == 0 ? 4 : per, ns = N / g;
        int32_t *slot = malloc((size_t)S * ns * sizeof *slot);
        Tensor *kp = tape_tensor3(&t, S, N, D), *vp = tape_tensor3(&t, S, N, D);
        for (int s = 0; s < S; s++) {
            int32_t *sl = slot + (size_t)s * ns;
            for (int b = 0; b < ns; b++) sl[b] = b;
            for (int b = ns - 1; b > 0; b--) {
                int o = (int)rng_below(&rng, (uint32_t)b + 1), x = sl[b];
                sl[b] = sl[o];
                sl[o] = x;
            }
            for (int b = 0; b < ns; b++) {
                size_t from = ((size_t)s * N + (size_t)b * g) * D, to = ((size_t)s * N + (size_t)sl[b] * g) * D;
                memcpy(kp->data + to, k->data + from, (size_t)g * D * sizeof(float));
                memcpy(vp->data + to, v->data + from, (size_t)g * D * sizeof(float));
            }
        }
        for (int th = 1; th <= 3; th += 2) {
            gemm_set_threads(th);
            Tensor *w = NULL, *got = op_attend_row(&t, q, kp, vp, scale, m, N / per, slot, g, &w);
            cr_expect_eq(memcmp(w->data, pw->data, w->size * sizeof(float)), 0, "N %d S %d, slots of %d, %d threads: weights differ",
                         N, S, g, th);
            cr_expect_eq(memcmp(got->data, want->data, got->size * sizeof(float)), 0,
                         "N %d S %d, slots of %d, %d threads: context differs", N, S, g, th);
        }
        free(slot);
        gemm_set_threads(restore);
        free(mask);
        tape_free(&t);
    }
}

/* op_concat_rows large enough to split over the threads: rows picked in increasing order
 * (the output layer's targets), and every row picked three times (all rows, three times over:
 * summed on one thread, in order; split over two, the sums of a row would meet out of order),
 * forward against a ++ b row by row and backward against each row's gradients summed in order. */
Test(ops, concat_rows_large_equals_row_by_row) {
    enum { R = 1000, DA = 500, DB = 700 };
    Rng rng;
    rng_init(&rng, 5, 0);
    Tensor *a = tensor_new(2, (int[]){R, DA}, true), *b = tensor_new(2, (int[]){R, DB}, true);
    tu_fill(a, &rng, -1, 1);
    tu_fill(b, &rng, -1, 1);
    static int32_t ids[3 * R];
    for (int twice = 0; twice < 2; twice++) { /* twice: rows picked more than once */
        int n = 0;
        for (int copy = 0; copy < (twice ? 3 : 1); copy++)
            for (int r = 0; r < R; r++)
                if (twice || r % 7) ids[n++] = r; /* all but every seventh row, or all three times */
        Tape t;
        tape_init(&t, 1 << 22);
        t.grad_enabled = true;
        memset(a->grad, 0, a->size * sizeof(float));
        memset(b->grad, 0, b->size * sizeof(float));
        Tensor *y = op_concat_rows(&t, a, b, ids, n);
        long off = 0;
        for (int i = 0; i < n; i++) {
            off += memcmp(y->data + (size_t)i * (DA + DB), a->data + (size_t)ids[i] * DA, DA * sizeof(float)) != 0;
            off += memcmp(y->data + (size_t)i * (DA + DB) + DA, b->data + (size_t)ids[i] * DB, DB * sizeof(float)) != 0;
        }
        cr_expect_eq(off, 0, "twice %d: %ld rows of the output differ from a ++ b", twice, off);
        float *seed = malloc(y->size * sizeof *seed), *want = calloc((size_t)R * (DA + DB), sizeof *want);
        for (size_t i = 0; i < y->size; i++) seed[i] = rng_uniform_range(&rng, -1, 1);
        for (int i = 0; i < n; i++)
            for (int k = 0; k < DA + DB; k++) want[(size_t)ids[i] * (DA + DB) + k] += seed[(size_t)i * (DA + DB) + k];
        tape_backward_seed(&t, y, seed);
        long wrong = 0;
        for (int r = 0; r < R; r++)
            for (int k = 0; k < DA + DB; k++) {
                float got = k < DA ? a->grad[(size_t)r * DA + k] : b->grad[(size_t)r * DB + k - DA];
                wrong += got != want[(size_t)r * (DA + DB) + k];
            }
        cr_expect_eq(wrong, 0, "twice %d: %ld gradient values differ from the sums in order", twice, wrong);
        free(seed);
        free(want);
        tape_free(&t);
    }
    tensor_free(a);
    tensor_free(b);
}

Test(params, one_block_aligned_and_named) {
    ParamStore ps;
    params_init(&ps);
    Tensor *a = params_add(&ps, "enc.w", 2, (int[]){3, 5});
    Tensor *b = params_add(&ps, "enc.b", 1, (int[]){7});
    cr_assert_eq(params_alloc(&ps, NULL), S2S_OK);
    cr_expect_eq(params_numel(&ps), 22u);
    cr_expect_eq((uintptr_t)a->data % 64, 0);
    cr_expect_eq((uintptr_t)b->data % 64, 0);
    cr_expect(b->data > a->data && b->data < ps.data + ps.total);
    cr_assert_eq(params_alloc_moments(&ps, NULL), S2S_OK);
    int nonzero = 0; /* every block starts as zeros */
    for (size_t i = 0; i < ps.total; i++) nonzero += ps.data[i] != 0.0f || ps.grad[i] != 0.0f || ps.m[i] != 0.0f || ps.v[i] != 0.0f;
    cr_expect_eq(nonzero, 0);
    cr_expect_eq(params_find(&ps, "enc.b")->t, b);
    cr_expect_null(params_find(&ps, "nope"));
    b->grad[3] = 2.0f;
    params_zero_grad(&ps);
    cr_expect_eq(b->grad[3], 0.0f);
    Rng r;
    rng_init(&r, 1, RNG_STREAM_INIT);
    params_init_uniform(&ps, &r, 0.1f);
    for (size_t i = 0; i < a->size; i++) cr_assert(a->data[i] >= -0.1f && a->data[i] <= 0.1f);
    params_free(&ps);
}
