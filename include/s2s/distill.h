/* distill.h — sequence-level knowledge distillation (Kim and Rush, 2016): a teacher (one model,
 * or an ensemble decoded as one) translates the training sources once, with beam search, and a
 * student trains on those sources with the teacher's translations as targets (task.teacher_mix
 * replace), or on them and the original pairs (add).
 *
 * The translations are a corpus like any other: a text file of one line a source line, made
 * into task.cache_dir under a key of the teacher's model files, its beam and α and the source
 * file (the newest DISTILL_KEEP kept), and then prepared (prepared.h) with the student's filters. They are written a block of
 * lines at a time to KEY.part, each block synced, so a stopped or killed translation goes on
 * where it was; the finished file is renamed into place. A student learns the teacher's pieces:
 * its vocabularies (and subword model), learned from the original pairs, must be the
 * teacher's. Borrows the config; owns nothing past a call. */
#ifndef S2S_DISTILL_H
#define S2S_DISTILL_H

#include "s2s/config.h"
#include "s2s/data.h"

#include <stdio.h>

/* The task to load the student's data with, into *task: cfg's, and with task.teacher the file
 * of the teacher's translations in task->teacher_output, made first where it is not whole yet.
 * Checks before translating: the teacher's models load, agree with each other (an ensemble),
 * and have the vocabularies the student's task makes (the original data are loaded for it,
 * prepared into the cache as usual). log (or NULL) gets a line of what was done; hooks (or
 * NULL): a terminal for the progress line, the stop flag (a stop is an S2S_ERR_IO, "stopped",
 * with what is translated kept for the next start). Without task.teacher, *task is cfg's. */
S2sStatus distill_prepare(const Config *cfg, ConfigTask *task, FILE *log, const TaskLoadHooks *hooks, S2sError *err);

/* Lines translated at a time between two syncs of the .part file. */
#define DISTILL_BLOCK 1024
/* Teachers' files a cache folder keeps (the ones used last); a pruned one is made again. */
#define DISTILL_KEEP 8

#endif
