/* file.h — files that a reader never sees half of, bounded reads, folder locks, mkdir -p.
 *
 * Every file the project writes (model files, configs, summaries, PNGs, translations) goes
 * through file_tmp_*: a temporary file in the destination's folder (`path.tmp.XXXXXX`, mode
 * 0644) that is flushed, synced and renamed over the destination only once complete; a
 * failure or file_tmp_abort removes it, so the destination holds either its old content or
 * the whole new one. A symlink is followed (the file it names is replaced, the link stays);
 * a destination that is not a regular file (a terminal, a pipe, /dev/null) is written
 * directly, since nothing can be renamed over it; so is this process's standard output or
 * error when path names it (/dev/stdout, /proc/self/fd/1, the file of a shell's >>), through a
 * copy of its descriptor, so appending stays appending. A FileTmp owns its FILE and the temporary
 * name until commit or abort; the caller owns the FileTmp.
 *
 * Reads that input can size are bounded: file_read_all refuses what is larger than its limit
 * (and folders, with a message) before allocating. A FileLock is an exclusive flock(2) on
 * DIR/.lock, held until file_unlock or the process ends, SIGKILL included. */
#ifndef S2S_FILE_H
#define S2S_FILE_H

#include "s2s/common.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

typedef struct FileTmp {
    FILE *f;              /* write here; NULL once committed or aborted */
    char path[PATH_MAX];  /* the destination (a symlink's target) */
    char tmp[PATH_MAX];   /* the temporary file, in path's folder; "" when written directly */
    bool direct;          /* the destination is not a regular file: no temporary, no rename */
} FileTmp;

S2sStatus file_tmp_open(FileTmp *t, const char *path, S2sError *err);
/* The same for a file of a folder s2s manages (a cache, a run): always a temporary file and a
 * rename, mode 0644, so whatever is at path (a FIFO, a device, a link planted there) is
 * replaced, never opened or written through. */
S2sStatus file_tmp_open_managed(FileTmp *t, const char *path, S2sError *err);
S2sStatus file_write_managed(const char *path, const void *data, size_t n, S2sError *err);
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

/* The whole of path ("-": standard input), NUL-terminated, in a malloc'd *buf of *len bytes
 * (len may be NULL). A folder, an unreadable file or one of more than max bytes is an error
 * naming it; nothing larger than max + 1 bytes is ever allocated. */
S2sStatus file_read_all(const char *path, size_t max, char **buf, size_t *len, S2sError *err);
/* The same for a file of a folder s2s manages: a regular file required, opened as
 * file_open_regular opens (a FIFO never blocks). */
S2sStatus file_read_regular(const char *path, size_t max, char **buf, size_t *len, S2sError *err);
/* A file's identity as of now: device, inode, size, modification and change times to the
 * nanosecond. Every write to a file moves its change time, which no one can set back, so an
 * equal stamp later is the same bytes (the prepared-data memo, a teacher read, a run's
 * streamed data). */
typedef struct FileStamp {
    uint64_t v[7];
} FileStamp;
bool file_stamp(int fd, FileStamp *s);                 /* false: fstat failed */
bool file_stamp_path(const char *path, FileStamp *s);  /* links followed */
bool file_stamp_equal(const FileStamp *a, const FileStamp *b);
/* The same but for the change time, which moves with a file's times and links too (another
 * run marking a shared cache file used): equal, no write since that kept the modification time
 * (one that set it back by hand aside). A streamed dataset's check. */
bool file_stamp_same_writes(const FileStamp *a, const FileStamp *b);
/* Marks a cache file used now (its access time; its modification time and bytes untouched, so
 * runs that stream from it see no write). */
void file_mark_used(const char *path);
/* Whether path is a regular file (after symlinks). */
bool file_is_regular(const char *path);
/* Whether path exists (any kind of file, not following a final symlink). */
bool file_exists(const char *path);

typedef struct FileLock {
    int fd;               /* −1: not held */
} FileLock;

/* Takes the exclusive lock of folder dir (creating dir/.lock) without waiting: another
 * holder is an S2S_ERR_IO naming its pid. The lock ends with file_unlock or the process. */
S2sStatus file_lock(FileLock *l, const char *dir, S2sError *err);
void file_unlock(FileLock *l);
/* Whether some process holds dir's lock now; its pid into *pid when known (else 0). */
bool file_lock_held(const char *dir, long *pid);

/* A file a call reads or writes, as its caller named it. */
typedef struct FileRole {
    const char *what;  /* names it in messages: "--out", "MODEL", "the teacher" */
    const char *path;  /* NULL: not given; "-" as an input: standard input (as it is now) */
} FileRole;
/* The output-onto-input rule, held by every call that writes a file (export, import, average,
 * subword learn, heatmaps, run folders, the programs' outputs): an output that is the same
 * file as an input or another output (device and inode, links followed) is S2S_ERR_CONFIG
 * naming both, before anything is written; so are two outputs not made yet that are one name
 * in one folder. Pipes and devices (/dev/null) are never the same file. */
S2sStatus file_distinct(const FileRole *in, int n_in, const FileRole *out, int n_out, S2sError *err);

/* Opens path for reading (flags: O_RDONLY or O_RDWR, plus O_NOFOLLOW if wanted) as every file
 * of a folder s2s manages is opened (a cache, a run's checkpoints and log, model files): with
 * O_NONBLOCK, so a FIFO planted there cannot block, then a regular file required and blocking
 * set back. A missing or unopenable file: S2S_ERR_IO with strerror (errno kept, so a caller
 * can tell ENOENT); a FIFO, device or folder: S2S_ERR_IO "not a regular file". */
S2sStatus file_open_regular(const char *path, int flags, int *fd, S2sError *err);

/* Opens rel below the folder open as dirfd without leaving it: rel is walked one name at a
 * time, every name opened with O_NOFOLLOW (a symbolic link anywhere is refused, ELOOP or
 * ENOTDIR), "", "." and ".." names are refused, and the last name is opened with flags (plus
 * O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, so a FIFO planted there cannot block the caller; the
 * descriptor is set back to blocking). want_dir: the last name must be a folder, else a regular
 * file. Returns the descriptor, or −1 with errno set (ENOENT for a missing or wrong kind of
 * file). The one way the server opens a file of a run and the trainer a file in its folder. */
int file_open_beneath(int dirfd, const char *rel, int flags, mode_t mode, bool want_dir);

/* Removes the temporary files (`*.tmp.XXXXXX`) that killed writers left in dir; only for a
 * folder whose lock the caller holds. Returns how many were removed. */
int file_remove_stale_tmps(const char *dir);

#endif
