/* serve.c — the HTTP API of ./serve (serve.h) on libmicrohttpd: a thread per connection, the
 * request body gathered up to the limit and checked whole before the model sees it; one
 * decoding thread per model takes the queued requests together (batching). */
#define _DEFAULT_SOURCE /* realpath */
#include "s2s/serve.h"
#include "s2s/file.h"
#include "s2s/model.h"
#include "s2s/text.h"
#include "s2s/translator.h"

#include <arpa/inet.h>
#include <cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* A request's lines waiting for the model's decoding thread. */
typedef struct Job {
    const char **lines;
    int n, beam, n_best;
    float alpha;
    bool attention;
    TranslatedLine *out; /* (n) filled by the decoding thread */
    bool done;
    struct Job *next;
} Job;

/* A model and the one thread that decodes with it (its tape is not shared): requests queue
 * their jobs; the thread takes every queued job decoded alike (beam, n_best, alpha,
 * attention) as one translator_run, so concurrent requests share decoding batches. */
extern const char SERVE_PAGE[]; /* page.html, built in by the Makefile */

typedef struct Served {
    char name[256], path[PATH_MAX];
    Seq2Seq m;
    Config cfg;
    Vocab src, trg;
    Tape tape;
    int batch_wait_ms;
    pthread_mutex_t lock; /* the queue and the counters */
    pthread_cond_t wake, done;
    Job *head;
    bool quit, started;
    pthread_t worker;
    long requests, decodes, lines;
} Served;

#define SERVE_MAX_MODELS 8 /* the command line's and those of runs, loaded on first use */

typedef struct Server {
    const ServeOptions *o;
    Served *models[SERVE_MAX_MODELS]; /* [0] the command line's model, when there is one */
    int n_models;
    bool has_model;                   /* a model from the command line: the default */
    pthread_mutex_t models_lock;      /* models[] and n_models */
    char runs[PATH_MAX]; /* the runs folder, resolved (realpath), or "" */
    atomic_int inflight; /* requests begun and not yet answered */
} Server;

static bool safe_relative(const char *name);
static bool has_file(const char *dir, const char *name);
static bool run_dir(const Server *s, const char *name, char *out);
static S2sStatus load_model(Served *m, const char *model_path, const ServeOptions *o, S2sError *err);
static void served_free(Served *m);
static void log_summary(const char *path, cJSON *run);

/* One request's body, gathered across the handler's calls. */
typedef struct Upload {
    char *body;
    size_t len;
    bool too_big;
} Upload;

