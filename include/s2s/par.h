/* par.h — loops split over the library's own threads, as many as the GEMMs use.
 *
 * par_for runs fn(ctx, begin, end) on disjoint ranges covering [0, n): four chunks a thread
 * (cut at multiples of 64 items when n is large, so threads do not share cache lines), each
 * thread its own first, then whatever the others have not begun, so that a thread the system
 * has descheduled holds up one chunk; with one thread, or less than PAR_MIN_WORK in all
 * (n × work, work being an item's cost in elements), on the caller alone, as when another
 * thread's loop has the pool or fn itself calls par_for. Elementwise work gives the same bits
 * whatever the split; reductions must not depend on it (par_sum_sq sums fixed blocks in block
 * order). The thread count is the caller's OpenMP setting (gemm_set_threads).
 * Owns the process's pool (par.c: workers started on first use, spinning 50 µs then sleeping;
 * a child of fork() starts its own). */
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

/* Around a GEMM that runs on oneDNN's (OpenMP) threads: the pool's idle workers sleep instead
 * of spinning, so that on few cores they do not take a core from the GEMM's threads. Calls
 * nest and may come from any thread. */
void par_park(void);
void par_unpark(void);

/* Σ x_i² in double: blocks of a size set by n alone, each with 8 partial sums, added in
 * block order; the same bits on any number of threads. */
double par_sum_sq(const float *x, size_t n);

/* memset(x, 0, n floats) split over the threads. */
void par_zero(float *x, size_t n);

/* bf16_from_f32(x, y, n) split over the threads (element by element: the same bits). */
void par_bf16_from_f32(const float *x, uint16_t *y, size_t n);

#endif
