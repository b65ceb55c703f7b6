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
    int machines;     /* the hosts the ranks run on (ranks that share memory count as one) */
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
/* The same sum in buckets that start while the values are still being made (a gradient
 * block during backward). The bucket bounds are fixed when made (cuts: ascending offsets, the
 * same on every rank); every rank must start the buckets in the same order (dist_sum_go), as
 * their collectives pair up by order. Every element is summed in rank order as
 * dist_sum_floats sums it: the same bits however the buckets go. Transfers move on in
 * dist_sum_go and dist_sum_poll (call it often) and dist_sum_finish, which starts the
 * buckets not started yet (from the last down) and waits for all. */
typedef struct DistSum DistSum;
DistSum *dist_sum_new(const Dist *d, size_t n, const size_t *cuts, int n_cuts); /* every rank at once */
void dist_sum_free(DistSum *s);
int dist_sum_buckets(const DistSum *s);
void dist_sum_bucket(const DistSum *s, int i, size_t *from, size_t *to);
/* A new sum of x (n floats, each times scale before the sum). */
void dist_sum_start(DistSum *s, float *x, float scale);
void dist_sum_go(DistSum *s, int bucket);
void dist_sum_poll(DistSum *s);
/* x holds the sum on return. */
void dist_sum_finish(DistSum *s);
/* A few doubles summed in rank order (token counts, losses), the same on every rank. */
void dist_sum_doubles(const Dist *d, double *x, int n);
/* The largest of each rank's x (a stop request on any rank stops all). */
int dist_max_int(const Dist *d, int x);
/* bytes from root to every rank. */
void dist_bcast(const Dist *d, void *buf, size_t bytes, int root);
void dist_barrier(const Dist *d);

#endif