ServeOptions serve_defaults(void) {
    return (ServeOptions){.host = NULL, .port = 8080, .threads = 0, .max_body = 1 << 20, .max_sentences = 256,
                          .timeout_s = 30, .batch_wait_ms = 0, .out = NULL, .stop = NULL};
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

/* ---- responses ---- */

/* j as the answer (deleted here), with an Allow header when allow is not NULL. */
static enum MHD_Result send_json_allow(struct MHD_Connection *c, unsigned status, cJSON *j, const char *allow) {
    char *text = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!text) return MHD_NO; /* out of memory: the connection is closed */
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    if (allow) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    enum MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result send_json(struct MHD_Connection *c, unsigned status, cJSON *j) {
    return send_json_allow(c, status, j, NULL);
}

static enum MHD_Result send_error(struct MHD_Connection *c, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static enum MHD_Result send_error(struct MHD_Connection *c, unsigned status, const char *fmt, ...) {
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "error", msg);
    return send_json(c, status, j);
}

/* 405 with the method the path takes */
static enum MHD_Result send_405(struct MHD_Connection *c, const char *path, const char *allow) {
    cJSON *j = cJSON_CreateObject();
    char msg[300];
    snprintf(msg, sizeof msg, "%.200s takes %s", path, allow);
    cJSON_AddStringToObject(j, "error", msg);
    return send_json_allow(c, MHD_HTTP_METHOD_NOT_ALLOWED, j, allow);
}

/* ---- the decoding thread ---- */

#define JOB_MAX_LINES 4096 /* lines decoded as one translator_run */

static bool alike(const Job *a, const Job *b) {
    return a->beam == b->beam && a->n_best == b->n_best && a->alpha == b->alpha && a->attention == b->attention;
}

static void *decoder(void *arg) {
    Served *m = arg;
    pthread_mutex_lock(&m->lock);
    for (;;) {
        while (!m->head && !m->quit) pthread_cond_wait(&m->wake, &m->lock);
        if (!m->head) break;
        if (m->batch_wait_ms > 0) { /* let the requests that come with this one join it */
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_nsec += (long)m->batch_wait_ms * 1000000L;
            until.tv_sec += until.tv_nsec / 1000000000L;
            until.tv_nsec %= 1000000000L;
            while (!m->quit && pthread_cond_timedwait(&m->wake, &m->lock, &until) == 0) {
            }
        }
        /* the first job and every later one decoded alike, up to JOB_MAX_LINES lines */
        Job *first = m->head, *taken = NULL, **tail = &taken, **p = &m->head;
        int total = 0;
        while (*p) {
            Job *j = *p;
            if (alike(j, first) && (total == 0 || total + j->n <= JOB_MAX_LINES)) {
                *p = j->next;
                j->next = NULL;
                *tail = j;
                tail = &j->next;
                total += j->n;
            } else {
                p = &j->next;
            }
        }
        pthread_mutex_unlock(&m->lock);
        const char **lines = s2s_xmalloc((size_t)(total ? total : 1) * sizeof *lines);
        int k = 0;
        for (Job *j = taken; j; j = j->next)
            for (int i = 0; i < j->n; i++) lines[k++] = j->lines[i];
        TranslatedLine *out = s2s_xcalloc((size_t)(total ? total : 1), sizeof *out);
        Translator t = {.model = &m->m, .cfg = &m->cfg, .src = &m->src, .trg = &m->trg, .tape = &m->tape,
                        .beam = first->beam, .n_best = first->n_best, .alpha = first->alpha,
                        .want_attention = first->attention};
        translator_run(&t, lines, total, 0, out);
        k = 0;
        for (Job *j = taken; j; j = j->next) { /* each job its own lines' results (they own their texts) */
            memcpy(j->out, out + k, (size_t)j->n * sizeof *out);
            k += j->n;
        }
        free(out);
        free(lines);
        pthread_mutex_lock(&m->lock);
        for (Job *j = taken, *next; j; j = next) {
            next = j->next;
            j->done = true;
        }
        m->decodes++;
        m->lines += total;
        pthread_cond_broadcast(&m->done);
    }
    pthread_mutex_unlock(&m->lock);
    return NULL;
}

/* A job through the decoding thread; returns when its results are in. */
static void decode(Served *m, Job *j) {
    pthread_mutex_lock(&m->lock);
    Job **p = &m->head;
    while (*p) p = &(*p)->next;
    *p = j;
    m->requests++;
    pthread_cond_signal(&m->wake);
    while (!j->done) pthread_cond_wait(&m->done, &m->lock);
    pthread_mutex_unlock(&m->lock);
}

/* ---- the routes ---- */

static cJSON *model_json(Served *m) {
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "name", m->name);
    cJSON_AddStringToObject(e, "path", m->path);
    cJSON_AddStringToObject(e, "type", MODEL_TYPE_NAMES[m->cfg.model.type]);
    cJSON_AddStringToObject(e, "attention", model_attention_name(&m->m));
    cJSON_AddNumberToObject(e, "params", (double)m->m.params.total);
    pthread_mutex_lock(&m->lock);
    cJSON_AddNumberToObject(e, "requests", (double)m->requests); /* translate requests so far, */
    cJSON_AddNumberToObject(e, "decodes", (double)m->decodes);   /* the decodings that served them */
    cJSON_AddNumberToObject(e, "lines", (double)m->lines);
    pthread_mutex_unlock(&m->lock);
    char *conf = config_to_json(&m->cfg);
    cJSON *cj = cJSON_Parse(conf);
    free(conf);
    cJSON_AddItemToObject(e, "config", cj ? cj : cJSON_CreateNull());
    /* its metrics: the test line of the run it comes from (the log beside the model file) */
    char log[PATH_MAX + 16];
    const char *slash = strrchr(m->path, '/');
    snprintf(log, sizeof log, "%.*slog.jsonl", slash ? (int)(slash - m->path + 1) : 0, m->path);
    cJSON *tmp = cJSON_CreateObject();
    log_summary(log, tmp);
    cJSON *test = cJSON_DetachItemFromObjectCaseSensitive(tmp, "last_test");
    cJSON_AddItemToObject(e, "metrics", test ? test : cJSON_CreateNull());
    cJSON_Delete(tmp);
    return e;
}

