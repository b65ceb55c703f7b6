/* compare — variants × seeds: the attention (--attention), any config keys (--vary, several
 * for a grid) or whole configs (--config, several); trains each pair as its own run (its own process,
 * threads split between jobs unless the config sets them), skips finished runs and resumes
 * interrupted ones, then tabulates: mean, variance, range, paired bootstrap tests;
 * summary.{md,csv,json,png}. A signal stops the trainings too (they save and can resume).
 *   exit 0 · 1 a run failed, or IO · 2 usage · 128 + signal interrupted (resumable) */
#define _DEFAULT_SOURCE /* realpath, mkdtemp */
#define _XOPEN_SOURCE 700 /* nftw */
#include "s2s/args.h"
#include "s2s/compare.h"
#include "s2s/config.h"
#include "s2s/file.h"
#include "s2s/model.h"
#include "s2s/rundir.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_SEEDS 256
#define MAX_VARY 4
#define MAX_CONFIGS 8

static void usage(FILE *f) {
    fprintf(f, "usage: compare --config FILE (--attention A,B,... | --vary key=A,B,... | --config FILE2...) --seeds 1,2,3\n"
               "               [--jobs N] [--ranks N] [--out DIR] [--set key=value]...\n"
               "       compare --runs DIR... [--out DIR]\n"
               "\n"
               "  --attention A,B  the attention variants (the same as --vary model.attention=A,B)\n"
               "  --vary key=A,B   any config key's values; several --vary make a grid (at most %d keys, %d variants)\n"
               "  --config FILE    several (at most %d): each config is a variant, named by its \"name\" (an RNN's recipe\n"
               "                   against a Transformer's); --vary and --set apply to each\n"
               "\n"
               "Trains every (variant, seed) pair as DIR/<variant>-seed<N> (default DIR: runs/compare-<name>),\n"
               "skipping finished runs and resuming interrupted ones, then writes DIR/summary.md (printed too),\n"
               "summary.csv, summary.json, summary.png and curves.png: per variant the test metric's mean,\n"
               "variance, sd, min and max, the best validation loss's, epochs and time, the validation metric\n"
               "by epoch; paired bootstrap tests between variants. GEMM threads: the config's (train.threads),\n"
               "else the cores split between the --jobs (and their ranks).\n"
               "  --ranks N        each training as N ranks of one MPI job (mpirun -np N ./train ...)\n"
               "--runs tabulates existing run folders instead; their variants are named by the config keys\n"
               "in which the runs differ.\n",
            MAX_VARY, COMPARE_MAX_VARIANTS, MAX_CONFIGS);
}

typedef struct Job {
    char dir[PATH_MAX];
    char variant[COMPARE_NAME];
    char sets[MAX_VARY][300]; /* the variant's --set arguments */
    int n_sets;
    long seed;
    const char *config_path; /* the config file it trains */
    int threads;
    bool set_threads; /* threads given by compare (the config sets none) */
    Config want;   /* the run's config as this comparison asks for it */
    pid_t pid;     /* while running */
    char mpi_tmp[PATH_MAX]; /* under --ranks: the job's own TMPDIR (mpi_tmp_make), "" otherwise */
} Job;

static volatile sig_atomic_t g_stop;
static void on_signal(int sig) { g_stop = sig; }

static int usage_error(const char *msg) {
    fprintf(stderr, "compare: %s\n", msg);
    return 2;
}

/* What a finished child was: "finished", "interrupted (exit 130)", "FAILED (exit 1)", or
 * "CRASHED (signal 11: Segmentation fault)". A stop signal (SIGINT, SIGTERM, SIGHUP) is an
 * interruption even where it killed the child (before its handler was set, at start-up). */
static bool describe_exit(int st, char *buf, size_t n) {
    if (WIFSIGNALED(st)) {
        int sig = WTERMSIG(st);
        bool stop = sig == SIGINT || sig == SIGTERM || sig == SIGHUP;
        snprintf(buf, n, "%s (signal %d: %s)", stop ? "interrupted" : "CRASHED", sig, strsignal(sig));
        return false;
    }
    int code = WEXITSTATUS(st);
    if (code == 0) snprintf(buf, n, "finished");
    else if (code == 128 + SIGINT || code == 128 + SIGTERM || code == 128 + SIGHUP) snprintf(buf, n, "interrupted (exit %d)", code);
    else snprintf(buf, n, "FAILED (exit %d)", code);
    return code == 0;
}

