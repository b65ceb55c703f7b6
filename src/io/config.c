/* config.c — JSON parsing with positions, --set, resolved output. */
#include "config_schema.h"
#include "s2s/config.h"
#include "s2s/file.h"
#include "s2s/json.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <limits.h>

#define KEYS CONFIG_KEYS
#define N_KEYS CONFIG_N_KEYS

void config_defaults(Config *c) {
    memset(c, 0, sizeof *c);
    strcpy(c->name, "run");
    c->seed = 1;
    ConfigTask *t = &c->task;
    t->type = TASK_REVERSE;
    strcpy(t->alphabet, "abcd");
    t->min_len = 3;
    t->max_len = 30;
    t->train_size = 20000;
    t->valid_size = 1000;
    t->test_size = 1000;
    t->data_seed = 1;
    strcpy(t->data_dir, "data/multi30k/tok");
    strcpy(t->src_lang, "de");
    strcpy(t->trg_lang, "en");
    strcpy(t->train_prefix, "train.lc.norm.tok");
    strcpy(t->valid_prefix, "val.lc.norm.tok");
    strcpy(t->test_prefix, "test_2016_flickr.lc.norm.tok");
    strcpy(t->cache_dir, "runs/.cache");
    t->min_freq = 2;
    t->bpe_merges = 8000;
    t->bpe_joint = true;
    t->subword_sample = 1000000;
    t->teacher_beam = 5;
    t->teacher_alpha = 1.0f;
    t->teacher_precision = PRECISION_FP32;
    t->teacher_nbest = 1;
    ConfigModel *m = &c->model;
    m->cell = MODEL_CELL_LSTM;
    m->layers = 1;
    m->embedding_type = EMBEDDING_LEARNED;
    m->embedding = 32;
    m->encoder_hidden = 128;
    m->decoder_hidden = 128;
    m->attention = ATTN_DOT;
    m->kq = 128;
    m->heads = 8;
    m->combine = COMBINE_LUONG;
    m->init_range = 0.1f;
    m->type = MODEL_RNN;
    m->d_model = 256;
    m->ff = 512;
    m->norm = NORM_POST;
    m->positions = POSITIONS_SINUSOIDAL;
    m->max_positions = 512;
    m->activation = ACTIVATION_RELU;
    ConfigTrain *r = &c->train;
    r->optimizer = OPTIMIZER_ADAM;
    r->lr = 1e-3f;
    r->adam_beta1 = 0.9f;
    r->adam_beta2 = 0.999f;
    r->adam_eps = 1e-8f;
    r->batch_size = 64;
    r->epochs = 10;
    r->clip = 1.0f;
    r->log_every = 100;
    r->save_every = 1000;
    r->metric = METRIC_EXACT_MATCH;
    r->precision = PRECISION_FP32;
    r->gemm = GEMM_LIB_ONEDNN;
    r->lr_decay = 1.0f;
    r->lr_schedule = LR_CONSTANT;
    r->eval_batch_size = 256;
    r->overlap_sum = OVERLAP_AUTO;
    r->sum_bucket_kb = 4096;
}

static const Key *key_by_path(const char *path) {
    for (int i = 0; i < N_KEYS; i++)
        if (strcmp(KEYS[i].path, path) == 0) return &KEYS[i];
    return NULL;
}

int config_key_index(const char *path) {
    const Key *k = key_by_path(path);
    return k ? (int)(k - KEYS) : -1;
}

static const char *leaf(const char *path) {
    const char *d = strrchr(path, '.');
    return d ? d + 1 : path;
}

int config_edit_distance(const char *a, const char *b) {
    int la = (int)strlen(a), lb = (int)strlen(b);
    if (la > 63 || lb > 63) return 99;
    int d[64][64];
    for (int i = 0; i <= la; i++) d[i][0] = i;
    for (int j = 0; j <= lb; j++) d[0][j] = j;
    for (int i = 1; i <= la; i++)
        for (int j = 1; j <= lb; j++) {
            int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            d[i][j] = best;
        }
    return d[la][lb];
}