static enum MHD_Result get_models(Server *s, struct MHD_Connection *c) {
    cJSON *j = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(j, "models");
    pthread_mutex_lock(&s->models_lock);
    for (int i = 0; i < s->n_models; i++) cJSON_AddItemToArray(list, model_json(s->models[i]));
    pthread_mutex_unlock(&s->models_lock);
    return send_json(c, MHD_HTTP_OK, j);
}

/* A request's settings, checked; the lines borrow the parsed JSON's strings. */
typedef struct TranslateRequest {
    const char **lines;
    const char *model; /* a run's name (its model.bin), or NULL: the command line's model */
    int n, beam, n_best;
    float alpha;
    bool attention;
} TranslateRequest;

/* The parsed body as a translate request, or the reason it is not one (msg). q->lines is
 * allocated (or NULL) either way: the caller frees it. */
static bool parse_translate(const cJSON *j, int max_sentences, TranslateRequest *q, char *msg, size_t n_msg) {
    *q = (TranslateRequest){.beam = 1, .n_best = 1, .alpha = 1.0f};
    if (!cJSON_IsObject(j)) {
        snprintf(msg, n_msg, "the body must be a JSON object: {\"text\": [\"...\"], \"beam\": 1, ...}");
        return false;
    }
    const cJSON *k;
    cJSON_ArrayForEach(k, j) {
        const char *key = k->string;
        if (cJSON_GetObjectItemCaseSensitive(j, key) != k) { /* the first of that name is another */
            snprintf(msg, n_msg, "\"%.60s\" given twice", key);
            return false;
        }
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
            if (!cJSON_IsString(k) || !safe_relative(k->valuestring)) {
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
    if (q->attention && q->beam > 1) {
        snprintf(msg, n_msg, "\"attention\" comes with greedy decoding (\"beam\": 1)");
        return false;
    }
    q->lines = s2s_xcalloc((size_t)(q->n ? q->n : 1), sizeof *q->lines);
    for (int i = 0; i < q->n; i++) {
        const cJSON *e = cJSON_IsString(text) ? text : cJSON_GetArrayItem(text, i);
        if (!cJSON_IsString(e)) {
            snprintf(msg, n_msg, "\"text\"[%d]: not a string", i);
            return false;
        }
        if (!utf8_valid(e->valuestring, strlen(e->valuestring))) {
            snprintf(msg, n_msg, "\"text\"[%d]: not valid UTF-8", i);
            return false;
        }
        q->lines[i] = e->valuestring;
    }
    return true;
}

bool serve_check_request(const char *body, size_t len, int max_sentences, char *msg, size_t n_msg) {
    cJSON *j = cJSON_ParseWithLength(body, len);
    if (!j) {
        snprintf(msg, n_msg, "the body is not JSON (%zu bytes)", len);
        return false;
    }
    TranslateRequest q;
    bool ok = parse_translate(j, max_sentences, &q, msg, n_msg);
    free(q.lines);
    cJSON_Delete(j);
    return ok;
}

static cJSON *attention_json(const LineAttention *a) {
    cJSON *j = cJSON_CreateObject();
    cJSON *src = cJSON_AddArrayToObject(j, "source"), *out = cJSON_AddArrayToObject(j, "target"),
          *w = cJSON_AddArrayToObject(j, "weights");
    for (int k = 0; k < a->n_src; k++) cJSON_AddItemToArray(src, cJSON_CreateString(a->src[k]));
    for (int r = 0; r < a->n_out; r++) {
        cJSON_AddItemToArray(out, cJSON_CreateString(a->out[r]));
        cJSON_AddItemToArray(w, cJSON_CreateFloatArray(a->w + (size_t)r * a->n_src, a->n_src));
    }
    if (a->heads) { /* "layers": [layer][head][output row][source column] */
        cJSON *layers = cJSON_AddArrayToObject(j, "layers");
        for (int l = 0; l < a->n_layers; l++) {
            cJSON *hl = cJSON_CreateArray();
            for (int h = 0; h < a->n_heads; h++) {
                cJSON *m = cJSON_CreateArray();
                const float *p = a->heads + ((size_t)l * a->n_heads + h) * a->n_out * a->n_src;
                for (int r = 0; r < a->n_out; r++) cJSON_AddItemToArray(m, cJSON_CreateFloatArray(p + (size_t)r * a->n_src, a->n_src));
                cJSON_AddItemToArray(hl, m);
            }
            cJSON_AddItemToArray(layers, hl);
        }
    }
    return j;
}

/* The model a request names: the command line's (name NULL), or the run NAME's model.bin,
 * loaded on the first request that names it. Else the HTTP status and why, in msg. */
static unsigned find_model(Server *s, const char *name, Served **out, char *msg, size_t n_msg) {
    if (!name) {
        if (s->has_model) {
            *out = s->models[0];
            return MHD_HTTP_OK;
        }
        snprintf(msg, n_msg, "no model is served: name a run's (\"model\", with serve --runs) or start serve with MODEL.bin");
        return MHD_HTTP_NOT_FOUND;
    }
    char dir[PATH_MAX], path[PATH_MAX + 16];
    if (!run_dir(s, name, dir)) {
        snprintf(msg, n_msg, "\"model\": no run \"%.200s\" in the runs folder", name);
        return MHD_HTTP_NOT_FOUND;
    }
    snprintf(path, sizeof path, "%s/model.bin", dir);
    pthread_mutex_lock(&s->models_lock); /* one load at a time; decoding goes on meanwhile */
    for (int i = 0; i < s->n_models; i++)
        if (!strcmp(s->models[i]->path, path)) {
            *out = s->models[i];
            pthread_mutex_unlock(&s->models_lock);
            return MHD_HTTP_OK;
        }
    unsigned status = MHD_HTTP_OK;
    if (s->n_models == SERVE_MAX_MODELS) {
        snprintf(msg, n_msg, "%d models are loaded already, the most this server holds", SERVE_MAX_MODELS);
        status = MHD_HTTP_SERVICE_UNAVAILABLE;
    } else if (!has_file(dir, "model.bin")) {
        snprintf(msg, n_msg, "\"model\": run \"%.200s\" has no model.bin (yet)", name);
        status = MHD_HTTP_NOT_FOUND;
    } else {
        Served *m = s2s_xcalloc(1, sizeof *m);
        S2sError err;
        if (load_model(m, path, s->o, &err)) {
            snprintf(msg, n_msg, "\"model\": run \"%.200s\": %.300s", name, err.msg);
            free(m);
            status = MHD_HTTP_INTERNAL_SERVER_ERROR;
        } else {
            snprintf(m->name, sizeof m->name, "%s", name);
            s->models[s->n_models++] = m;
            *out = m;
        }
    }
    pthread_mutex_unlock(&s->models_lock);
    return status;
}

static enum MHD_Result post_translate(Server *s, struct MHD_Connection *c, const Upload *u) {
    cJSON *j = cJSON_ParseWithLength(u->body ? u->body : "", u->len);
    if (!j) return send_error(c, MHD_HTTP_BAD_REQUEST, "the body is not JSON (%zu bytes)", u->len);
    TranslateRequest q;
    char msg[1024];
    if (!parse_translate(j, s->o->max_sentences, &q, msg, sizeof msg)) {
        free(q.lines);
        cJSON_Delete(j);
        return send_error(c, MHD_HTTP_BAD_REQUEST, "%s", msg);
    }
    Served *m = NULL;
    unsigned status = find_model(s, q.model, &m, msg, sizeof msg);
    if (status != MHD_HTTP_OK) {
        free(q.lines);
        cJSON_Delete(j);
        return send_error(c, status, "%s", msg);
    }
    TranslatedLine *out = s2s_xcalloc((size_t)(q.n ? q.n : 1), sizeof *out);
    Job job = {.lines = q.lines, .n = q.n, .beam = q.beam, .n_best = q.n_best, .alpha = q.alpha, .attention = q.attention,
               .out = out};
    double t0 = now_ms();
    decode(m, &job);
    double ms = now_ms() - t0;
    cJSON *r = cJSON_CreateObject(), *list;
    cJSON_AddStringToObject(r, "model", m->name);
    list = cJSON_AddArrayToObject(r, "translations");
    for (int i = 0; i < q.n; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "text", out[i].text[0] ? out[i].text[0] : "");
        if (out[i].status) cJSON_AddStringToObject(e, "error", out[i].error[0] ? out[i].error : "cannot be read");
        if (q.beam > 1 && !out[i].status) {
            cJSON *nb = cJSON_AddArrayToObject(e, "n_best");
            for (int k = 0; k < q.n_best && out[i].text[k]; k++) {
                cJSON *h = cJSON_CreateObject();
                cJSON_AddStringToObject(h, "text", out[i].text[k]);
                cJSON_AddNumberToObject(h, "score", out[i].score[k]);
                cJSON_AddNumberToObject(h, "logprob", out[i].logprob[k]);
                cJSON_AddItemToArray(nb, h);
            }
        }
        if (out[i].attention) cJSON_AddItemToObject(e, "attention", attention_json(out[i].attention));
        cJSON_AddItemToArray(list, e);
    }
    cJSON_AddNumberToObject(r, "ms", ms);
    translator_free_results(out, q.n);
    free(out);
    free(q.lines);
    cJSON_Delete(j);
    return send_json(c, MHD_HTTP_OK, r);
}

/* ---- the runs folder: read only, nothing outside it ever served ---- */

#define RUNS_MAX 512            /* runs listed */
#define LOG_CHUNK (4u << 20)     /* bytes of a log in one answer */

/* A name as a path below the runs folder: segments of letters, digits and . _ - = , + (not
 * "." or "..", not starting with a dot), at most 3 deep. */
static bool safe_relative(const char *name) {
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

/* dir/rel resolved, if it exists and stays inside dir (resolved: symlinks followed). */
static bool inside(const char *dir, const char *rel, char *out) {
    char joined[2 * PATH_MAX + 2];
    snprintf(joined, sizeof joined, "%s/%s", dir, rel);
    if (!realpath(joined, out)) return false;
    size_t n = strlen(dir);
    return strncmp(out, dir, n) == 0 && out[n] == '/';
}

static bool has_file(const char *dir, const char *name) {
    char path[2 * PATH_MAX];
    return snprintf(path, sizeof path, "%s/%s", dir, name) < (int)sizeof path && file_is_regular(path);
}

/* The folder NAME inside the runs folder, resolved, if it is a run (a log.jsonl) or a
 * comparison (a summary.json); else false. */
static bool run_dir(const Server *s, const char *name, char *out) {
    struct stat st;
    if (!s->runs[0] || !safe_relative(name) || !inside(s->runs, name, out)) return false;
    return stat(out, &st) == 0 && S_ISDIR(st.st_mode) && (has_file(out, "log.jsonl") || has_file(out, "summary.json"));
}

/* The last complete lines of a log (up to 64 KB of it) from the end: its last line of each type. */
static void log_summary(const char *path, cJSON *run) {
    FILE *f = fopen(path, "rb");
    if (!f) return;
    char buf[65536 + 1];
    fseek(f, 0, SEEK_END);
    long size = ftell(f), from = size > 65536 ? size - 65536 : 0;
    fseek(f, from, SEEK_SET);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
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

/* Every run folder below dir (depth ≤ 3) into list, every comparison into compares: names
 * relative to the runs folder. */
static void list_runs(const char *root, const char *rel, int depth, cJSON *list, cJSON *compares) {
    char path[PATH_MAX + 600];
    snprintf(path, sizeof path, "%s%s%s", root, rel[0] ? "/" : "", rel);
    DIR *d = opendir(path);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) && cJSON_GetArraySize(list) < RUNS_MAX) {
        char name[600], sub[PATH_MAX + 1400];
        if (snprintf(name, sizeof name, "%s%s%s", rel, rel[0] ? "/" : "", e->d_name) >= (int)sizeof name || !safe_relative(name))
            continue;
        snprintf(sub, sizeof sub, "%s/%s", root, name);
        struct stat st;
        if (lstat(sub, &st) != 0 || !S_ISDIR(st.st_mode)) continue; /* no symlinks followed while listing */
        if (has_file(sub, "summary.json")) { /* a comparison: its runs are inside, listed as runs */
            cJSON *cmp = cJSON_CreateObject();
            cJSON_AddStringToObject(cmp, "name", name);
            cJSON_AddItemToArray(compares, cmp);
        }
        if (has_file(sub, "log.jsonl")) {
            cJSON *run = cJSON_CreateObject();
            cJSON_AddStringToObject(run, "name", name);
            char conf[sizeof sub + 16], log[sizeof sub + 16];
            snprintf(conf, sizeof conf, "%s/config.json", sub);
            snprintf(log, sizeof log, "%s/log.jsonl", sub);
            size_t len = 0;
            char *text = NULL;
            S2sError err;
            cJSON *cj = file_read_all(conf, 65536, &text, &len, &err) == S2S_OK ? cJSON_ParseWithLength(text, len) : NULL;
            free(text);
            cJSON_AddItemToObject(run, "config", cj ? cj : cJSON_CreateNull());
            cJSON_AddBoolToObject(run, "has_model", has_file(sub, "model.bin")); /* translates as "model": name */
            log_summary(log, run);
            cJSON_AddItemToArray(list, run);
        } else if (depth < 3) {
            list_runs(root, name, depth + 1, list, compares);
        }
    }
    closedir(d);
}

static enum MHD_Result get_runs(Server *s, struct MHD_Connection *c) {
    if (!s->runs[0]) return send_error(c, MHD_HTTP_NOT_FOUND, "no runs folder (serve --runs DIR)");
    cJSON *j = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(j, "runs"), *cmp = cJSON_AddArrayToObject(j, "compares");
    list_runs(s->runs, "", 1, list, cmp);
    return send_json(c, MHD_HTTP_OK, j);
}

static enum MHD_Result send_file(struct MHD_Connection *c, const char *path, size_t from, size_t max, const char *type,
                                 size_t *total) {
    FILE *f = fopen(path, "rb");
    if (!f) return send_error(c, MHD_HTTP_NOT_FOUND, "cannot read that file");
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    *total = size > 0 ? (size_t)size : 0;
    if (from > *total) from = *total;
    size_t n = *total - from < max ? *total - from : max;
    char *buf = malloc(n ? n : 1);
    if (!buf) {
        fclose(f);
        return MHD_NO;
    }
    fseek(f, (long)from, SEEK_SET);
    n = fread(buf, 1, n, f);
    fclose(f);
    struct MHD_Response *r = MHD_create_response_from_buffer(n, buf, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(buf);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    char size_text[32];
    snprintf(size_text, sizeof size_text, "%zu", *total);
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

/* The files of known kinds in a run folder and its subfolders (attention/), sorted. */
static void list_files(const char *dir, const char *rel, int depth, cJSON *list) {
    char path[PATH_MAX + 600];
    snprintf(path, sizeof path, "%s%s%s", dir, rel[0] ? "/" : "", rel);
    struct dirent **names;
    int n = scandir(path, &names, NULL, alphasort);
    for (int i = 0; i < n; i++) {
        char name[600], sub[PATH_MAX + 1400];
        struct stat st;
        bool ok = snprintf(name, sizeof name, "%s%s%s", rel, rel[0] ? "/" : "", names[i]->d_name) < (int)sizeof name &&
                  safe_relative(name);
        snprintf(sub, sizeof sub, "%s/%s", dir, name);
        if (ok && lstat(sub, &st) == 0) {
            if (S_ISREG(st.st_mode) && file_type(name) && cJSON_GetArraySize(list) < 10000)
                cJSON_AddItemToArray(list, cJSON_CreateString(name));
            else if (S_ISDIR(st.st_mode) && depth < 2 && !has_file(sub, "log.jsonl"))
                list_files(dir, name, depth + 1, list);
        }
        free(names[i]);
    }
    if (n >= 0) free(names);
}

/* /api/runs/NAME/log[?from=BYTES] and /api/runs/NAME/files/REL: NAME a run folder below the
 * runs folder, REL a file inside it of a known kind; anything else is 404. */
static enum MHD_Result get_run_path(Server *s, struct MHD_Connection *c, const char *rest) {
    char name[600], dir[PATH_MAX], file[PATH_MAX + 16];
    size_t len = strlen(rest);
    if (len > 6 && !strcmp(rest + len - 6, "/files")) { /* the listing */
        if (len - 6 >= sizeof name) return send_error(c, MHD_HTTP_NOT_FOUND, "no such run path");
        memcpy(name, rest, len - 6);
        name[len - 6] = '\0';
        if (!run_dir(s, name, dir)) return send_error(c, MHD_HTTP_NOT_FOUND, "no run \"%.200s\" in the runs folder", name);
        cJSON *j = cJSON_CreateObject();
        list_files(dir, "", 1, cJSON_AddArrayToObject(j, "files"));
        return send_json(c, MHD_HTTP_OK, j);
    }
    char alias[700];
    const char *att = strstr(rest, "/attention/"); /* NAME/attention/F: NAME/files/attention/F */
    if (att && !strstr(rest, "/files/") && snprintf(alias, sizeof alias, "%.*s/files%s", (int)(att - rest), rest, att) < (int)sizeof alias)
        rest = alias;
    const char *files = strstr(rest, "/files/");
    size_t n = files ? (size_t)(files - rest) : strlen(rest) >= 4 ? strlen(rest) - 4 : 0;
    bool is_log = !files && n > 0 && !strcmp(rest + n, "/log");
    if ((!files && !is_log) || n == 0 || n >= sizeof name) return send_error(c, MHD_HTTP_NOT_FOUND, "no such run path");
    memcpy(name, rest, n);
    name[n] = '\0';
    if (!run_dir(s, name, dir)) return send_error(c, MHD_HTTP_NOT_FOUND, "no run \"%.200s\" in the runs folder", name);
    size_t total;
    if (is_log) {
        const char *from = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "from");
        char *end = NULL;
        unsigned long long off = from ? strtoull(from, &end, 10) : 0;
        if (from && (end == from || *end)) return send_error(c, MHD_HTTP_BAD_REQUEST, "from: a byte offset");
        snprintf(file, sizeof file, "%s/log.jsonl", dir);
        return send_file(c, file, (size_t)off, LOG_CHUNK, "application/x-ndjson", &total);
    }
    const char *rel = files + 7, *type = file_type(rel);
    if (!type || !safe_relative(rel) || !inside(dir, rel, file))
        return send_error(c, MHD_HTTP_NOT_FOUND, "no such file in run \"%.200s\"", name);
    struct stat st;
    if (stat(file, &st) != 0 || !S_ISREG(st.st_mode)) return send_error(c, MHD_HTTP_NOT_FOUND, "not a file");
    return send_file(c, file, 0, (size_t)st.st_size, type, &total);
}

/* ---- the handler: libmicrohttpd calls it once with the headers, then with each part of the
 * body, then once more with none ---- */

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *data, size_t *data_size, void **con_cls) {
    (void)version;
    Server *s = cls;
    Upload *u = *con_cls;
    if (!u) {
        u = calloc(1, sizeof *u);
        if (!u) return MHD_NO;
        *con_cls = u;
        atomic_fetch_add(&s->inflight, 1); /* until request_done */
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > s->o->max_body) { /* refused before it is read */
            u->too_big = true;
            return send_error(c, MHD_HTTP_CONTENT_TOO_LARGE, "the body is over %zu bytes (serve --max-body)", s->o->max_body);
        }
        return MHD_YES;
    }
    if (*data_size) {
        if (!u->too_big && u->len + *data_size <= s->o->max_body) {
            char *b = realloc(u->body, u->len + *data_size + 1);
            if (!b) return MHD_NO;
            memcpy(b + u->len, data, *data_size);
            u->body = b;
            u->len += *data_size;
        } else {
            u->too_big = true;
        }
        *data_size = 0;
        return MHD_YES;
    }
    if (!strcmp(url, "/api/translate")) {
        if (strcmp(method, MHD_HTTP_METHOD_POST)) return send_405(c, url, "POST");
        if (u->too_big)
            return send_error(c, MHD_HTTP_CONTENT_TOO_LARGE, "the body is over %zu bytes (serve --max-body)", s->o->max_body);
        return post_translate(s, c, u);
    }
    if (!strcmp(url, "/")) {
        if (strcmp(method, MHD_HTTP_METHOD_GET)) return send_405(c, url, "GET");
        struct MHD_Response *r =
            MHD_create_response_from_buffer(strlen(SERVE_PAGE), (void *)SERVE_PAGE, MHD_RESPMEM_PERSISTENT);
        if (!r) return MHD_NO;
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/html; charset=utf-8");
        enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, r);
        MHD_destroy_response(r);
        return ok;
    }
    if (!strcmp(url, "/api/runs") || !strncmp(url, "/api/runs/", 10)) {
        if (strcmp(method, MHD_HTTP_METHOD_GET)) return send_405(c, url, "GET");
        return url[9] ? get_run_path(s, c, url + 10) : get_runs(s, c);
    }
    if (!strcmp(url, "/api/models")) {
        if (strcmp(method, MHD_HTTP_METHOD_GET)) return send_405(c, url, "GET");
        return get_models(s, c);
    }
    return send_error(c, MHD_HTTP_NOT_FOUND, "no such path: %.200s (the page: GET /; the API: POST /api/translate, GET /api/models, GET /api/runs)",
                      url);
}

