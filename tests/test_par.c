/* test_par.c — loops over threads: every index once, and the same bits on 1, 2 or 3
 * threads for the reduction, the cross-entropy and Adam that use them. */
#include "test_util.h"
#include "s2s/gemm.h"
#include "s2s/optim.h"
#include "s2s/par.h"

#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern int omp_get_max_threads(void);

static void count_range(void *ctx, size_t b, size_t e) {
    unsigned char *hits = ctx;
    for (size_t i = b; i < e; i++) hits[i]++;
}

Test(par, every_index_once) {
    int restore = omp_get_max_threads();
    size_t sizes[] = {0, 1, 2, 63, 64, 1000, 1025, 40000, PAR_MIN_WORK - 1, PAR_MIN_WORK, PAR_MIN_WORK + 1, 3000017};
    for (int th = 1; th <= 3; th++) {
        gemm_set_threads(th);
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
            size_t n = sizes[s];
            unsigned char *hits = calloc(n + 1, 1);
            par_for(n, 1, count_range, hits);
            for (size_t i = 0; i < n; i++) cr_assert_eq(hits[i], 1, "threads %d, n %zu: index %zu ran %d times", th, n, i, hits[i]);
            cr_assert_eq(hits[n], 0);
            free(hits);
        }
    }
    gemm_set_threads(restore);
}

Test(par, sum_sq_same_bits_on_any_thread_count) {
    int restore = omp_get_max_threads();
    size_t n = 3000001;
    float *x = malloc(n * sizeof *x);
    Rng rng;
    rng_init(&rng, 3, 0);
    double want = 0;
    for (size_t i = 0; i < n; i++) {
        x[i] = rng_uniform_range(&rng, -1, 1);
        want += (double)x[i] * x[i];
    }
    double got[3];
    for (int th = 1; th <= 3; th++) {
        gemm_set_threads(th);
        got[th - 1] = par_sum_sq(x, n);
    }
    gemm_set_threads(restore);
    cr_expect_eq(memcmp(&got[0], &got[1], sizeof got[0]), 0, "1 vs 2 threads: %.17g %.17g", got[0], got[1]);
    cr_expect_eq(memcmp(&got[0], &got[2], sizeof got[0]), 0, "1 vs 3 threads: %.17g %.17g", got[0], got[2]);
    cr_expect_lt(fabs(got[0] - want), 1e-9 * want);
    free(x);
}

/* A loss, its gradient and one Adam step, on th threads: the bits of all three. */
/* sizes above PAR_MIN_WORK, so that two threads really split them */
enum { N = 96, V = 11000, P = 1100000 };

static void loss_and_step(int th, float *loss, float *grad, float *param) {
    gemm_set_threads(th);
    Rng rng;
    rng_init(&rng, 5, 0);
    Tensor *logits = tensor_new(2, (int[]){N, V}, true);
    tu_fill(logits, &rng, -4, 4);
    static int32_t tg[N];
    for (int r = 0; r < N; r++) tg[r] = r % 7 == 3 ? -1 : (int32_t)(rng_u32(&rng) % V);
    Tape t;
    tape_init(&t, 1 << 16);
    Tensor *y = op_cross_entropy(&t, logits, tg, -1);
    tape_backward(&t, y);
    *loss = y->data[0];
    memcpy(grad, logits->grad, sizeof(float) * N * V);
    tape_free(&t);
    tensor_free(logits);
    ParamStore ps;
    params_init(&ps);
    Tensor *w = params_add(&ps, "w", 1, (int[]){P});
    cr_assert_eq(params_alloc(&ps, NULL), S2S_OK);
    for (int i = 0; i < P; i++) {
        w->data[i] = rng_uniform_range(&rng, -1, 1);
        ps.grad[i] = rng_uniform_range(&rng, -1, 1);
    }
    grad_clip_global_norm(&ps, 1.0);
    Adam a = adam_default();
    adam_step(&a, &ps);
    memcpy(param, w->data, sizeof(float) * P);
    params_free(&ps);
}

