/* report.h — comparing variants (attention, or any config key) across seeds: the results of
 * finished runs, their mean, variance and range per variant, and paired bootstrap tests
 * between variants. A variant is named by the config keys in which the runs differ.
 *
 * A run's test outputs are its test.hyp (the log's test line is their score), or a file of
 * the user's in its folder (a translation of an averaged model, with beam: then scored here).
 * A system that is no run (an ensemble's outputs) enters as a fixed system: its outputs only,
 * scored against the runs' references and tested against every run of each variant.
 *
 * A RunResult owns the lines of its outputs and references; a Comparison owns copies of
 * what it reports. The trainings of a comparison are processes of the train program, started
 * and waited for by compare_run_jobs (compare_jobs.c), the only place the library starts any. */
#ifndef S2S_REPORT_H
#define S2S_REPORT_H

#include "s2s/common.h"
#include "s2s/config.h"

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <sys/types.h>

#define COMPARE_MAX_VARIANTS 16
#define COMPARE_MAX_VARY 4      /* keys varied at once */
#define COMPARE_MAX_POINTS 64  /* runs per variant drawn as points */
#define COMPARE_MAX_EPOCHS 200 /* epochs of the validation curves */
#define COMPARE_NAME 96         /* a variant's name, with its terminating NUL */

typedef struct RunResult {
    char dir[512];              /* the run's folder; a fixed system's outputs file */
    char variant[COMPARE_NAME]; /* compare_label_runs names it; the attention until then */
    char label[COMPARE_NAME];   /* the user's name for its variant ("": named by its config) */
    char outputs[256];          /* the outputs file read in the folder ("": test.hyp) */
    bool fixed;                 /* a fixed system: outputs only, no config, seed or log */
    Config cfg;              /* the run's config */
    long seed;
    bool translation;        /* BLEU; otherwise exact match */
    bool sacre;              /* a subword run: its BLEU is sacreBLEU's on raw text */
    double test_bleu, test_exact, test_token_acc, best_valid_loss, seconds;
    int epochs;
    double valid_curve[COMPARE_MAX_EPOCHS]; /* validation BLEU or exact match (%) by epoch; NaN: none */
    int curve_n;                            /* epochs in valid_curve */
    char **hyp, **ref;       /* test outputs and references */
    int n;
} RunResult;

/* Reads a finished run folder (config.json, log.jsonl with its test line, test.ref, and
 * test.hyp or, with outputs, dir/outputs, which compare_summarize scores). S2S_ERR_DATA when
 * the run has not finished or the outputs and references differ in length. */
S2sStatus compare_read_run(RunResult *r, const char *dir, const char *outputs, S2sError *err);
/* A fixed system named label: the lines of path, scored against like's references (which it
 * copies). S2S_ERR_DATA when their lengths differ. */
S2sStatus compare_read_system(RunResult *r, const char *label, const char *path, const RunResult *like,
                              S2sError *err);
void compare_free_run(RunResult *r);
/* Whether dir holds a finished run (its log has the test line). */
bool compare_run_finished(const char *dir);
/* Names each run's variant by the config keys whose values differ between runs under which
 * they mean something (config_key_applies; the seed, threads, logging and kept checkpoints
 * aside): the value alone when model.attention is the one such key (its variants keep their
 * names), else "key=value" pairs joined by ","; the attention when no key differs. Runs of
 * configs with names of their own (./compare --config A --config B) are named by those names,
 * followed by the keys that differ within a name. A name too long ends with "…" after a whole
 * pair. header (COMPARE_NAME bytes) gets what the names are: "attention", the one key's path,
 * "config" or "variant". Runs with a label are named by it (the header then "variant"), and
 * they and fixed systems take no part in naming the others. */
void compare_label_runs(RunResult *runs, int n, char *header);

typedef struct Stat {
    int n;
    double mean, var, sd, min, max; /* var: sample variance (n − 1); 0 for n = 1 */
} Stat;

Stat compare_stat(const double *x, int n);

typedef struct VariantSummary {
    char name[COMPARE_NAME];
    int runs;
    Stat metric;             /* BLEU or exact match (%) */
    Stat token_acc;          /* reversal: greedy token accuracy (%) */
    Stat valid_loss, epochs, seconds;
    double points[COMPARE_MAX_POINTS]; /* each run's test metric (the first n_points runs) */
    long point_seeds[COMPARE_MAX_POINTS]; /* and its seed */
    int n_points;                         /* min(runs, COMPARE_MAX_POINTS) */
    bool fixed;                           /* a fixed system's row: no seeds, losses or time */
    char outputs[512];                    /* a fixed system's outputs file */
    double curve[COMPARE_MAX_EPOCHS];  /* validation metric by epoch, mean over the runs that have it */
    int curve_n;
} VariantSummary;

