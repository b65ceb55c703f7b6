/* dist_check.c — run under mpirun by test_dist.c: every rank's sums must be the rank-order
 * sums of the inputs (which each rank can make for all ranks), bit for bit, on every rank;
 * exits 0 when they are, prints the first difference and exits 1 otherwise. */
#include "s2s/dist.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Rank r's value i: values of several magnitudes, so that the order of the additions shows. */
static float value(int r, size_t i) { return (float)(sin((double)(i * 7 + (size_t)r * 13)) * pow(10.0, (double)((i + (size_t)r) % 7) - 3)); }

int main(int argc, char **argv) {
    Dist d;
    S2sError err;
    if (dist_init(&d, &argc, &argv, &err)) {
        fprintf(stderr, "dist_check: %s\n", err.msg);
        return 1;
    }
    int bad = 0;
    size_t sizes[] = {1, 2, 3, 7, 1000, 100003};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes && !bad; s++) {
        size_t n = sizes[s];
        float *x = malloc(n * sizeof *x), *scratch = malloc((dist_scratch_floats(&d, n) + 1) * sizeof *scratch);
        for (size_t i = 0; i < n; i++) x[i] = value(d.rank, i);
        dist_sum_floats(&d, x, n, scratch);
        for (size_t i = 0; i < n && !bad; i++) {
            float want = value(0, i);
            for (int r = 1; r < d.size; r++) want += value(r, i);
            if (memcmp(&want, &x[i], sizeof want)) {
                fprintf(stderr, "rank %d: n %zu element %zu: %.9g, the rank-order sum is %.9g\n", d.rank, n, i, x[i], want);
                bad = 1;
            }
        }
        free(x);
        free(scratch);
    }
    double t[2] = {0.1 * (d.rank + 1), 1e20 * (d.rank % 2 ? -1 : 1)}, want[2] = {0, 0};
    for (int r = 0; r < d.size; r++) want[0] += 0.1 * (r + 1), want[1] += 1e20 * (r % 2 ? -1 : 1);
    dist_sum_doubles(&d, t, 2);
    if (memcmp(t, want, sizeof t)) {
        fprintf(stderr, "rank %d: doubles %.17g %.17g, want %.17g %.17g\n", d.rank, t[0], t[1], want[0], want[1]);
        bad = 1;
    }
    if (dist_max_int(&d, d.rank == d.size - 1 ? 42 : d.rank) != 42) { /* the last rank's 42, on every rank */
        fprintf(stderr, "rank %d: max\n", d.rank);
        bad = 1;
    }
    char msg[32] = "";
    if (d.rank == 0) snprintf(msg, sizeof msg, "from rank 0 of %d", d.size);
    dist_bcast(&d, msg, sizeof msg, 0);
    char want_msg[32];
    snprintf(want_msg, sizeof want_msg, "from rank 0 of %d", d.size);
    if (strcmp(msg, want_msg)) {
        fprintf(stderr, "rank %d: broadcast gave \"%s\"\n", d.rank, msg);
        bad = 1;
    }
    bad = dist_max_int(&d, bad);
    if (d.rank == 0) printf("dist_check: %d ranks%s\n", d.size, bad ? ": FAILED" : ": sums in rank order on every rank");
    dist_finalize(&d);
    return bad;
}