static void request_done(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)c, (void)toe;
    Server *s = cls;
    Upload *u = *con_cls;
    if (u) {
        free(u->body);
        free(u);
        *con_cls = NULL;
        atomic_fetch_sub(&s->inflight, 1);
    }
}

/* ---- the server ---- */

static void served_free(Served *m) {
    if (m->started) {
        pthread_mutex_lock(&m->lock);
        m->quit = true;
        pthread_cond_signal(&m->wake);
        pthread_mutex_unlock(&m->lock);
        pthread_join(m->worker, NULL);
    }
    pthread_cond_destroy(&m->wake);
    pthread_cond_destroy(&m->done);
    tape_free(&m->tape);
    model_free(&m->m);
    vocab_free(&m->src);
    vocab_free(&m->trg);
    pthread_mutex_destroy(&m->lock);
}

/* The model file, its tape and its decoding thread. */
static S2sStatus load_model(Served *m, const char *model_path, const ServeOptions *o, S2sError *err) {
    S2sStatus st = model_load_file(&m->m, &m->cfg, &m->src, &m->trg, model_path, err);
    if (st) return st;
    if ((st = model_tape_init(&m->tape, PRECISION_FP32, m->cfg.train.gemm, o->threads, "serve", err))) {
        model_free(&m->m);
        vocab_free(&m->src);
        vocab_free(&m->trg);
        return st;
    }
    params_freeze(&m->m.params, false); /* the weights never change here */
    pthread_mutex_init(&m->lock, NULL);
    pthread_cond_init(&m->wake, NULL);
    pthread_cond_init(&m->done, NULL);
    m->batch_wait_ms = o->batch_wait_ms;
    if (pthread_create(&m->worker, NULL, decoder, m) != 0) {
        served_free(m);
        return s2s_fail(err, S2S_ERR_IO, "cannot start the decoding thread");
    }
    m->started = true;
    snprintf(m->path, sizeof m->path, "%s", model_path);
    snprintf(m->name, sizeof m->name, "%s", m->cfg.name[0] ? m->cfg.name : "model");
    return S2S_OK;
}

