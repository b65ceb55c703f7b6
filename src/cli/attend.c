/* attend — an attention calculator for the worked exercises.
 *   attend FILE|-  [--json] [--heatmap FILE.png] [--scaled|--unscaled] [--causal]
 *   attend --q JSON --k JSON --v JSON [...]
 * Input keys: Q, K, V (or X for self-attention), optional W_q, W_k, W_v (X·W), heads (a
 * number to split into, or a list of heads, each with its own Q, K, V or X and W_q, W_k, W_v,
 * or taking the top level's), W_o, scaled (default true), causal.
 *   exit 0 · 1 IO · 2 usage, bad JSON or shapes */
#include "s2s/args.h"
#include "s2s/attn_calc.h"
#include "s2s/file.h"
#include "s2s/json.h"
#include "s2s/viz.h"

#include <cjson/cJSON.h>
#include <float.h>
#include <getopt.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: attend FILE|- [--json] [--heatmap FILE.png] [--scaled|--unscaled] [--causal]\n"
               "       attend --q JSON --k JSON --v JSON [options]\n"
               "\n"
               "Prints the scores, the weights (row-wise softmax) and the output of attention, as tables.\n"
               "Input: a JSON object with Q, K, V (or X: Q = K = V = X), optional W_q, W_k, W_v (applied as X W),\n"
               "\"heads\": N (split the columns into N heads) or a list of heads, each an object with its own Q, K, V\n"
               "(or X) and W_q, W_k, W_v, any of which it may leave to the top level's; W_o,\n"
               "\"scaled\" (divide by sqrt(d_k), default true) and \"causal\" (mask the future).\n"
               "Example: attend --q '[[1,2,1]]' --k '[[1,2,3],[1,2,1],[0,1,-1]]' --v '[[1,2,3],[1,2,1],[0,1,-1]]' --unscaled\n");
}

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
            t->data[(size_t)r * cols + c] = (float)x->valuedouble;
        }
    }
    return t;
}

typedef struct Owned {
    Tensor *t[8 + 6 * ATTN_CALC_MAX_HEADS]; /* Q, K, V and three projections per head, the top level's */
    int n;
} Owned;

