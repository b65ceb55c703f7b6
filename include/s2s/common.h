/* common.h — status codes, the caller-owned error record, and the bug assert.
 *
 * Two kinds of failure (DESIGN.md): a bug asserts (S2S_ASSERT, active in every build) and
 * aborts with file and line; a user's or a file's mistake returns an S2sStatus and fills an
 * S2sError with one sentence naming the file, key or line and what was expected.
 * Owns nothing; S2sError is a plain value the caller provides. */
#ifndef S2S_COMMON_H
#define S2S_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#define S2S_VERSION "0.6.0"

typedef enum S2sStatus {
    S2S_OK = 0,
    S2S_ERR_IO,       /* a file could not be read or written */
    S2S_ERR_CONFIG,   /* a config or usage mistake */
    S2S_ERR_CORRUPT,  /* a file's content is malformed */
    S2S_ERR_VERSION,  /* a file from a newer or foreign format version */
    S2S_ERR_NOMEM,    /* an allocation failed */
    S2S_ERR_DATA,     /* bad input data (text, tokens) */
    S2S_ERR_NUMERIC,  /* a NaN or Inf appeared */
} S2sStatus;

typedef struct S2sError {
    S2sStatus status;
    char msg[512];
} S2sError;

/* Fills err (when not NULL) and returns status, so callers can `return s2s_fail(...)`. */
S2sStatus s2s_fail(S2sError *err, S2sStatus status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
const char *s2s_status_name(S2sStatus status);

/* Bugs: shapes that cannot mismatch, pointers that cannot be NULL. Never compiled out.
 * S2S_ASSERT_MSG says what went wrong in the bug report (printf-style). */
#define S2S_ASSERT(cond)                                                      \
    do {                                                                      \
        if (!(cond)) s2s_assert_fail(#cond, __FILE__, __LINE__, __func__);    \
    } while (0)
#define S2S_ASSERT_MSG(cond, ...)                                                          \
    do {                                                                                   \
        if (!(cond)) s2s_assert_fail_msg(#cond, __FILE__, __LINE__, __func__, __VA_ARGS__); \
    } while (0)
_Noreturn void s2s_assert_fail(const char *expr, const char *file, int line, const char *func);
_Noreturn void s2s_assert_fail_msg(const char *expr, const char *file, int line, const char *func, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* malloc that treats failure as fatal (the caller's file and line, then abort): for small,
 * bounded bookkeeping only. Sizes that come from files or users are bounded first (a limit,
 * or the memory estimate of a run) or go through checked paths that return S2S_ERR_NOMEM. */
#define s2s_xmalloc(n) s2s_xmalloc_at((n), __FILE__, __LINE__)
#define s2s_xcalloc(count, size) s2s_xcalloc_at((count), (size), __FILE__, __LINE__)
#define s2s_xrealloc(p, n) s2s_xrealloc_at((p), (n), __FILE__, __LINE__)
#define s2s_xstrdup(s) s2s_xstrdup_at((s), __FILE__, __LINE__)
void *s2s_xmalloc_at(size_t n, const char *file, int line);
char *s2s_xstrdup_at(const char *s, const char *file, int line);
void *s2s_xcalloc_at(size_t count, size_t size, const char *file, int line);
void *s2s_xrealloc_at(void *p, size_t n, const char *file, int line);

/* The memory this process may use: the machine's RAM, or less where a cgroup or an rlimit
 * says so (bytes; 0 when unknown). */
size_t s2s_memory_limit(void);
/* The least memory limit of the cgroups a /proc/self/cgroup text names (v1 memory.limit_in_bytes,
 * v2 memory.max, a hybrid's unified tree) and of their ancestors, under the cgroup
 * filesystem mounted at root; 0: none. */
size_t s2s_cgroup_limit(const char *proc_cgroup, const char *root);
/* The least CPU quota of those cgroups and their ancestors (v2 cpu.max, v1 cpu.cfs_quota_us over
 * cpu.cfs_period_us), in thousandths of a CPU, rounded up; 0: none. */
size_t s2s_cgroup_cpu_milli(const char *proc_cgroup, const char *root);
/* This process's CPU quota (its own cgroups'), the same way. */
size_t s2s_cpu_quota_milli(void);

#endif
