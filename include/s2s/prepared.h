/* prepared.h — a translation task's data prepared once: the vocabularies (or subword models),
 * the three splits as ids, the references and (for BPE-dropout) the training text, in one
 * binary file that the next run, a resumed run, every seed of ./compare and every rank reads
 * instead of reading the text, learning the subwords and encoding both sides again.
 *
 * A prepared file is named by its key: a 64-bit digest of the task's settings and of the bytes
 * of every input file (the six text files, a SentencePiece model), so a changed file or setting
 * makes another key, never a stale match. The file has a header (magic, version, key, length,
 * CRC-32 of the rest) and is written whole or not at all. Reading maps the file: the splits'
 * arrays are used in place (Dataset.borrowed), after every count is checked against the bytes
 * that remain and every id against its vocabulary; the TaskData owns the mapping (task_free). */
#ifndef S2S_PREPARED_H
#define S2S_PREPARED_H

#include "s2s/data.h"

#define PREPARED_VERSION 2

/* A translation task's data through task.cache_dir: the prepared data read when they are there
 * for these files, settings and build, else made by parallel_load and written there. */
S2sStatus prepared_load(TaskData *td, const ConfigTask *task, S2sError *err);
/* The digest of a file's bytes into *h (FNV-1a over its size and CRC-32 and Adler-32). */
S2sStatus prepared_hash_file(const char *path, uint64_t *h, S2sError *err);
/* The prepared file's path for key in dir: dir/<16 hex digits>.s2sdata. */
void prepared_path(char *out, size_t n, const char *dir, uint64_t key);
/* Writes td as dir/<key>.s2sdata (dir made if missing). */
S2sStatus prepared_write(const char *path, const TaskData *td, uint64_t key, S2sError *err);
/* Reads path into td. S2S_ERR_IO when there is no such file (prepare it); S2S_ERR_CORRUPT for a
 * file that is not a whole prepared file of this version and key (truncated, foreign, damaged):
 * the message names the file and what is wrong. */
S2sStatus prepared_read(const char *path, uint64_t key, TaskData *td, S2sError *err);
/* The same from a file image (8-aligned; for fuzzing), path naming it in messages; the splits
 * point into the image, which must outlive td. */
S2sStatus prepared_parse(const void *buf, size_t len, uint64_t key, const char *path, TaskData *td, S2sError *err);

#endif
