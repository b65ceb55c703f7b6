/* compare_jobs.c — ./compare's trainings: each (variant, seed) a train process of its own
 * (under mpirun with ranks), --jobs at a time, its output in its folder's train.out, skipped
 * when finished, resumed when interrupted, refused when its folder holds another config's run
 * or another process holds it. A stop signal the caller catches is passed on to them: they save
 * and can resume. The only place the library starts processes. */
#define _DEFAULT_SOURCE /* mkdtemp */
#define _XOPEN_SOURCE 700 /* nftw */
#include "s2s/report.h"
#include "s2s/file.h"
#include "s2s/rundir.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

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
static bool folder_matches(const CompareJob *j, char *why, size_t n) {
    char p[PATH_MAX + 16];
    rundir_path(p, sizeof p, j->dir, RUN_CONFIG);
    if (!file_exists(p)) return true;
    Config have;
    config_defaults(&have);
    S2sError err;
    if (config_load_run(&have, p, &err)) {
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
static bool mpi_tmp_make(CompareJob *j, FILE *errs) {
    const char *base = getenv("TMPDIR");
    if (!base || !*base) base = "/tmp";
    snprintf(j->mpi_tmp, sizeof j->mpi_tmp, "%.*s/s2s-mpi.XXXXXX", (int)(sizeof j->mpi_tmp - 32), base);
    if (mkdtemp(j->mpi_tmp)) return true;
    fprintf(errs, "compare: %s seed %ld: cannot make a folder for mpirun in %s: %s\n", j->variant, j->seed, base,
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
static void mpi_tmp_remove(CompareJob *j) {
    if (!j->mpi_tmp[0]) return;
    nftw(j->mpi_tmp, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    j->mpi_tmp[0] = '\0';
}

/* Starts train for job j; returns its pid or −1. The child dies with this process: a
 * SIGKILLed compare takes its trainings with it (they get SIGTERM, save, and can resume). */
static pid_t start(const CompareJob *j, const char *train, const char *const *sets, int n_sets, bool resume, int ranks) {
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
    fflush(NULL); /* nothing buffered is written twice */
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
        fprintf(stderr, "compare: cannot run %s: %s\n", args[0], strerror(errno)); /* the job's train.out */
        _exit(127);
    }
    free(args);
    return pid;
}

/* Starts job j unless it is in use, another run's folder or finished; false when it failed. */
static bool launch(const CompareRunner *o, CompareJob *j, bool *started) {
    S2sError err;
    char why[700];
    long pid;
    *started = false;
    if (file_lock_held(j->dir, &pid)) {
        fprintf(o->errs, "compare: %s seed %ld: %s is in use by another process (pid %ld); not started\n", j->variant,
                j->seed, j->dir, pid);
        return false;
    }
    if (!folder_matches(j, why, sizeof why)) {
        fprintf(o->errs, "compare: %s seed %ld: %s %s\n", j->variant, j->seed, j->dir, why);
        return false;
    }
    if (compare_run_finished(j->dir)) {
        fprintf(o->out, "compare: %s seed %ld: finished earlier (%s)\n", j->variant, j->seed, j->dir);
        return true;
    }
    char last[PATH_MAX + 16];
    rundir_path(last, sizeof last, j->dir, RUN_LAST);
    bool resume = file_exists(last);
    if (file_mkdirs(j->dir, &err)) {
        fprintf(o->errs, "compare: %s\n", err.msg);
        return false;
    }
    if (o->ranks > 1 && !mpi_tmp_make(j, o->errs)) return false;
    j->pid = start(j, o->train, o->sets, o->n_sets, resume, o->ranks);
    if (j->pid < 0) {
        fprintf(o->errs, "compare: fork: %s\n", strerror(errno));
        mpi_tmp_remove(j);
        return false;
    }
    *started = true;
    if (o->ranks > 1)
        fprintf(o->out, "compare: %s seed %ld: %s (%d ranks, %d threads each) → %s\n", j->variant, j->seed,
               resume ? "resumed" : "started", o->ranks, j->threads, j->dir);
    else
        fprintf(o->out, "compare: %s seed %ld: %s (%d threads) → %s\n", j->variant, j->seed, resume ? "resumed" : "started",
               j->threads, j->dir);
    return true;
}

int compare_run_jobs(const CompareRunner *o, CompareJob *job, int n_jobs) {
    int running = 0, next = 0, failed = 0, forwarded = 0;
    for (;;) {
        while (!*o->stop && running < o->jobs && next < n_jobs) {
            bool started;
            if (!launch(o, &job[next++], &started)) failed++;
            running += started;
        }
        if (*o->stop && forwarded != *o->stop) { /* the trainings stop too: they save and can resume */
            forwarded = *o->stop;
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
                if (!describe_exit(st, what, sizeof what) && !(*o->stop && strstr(what, "interrupted"))) failed++;
                fprintf(o->out, "compare: %s seed %ld: %s (log %s/train.out)\n", job[i].variant, job[i].seed, what, job[i].dir);
            }
    }
    return failed;
}