/* A job's folder holds either nothing, or a run of exactly the config asked for, up to the
 * keys that change no number (threads: a rerun with another --jobs may split the cores
 * otherwise; logging, kept files, how ranks sum). */
static bool folder_matches(const Job *j, char *why, size_t n) {
    char p[PATH_MAX + 16];
    rundir_path(p, sizeof p, j->dir, RUN_CONFIG);
    if (!file_exists(p)) return true;
    Config have;
    config_defaults(&have);
    S2sError err;
    if (config_load(&have, p, &err)) {
        snprintf(why, n, "%s", err.msg);
        return false;
    }
    int k = config_first_difference(&have, &j->want);
    while (k >= 0 && !config_key_changes_numbers(k)) { /* take the wanted value; look further */
        config_key_copy(&have, &j->want, k);
        k = config_first_difference(&have, &j->want);
    }
    if (k < 0) return true;
    char a[300], b[300];
    config_key_value(&have, k, a, sizeof a);
    config_key_value(&j->want, k, b, sizeof b);
    snprintf(why, n, "holds a run of another config (%s is %s there, %s here); remove it or give another --out",
             config_key_info(k).path, a, b);
    return false;
}

/* Open MPI 4 keeps each mpirun's files under one folder per user ($TMPDIR/ompi.<host>.<uid>)
 * and removes it when it empties: an mpirun ending while another starts can take the folder
 * from under the other, which then fails in orte_init ("orte_session_dir failed", Open MPI
 * issues 7049 and 8510). Each job's mpirun gets a TMPDIR of its own (Open MPI 5 takes its
 * session folder from TMPDIR too); the trainings write nothing there. */
