/* par.c — ranges over libgomp's threads (see par.h). */
#include "s2s/par.h"
#include "s2s/common.h"
#include "s2s/bf16.h"

#include <string.h>

/* libgomp's entry points (what `#pragma omp parallel` compiles to under gcc) */
extern void GOMP_parallel(void (*fn)(void *), void *data, unsigned num_threads, unsigned flags);
extern int omp_get_thread_num(void);
extern int omp_get_num_threads(void);
extern int omp_get_max_threads(void);

typedef struct ParJob {
    size_t n, align;
    ParFn fn;
    void *ctx;
} ParJob;

static void par_run(void *data) {
    const ParJob *j = data;
    size_t nth = (size_t)omp_get_num_threads(), id = (size_t)omp_get_thread_num();
    size_t units = (j->n + j->align - 1) / j->align;
    size_t b = units * id / nth * j->align, e = units * (id + 1) / nth * j->align;
    if (e > j->n) e = j->n;
    if (b < e) j->fn(j->ctx, b, e);
}

void par_for(size_t n, size_t work, ParFn fn, void *ctx) {
    int threads = omp_get_max_threads();
    if (threads <= 1 || n < 2 || n * (work ? work : 1) < PAR_MIN_WORK) {
        if (n) fn(ctx, 0, n);
        return;
    }
    ParJob j = {n, n >= 1024 ? 64 : 1, fn, ctx};
    GOMP_parallel(par_run, &j, (unsigned)threads, 0);
}

enum { SUM_BLOCKS = 1024 };

typedef struct SumSq {
    const float *x;
    size_t n, block;
    double part[SUM_BLOCKS];
} SumSq;

/* One block's sum: 8 partial sums, then added in a fixed tree. */
static double sum_sq_block(const float *x, size_t i, size_t end) {
    double acc[8] = {0};
    for (; i + 8 <= end; i += 8)
        for (int k = 0; k < 8; k++) acc[k] += (double)x[i + k] * x[i + k];
    for (; i < end; i++) acc[0] += (double)x[i] * x[i];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

static void sum_sq_blocks(void *ctx, size_t b0, size_t b1) {
    SumSq *s = ctx;
    for (size_t b = b0; b < b1; b++) {
        size_t i = b * s->block, end = i + s->block < s->n ? i + s->block : s->n;
        s->part[b] = sum_sq_block(s->x, i, end);
    }
}

enum { SUM_MIN_BLOCK = 4096 };

double par_sum_sq(const float *x, size_t n) {
    if (n <= SUM_MIN_BLOCK) return 0.0 + sum_sq_block(x, 0, n); /* one block: the same sum, no 8 KB of parts */
    SumSq s = {.x = x, .n = n};
    s.block = n / SUM_BLOCKS + 1;
    if (s.block < SUM_MIN_BLOCK) s.block = SUM_MIN_BLOCK;
    size_t blocks = (n + s.block - 1) / s.block;
    S2S_ASSERT(blocks <= SUM_BLOCKS);
    par_for(blocks, s.block, sum_sq_blocks, &s);
    double total = 0.0;
    for (size_t b = 0; b < blocks; b++) total += s.part[b];
    return total;
}

static void zero_range(void *ctx, size_t b, size_t e) { memset((float *)ctx + b, 0, (e - b) * sizeof(float)); }

void par_zero(float *x, size_t n) { par_for(n, 1, zero_range, x); }

typedef struct Bf16Copy {
    const float *x;
    uint16_t *y;
} Bf16Copy;

static void bf16_range(void *ctx, size_t b, size_t e) {
    const Bf16Copy *c = ctx;
    bf16_from_f32(c->x + b, c->y + b, e - b);
}

void par_bf16_from_f32(const float *x, uint16_t *y, size_t n) {
    Bf16Copy c = {x, y};
    par_for(n, 1, bf16_range, &c);
}
