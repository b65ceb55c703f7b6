/* dist_bench.c — the ranks' gradient sum (dist_sum_floats), timed: run under mpirun.
 *   mpirun -np 2 build/bench/dist_bench [FLOATS [REPS]]
 * prints one JSON line: the size, the time per sum and the algorithm bandwidth (bytes summed
 * per second: 4 · FLOATS / time), the figure a gradient allreduce of that size costs per step;
 * with FLOATS = 1, the time is the sum's latency. add_ms times the additions alone (memory
 * bound), the part of a sum that a faster network does not shorten. */
#define _POSIX_C_SOURCE 200809L
#include "s2s/dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    Dist d;
    S2sError err;
    if (dist_init(&d, &argc, &argv, &err)) {
        fprintf(stderr, "dist_bench: %s\n", err.msg);
        return 1;
    }
    size_t n = argc > 1 ? (size_t)strtoull(argv[1], NULL, 10) : 6103465; /* multi30k-best's parameters */
    int reps = argc > 2 ? atoi(argv[2]) : 20;
    if (reps < 1) reps = 1;
    float *x = malloc(n * sizeof *x), *scratch = malloc((dist_scratch_floats(&d, n) + 1) * sizeof *scratch);
    for (size_t i = 0; i < n; i++) x[i] = (float)(i % 97) * 1e-3f;
    dist_sum_floats(&d, x, n, scratch); /* warm-up: the transports' buffers */
    dist_barrier(&d);
    double t0 = now();
    for (int r = 0; r < reps; r++) dist_sum_floats(&d, x, n, scratch);
    dist_barrier(&d);
    double dt = (now() - t0) / reps;
    /* the additions alone, as an owner does them for two ranks: half the gradient from two
     * halves (all of it read, half written); a machine's own work in any sum, the network aside */
    size_t h = n / 2;
    double t1 = now();
    for (int r = 0; r < reps; r++)
        for (size_t i = 0; i < h; i++) scratch[i] = x[i] + x[h + i];
    double add = (now() - t1) / reps;
    if (d.rank == 0)
        printf("{\"event\":\"dist_sum\",\"ranks\":%d,\"floats\":%zu,\"mb\":%.1f,\"reps\":%d,\"ms\":%.4f,\"gb_per_s\":%.3f,"
               "\"add_ms\":%.4f,\"check\":%g}\n",
               d.size, n, 4e-6 * (double)n, reps, 1e3 * dt, 4e-9 * (double)n / dt, 1e3 * add, h ? (double)scratch[h - 1] : 0.0);
    free(x);
    free(scratch);
    dist_finalize(&d);
    return 0;
}
