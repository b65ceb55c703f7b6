/* prepared.h — a translation task's data prepared once: the vocabularies (or subword models),
 * the training pairs as ids, the validation and test splits, their references and (for
 * BPE-dropout) the training text, in one binary file that the next run, a resumed run, every
 * seed of ./compare and every rank reads instead of reading the text, learning the subwords
 * and encoding both sides again.
 *
 * A prepared file is named by its key: the SHA-256 digest (digest.h) of the task's settings,
 * this build of the data code and the digests of every input file's bytes (the six text files,
 * a subword model), so a changed file or setting makes another key, never a stale match. The training ids are written
 * as the corpus is encoded and stay in the file: a run keeps 4 bytes of lengths a pair in
 * memory and reads each batch's rows (batch_read), so its memory does not grow with the corpus.
 * The file has a header (magic, version, key, length, CRC-32 of the rest) and is written whole
 * or not at all; reading checks the header, every count against the bytes that remain, the
 * CRC and every id against its vocabulary before a step runs. The TaskData's training split
 * owns the open file. */
#ifndef S2S_PREPARED_H
#define S2S_PREPARED_H

#include "s2s/data.h"

#define PREPARED_VERSION 4
/* A prepared file's name: the first 16 bytes of its key in hex, then ".s2sdata". */
#define PREPARED_NAME_HEX 32

/* A translation task's data through task.cache_dir: the prepared data read when they are there
 * for these files, settings and build, else prepared there (corpus.h) and then streamed; without
 * a cache folder, or one that cannot take the file, parallel_load's data in memory. */
S2sStatus prepared_load(TaskData *td, const ConfigTask *task, const TaskLoadHooks *hooks, S2sError *err);
/* The files a translation task's data are made from: every training corpus's two, a teacher's
 * translations, the evaluation splits' and a given subword model, into paths; their count. */
#define PREPARED_MAX_INPUTS (2 * TASK_MAX_CORPORA + 6)
#define PREPARED_PATH (CONFIG_STR + 96)
int prepared_input_files(const ConfigTask *t, char paths[PREPARED_MAX_INPUTS][PREPARED_PATH]);
/* Leaves in dir the keep last used (by access time: file_mark_used) regular files named by
 * PREPARED_NAME_HEX hex digits and suffix (".s2sdata"), and removes the others, and
 * preparations' temporary files nobody has written to for ten minutes. */
void prepared_prune(const char *dir, const char *suffix, int keep);
/* dir/<the first 16 bytes of key in hex><suffix> into out. */
void prepared_name(char *out, size_t n, const char *dir, const Digest *key, const char *suffix);
/* The prepared file's path for key in dir: dir/<32 hex digits>.s2sdata. */
void prepared_path(char *out, size_t n, const char *dir, const Digest *key);
/* td prepared into path for key: its vocabularies made (corpus_vocab), the training pairs
 * encoded straight into the file (corpus_encode), the evaluation splits read; td's training
 * split is then the file's, streamed. On failure nothing is left at path. */
S2sStatus prepared_build(const char *path, TaskData *td, const ConfigTask *t, const Digest *key, const TaskLoadHooks *hooks,
                         S2sError *err);
/* Reads path into td. S2S_ERR_IO when there is no such file (prepare it); S2S_ERR_CORRUPT for a
 * file that is not a whole prepared file of this version and key (truncated, foreign, damaged):
 * the message names the file and what is wrong. */
S2sStatus prepared_read(const char *path, const Digest *key, TaskData *td, S2sError *err);
/* The same from a file image (for fuzzing), path naming it in messages. */
S2sStatus prepared_parse(const void *buf, size_t len, const Digest *key, const char *path, TaskData *td, S2sError *err);

#endif
