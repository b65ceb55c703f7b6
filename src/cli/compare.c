/* compare — attention variants × seeds: trains each pair as its own run (its own process,
 * threads split between jobs), skips finished runs and resumes interrupted ones, then
 * tabulates: mean, variance, range, paired bootstrap tests; summary.{md,csv,json,png}.
 *   exit 0 · 1 a run failed or IO · 2 usage */
#include "s2s/file.h"
#include "s2s/compare.h"
#include "s2s/train.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void usage(FILE *f) {
    fprintf(f, "usage: compare --config FILE --attention A,B,... --seeds 1,2,3 [--jobs N] [--out DIR] [--set key=value]...\n"
               "       compare --runs DIR... [--out DIR]\n"
               "\n"
               "Trains every (attention, seed) pair as DIR/<attention>-seed<N> (default DIR: runs/compare-<name>),\n"
               "skipping finished runs and resuming interrupted ones, then writes DIR/summary.md (printed too),\n"
               "summary.csv, summary.json, summary.png and curves.png: per variant the test metric's mean,\n"
               "variance, sd, min and max, the best validation loss's, epochs and time, the validation metric\n"
               "by epoch; paired bootstrap tests between variants.\n"
               "--runs tabulates existing run folders instead.\n");
}

static int split_list(char *s, char **out, int cap) {
    int n = 0;
    for (char *t = strtok(s, ","); t && n < cap; t = strtok(NULL, ",")) out[n++] = t;
    return n;
}

typedef struct Job {
    char dir[PATH_MAX + 64];
    char variant[32];
    long seed;
    pid_t pid;
    int status; /* −1 pending */
} Job;

static volatile sig_atomic_t g_stop;
static void on_signal(int sig) { g_stop = sig; }

