/* test_util.c — see test_util.h. */
#define _DEFAULT_SOURCE /* realpath */
#include "test_util.h"
#include "s2s/checkpoint.h"
#include "s2s/gemm.h"

#include <criterion/criterion.h>

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

void tu_fill(Tensor *t, Rng *rng, float lo, float hi) {
    for (size_t i = 0; i < t->size; i++) t->data[i] = rng_uniform_range(rng, lo, hi);
}

bool tu_close(const float *actual, const double *expected, size_t n, double rtol, char *why, size_t why_n) {
    double maxabs = 0.0;
    for (size_t i = 0; i < n; i++) maxabs = fmax(maxabs, fabs(expected[i]));
    for (size_t i = 0; i < n; i++) {
        double tol = rtol * (fabs(expected[i]) + 0.1 * maxabs) + TU_ATOL;
        if (!(fabs((double)actual[i] - expected[i]) <= tol)) {
            if (why) snprintf(why, why_n, "index %zu: got %.9g, expected %.9g (tol %.3g)", i, actual[i], expected[i], tol);
            return false;
        }
    }
    return true;
}

const char *tu_golden_dir(void) {
    const char *d = getenv("S2S_GOLDEN_DIR");
    return d && *d ? d : "tests/golden";
}

const char *tu_multi30k_dir(const char *needs) {
    static char dir[512];
    const char *env = getenv("MULTI30K_DIR");
    snprintf(dir, sizeof dir, "%s", env && *env ? env : "../shared/data/multi30k");
    char probe[1100];
    snprintf(probe, sizeof probe, "%s/%s", dir, needs);
    FILE *f = fopen(probe, "r");
    if (!f) return NULL;
    fclose(f);
    return dir;
}

const char *tu_golden_path(const char *name) {
    static char p[4][1024];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", tu_golden_dir(), name);
    return p[k];
}

const char *tu_path(const char *dir, const char *name) {
    static char p[4][1024];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

const cJSON *tu_get(const cJSON *j, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    cr_assert(v != NULL, "golden case lacks \"%s\"", key);
    return v;
}

void tu_require_bf16(void) {
    S2sError err;
    if (gemm_bf16_check("this CPU", &err)) cr_skip_test("%s", err.msg);
}

char *tu_slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *b = malloc((size_t)(n > 0 ? n : 0) + 1);
    size_t got = fread(b, 1, (size_t)(n > 0 ? n : 0), f);
    b[got] = '\0';
    fclose(f);
    if (len) *len = got;
    return b;
}

const char *tu_bin(void) {
    /* make test-fast runs unit suites only: a test that runs a program belongs elsewhere */
    const char *units = getenv("S2S_TEST_UNITS_ONLY");
    if (units && *units == '1')
        cr_assert_fail("make test-fast runs unit suites only, and this test runs a program of the build: give it a suite "
                       "outside the Makefile's FAST_SUITES");
    static char abs[PATH_MAX]; /* absolute, so that commands may cd elsewhere first */
    const char *b = getenv("S2S_BIN_DIR");
    if (!abs[0] && !realpath(b && *b ? b : ".", abs)) snprintf(abs, sizeof abs, "%s", b && *b ? b : ".");
    return abs;
}

