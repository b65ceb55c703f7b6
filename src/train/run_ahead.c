/* run_ahead.c — an epoch's batches read one ahead of the step (see run_internal.h).
 *
 * Two batches: the step trains on one while a reader thread fills the other with the next
 * batch of the plan, from a streamed dataset's file. The handoff is a mutex and a condition:
 * ahead_get(k) waits for batch k, then asks for k + 1, so the reader never writes the batch
 * the step reads. A dataset held in memory is read on the caller's thread (no thread). */
#include "run_internal.h"

#include <stdlib.h>
#include <string.h>

/* Rows of batch k this rank trains on: a contiguous part of the batch's sentences. */
static void ahead_rows(const RunAhead *a, int k, int *lo, int *n) {
    *lo = a->plan->start[k];
    *n = a->plan->start[k + 1] - a->plan->start[k];
    if (a->ranks > 1) {
        int P = a->ranks, me = a->rank, x = (int)((long)*n * me / P), z = (int)((long)*n * (me + 1) / P);
        *lo += x;
        *n = z - x;
    }
}

/* Batch k into slot s (B 0 when this rank has no rows of it). */
static void ahead_fill(RunAhead *a, int s, int k) {
    int lo, n;
    ahead_rows(a, k, &lo, &n);
    a->st[s] = n > 0 ? batch_read(&a->b[s], a->d, a->plan->order + lo, n, &a->err[s]) : S2S_OK;
    if (n == 0) a->b[s].B = 0;
}

static void *ahead_main(void *arg) {
    RunAhead *a = arg;
    pthread_mutex_lock(&a->mu);
    for (;;) {
        while (!a->quit && a->want < 0) pthread_cond_wait(&a->cv, &a->mu);
        if (a->quit) break;
        int k = a->want, s = k % 2;
        a->want = -1;
        a->busy = k;
        pthread_mutex_unlock(&a->mu);
        ahead_fill(a, s, k); /* the other slot is the step's: untouched */
        pthread_mutex_lock(&a->mu);
        a->have[s] = k;
        a->busy = -1;
        pthread_cond_broadcast(&a->cv);
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

void ahead_start(RunAhead *a, const Dataset *d, const BatchPlan *plan, int first, const Dist *dist) {
    memset(a, 0, sizeof *a);
    a->d = d;
    a->plan = plan;
    a->ranks = dist ? dist->size : 1;
    a->rank = dist ? dist->rank : 0;
    a->have[0] = a->have[1] = a->want = a->busy = -1;
    batch_init(&a->b[0]);
    batch_init(&a->b[1]);
    a->threaded = d->streamed && first < plan->n_batches;
    if (!a->threaded) return;
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    a->want = first;
    if (pthread_create(&a->th, NULL, ahead_main, a) != 0) { /* no thread: read on the caller's */
        pthread_mutex_destroy(&a->mu);
        pthread_cond_destroy(&a->cv);
        a->threaded = false;
        a->want = -1;
    }
}

S2sStatus ahead_get(RunAhead *a, int k, Batch **b, S2sError *err) {
    int s = k % 2;
    if (!a->threaded) {
        ahead_fill(a, s, k);
    } else {
        pthread_mutex_lock(&a->mu);
        if (a->have[s] != k && a->want != k && a->busy != k) a->want = k; /* not asked for: ask now */
        pthread_cond_broadcast(&a->cv);
        while (a->have[s] != k) pthread_cond_wait(&a->cv, &a->mu);
        if (k + 1 < a->plan->n_batches) { /* the next one, into the slot the last step used */
            a->have[s ^ 1] = -1;
            a->want = k + 1;
            pthread_cond_broadcast(&a->cv);
        }
        pthread_mutex_unlock(&a->mu);
    }
    if (a->st[s]) {
        *err = a->err[s];
        return a->st[s];
    }
    *b = &a->b[s];
    return S2S_OK;
}

void ahead_stop(RunAhead *a) {
    if (a->threaded) {
        pthread_mutex_lock(&a->mu);
        a->quit = true;
        pthread_cond_broadcast(&a->cv);
        pthread_mutex_unlock(&a->mu);
        pthread_join(a->th, NULL);
        pthread_mutex_destroy(&a->mu);
        pthread_cond_destroy(&a->cv);
    }
    batch_free(&a->b[0]);
    batch_free(&a->b[1]);
    memset(a, 0, sizeof *a);
}