/* The closest key under the same section (or anywhere for a bare leaf), if close enough. */
static const char *suggest(const char *path) {
    const char *best = NULL;
    int bd = 99;
    const char *lf = leaf(path);
    for (int i = 0; i < N_KEYS; i++) {
        int d = config_edit_distance(lf, leaf(KEYS[i].path));
        if (d < bd) {
            bd = d;
            best = KEYS[i].path;
        }
    }
    int limit = (int)strlen(lf) / 3 + 1;
    return bd <= limit ? best : NULL;
}

/* "file:line:col" of the key's first occurrence after its section's, or "file". */
static void where(char *buf, size_t n, const char *origin, const char *text, const char *path) {
    if (!text) {
        snprintf(buf, n, "%s", origin);
        return;
    }
    const char *from = text;
    char quoted[96];
    const char *dot = strchr(path, '.');
    if (dot) {
        snprintf(quoted, sizeof quoted, "\"%.*s\"", (int)(dot - path), path);
        const char *s = strstr(text, quoted);
        if (s) from = s;
    }
    snprintf(quoted, sizeof quoted, "\"%s\"", leaf(path));
    const char *k = strstr(from, quoted);
    if (!k) {
        snprintf(buf, n, "%s", origin);
        return;
    }
    int line, col;
    json_line_col(text, k, &line, &col);
    snprintf(buf, n, "%s:%d:%d", origin, line, col);
}

static const char *json_kind(const cJSON *v) {
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsArray(v)) return "a list";
    if (cJSON_IsObject(v)) return "an object";
    if (cJSON_IsNull(v)) return "null";
    return "something else";
}

static void got_str(char *buf, size_t n, const cJSON *v) {
    if (cJSON_IsNumber(v)) snprintf(buf, n, "%.17g", v->valuedouble);
    else if (cJSON_IsString(v)) snprintf(buf, n, "\"%.60s\"", v->valuestring);
    else snprintf(buf, n, "%s", json_kind(v));
}

/* "a,b,c": a choice's names for messages. */
static void join_names(char *buf, size_t n, const char *const *names) {
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; names[i] && used < n; i++) used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? "," : "", names[i]);
}

/* Sets one key from a JSON value, checking its type and range. */
static S2sStatus set_value(Config *c, const Key *k, const cJSON *v, const char *loc, S2sError *err) {
    char got[96];
    got_str(got, sizeof got, v);
    unsigned char *dst = (unsigned char *)c + k->off;
    switch (k->type) {
    case K_NAME:
        if (cJSON_IsString(v)) {
            const char *s = v->valuestring;
            bool plain = s[0] && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
            for (const char *p = s; plain && *p; p++) plain = *p != '/' && (unsigned char)*p >= 0x20 && *p != 0x7f;
            if (!plain)
                return s2s_fail(err, S2S_ERR_CONFIG,
                                "%s: %s: expected a plain name (a folder under runs/: no '/', not \".\" or \"..\"), got %s",
                                loc, k->path, got);
        }
        __attribute__((fallthrough)); /* the rest as for any string */
    case K_STR:
        if (!cJSON_IsString(v)) return s2s_fail(err, S2S_ERR_CONFIG, "%s: %s: expected a string, got %s", loc, k->path, got);
        if (strlen(v->valuestring) >= k->size)
            return s2s_fail(err, S2S_ERR_CONFIG, "%s: %s: expected at most %zu characters", loc, k->path, k->size - 1);
        strcpy((char *)dst, v->valuestring);
        return S2S_OK;
    case K_ENUM: {
        for (int i = 0; cJSON_IsString(v) && k->names[i]; i++)
            if (strcmp(k->names[i], v->valuestring) == 0) {
                *(int *)dst = i;
                return S2S_OK;
            }
        char choices[160];
        join_names(choices, sizeof choices, k->names);
        return s2s_fail(err, S2S_ERR_CONFIG, "%s: %s: expected one of %s, got %s", loc, k->path, choices, got);
    }
    case K_BOOL:
        if (!cJSON_IsBool(v)) return s2s_fail(err, S2S_ERR_CONFIG, "%s: %s: expected true or false, got %s", loc, k->path, got);
        *(bool *)dst = cJSON_IsTrue(v);
        return S2S_OK;
    case K_INT:
    case K_LONG: {
        double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
        const char *what = k->min >= 1 ? "a positive integer" : "a non-negative integer";
        if (!cJSON_IsNumber(v) || d != floor(d) || d < k->min || d > k->max) {
            if (cJSON_IsNumber(v) && d == floor(d) && d >= k->min)
                return s2s_fail(err, S2S_ERR_CONFIG, "%s: %s: expected an integer at most %.0f, got %s", loc, k->path, k->max, got);
            return s2s_fail(err, S2S_ERR_CONFIG, "%s: %s: expected %s, got %s", loc, k->path, what, got);
        }
        if (k->type == K_INT) *(int *)dst = (int)d;
        else *(long *)dst = (long)d;
        return S2S_OK;
    }
    case K_FLOAT: {
        double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
        if (!cJSON_IsNumber(v) || !isfinite(d) || d < k->min || d > k->max)
            return s2s_fail(err, S2S_ERR_CONFIG, "%s: %s: expected a number in [%g, %g], got %s", loc, k->path, k->min,
                            k->max, got);
        *(float *)dst = (float)d;
        return S2S_OK;
    }
    }
    return S2S_OK;
}

