/* config_file.c — a config from its file: found as users type it (a path, configs/NAME, the
 * installed configs beside the library or the program) and read whole, then parsed by
 * config.c; a name typed wrong gets the nearest config's name; the keys it gives that do nothing. */
#define _GNU_SOURCE /* dladdr */
#include "config_schema.h"
#include "s2s/config.h"
#include "s2s/file.h"

#include <cjson/cJSON.h>

#include <dirent.h>
#include <sys/stat.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The installed configs beside the library: PREFIX/share/s2s/configs for PREFIX/lib/libs2s.so
 * (loaded by Python, whose /proc/self/exe is the interpreter) or, linked into a program, for
 * PREFIX/bin/s2s-train (make install puts them there); "" when neither path can be read. */
static void installed_configs(char *out, size_t n) {
    char exe[PATH_MAX];
    ssize_t len = -1;
    Dl_info info;
    if (dladdr((void *)(uintptr_t)&config_find_file, &info) && info.dli_fname && strstr(info.dli_fname, ".so") &&
        strlen(info.dli_fname) < sizeof exe)
        len = (ssize_t)strlen(strcpy(exe, info.dli_fname)); /* a shared library: its own file */
    else
        len = readlink("/proc/self/exe", exe, sizeof exe - 1); /* the program it is linked into */
    out[0] = '\0';
    if (len <= 0) return;
    exe[len] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash) return;
    *slash = '\0'; /* PREFIX/bin or PREFIX/lib, maybe by way of "..": Python's path to the library */
    char dir[PATH_MAX];
    if (!realpath(exe, dir) || !(slash = strrchr(dir, '/'))) return;
    *slash = '\0'; /* PREFIX */
    static const char tail[] = "/share/s2s/configs";
    size_t len_dir = strlen(dir);
    if (len_dir + sizeof tail > n) return;
    memcpy(out, dir, len_dir);
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

/* The config names in dir (files NAME.json) nearest to name, into best; its distance. */
static int nearest_in(const char *dir, const char *name, char *best, size_t n, int bd) {
    DIR *d = opendir(dir);
    if (!d) return bd;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len < 6 || len > 63 || strcmp(e->d_name + len - 5, ".json")) continue;
        char stem[64];
        snprintf(stem, sizeof stem, "%.*s", (int)len - 5, e->d_name);
        int dist = config_edit_distance(name, stem);
        if (dist < bd || (dist == bd && strcmp(stem, best) < 0)) {
            bd = dist;
            snprintf(best, n, "%s", stem);
        }
    }
    closedir(d);
    return bd;
}

/* A name that is no file: the nearest config name of configs/ here and of the installed ones,
 * if one is near (a third of its length, at least 2 edits), as "; did you mean NAME?". */
static void did_you_mean(const char *name, char *out, size_t n) {
    out[0] = '\0';
    if (strchr(name, '/')) return;
    char stem[64], best[64] = "", dir[PATH_MAX];
    size_t len = strlen(name);
    if (len > 5 && !strcmp(name + len - 5, ".json")) len -= 5;
    if (len >= sizeof stem) return;
    snprintf(stem, sizeof stem, "%.*s", (int)len, name);
    int bd = nearest_in("configs", stem, best, sizeof best, 99);
    installed_configs(dir, sizeof dir);
    if (dir[0]) bd = nearest_in(dir, stem, best, sizeof best, bd);
    int limit = (int)len / 3 > 2 ? (int)len / 3 : 2;
    if (best[0] && bd > 0 && bd <= limit) {
        snprintf(out, n, "; did you mean %s?", best);
        return;
    }
    /* nothing near: where it looked, and a folder that is missing (an install without its configs) */
    struct stat st;
    bool here = stat("configs", &st) == 0 && S_ISDIR(st.st_mode), inst = dir[0] && stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
    if (here || inst)
        snprintf(out, n, "; no config of that name in %s%s%.300s", here ? "configs/" : "", here && inst ? " or " : "",
                 inst ? dir : "");
    else
        snprintf(out, n, "; there are no configs to look in: no configs/ here, and the installed ones (%.300s) are "
                 "missing (make install puts them there)", dir[0] ? dir : "PREFIX/share/s2s/configs");
}

static S2sStatus load(Config *c, const char *path, bool managed, S2sError *err) {
    char *buf;
    size_t n;
    size_t max = (size_t)1 << 20; /* a config is a few KB */
    S2sStatus st = managed ? file_read_regular(path, max, &buf, &n, err) : file_read_all(path, max, &buf, &n, err);
    if (st && !managed && !file_exists(path)) { /* a name typed wrong */
        char hint[600];
        did_you_mean(path, hint, sizeof hint);
        if (hint[0]) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            return s2s_fail(err, st, "%.400s%s", msg, hint);
        }
    }
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

/* Key i, given by where, when it does nothing under c: one warning line into out. */
static int idle(const Config *c, int i, const char *where, char *out, size_t n) {
    if (i < 0 || config_key_applies(c, i)) return 0;
    size_t k = strlen(out);
    snprintf(out + k, n - k, "warning: %s: %s does nothing in this config: it is %s key\n", where, CONFIG_KEYS[i].path,
             CONFIG_WHEN_TEXT[CONFIG_KEYS[i].when]);
    return 1;
}

int config_idle_keys(const Config *c, const char *path, const char *const *sets, int n_sets, char *out, size_t n) {
    int count = 0;
    out[0] = '\0';
    char *buf;
    size_t len;
    S2sError ignored; /* the file was read and parsed before; here it only names keys */
    cJSON *root = NULL;
    if (path && !file_read_regular(path, (size_t)1 << 20, &buf, &len, &ignored)) { /* a FIFO was read once */
        root = cJSON_Parse(buf);
        free(buf);
    }
    const cJSON *item, *sub;
    cJSON_ArrayForEach(item, root) {
        char key[160];
        if (!cJSON_IsObject(item)) count += idle(c, config_key_index(item->string), path, out, n);
        else cJSON_ArrayForEach(sub, item) {
            snprintf(key, sizeof key, "%s.%s", item->string, sub->string);
            count += idle(c, config_key_index(key), path, out, n);
        }
    }
    cJSON_Delete(root);
    for (int i = 0; i < n_sets; i++) {
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)strcspn(sets[i], "="), sets[i]);
        count += idle(c, config_key_named(name), "--set", out, n);
    }
    return count;
}
