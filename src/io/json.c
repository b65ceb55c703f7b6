/* json.c — duplicate keys and key positions in JSON text. */
#include "s2s/json.h"

#include <stdio.h>
#include <string.h>

static const cJSON *dup_in(const cJSON *node, char *path, size_t n, size_t used) {
    int i = 0;
    for (const cJSON *c = node ? node->child : NULL; c; c = c->next, i++) {
        size_t len = used;
        if (cJSON_IsObject(node)) {
            for (const cJSON *e = node->child; e != c; e = e->next)
                if (e->string && c->string && strcmp(e->string, c->string) == 0) {
                    snprintf(path + used, n - used, "%s%s", used ? "." : "", c->string);
                    return c;
                }
            len += (size_t)snprintf(path + used, n - used, "%s%s", used ? "." : "", c->string ? c->string : "");
        } else {
            len += (size_t)snprintf(path + used, n - used, "%s%d", used ? "." : "", i);
        }
        if (len >= n) len = n - 1;
        if (cJSON_IsObject(c) || cJSON_IsArray(c)) {
            const cJSON *d = dup_in(c, path, n, len);
            if (d) return d;
        }
        path[used] = '\0';
    }
    return NULL;
}

const cJSON *json_find_duplicate(const cJSON *node, char *path, size_t n) {
    S2S_ASSERT(n > 0);
    path[0] = '\0';
    return dup_in(node, path, n, 0);
}

void json_key_position(const char *text, const char *key, int k, char *buf, size_t n) {
    char quoted[160];
    buf[0] = '\0';
    if (snprintf(quoted, sizeof quoted, "\"%s\"", key) >= (int)sizeof quoted) return;
    const char *at = text;
    for (int i = 0; at && i <= k; i++) {
        at = strstr(at, quoted);
        if (at && i < k) at += strlen(quoted);
    }
    if (!at) return;
    int line, col;
    json_line_col(text, at, &line, &col);
    snprintf(buf, n, "%d:%d", line, col);
}

void json_line_col(const char *text, const char *at, int *line, int *col) {
    *line = *col = 1;
    for (const char *p = text; p < at && *p; p++) {
        if (*p == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

const char *json_find_nul(const char *text) {
    bool in_string = false;
    for (const char *p = text; p && *p; p++) {
        if (*p == '"') {
            in_string = !in_string;
        } else if (in_string && *p == '\\') {
            if (p[1] == 'u' && !strncmp(p + 2, "0000", 4)) return p;
            if (p[1]) p++; /* the escaped character, \" and \\ included */
        }
    }
    return NULL;
}

S2sStatus json_refuse_nul(const char *text, const char *origin, S2sError *err) {
    const char *nul = json_find_nul(text);
    if (!nul) return S2S_OK;
    int line, col;
    json_line_col(text, nul, &line, &col);
    return s2s_fail(err, S2S_ERR_CONFIG, "%s:%d:%d: a string holds \\u0000 (a NUL character), which no setting has", origin,
                    line, col);
}

const char *json_comment_at(const char *text, const char *at, int *col) {
    if (!at) return NULL;
    const char *c0 = at > text && at[-1] == '/' ? at - 1 : at;
    if (c0[0] != '/' || (c0[1] != '/' && c0[1] != '*')) return NULL;
    *col -= (int)(at - c0);
    return c0[1] == '/' ? "//" : "/*";
}
