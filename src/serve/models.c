/* models.c — the models ./serve decodes with: each its own tape and decoding thread, which
 * takes every queued job decoded alike as one translator_run (concurrent requests share
 * batches). A model is the file as it is now: every request checks the file's identity
 * (device, inode, size, modification time) and a changed file is loaded again, a missing one
 * is a 404, an unreadable one a 500 naming it; the model it replaces goes when its last
 * request is answered. At most SERVE_MAX_MODELS are held: the least recently used run model
 * makes room. */
#define _DEFAULT_SOURCE
#include "s2s/rundir.h"
#include "serve_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define JOB_MAX_LINES 4096 /* lines decoded as one translator_run */

static bool alike(const Job *a, const Job *b) {
    return a->beam == b->beam && a->n_best == b->n_best && a->alpha == b->alpha && a->attention == b->attention;
}

/* Takes the first queued job and every later one decoded alike, up to JOB_MAX_LINES lines. */
static Job *take_jobs(Served *m, int *total) {
    Job *first = m->head, *taken = NULL, **tail = &taken, **p = &m->head;
    *total = 0;
    while (*p) {
        Job *j = *p;
        if (alike(j, first) && (*total == 0 || *total + j->n <= JOB_MAX_LINES)) {
            *p = j->next;
            j->next = NULL;
            *tail = j;
            tail = &j->next;
            *total += j->n;
        } else {
            p = &j->next;
        }
    }
    return taken;
}

static void decode_jobs(Served *m, Job *taken, int total) {
    const char **lines = s2s_xmalloc((size_t)(total ? total : 1) * sizeof *lines);
    int k = 0;
    for (Job *j = taken; j; j = j->next)
        for (int i = 0; i < j->n; i++) lines[k++] = j->lines[i];
    TranslatedLine *out = s2s_xcalloc((size_t)(total ? total : 1), sizeof *out);
    Translator t = translator_make(&m->m, &m->cfg, &m->src, &m->trg, &m->tape,
                                   &(DecodeSettings){.beam = taken->beam, .n_best = taken->n_best, .alpha = taken->alpha,
                                                     .attention = taken->attention});
    translator_run(&t, lines, total, 0, out);
    k = 0;
    for (Job *j = taken; j; j = j->next) { /* each job its own lines' results (they own their texts) */
        memcpy(j->out, out + k, (size_t)j->n * sizeof *out);
        k += j->n;
    }
    free(out);
    free(lines);
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
        int total;
        Job *taken = take_jobs(m, &total);
        pthread_mutex_unlock(&m->lock);
        decode_jobs(m, taken, total);
        pthread_mutex_lock(&m->lock);
        for (Job *j = taken; j; j = j->next) j->done = true;
        m->decodes++;
        m->lines += total;
        pthread_cond_broadcast(&m->done);
    }
    pthread_mutex_unlock(&m->lock);
    return NULL;
}

void serve_model_decode(Served *m, Job *j) {
    pthread_mutex_lock(&m->lock);
    Job **p = &m->head;
    while (*p) p = &(*p)->next;
    *p = j;
    m->requests++;
    pthread_cond_signal(&m->wake);
    while (!j->done) pthread_cond_wait(&m->done, &m->lock);
    pthread_mutex_unlock(&m->lock);
}

static void served_free(Served *m) {
    if (m->started) {
        pthread_mutex_lock(&m->lock);
        m->quit = true;
        pthread_cond_signal(&m->wake);
        pthread_mutex_unlock(&m->lock);
        pthread_join(m->worker, NULL);
        pthread_cond_destroy(&m->wake);
        pthread_cond_destroy(&m->done);
        pthread_mutex_destroy(&m->lock);
    }
    tape_free(&m->tape);
    model_free(&m->m);
    vocab_free(&m->src);
    vocab_free(&m->trg);
    free(m);
}

