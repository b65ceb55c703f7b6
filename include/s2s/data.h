/* data.h — datasets of id sequences, tasks, and padded time-major batches.
 *
 * The words and their ids are text's (vocab.h). A Dataset owns one flat id array with
 * per-example offsets: sources without markers (unless the task asks), targets as
 * <sos> … <eos>. A Batch owns reusable buffers that grow to the largest batch seen; it
 * borrows nothing. */
#ifndef S2S_DATA_H
#define S2S_DATA_H

#include "s2s/common.h"
#include "s2s/config.h"
#include "s2s/digest.h"
#include "s2s/file.h"
#include "s2s/rng.h"
#include "s2s/subword.h"
#include "s2s/text.h"
#include "s2s/vocab.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

typedef struct Dataset {
    int n;
    int32_t *ids;        /* all sequences back to back */
    size_t *src_off, *trg_off;
    int *src_len, *trg_len;
    size_t n_ids, cap_ids;
    int cap;
    /* streamed: a prepared file's training split (prepared.h), whose ids stay in the file and
     * are read a batch at a time (batch_read); ids, src_off and trg_off are NULL then */
    bool streamed;
    int fd;                   /* streamed: the prepared file (owned) */
    int id_bytes;             /* streamed: 2 or 4 bytes an id, little-endian */
    uint64_t ids_at;          /* streamed: the file offset of the first id */
    uint64_t *every64;        /* streamed: (n / 64 + 1) the number of ids before pair 64 k */
    int vocab_src, vocab_trg; /* streamed: every id read is checked against these */
    FileStamp stamp;          /* streamed: the file as it was checked whole; any write since moves it */
} Dataset;

void dataset_init(Dataset *d);
void dataset_free(Dataset *d);
void dataset_add(Dataset *d, const int32_t *src, int src_len, const int32_t *trg, int trg_len);

/* Why a training pair was left out (corpus.h applies the filters). */
typedef enum DropReason { DROP_NOT_UTF8, DROP_EMPTY, DROP_DUPLICATE, DROP_TOO_LONG, DROP_RATIO, DROP_REASONS } DropReason;

typedef struct CorpusCounts {
    long read, kept;                /* pairs in the training files; pairs kept */
    long dropped[DROP_REASONS];
    long first[DROP_REASONS];       /* the line where each reason first dropped a pair (0: never) */
    int first_corpus[DROP_REASONS]; /* ... of which corpus (task.train_prefix's order) */
    long kept_by[TASK_MAX_CORPORA]; /* pairs kept of each corpus: corpus i's are the next kept_by[i] */
} CorpusCounts;

/* A task's data: vocabularies and the three splits. For translation, the reference
 * sentences of valid and test as text too (BLEU is computed on the words, not on ids that
 * map unknown words to <unk>). */
typedef struct TaskData {
    Vocab src_vocab, trg_vocab;
    Dataset train, valid, test;
    char **valid_refs, **test_refs; /* (valid.n), (test.n) tokenised lines, or NULL */
    CorpusCounts train_counts;      /* the training files' pairs: read, kept, dropped by reason */
    char **train_src_text, **train_trg_text; /* (train.n) the training pairs' raw text, kept for
                                              * BPE-dropout (task.bpe_dropout > 0), else NULL */
    /* translate with task.cache_dir: the prepared data file, and what this load did with it */
    char prepared[CONFIG_STR + 64];
    enum { PREPARED_NONE, PREPARED_READ, PREPARED_WRITTEN, PREPARED_UNWRITTEN } prepared_state;
    char prepared_note[160]; /* PREPARED_UNWRITTEN: why (the run goes on without it) */
    Digest fingerprint;       /* a prepared file's task_fingerprint, kept in it */
    bool has_fingerprint;     /* false: compute it */
} TaskData;

/* Loads or generates the task's data (reverse; translate comes from files). */
S2sStatus task_load(TaskData *td, const ConfigTask *task, S2sError *err);
/* What a long load reports to and listens to: a terminal for the progress line of a corpus
 * being prepared (or NULL), and a flag a signal sets to stop it (or NULL). */
typedef struct TaskLoadHooks {
    FILE *progress;
    const atomic_int *stop;
} TaskLoadHooks;

/* The same with hooks (NULL: none). A stop asked for while a corpus is prepared ends the load
 * with S2S_ERR_IO ("stopped"), leaving no prepared file. */
S2sStatus task_load_hooks(TaskData *td, const ConfigTask *task, const TaskLoadHooks *hooks, S2sError *err);
void task_free(TaskData *td);
/* Keeps the validation split's first max_lines pairs and their references (0: all). */
void task_keep_valid(TaskData *td, int max_lines);
/* Bytes task_load will hold, from the config alone (generated data; 0 for files). */
double task_memory_estimate(const ConfigTask *task);
/* Bytes the loaded data hold: the datasets, and the texts kept beside them (references, the
 * training text BPE-dropout segments anew). */
size_t task_data_bytes(const TaskData *td);
/* Bytes a dataset holds (a streamed one: its lengths and index). */
size_t dataset_bytes(const Dataset *d);
/* The SHA-256 digest of the vocabularies, every split's lengths and ids and the reference
 * texts: equal fingerprints, the same data (a resumed run checks it has the data it started
 * with). *ok false: a streamed split could not be read back. */
Digest task_fingerprint(const TaskData *td, bool *ok);

/* String reversal: the vocabulary is the specials then the alphabet's characters (the same
 * on both sides); train, valid and test are drawn from task.data_seed, with valid and test
 * strings kept out of train (and test out of valid) where the space of strings allows. */
S2sStatus reverse_make(TaskData *td, const ConfigTask *task, S2sError *err);
/* Characters of text → ids (with markers if asked). Returns the count, −1 for a
 * character outside the vocabulary (*bad gets it), −2 when cap is too small. */