typedef struct PairTest {
    int a, b;                /* variant indices */
    int seeds;               /* seeds both have (against a fixed system: the other's runs) */
    double diff;             /* metric(a) − metric(b), mean over the shared seeds */
    double lo, hi;           /* 95 % bootstrap interval of the difference */
    double p;                /* share of resamples where the difference is ≤ 0 (or ≥ 0 when diff < 0) */
} PairTest;

typedef struct Comparison {
    char header[COMPARE_NAME]; /* what the variants are (compare_label_runs): "attention", a key */
    bool translation;
    bool sacre;              /* sacreBLEU on raw text (subword runs), not multi-bleu */
    const char *metric_name; /* "BLEU", "sacreBLEU" or "exact match (%)" */
    const char *metric_key;  /* the same in files: "bleu", "sacrebleu", "exact_match" */
    VariantSummary v[COMPARE_MAX_VARIANTS];
    int n_variants;
    PairTest pairs[COMPARE_MAX_VARIANTS * (COMPARE_MAX_VARIANTS - 1) / 2];
    int n_pairs;
    int resamples;
    char outputs[256];       /* the runs' outputs file ("": test.hyp, scored in their logs) */
} Comparison;

/* Scores the runs read with an outputs file and the fixed systems (which come after the runs:
 * their references must be every run's), names the runs' variants (compare_label_runs), groups
 * runs by variant (in order of first appearance) and tests every pair with `resamples` paired
 * bootstrap resamples of the test sentences (deterministic); runs pair by seed, a fixed system
 * with every run. */
S2sStatus compare_summarize(RunResult *runs, int n, int resamples, Comparison *c, S2sError *err);
/* summary.md, summary.csv, summary.json, summary.png (bars) and curves.png (validation metric by
 * epoch) in dir; the Markdown table also to out. */
S2sStatus compare_write(const Comparison *c, const char *dir, FILE *out, S2sError *err);

/* What a table holds: run folders (named by the user, or by their configs), then fixed systems
 * (by their outputs files). */
typedef struct CompareInput {
    const char *path;         /* a run folder, or a fixed system's outputs file */
    char label[COMPARE_NAME]; /* its variant's name ("": a run named by its config) */
    bool fixed;
} CompareInput;

/* Reads in[0..n) (the runs' outputs file, or test.hyp when outputs is NULL), summarizes them
 * (compare_summarize, 1,000 resamples) and writes the summary files in outdir, the Markdown also
 * to out. A run that cannot be read is told to errs and left out of the table, unless there are
 * fixed systems: these are tested against every run, so then there is no table. Returns the
 * number of problems told to errs (0: every input is in the table). */
int compare_tabulate(const CompareInput *in, int n, const char *outputs, const char *outdir, FILE *out, FILE *errs);

/* One training of a comparison: a variant's seed in its own folder. */
typedef struct CompareJob {
    char dir[PATH_MAX];
    char variant[COMPARE_NAME];
    char sets[COMPARE_MAX_VARY][300]; /* the variant's --set arguments */
    int n_sets;
    long seed;
    const char *config_path; /* the config file it trains (borrowed) */
    int threads;
    bool set_threads; /* threads given by compare (the config sets none) */
    Config want;      /* the run's config as this comparison asks for it */
    pid_t pid;        /* while running */
    char mpi_tmp[PATH_MAX]; /* with ranks: the job's own TMPDIR for mpirun, "" otherwise */
} CompareJob;

/* How the jobs run: the train program's path, --set arguments for every job, how many at
 * once, MPI ranks each (1: no mpirun), the caller's stop flag (the number of the signal it
 * caught, 0 until then; its handler must not restart wait()), and where progress and problems
 * are told. */
typedef struct CompareRunner {
    const char *train;
    const char *const *sets;
    int n_sets, jobs, ranks;
    const volatile sig_atomic_t *stop;
    FILE *out, *errs;
} CompareRunner;

/* Runs job[0..n): each unless its folder is in use, holds another config's run, or holds a
 * finished one (then counted as done); resumed where a checkpoint is. Once *stop is set no job
 * starts and the running ones get the signal. Returns how many failed (a stopped one did not). */
int compare_run_jobs(const CompareRunner *r, CompareJob *job, int n_jobs);

#endif
