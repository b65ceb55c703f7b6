/* request.c — POST /api/translate: the body checked whole (serve_check_request, the fuzzed
 * parser), the lines decoded on the model's thread, the answer with each line's translation,
 * n-best list, attention or error. */
#include "s2s/text.h"
#include "serve_internal.h"

#include <stdlib.h>
#include <string.h>

#define NUL_MARK '\xff' /* a \u0000 of the body, after the escape pass (never in valid UTF-8) */

/* A request's settings, checked; the lines borrow the parsed JSON's strings. */
typedef struct TranslateRequest {
    const char **lines;  /* (n) NULL: a line holding a NUL character */
    const char *model;   /* a run's name (its model.bin), or NULL: the command line's model */
    int n, beam, n_best;
    float alpha;
    bool attention;
} TranslateRequest;

static int hex4(const char *p) {
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

/* The body's string escapes, before cJSON reads them: a lone UTF-16 surrogate is an error
 * saying so (cJSON would only fail), and each \u0000 becomes NUL_MARK, so that a line holding
 * one is known after parsing (cJSON's strings end at a NUL, and the line would be cut). A body
 * that is not UTF-8 is copied as it is (its lines are refused later). Returns a malloc'd copy
 * of *len bytes, or NULL with msg. */
static char *escape_pass(const char *body, size_t *len, bool *utf8, char *msg, size_t n_msg) {
    size_t n = *len, k = 0;
    char *out = s2s_xmalloc(n + 1);
    bool in_string = false;
    *utf8 = utf8_valid(body, n);
    for (size_t i = 0; i < n; i++) {
        char c = body[i];
        if (!*utf8) {
            out[k++] = c;
            continue;
        }
        if (c == '"') in_string = !in_string;
        if (!in_string || c != '\\' || i + 1 >= n) {
            out[k++] = c;
            continue;
        }
        int v = body[i + 1] == 'u' && i + 5 < n ? hex4(body + i + 2) : -1;
        bool high = v >= 0xD800 && v <= 0xDBFF, low = v >= 0xDC00 && v <= 0xDFFF;
        int next = high && i + 11 < n && body[i + 6] == '\\' && body[i + 7] == 'u' ? hex4(body + i + 8) : -1;
        if (low || (high && !(next >= 0xDC00 && next <= 0xDFFF))) {
            snprintf(msg, n_msg, "a lone UTF-16 surrogate \\u%04x at byte %zu: a string must be valid Unicode", (unsigned)v, i);
            free(out);
            return NULL;
        }
        if (v == 0) {
            out[k++] = NUL_MARK;
            i += 5;
            continue;
        }
        size_t take = high ? 12 : 2; /* a pair whole; else the escape's first two bytes (the rest are plain) */
        memcpy(out + k, body + i, take);
        k += take;
        i += take - 1;
    }
    out[k] = '\0';
    *len = k;
    return out;
}

static bool parse_key(const cJSON *k, TranslateRequest *q, int max_sentences, char *msg, size_t n_msg) {
    const char *key = k->string;
    if (!strcmp(key, "text")) {
        if (cJSON_IsString(k)) {
            q->n = 1;
        } else if (cJSON_IsArray(k)) {
            q->n = cJSON_GetArraySize(k);
            if (q->n > max_sentences) {
                snprintf(msg, n_msg, "\"text\": %d sentences; at most %d in one request", q->n, max_sentences);
                return false;
            }
        } else {
            snprintf(msg, n_msg, "\"text\": a string or an array of strings");
            return false;
        }
    } else if (!strcmp(key, "beam") || !strcmp(key, "n_best")) {
        double v = cJSON_IsNumber(k) ? k->valuedouble : -1;
        if (!(v >= 1 && v <= SERVE_MAX_BEAM && v == (int)v)) {
            snprintf(msg, n_msg, "\"%s\": an integer from 1 to %d", key, SERVE_MAX_BEAM);
            return false;
        }
        *(!strcmp(key, "beam") ? &q->beam : &q->n_best) = (int)v;
    } else if (!strcmp(key, "alpha")) {
        if (!cJSON_IsNumber(k) || !(k->valuedouble >= 0 && k->valuedouble <= 10)) {
            snprintf(msg, n_msg, "\"alpha\": a number from 0 to 10");
            return false;
        }
        q->alpha = (float)k->valuedouble;
    } else if (!strcmp(key, "model")) {
        if (!cJSON_IsString(k) || !serve_safe_relative(k->valuestring)) {
            snprintf(msg, n_msg, "\"model\": a run's name as GET /api/runs lists it");
            return false;
        }
        q->model = k->valuestring;
    } else if (!strcmp(key, "attention")) {
        if (!cJSON_IsBool(k)) {
            snprintf(msg, n_msg, "\"attention\": true or false");
            return false;
        }
        q->attention = cJSON_IsTrue(k);
    } else {
        snprintf(msg, n_msg, "unknown key \"%.60s\" (text, model, beam, n_best, alpha, attention)", key);
        return false;
    }
    return true;
}

/* The parsed body as a translate request, or the reason it is not one (msg). q->lines is
 * allocated (or NULL) either way: the caller frees it. */
static bool parse_translate(const cJSON *j, bool marked, int max_sentences, TranslateRequest *q, char *msg, size_t n_msg) {
    *q = (TranslateRequest){.beam = 1, .n_best = 1, .alpha = 1.0f};
    if (!cJSON_IsObject(j)) {
        snprintf(msg, n_msg, "the body must be a JSON object: {\"text\": [\"...\"], \"beam\": 1, ...}");
        return false;
    }
    const cJSON *k;
    cJSON_ArrayForEach(k, j) {
        if (cJSON_GetObjectItemCaseSensitive(j, k->string) != k) { /* the first of that name is another */
            snprintf(msg, n_msg, "\"%.60s\" given twice", k->string);
            return false;
        }
        if (!parse_key(k, q, max_sentences, msg, n_msg)) return false;
    }
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(j, "text");
    if (!text) {
        snprintf(msg, n_msg, "\"text\": missing (a string or an array of strings)");
        return false;
    }
    if (q->n_best > q->beam) {
        snprintf(msg, n_msg, "\"n_best\" %d is more than \"beam\" %d", q->n_best, q->beam);
        return false;
    }
    q->lines = s2s_xcalloc((size_t)(q->n ? q->n : 1), sizeof *q->lines);
    for (int i = 0; i < q->n; i++) {
        const cJSON *e = cJSON_IsString(text) ? text : cJSON_GetArrayItem(text, i);
        if (!cJSON_IsString(e)) {
            snprintf(msg, n_msg, "\"text\"[%d]: not a string", i);
            return false;
        }
        if (marked && strchr(e->valuestring, NUL_MARK)) continue; /* NULL: the line's own error */
        if (!utf8_valid(e->valuestring, strlen(e->valuestring))) {
            snprintf(msg, n_msg, "\"text\"[%d]: not valid UTF-8", i);
            return false;
        }
        q->lines[i] = e->valuestring;
    }
    return true;
}

/* The body parsed (NULL with msg); *marked: its \u0000 are NUL_MARKs. */
static cJSON *parse_body(const char *body, size_t len, bool *marked, char *msg, size_t n_msg) {
    char *text = escape_pass(body, &len, marked, msg, n_msg);
    if (!text) return NULL;
    cJSON *j = cJSON_ParseWithLength(text, len);
    free(text);
    if (!j) snprintf(msg, n_msg, "the body is not JSON (%zu bytes)", len);
    return j;
}

bool serve_check_request(const char *body, size_t len, int max_sentences, char *msg, size_t n_msg) {
    bool marked;
    cJSON *j = parse_body(body, len, &marked, msg, n_msg);
    if (!j) return false;
    TranslateRequest q;
    bool ok = parse_translate(j, marked, max_sentences, &q, msg, n_msg);
    free(q.lines);
    cJSON_Delete(j);
    return ok;
}

/* A line's entry of the answer: its text, then its error, n-best list or attention. */
static cJSON *line_json(const TranslateRequest *q, int i, const TranslatedLine *t) {
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "text", t->text[0] ? t->text[0] : "");
    if (!q->lines[i]) cJSON_AddStringToObject(e, "error", "the line holds a NUL character (\\u0000), which no model reads");
    else if (t->status) cJSON_AddStringToObject(e, "error", t->error[0] ? t->error : "cannot be read");
    if (q->beam > 1 && !t->status) {
        cJSON *nb = cJSON_AddArrayToObject(e, "n_best");
        for (int k = 0; k < t->n_hyps; k++) {
            cJSON *h = cJSON_CreateObject();
            cJSON_AddStringToObject(h, "text", t->text[k]);
            cJSON_AddNumberToObject(h, "score", t->score[k]);
            cJSON_AddNumberToObject(h, "logprob", t->logprob[k]);
            cJSON_AddItemToArray(nb, h);
        }
    }
    if (t->attention) cJSON_AddItemToObject(e, "attention", translator_attention_json(t->attention));
    return e;
}

