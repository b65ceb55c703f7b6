/* train_state.c — the resumable state: one table says how each field is saved and read back. */
#include "s2s/train_state.h"
#include "s2s/json.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum FieldType { F_INT, F_LONG, F_NUM, F_BEST } FieldType;

static const struct StateField {
    const char *key;
    FieldType type;
    size_t off;
} STATE_FIELDS[] = {
    {"epoch", F_INT, offsetof(TrainState, epoch)},         {"batch", F_INT, offsetof(TrainState, batch)},
    {"step", F_LONG, offsetof(TrainState, step)},          {"adam_step", F_LONG, offsetof(TrainState, adam_step)},
    {"lr", F_NUM, offsetof(TrainState, lr)},               {"best", F_BEST, offsetof(TrainState, best)},
    {"bad_epochs", F_INT, offsetof(TrainState, bad_epochs)}, {"loss_sum", F_NUM, offsetof(TrainState, loss_sum)},
    {"tok_sum", F_NUM, offsetof(TrainState, tok_sum)},     {"log_bytes", F_LONG, offsetof(TrainState, log_bytes)},
    {"seconds", F_NUM, offsetof(TrainState, seconds)},
};
#define N_STATE_FIELDS ((int)(sizeof STATE_FIELDS / sizeof STATE_FIELDS[0]))
#define STATE_DATA_KEY "data" /* the data's digest, 64 hex digits (16 in earlier builds: not checked) */

/* A double that reads back as itself. cJSON prints 15 digits when they read back within a
 * relative DBL_EPSILON, which is not exactly: a resumed run would then continue from a loss
 * sum or a learning rate one bit off, and no longer repeat the uninterrupted run. */
static void add_exact(cJSON *j, const char *key, double v) {
    char buf[40];
    snprintf(buf, sizeof buf, "%.17g", v);
    cJSON_AddItemToObject(j, key, cJSON_CreateRaw(buf));
}

char *train_state_to_json(const TrainState *s, const Digest *data) {
    cJSON *j = cJSON_CreateObject();
    for (int i = 0; i < N_STATE_FIELDS; i++) {
        const void *p = (const char *)s + STATE_FIELDS[i].off;
        switch (STATE_FIELDS[i].type) {
        case F_INT: cJSON_AddNumberToObject(j, STATE_FIELDS[i].key, *(const int *)p); break;
        case F_LONG: cJSON_AddNumberToObject(j, STATE_FIELDS[i].key, (double)*(const long *)p); break;
        case F_NUM: add_exact(j, STATE_FIELDS[i].key, *(const double *)p); break;
        case F_BEST:
            if (isfinite(*(const double *)p)) add_exact(j, STATE_FIELDS[i].key, *(const double *)p);
            else cJSON_AddNullToObject(j, STATE_FIELDS[i].key); /* no validation has improved yet */
            break;
        }
    }
    char hex[2 * DIGEST_BYTES + 1];
    digest_hex(data, hex);
    cJSON_AddStringToObject(j, STATE_DATA_KEY, hex);
    char *txt = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return txt;
}

/* Reads every field with its type: integers whole and within range, numbers finite and not
 * negative, best a number or null. Cross-field checks come later (state_check). */
S2sStatus train_state_from_json(TrainState *s, Digest *data, bool *has_hash, const char *txt, const char *origin,
                                S2sError *err) {
    cJSON *j = cJSON_Parse(txt);
    if (!j || !cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return s2s_fail(err, S2S_ERR_CORRUPT, "%s: corrupt: training state is not a JSON object", origin);
    }
    char path[128];
    S2sStatus st = S2S_OK;
    if (json_find_duplicate(j, path, sizeof path)) {
        st = s2s_fail(err, S2S_ERR_CORRUPT, "%s: corrupt: training state has \"%s\" twice", origin, path);
        goto out;
    }
    memset(s, 0, sizeof *s);
    for (int i = 0; i < N_STATE_FIELDS; i++) {
        const struct StateField *f = &STATE_FIELDS[i];
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, f->key);
        void *p = (char *)s + f->off;
        if (f->type == F_BEST && cJSON_IsNull(x)) {
            *(double *)p = NAN; /* the caller sets the sign */
            continue;
        }
        double v = cJSON_IsNumber(x) ? x->valuedouble : NAN;
        double max = f->type == F_INT ? INT_MAX : f->type == F_LONG ? 9007199254740992.0 : INFINITY;
        bool whole = f->type == F_INT || f->type == F_LONG;
        if (!cJSON_IsNumber(x) || !isfinite(v) || (f->type != F_BEST && v < 0) || v > max || (whole && v != floor(v))) {
            st = s2s_fail(err, S2S_ERR_CORRUPT, "%s: corrupt training state: \"%s\" is %s; expected %s", origin, f->key,
                          x ? (cJSON_IsNumber(x) ? "out of range" : "not a number") : "missing",
                          whole ? "a whole number >= 0" : f->type == F_BEST ? "a number or null" : "a finite number >= 0");
            goto out;
        }
        if (f->type == F_INT) *(int *)p = (int)v;
        else if (f->type == F_LONG) *(long *)p = (long)v;
        else *(double *)p = v;
    }
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(j, STATE_DATA_KEY);
    const char *hex = cJSON_GetStringValue(h);
    size_t len = hex ? strlen(hex) : 0;
    if (h && (!hex || (len != 16 && len != 2 * DIGEST_BYTES) || strspn(hex, "0123456789abcdef") != len)) {
        st = s2s_fail(err, S2S_ERR_CORRUPT, "%s: corrupt training state: \"%s\" is not %d hex digits", origin, STATE_DATA_KEY,
                      2 * DIGEST_BYTES);
        goto out;
    }
    *has_hash = len == 2 * DIGEST_BYTES; /* absent, or a 64-bit fingerprint, in files of earlier builds */
    for (size_t i = 0; *has_hash && i < DIGEST_BYTES; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        data->b[i] = (uint8_t)v;
    }
out:
    cJSON_Delete(j);
    return st;
}