static Tensor *keep(Owned *o, Tensor *t) {
    if (!t) return NULL;
    S2S_ASSERT(o->n < (int)(sizeof o->t / sizeof o->t[0]));
    o->t[o->n++] = t;
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
static bool read_qkv(const cJSON *obj, const cJSON *top, const char *where, AttnCalcHead *h, Owned *own, char *msg,
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

static bool parse_input(const cJSON *j, AttnCalcInput *in, Owned *own, char *msg, size_t n) {
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
                !read_qkv(o, j, where, &in->heads[h], own, msg, n))
                return false;
        }
    } else {
        if (heads && (!cJSON_IsNumber(heads) || heads->valuedouble < 1 || heads->valuedouble != (int)heads->valuedouble)) {
            snprintf(msg, n, "heads: expected a positive integer or a list of heads");
            return false;
        }
        in->split = heads ? heads->valueint : 1;
        in->n_heads = 1;
        if (!read_qkv(j, NULL, "", &in->heads[0], own, msg, n)) return false;
    }
    const char *wn[4] = {"W_q", "W_k", "W_v", "W_o"};
    Tensor **wd[4] = {&in->w_q, &in->w_k, &in->w_v, &in->w_o};
    for (int i = 0; i < 4; i++) {
        const cJSON *w = cJSON_GetObjectItemCaseSensitive(j, wn[i]);
        if (w && !(*wd[i] = keep(own, matrix(w, wn[i], msg, n)))) return false;
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

static void print_table(const char *title, const Tensor *t) {
    printf("%s (%d x %d)\n", title, t->shape[0], t->shape[1]);
    for (int r = 0; r < t->shape[0]; r++) {
        printf("  ");
        for (int c = 0; c < t->shape[1]; c++) printf(" %12.8f", (double)t->data[(size_t)r * t->shape[1] + c]);
        printf("\n");
    }
}

static cJSON *json_matrix(const Tensor *t) {
    cJSON *m = cJSON_CreateArray();
    for (int r = 0; r < t->shape[0]; r++) {
        cJSON *row = cJSON_CreateArray();
        for (int c = 0; c < t->shape[1]; c++) cJSON_AddItemToArray(row, cJSON_CreateNumber(t->data[(size_t)r * t->shape[1] + c]));
        cJSON_AddItemToArray(m, row);
    }
    return m;
}

int main(int argc, char **argv) {
    const char *file = NULL, *heatmap = NULL, *qkv[3] = {NULL, NULL, NULL};
    bool as_json = false;
    int scaled_flag = -1, causal_flag = 0;
    enum { O_JSON = 256, O_SCALED, O_UNSCALED, O_CAUSAL, O_HEATMAP, O_Q, O_K, O_V, O_VERSION };
    static const struct option LONG[] = {
        {"help", no_argument, NULL, 'h'},        {"json", no_argument, NULL, O_JSON},
        {"scaled", no_argument, NULL, O_SCALED}, {"unscaled", no_argument, NULL, O_UNSCALED},
        {"causal", no_argument, NULL, O_CAUSAL}, {"heatmap", required_argument, NULL, O_HEATMAP},
        {"q", required_argument, NULL, O_Q},     {"k", required_argument, NULL, O_K},
        {"v", required_argument, NULL, O_V},     {"version", no_argument, NULL, O_VERSION}, {NULL, 0, NULL, 0}};
    opterr = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, ":h", LONG, NULL)) != -1) {
        switch (opt) {
        case 'h': usage(stdout); return 0;
        case O_VERSION: args_print_version(stdout, "attend"); return 0;
        case O_JSON: as_json = true; break;
        case O_SCALED: scaled_flag = 1; break;
        case O_UNSCALED: scaled_flag = 0; break;
        case O_CAUSAL: causal_flag = 1; break;
        case O_HEATMAP: heatmap = optarg; break;
        case O_Q: qkv[0] = optarg; break;
        case O_K: qkv[1] = optarg; break;
        case O_V: qkv[2] = optarg; break;
        default: {
            char m[256];
            args_getopt_error(m, sizeof m, argv, optind, optopt, opt);
            fprintf(stderr, "attend: %s (see attend --help)\n", m);
            return 2;
        }
        }
    }
    if (optind < argc) file = argv[optind++];
    if (optind < argc) {
        fprintf(stderr, "attend: %s: unexpected argument (see attend --help)\n", argv[optind]);
        return 2;
    }
    char *text = NULL;
    if (file && (qkv[0] || qkv[1] || qkv[2])) {
        fprintf(stderr, "attend: give a file or --q, --k and --v, not both\n");
        return 2;
    }
    if (file) {
        S2sError err;
        if (file_read_all(file, (size_t)64 << 20, &text, NULL, &err)) { /* 64 MiB: far past 10000 x 10000 */
            fprintf(stderr, "attend: %s\n", err.msg);
            return 1;
        }
    } else if (qkv[0] && qkv[1] && qkv[2]) {
        size_t n = strlen(qkv[0]) + strlen(qkv[1]) + strlen(qkv[2]) + 32;
        text = s2s_xmalloc(n);
        snprintf(text, n, "{\"Q\":%s,\"K\":%s,\"V\":%s}", qkv[0], qkv[1], qkv[2]);
    } else {
        usage(stderr);
        return 2;
    }
    const char *where = file ? file : "arguments";
    cJSON *j = cJSON_Parse(text);
    free(text);
    if (!j) {
        fprintf(stderr, "attend: %s: not valid JSON\n", where);
        return 2;
    }
    AttnCalcInput in;
    memset(&in, 0, sizeof in);
    Owned own = {{0}, 0};
    char msg[256];
    int rc = 0;
    if (!parse_input(j, &in, &own, msg, sizeof msg)) {
        fprintf(stderr, "attend: %s: %s\n", where, msg);
        rc = 2;
        goto out;
    }
    if (scaled_flag >= 0) in.scaled = scaled_flag;
    if (causal_flag) in.causal = true;
    AttnCalcResult r;
    S2sError err;
    if (attn_calc(&in, &r, &err)) {
        fprintf(stderr, "attend: %s: %s\n", where, err.msg);
        rc = 2;
        goto out;
    }
    if (as_json) {
        cJSON *o = cJSON_CreateObject(), *hs = cJSON_AddArrayToObject(o, "heads");
        for (int h = 0; h < r.n_heads; h++) {
            cJSON *x = cJSON_CreateObject();
            cJSON_AddItemToObject(x, "scores", json_matrix(r.scores[h]));
            cJSON_AddItemToObject(x, "weights", json_matrix(r.weights[h]));
            cJSON_AddItemToObject(x, "output", json_matrix(r.outputs[h]));
            cJSON_AddItemToArray(hs, x);
        }
        cJSON_AddItemToObject(o, "output", json_matrix(r.output));
        char *s = cJSON_Print(o);
        printf("%s\n", s);
        free(s);
        cJSON_Delete(o);
    } else {
        for (int h = 0; h < r.n_heads; h++) {
            if (r.n_heads > 1) printf("== head %d\n", h + 1);
            print_table(in.scaled ? "scores = Q K^T / sqrt(d_k)" : "scores = Q K^T", r.scores[h]);
            print_table(in.causal ? "weights = softmax(scores + causal mask)" : "weights = softmax(scores)", r.weights[h]);
            print_table("output = weights V", r.outputs[h]);
        }
        if (r.n_heads > 1 || in.w_o) print_table(in.w_o ? "output = [heads] W_o" : "output = [heads]", r.output);
    }
    if (heatmap) {
        Font *font = font_open(NULL);
        const Tensor *w = r.weights[0];
        char **rl = malloc((size_t)w->shape[0] * sizeof *rl), **cl = malloc((size_t)w->shape[1] * sizeof *cl);
        for (int i = 0; i < w->shape[0]; i++) {
            rl[i] = malloc(16);
            snprintf(rl[i], 16, "q%d", i + 1);
        }
        for (int i = 0; i < w->shape[1]; i++) {
            cl[i] = malloc(16);
            snprintf(cl[i], 16, "k%d", i + 1);
        }
        Heatmap hm = {w->data, w->shape[0], w->shape[1], (const char *const *)rl, (const char *const *)cl, "attention weights"};
        if (heatmap_write_png(heatmap, &hm, font, &err)) {
            fprintf(stderr, "attend: %s\n", err.msg);
            rc = 1;
        }
        for (int i = 0; i < w->shape[0]; i++) free(rl[i]);
        for (int i = 0; i < w->shape[1]; i++) free(cl[i]);
        free(rl);
        free(cl);
        font_close(font);
    }
    attn_calc_free(&r);
out:
    for (int i = 0; i < own.n; i++) tensor_free(own.t[i]);
    cJSON_Delete(j);
    return rc;
}
