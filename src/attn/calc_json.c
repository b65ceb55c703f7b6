/* calc_json.c — the calculator's input as JSON: every key, shape and number checked. */
#include "s2s/attn_calc.h"
#include "s2s/json.h"

#include <cjson/cJSON.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static Tensor *matrix(const cJSON *j, const char *name, char *msg, size_t n) {
    if (!cJSON_IsArray(j) || cJSON_GetArraySize(j) == 0) {
        snprintf(msg, n, "%s: expected a list of rows", name);
        return NULL;
    }
    const cJSON *first = cJSON_GetArrayItem(j, 0);
    bool vector = cJSON_IsNumber(first);
    int rows = vector ? 1 : cJSON_GetArraySize(j), cols = vector ? cJSON_GetArraySize(j) : cJSON_GetArraySize(first);
    if (cols <= 0) {
        snprintf(msg, n, "%s: expected a non-empty matrix", name);
        return NULL;
    }
    if (rows > 10000 || cols > 10000) {
        snprintf(msg, n, "%s: %d x %d; a matrix here has at most 10000 rows and 10000 columns", name, rows, cols);
        return NULL;
    }
    Tensor *t = tensor_new(2, (int[]){rows, cols}, false);
    for (int r = 0; r < rows; r++) {
        const cJSON *row = vector ? j : cJSON_GetArrayItem(j, r);
        if (!cJSON_IsArray(row) || cJSON_GetArraySize(row) != cols) {
            snprintf(msg, n, "%s: row %d has %d values, row 1 has %d", name, r + 1, cJSON_IsArray(row) ? cJSON_GetArraySize(row) : 0, cols);
            tensor_free(t);
            return NULL;
        }
        for (int c = 0; c < cols; c++) {
            const cJSON *x = cJSON_GetArrayItem(row, c);
            if (!cJSON_IsNumber(x) || !(fabs(x->valuedouble) <= FLT_MAX)) {
                snprintf(msg, n, "%s: row %d, column %d: expected a number within float range (|x| <= 3.4e38)", name, r + 1, c + 1);
                tensor_free(t);
                return NULL;
            }
            tensor_write(t)[(size_t)r * cols + c] = (float)x->valuedouble;
        }
    }
    return t;
}

/* Every matrix read belongs to the input, freed with it. */
static Tensor *keep(AttnCalcInput *in, Tensor *t) {
    if (!t) return NULL;
    S2S_ASSERT(in->n_owned < (int)(sizeof in->owned / sizeof in->owned[0]));
    in->owned[in->n_owned++] = t;
    return t;
}

/* An object's Q, K or V: its own, else its X, else (for a head) the top level's. */
static const cJSON *input_of(const cJSON *obj, const cJSON *top, const char *name) {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(obj, name);
    if (!m) m = cJSON_GetObjectItemCaseSensitive(obj, "X");
    if (!m && top) m = cJSON_GetObjectItemCaseSensitive(top, name);
    if (!m && top) m = cJSON_GetObjectItemCaseSensitive(top, "X");
    return m;
}

/* Q/K/V (or X) of one object into h, and a head's own W_q, W_k, W_v; false with msg on error. */
static bool read_qkv(const cJSON *obj, const cJSON *top, const char *where, AttnCalcHead *h, AttnCalcInput *own, char *msg,
                     size_t n) {
    const char *names[3] = {"Q", "K", "V"}, *wn[3] = {"W_q", "W_k", "W_v"};
    Tensor **dst[3] = {&h->q, &h->k, &h->v}, **wd[3] = {&h->w_q, &h->w_k, &h->w_v};
    char label[64];
    for (int i = 0; i < 3; i++) {
        const cJSON *m = input_of(obj, top, names[i]);
        snprintf(label, sizeof label, "%s%s", where, names[i]);
        if (!m) {
            snprintf(msg, n, "%s is missing (give Q, K and V, or X)", label);
            return false;
        }
        if (!(*dst[i] = keep(own, matrix(m, label, msg, n)))) return false;
        const cJSON *w = top ? cJSON_GetObjectItemCaseSensitive(obj, wn[i]) : NULL; /* the top level's come later */
        snprintf(label, sizeof label, "%s%s", where, wn[i]);
        if (w && !(*wd[i] = keep(own, matrix(w, label, msg, n)))) return false;
    }
    return true;
}

/* Only the keys of the calculator: a typo must not pass unnoticed. */
static bool known_keys(const cJSON *j, const char *const *keys, size_t nk, const char *where, const char *list, char *msg,
                       size_t n) {
    const cJSON *it;
    cJSON_ArrayForEach(it, j) {
        bool known = false;
        for (size_t k = 0; k < nk; k++) known |= !strcmp(it->string, keys[k]);
        if (!known) {
            snprintf(msg, n, "%sunknown key \"%s\" (expected %s)", where, it->string, list);
            return false;
        }
    }
    return true;
}

