/* trainer.h — the training loop: epochs of length-bucketed batches, Adam or SGD with
 * clipping, validation each epoch, the best checkpoint (model.bin) and a resumable one
 * (last.bin, every epoch and every train.save_every steps), a JSON-lines log, early stopping,
 * learning-rate decay on a plateau, and the test of the best checkpoint once the run ends.
 *
 * Randomness is derived, not carried: the batch order of epoch e comes from (seed, e), the
 * dropout masks of step s from (seed, s), so a resumed run repeats an uninterrupted one bit
 * for bit, however often it was stopped or killed. The run owns its folder (rundir.h: a lock,
 * no earlier run's files) for the duration of train_run; the trainer owns its model, data and
 * tape; it borrows the config and options, and never exits the process. */
#ifndef S2S_TRAINER_H
#define S2S_TRAINER_H

#include "s2s/eval.h"

#include <stdatomic.h>
#include <stdio.h>

typedef struct TrainOptions {
    const char *out_dir;          /* the run's folder; created if missing */
    bool resume;                  /* continue from out_dir/last.bin */
    bool overwrite;               /* a new run may replace the run out_dir holds */
    FILE *out;                    /* one line per epoch and the final summary, or NULL */
    FILE *progress;               /* the live progress line (a terminal), or NULL */
    const atomic_int *stop;       /* set asynchronously (a signal): stop after this step */
    long pause_at;                /* pause this session once the run has made this many steps
                                     in all (0: never); resumable, no test */
    int epochs;                   /* with resume: train to this many epochs in all, a finished
                                     run too (0: as its config says) */
    const struct Dist *dist;      /* the ranks of a data-parallel run (dist.h), or NULL: one
                                     process. Rank 0 alone writes into out_dir. */
    void (*on_log)(void *user, const char *line); /* every log.jsonl line once written, or NULL */
    void *log_user;
} TrainOptions;

typedef struct TrainSummary {
    int epochs;                   /* completed */
    int stop_signal;              /* interrupted: the signal (on whichever rank it came) */
    long steps;
    double best_metric;
    EvalResult valid;             /* of the last epoch */
    EvalResult test;              /* of the best checkpoint, when tested */
    bool tested;                  /* the run ended and its model.bin was tested */
    double seconds;
    bool interrupted;             /* stopped by *stop; last.bin resumes it */
    bool paused;                  /* stopped by pause_at; last.bin resumes it */
    bool early_stopped;
} TrainSummary;

/* What a config may hold for decoding but not for training (train.precision int8), as an
 * S2S_ERR_CONFIG error; train_run checks it too. */
S2sStatus train_check_config(const Config *cfg, S2sError *err);

/* Trains per cfg. On resume the run's own config (in last.bin) is used (cfg is overwritten
 * with it). Returns S2S_ERR_NUMERIC for a NaN/Inf loss (last.bin and model.bin keep the last
 * good state), S2S_ERR_CONFIG for a config or a folder the run cannot use. */
S2sStatus train_run(Config *cfg, const TrainOptions *opt, TrainSummary *sum, S2sError *err);
/* The config's data loaded as a run loads them — checked, prepared into task.cache_dir when they
 * are not there yet (a teacher's translations made first, distill.h) — and described on out
 * ("data:" lines); no run folder is touched. progress: a terminal for the progress line, or NULL;
 * stop: a signal's request, heeded within a fraction of a second (S2S_ERR_IO). Nothing prepared
 * (no cache folder, a generated task, a folder that cannot take the file) is an error. */
S2sStatus train_prepare(const Config *cfg, FILE *out, FILE *progress, const atomic_int *stop, S2sError *err);

#endif
