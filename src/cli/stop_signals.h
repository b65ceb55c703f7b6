/* stop_signals.h — SIGINT, SIGTERM and SIGHUP as a request to stop, for the programs that
 * run long (train, serve): the signal number lands in g_stop, which the library polls.
 * Included by one program's main file; g_stop is that program's one global.
 *
 * The signals never interrupt the threads that compute: oneDNN 2.x's GEMM kernels point rsp
 * into the heap, and a handler running on that thread writes its frame there
 * (uxlfoundation/oneDNN#4845: heap corruption, seen here as an abort after Ctrl-C). So the
 * signals are blocked before any computing thread exists (OpenMP's and libmicrohttpd's
 * threads inherit the mask) and taken by one thread that only waits for them. A handler stays
 * for threads the BLAS started before main, which would otherwise die of the default action. */
#ifndef S2S_CLI_STOP_SIGNALS_H
#define S2S_CLI_STOP_SIGNALS_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

static atomic_int g_stop; /* the signal that asks to stop (0: none) */

static void on_signal(int sig) { atomic_store(&g_stop, sig); }

static sigset_t g_stop_signals; /* read-only once set */

static void *signal_waiter(void *arg) {
    (void)arg;
    for (;;) {
        int sig;
        if (sigwait(&g_stop_signals, &sig) == 0) atomic_store(&g_stop, sig);
    }
    return NULL;
}

static void catch_stop_signals(void) {
    static const int SIGS[] = {SIGINT, SIGTERM, SIGHUP};
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&g_stop_signals);
    for (size_t i = 0; i < sizeof SIGS / sizeof SIGS[0]; i++) {
        sigaction(SIGS[i], &sa, NULL);
        sigaddset(&g_stop_signals, SIGS[i]);
    }
    pthread_sigmask(SIG_BLOCK, &g_stop_signals, NULL);
    pthread_t t;
    if (pthread_create(&t, NULL, signal_waiter, NULL) == 0) pthread_detach(t);
    else pthread_sigmask(SIG_UNBLOCK, &g_stop_signals, NULL); /* no waiter: the handler on this thread */
}

#endif
