/* runlog.c — reading a run's log, line by line with a bound. */
#include "s2s/runlog.h"
#include "s2s/rundir.h"
#include "s2s/text.h"

#include <fcntl.h>
#include <limits.h>
#include <unistd.h>
#include <stdio.h>

S2sStatus runlog_each(const char *dir, void (*fn)(void *ctx, const char *type, const cJSON *j), void *ctx,
                               S2sError *err) {
    char p[PATH_MAX];
    rundir_path(p, sizeof p, dir, RUN_LOG);
    int fd;
    if (file_open_regular(p, O_RDONLY, &fd, err)) /* a FIFO planted there never blocks */
        return s2s_fail(err, S2S_ERR_IO, "%s: missing, or not a regular file", p);
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return s2s_fail(err, S2S_ERR_IO, "%s: cannot open", p);
    }
    LineReader r;
    line_reader_init(&r, f, (size_t)1 << 16);
    S2sStatus st = S2S_OK;
    for (;;) {
        const char *line;
        size_t len;
        LineStatus ls = line_read(&r, &line, &len);
        if (ls == LINE_EOF) break;
        if (ls != LINE_OK) {
            st = s2s_fail(err, S2S_ERR_DATA, "%s:%ld: not a log line (longer than 64 KiB, or unreadable)", p, r.line_no);
            break;
        }
        cJSON *j = cJSON_Parse(line);
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(j, LOG_TYPE);
        if (cJSON_IsString(type)) fn(ctx, type->valuestring, j);
        cJSON_Delete(j);
    }
    line_reader_free(&r);
    fclose(f);
    return st;
}

double runlog_num(const cJSON *j, const char *key, double dflt) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, key);
    return cJSON_IsNumber(x) ? x->valuedouble : dflt;
}
