/* test_dist.c — the ranks' sums: one rank without mpirun (sums are the values), and under
 * mpirun with 2 and 3 ranks (tests/mpi/dist_check.c) the rank-order sums bit for bit on
 * every rank, where the build has MPI and mpirun is installed. */
#include "test_util.h"
#include "s2s/dist.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

Test(dist, one_rank_without_mpirun) {
    Dist d;
    S2sError err;
    int argc = 1;
    char *args[] = {"x", NULL}, **argv = args;
    cr_assert_eq(dist_init(&d, &argc, &argv, &err), S2S_OK);
    cr_expect(d.rank == 0 && d.size == 1 && !d.mpi);
    float x[3] = {1.5f, -2, 3};
    cr_expect_eq(dist_scratch_floats(&d, 3), 0);
    dist_sum_floats(&d, x, 3, NULL);
    cr_expect(x[0] == 1.5f && x[1] == -2 && x[2] == 3);
    double y[2] = {0.25, 7};
    dist_sum_doubles(&d, y, 2);
    cr_expect(y[0] == 0.25 && y[1] == 7);
    cr_expect_eq(dist_max_int(&d, 5), 5);
    dist_finalize(&d);
}

Test(dist, sums_in_rank_order_under_mpirun, .timeout = 120) {
    if (!dist_available() || tu_sh("command -v mpirun > /dev/null") != 0) {
        cr_log_warn("no MPI in this build or no mpirun: the 2- and 3-rank sums are not run");
        return;
    }
    for (int np = 2; np <= 3; np++) {
        int rc = tu_sh("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 "
                       "mpirun -np %d %s/../tests/dist_check > /tmp/s2s_dist_%d.txt 2>&1",
                       np, tu_bin(), (int)getpid());
        char path[64];
        snprintf(path, sizeof path, "/tmp/s2s_dist_%d.txt", (int)getpid());
        char *out = tu_slurp(path, NULL);
        char want[64];
        snprintf(want, sizeof want, "dist_check: %d ranks: sums in rank order", np);
        cr_expect(rc == 0 && out && strstr(out, want), "mpirun -np %d: exit %d\n%s", np, rc, out ? out : "");
        free(out);
        unlink(path);
    }
}
