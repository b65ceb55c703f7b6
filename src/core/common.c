/* common.c — error records, the assert handler, checked allocation. */
#include "s2s/common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

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

void *s2s_xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) s2s_assert_fail("malloc", __FILE__, __LINE__, __func__);
    return p;
}

void *s2s_xcalloc(size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) s2s_assert_fail("calloc", __FILE__, __LINE__, __func__);
    return p;
}

void *s2s_xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) s2s_assert_fail("realloc", __FILE__, __LINE__, __func__);
    return q;
}