int reverse_encode(const Vocab *v, const char *text, bool markers, int32_t *out, int cap, char *bad);

/* The two files of a split (data_dir/prefix.lang, or .gz where only that is there), n bytes each. */
void task_split_paths(const ConfigTask *t, const char *prefix, char *ps, char *pt, size_t n);
/* What to do when split `key`'s files (key: "train_prefix", "valid_prefix", "test_prefix")
 * cannot be opened: Multi30k's fetch script for Multi30k's folder, else the prefixes the
 * folder holds in the source language and the key to set. */
void task_files_hint(const ConfigTask *t, const char *key, char *out, size_t n);

/* Translation: the tokenised parallel files data_dir/<prefix>.<lang> of the three splits;
 * vocabularies from the training side (min_freq, max_vocab), most frequent first.
 * On failure td may hold part of the data: task_load frees it. hooks: as task_load_hooks's. */
S2sStatus parallel_load(TaskData *td, const ConfigTask *task, const TaskLoadHooks *hooks, S2sError *err);
/* Only the validation and test splits, with td's vocabularies. */
S2sStatus parallel_load_eval(TaskData *td, const ConfigTask *task, S2sError *err);
/* The training pairs (td->train's, in its order) segmented anew with BPE-dropout, each merge
 * left out with probability p_src in the sources and p_trg in the targets (0: as always),
 * rng drawn from; into out (initialised here). The task must have kept its training text
 * (task.bpe_dropout > 0). */
void task_sample_train(const TaskData *td, float p_src, float p_trg, Rng *rng, Dataset *out);

/* The config's task.subword (bpe or sentencepiece) as a subword model's kind. */
SubwordKind task_subword_kind(Subword s);

/* The longest source a program accepts from a user, in tokens. */
#define TASK_MAX_SOURCE 2000

/* One line of user text → source ids (malloc'd into *ids), per the task's tokenisation:
 * reversal: characters; translation: tok_normalize (unless `tokenized`), then words, unknown
 * ones as <unk>; with a subword model (src->sub), the raw text's pieces. A line the model cannot read (a character outside the alphabet, invalid
 * UTF-8, more than TASK_MAX_SOURCE tokens) is an S2S_ERR_DATA with a message; nothing is
 * allocated then. */
S2sStatus task_encode_source(const ConfigTask *task, const Vocab *src, const char *line, bool tokenized, int32_t **ids,
                             int *n, S2sError *err);
/* A target line as the model writes it (for forced decoding): reversal's characters without
 * markers, translation's words normalised for the target language, or a subword model's
 * pieces (trg->sub); unknown words become <unk> (the caller decides). Errors as above. */
S2sStatus task_encode_target(const ConfigTask *task, const Vocab *trg, const char *line, bool tokenized, int32_t **ids,
                             int *n, S2sError *err);
/* Target ids → text (malloc'd): characters joined for reversal, tokens with spaces for
 * translation, raw text from subword pieces. */
char *task_decode_target(const ConfigTask *task, const Vocab *trg, const int32_t *ids, int n);

typedef struct Batch {
    int B, S, T;
    int32_t *src;      /* (S, B) time-major, TOK_PAD-padded */
    int32_t *trg;      /* (T, B) */
    int *src_len, *trg_len; /* (B) */
    uint8_t *src_mask; /* (B, S): 1 at real source tokens */
    int *index;        /* (B) each row's example in the dataset */
    size_t cap_src, cap_trg, cap_b;
    unsigned char *raw; /* a streamed row's bytes */
    size_t cap_raw;
} Batch;

void batch_init(Batch *b);
void batch_free(Batch *b);
/* Rows idx[0..n) of d (held in memory), padded. */
void batch_fill(Batch *b, const Dataset *d, const int *idx, int n);
/* The same from any dataset: a streamed one's rows are read from its file (S2S_ERR_IO for a
 * failed read, S2S_ERR_CORRUPT for a file changed under the run). */
S2sStatus batch_read(Batch *b, const Dataset *d, const int *idx, int n, S2sError *err);
/* Digests d's ids (as int32 values) into c; a streamed dataset's are read from its file.
 * false: a read failed. */
bool dataset_hash_ids(const Dataset *d, DigestCtx *c);

/* An epoch's batches: a permutation of the examples cut into consecutive runs. */
typedef struct BatchPlan {
    int *order;   /* (n) example indices */
    int *start;   /* (n_batches + 1) */
    int n, n_batches;
} BatchPlan;

/* Length-bucketed batches: with rng, the examples are shuffled, sorted by length inside
 * windows of `window` × batch_size examples, cut, and the batches shuffled; without rng
 * (evaluation), sorted by length overall. A batch holds at most batch_size sentences and,
 * when max_tokens > 0, at most max_tokens padded positions (sentences × the longest side). */
void batchplan_make(BatchPlan *p, const Dataset *d, int batch_size, int max_tokens, int window, Rng *rng);
/* The same over the examples order[0..n) (repeats allowed; the plan takes the array over). */
void batchplan_make_from(BatchPlan *p, const Dataset *d, int *order, int n, int batch_size, int max_tokens, int window,
                         Rng *rng);
/* An epoch's examples of weighted corpora: corpus i (counts->kept_by[i] examples, in order) taken
 * weight[i] times — each example floor(weight) times, and a random part of the fraction, drawn
 * from rng. Returns the count (*order malloc'd). */
int task_weighted_epoch(const CorpusCounts *counts, const TrainCorpora *c, Rng *rng, int **order);
/* How many pairs that is (task_weighted_epoch's count). */
long task_weighted_pairs(const CorpusCounts *counts, const TrainCorpora *c);
void batchplan_free(BatchPlan *p);

#endif