static void free_server(Server *s) {
    for (int i = 0; i < s->n_models; i++) {
        served_free(s->models[i]);
        free(s->models[i]);
    }
    pthread_mutex_destroy(&s->models_lock);
    free(s);
}

S2sStatus serve_run(const char *model_path, const ServeOptions *o, S2sError *err) {
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
    const char *host = o->host ? o->host : "127.0.0.1";
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1)
        return s2s_fail(err, S2S_ERR_CONFIG, "--host %s: expected an IPv4 address such as 127.0.0.1", host);
    if (o->port < 0 || o->port > 65535) return s2s_fail(err, S2S_ERR_CONFIG, "--port %d: expected 0 to 65535", o->port);
    Server *s = s2s_xcalloc(1, sizeof *s);
    s->o = o;
    if (o->runs_dir) {
        struct stat sb;
        if (!realpath(o->runs_dir, s->runs) || stat(s->runs, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            free(s);
            return s2s_fail(err, S2S_ERR_IO, "--runs %s: not a folder", o->runs_dir);
        }
    }
    pthread_mutex_init(&s->models_lock, NULL);
    Served *m = NULL;
    if (model_path) {
        m = s2s_xcalloc(1, sizeof *m);
        S2sStatus st = load_model(m, model_path, o, err);
        if (st) {
            free(m);
            free_server(s);
            return st;
        }
        s->models[s->n_models++] = m;
        s->has_model = true;
    }
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL, handle, s,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_NOTIFY_COMPLETED, request_done, s,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)o->timeout_s, MHD_OPTION_CONNECTION_LIMIT, 256u, MHD_OPTION_END);
    if (!d) {
        free_server(s);
        return s2s_fail(err, S2S_ERR_IO, "cannot listen on %s:%d: %s", host, o->port,
                        errno ? strerror(errno) : "the port is in use or the address is not this machine's");
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    int port = info ? info->port : o->port;
    if (o->out) {
        if (strncmp(host, "127.", 4) != 0)
            fprintf(o->out, "serve: warning: %s is not a loopback address: anyone who can reach this machine can use the "
                            "model\n", host);
        fprintf(o->out, "serve: listening on http://%s:%d/ (", host, port);
        if (s->has_model) fprintf(o->out, "model %s, %s%s", m->name, model_path, s->runs[0] ? "; " : "");
        if (s->runs[0]) fprintf(o->out, "runs in %s", s->runs);
        fprintf(o->out, ")\n");
        fflush(o->out);
    }
    while (!o->stop || !atomic_load(o->stop)) {
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    MHD_quiesce_daemon(d); /* no new connections */
    /* the requests begun are answered before the connections are closed (a minute at most: a
     * request is bounded by --max-sentences; a stalled upload ends by --timeout) */
    for (int waited = 0; atomic_load(&s->inflight) > 0 && waited < 6000; waited++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    MHD_stop_daemon(d);
    if (o->out) {
        fprintf(o->out, "serve: stopped\n");
        fflush(o->out);
    }
    free_server(s);
    return S2S_OK;
}