Test(par, loss_gradient_and_adam_same_bits_on_any_thread_count) {
    int restore = omp_get_max_threads();
    float l1, l2;
    float *g1 = malloc(sizeof(float) * N * V), *g2 = malloc(sizeof(float) * N * V);
    float *p1 = malloc(sizeof(float) * P), *p2 = malloc(sizeof(float) * P);
    loss_and_step(1, &l1, g1, p1);
    loss_and_step(2, &l2, g2, p2);
    gemm_set_threads(restore);
    cr_expect_eq(memcmp(&l1, &l2, sizeof l1), 0, "loss %.9g vs %.9g", l1, l2);
    cr_expect_eq(memcmp(g1, g2, sizeof(float) * N * V), 0, "logit gradients differ");
    cr_expect_eq(memcmp(p1, p2, sizeof(float) * P), 0, "Adam's weights differ");
    free(g1);
    free(g2);
    free(p1);
    free(p2);
}

/* Dropout's mask comes from a key and each element's index: the same output and gradient on
 * 1, 2 or 3 threads, about a p share of the elements dropped, the kept ones scaled by 1/(1−p),
 * and another key (the next call) another mask. */
Test(par, dropout_same_bits_on_any_thread_count) {
    int restore = omp_get_max_threads();
    enum { ND = 3000017 };
    float *out[3], *grad[3];
    Tensor *x = tensor_new(1, (int[]){ND}, true);
    for (size_t i = 0; i < ND; i++) x->data[i] = 1.0f + (float)(i % 7);
    for (int th = 1; th <= 3; th++) {
        gemm_set_threads(th);
        Tape t;
        tape_init(&t, 1 << 20);
        Rng rng;
        rng_init(&rng, 11, RNG_STREAM_DROPOUT);
        memset(x->grad, 0, ND * sizeof(float));
        Tensor *y = op_dropout(&t, x, 0.3f, &rng);
        out[th - 1] = malloc(ND * sizeof(float));
        memcpy(out[th - 1], y->data, ND * sizeof(float));
        tape_backward(&t, op_sum(&t, y));
        grad[th - 1] = malloc(ND * sizeof(float));
        memcpy(grad[th - 1], x->grad, ND * sizeof(float));
        if (th == 1) {
            size_t dropped = 0, wrong = 0;
            for (size_t i = 0; i < ND; i++) {
                if (y->data[i] == 0.0f) dropped++;
                else wrong += fabsf(y->data[i] - x->data[i] / 0.7f) > 1e-6f * x->data[i] || fabsf(x->grad[i] - 1.0f / 0.7f) > 1e-6f;
            }
            cr_expect(fabs((double)dropped / ND - 0.3) < 0.002, "dropped %.4f of the elements", (double)dropped / ND);
            cr_expect_eq(wrong, 0, "kept elements and their gradients are scaled by 1/(1 - p)");
            Tensor *y2 = op_dropout(&t, x, 0.3f, &rng);
            size_t same = 0;
            for (size_t i = 0; i < ND; i++) same += (y2->data[i] == 0.0f) == (y->data[i] == 0.0f);
            cr_expect_lt(same, (size_t)(0.65 * ND), "the next call draws another mask (%zu of %d agree)", same, ND);
        }
        tape_free(&t);
    }
    gemm_set_threads(restore);
    for (int k = 1; k < 3; k++) {
        cr_expect_eq(memcmp(out[0], out[k], ND * sizeof(float)), 0, "output: 1 vs %d threads", k + 1);
        cr_expect_eq(memcmp(grad[0], grad[k], ND * sizeof(float)), 0, "gradient: 1 vs %d threads", k + 1);
    }
    for (int k = 0; k < 3; k++) {
        free(out[k]);
        free(grad[k]);
    }
    tensor_free(x);
}

/* The elementwise maps and the softmax rows split over the threads when large: the same
 * output and gradients on 1, 2 or 3 threads (each element, and each row, computed alone). */
