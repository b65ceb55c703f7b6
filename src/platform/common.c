/* common.c — error records, the assert handler, checked allocation. */
#include "s2s/common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

char *s2s_xstrdup_at(const char *s, const char *file, int line) {
    size_t n = strlen(s) + 1;
    return memcpy(s2s_xmalloc_at(n, file, line), s, n);
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

typedef size_t (*LimitRead)(const char *path);

/* A CPU quota in thousandths of a CPU from v2's cpu.max ("150000 100000"; "max …": none). */
static size_t read_cpu_max(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    long long quota = 0, period = 0;
    int got = fscanf(f, "%lld %lld", &quota, &period);
    fclose(f);
    return got == 2 && quota > 0 && period > 0 ? (size_t)((quota * 1000 + period - 1) / period) : 0;
}

/* The same from v1's cpu.cfs_quota_us (−1: none) and the cpu.cfs_period_us beside it. */
static size_t read_cfs_quota(const char *path) {
    char period_path[1100];
    const char *slash = strrchr(path, '/');
    if (!slash) return 0;
    snprintf(period_path, sizeof period_path, "%.*s/cpu.cfs_period_us", (int)(slash - path), path);
    FILE *f = fopen(path, "r"), *g = fopen(period_path, "r");
    long long quota = 0, period = 0;
    bool ok = f && g && fscanf(f, "%lld", &quota) == 1 && fscanf(g, "%lld", &period) == 1;
    if (f) fclose(f);
    if (g) fclose(g);
    return ok && quota > 0 && period > 0 ? (size_t)((quota * 1000 + period - 1) / period) : 0;
}

/* The least limit of the files `file` in dir and each of its ancestors down to root. */
static size_t least_up(const char *root, const char *dir, const char *file, LimitRead read) {
    char path[1024];
    size_t least = 0, n = strlen(dir);
    for (;;) {
        if (snprintf(path, sizeof path, "%s%.*s/%s", root, (int)n, dir, file) < (int)sizeof path) {
            size_t l = read(path);
            if (l && (!least || l < least)) least = l;
        }
        if (n == 0) break;
        while (n > 0 && dir[n - 1] != '/') n--; /* the parent */
        if (n > 0) n--;
    }
    return least;
}

/* What one controller's limit is called: v2's file, v1's controller, the folders v1 mounts it
 * at and its file there. */
typedef struct CgroupLimit {
    const char *v2_file, *v1_controller, *v1_dirs[2], *v1_file;
    LimitRead v2_read, v1_read;
} CgroupLimit;

static const CgroupLimit CG_MEMORY = {"memory.max", ",memory,", {"memory", NULL}, "memory.limit_in_bytes", read_limit,
                                      read_limit};
static const CgroupLimit CG_CPU = {"cpu.max", ",cpu,", {"cpu", "cpu,cpuacct"}, "cpu.cfs_quota_us", read_cpu_max,
                                   read_cfs_quota};

static size_t least_of(size_t a, size_t b) { return a && (!b || a < b) ? a : b; }

static size_t cgroup_least(const char *proc_cgroup, const char *root, const CgroupLimit *k) {
    size_t least = 0;
    for (const char *line = proc_cgroup; line && *line;) {
        const char *end = strchr(line, '\n'), *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!end) end = line + strlen(line);
        if (c1 && c2 && c2 < end && end - c2 - 1 < 512) {
            char path[512], ctl[256], sub[300];
            snprintf(path, sizeof path, "%.*s", (int)(end - c2 - 1), c2 + 1);
            if (strcmp(path, "/") == 0) path[0] = '\0';
            snprintf(ctl, sizeof ctl, ",%.*s,", (int)(c2 - c1 - 1 < 250 ? c2 - c1 - 1 : 250), c1 + 1);
            size_t l = 0;
            if (c2 == c1 + 1 && line[0] == '0' && c1 == line + 1) { /* v2: "0::/path" (or a hybrid's unified tree) */
                l = least_up(root, path, k->v2_file, k->v2_read);
                snprintf(sub, sizeof sub, "%s/unified", root);
                l = least_of(least_up(sub, path, k->v2_file, k->v2_read), l);
            } else if (strstr(ctl, k->v1_controller)) { /* v1: "N:memory:/path", "N:cpu,cpuacct:/path" */
                for (int d = 0; d < 2 && k->v1_dirs[d] && !l; d++) {
                    snprintf(sub, sizeof sub, "%s/%s", root, k->v1_dirs[d]);
                    l = least_up(sub, path, k->v1_file, k->v1_read);
                }
            }
            least = least_of(l, least);
        }
        line = *end ? end + 1 : end;
    }
    return least;
}

size_t s2s_cgroup_limit(const char *proc_cgroup, const char *root) { return cgroup_least(proc_cgroup, root, &CG_MEMORY); }

size_t s2s_cgroup_cpu_milli(const char *proc_cgroup, const char *root) { return cgroup_least(proc_cgroup, root, &CG_CPU); }

/* /proc/self/cgroup's text ("0::/" when it cannot be read). */
static void read_proc_cgroup(char *text, size_t n) {
    text[0] = '\0';
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (f) {
        size_t got = fread(text, 1, n - 1, f);
        text[got] = '\0';
        fclose(f);
    }
    if (!text[0]) snprintf(text, n, "0::/\n");
}

size_t s2s_cpu_quota_milli(void) {
    char text[4096];
    read_proc_cgroup(text, sizeof text);
    return s2s_cgroup_cpu_milli(text, "/sys/fs/cgroup");
}

size_t s2s_memory_limit(void) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    size_t m = pages > 0 && page > 0 ? (size_t)pages * (size_t)page : 0;
    /* the process's own cgroup and its ancestors (a service, systemd-run -p MemoryMax, Slurm,
     * a container), not only the hierarchy's root */
    char text[4096];
    read_proc_cgroup(text, sizeof text);
    size_t l = s2s_cgroup_limit(text, "/sys/fs/cgroup");
    if (l && (!m || l < m)) m = l;
    const char *cg[2] = {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"};
    for (int i = 0; i < 2; i++) {
        size_t r = read_limit(cg[i]);
        if (r && (!m || r < m)) m = r;
    }
    struct rlimit r;
    if (getrlimit(RLIMIT_AS, &r) == 0 && r.rlim_cur != RLIM_INFINITY && (!m || (size_t)r.rlim_cur < m)) m = (size_t)r.rlim_cur;
    return m;
}
