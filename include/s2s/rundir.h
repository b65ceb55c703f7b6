/* rundir.h — a run's folder: the names of what it holds, and who may write there.
 *
 * A training run owns its folder for its whole life: rundir_open takes the folder's lock
 * (file.h; a second process is refused with the holder's pid), refuses a folder that holds
 * another run unless asked to overwrite it (then deletes that run's files, and only those),
 * and removes temporary files that killed writers left. Nothing of an earlier run can then be
 * read back as this run's (its model.bin, its log), and two processes never write one run.
 * A RunDir owns its lock until rundir_close (or the process's end); paths are plain values. */
#ifndef S2S_RUNDIR_H
#define S2S_RUNDIR_H

#include "s2s/file.h"

/* The files of a run, relative to its folder. */
#define RUN_CONFIG "config.json"   /* the resolved config */
#define RUN_LOG "log.jsonl"        /* one JSON object a line */
#define RUN_MODEL "model.bin"      /* the best checkpoint */
#define RUN_LAST "last.bin"        /* the latest, with the state to resume from */
#define RUN_TEST_HYP "test.hyp"    /* greedy outputs of the test split */
#define RUN_TEST_REF "test.ref"
#define RUN_CURVES "curves.png"
#define RUN_ATTENTION "attention"  /* heatmaps by epoch */
#define RUN_CHECKPOINTS "checkpoints" /* stepNNNNNNNNN.bin: validated weights kept (train.keep_last, keep_best) */

typedef enum RunMode {
    RUN_NEW,        /* the folder must not hold a run */
    RUN_OVERWRITE,  /* an earlier run's files are deleted first */
    RUN_RESUME,     /* the folder must hold a run with a last.bin */
} RunMode;

typedef struct RunDir {
    char dir[PATH_MAX - 32];
    char config[PATH_MAX], log[PATH_MAX], model[PATH_MAX], last[PATH_MAX];
    FileLock lock;
    int stale_tmps;         /* temporary files removed at open */
} RunDir;

/* Opens (creating, unless resuming) and locks the folder. Refusals: a folder with another
 * run for RUN_NEW (S2S_ERR_CONFIG: a usage matter, with what to type instead), a folder in
 * use (S2S_ERR_IO, naming the pid), no last.bin for RUN_RESUME (S2S_ERR_IO). */
S2sStatus rundir_open(RunDir *d, const char *dir, RunMode mode, S2sError *err);
void rundir_close(RunDir *d);
/* The output-onto-input rule for a run: none of the files a run in dir writes (config, log,
 * models, test outputs, curves) or, with --overwrite, deletes (an earlier run's heatmaps and
 * kept checkpoints) may be one of in[0..n) (its config, corpus, subword model, teachers):
 * file_distinct's S2S_ERR_CONFIG, before the folder is touched. */
S2sStatus rundir_check_inputs(const char *dir, const FileRole *in, int n, S2sError *err);
/* The names alone, nothing opened or locked (the other ranks of a data-parallel run, which
 * never write there). */
S2sStatus rundir_names(RunDir *d, const char *dir, S2sError *err);
/* Whether dir holds (a part of) a run: its config, log, last.bin or model.bin. */
bool rundir_holds_run(const char *dir);
/* dir/name into buf. */
void rundir_path(char *buf, size_t n, const char *dir, const char *name);
/* dir/checkpoints/stepNNNNNNNNN.bin into buf: the weights a run validated at a step. */
void rundir_checkpoint_path(char *buf, size_t n, const char *dir, long step);
/* The steps of the checkpoints kept in dir/checkpoints/, ascending, into *steps (malloc'd,
 * NULL when none); their count, or −1 when the folder cannot be read. */
int rundir_checkpoint_steps(const char *dir, long **steps);

#endif
