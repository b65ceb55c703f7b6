/* corpus.h — a parallel training corpus brought in: read pair by pair in bounded memory (plain
 * or .gz files), cleaned by the configured filters with a count per reason, its vocabularies
 * made (words counted, a subword model learned on a sample of the kept pairs, or the model the
 * config names), and every kept pair encoded (on the GEMM threads, chunk by chunk) and handed
 * to a sink in the files' order, so that memory does not grow with the corpus.
 *
 * task.train_prefix may name several corpora (config.h, TrainCorpora): they are read one after
 * the other, as one corpus, each pair counted to its own.
 *
 * The filters, in order: a side that is not UTF-8 (or longer than TEXT_MAX_LINE bytes), an
 * empty side, a pair seen before (task.dedup), more tokens than task.max_train_len on a side
 * (subword pieces with a subword model, else words; CORPUS_MAX_LEN at most in any case), a
 * longer side more than task.max_length_ratio times the shorter. With a subword model learned
 * here, it is learned from the pairs the first three filters keep (the length filters need its
 * pieces). Borrows the task's config; owns nothing past a call. */
#ifndef S2S_CORPUS_H
#define S2S_CORPUS_H

#include "s2s/data.h"

#include <stdio.h>

/* The most tokens a training sentence may have (a prepared file keeps lengths in 16 bits). */
#define CORPUS_MAX_LEN 65000

extern const char *const DROP_NAMES[DROP_REASONS]; /* DropReason and CorpusCounts: data.h */

/* Where the kept pairs go: source ids (ns, no markers), target ids (nt, <sos> … <eos>) and the
 * pair's text. A sink's failure (a full disk) stops the pass with its status. */
typedef struct CorpusSink {
    void *ctx;
    S2sStatus (*pair)(void *ctx, const int32_t *src, int ns, const int32_t *trg, int nt, const char *src_text,
                      const char *trg_text, S2sError *err);
} CorpusSink;

/* td's two vocabularies (and subword models) for the task's training files: a pass over them
 * counting words or sampling task.subword_sample pairs to learn BPE from, none when the config
 * names the model. hooks (or NULL): a terminal to draw a progress line on, a stop flag (data.h). */
S2sStatus corpus_vocab(TaskData *td, const ConfigTask *t, const TaskLoadHooks *hooks, S2sError *err);
/* Every training pair read, filtered, encoded with td's vocabularies and handed to sink in the
 * files' order; *c counts what was read, kept and dropped. A corpus with no pair left is an
 * S2S_ERR_DATA naming the files and the counts. */
S2sStatus corpus_encode(const TaskData *td, const ConfigTask *t, const CorpusSink *sink, const TaskLoadHooks *hooks, CorpusCounts *c,
                        S2sError *err);
/* "20 of 1020 left out: 15 duplicate (the first on line 7), 5 too long (…)" into out; with
 * several corpora, the line's corpus named ("line 7 of news"). */
void corpus_counts_text(const CorpusCounts *c, const ConfigTask *t, char *out, size_t n);

#endif
