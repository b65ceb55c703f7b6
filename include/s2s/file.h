/* file.h — writing files so that a reader never sees half of one, and mkdir -p.
 *
 * Every file the project writes (model files, configs, summaries, PNGs, translations) goes
 * through a temporary file in the same folder (`path.tmp.XXXXXX`, mode 0644) that is flushed,
 * synced and renamed over `path` only once complete; a failure or file_tmp_abort removes it,
 * so `path` holds either its old content or the whole new one. A FileTmp owns its FILE and
 * the temporary name until commit or abort; the caller owns the FileTmp. */
#ifndef S2S_FILE_H
#define S2S_FILE_H

#include "s2s/common.h"

#include <limits.h>
#include <stdio.h>

typedef struct FileTmp {
    FILE *f;              /* write here; NULL once committed or aborted */
    char path[PATH_MAX];  /* the destination */
    char tmp[PATH_MAX];   /* the temporary file, in path's folder */
} FileTmp;

S2sStatus file_tmp_open(FileTmp *t, const char *path, S2sError *err);
/* Flushes, syncs, closes and renames into place. On any failure the temporary file is
 * removed and path is untouched. `failed` lets a caller that saw a write error (its own
 * bookkeeping) turn the commit into an abort with the usual message. */
S2sStatus file_tmp_commit(FileTmp *t, bool failed, S2sError *err);
/* Closes and removes the temporary file; path is untouched. Safe after commit (no-op). */
void file_tmp_abort(FileTmp *t);

/* Writes n bytes to path through a temporary file and a rename. */
S2sStatus file_write_atomic(const char *path, const void *data, size_t n, S2sError *err);
/* Creates a folder and its parents (mkdir -p). */
S2sStatus file_mkdirs(const char *path, S2sError *err);

#endif