static S2sStatus unknown_key(const char *origin, const char *text, const char *path, S2sError *err) {
    char loc[CONFIG_STR + 32];
    where(loc, sizeof loc, origin, text, path);
    const char *s = suggest(path);
    if (s) return s2s_fail(err, S2S_ERR_CONFIG, "%s: unknown key \"%s\" (did you mean \"%s\"?)", loc, path, s);
    return s2s_fail(err, S2S_ERR_CONFIG, "%s: unknown key \"%s\"", loc, path);
}

static bool is_section(const char *name) {
    return strcmp(name, "task") == 0 || strcmp(name, "model") == 0 || strcmp(name, "train") == 0;
}

/* One "path": value pair from the text json: a known key, of the right type and range. */
static S2sStatus apply_key(Config *c, const char *path, const cJSON *v, const char *origin, const char *json,
                           S2sError *err) {
    const Key *k = key_by_path(path);
    if (!k) return unknown_key(origin, json, path, err);
    char loc[CONFIG_STR + 32];
    where(loc, sizeof loc, origin, json, path);
    return set_value(c, k, v, loc, err);
}

S2sStatus config_parse(Config *c, const char *json, const char *origin, S2sError *err) {
    S2sStatus nul = json_refuse_nul(json, origin, err);
    if (nul) return nul;
    cJSON *root = cJSON_Parse(json);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        int line = 1, col = 1;
        if (at) json_line_col(json, at, &line, &col);
        const char *kind = json_comment_at(json, at, &col);
        if (kind)
            return s2s_fail(err, S2S_ERR_CONFIG, "%s:%d:%d: not valid JSON: JSON has no comments (a %s comment starts here)",
                            origin, line, col, kind);
        return s2s_fail(err, S2S_ERR_CONFIG, "%s:%d:%d: not valid JSON", origin, line, col);
    }
    S2sStatus st = S2S_OK;
    if (!cJSON_IsObject(root)) {
        st = s2s_fail(err, S2S_ERR_CONFIG, "%s: expected a JSON object at the top", origin);
        goto done;
    }
    char dup[128];
    const cJSON *d = json_find_duplicate(root, dup, sizeof dup);
    if (d) { /* cJSON keeps both; one of them would win silently */
        char pos[32];
        json_key_position(json, d->string, 1, pos, sizeof pos);
        st = s2s_fail(err, S2S_ERR_CONFIG, "%s%s%s: \"%s\" is given twice; keep one", origin, pos[0] ? ":" : "", pos, dup);
        goto done;
    }
    const cJSON *item;
    cJSON_ArrayForEach(item, root) {
        char path[128];
        if (is_section(item->string)) {
            if (!cJSON_IsObject(item)) {
                char loc[CONFIG_STR + 32];
                where(loc, sizeof loc, origin, json, item->string);
                st = s2s_fail(err, S2S_ERR_CONFIG, "%s: %s: expected an object, got %s", loc, item->string, json_kind(item));
                goto done;
            }
            const cJSON *sub;
            cJSON_ArrayForEach(sub, item) {
                snprintf(path, sizeof path, "%s.%s", item->string, sub->string);
                if ((st = apply_key(c, path, sub, origin, json, err))) goto done;
            }
        } else {
            snprintf(path, sizeof path, "%s", item->string);
            if ((st = apply_key(c, path, item, origin, json, err))) goto done;
        }
    }
done:
    cJSON_Delete(root);
    return st;
}