enum MHD_Result serve_post_translate(Server *s, struct MHD_Connection *c, const char *body, size_t len) {
    char msg[1024];
    bool marked;
    cJSON *j = parse_body(body ? body : "", len, &marked, msg, sizeof msg);
    if (!j) return serve_send_error(c, MHD_HTTP_BAD_REQUEST, "%s", msg);
    TranslateRequest q;
    if (!parse_translate(j, marked, s->o->max_sentences, &q, msg, sizeof msg)) {
        free(q.lines);
        cJSON_Delete(j);
        return serve_send_error(c, MHD_HTTP_BAD_REQUEST, "%s", msg);
    }
    Served *m = NULL;
    unsigned status = serve_model_find(s, q.model, &m, msg, sizeof msg);
    if (status != MHD_HTTP_OK) {
        free(q.lines);
        cJSON_Delete(j);
        return serve_send_error(c, status, "%s", msg);
    }
    TranslatedLine *out = s2s_xcalloc((size_t)(q.n ? q.n : 1), sizeof *out);
    Job job = {.lines = q.lines, .n = q.n, .beam = q.beam, .n_best = q.n_best, .alpha = q.alpha, .attention = q.attention,
               .out = out};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    serve_model_decode(m, &job);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    cJSON *r = cJSON_CreateObject(), *list;
    cJSON_AddStringToObject(r, "model", m->name);
    serve_model_release(s, m);
    list = cJSON_AddArrayToObject(r, "translations");
    for (int i = 0; i < q.n; i++) cJSON_AddItemToArray(list, line_json(&q, i, &out[i]));
    cJSON_AddNumberToObject(r, "ms", 1e3 * (double)(t1.tv_sec - t0.tv_sec) + 1e-6 * (double)(t1.tv_nsec - t0.tv_nsec));
    translator_free_results(out, q.n);
    free(out);
    free(q.lines);
    cJSON_Delete(j);
    return serve_send_json(c, MHD_HTTP_OK, r);
}
