/* runs.c — the runs folder, read only: the list of runs and comparisons, a run's log from a
 * byte on, its pictures and summaries. Nothing outside the folder is ever opened: the folder
 * is held open from the start and every name below it is opened one segment at a time without
 * following a link (file_open_beneath), so a symbolic link anywhere in a run (log.jsonl,
 * config.json, model.bin, a picture) is as absent as a missing file. */
#define _DEFAULT_SOURCE
#include "s2s/rundir.h"
#include "serve_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RUNS_MAX 512         /* runs listed */
#define FILES_MAX 10000      /* files listed of one run */
#define LOG_CHUNK (4u << 20) /* bytes of a log in one answer */

bool serve_safe_relative(const char *name) {
    if (!*name || strlen(name) > 512) return false;
    int depth = 0;
    for (const char *p = name; *p;) {
        if (*p == '.' || *p == '/') return false; /* a hidden name, "..", an empty segment or an absolute path */
        const char *e = p;
        while (*e && *e != '/') {
            char c = *e++;
            if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("._-=,+", c)))
                return false;
        }
        if (++depth > 3) return false;
        p = *e ? e + 1 : e;
        if (*e && !*p) return false; /* a trailing slash */
    }
    return true;
}

/* A regular file called name in the folder open as dir (a link is not one). */
static bool has_file(int dir, const char *name) {
    struct stat st;
    return fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}

int serve_run_open(const Server *s, const char *name) {
    if (s->runs_fd < 0 || !serve_safe_relative(name)) return -1;
    int fd = file_open_beneath(s->runs_fd, name, O_RDONLY | O_DIRECTORY, 0, true);
    if (fd >= 0 && !has_file(fd, RUN_LOG) && !has_file(fd, "summary.json")) {
        close(fd);
        fd = -1;
    }
    return fd;
}

void serve_log_summary(int fd, cJSON *run) {
    char buf[65536 + 1];
    struct stat st;
    if (fstat(fd, &st) != 0) return;
    off_t size = st.st_size, from = size > 65536 ? size - 65536 : 0;
    ssize_t got = pread(fd, buf, sizeof buf - 1, from);
    size_t n = got > 0 ? (size_t)got : 0;
    buf[n] = '\0';
    cJSON_AddNumberToObject(run, "log_bytes", (double)size);
    const char *want[] = {"step", "epoch", "valid", "test"};
    for (size_t k = 0; k < sizeof want / sizeof *want; k++) {
        for (char *end = buf + n; end > buf;) {
            char *line = end - 1;
            while (line > buf && line[-1] != '\n') line--;
            cJSON *j = cJSON_ParseWithLength(line, (size_t)(end - line));
            end = line;
            const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "type"));
            if (type && !strcmp(type, want[k])) {
                char key[16];
                snprintf(key, sizeof key, "last_%s", want[k]);
                cJSON_AddItemToObject(run, key, j);
                break;
            }
            cJSON_Delete(j);
        }
    }
}

/* A run's entry in the list: its config, whether it has a model, its log's last lines. */
static cJSON *run_json(int dir, const char *name) {
    cJSON *run = cJSON_CreateObject();
    cJSON_AddStringToObject(run, "name", name);
    cJSON *cj = NULL;
    int fd = file_open_beneath(dir, RUN_CONFIG, O_RDONLY, 0, false);
    if (fd >= 0) {
        char text[65536];
        ssize_t n = pread(fd, text, sizeof text, 0);
        if (n > 0 && (size_t)n < sizeof text) cj = cJSON_ParseWithLength(text, (size_t)n);
        close(fd);
    }
    cJSON_AddItemToObject(run, "config", cj ? cj : cJSON_CreateNull());
    cJSON_AddBoolToObject(run, "has_model", has_file(dir, RUN_MODEL)); /* translates as "model": name */
    if ((fd = file_open_beneath(dir, RUN_LOG, O_RDONLY, 0, false)) >= 0) {
        serve_log_summary(fd, run);
        close(fd);
    }
    return run;
}

/* Every run folder below the folder open as dir (which this takes; depth ≤ 3) into list,
 * every comparison into compares: names relative to the runs folder. */