/* The key a --set names: a dotted path, or a unique leaf name; *other: a second key of that
 * leaf name (ambiguous), else NULL. */
static const Key *key_named(const char *name, const Key **other) {
    *other = NULL;
    const Key *k = key_by_path(name);
    if (k || strchr(name, '.')) return k;
    for (int i = 0; i < N_KEYS; i++) {
        if (strcmp(leaf(KEYS[i].path), name) != 0) continue;
        if (!k) k = &KEYS[i];
        else if (!*other) *other = &KEYS[i];
    }
    return k;
}

int config_key_named(const char *name) {
    const Key *other, *k = key_named(name, &other);
    return k && !other ? (int)(k - KEYS) : -1;
}

S2sStatus config_set(Config *c, const char *assignment, S2sError *err) {
    const char *eq = strchr(assignment, '=');
    if (!eq || eq == assignment)
        return s2s_fail(err, S2S_ERR_CONFIG, "--set %s: expected key=value", assignment);
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)(eq - assignment), assignment);
    const Key *other;
    const Key *k = key_named(name, &other);
    if (other) return s2s_fail(err, S2S_ERR_CONFIG, "--set %s: ambiguous; name the section (%s or %s)", name, k->path, other->path);
    if (!k) {
        const char *s = suggest(name);
        if (s) return s2s_fail(err, S2S_ERR_CONFIG, "--set: unknown key \"%s\" (did you mean \"%s\"?)", name, s);
        return s2s_fail(err, S2S_ERR_CONFIG, "--set: unknown key \"%s\"", name);
    }
    const char *val = eq + 1;
    char where_set[160];
    snprintf(where_set, sizeof where_set, "--set %s", k->path);
    if (json_refuse_nul(val, where_set, err)) return S2S_ERR_CONFIG;
    cJSON *v = cJSON_Parse(val);
    if ((k->type == K_STR || k->type == K_NAME || k->type == K_ENUM) && (!v || !cJSON_IsString(v))) { /* bare strings need no quotes */
        cJSON_Delete(v);
        v = cJSON_CreateString(val);
    }
    if (!v) return s2s_fail(err, S2S_ERR_CONFIG, "--set %s: \"%s\" is not a value", k->path, val);
    S2sStatus st = set_value(c, k, v, "--set", err);
    cJSON_Delete(v);
    return st;
}

char *config_to_json(const Config *c) {
    cJSON *root = cJSON_CreateObject();
    for (int i = 0; i < N_KEYS; i++) {
        const Key *k = &KEYS[i];
        if (!config_key_applies(c, i)) continue; /* a translation's config holds no alphabet */
        cJSON *parent = root;
        const char *dot = strchr(k->path, '.');
        if (dot) {
            char sec[16];
            snprintf(sec, sizeof sec, "%.*s", (int)(dot - k->path), k->path);
            parent = cJSON_GetObjectItemCaseSensitive(root, sec);
            if (!parent) parent = cJSON_AddObjectToObject(root, sec);
        }
        const unsigned char *src = (const unsigned char *)c + k->off;
        const char *name = leaf(k->path);
        switch (k->type) {
        case K_NAME:
        case K_STR: cJSON_AddStringToObject(parent, name, (const char *)src); break;
        case K_ENUM: cJSON_AddStringToObject(parent, name, k->names[*(const int *)src]); break;
        case K_BOOL: cJSON_AddBoolToObject(parent, name, *(const bool *)src); break;
        case K_INT: cJSON_AddNumberToObject(parent, name, *(const int *)src); break;
        case K_LONG: cJSON_AddNumberToObject(parent, name, (double)*(const long *)src); break;
        case K_FLOAT: {
            /* the shortest decimal that reads back as the same float */
            float f = *(const float *)src;
            char buf[32];
            for (int prec = 6; prec <= 9; prec++) {
                snprintf(buf, sizeof buf, "%.*g", prec, f);
                if (strtof(buf, NULL) == f) break;
            }
            cJSON_AddItemToObject(parent, name, cJSON_CreateRaw(buf));
            break;
        }
        }
    }
    char *s = cJSON_Print(root);
    cJSON_Delete(root);
    return s;
}

int config_key_count(void) { return N_KEYS; }

