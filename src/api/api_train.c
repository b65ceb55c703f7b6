/* api_train.c — s2s.h's training: a config read and checked as ./train reads it (a file or
 * JSON text, --set overrides), then train_run with the log's lines handed to a callback and
 * a stop flag another thread (or a signal handler) sets: the run then ends after its step,
 * resumable, as ./train's does on Ctrl-C. */
#include "s2s/model.h"
#include "s2s/s2s.h"
#include "s2s/trainer.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct S2sTraining {
    Config cfg;
    char dir[PATH_MAX];
    bool resume, overwrite, ran;
    int epochs;
    atomic_int stop;
    TrainSummary sum;
    S2sEventFn events;
    void *user;
};

#define MAX_SETS 256

static S2sTraining *training_alloc(void) {
    S2sTraining *t = s2s_xcalloc(1, sizeof *t);
    atomic_init(&t->stop, 0);
    config_defaults(&t->cfg);
    return t;
}

static S2sStatus read_config(S2sTraining *t, const char *path, const char *json, const char *const *sets, int n_sets,
                             S2sError *err) {
    if (!path == !json) return s2s_fail(err, S2S_ERR_CONFIG, "a training takes a config file or a config text: one of the two");
    if (n_sets < 0 || n_sets > MAX_SETS || (n_sets > 0 && !sets))
        return s2s_fail(err, S2S_ERR_CONFIG, "%d overrides: expected 0 to %d", n_sets, MAX_SETS);
    S2sStatus st;
    if (path) {
        char found[PATH_MAX];
        config_find_file(path, found, sizeof found);
        st = config_load(&t->cfg, found, err);
    } else {
        st = config_parse(&t->cfg, json, "the config", err);
    }
    for (int i = 0; i < n_sets && !st; i++)
        st = sets[i] ? config_set(&t->cfg, sets[i], err) : s2s_fail(err, S2S_ERR_CONFIG, "override %d: none given", i);
    if (!st) st = train_check_config(&t->cfg, err);
    /* the model's own checks too, as a run would make them first: a bad config fails here */
    return st ? st : model_check_config(&t->cfg.model, t->cfg.path[0] ? t->cfg.path : "config", err);
}

S2sTraining *s2s_training_new(const char *path, const char *config_json, const char *const *sets, int n_sets,
                              const char *out_dir, bool overwrite, S2sError *err) {
    S2sTraining *t = training_alloc();
    if (read_config(t, path, config_json, sets, n_sets, err)) {
        free(t);
        return NULL;
    }
    int n = out_dir ? snprintf(t->dir, sizeof t->dir, "%s", out_dir) : snprintf(t->dir, sizeof t->dir, "runs/%s", t->cfg.name);
    if (n < 0 || (size_t)n >= sizeof t->dir || !t->dir[0]) {
        free(t);
        return s2s_fail(err, S2S_ERR_CONFIG, "the run's folder: an empty or too long path"), NULL;
    }
    t->overwrite = overwrite;
    return t;
}

S2sTraining *s2s_training_resume(const char *out_dir, int epochs, S2sError *err) {
    if (!out_dir || !out_dir[0] || strlen(out_dir) >= PATH_MAX)
        return s2s_fail(err, S2S_ERR_CONFIG, "resume: the run's folder: an empty or too long path"), NULL;
    if (epochs < 0 || epochs > 1000000)
        return s2s_fail(err, S2S_ERR_CONFIG, "resume: epochs %d: expected 0 (the run's) to 1000000", epochs), NULL;
    S2sTraining *t = training_alloc();
    snprintf(t->dir, sizeof t->dir, "%s", out_dir);
    t->resume = true;
    t->epochs = epochs;
    return t;
}

static void on_log(void *user, const char *line) {
    S2sTraining *t = user;
    if (t->events) t->events(line, t->user);
}

S2sStatus s2s_training_run(S2sTraining *t, long pause_at, S2sEventFn events, void *user, S2sError *err) {
    if (t->ran) return s2s_fail(err, S2S_ERR_CONFIG, "%s: this training has run; resume the run with a new one", t->dir);
    if (pause_at < 0) return s2s_fail(err, S2S_ERR_CONFIG, "pause_at %ld: expected 0 (never) or a step count", pause_at);
    t->ran = true;
    t->events = events;
    t->user = user;
    TrainOptions opt = {.out_dir = t->dir, .resume = t->resume, .overwrite = t->overwrite, .stop = &t->stop,
                        .pause_at = pause_at, .epochs = t->epochs, .on_log = on_log, .log_user = t};
    S2sStatus st = train_run(&t->cfg, &opt, &t->sum, err);
    /* stopped while the data were being prepared: nothing to resume yet, the same as a stop */
    if (st == S2S_ERR_IO && atomic_load(&t->stop)) t->sum.interrupted = true;
    return st;
}

void s2s_training_stop(S2sTraining *t) {
    if (t) atomic_store(&t->stop, 2); /* SIGINT's number, as ./train's handler stores it */
}

const char *s2s_training_dir(const S2sTraining *t) { return t->dir; }
char *s2s_training_config(const S2sTraining *t) { return config_to_json(&t->cfg); }

char *s2s_training_summary(const S2sTraining *t) {
    const TrainSummary *s = &t->sum;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "epochs", s->epochs);
    cJSON_AddNumberToObject(o, "steps", (double)s->steps);
    cJSON_AddNumberToObject(o, "seconds", s->seconds);
    cJSON_AddBoolToObject(o, "interrupted", s->interrupted);
    cJSON_AddBoolToObject(o, "paused", s->paused);
    cJSON_AddBoolToObject(o, "early_stopped", s->early_stopped);
    cJSON_AddBoolToObject(o, "tested", s->tested);
    char *txt = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    S2S_ASSERT_MSG(txt, "cJSON_PrintUnformatted: out of memory");
    return txt;
}

void s2s_training_free(S2sTraining *t) { free(t); }