int tu_sh(const char *fmt, ...) {
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    S2S_ASSERT(n >= 0 && n < (int)sizeof cmd);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

void tu_config_set(Config *c, const char *assignment) {
    S2sError err;
    S2S_ASSERT(config_set(c, assignment, &err) == S2S_OK);
}

char *tu_tmpdir(void) {
    char *d = strdup("/tmp/s2s_test_XXXXXX");
    S2S_ASSERT(mkdtemp(d) != NULL);
    return d;
}

void tu_rm_rf(const char *dir) { tu_sh("rm -rf '%s'", dir); }

void tu_write(const char *path, const char *fmt, ...) {
    FILE *f = fopen(path, "wb");
    S2S_ASSERT(f != NULL);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    S2S_ASSERT(fclose(f) == 0);
}

bool tu_same_file(const char *a, const char *b) {
    size_t la = 0, lb = 0;
    char *x = tu_slurp(a, &la), *y = tu_slurp(b, &lb);
    bool same = x && y && la == lb && memcmp(x, y, la) == 0;
    free(x);
    free(y);
    return same;
}

char *tu_log_without_timing(const char *path) {
    char *txt = tu_slurp(path, NULL);
    if (!txt) return NULL;
    size_t cap = strlen(txt) + 1, n = 0;
    char *out = malloc(cap);
    out[0] = '\0';
    for (char *line = strtok(txt, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *j = cJSON_Parse(line);
        if (!j) {
            free(out);
            free(txt);
            return strdup("(a log line is not JSON)");
        }
        cJSON_DeleteItemFromObject(j, "tokens_per_s");
        cJSON_DeleteItemFromObject(j, "epoch_s");
        cJSON_DeleteItemFromObject(j, "elapsed_s");
        char *s = cJSON_PrintUnformatted(j);
        size_t k = strlen(s);
        out = realloc(out, cap += k + 2);
        memcpy(out + n, s, k);
        n += k;
        out[n++] = '\n';
        out[n] = '\0';
        free(s);
        cJSON_Delete(j);
    }
    free(txt);
    return out;
}

bool tu_same_checkpoint(const char *a, const char *b, char *why, size_t wn) {
    Checkpoint x, y;
    S2sError err;
    if (ckpt_load(&x, a, &err)) {
        snprintf(why, wn, "%s", err.msg);
        return false;
    }
    if (ckpt_load(&y, b, &err)) {
        ckpt_free(&x);
        snprintf(why, wn, "%s", err.msg);
        return false;
    }
    bool same = true;
    if (strcmp(x.config_json, y.config_json) != 0) same = false, snprintf(why, wn, "configs differ");
    if (same && (x.n_tensors != y.n_tensors || x.has_moments != y.has_moments || x.has_ema != y.has_ema))
        same = false, snprintf(why, wn, "tensor tables differ");
    for (int i = 0; same && i < x.n_tensors; i++) {
        size_t n = x.tensors[i].size * 4;
        if (memcmp(x.tensors[i].data, y.tensors[i].data, n) != 0) same = false, snprintf(why, wn, "%s differs", x.tensors[i].name);
        else if (x.has_moments && (memcmp(x.tensors[i].m, y.tensors[i].m, n) || memcmp(x.tensors[i].v, y.tensors[i].v, n)))
            same = false, snprintf(why, wn, "moments of %s differ", x.tensors[i].name);
        else if (x.has_ema && memcmp(x.tensors[i].ema, y.tensors[i].ema, n))
            same = false, snprintf(why, wn, "moving averages of %s differ", x.tensors[i].name);
    }
    if (same && (!x.state_json) != (!y.state_json)) same = false, snprintf(why, wn, "one has a training state");
    if (same && x.state_json) {
        cJSON *s = cJSON_Parse(x.state_json), *t = cJSON_Parse(y.state_json);
        const char *wall[] = {"seconds", "log_bytes"}; /* the log holds wall-clock fields */
        for (int k = 0; k < 2; k++) {
            cJSON_DeleteItemFromObject(s, wall[k]);
            cJSON_DeleteItemFromObject(t, wall[k]);
        }
        char *ss = cJSON_PrintUnformatted(s), *ts = cJSON_PrintUnformatted(t);
        if (strcmp(ss, ts) != 0) same = false, snprintf(why, wn, "states differ: %s vs %s", ss, ts);
        free(ss);
        free(ts);
        cJSON_Delete(s);
        cJSON_Delete(t);
    }
    ckpt_free(&x);
    ckpt_free(&y);
    return same;
}

void tu_rewrite_checkpoint(const char *path, TuCkptEdit edit, void *ctx) {
    Checkpoint c;
    S2sError err;
    S2S_ASSERT(ckpt_load(&c, path, &err) == S2S_OK);
    ParamStore ps;
    params_init(&ps);
    for (int i = 0; i < c.n_tensors; i++) params_add(&ps, c.tensors[i].name, c.tensors[i].ndim, c.tensors[i].shape);
    S2S_ASSERT(params_alloc(&ps, NULL) == S2S_OK);
    S2S_ASSERT(ckpt_restore(&c, &ps, c.has_moments, path, &err) == S2S_OK);
    S2S_ASSERT(!c.has_ema || ckpt_restore_ema(&c, &ps, path, &err) == S2S_OK);
    CkptSave s = {c.config_json, (const char *const *)c.src_tokens, c.n_src, (const char *const *)c.trg_tokens, c.n_trg,
                  &ps, c.has_moments, c.state_json, c.subword, c.subword_len, c.subword_trg, c.subword_trg_len, c.has_ema};
    edit(&ps, &s, ctx);
    S2S_ASSERT(ckpt_save(path, &s, &err) == S2S_OK);
    params_free(&ps);
    ckpt_free(&c);
}

bool tu_file_has(const char *path, const char *text) {
    char *s = tu_slurp(path, NULL);
    bool yes = s && strstr(s, text);
    free(s);
    return yes;
}

int tu_module_dirs(char dirs[][64], int cap) {
    FILE *f = fopen("docs/architecture.md", "r");
    if (!f) return 0;
    char line[1024], name[64], dir[64];
    int n = 0;
    bool in = false;
    while (fgets(line, sizeof line, f)) {
        if (strstr(line, "<!-- layers:begin -->")) in = true;
        else if (strstr(line, "<!-- layers:end -->")) in = false;
        else if (in && n < cap && sscanf(line, "| %63s | %63s |", name, dir) == 2 && !strncmp(dir, "src/", 4))
            snprintf(dirs[n++], 64, "%s", dir);
    }
    fclose(f);
    return n;
}

cJSON *tu_json_load(const char *path) {
    char *buf = tu_slurp(path, NULL);
    if (!buf) return NULL;
    cJSON *j = cJSON_Parse(buf);
    free(buf);
    return j;
}

static long flatten(const cJSON *node, double *out, size_t cap, size_t k) {
    if (cJSON_IsNumber(node)) {
        if (k < cap) out[k] = node->valuedouble;
        return (long)k + 1;
    }
    if (!cJSON_IsArray(node)) return -1;
    const cJSON *e;
    cJSON_ArrayForEach(e, node) {
        long r = flatten(e, out, cap, k);
        if (r < 0) return -1;
        k = (size_t)r;
    }
    return (long)k;
}

long tu_json_flatten(const cJSON *node, double *out, size_t cap) { return flatten(node, out, cap, 0); }

Tensor *tu_json_tensor(const cJSON *node, int ndim, const int *shape, bool with_grad) {
    Tensor *t = tensor_new(ndim, shape, with_grad);
    double *tmp = malloc(t->size * sizeof *tmp);
    long n = tu_json_flatten(node, tmp, t->size);
    if (n != (long)t->size) {
        free(tmp);
        tensor_free(t);
        return NULL;
    }
    for (size_t i = 0; i < t->size; i++) t->data[i] = (float)tmp[i];
    free(tmp);
    return t;
}

/* ---- gradient check ---- */
#define GC_EPS 1e-2
#define GC_RTOL 1e-2
#define GC_ATOL 1e-3
#define GC_SAMPLES 10 /* coordinates per leaf */

Tensor *gc_leaf(Gc *g, int ndim, const int *shape, float lo, float hi) {
    S2S_ASSERT(g->n_leaves < GC_MAX_LEAVES);
    Tensor *t = tensor_new(ndim, shape, true);
    tu_fill(t, &g->rng, lo, hi);
    g->leaf[g->n_leaves++] = t;
    return t;
}

void gc_free(Gc *g) {
    for (int i = 0; i < g->n_leaves; i++) tensor_free(g->leaf[i]);
    g->n_leaves = 0;
}

/* Σ_k Σ_i seed_k[i] · out_k[i], in double. */
static double seeded_loss(const Gc *g, float *const *seed) {
    double s = 0.0;
    for (int k = 0; k < g->n_outs; k++)
        for (size_t i = 0; i < g->out[k]->size; i++) s += (double)seed[k][i] * g->out[k]->data[i];
    return s;
}

static double loss_at(const GradCase *c, Gc *g, Tape *t, float *const *seed) {
    tape_reset(t);
    g->n_outs = 0;
    c->forward(t, g);
    return seeded_loss(g, seed);
}

bool gc_run(const GradCase *c, char *why, size_t why_n, bool *seen) {
    Gc g;
    memset(&g, 0, sizeof g);
    rng_init(&g.rng, 1234, 7);
    c->setup(&g);
    Tape t;
    tape_init(&t, 1 << 16);
    /* the tape's memory starts as NaN, not the zero pages a new arena would hand out: a
     * backward that adds to a gradient buffer it was given unzeroed (tensor_grad_to_write)
     * instead of writing it gives NaN gradients */
    ArenaMark clean = arena_mark(&t.arena);
    size_t poison = (size_t)1 << 18; /* floats: more than any case's tape uses */
    float *p = arena_alloc(&t.arena, poison * sizeof *p);
    for (size_t i = 0; i < poison; i++) p[i] = NAN;
    arena_rewind(&t.arena, clean);
    c->forward(&t, &g);
    if (seen)
        for (int i = 0; i < t.n_nodes; i++) seen[t.nodes[i].op] = true;
    /* analytic: seed each output with a random r (a plain sum would hide transposes) */
    float *seed[GC_MAX_OUTS];
    Rng sr;
    rng_init(&sr, 99, 3);
    for (int k = 0; k < g.n_outs; k++) {
        seed[k] = malloc(g.out[k]->size * sizeof(float));
        for (size_t i = 0; i < g.out[k]->size; i++) seed[k][i] = rng_uniform_range(&sr, -1.0f, 1.0f);
        float *gr = tensor_grad(&t, g.out[k]);
        for (size_t i = 0; i < g.out[k]->size; i++) gr[i] += seed[k][i];
    }
    int n_outs = g.n_outs;
    tape_propagate(&t);
    bool ok = true;
    for (int l = 0; l < g.n_leaves && ok; l++) {
        Tensor *x = g.leaf[l];
        float *analytic = malloc(x->size * sizeof(float));
        memcpy(analytic, x->grad, x->size * sizeof(float));
        size_t step = x->size > GC_SAMPLES ? x->size / GC_SAMPLES : 1;
        for (size_t i = (x->size > GC_SAMPLES ? l % step : 0); i < x->size && ok; i += step) {
            float orig = x->data[i];
            x->data[i] = (float)(orig + GC_EPS);
            double lp = loss_at(c, &g, &t, seed);
            x->data[i] = (float)(orig - GC_EPS);
            double lm = loss_at(c, &g, &t, seed);
            x->data[i] = orig;
            double num = (lp - lm) / (2.0 * GC_EPS);
            double a = analytic[i];
            if (!(fabs(a - num) <= GC_ATOL + GC_RTOL * fmax(fabs(a), fabs(num)))) { /* NaN fails too */
                snprintf(why, why_n, "%s: leaf %d element %zu: analytic %.6g, numeric %.6g", c->name, l, i, a, num);
                ok = false;
            }
        }
        free(analytic);
    }
    if (g.n_outs != n_outs && ok) {
        snprintf(why, why_n, "%s: forward made %d outputs, then %d", c->name, n_outs, g.n_outs);
        ok = false;
    }
    for (int k = 0; k < n_outs; k++) free(seed[k]);
    tape_free(&t);
    gc_free(&g);
    return ok;
}

void tu_expect_json(const char *what, const float *actual, size_t n, const cJSON *node, double rtol) {
    double *e = malloc(n * sizeof *e);
    long got = tu_json_flatten(node, e, n);
    cr_assert_eq(got, (long)n, "%s: golden has %ld values, we have %zu", what, got, n);
    char why[256];
    bool ok = tu_close(actual, e, n, rtol, why, sizeof why);
    free(e);
    cr_expect(ok, "%s: %s", what, why);
}

int tu_load_params(ParamStore *ps, const cJSON *params, const char *prefix) {
    const cJSON *p;
    int n = 0;
    cJSON_ArrayForEach(p, params) {
        char full[2 * PARAM_NAME_MAX];
        snprintf(full, sizeof full, "%s%s", prefix, p->string);
        Param *mine = params_find(ps, full);
        cr_assert(mine != NULL, "no parameter %s", full);
        double *v = malloc(mine->t->size * sizeof *v);
        cr_assert_eq(tu_json_flatten(p, v, mine->t->size), (long)mine->t->size, "%s: not %zu values", full, mine->t->size);
        for (size_t k = 0; k < mine->t->size; k++) mine->t->data[k] = (float)v[k];
        free(v);
        n++;
    }
    return n;
}

void tu_write_pairs(const char *dir, const char *prefix, int n) {
    char ps[600], pt[600];
    snprintf(ps, sizeof ps, "%s/%s.de", dir, prefix);
    snprintf(pt, sizeof pt, "%s/%s.en", dir, prefix);
    FILE *fs = fopen(ps, "w"), *ft = fopen(pt, "w");
    cr_assert(fs && ft, "%s, %s", ps, pt);
    for (int i = 0; i < n; i++) {
        fprintf(fs, "haus%d baum%d hund%d katze%d mann%d frau%d kind%d\n", i % 97, i % 89, i % 83, i % 79, i % 73, i % 71, i % 67);
        fprintf(ft, "house%d tree%d dog%d cat%d man%d woman%d child%d\n", i % 61, i % 59, i % 53, i % 47, i % 43, i % 41, i % 37);
    }
    fclose(fs);
    fclose(ft);
}

/* Sentences of 3-7 words; the target says each source word with its own word, in order, and
 * starts with a capital and ends with a full stop, as raw text does. */
void tu_word_corpus(const char *dir, const char *prefix, int n, unsigned seed) {
    static const char *de[] = {"Mann", "Frau", "Hund", "läuft", "sitzt", "rot", "groß", "Straße", "über", "Fahrrad", "Kind", "Ball"};
    static const char *en[] = {"man", "woman", "dog", "runs", "sits", "red", "big", "street", "over", "bicycle", "child", "ball"};
    char ps[512], pt[512];
    snprintf(ps, sizeof ps, "%s/%s.de", dir, prefix);
    snprintf(pt, sizeof pt, "%s/%s.en", dir, prefix);
    FILE *fs = fopen(ps, "w"), *ft = fopen(pt, "w");
    S2S_ASSERT(fs && ft);
    for (int i = 0; i < n; i++) {
        int len = 3 + (int)(seed % 5);
        for (int k = 0; k < len; k++) {
            seed = seed * 1103515245u + 12345u;
            int w = (int)((seed >> 16) % 12);
            fprintf(fs, "%s%s", k ? " " : "Ein ", de[w]);
            fprintf(ft, "%s%s", k ? " " : "A ", en[w]);
        }
        fprintf(fs, ".\n");
        fprintf(ft, ".\n");
    }
    fclose(fs);
    fclose(ft);
}

char *tu_word_corpus_dir(int n_train, int n_eval, bool gz) {
    char *d = tu_tmpdir();
    tu_word_corpus(d, "train", n_train, 1);
    tu_word_corpus(d, "val", n_eval, 2);
    tu_word_corpus(d, "test", n_eval, 3);
    if (gz) S2S_ASSERT(tu_sh("cd %s && gzip train.de train.en val.de val.en test.de test.en", d) == 0);
    return d;
}

bool tu_same_data(const TaskData *a, const TaskData *b) {
    bool ra, rb;
    Digest da = task_fingerprint(a, &ra), db = task_fingerprint(b, &rb);
    cr_assert(ra && rb, "a prepared split could not be read back");
    return digest_equal(&da, &db);
}