int config_first_difference(const Config *a, const Config *b) {
    for (int i = 0; i < N_KEYS; i++) {
        const Key *k = &KEYS[i];
        if (!config_key_applies(a, i) && !config_key_applies(b, i)) continue; /* means nothing to either */
        const void *x = (const unsigned char *)a + k->off, *y = (const unsigned char *)b + k->off;
        bool same = k->type == K_STR || k->type == K_NAME ? strcmp(x, y) == 0 : memcmp(x, y, k->size) == 0;
        if (!same) return i;
    }
    return -1;
}

void config_key_copy(Config *dst, const Config *src, int i) {
    S2S_ASSERT(i >= 0 && i < N_KEYS);
    memcpy((unsigned char *)dst + KEYS[i].off, (const unsigned char *)src + KEYS[i].off, KEYS[i].size);
}

bool config_key_changes_numbers(int i) {
    S2S_ASSERT(i >= 0 && i < N_KEYS);
    static const char *const SAME[] = {"train.threads",   "train.log_every",   "train.save_every", "train.keep_last",
                                       "train.keep_best", "train.overlap_sum", "train.sum_bucket_kb"};
    for (size_t k = 0; k < sizeof SAME / sizeof *SAME; k++)
        if (!strcmp(KEYS[i].path, SAME[k])) return false;
    return true;
}

ConfigKeyInfo config_key_info(int i) {
    static const char *const TYPE[] = {"string", "integer", "integer", "number", "boolean", "string", "string"};
    S2S_ASSERT(i >= 0 && i < N_KEYS);
    int n = 0;
    while (KEYS[i].names && KEYS[i].names[n]) n++;
    return (ConfigKeyInfo){KEYS[i].path, TYPE[KEYS[i].type], KEYS[i].help, KEYS[i].names, n};
}

bool config_key_applies(const Config *c, int i) {
    S2S_ASSERT(i >= 0 && i < N_KEYS);
    const ConfigTask *t = &c->task;
    const ConfigModel *m = &c->model;
    bool translate = t->type == TASK_TRANSLATE, rnn = m->type == MODEL_RNN, tf = m->type == MODEL_TRANSFORMER;
    switch (KEYS[i].when) {
    case W_ALWAYS: return true;
    case W_REVERSE: return !translate;
    case W_DATA_SEED: return !translate || t->subword == SUBWORD_BPE;
    case W_TRANSLATE: return translate;
    case W_BPE: return translate && t->subword == SUBWORD_BPE;
    case W_BPE_DROPOUT: return translate && t->subword == SUBWORD_BPE && t->bpe_dropout > 0;
    case W_SPM: return translate && t->subword == SUBWORD_SENTENCEPIECE;
    case W_RNN: return rnn;
    case W_RNN_LEARNED: return rnn && m->embedding_type == EMBEDDING_LEARNED;
    case W_KQ: return rnn && (m->attention == ATTN_SCALED_DOT || m->attention == ATTN_ADDITIVE);
    case W_HEADS: return tf || (rnn && m->attention == ATTN_MULTIHEAD);
    case W_TF: return tf;
    case W_TF_LEARNED: return tf && m->positions == POSITIONS_LEARNED;
    case W_ADAM: return c->train.optimizer != OPTIMIZER_SGD;
    case W_TEACHER: return translate && t->teacher[0];
    case W_DISTILL: return translate && config_distills(t);
    }
    S2S_ASSERT_MSG(false, "key %s: applicability %d is none of the table's", KEYS[i].path, (int)KEYS[i].when);
    return true;
}

void config_key_value(const Config *c, int i, char *buf, size_t n) {
    S2S_ASSERT(i >= 0 && i < N_KEYS);
    const Key *k = &KEYS[i];
    const unsigned char *src = (const unsigned char *)c + k->off;
    switch (k->type) {
    case K_NAME:
    case K_STR: snprintf(buf, n, "\"%s\"", (const char *)src); break;
    case K_ENUM: snprintf(buf, n, "\"%s\"", k->names[*(const int *)src]); break;
    case K_BOOL: snprintf(buf, n, "%s", *(const bool *)src ? "true" : "false"); break;
    case K_INT: snprintf(buf, n, "%d", *(const int *)src); break;
    case K_LONG: snprintf(buf, n, "%ld", *(const long *)src); break;
    case K_FLOAT: snprintf(buf, n, "%g", (double)*(const float *)src); break;
    }
}