int main(int argc, char **argv) {
    const char *config = NULL, *out = NULL;
    char *attention = NULL, *seeds = NULL;
    const char *sets[128], *runs[256];
    int n_sets = 0, n_runs = 0, jobs = 1;
    bool runs_mode = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool v = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--config") && v) config = argv[++i];
        else if (!strcmp(a, "--attention") && v) attention = argv[++i];
        else if (!strcmp(a, "--seeds") && v) seeds = argv[++i];
        else if (!strcmp(a, "--out") && v) out = argv[++i];
        else if (!strcmp(a, "--jobs") && v) {
            jobs = atoi(argv[++i]);
            if (jobs < 1 || jobs > 64) {
                fprintf(stderr, "compare: --jobs: expected 1 to 64, got \"%s\"\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(a, "--set") && v && n_sets < 128) sets[n_sets++] = argv[++i];
        else if (!strcmp(a, "--runs")) runs_mode = true;
        else if (runs_mode && a[0] != '-' && n_runs < 256) runs[n_runs++] = a;
        else {
            fprintf(stderr, "compare: %s: unknown argument (see compare --help)\n", a);
            return 2;
        }
    }
    S2sError err;
    Job job[256];
    int n_jobs = 0;
    char outdir[PATH_MAX - 64];
    if (runs_mode) {
        if (!n_runs) {
            usage(stderr);
            return 2;
        }
        snprintf(outdir, sizeof outdir, "%s", out ? out : "runs/compare");
    } else {
        if (!config || !attention || !seeds) {
            usage(stderr);
            return 2;
        }
        /* validate the config and every --set once, here, with the train program's rules */
        Config cfg;
        config_defaults(&cfg);
        char path[PATH_MAX];
        config_find_file(config, path, sizeof path);
        if (config_load(&cfg, path, &err)) {
            fprintf(stderr, "compare: %s\n", err.msg);
            return 2;
        }
        for (int i = 0; i < n_sets; i++)
            if (config_set(&cfg, sets[i], &err)) {
                fprintf(stderr, "compare: %s\n", err.msg);
                return 2;
            }
        snprintf(outdir, sizeof outdir, "%s", out ? out : "");
        if (!out) snprintf(outdir, sizeof outdir, "runs/compare-%s", cfg.name);
        char *vs[COMPARE_MAX_VARIANTS], *ss[64];
        int nv = split_list(attention, vs, COMPARE_MAX_VARIANTS), ns = split_list(seeds, ss, 64);
        for (int a = 0; a < nv; a++) {
            char set[64];
            snprintf(set, sizeof set, "attention=%s", vs[a]);
            Config c2 = cfg;
            if (config_set(&c2, set, &err)) {
                fprintf(stderr, "compare: %s\n", err.msg);
                return 2;
            }
            for (int s = 0; s < ns; s++) {
                char *end;
                long seed = strtol(ss[s], &end, 10);
                if (*end || seed < 0) {
                    fprintf(stderr, "compare: --seeds: \"%s\" is not a seed\n", ss[s]);
                    return 2;
                }
                Job *j = &job[n_jobs++];
                snprintf(j->dir, sizeof j->dir, "%s/%s-seed%ld", outdir, vs[a], seed);
                snprintf(j->variant, sizeof j->variant, "%s", vs[a]);
                j->seed = seed;
                j->status = -1;
            }
        }
        if (file_mkdirs(outdir, &err)) {
            fprintf(stderr, "compare: %s\n", err.msg);
            return 1;
        }
        /* the train program beside this one */
        char train[PATH_MAX];
        const char *slash = strrchr(argv[0], '/');
        snprintf(train, sizeof train, "%.*strain", slash ? (int)(slash - argv[0] + 1) : 2, slash ? argv[0] : "./");
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        int threads = (int)(cores / jobs > 0 ? cores / jobs : 1);
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        int running = 0, next = 0, done = 0, failed = 0;
        while (done < n_jobs) {
            while (!g_stop && running < jobs && next < n_jobs) {
                Job *j = &job[next++];
                if (compare_run_finished(j->dir)) {
                    printf("compare: %s seed %ld: finished earlier (%s)\n", j->variant, j->seed, j->dir);
                    j->status = 0;
                    done++;
                    continue;
                }
                char last[PATH_MAX + 16];
                snprintf(last, sizeof last, "%s/last.bin", j->dir);
                bool resume = access(last, R_OK) == 0;
                if (file_mkdirs(j->dir, &err)) {
                    fprintf(stderr, "compare: %s\n", err.msg);
                    return 1;
                }
                char *args[300];
                int k = 0;
                char a_att[64], a_thr[32], a_seed[32];
                args[k++] = train;
                if (resume) {
                    args[k++] = "--resume";
                    args[k++] = j->dir;
                } else {
                    snprintf(a_att, sizeof a_att, "attention=%s", j->variant);
                    snprintf(a_thr, sizeof a_thr, "threads=%d", threads);
                    snprintf(a_seed, sizeof a_seed, "%ld", j->seed);
                    args[k++] = "--config";
                    args[k++] = path;
                    for (int i = 0; i < n_sets; i++) {
                        args[k++] = "--set";
                        args[k++] = (char *)sets[i];
                    }
                    args[k++] = "--set";
                    args[k++] = a_att;
                    args[k++] = "--set";
                    args[k++] = a_thr;
                    args[k++] = "--seed";
                    args[k++] = a_seed;
                    args[k++] = "--out";
                    args[k++] = j->dir;
                }
                args[k] = NULL;
                char log[PATH_MAX + 16];
                snprintf(log, sizeof log, "%s/train.out", j->dir);
                fflush(stdout);
                pid_t pid = fork();
                if (pid == 0) {
                    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
                    if (fd >= 0) {
                        dup2(fd, 1);
                        dup2(fd, 2);
                        close(fd);
                    }
                    execv(train, args);
                    fprintf(stderr, "compare: cannot run %s: %s\n", train, strerror(errno));
                    _exit(127);
                }
                if (pid < 0) {
                    fprintf(stderr, "compare: fork: %s\n", strerror(errno));
                    return 1;
                }
                j->pid = pid;
                running++;
                printf("compare: %s seed %ld: %s (%d threads) → %s\n", j->variant, j->seed, resume ? "resumed" : "started",
                       threads, j->dir);
            }
            if (!running) break;
            int st;
            pid_t pid = wait(&st);
            if (pid < 0) {
                if (errno == EINTR) continue;
                break;
            }
            for (int i = 0; i < n_jobs; i++)
                if (job[i].pid == pid) {
                    job[i].status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
                    running--;
                    done++;
                    if (job[i].status) failed++;
                    printf("compare: %s seed %ld: %s (exit %d; log %s/train.out)\n", job[i].variant, job[i].seed,
                           job[i].status ? (job[i].status >= 128 ? "interrupted" : "FAILED") : "finished", job[i].status,
                           job[i].dir);
                }
        }
        if (g_stop) {
            fprintf(stderr, "compare: interrupted; run the same command again to resume\n");
            return 128 + (int)g_stop;
        }
        for (int i = 0; i < n_jobs; i++) runs[n_runs++] = job[i].dir;
        if (failed) fprintf(stderr, "compare: %d run(s) failed; the table holds the others\n", failed);
    }
    RunResult *res = calloc((size_t)n_runs, sizeof *res);
    int n_ok = 0, rc = 0;
    for (int i = 0; i < n_runs; i++) {
        if (compare_read_run(&res[n_ok], runs[i], &err)) {
            fprintf(stderr, "compare: %s\n", err.msg);
            rc = 1;
            continue;
        }
        n_ok++;
    }
    Comparison c;
    if (compare_summarize(res, n_ok, 1000, &c, &err)) {
        fprintf(stderr, "compare: %s\n", err.msg);
        rc = 1;
    } else {
        if (file_mkdirs(outdir, &err) || compare_write(&c, outdir, stdout, &err)) {
            fprintf(stderr, "compare: %s\n", err.msg);
            rc = 1;
        } else {
            printf("compare: %s/summary.{md,csv,json,png}\n", outdir);
        }
    }
    for (int i = 0; i < n_ok; i++) compare_free_run(&res[i]);
    free(res);
    return rc;
}
