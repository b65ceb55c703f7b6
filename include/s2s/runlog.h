/* runlog.h — a run's log (log.jsonl): one JSON object a line, its kinds and key names in one
 * place for the writer (the trainer) and the readers (learning curves, ./compare), and one
 * bounded reader.
 *
 * Kinds (the "type" key): "step" every log_every steps (epoch, step, loss, lr, tokens_per_s);
 * "epoch" after each epoch (epoch, step, train_loss, the validation metrics, best, lr,
 * tokens_per_s, epoch_s, elapsed_s, and with test_each_epoch the test metrics); "valid" every
 * train.valid_every steps within an epoch (epoch, step, the validation metrics, metric, best,
 * elapsed_s); "test" once,
 * when the run has ended (epochs, step, the test metrics). Metric keys are a split's prefix
 * and a metric: "valid_bleu", "test_exact_match". Readers parse every line as JSON and look
 * keys up by these names; nothing depends on how cJSON prints. Owns nothing. */
#ifndef S2S_RUNLOG_H
#define S2S_RUNLOG_H

#include "s2s/common.h"

#include <cjson/cJSON.h>

#define LOG_TYPE "type"
#define LOG_STEP "step"         /* a kind, and the key of the step count */
#define LOG_EPOCH "epoch"       /* a kind, and the key of the epoch (1-based) */
#define LOG_TEST "test"         /* a kind */
#define LOG_VALID "valid"       /* a kind: a validation within an epoch (train.valid_every) */
#define LOG_EXTEND "extend"     /* a kind: a resumed run's epochs raised (train --resume --epochs) */
#define LOG_EPOCHS_BEFORE "epochs_before"
#define LOG_TEST_BEFORE "test_before" /* extend lines: the test line the run had before */
#define LOG_METRIC "metric"     /* the value of train.metric (valid lines; epoch lines when checkpoints are kept) */
#define LOG_EPOCHS "epochs"
#define LOG_LOSS "loss"
#define LOG_LR "lr"
#define LOG_TOKENS_PER_S "tokens_per_s"
#define LOG_TRAIN_LOSS "train_loss"
#define LOG_BEST "best"
#define LOG_EPOCH_S "epoch_s"
#define LOG_ELAPSED_S "elapsed_s"
#define LOG_EPOCHS_DONE "epochs_done" /* valid lines: the epochs trained so far, a fraction (2.25) */

/* a split's metrics: prefix "_" metric */
#define LOG_VALID_ "valid_"
#define LOG_TEST_ "test_"
#define LOG_PPL "ppl"
#define LOG_TF_TOKEN_ACCURACY "tf_token_accuracy"
#define LOG_EXACT_MATCH "exact_match"
#define LOG_TOKEN_ACCURACY "token_accuracy"
#define LOG_BLEU "bleu"           /* multi-bleu.perl on the tokenised words */
#define LOG_SACREBLEU "sacrebleu" /* sacreBLEU 13a on raw cased text (subword tasks) */
#define LOG_CHRF "chrf"
#define LOG_ATTENTION_ENTROPY "attention_entropy"
#define LOG_ALIGNMENT_ACCURACY "alignment_accuracy"

/* Calls fn for every line of dir/log.jsonl with a string "type", lines read with a bound (a
 * log line is short; a folder, a binary or an endless file is an error, not a huge read). A
 * line that is not JSON is skipped (a line cut by a crash). */
S2sStatus runlog_each(const char *dir, void (*fn)(void *ctx, const char *type, const cJSON *j), void *ctx, S2sError *err);
/* j's number at key, or dflt. */
double runlog_num(const cJSON *j, const char *key, double dflt);

#endif
