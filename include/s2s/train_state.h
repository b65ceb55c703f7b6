/* train_state.h — the resumable state of a training run, as last.bin keeps it (JSON in its
 * STAT section): where the run is (epoch, batch, step), the optimizer's step and the base
 * learning rate, the best validation metric so far, this epoch's loss sums, the log's length
 * and the training time, plus a fingerprint of the data it trains on.
 *
 * One table says how each field is written and read back; reading checks each field's type
 * and range (a whole number where one is meant, nothing negative, nothing past float or
 * int range), so that no value of a damaged or crafted file reaches the trainer unchecked.
 * How the fields fit together and with the config, the data and the log is the trainer's
 * check. A TrainState is a plain value. */
#ifndef S2S_TRAIN_STATE_H
#define S2S_TRAIN_STATE_H

#include "s2s/common.h"
#include "s2s/digest.h"

typedef struct TrainState {
    int epoch, batch;       /* next batch to run */
    long step;
    long adam_step;
    double lr;              /* the base lr (plateau decay applied; the schedule on top) */
    double best;            /* ±INFINITY: no validation has improved yet */
    int bad_epochs;
    double loss_sum;        /* this epoch so far: Σ loss·tokens, tokens */
    double tok_sum;
    long log_bytes;         /* log.jsonl length at this state */
    double seconds;         /* training time before this session */
} TrainState;

/* The state as JSON (malloc'd); the data's digest is written as 64 hex digits. */
char *train_state_to_json(const TrainState *s, const Digest *data);
/* Reads txt into s; *has_hash says whether the file had the data's digest (files of earlier
 * builds have none, or a 64-bit fingerprint of 16 hex digits that today's digest cannot check).
 * best is NaN when the file says null (no validation improved). */
S2sStatus train_state_from_json(TrainState *s, Digest *data, bool *has_hash, const char *txt, const char *origin,
                                S2sError *err);

#endif
