/* dist.h — data-parallel training's communication: the ranks of an MPI job (Open MPI), or one
 * rank when the build has no MPI or the program was not started by mpirun.
 *
 * Sums are in a fixed order: every element is added over the ranks 0, 1, …, P−1 by the rank
 * that owns its chunk, then the sums are gathered, so the same inputs on the same rank count
 * give the same bits on every rank and in every run (MPI's own allreduce promises neither).
 * A Dist is a value the program owns (no globals); MPI's state is the library's. */
#ifndef S2S_DIST_H
#define S2S_DIST_H

#include "s2s/common.h"

typedef struct Dist {
    int rank, size;   /* 0 and 1 without MPI */
    bool mpi;         /* MPI_Init was called (and dist_finalize must be) */
} Dist;

/* Whether this build can run several ranks. */
bool dist_available(void);
/* MPI_Init when the build has MPI and the process was started by mpirun (its environment
 * says so); else one rank. An MPI that fails to start is an error (S2S_ERR_IO). */
S2sStatus dist_init(Dist *d, int *argc, char ***argv, S2sError *err);
void dist_finalize(Dist *d);
/* Ends every rank of the job with code (a rank that cannot go on: the others must not wait). */
void dist_abort(const Dist *d, int code);

/* x[0 .. n) summed over the ranks, in rank order, into x on every rank. scratch holds at least
 * dist_scratch_floats(d, n) floats. */
size_t dist_scratch_floats(const Dist *d, size_t n);
void dist_sum_floats(const Dist *d, float *x, size_t n, float *scratch);
/* A few doubles summed in rank order (token counts, losses), the same on every rank. */
void dist_sum_doubles(const Dist *d, double *x, int n);
/* The largest of each rank's x (a stop request on any rank stops all). */
int dist_max_int(const Dist *d, int x);
/* bytes from root to every rank. */
void dist_bcast(const Dist *d, void *buf, size_t bytes, int root);
void dist_barrier(const Dist *d);

#endif