static bool parse_input(const cJSON *j, AttnCalcInput *in, char *msg, size_t n) {
    static const char *const KEYS[] = {"Q", "K", "V", "X", "W_q", "W_k", "W_v", "W_o", "heads", "scaled", "causal", "name", "note", "scores", "weights", "output"};
    static const char *const HEAD_KEYS[] = {"Q", "K", "V", "X", "W_q", "W_k", "W_v", "name", "note"};
    if (!cJSON_IsObject(j)) {
        snprintf(msg, n, "expected a JSON object");
        return false;
    }
    char dup[128];
    if (json_find_duplicate(j, dup, sizeof dup)) { /* cJSON would keep both and read the first */
        snprintf(msg, n, "\"%s\" is given twice; keep one", dup);
        return false;
    }
    if (!known_keys(j, KEYS, sizeof KEYS / sizeof *KEYS, "", "Q, K, V, X, W_q, W_k, W_v, W_o, heads, scaled, causal", msg, n))
        return false;
    const cJSON *heads = cJSON_GetObjectItemCaseSensitive(j, "heads");
    if (cJSON_IsArray(heads)) {
        in->n_heads = cJSON_GetArraySize(heads);
        in->split = 1;
        if (in->n_heads < 1 || in->n_heads > ATTN_CALC_MAX_HEADS) {
            snprintf(msg, n, "heads: expected 1 to %d heads", ATTN_CALC_MAX_HEADS);
            return false;
        }
        for (int h = 0; h < in->n_heads; h++) {
            const cJSON *o = cJSON_GetArrayItem(heads, h);
            char where[32];
            snprintf(where, sizeof where, "heads[%d].", h + 1);
            if (!cJSON_IsObject(o)) {
                snprintf(msg, n, "heads[%d]: expected an object with Q, K, V (or X) and W_q, W_k, W_v", h + 1);
                return false;
            }
            if (!known_keys(o, HEAD_KEYS, sizeof HEAD_KEYS / sizeof *HEAD_KEYS, where, "Q, K, V, X, W_q, W_k, W_v", msg, n) ||
                !read_qkv(o, j, where, &in->heads[h], in, msg, n))
                return false;
        }
    } else {
        /* range first: casting a huge number to int is undefined */
        if (heads && (!cJSON_IsNumber(heads) || !(heads->valuedouble >= 1 && heads->valuedouble <= ATTN_CALC_MAX_HEADS) ||
                      heads->valuedouble != floor(heads->valuedouble))) {
            snprintf(msg, n, "heads: expected a number of heads from 1 to %d, or a list of heads", ATTN_CALC_MAX_HEADS);
            return false;
        }
        in->split = heads ? heads->valueint : 1;
        in->n_heads = 1;
        if (!read_qkv(j, NULL, "", &in->heads[0], in, msg, n)) return false;
    }
    const char *wn[4] = {"W_q", "W_k", "W_v", "W_o"};
    Tensor **wd[4] = {&in->w_q, &in->w_k, &in->w_v, &in->w_o};
    for (int i = 0; i < 4; i++) {
        const cJSON *w = cJSON_GetObjectItemCaseSensitive(j, wn[i]);
        if (w && !(*wd[i] = keep(in, matrix(w, wn[i], msg, n)))) return false;
    }
    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(j, "scaled"), *ca = cJSON_GetObjectItemCaseSensitive(j, "causal");
    if ((sc && !cJSON_IsBool(sc)) || (ca && !cJSON_IsBool(ca))) {
        snprintf(msg, n, "scaled and causal: expected true or false");
        return false;
    }
    in->scaled = sc ? cJSON_IsTrue(sc) : true;
    in->causal = ca && cJSON_IsTrue(ca);
    return true;
}

S2sStatus attn_calc_parse(const char *json, AttnCalcInput *in, S2sError *err) {
    memset(in, 0, sizeof *in);
    if (json_find_nul(json)) return s2s_fail(err, S2S_ERR_CONFIG, "a string holds \\u0000 (a NUL character)");
    cJSON *j = cJSON_Parse(json);
    if (!j) return s2s_fail(err, S2S_ERR_CONFIG, "not valid JSON");
    char msg[256];
    bool ok = parse_input(j, in, msg, sizeof msg);
    cJSON_Delete(j);
    if (ok) return S2S_OK;
    attn_calc_input_free(in);
    return s2s_fail(err, S2S_ERR_CONFIG, "%s", msg);
}

void attn_calc_input_free(AttnCalcInput *in) {
    for (int i = 0; i < in->n_owned; i++) tensor_free(in->owned[i]);
    memset(in, 0, sizeof *in);
}

static cJSON *json_matrix(const Tensor *t) {
    cJSON *m = cJSON_CreateArray();
    for (int r = 0; r < t->shape[0]; r++) {
        cJSON *row = cJSON_CreateArray();
        for (int c = 0; c < t->shape[1]; c++) cJSON_AddItemToArray(row, cJSON_CreateNumber(tensor_item(t, (size_t)r * t->shape[1] + c)));
        cJSON_AddItemToArray(m, row);
    }
    return m;
}

char *attn_calc_to_json(const AttnCalcResult *r) {
    cJSON *o = cJSON_CreateObject(), *hs = cJSON_AddArrayToObject(o, "heads");
    for (int h = 0; h < r->n_heads; h++) {
        cJSON *x = cJSON_CreateObject();
        cJSON_AddItemToObject(x, "Q", json_matrix(r->q[h]));
        cJSON_AddItemToObject(x, "K", json_matrix(r->k[h]));
        cJSON_AddItemToObject(x, "V", json_matrix(r->v[h]));
        cJSON_AddItemToObject(x, "scores", json_matrix(r->scores[h]));
        cJSON_AddItemToObject(x, "weights", json_matrix(r->weights[h]));
        cJSON_AddItemToObject(x, "output", json_matrix(r->outputs[h]));
        cJSON_AddItemToArray(hs, x);
    }
    cJSON_AddItemToObject(o, "output", json_matrix(r->output));
    char *s = cJSON_Print(o);
    cJSON_Delete(o);
    S2S_ASSERT_MSG(s, "cJSON_Print: out of memory");
    return s;
}