static void list_runs(int dir, const char *rel, int depth, cJSON *list, cJSON *compares) {
    DIR *d = fdopendir(dir);
    if (!d) {
        close(dir);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) && cJSON_GetArraySize(list) < RUNS_MAX) {
        char name[600];
        if (snprintf(name, sizeof name, "%s%s%s", rel, rel[0] ? "/" : "", e->d_name) >= (int)sizeof name ||
            !serve_safe_relative(name))
            continue;
        int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
        if (sub < 0) continue; /* not a folder, or a link */
        if (has_file(sub, "summary.json")) { /* a comparison: its runs are inside, listed as runs */
            cJSON *cmp = cJSON_CreateObject();
            cJSON_AddStringToObject(cmp, "name", name);
            cJSON_AddItemToArray(compares, cmp);
        }
        if (has_file(sub, RUN_LOG)) {
            cJSON_AddItemToArray(list, run_json(sub, name));
            close(sub);
        } else if (depth < 3) {
            list_runs(sub, name, depth + 1, list, compares);
        } else {
            close(sub);
        }
    }
    closedir(d);
}

enum MHD_Result serve_get_runs(Server *s, struct MHD_Connection *c) {
    if (s->runs_fd < 0) return serve_send_error(c, MHD_HTTP_NOT_FOUND, "no runs folder (serve --runs DIR)");
    cJSON *j = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(j, "runs"), *cmp = cJSON_AddArrayToObject(j, "compares");
    int dir = openat(s->runs_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* its own position for readdir */
    if (dir >= 0) list_runs(dir, "", 1, list, cmp);
    return serve_send_json(c, MHD_HTTP_OK, j);
}

/* The open regular file fd (taken) from byte `from`, at most max bytes, with its size. */
static enum MHD_Result send_fd(struct MHD_Connection *c, int fd, uint64_t from, uint64_t max, const char *type) {
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return serve_send_error(c, MHD_HTTP_NOT_FOUND, "cannot read that file");
    }
    uint64_t total = (uint64_t)st.st_size;
    if (from > total) from = total;
    uint64_t n = total - from < max ? total - from : max;
    struct MHD_Response *r = MHD_create_response_from_fd_at_offset64(n, fd, from); /* closes fd */
    if (!r) {
        close(fd);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    char size_text[32];
    snprintf(size_text, sizeof size_text, "%llu", (unsigned long long)total);
    MHD_add_response_header(r, "X-File-Size", size_text);
    enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ok;
}

static const char *file_type(const char *path) {
    static const char *const TYPES[][2] = {{".png", "image/png"},          {".jsonl", "application/x-ndjson"},
                                           {".json", "application/json"}, {".csv", "text/csv; charset=utf-8"},
                                           {".md", "text/markdown; charset=utf-8"}, {".txt", "text/plain; charset=utf-8"},
                                           {".hyp", "text/plain; charset=utf-8"},   {".ref", "text/plain; charset=utf-8"}};
    const char *dot = strrchr(path, '.');
    for (size_t i = 0; dot && i < sizeof TYPES / sizeof *TYPES; i++)
        if (!strcmp(dot, TYPES[i][0])) return TYPES[i][1];
    return NULL;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The files of known kinds in the folder open as dir (taken) and its subfolders (attention/,
 * not a run inside), sorted; no link followed. */
static void list_files(int dir, const char *rel, int depth, cJSON *list) {
    DIR *d = fdopendir(dir);
    if (!d) {
        close(dir);
        return;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d)) && n < FILES_MAX;) {
        if (n == cap) names = s2s_xrealloc(names, (cap = cap ? 2 * cap : 64) * sizeof *names);
        size_t k = strlen(e->d_name) + 1;
        names[n] = s2s_xmalloc(k);
        memcpy(names[n++], e->d_name, k);
    }
    qsort(names, n, sizeof *names, by_name);
    for (size_t i = 0; i < n; i++) {
        char name[600];
        struct stat st;
        if (snprintf(name, sizeof name, "%s%s%s", rel, rel[0] ? "/" : "", names[i]) < (int)sizeof name &&
            serve_safe_relative(name) && fstatat(dirfd(d), names[i], &st, AT_SYMLINK_NOFOLLOW) == 0) {
            if (S_ISREG(st.st_mode) && file_type(name) && cJSON_GetArraySize(list) < FILES_MAX) {
                cJSON_AddItemToArray(list, cJSON_CreateString(name));
            } else if (S_ISDIR(st.st_mode) && depth < 2) {
                int sub = openat(dirfd(d), names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
                if (sub >= 0 && has_file(sub, RUN_LOG)) {
                    close(sub);
                } else if (sub >= 0) {
                    list_files(sub, name, depth + 1, list);
                }
            }
        }
        free(names[i]);
    }
    free(names);
    closedir(d);
}

/* "from": a byte offset, digits only (no sign, no overflow). */
static bool byte_offset(const char *text, uint64_t *out) {
    *out = 0;
    if (!text) return true;
    if (!*text || strlen(text) > 19) return false; /* 19 digits: below 2^63 */
    for (const char *p = text; *p; p++) {
        if (*p < '0' || *p > '9') return false;
        *out = *out * 10 + (uint64_t)(*p - '0');
    }
    return true;
}

static enum MHD_Result get_files_list(Server *s, struct MHD_Connection *c, const char *name) {
    int dir = serve_run_open(s, name);
    if (dir < 0) return serve_send_error(c, MHD_HTTP_NOT_FOUND, "no run \"%.200s\" in the runs folder", name);
    cJSON *j = cJSON_CreateObject();
    list_files(dir, "", 1, cJSON_AddArrayToObject(j, "files"));
    return serve_send_json(c, MHD_HTTP_OK, j);
}

/* /api/runs/NAME/log[?from=BYTES], /api/runs/NAME/files and /api/runs/NAME/files/REL: NAME a
 * run folder below the runs folder, REL a file inside it of a known kind; anything else is 404. */
enum MHD_Result serve_get_run_path(Server *s, struct MHD_Connection *c, const char *rest) {
    char name[600], alias[700];
    size_t len = strlen(rest);
    if (len > 6 && !strcmp(rest + len - 6, "/files")) { /* the listing */
        if (len - 6 >= sizeof name) return serve_send_error(c, MHD_HTTP_NOT_FOUND, "no such run path");
        memcpy(name, rest, len - 6);
        name[len - 6] = '\0';
        return get_files_list(s, c, name);
    }
    const char *att = strstr(rest, "/attention/"); /* NAME/attention/F: NAME/files/attention/F */
    if (att && !strstr(rest, "/files/") && snprintf(alias, sizeof alias, "%.*s/files%s", (int)(att - rest), rest, att) < (int)sizeof alias)
        rest = alias;
    const char *files = strstr(rest, "/files/");
    size_t n = files ? (size_t)(files - rest) : strlen(rest) >= 4 ? strlen(rest) - 4 : 0;
    bool is_log = !files && n > 0 && !strcmp(rest + n, "/log");
    if ((!files && !is_log) || n == 0 || n >= sizeof name) return serve_send_error(c, MHD_HTTP_NOT_FOUND, "no such run path");
    memcpy(name, rest, n);
    name[n] = '\0';
    uint64_t from = 0;
    if (is_log && !byte_offset(MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "from"), &from))
        return serve_send_error(c, MHD_HTTP_BAD_REQUEST, "from: a byte offset (digits, below 2^63)");
    int dir = serve_run_open(s, name);
    if (dir < 0) return serve_send_error(c, MHD_HTTP_NOT_FOUND, "no run \"%.200s\" in the runs folder", name);
    const char *rel = is_log ? RUN_LOG : files + 7, *type = is_log ? "application/x-ndjson" : file_type(rel);
    int fd = type && serve_safe_relative(rel) ? file_open_beneath(dir, rel, O_RDONLY, 0, false) : -1;
    close(dir);
    if (fd < 0) return serve_send_error(c, MHD_HTTP_NOT_FOUND, "no such file in run \"%.200s\"", name);
    return send_fd(c, fd, from, is_log ? LOG_CHUNK : UINT64_MAX, type);
}
