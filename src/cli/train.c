/* train — trains a model from a JSON config. Thin: arguments, signals, messages, exit codes.
 *   exit 0 done · 1 runtime, IO, corrupt files, NaN · 2 usage and config · 130/143 interrupted */
#include "s2s/train.h"

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static atomic_int g_stop; /* the one global: the signal that asks to stop (0: none) */

/* SIGINT and SIGTERM never interrupt the threads that compute: oneDNN 2.x's GEMM kernels
 * point rsp into the heap, and a handler running on that thread writes its frame there
 * (uxlfoundation/oneDNN#4845: heap corruption, seen here as an abort after Ctrl-C). So the
 * signals are blocked before any computing thread exists (OpenMP's threads inherit the mask)
 * and taken by one thread that only waits for them. A handler stays for threads the BLAS
 * started before main, which would otherwise die of the default action. */
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
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigemptyset(&g_stop_signals);
    sigaddset(&g_stop_signals, SIGINT);
    sigaddset(&g_stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &g_stop_signals, NULL);
    pthread_t t;
    if (pthread_create(&t, NULL, signal_waiter, NULL) == 0) pthread_detach(t);
    else pthread_sigmask(SIG_UNBLOCK, &g_stop_signals, NULL); /* no waiter: the handler on this thread */
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: train --config FILE [--seed N] [--out DIR] [--max-steps N] [--set key=value]...\n"
            "       train --resume DIR [--max-steps N]\n"
            "\n"
            "  --config FILE     a JSON config; a bare name is looked up in configs/ (reverse → configs/reverse.json)\n"
            "  --seed N          overrides \"seed\"\n"
            "  --out DIR         the run's folder (default runs/<name>)\n"
            "  --max-steps N     stop this session after N optimizer steps in all (resumable)\n"
            "  --set key=value   overrides any config key by dotted path or unique name (--set attention=dummy)\n"
            "  --resume DIR      continue the run in DIR from its last.bin\n"
            "  --list-keys       print every config key with its type, default and meaning\n"
            "\n"
            "Writes DIR/config.json (resolved), DIR/log.jsonl, DIR/model.bin (best) and DIR/last.bin (latest).\n"
            "Keys and defaults: docs/config.md.\n");
}

static int fail(const char *msg, int code) {
    fprintf(stderr, "train: %s\n", msg);
    return code;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* epoch lines appear as they happen, also in a log file */
    const char *config_arg = NULL, *out_arg = NULL, *resume = NULL;
    const char *sets[256];
    int n_sets = 0;
    char seed_set[64] = "";
    long max_steps = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_value = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--list-keys")) { /* the schema: key, type, default, meaning */
            Config d;
            config_defaults(&d);
            for (int k = 0; k < config_key_count(); k++) {
                ConfigKeyInfo ki = config_key_info(k);
                char v[300];
                config_key_value(&d, k, v, sizeof v);
                printf("%s\t%s\t%s\t%s%s%s\n", ki.path, ki.type, v, ki.help, ki.choices ? ": " : "", ki.choices ? ki.choices : "");
            }
            return 0;
        } else if (!strcmp(a, "--config") && has_value) {
            config_arg = argv[++i];
        } else if (!strcmp(a, "--out") && has_value) {
            out_arg = argv[++i];
        } else if (!strcmp(a, "--resume") && has_value) {
            resume = argv[++i];
        } else if (!strcmp(a, "--seed") && has_value) {
            snprintf(seed_set, sizeof seed_set, "seed=%s", argv[++i]);
        } else if (!strcmp(a, "--max-steps") && has_value) {
            char *end;
            max_steps = strtol(argv[++i], &end, 10);
            if (*end || end == argv[i] || max_steps < 1) {
                fprintf(stderr, "train: --max-steps: expected a positive integer, got \"%s\"\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(a, "--set") && has_value) {
            if (n_sets == 256) return fail("too many --set options", 2);
            sets[n_sets++] = argv[++i];
        } else {
            fprintf(stderr, "train: %s: %s\n", a,
                    a[0] == '-' && !has_value ? "needs a value" : "unknown argument (see train --help)");
            return 2;
        }
    }
    if (!config_arg == !resume) {
        usage(stderr);
        return 2;
    }
    if (resume && (n_sets || seed_set[0] || out_arg))
        return fail("--resume takes the run's own config; --set, --seed and --out do not apply", 2);

    Config cfg;
    config_defaults(&cfg);
    S2sError err = {0};
    char path[PATH_MAX], out_dir[PATH_MAX];
    if (config_arg) {
        config_find_file(config_arg, path, sizeof path);
        if (config_load(&cfg, path, &err)) return fail(err.msg, err.status == S2S_ERR_IO ? 2 : 2);
        if (seed_set[0] && config_set(&cfg, seed_set, &err)) return fail(err.msg, 2);
        for (int i = 0; i < n_sets; i++)
            if (config_set(&cfg, sets[i], &err)) return fail(err.msg, 2);
        snprintf(out_dir, sizeof out_dir, "%s", out_arg ? out_arg : "");
        if (!out_arg) snprintf(out_dir, sizeof out_dir, "runs/%s", cfg.name);
    } else {
        snprintf(out_dir, sizeof out_dir, "%s", resume);
    }

    catch_stop_signals();

    TrainOptions opt = {out_dir, resume != NULL, stdout, isatty(STDERR_FILENO) ? stderr : NULL, &g_stop, max_steps};
    if (!resume) printf("train: %s → %s\n", cfg.path, out_dir);
    else printf("train: resuming %s\n", out_dir);
    fflush(stdout);
    TrainSummary sum;
    S2sStatus st = train_run(&cfg, &opt, &sum, &err);
    if (st) return fail(err.msg, st == S2S_ERR_CONFIG ? 2 : 1);
    if (sum.interrupted) {
        fprintf(stderr, "train: interrupted after step %ld; resume with: ./train --resume %s\n", sum.steps, out_dir);
        return 128 + atomic_load(&g_stop);
    }
    printf("train: %d epochs, %ld steps, %.1f s; model: %s/model.bin\n", sum.epochs, sum.steps, sum.seconds, out_dir);
    return 0;
}