/* The model file open as fd, its tape and its decoding thread; NULL with err. */
static Served *served_load(Server *s, int fd, const char *path, S2sError *err) {
    Served *m = s2s_xcalloc(1, sizeof *m);
    if (fstat(fd, &m->id) != 0 || model_load_fd(&m->m, &m->cfg, &m->src, &m->trg, fd, path, err)) {
        if (!err->msg[0]) s2s_fail(err, S2S_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
        free(m);
        return NULL;
    }
    if (tape_init_engine(&m->tape, PRECISION_FP32, m->cfg.train.gemm, s->o->threads, "serve", err)) {
        served_free(m);
        return NULL;
    }
    params_freeze(&m->m.params, false); /* the weights never change here */
    pthread_mutex_init(&m->lock, NULL);
    pthread_cond_init(&m->wake, NULL);
    pthread_cond_init(&m->done, NULL);
    m->batch_wait_ms = s->o->batch_wait_ms;
    m->started = true;
    if (pthread_create(&m->worker, NULL, decoder, m) != 0) {
        m->started = false;
        pthread_cond_destroy(&m->wake);
        pthread_cond_destroy(&m->done);
        pthread_mutex_destroy(&m->lock);
        served_free(m);
        s2s_fail(err, S2S_ERR_IO, "cannot start the decoding thread");
        return NULL;
    }
    snprintf(m->path, sizeof m->path, "%s", path);
    snprintf(m->name, sizeof m->name, "%s", m->cfg.name[0] ? m->cfg.name : "model");
    m->refs = 1; /* the table's */
    return m;
}

static bool same_file(const struct stat *a, const struct stat *b) {
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* Drops a reference under models_lock; the last one's model is returned for freeing outside. */
static Served *unref(Served *m) { return --m->refs == 0 ? m : NULL; }

/* Takes models[i] out of the table (its model freed when its requests are answered). */
static Served *drop(Server *s, int i) {
    Served *m = s->models[i];
    memmove(s->models + i, s->models + i + 1, (size_t)(--s->n_models - i) * sizeof *s->models);
    return unref(m);
}

/* A regular file the operator named (the command line's model, the log beside it): links
 * followed, a FIFO never waited on; −1 with errno otherwise. */
static int open_regular(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
        close(fd);
        fd = -1;
        errno = ENOENT;
    }
    return fd;
}

/* What a client is told of a model that did not load: the error's kind, no path. */
static const char *load_failure(S2sStatus st) {
    switch (st) {
    case S2S_ERR_CORRUPT: return "its file is damaged, or no model file";
    case S2S_ERR_VERSION: return "its file is of another version of s2s";
    case S2S_ERR_NOMEM: return "it is too large for this server";
    case S2S_ERR_IO: return "its file cannot be read";
    case S2S_OK:
    case S2S_ERR_CONFIG:
    case S2S_ERR_DATA:
    case S2S_ERR_NUMERIC: break;
    }
    return "its file holds a model this server cannot use";
}

/* The model file of a request: the command line's (run NULL) as given, a run's below the runs
 * folder without following links. −1 with the status and why in msg. */
static int open_model_file(Server *s, const char *run, char *path, size_t n_path, unsigned *status, char *msg, size_t n_msg) {
    if (!run) {
        snprintf(path, n_path, "%s", s->model_path);
        int fd = open_regular(s->model_path);
        if (fd < 0) { /* the client is told what, the server's log where and why */
            fprintf(stderr, "serve: %s: cannot open: %s\n", s->model_path, strerror(errno));
            snprintf(msg, n_msg, "the served model's file is gone or cannot be opened now");
            *status = MHD_HTTP_NOT_FOUND;
        }
        return fd;
    }
    int dir = serve_run_open(s, run);
    if (dir < 0) {
        snprintf(msg, n_msg, "\"model\": no run \"%.200s\" in the runs folder", run);
        *status = MHD_HTTP_NOT_FOUND;
        return -1;
    }
    snprintf(path, n_path, "%s/%s/model.bin", s->runs, run);
    int fd = file_open_beneath(dir, RUN_MODEL, O_RDONLY, 0, false);
    close(dir);
    if (fd < 0) {
        snprintf(msg, n_msg, "\"model\": run \"%.200s\" has no model.bin (yet)", run);
        *status = MHD_HTTP_NOT_FOUND;
    }
    return fd;
}

static int find_held(const Server *s, const char *run) {
    for (int i = 0; i < s->n_models; i++)
        if (!strcmp(s->models[i]->run, run ? run : "")) return i;
    return -1;
}

/* The least recently used run model, or −1. */
static int least_used(const Server *s) {
    int best = -1;
    for (int i = 0; i < s->n_models; i++)
        if (s->models[i]->run[0] && (best < 0 || s->models[i]->used < s->models[best]->used)) best = i;
    return best;
}

unsigned serve_model_find(Server *s, const char *run, Served **out, char *msg, size_t n_msg) {
    *out = NULL;
    if (!run && !s->model_path) {
        snprintf(msg, n_msg, "no model is served: name a run's (\"model\", with serve --runs) or start serve with MODEL.bin");
        return MHD_HTTP_NOT_FOUND;
    }
    char path[PATH_MAX + 700];
    unsigned status = MHD_HTTP_OK;
    Served *gone[2] = {NULL, NULL};
    pthread_mutex_lock(&s->models_lock); /* one load at a time; decoding goes on meanwhile */
    int fd = open_model_file(s, run, path, sizeof path, &status, msg, n_msg);
    int i = find_held(s, run);
    struct stat now;
    if (fd >= 0 && fstat(fd, &now) == 0 && i >= 0 && same_file(&now, &s->models[i]->id)) {
        *out = s->models[i];
    } else {
        if (i >= 0) gone[0] = drop(s, i); /* replaced, truncated or deleted: never served again */
        if (fd >= 0) {
            if (s->n_models == SERVE_MAX_MODELS) gone[1] = drop(s, least_used(s));
            S2sError err = {0};
            Served *m = served_load(s, fd, path, &err);
            if (!m) { /* the detail (paths, this machine's memory) goes to the server's log, not to clients */
                fprintf(stderr, "serve: %s\n", err.msg);
                snprintf(msg, n_msg, "%s%.200s%s cannot be loaded: %s (the server's log says more)",
                         run ? "\"model\": run \"" : "the served model", run ? run : "", run ? "\"" : "", load_failure(err.status));
                status = MHD_HTTP_INTERNAL_SERVER_ERROR;
            } else {
                if (run) {
                    snprintf(m->run, sizeof m->run, "%s", run);
                    snprintf(m->name, sizeof m->name, "%s", run);
                }
                s->models[s->n_models++] = m;
                *out = m;
            }
        }
    }
    if (fd >= 0) close(fd);
    if (*out) {
        (*out)->refs++;
        (*out)->used = ++s->uses;
    }
    pthread_mutex_unlock(&s->models_lock);
    for (int k = 0; k < 2; k++)
        if (gone[k]) served_free(gone[k]);
    return status;
}

void serve_model_release(Server *s, Served *m) {
    pthread_mutex_lock(&s->models_lock);
    Served *gone = unref(m);
    pthread_mutex_unlock(&s->models_lock);
    if (gone) served_free(gone);
}

/* Its metrics: the test line of the log of the run it comes from (the log beside the file). */
static cJSON *metrics(const Server *s, const Served *m) {
    int fd = -1;
    if (m->run[0]) {
        int dir = serve_run_open(s, m->run);
        if (dir >= 0) {
            fd = file_open_beneath(dir, RUN_LOG, O_RDONLY, 0, false);
            close(dir);
        }
    } else {
        char log[PATH_MAX + 16];
        const char *slash = strrchr(m->path, '/');
        snprintf(log, sizeof log, "%.*slog.jsonl", slash ? (int)(slash - m->path + 1) : 0, m->path);
        fd = open_regular(log);
    }
    if (fd < 0) return cJSON_CreateNull();
    cJSON *tmp = cJSON_CreateObject();
    serve_log_summary(fd, tmp);
    close(fd);
    cJSON *test = cJSON_DetachItemFromObjectCaseSensitive(tmp, "last_test");
    cJSON_Delete(tmp);
    return test ? test : cJSON_CreateNull();
}

static cJSON *model_json(const Server *s, Served *m) {
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "name", m->name);
    cJSON_AddStringToObject(e, "path", m->path);
    cJSON_AddStringToObject(e, "type", MODEL_TYPE_NAMES[m->cfg.model.type]);
    cJSON_AddStringToObject(e, "attention", model_attention_name(&m->m));
    cJSON_AddNumberToObject(e, "params", (double)params_numel(&m->m.params)); /* not the padded storage */
    pthread_mutex_lock(&m->lock);
    cJSON_AddNumberToObject(e, "requests", (double)m->requests); /* translate requests so far, */
    cJSON_AddNumberToObject(e, "decodes", (double)m->decodes);   /* the decodings that served them */
    cJSON_AddNumberToObject(e, "lines", (double)m->lines);
    pthread_mutex_unlock(&m->lock);
    char *conf = config_to_json(&m->cfg);
    cJSON *cj = cJSON_Parse(conf);
    free(conf);
    cJSON_AddItemToObject(e, "config", cj ? cj : cJSON_CreateNull());
    cJSON_AddItemToObject(e, "metrics", metrics(s, m));
    return e;
}

cJSON *serve_models_json(Server *s) {
    cJSON *j = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(j, "models");
    pthread_mutex_lock(&s->models_lock);
    for (int i = 0; i < s->n_models; i++) cJSON_AddItemToArray(list, model_json(s, s->models[i]));
    pthread_mutex_unlock(&s->models_lock);
    return j;
}

void serve_models_free(Server *s) {
    for (int i = 0; i < s->n_models; i++) served_free(s->models[i]);
    s->n_models = 0;
}
