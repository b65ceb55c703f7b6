/* config_file.c — a config from its file: found as users type it (a path, configs/NAME, the
 * installed configs beside the program) and read whole, then parsed by config.c. */
#include "s2s/config.h"
#include "s2s/file.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The installed configs beside the running program: PREFIX/share/s2s/configs for
 * PREFIX/bin/s2s-train (make install puts them there); "" when the path cannot be read. */
static void installed_configs(char *out, size_t n) {
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    out[0] = '\0';
    if (len <= 0) return;
    exe[len] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash) return;
    *slash = '\0'; /* PREFIX/bin */
    static const char tail[] = "/../share/s2s/configs";
    size_t len_dir = strlen(exe);
    if (len_dir + sizeof tail > n) return;
    memcpy(out, exe, len_dir);
    memcpy(out + len_dir, tail, sizeof tail);
}

void config_find_file(const char *name, char *out, size_t n) {
    const char *cand[3] = {"%s", "configs/%s", "configs/%s.json"};
    for (int i = 0; i < 3; i++) {
        snprintf(out, n, cand[i], name);
        if (file_is_regular(out)) return; /* a folder named like a config is not one */
        if (strchr(name, '/')) break;     /* a path is taken as given */
    }
    char dir[PATH_MAX];
    installed_configs(dir, sizeof dir);
    if (dir[0] && !strchr(name, '/')) {
        const char *inst[2] = {"%s/%s", "%s/%s.json"};
        for (int i = 0; i < 2; i++) {
            snprintf(out, n, inst[i], dir, name);
            if (file_is_regular(out)) return;
        }
    }
    snprintf(out, n, "%s", name);
}

static S2sStatus load(Config *c, const char *path, bool managed, S2sError *err) {
    char *buf;
    size_t n;
    size_t max = (size_t)1 << 20; /* a config is a few KB */
    S2sStatus st = managed ? file_read_regular(path, max, &buf, &n, err) : file_read_all(path, max, &buf, &n, err);
    if (st) return st;
    if (strlen(buf) != n) {
        free(buf);
        return s2s_fail(err, S2S_ERR_CONFIG, "%s: contains a NUL byte; expected JSON text", path);
    }
    st = config_parse(c, buf, path, err);
    free(buf);
    if (st == S2S_OK) snprintf(c->path, sizeof c->path, "%s", path);
    return st;
}

S2sStatus config_load(Config *c, const char *path, S2sError *err) { return load(c, path, false, err); }

S2sStatus config_load_run(Config *c, const char *path, S2sError *err) { return load(c, path, true, err); }
