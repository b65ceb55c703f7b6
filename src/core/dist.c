/* dist.c — ranks, fixed-order sums and broadcasts over MPI, or one rank without it. */
#include "s2s/dist.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#ifdef S2S_MPI
#include <mpi.h>
#endif

bool dist_available(void) {
#ifdef S2S_MPI
    return true;
#else
    return false;
#endif
}

/* mpirun (Open MPI, or a PMI launcher) says so in the environment. */
static bool launched_by_mpirun(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
}

S2sStatus dist_init(Dist *d, int *argc, char ***argv, S2sError *err) {
    *d = (Dist){0, 1, false};
#ifdef S2S_MPI
    if (!launched_by_mpirun()) return S2S_OK;
    if (MPI_Init(argc, argv) != MPI_SUCCESS) return s2s_fail(err, S2S_ERR_IO, "MPI_Init failed: the MPI job cannot start");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL); /* a lost rank ends the job, never a hang */
    MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &d->size);
    d->mpi = true;
#else
    (void)argc, (void)argv, (void)err, (void)launched_by_mpirun;
#endif
    return S2S_OK;
}

void dist_finalize(Dist *d) {
#ifdef S2S_MPI
    if (d->mpi) MPI_Finalize();
#endif
    d->mpi = false;
}

void dist_abort(const Dist *d, int code) {
#ifdef S2S_MPI
    if (d->mpi) MPI_Abort(MPI_COMM_WORLD, code);
#else
    (void)d, (void)code;
#endif
}

static size_t chunk(const Dist *d, size_t n) { return (n + (size_t)d->size - 1) / (size_t)d->size; }

size_t dist_scratch_floats(const Dist *d, size_t n) { return d->size > 1 ? 2 * (size_t)d->size * chunk(d, n) : 0; }

void dist_sum_floats(const Dist *d, float *x, size_t n, float *scratch) {
    if (d->size == 1 || n == 0) return;
#ifdef S2S_MPI
    size_t P = (size_t)d->size, k = chunk(d, n);
    S2S_ASSERT_MSG(k <= INT_MAX, "a chunk of %zu floats is more than MPI counts", k);
    float *send = scratch, *recv = scratch + P * k;
    memcpy(send, x, n * sizeof *x);
    memset(send + n, 0, (P * k - n) * sizeof *send);
    /* chunk j of every rank to rank j: recv holds this rank's chunk from ranks 0 … P−1 */
    MPI_Alltoall(send, (int)k, MPI_FLOAT, recv, (int)k, MPI_FLOAT, MPI_COMM_WORLD);
    float *mine = send; /* the sum of this rank's chunk, over the ranks in order */
    for (size_t i = 0; i < k; i++) mine[i] = recv[i];
    for (size_t j = 1; j < P; j++)
        for (size_t i = 0; i < k; i++) mine[i] += recv[j * k + i];
    MPI_Allgather(mine, (int)k, MPI_FLOAT, recv, (int)k, MPI_FLOAT, MPI_COMM_WORLD);
    memcpy(x, recv, n * sizeof *x);
#else
    (void)x, (void)scratch;
#endif
}

void dist_sum_doubles(const Dist *d, double *x, int n) {
    if (d->size == 1 || n == 0) return;
#ifdef S2S_MPI
    double *all = s2s_xmalloc((size_t)d->size * (size_t)n * sizeof *all);
    MPI_Allgather(x, n, MPI_DOUBLE, all, n, MPI_DOUBLE, MPI_COMM_WORLD);
    for (int i = 0; i < n; i++) {
        double s = all[i];
        for (int r = 1; r < d->size; r++) s += all[(size_t)r * n + i];
        x[i] = s;
    }
    free(all);
#endif
}

int dist_max_int(const Dist *d, int x) {
#ifdef S2S_MPI
    if (d->size > 1) {
        int y;
        MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        return y;
    }
#else
    (void)d;
#endif
    return x;
}

void dist_bcast(const Dist *d, void *buf, size_t bytes, int root) {
    if (d->size == 1) return;
#ifdef S2S_MPI
    for (size_t off = 0; off < bytes;) { /* MPI counts are ints */
        size_t part = bytes - off > (size_t)1 << 30 ? (size_t)1 << 30 : bytes - off;
        MPI_Bcast((char *)buf + off, (int)part, MPI_BYTE, root, MPI_COMM_WORLD);
        off += part;
    }
#else
    (void)buf, (void)bytes, (void)root;
#endif
}

void dist_barrier(const Dist *d) {
#ifdef S2S_MPI
    if (d->size > 1) MPI_Barrier(MPI_COMM_WORLD);
#else
    (void)d;
#endif
}
