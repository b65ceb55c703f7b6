/* par.c — ranges over the library's own thread pool (see par.h). */
#define _GNU_SOURCE /* syscall(SYS_futex) */
#include "s2s/par.h"
#include "s2s/common.h"
#include "s2s/bf16.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

extern int omp_get_max_threads(void); /* the thread count the caller set (gemm_set_threads) */

/* How long a thread spins before it sleeps: long enough to catch the next loop of a training
 * step (they come every 10–100 µs), short enough that on a busy machine a waiting thread gives
 * its core back within a twentieth of a time slice. */
#define PAR_SPIN_NS 50000L
#define PAR_MAX_WORKERS 255
/* chunks per thread: a thread that is descheduled holds one chunk, not its whole share */
#define PAR_CHUNKS_PER_THREAD 4

/* A job's chunks are dealt to its threads (slots), PAR_CHUNKS_PER_THREAD each: a thread runs its
 * own first (the rows it touched in the previous loop), then takes what is left of the others'.
 * A slot's counter hands out its chunks; the job's fields are written before the counters are
 * reset and stay until every chunk is done, so whoever takes a chunk reads the job it belongs
 * to, even a worker still waking for the previous job. */
typedef struct ParSlot {
    _Alignas(64) atomic_uint next;
} ParSlot;

typedef struct ParPool {
    pthread_mutex_t lock; /* one caller at a time; the others run their loops alone */
    int workers;          /* started */
    /* the job */
    size_t n, align, units;
    ParFn fn;
    void *ctx;
    ParSlot slot[PAR_MAX_WORKERS + 1];
    atomic_uint done;       /* chunks finished */
    atomic_uint joined;     /* threads that took part (the caller is the first) */
    atomic_int active_slots; /* the job's thread count */
    atomic_uint gen;        /* bumped per job: what idle workers wait on */
    atomic_int sleepers;    /* workers in futex_wait on gen */
    atomic_int caller_asleep;
    atomic_int parked; /* a GEMM runs on oneDNN's threads: idle workers sleep at once */
} ParPool;