static bool mpi_tmp_make(Job *j) {
    const char *base = getenv("TMPDIR");
    if (!base || !*base) base = "/tmp";
    snprintf(j->mpi_tmp, sizeof j->mpi_tmp, "%.*s/s2s-mpi.XXXXXX", (int)(sizeof j->mpi_tmp - 32), base);
    if (mkdtemp(j->mpi_tmp)) return true;
    fprintf(stderr, "compare: %s seed %ld: cannot make a folder for mpirun in %s: %s\n", j->variant, j->seed, base,
            strerror(errno));
    j->mpi_tmp[0] = '\0';
    return false;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

/* What mpirun left there (nothing, unless it was killed), then the folder. */
static void mpi_tmp_remove(Job *j) {
    if (!j->mpi_tmp[0]) return;
    nftw(j->mpi_tmp, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    j->mpi_tmp[0] = '\0';
}

/* Starts train for job j; returns its pid or −1. The child dies with this process: a
 * SIGKILLed compare takes its trainings with it (they get SIGTERM, save, and can resume). */
static pid_t start(const Job *j, const char *train, const char *const *sets, int n_sets, bool resume, int ranks) {
    char **args = s2s_xcalloc((size_t)(2 * n_sets + 20), sizeof *args);
    char a_thr[32], a_seed[32], a_np[16];
    int k = 0;
    if (ranks > 1) { /* the training as ranks of one MPI job: mpirun -np N train … */
        snprintf(a_np, sizeof a_np, "%d", ranks);
        args[k++] = "mpirun";
        args[k++] = "-np";
        args[k++] = a_np;
    }
    args[k++] = (char *)train;
    if (resume) {
        args[k++] = "--resume";
        args[k++] = (char *)j->dir;
    } else {
        snprintf(a_thr, sizeof a_thr, "threads=%d", j->threads);
        snprintf(a_seed, sizeof a_seed, "%ld", j->seed);
        args[k++] = "--config";
        args[k++] = (char *)j->config_path;
        for (int i = 0; i < n_sets; i++) {
            args[k++] = "--set";
            args[k++] = (char *)sets[i];
        }
        for (int i = 0; i < j->n_sets; i++) {
            args[k++] = "--set";
            args[k++] = (char *)j->sets[i];
        }
        if (j->set_threads) {
            args[k++] = "--set";
            args[k++] = a_thr;
        }
        args[k++] = "--seed";
        args[k++] = a_seed;
        args[k++] = "--out";
        args[k++] = (char *)j->dir;
        args[k++] = "--overwrite"; /* the folder matched (folder_matches) but never saved a checkpoint */
    }
    args[k] = NULL;
    char log[PATH_MAX + 16];
    rundir_path(log, sizeof log, j->dir, "train.out");
    fflush(stdout);
    pid_t parent = getpid(), pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent) _exit(128 + SIGTERM); /* the parent died before prctl */
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        if (j->mpi_tmp[0]) setenv("TMPDIR", j->mpi_tmp, 1);
        if (ranks > 1) execvp(args[0], args);
        else execv(train, args);
        fprintf(stderr, "compare: cannot run %s: %s\n", args[0], strerror(errno));
        _exit(127);
    }
    free(args);
    return pid;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* progress lines in order, also into a file */
    const char *config[MAX_CONFIGS], *out = NULL;
    char *attention = NULL, *seeds = NULL, *vary[MAX_VARY];
    const char *sets[128];
    int n_sets = 0, jobs = 1, n_vary = 0, ranks = 1, n_configs = 0;
    bool runs_mode = false;
    S2sError err;
    enum { O_CONFIG = ARGS_OWN, O_ATTENTION, O_SEEDS, O_OUT, O_JOBS, O_SET, O_RUNS, O_VARY, O_RANKS };
    static const struct option LONG[] = {
        {"help", no_argument, NULL, 'h'},          {"config", required_argument, NULL, O_CONFIG},
        {"attention", required_argument, NULL, O_ATTENTION}, {"seeds", required_argument, NULL, O_SEEDS},
        {"out", required_argument, NULL, O_OUT},   {"jobs", required_argument, NULL, O_JOBS},
        {"set", required_argument, NULL, O_SET},   {"runs", no_argument, NULL, O_RUNS},
        {"vary", required_argument, NULL, O_VARY}, {"ranks", required_argument, NULL, O_RANKS},
        {"version", no_argument, NULL, ARGS_VERSION}, {NULL, 0, NULL, 0}};
    opterr = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, ":h", LONG, NULL)) != -1) {
        switch (opt) {
        case O_CONFIG:
            if (n_configs == MAX_CONFIGS) return usage_error("--config: at most 8 configs");
            config[n_configs++] = optarg;
            break;
        case O_ATTENTION: attention = optarg; break;
        case O_SEEDS: seeds = optarg; break;
        case O_OUT: out = optarg; break;
        case O_RUNS: runs_mode = true; break;
        case O_JOBS:
            if (args_int("--jobs", optarg, 1, 64, &jobs, &err)) return usage_error(err.msg);
            break;
        case O_RANKS:
            if (args_int("--ranks", optarg, 1, 1024, &ranks, &err)) return usage_error(err.msg);
            break;
        case O_SET:
            if (n_sets == 128) return usage_error("too many --set options");
            sets[n_sets++] = optarg;
            break;
        case O_VARY:
            if (n_vary == MAX_VARY) return usage_error("--vary: at most 4 keys");
            vary[n_vary++] = optarg;
            break;
        default: return args_common(opt, "compare", usage, argv, optind, optopt);
        }
    }
    int n_runs = argc - optind;
    char **runs = argv + optind;
    char outdir[PATH_MAX - 160]; /* room for /<variant>-seed<N> */
    Job *job = NULL;
    int n_jobs = 0, rc = 0;
    FileLock out_lock = {-1};
    if (runs_mode) {
        if (!n_runs || n_configs || attention || seeds || n_sets || n_vary) {
            usage(stderr);
            return 2;
        }
        for (int i = 0; i < n_runs; i++) /* a folder twice would count twice */
            for (int k = 0; k < i; k++) {
                char a[PATH_MAX], b[PATH_MAX];
                if (realpath(runs[i], a) && realpath(runs[k], b) && !strcmp(a, b)) {
                    fprintf(stderr, "compare: --runs: %s is given twice (as %s)\n", runs[i], runs[k]);
                    return 2;
                }
            }
        snprintf(outdir, sizeof outdir, "%s", out ? out : "runs/compare");
    } else {
        if (n_runs) {
            fprintf(stderr, "compare: %s: unexpected argument (see compare --help)\n", runs[0]);
            return 2;
        }
        if (!n_configs || (!attention && !n_vary && n_configs < 2) || !seeds) {
            usage(stderr);
            return 2;
        }
        /* validate each config and every --set once, here, with the train program's rules;
         * several configs are told apart by their names */
        static Config cfgs[MAX_CONFIGS];
        static char paths[MAX_CONFIGS][PATH_MAX];
        for (int c = 0; c < n_configs; c++) {
            config_defaults(&cfgs[c]);
            config_find_file(config[c], paths[c], sizeof paths[c]);
            if (config_load(&cfgs[c], paths[c], &err)) return usage_error(err.msg);
            for (int i = 0; i < n_sets; i++)
                if (config_set(&cfgs[c], sets[i], &err)) return usage_error(err.msg);
            if (config_check(&cfgs[c], &err)) return usage_error(err.msg);
            for (int d = 0; d < c; d++)
                if (!strcmp(cfgs[c].name, cfgs[d].name)) {
                    fprintf(stderr, "compare: %s and %s are both named \"%s\"; the configs must have names of their own\n",
                            paths[d], paths[c], cfgs[c].name);
                    return 2;
                }
        }
        if (out) snprintf(outdir, sizeof outdir, "%s", out);
        else {
            size_t len = (size_t)snprintf(outdir, sizeof outdir, "runs/compare-%s", cfgs[0].name);
            for (int c = 1; c < n_configs && len < sizeof outdir; c++)
                len += (size_t)snprintf(outdir + len, sizeof outdir - len, "-vs-%s", cfgs[c].name);
            if (len >= sizeof outdir) return usage_error("the configs' names make too long a folder name; give --out");
        }
        /* the keys varied and their values: --attention is --vary model.attention */
        char *keys[MAX_VARY + 1], *vals[MAX_VARY + 1][COMPARE_MAX_VARIANTS], *ss[MAX_SEEDS];
        int nval[MAX_VARY + 1], nk = 0;
        static char attention_key[] = "model.attention";
        if (attention) {
            keys[nk] = attention_key;
            if ((nval[nk] = args_split("--attention", attention, vals[nk], COMPARE_MAX_VARIANTS, &err)) < 0)
                return usage_error(err.msg);
            nk++;
        }
        for (int i = 0; i < n_vary; i++) {
            char *eq = strchr(vary[i], '=');
            if (!eq || eq == vary[i] || !eq[1]) {
                fprintf(stderr, "compare: --vary %s: expected key=value,value,...\n", vary[i]);
                return 2;
            }
            *eq = '\0';
            keys[nk] = vary[i];
            if ((nval[nk] = args_split("--vary", eq + 1, vals[nk], COMPARE_MAX_VARIANTS, &err)) < 0) return usage_error(err.msg);
            nk++;
        }
        /* each value valid and given once; each key a config key (found by its path or its last
         * part, as --set finds it), varied once, and neither the seed (--seeds) nor the threads */
        int key_index[MAX_VARY + 1];
        for (int k = 0; k < nk; k++) {
            for (int v = 0; v < nval[k]; v++) {
                char set[400];
                snprintf(set, sizeof set, "%s=%s", keys[k], vals[k][v]);
                for (int c = 0; c < n_configs; c++) {
                    Config probe = cfgs[c];
                    if (config_set(&probe, set, &err)) return usage_error(err.msg);
                }
                for (int w = 0; w < v; w++)
                    if (!strcmp(vals[k][w], vals[k][v])) {
                        fprintf(stderr, "compare: %s%s: %s is given twice\n", attention && k == 0 ? "--attention" : "--vary ",
                                attention && k == 0 ? "" : keys[k], vals[k][v]);
                        return 2;
                    }
            }
            key_index[k] = -1;
            for (int i = 0; i < config_key_count(); i++) {
                const char *kp = config_key_info(i).path, *dot = strrchr(kp, '.');
                if (!strcmp(kp, keys[k]) || (dot && !strcmp(dot + 1, keys[k]))) key_index[k] = i;
            }
            S2S_ASSERT(key_index[k] >= 0); /* config_set took it */
            const char *kp = config_key_info(key_index[k]).path;
            if (!strcmp(kp, "seed") || !strcmp(kp, "name") || !strcmp(kp, "train.threads")) {
                fprintf(stderr, "compare: --vary %s: %s\n", kp,
                        !strcmp(kp, "seed")   ? "the seeds are --seeds"
                        : !strcmp(kp, "name") ? "every run has a folder of its own"
                                              : "threads change no number (set them with --set)");
                return 2;
            }
            for (int m = 0; m < k; m++)
                if (key_index[k] == key_index[m]) {
                    fprintf(stderr, "compare: %s is varied twice\n", kp);
                    return 2;
                }
        }
        int nv = n_configs;
        for (int k = 0; k < nk; k++) {
            if (nv * nval[k] > COMPARE_MAX_VARIANTS) {
                fprintf(stderr, "compare: the grid of --vary values makes more than %d variants\n", COMPARE_MAX_VARIANTS);
                return 2;
            }
            nv *= nval[k];
        }
        long seed_v[MAX_SEEDS];
        int ns = args_split("--seeds", seeds, ss, MAX_SEEDS, &err);
        if (ns < 0) return usage_error(err.msg);
        for (int s = 0; s < ns; s++) {
            if (args_long("--seeds", ss[s], 0, 1000000000000000L, &seed_v[s], &err)) return usage_error(err.msg);
            for (int k = 0; k < s; k++)
                if (seed_v[k] == seed_v[s]) {
                    fprintf(stderr, "compare: --seeds: %ld is given twice\n", seed_v[s]);
                    return 2;
                }
        }
        /* threads: the user's (config or --set), else the cores shared between the jobs */
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        int shared_threads = (int)(cores / (jobs * ranks) > 0 ? cores / (jobs * ranks) : 1);
        job = s2s_xcalloc((size_t)nv * ns, sizeof *job);
        bool attention_only = n_configs == 1 && nk == 1 && !strcmp(config_key_info(key_index[0]).path, "model.attention");
        int nv_config = nv / n_configs; /* variants of each config: its --vary grid */
        for (int a = 0; a < nv; a++) {
            Job proto;
            memset(&proto, 0, sizeof proto);
            int ci = a / nv_config;
            Config c2 = cfgs[ci];
            const char *path = paths[ci];
            proto.config_path = paths[ci];
            proto.set_threads = c2.train.threads <= 0;
            proto.threads = proto.set_threads ? shared_threads : c2.train.threads;
            size_t len = 0;
            if (n_configs > 1) /* the folder: the config's name first */
                len = (size_t)snprintf(proto.variant, sizeof proto.variant, "%.60s", c2.name);
            for (int k = 0, rest = a % nv_config; k < nk; k++) { /* the last key varies fastest */
                int div = 1;
                for (int m = k + 1; m < nk; m++) div *= nval[m];
                const char *v = vals[k][rest / div];
                rest %= div;
                const char *kp = config_key_info(key_index[k]).path, *dot = strrchr(kp, '.');
                snprintf(proto.sets[proto.n_sets], sizeof proto.sets[0], "%s=%s", kp, v);
                if (config_set(&c2, proto.sets[proto.n_sets++], &err)) {
                    free(job);
                    return usage_error(err.msg);
                }
                /* the folder: the value alone for the attention (as before --vary), else key=value pairs */
                char part[COMPARE_NAME];
                if (attention_only) snprintf(part, sizeof part, "%.80s", v);
                else snprintf(part, sizeof part, "%s%.30s=%.50s", k || n_configs > 1 ? "," : "", dot ? dot + 1 : kp, v);
                size_t pl = strlen(part);
                if (len + pl >= sizeof proto.variant) pl = sizeof proto.variant - 1 - len;
                memcpy(proto.variant + len, part, pl);
                len += pl;
                proto.variant[len] = '\0';
            }
            for (char *p = proto.variant; *p; p++)
                if (*p == '/') *p = '_';
            if (config_check(&c2, &err) || model_check_config(&c2.model, path, &err)) {
                free(job);
                return usage_error(err.msg);
            }
            for (int s = 0; s < ns; s++) {
                Job *j = &job[n_jobs++];
                *j = proto;
                snprintf(j->dir, sizeof j->dir, "%s/%s-seed%ld", outdir, proto.variant, seed_v[s]);
                j->seed = seed_v[s];
                j->want = c2;
                j->want.seed = seed_v[s];
                j->want.train.threads = proto.threads;
            }
        }
        if (file_mkdirs(outdir, &err) || file_lock(&out_lock, outdir, &err)) {
            fprintf(stderr, "compare: %s%s\n", err.msg, strstr(err.msg, "in use") ? ": another comparison runs there" : "");
            free(job);
            return 1;
        }
        file_remove_stale_tmps(outdir);
        /* the train program beside this one */
        char train[PATH_MAX];
        const char *slash = strrchr(argv[0], '/');
        snprintf(train, sizeof train, "%.*strain", slash ? (int)(slash - argv[0] + 1) : 2, slash ? argv[0] : "./");
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL);
        int running = 0, next = 0, failed = 0, forwarded = 0;
        for (;;) {
            while (!g_stop && running < jobs && next < n_jobs) {
                Job *j = &job[next++];
                char why[700];
                long pid;
                if (file_lock_held(j->dir, &pid)) {
                    fprintf(stderr, "compare: %s seed %ld: %s is in use by another process (pid %ld); not started\n",
                            j->variant, j->seed, j->dir, pid);
                    failed++;
                    continue;
                }
                if (!folder_matches(j, why, sizeof why)) {
                    fprintf(stderr, "compare: %s seed %ld: %s %s\n", j->variant, j->seed, j->dir, why);
                    failed++;
                    continue;
                }
                if (compare_run_finished(j->dir)) {
                    printf("compare: %s seed %ld: finished earlier (%s)\n", j->variant, j->seed, j->dir);
                    continue;
                }
                char last[PATH_MAX + 16];
                rundir_path(last, sizeof last, j->dir, RUN_LAST);
                bool resume = file_exists(last);
                if (file_mkdirs(j->dir, &err)) {
                    fprintf(stderr, "compare: %s\n", err.msg);
                    failed++;
                    continue;
                }
                if (ranks > 1 && !mpi_tmp_make(j)) {
                    failed++;
                    continue;
                }
                j->pid = start(j, train, sets, n_sets, resume, ranks);
                if (j->pid < 0) {
                    fprintf(stderr, "compare: fork: %s\n", strerror(errno));
                    mpi_tmp_remove(j);
                    failed++;
                    continue;
                }
                running++;
                if (ranks > 1)
                    printf("compare: %s seed %ld: %s (%d ranks, %d threads each) → %s\n", j->variant, j->seed,
                           resume ? "resumed" : "started", ranks, j->threads, j->dir);
                else
                    printf("compare: %s seed %ld: %s (%d threads) → %s\n", j->variant, j->seed,
                           resume ? "resumed" : "started", j->threads, j->dir);
            }
            if (g_stop && forwarded != g_stop) { /* the trainings stop too: they save and can resume */
                forwarded = g_stop;
                for (int i = 0; i < n_jobs; i++)
                    if (job[i].pid > 0) kill(job[i].pid, forwarded);
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
                    char what[128];
                    job[i].pid = 0;
                    mpi_tmp_remove(&job[i]);
                    running--;
                    if (!describe_exit(st, what, sizeof what) && !(g_stop && strstr(what, "interrupted"))) failed++;
                    printf("compare: %s seed %ld: %s (log %s/train.out)\n", job[i].variant, job[i].seed, what, job[i].dir);
                }
        }
        if (g_stop) {
            fprintf(stderr, "compare: interrupted; run the same command again to resume\n");
            free(job);
            file_unlock(&out_lock);
            return 128 + (int)g_stop;
        }
        if (failed) fprintf(stderr, "compare: %d run(s) failed; the table holds the others\n", failed);
        if (failed) rc = 1;
    }
    int n_dirs = runs_mode ? n_runs : n_jobs;
    RunResult *res = s2s_xcalloc((size_t)(n_dirs ? n_dirs : 1), sizeof *res);
    int n_ok = 0;
    for (int i = 0; i < n_dirs; i++) {
        if (compare_read_run(&res[n_ok], runs_mode ? runs[i] : job[i].dir, &err)) {
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
    } else if (file_mkdirs(outdir, &err) || compare_write(&c, outdir, stdout, &err)) {
        fprintf(stderr, "compare: %s\n", err.msg);
        rc = 1;
    } else {
        printf("compare: %s/summary.{md,csv,json,png}\n", outdir);
    }
    for (int i = 0; i < n_ok; i++) compare_free_run(&res[i]);
    free(res);
    free(job);
    file_unlock(&out_lock);
    return rc;
}
