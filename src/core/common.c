/* common.c — error records, the assert handler, checked allocation. */
#include "s2s/common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

S2sStatus s2s_fail(S2sError *err, S2sStatus status, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->status = status;
    }
    return status;
}

const char *s2s_status_name(S2sStatus status) {
    switch (status) {
    case S2S_OK: return "ok";
    case S2S_ERR_IO: return "io";
    case S2S_ERR_CONFIG: return "config";
    case S2S_ERR_CORRUPT: return "corrupt";
    case S2S_ERR_VERSION: return "version";
    case S2S_ERR_NOMEM: return "out of memory";
    case S2S_ERR_DATA: return "data";
    case S2S_ERR_NUMERIC: return "numeric";
    }
    return "unknown";
}

_Noreturn void s2s_assert_fail(const char *expr, const char *file, int line, const char *func) {
    fprintf(stderr, "%s:%d: %s: assertion failed: %s\n", file, line, func, expr);
    abort();
}

_Noreturn void s2s_assert_fail_msg(const char *expr, const char *file, int line, const char *func, const char *fmt, ...) {
    fprintf(stderr, "%s:%d: %s: assertion failed: %s: ", file, line, func, expr);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

static _Noreturn void out_of_memory(size_t n, const char *file, int line) {
    fprintf(stderr, "%s:%d: out of memory allocating %zu bytes\n", file, line, n);
    abort();
}

void *s2s_xmalloc_at(size_t n, const char *file, int line) {
    void *p = malloc(n ? n : 1);
    if (!p) out_of_memory(n, file, line);
    return p;
}

void *s2s_xcalloc_at(size_t count, size_t size, const char *file, int line) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) out_of_memory(count * size, file, line);
    return p;
}

void *s2s_xrealloc_at(void *p, size_t n, const char *file, int line) {
    void *q = realloc(p, n ? n : 1);
    if (!q) out_of_memory(n, file, line);
    return q;
}

/* A number of bytes from a cgroup file ("max": none). */
static size_t read_limit(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char buf[64] = {0};
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[got] = '\0';
    char *end;
    unsigned long long v = strtoull(buf, &end, 10);
    return end != buf ? (size_t)v : 0;
}

size_t s2s_memory_limit(void) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    size_t m = pages > 0 && page > 0 ? (size_t)pages * (size_t)page : 0;
    const char *cg[2] = {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"};
    for (int i = 0; i < 2; i++) {
        size_t l = read_limit(cg[i]);
        if (l && (!m || l < m)) m = l;
    }
    struct rlimit r;
    if (getrlimit(RLIMIT_AS, &r) == 0 && r.rlim_cur != RLIM_INFINITY && (!m || (size_t)r.rlim_cur < m)) m = (size_t)r.rlim_cur;
    return m;
}