/* The process's threads, as OpenMP's are: one pool, whichever engine or thread calls. */
static ParPool g_pool = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void futex_wait(atomic_uint *addr, unsigned val) {
    syscall(SYS_futex, (unsigned *)addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake_all(atomic_uint *addr) { syscall(SYS_futex, (unsigned *)addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0); }

static long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Spins until *addr != val, PAR_SPIN_NS pass or *stop is set; true when it changed. */
static bool spin_while(atomic_uint *addr, unsigned val, atomic_int *stop) {
    long start = 0;
    for (unsigned i = 1;; i++) {
        if (atomic_load_explicit(addr, memory_order_acquire) != val) return true;
        if (stop && atomic_load_explicit(stop, memory_order_relaxed)) return false;
        cpu_relax();
        if (i % 64 == 0) {
            long t = now_ns();
            if (!start) start = t;
            else if (t - start > PAR_SPIN_NS) return false;
        }
    }
}

/* Runs the chunks left in slot `own`, then in the others; returns how many it ran. */
static unsigned run_chunks(ParPool *p, int own) {
    unsigned ran = 0;
    int seen = atomic_load(&p->active_slots); /* may be the previous job's: only picks the order */
    for (int i = 0; i < seen; i++) {
        int j = (own + i) % seen;
        unsigned k;
        while ((k = atomic_fetch_add_explicit(&p->slot[j].next, 1, memory_order_acq_rel)) < PAR_CHUNKS_PER_THREAD) {
            /* a chunk taken belongs to the job that reset this counter: read its thread count */
            unsigned total = (unsigned)atomic_load(&p->active_slots) * PAR_CHUNKS_PER_THREAD;
            size_t c = (size_t)j * PAR_CHUNKS_PER_THREAD + k;
            size_t b = p->units * c / total * p->align, e = p->units * (c + 1) / total * p->align;
            if (e > p->n) e = p->n;
            if (b < e) p->fn(p->ctx, b, e);
            ran++;
            /* seq_cst, as the caller's flag and load: it sees the count, or this thread sees it asleep */
            if (atomic_fetch_add(&p->done, 1) + 1 == total && atomic_load(&p->caller_asleep)) futex_wake_all(&p->done);
        }
    }
    return ran;
}

static void *par_worker(void *arg) {
    ParPool *p = arg;
    unsigned seen = atomic_load(&p->gen);
    for (;;) {
        while (!spin_while(&p->gen, seen, &p->parked)) { /* woken by a job (or spuriously) */
            atomic_fetch_add(&p->sleepers, 1);
            if (atomic_load(&p->gen) == seen) futex_wait(&p->gen, seen);
            atomic_fetch_sub(&p->sleepers, 1);
        }
        seen = atomic_load(&p->gen);
        /* a job wants threads - 1 helpers; a pool started for more threads keeps the rest idle */
        unsigned me = atomic_fetch_add(&p->joined, 1);
        if (me < (unsigned)atomic_load(&p->active_slots)) run_chunks(p, (int)me);
    }
    return NULL;
}

/* A child of fork() has none of the parent's workers: it starts its own when it needs them. */
static void par_after_fork(void) {
    pthread_mutex_init(&g_pool.lock, NULL);
    g_pool.workers = 0;
    atomic_store(&g_pool.sleepers, 0);
    for (int i = 0; i <= PAR_MAX_WORKERS; i++) atomic_store(&g_pool.slot[i].next, PAR_CHUNKS_PER_THREAD);
}

/* Slots no job uses hold no chunks. */
static void par_init(void) {
    par_after_fork();
    pthread_atfork(NULL, NULL, par_after_fork);
}

/* Starts workers up to `want`; with fewer (no threads to be had), the caller does the rest. */
static void par_grow(ParPool *p, int want) {
    if (want > PAR_MAX_WORKERS) want = PAR_MAX_WORKERS;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* signals go to the threads the program chose */
    while (p->workers < want) {
        pthread_t t;
        if (pthread_create(&t, NULL, par_worker, p) != 0) break;
        pthread_detach(t);
        p->workers++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* Chunks cut at multiples of align (64 items when n is large, so threads do not share cache
 * lines); the caller takes part and waits only for chunks already begun. */
static void par_run(ParPool *p, size_t n, ParFn fn, void *ctx, int threads) {
    p->n = n;
    p->align = n >= 1024 ? 64 : 1;
    p->units = (n + p->align - 1) / p->align;
    p->fn = fn;
    p->ctx = ctx;
    unsigned total = (unsigned)threads * PAR_CHUNKS_PER_THREAD;
    atomic_store(&p->active_slots, threads);
    atomic_store(&p->done, 0);
    atomic_store(&p->joined, 1);
    for (int i = 0; i < threads; i++) atomic_store_explicit(&p->slot[i].next, 0, memory_order_release);
    atomic_fetch_add(&p->gen, 1);
    if (atomic_load(&p->sleepers) > 0) futex_wake_all(&p->gen);
    run_chunks(p, 0);
    unsigned d;
    while ((d = atomic_load_explicit(&p->done, memory_order_acquire)) < total) {
        if (spin_while(&p->done, d, NULL)) continue;
        atomic_store(&p->caller_asleep, 1);
        while ((d = atomic_load(&p->done)) < total) futex_wait(&p->done, d);
        atomic_store(&p->caller_asleep, 0);
    }
}

void par_park(void) { atomic_fetch_add_explicit(&g_pool.parked, 1, memory_order_relaxed); }

/* The workers stay asleep until the next loop wakes them: waking them here as well cost the
 * Transformer's training 1-4 % (GEMMs follow GEMMs) and gained the RNN nothing. */
void par_unpark(void) { atomic_fetch_sub_explicit(&g_pool.parked, 1, memory_order_relaxed); }

void par_for(size_t n, size_t work, ParFn fn, void *ctx) {
    int threads = omp_get_max_threads();
    if (threads > PAR_MAX_WORKERS + 1) threads = PAR_MAX_WORKERS + 1;
    if (threads <= 1 || n < 2 || n * (work ? work : 1) < PAR_MIN_WORK || pthread_mutex_trylock(&g_pool.lock)) {
        if (n) fn(ctx, 0, n); /* one thread, little work, or the pool busy with another caller's loop */
        return;
    }
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, par_init);
    if (g_pool.workers < threads - 1) par_grow(&g_pool, threads - 1);
    par_run(&g_pool, n, fn, ctx, threads);
    pthread_mutex_unlock(&g_pool.lock);
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