Test(par, elementwise_and_softmax_same_bits_on_any_thread_count) {
    int restore = omp_get_max_threads();
    enum { R = 24000, C = 30 };
    size_t n = (size_t)R * C;
    Tensor *a = tensor_new(2, (int[]){R, C}, true), *b = tensor_new(2, (int[]){R, C}, true), *w = tensor_new(2, (int[]){R, C}, false);
    Rng rng;
    rng_init(&rng, 5, 0);
    for (size_t i = 0; i < n; i++) {
        a->data[i] = (float)rng_normal(&rng);
        b->data[i] = (float)rng_normal(&rng);
        w->data[i] = (float)rng_normal(&rng);
    }
    uint8_t *mask = malloc((size_t)R / 8 * C);
    for (size_t i = 0; i < (size_t)R / 8 * C; i++) mask[i] = (i % 7) != 3;
    float *out[3], *ga[3], *gb[3];
    for (int th = 1; th <= 3; th++) {
        gemm_set_threads(th);
        Tape t;
        tape_init(&t, 1 << 20);
        memset(a->grad, 0, n * sizeof(float));
        memset(b->grad, 0, n * sizeof(float));
        Tensor *h = op_relu(&t, op_scale(&t, op_add(&t, a, b), 1.7f));
        Tensor *p = op_softmax(&t, op_add(&t, h, a), mask, R / 8);
        out[th - 1] = malloc(n * sizeof(float));
        memcpy(out[th - 1], p->data, n * sizeof(float));
        tape_backward(&t, op_sum(&t, op_mul(&t, p, w)));
        ga[th - 1] = malloc(n * sizeof(float));
        gb[th - 1] = malloc(n * sizeof(float));
        memcpy(ga[th - 1], a->grad, n * sizeof(float));
        memcpy(gb[th - 1], b->grad, n * sizeof(float));
        tape_free(&t);
    }
    gemm_set_threads(restore);
    size_t nonzero = 0;
    for (size_t i = 0; i < n; i++) nonzero += gb[0][i] != 0.0f;
    cr_expect_gt(nonzero, n / 4, "the gradient reaches through relu and softmax");
    for (int k = 1; k < 3; k++) {
        cr_expect_eq(memcmp(out[0], out[k], n * sizeof(float)), 0, "softmax output, %d threads", k + 1);
        cr_expect_eq(memcmp(ga[0], ga[k], n * sizeof(float)), 0, "gradient of a, %d threads", k + 1);
        cr_expect_eq(memcmp(gb[0], gb[k], n * sizeof(float)), 0, "gradient of b, %d threads", k + 1);
    }
    for (int k = 0; k < 3; k++) free(out[k]), free(ga[k]), free(gb[k]);
    free(mask);
    tensor_free(a);
    tensor_free(b);
    tensor_free(w);
}

/* The pool's edges: two callers at once (one runs its loop alone), a loop inside a loop (the
 * inner one on its caller), a chunk held up on one thread (the others take the rest), more
 * threads than cores, and a child of fork() (no workers of its own until it starts them). */
typedef struct Edge {
    unsigned char *hits;
    size_t n;
    int nested;
    atomic_int bad; /* set on a worker: Criterion's asserts belong to the test's thread */
} Edge;

static void edge_range(void *ctx, size_t b, size_t e) {
    Edge *x = ctx;
    if (b == 0) nanosleep(&(struct timespec){0, 2000000}, NULL); /* one chunk late: the others go on */
    for (size_t i = b; i < e; i++) {
        if (x->nested) {
            unsigned char inner[70000] = {0};
            par_for(sizeof inner, 1, count_range, inner);
            for (size_t k = 0; k < sizeof inner; k++)
                if (inner[k] != 1) atomic_store(&x->bad, 1);
        }
        x->hits[i]++;
    }
}

static bool edge_run(size_t n, int nested) {
    Edge x = {calloc(n, 1), n, nested, 0};
    par_for(n, nested ? 1 << 16 : 1, edge_range, &x);
    bool ok = !atomic_load(&x.bad);
    for (size_t i = 0; i < n; i++) ok = ok && x.hits[i] == 1;
    free(x.hits);
    return ok;
}

static void *edge_thread(void *arg) {
    gemm_set_threads(2); /* a new thread's own OpenMP setting */
    bool ok = true;
    for (int r = 0; r < 50; r++) ok = ok && edge_run(200000 + (size_t)r, 0);
    *(bool *)arg = ok;
    return NULL;
}

Test(par, two_callers_nesting_late_chunks_and_fork) {
    int restore = omp_get_max_threads();
    for (int th = 2; th <= 5; th++) {
        gemm_set_threads(th);
        cr_assert(edge_run(300000, 0), "threads %d: a late chunk", th);
        cr_assert(edge_run(8, 1), "threads %d: a loop inside a loop", th);
    }
    gemm_set_threads(2);
    bool other = false;
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, edge_thread, &other), 0);
    bool mine = true;
    for (int r = 0; r < 50; r++) mine = mine && edge_run(250000 + (size_t)r, 0);
    pthread_join(t, NULL);
    cr_assert(mine && other, "two callers at once: %d %d", mine, other);
    pid_t pid = fork();
    if (pid == 0) _exit(edge_run(300000, 0) && edge_run(8, 1) ? 0 : 1);
    int status = -1;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a forked child's loop (status %d)", status);
    gemm_set_threads(restore);
}
