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
    *d = (Dist){0, 1, 1, false};
#ifdef S2S_MPI
    if (!launched_by_mpirun()) return S2S_OK;
    if (MPI_Init(argc, argv) != MPI_SUCCESS) return s2s_fail(err, S2S_ERR_IO, "MPI_Init failed: the MPI job cannot start");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL); /* a lost rank ends the job, never a hang */
    MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &d->size);
    /* the machines: ranks that share memory form one group; count the groups' first ranks */
    MPI_Comm local;
    int local_rank, first;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &local_rank);
    MPI_Comm_free(&local);
    first = local_rank == 0;
    MPI_Allreduce(&first, &d->machines, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
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

/* The two halves of a sum, shared by the blocking and the bucketed one: x (times scale) into
 * the send buffer, padded to P chunks of k; then this rank's chunk summed over the ranks in
 * order (recv holds it from ranks 0 … P−1), into send. */
static void sum_pack(float *send, const float *x, size_t n, size_t P, size_t k, float scale) {
    if (scale == 1.0f) memcpy(send, x, n * sizeof *x);
    else
        for (size_t i = 0; i < n; i++) send[i] = x[i] * scale;
    memset(send + n, 0, (P * k - n) * sizeof *send);
}

static void sum_mine(float *mine, const float *recv, size_t P, size_t k) {
    for (size_t i = 0; i < k; i++) mine[i] = recv[i];
    for (size_t j = 1; j < P; j++)
        for (size_t i = 0; i < k; i++) mine[i] += recv[j * k + i];
}

void dist_sum_floats(const Dist *d, float *x, size_t n, float *scratch) {
    if (d->size == 1 || n == 0) return;
#ifdef S2S_MPI
    size_t P = (size_t)d->size, k = chunk(d, n);
    S2S_ASSERT_MSG(k <= INT_MAX, "a chunk of %zu floats is more than MPI counts", k);
    float *send = scratch, *recv = scratch + P * k;
    sum_pack(send, x, n, P, k, 1.0f);
    /* chunk j of every rank to rank j: recv holds this rank's chunk from ranks 0 … P−1 */
    MPI_Alltoall(send, (int)k, MPI_FLOAT, recv, (int)k, MPI_FLOAT, MPI_COMM_WORLD);
    sum_mine(send, recv, P, k);
    MPI_Allgather(send, (int)k, MPI_FLOAT, recv, (int)k, MPI_FLOAT, MPI_COMM_WORLD);
    memcpy(x, recv, n * sizeof *x);
#else
    (void)x, (void)scratch, (void)sum_pack, (void)sum_mine;
#endif
}

/* ---- the bucketed sum: buckets started while backward still runs, in an agreed order ---- */

typedef enum BucketPhase { B_IDLE, B_EXCHANGE, B_GATHER, B_DONE } BucketPhase;

typedef struct Bucket {
    size_t from, to; /* x[from .. to) */
    size_t k;        /* chunk: ceil((to − from) / P) */
    float *send, *recv;
    BucketPhase phase;
#ifdef S2S_MPI
    MPI_Request req;
#endif
} Bucket;

struct DistSum {
    const Dist *d;
    Bucket *b;
    int n;        /* buckets, ascending in x */
    int *started; /* bucket indices in the order they went */
    int n_started;
    int n_gathered; /* started[0 .. n_gathered) have started their gather */
    float *x, scale;
    float *scratch;
#ifdef S2S_MPI
    /* one communicator for the exchanges and one for the gathers: each sees its collectives
     * in the same order on every rank, whatever the timing */
    MPI_Comm exchange, gather;
#endif
};

DistSum *dist_sum_new(const Dist *d, size_t n, const size_t *cuts, int n_cuts) {
    DistSum *s = s2s_xcalloc(1, sizeof *s);
    s->d = d;
    s->b = s2s_xcalloc((size_t)n_cuts + 1, sizeof *s->b);
    s->started = s2s_xcalloc((size_t)n_cuts + 1, sizeof *s->started);
    size_t P = (size_t)d->size, floats = 0, from = 0;
    for (int i = 0; i <= n_cuts; i++) {
        size_t to = i < n_cuts ? cuts[i] : n;
        S2S_ASSERT(to >= from && to <= n);
        if (to == from) continue;
        Bucket *b = &s->b[s->n++];
        b->from = from, b->to = to, b->k = chunk(d, to - from);
        S2S_ASSERT_MSG(b->k <= INT_MAX, "a chunk of %zu floats is more than MPI counts", b->k);
        floats += 2 * P * b->k;
        from = to;
    }
    s->scratch = s2s_xmalloc((floats + 1) * sizeof *s->scratch);
    float *p = s->scratch;
    for (int i = 0; i < s->n; i++) {
        s->b[i].send = p, s->b[i].recv = p + P * s->b[i].k;
        p += 2 * P * s->b[i].k;
    }
#ifdef S2S_MPI
    if (d->size > 1) {
        MPI_Comm_dup(MPI_COMM_WORLD, &s->exchange);
        MPI_Comm_dup(MPI_COMM_WORLD, &s->gather);
    }
#endif
    return s;
}

void dist_sum_free(DistSum *s) {
    if (!s) return;
#ifdef S2S_MPI
    if (s->d->size > 1) {
        MPI_Comm_free(&s->exchange);
        MPI_Comm_free(&s->gather);
    }
#endif
    free(s->scratch);
    free(s->started);
    free(s->b);
    free(s);
}

int dist_sum_buckets(const DistSum *s) { return s->n; }

void dist_sum_bucket(const DistSum *s, int i, size_t *from, size_t *to) {
    S2S_ASSERT(i >= 0 && i < s->n);
    *from = s->b[i].from;
    *to = s->b[i].to;
}

void dist_sum_start(DistSum *s, float *x, float scale) {
    s->x = x, s->scale = scale;
    s->n_started = s->n_gathered = 0;
    for (int i = 0; i < s->n; i++) s->b[i].phase = B_IDLE;
}

void dist_sum_poll(DistSum *s) {
#ifdef S2S_MPI
    /* an exchange that has arrived is summed and its gather started, in the order the buckets
     * went (a later one waits for those before it); a gather that has arrived goes into x */
    size_t P = (size_t)s->d->size;
    for (int q = 0; q < s->n_started; q++) {
        Bucket *b = &s->b[s->started[q]];
        int done = 0;
        if (b->phase == B_EXCHANGE && q == s->n_gathered && (MPI_Test(&b->req, &done, MPI_STATUS_IGNORE), done)) {
            sum_mine(b->send, b->recv, P, b->k);
            MPI_Iallgather(b->send, (int)b->k, MPI_FLOAT, b->recv, (int)b->k, MPI_FLOAT, s->gather, &b->req);
            b->phase = B_GATHER;
            s->n_gathered++;
        }
        if (b->phase == B_GATHER && (MPI_Test(&b->req, &done, MPI_STATUS_IGNORE), done)) {
            memcpy(s->x + b->from, b->recv, (b->to - b->from) * sizeof *s->x);
            b->phase = B_DONE;
        }
    }
#else
    (void)s;
#endif
}

void dist_sum_go(DistSum *s, int i) {
    S2S_ASSERT(i >= 0 && i < s->n && s->b[i].phase == B_IDLE);
    Bucket *b = &s->b[i];
    s->started[s->n_started++] = i;
    if (s->d->size == 1) { /* nothing to add: the scale alone */
        if (s->scale != 1.0f)
            for (size_t j = b->from; j < b->to; j++) s->x[j] *= s->scale;
        b->phase = B_DONE;
        return;
    }
#ifdef S2S_MPI
    size_t P = (size_t)s->d->size;
    sum_pack(b->send, s->x + b->from, b->to - b->from, P, b->k, s->scale);
    MPI_Ialltoall(b->send, (int)b->k, MPI_FLOAT, b->recv, (int)b->k, MPI_FLOAT, s->exchange, &b->req);
    b->phase = B_EXCHANGE;
    dist_sum_poll(s);
#endif
}

void dist_sum_finish(DistSum *s) {
    for (int i = s->n - 1; i >= 0; i--)
        if (s->b[i].phase == B_IDLE) dist_sum_go(s, i);
    for (int q = 0; q < s->n_started; q++)
        while (s->b[s->started[q]].phase != B_DONE) dist_sum_poll(s);
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
#else
    (void)x; /* one rank: the sum is x */
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
