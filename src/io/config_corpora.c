/* config_corpora.c — task.train_prefix read as a list of weighted training corpora (config.h). */
#include "s2s/config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool config_train_corpora(const ConfigTask *t, TrainCorpora *c, S2sError *err) {
    memset(c, 0, sizeof *c);
    for (const char *p = t->train_prefix;;) {
        const char *end = p + strcspn(p, ","), *colon = memchr(p, ':', (size_t)(end - p));
        size_t len = (size_t)((colon ? colon : end) - p);
        if (c->n == TASK_MAX_CORPORA || len == 0 || len >= sizeof c->prefix[0]) {
            s2s_fail(err, S2S_ERR_CONFIG, "task.train_prefix: expected prefix or prefix:weight, comma-separated (%d at most, "
                     "each prefix 1 to %zu bytes), got \"%s\"", TASK_MAX_CORPORA, sizeof c->prefix[0] - 1, t->train_prefix);
            return false;
        }
        memcpy(c->prefix[c->n], p, len);
        c->weight[c->n] = 1.0f;
        if (colon) {
            char num[32], *stop;
            size_t k = (size_t)(end - colon - 1);
            snprintf(num, sizeof num, "%.*s", (int)(k < sizeof num ? k : sizeof num - 1), colon + 1);
            double w = strtod(num, &stop);
            if (k == 0 || k >= sizeof num || *stop || !(w >= 0 && w <= 1000)) {
                s2s_fail(err, S2S_ERR_CONFIG, "task.train_prefix: the weight of \"%s\" must be a number from 0 to 1000, got "
                         "\"%.*s\"", c->prefix[c->n], (int)k, colon + 1);
                return false;
            }
            c->weight[c->n] = (float)w;
        }
        c->n++;
        if (!*end) break;
        p = end + 1;
    }
    if (config_distills(t) && t->teacher_mix == TEACHER_ADD && c->n < TASK_MAX_CORPORA) {
        snprintf(c->prefix[c->n], sizeof c->prefix[0], "%s", TEACHER_CORPUS);
        c->weight[c->n++] = 1.0f;
    }
    return true;
}

bool config_original_corpora(const ConfigTask *t, TrainCorpora *c, S2sError *err) {
    if (!config_train_corpora(t, c, err)) return false;
    if (c->n > 0 && !strcmp(c->prefix[c->n - 1], TEACHER_CORPUS) && config_distills(t) && t->teacher_mix == TEACHER_ADD) c->n--;
    return true;
}

bool config_distills(const ConfigTask *t) { return t->teacher[0] || t->teacher_output[0]; }

bool config_corpora_weighted(const TrainCorpora *c) {
    for (int i = 0; i < c->n; i++)
        if (c->weight[i] != 1.0f) return true;
    return false;
}
