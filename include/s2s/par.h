/* par.h — loops split over the GEMM threads (libgomp's pool, which oneDNN already keeps warm).
 *
 * par_for runs fn(ctx, begin, end) on disjoint ranges covering [0, n), one range per
 * thread (cut at multiples of 64 items when n is large, so threads do not share cache
 * lines); with one thread, or less than PAR_MIN_WORK in all (n × work, work being an item's
 * cost in elements), on the caller alone. Elementwise work gives the same bits whatever the
 * split; reductions must not depend on it (par_sum_sq sums fixed blocks in block order).
 * Owns nothing. Calls libgomp's GOMP_parallel directly, so gcc and clang builds need no
 * -fopenmp and share the one OpenMP runtime oneDNN uses. */
#ifndef S2S_PAR_H
#define S2S_PAR_H

#include <stddef.h>
#include <stdint.h>

/* 64 K element-costs is 20–60 µs of work, against a fork of about a microsecond on a warm
 * pool: a decoding step's layer norms, softmaxes and quantising (160 rows × 256 in beam
 * search, 32 sentences × 5) then split.
 * At 1 << 20 they ran on one thread while the other spun: 2-thread decoding was 12–14 %
 * slower, and training no faster. */
#define PAR_MIN_WORK ((size_t)1 << 16)

typedef void (*ParFn)(void *ctx, size_t begin, size_t end);

void par_for(size_t n, size_t work, ParFn fn, void *ctx);

/* Σ x_i² in double: blocks of a size set by n alone, each with 8 partial sums, added in
 * block order; the same bits on any number of threads. */
double par_sum_sq(const float *x, size_t n);

/* memset(x, 0, n floats) split over the threads. */
void par_zero(float *x, size_t n);

/* bf16_from_f32(x, y, n) split over the threads (element by element: the same bits). */
void par_bf16_from_f32(const float *x, uint16_t *y, size_t n);

#endif
