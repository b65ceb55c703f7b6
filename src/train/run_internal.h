/* run_internal.h — the training run the files of src/train share: its state (Run) and the
 * steps one file offers the others. Internal to train/; trainer.h is the public side. A Run owns
 * its folder, data, model, tape and log for the length of train_run; it borrows the config and
 * the options. */
#ifndef S2S_RUN_INTERNAL_H
#define S2S_RUN_INTERNAL_H

#include "s2s/trainer.h"
#include "s2s/train_state.h"
#include "s2s/optim.h"
#include "s2s/checkpoint.h"
#include "s2s/rundir.h"
#include "s2s/visuals.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

static inline double run_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* splitmix64: derives independent seeds for (seed, epoch) and (seed, step) */
static inline uint64_t run_mix(uint64_t a, uint64_t b) {
    uint64_t z = a * 0x9E3779B97F4A7C15ull + b + 0x632BE59BD9B4E019ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

typedef struct Run {
    Config *cfg;
    const TrainOptions *opt;
    RunDir dir;
    TaskData data;
    Seq2Seq model;
    ModelLoss loss;        /* the run's loss settings (train.label_smoothing, train.loss_chunk) */
    Tape tape;
    Adam adam;
    TrainState st;
    Digest data_digest;     /* task_fingerprint: a resumed run's data are checked against it */
    int valid_lines;        /* the validation split's pairs before train.valid_max_lines */
    FILE *log;
    Font *font; /* NULL: pictures without labels */
    double t0;  /* when this session's training time was last added to st.seconds */
    double epoch_t0; /* when this session started the current epoch's batches */
    double epoch_tokens; /* target tokens trained since epoch_t0 (st.tok_sum also counts a resumed epoch's earlier ones) */
    Dataset sampled;  /* with BPE-dropout: the training pairs as epoch sampled_epoch segments them */
    int sampled_epoch; /* −1: none yet */
    int extended_from; /* > 0: resumed with --epochs; the epochs its config said before */
    const Dist *dist;  /* NULL: one process */
    bool root;         /* rank 0 (or one process): the only writer of the run folder */
    GradSum grad_sum;    /* the gradient block's sum over the ranks (more than one) */
    int stop_signal;     /* the signal that stopped the run (on some rank), or 0 */
    cJSON *test_before; /* the extended run's earlier test line, kept in its "extend" line */
} Run;

static inline bool run_higher_is_better(Metric metric) { return metric != METRIC_VALID_LOSS; }
static inline bool run_is_adam(const Config *c) { return optim_is_adam(c->train.optimizer); }

/* trainer.c */
double run_metric_value(Metric metric, const EvalResult *r);

/* run_setup.c: the training pairs and batches of epoch e (functions of the seed, the epoch
 * and the data), the checks, setup and teardown */
const Dataset *run_epoch_data(Run *r, int e);
void run_epoch_plan(Run *r, int e, BatchPlan *plan);
S2sStatus run_check_memory(Run *r, S2sError *err);
S2sStatus run_setup(Run *r, S2sError *err);
void run_teardown(Run *r);

/* run_ckpt.c */
S2sStatus run_save(Run *r, const char *path, bool last, S2sError *err);
void run_prune_checkpoints(Run *r);

/* run_ranks.c */
S2sStatus run_join_ranks(Run *r, S2sError *err);
S2sStatus run_load_last(Run *r, Checkpoint *ck, S2sError *err);

/* run_outputs.c */
S2sStatus run_log_line(Run *r, cJSON *j, S2sError *err);
cJSON *run_eval_json(cJSON *j, const char *prefix, const EvalResult *e, bool greedy);
S2sStatus run_write_test_outputs(Run *r, const IdSeqs *hyps, S2sError *err);
void run_draw_epoch(Run *r);
void run_progress(Run *r, int epoch, int k, int nb, double loss, double tps, double eta);
/* The progress line before a session's first step of an epoch, which can take seconds (the
 * batch read, the first products' plans made): never a silent wait. */
void run_progress_start(Run *r, int epoch, int k, int nb);
/* The steps this epoch has left to run: its batches from `batch` on, or fewer where
 * train.max_steps (max_steps > 0) ends the run first, `step` steps having been made. */
static inline long run_steps_left(int n_batches, int batch, long max_steps, long step) {
    long left = n_batches - batch;
    if (max_steps > 0 && max_steps - step < left) left = max_steps - step > 0 ? max_steps - step : 0;
    return left;
}
/* An epoch's batches read one ahead of the step (run_ahead.c): a thread reads batch k + 1 of
 * a streamed dataset from its file while step k runs; the same rows as reading each in turn. */
typedef struct RunAhead {
    const Dataset *d;        /* borrowed */
    const BatchPlan *plan;   /* borrowed */
    int ranks, rank;         /* the rows of a batch this rank trains on */
    Batch b[2];              /* batch k is in b[k % 2] */
    S2sStatus st[2];
    S2sError err[2];
    int have[2], want, busy; /* the batch each slot holds, the one asked for, the one being read (−1: none) */
    bool threaded, quit;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} RunAhead;

/* Starts reading batch `first` of plan (a thread for a streamed dataset). */
void ahead_start(RunAhead *a, const Dataset *d, const BatchPlan *plan, int first, const Dist *dist);
/* Batch k (*b, valid until the call for k + 2), and batch k + 1 asked for; batches in order. A
 * failed read is its status and message. */
S2sStatus ahead_get(RunAhead *a, int k, Batch **b, S2sError *err);
void ahead_stop(RunAhead *a);

/* The "data:" lines: pairs (of each corpus, with its weight), what the filters left out,
 * vocabularies, the prepared file. */
void run_print_data(FILE *out, const TaskData *td, const ConfigTask *t);

#endif
