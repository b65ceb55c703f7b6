/* test_golden_model.c — every model case (*.json with a "config") in $S2S_GOLDEN_DIR:
 * the model is built from the case's config alone, its parameters loaded by their PyTorch
 * names, and the loss, logits, attention weights and every parameter's gradient compared. */
#include "test_util.h"
#include "s2s/model.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RTOL_VALUE TU_RTOL_VALUE
#define RTOL_GRAD TU_RTOL_GRAD
#define get tu_get

static int geti(const cJSON *j, const char *key) { return get(j, key)->valueint; }

static void expect_close(const char *what, const float *a, const double *e, size_t n, double rtol) {
    char why[256];
    cr_expect(tu_close(a, e, n, rtol, why, sizeof why), "%s: %s", what, why);
}

/* A list of case files in the golden dir (those with a "config"). */
static int list_cases(const char *dir, char names[][256], int cap) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < cap) {
        size_t len = strlen(e->d_name);
        if (len > 5 && strcmp(e->d_name + len - 5, ".json") == 0) snprintf(names[n++], 256, "%s", e->d_name);
    }
    closedir(d);
    return n;
}

/* Runs one case; returns false when the file is not a model case. */
/* The model a golden case's config describes, initialised (its weights are loaded next). */
static void case_model(Seq2Seq *m, const cJSON *c, const char *file) {
    Config full;
    config_defaults(&full);
    const char *choices[3] = {"cell", "attention", "combine"};
    for (int k = 0; k < 3; k++) { /* the golden's names, read as a config reads them */
        char set[128];
        snprintf(set, sizeof set, "model.%s=%s", choices[k], get(c, choices[k])->valuestring);
        tu_config_set(&full, set);
    }
    ConfigModel mc = full.model;
    mc.bidirectional = cJSON_IsTrue(get(c, "bidirectional"));
    const cJSON *jl = cJSON_GetObjectItemCaseSensitive(c, "layers");
    mc.layers = jl ? jl->valueint : 1;
    mc.embedding = geti(c, "emb");
    mc.encoder_hidden = geti(c, "enc_hid");
    mc.decoder_hidden = geti(c, "dec_hid");
    mc.kq = geti(c, "kq");
    const cJSON *jh = cJSON_GetObjectItemCaseSensitive(c, "heads");
    if (jh) mc.heads = jh->valueint;
    mc.dropout = 0.0f;
    S2sError err;
    cr_assert_eq(model_init(m, &mc, geti(c, "src_vocab"), geti(c, "trg_vocab"), &err), S2S_OK, "%s: %s", file, err.msg);
}

/* Parameters by name: the same set on both sides. */
static void case_params(Seq2Seq *m, const cJSON *j, const char *file) {
    const cJSON *params = get(j, "params"), *p;
    int n_loaded = 0;
    cJSON_ArrayForEach(p, params) {
        Param *mine = params_find(&m->params, p->string);
        cr_assert(mine != NULL, "%s: we have no parameter \"%s\"", file, p->string);
        double *buf = malloc(mine->t->size * sizeof *buf);
        long got = tu_json_flatten(p, buf, mine->t->size);
        cr_assert_eq(got, (long)mine->t->size, "%s: %s has %ld values, we expect %zu", file, p->string, got, mine->t->size);
        for (size_t i = 0; i < mine->t->size; i++) mine->t->data[i] = (float)buf[i];
        free(buf);
        n_loaded++;
    }
    cr_assert_eq(n_loaded, m->params.count, "%s: golden has %d parameters, the model %d", file, n_loaded, m->params.count);
}

/* The batch: src [B][S], trg [B][T] → time-major. */
static void case_batch(Dataset *d, Batch *batch, const cJSON *j, const cJSON *c) {
    const cJSON *js = get(j, "src"), *jt = get(j, "trg");
    int B = cJSON_GetArraySize(js), S = cJSON_GetArraySize(cJSON_GetArrayItem(js, 0));
    int T = cJSON_GetArraySize(cJSON_GetArrayItem(jt, 0));
    dataset_init(d);
    for (int b = 0; b < B; b++) {
        int32_t src[64], trg[64];
        int ns = 0, nt = 0;
        for (int k = 0; k < S; k++) {
            int v = cJSON_GetArrayItem(cJSON_GetArrayItem(js, b), k)->valueint;
            if (v != TOK_PAD) src[ns++] = v;
        }
        for (int k = 0; k < T; k++) {
            int v = cJSON_GetArrayItem(cJSON_GetArrayItem(jt, b), k)->valueint;
            if (v != TOK_PAD) trg[nt++] = v;
        }
        cr_assert_eq(ns, cJSON_GetArrayItem(get(c, "src_len"), b)->valueint);
        dataset_add(d, src, ns, trg, nt);
    }
    int idx[64];
    for (int b = 0; b < B; b++) idx[b] = b;
    batch_init(batch);
    batch_fill(batch, d, idx, B);
    cr_assert(batch->S == S && batch->T == T);
}

/* The loss, logits and attention of the whole-sequence forward (o) against the golden's; the
 * training path (o2: the output layer at real targets only) gives the same loss. */
static void case_outputs(const Seq2Seq *m, const Batch *batch, ModelOutput o, ModelOutput o2, const cJSON *j, const char *file) {
    double loss = get(j, "loss")->valuedouble;
    cr_expect(fabs(o.loss->data[0] - loss) <= RTOL_VALUE * fabs(loss), "%s: loss %.9g, expected %.9g", file,
              o.loss->data[0], loss);
    int B = batch->B, T1 = batch->T - 1, V = m->trg_vocab;
    cr_expect(fabs(o2.loss->data[0] - o.loss->data[0]) <= 1e-6 * fabs(loss), "%s: loss without pad positions %.9g", file,
              o2.loss->data[0]);
    cr_expect_eq(tensor_rows(o2.logits), o2.n_tokens);
    double *e = malloc((size_t)B * T1 * V * sizeof *e);
    cr_assert_eq(tu_json_flatten(get(j, "logits"), e, (size_t)B * T1 * V), (long)B * T1 * V);
    float *mine = malloc((size_t)B * T1 * V * sizeof *mine); /* ours (T1, B, V) → (B, T1, V) */
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T1; i++)
            memcpy(mine + ((size_t)b * T1 + i) * V, o.logits->data + ((size_t)i * B + b) * V, (size_t)V * sizeof *mine);
    expect_close("logits", mine, e, (size_t)B * T1 * V, RTOL_VALUE);
    free(mine);
    free(e);
    const cJSON *ja = cJSON_GetObjectItemCaseSensitive(j, "attention");
    if (ja) {
        cr_assert(o.attention != NULL, "%s: golden has attention weights, the model none", file);
        e = malloc(o.attention->size * sizeof *e);
        cr_assert_eq(tu_json_flatten(ja, e, o.attention->size), (long)o.attention->size);
        expect_close("attention", o.attention->data, e, o.attention->size, RTOL_VALUE);
        free(e);
    }
}

/* The gradients the model holds against the golden's, every parameter's. */
static void case_grads(Seq2Seq *m, const cJSON *j, const char *file) {
    const cJSON *grads = get(j, "grads"), *g;
    int n_grads = 0;
    cJSON_ArrayForEach(g, grads) {
        Param *q = params_find(&m->params, g->string);
        cr_assert(q != NULL, "%s: no parameter %s", file, g->string);
        double *e = malloc(q->t->size * sizeof *e);
        cr_assert_eq(tu_json_flatten(g, e, q->t->size), (long)q->t->size);
        char what[128];
        snprintf(what, sizeof what, "%s: grad %s", file, g->string);
        expect_close(what, q->t->grad, e, q->t->size, RTOL_GRAD);
        free(e);
        n_grads++;
    }
    cr_expect_eq(n_grads, m->params.count, "%s: every parameter's gradient is compared", file);
}

/* The trainer's step frees dead values and gradients during backward (free_values), with
 * dropout on and with the chunked loss too, whose gradients it writes in forward
 * (loss_grads_early): the same gradients, bit for bit. */
static void case_freeing_keeps_gradients(Seq2Seq *m, const Batch *batch, const char *file) {
    size_t P = m->params.total;
    float *gr[3] = {malloc(P * sizeof(float)), malloc(P * sizeof(float)), malloc(P * sizeof(float))};
    m->cfg.dropout = 0.3f;
    for (int chunk = 0; chunk <= 3; chunk += 3) {
        for (int v = 0; v < 3; v++) {
            Tape t3;
            tape_init(&t3, 1 << 16);
            t3.training = t3.grad_enabled = true;
            t3.free_values = v > 0;
            t3.loss_grads_early = v == 2;
            ModelLoss chunked = {0, chunk};
            Rng drop;
            rng_init(&drop, 7, RNG_STREAM_DROPOUT);
            params_zero_grad(&m->params);
            ModelOutput o3 = model_forward(&t3, m, batch, &drop, &chunked);
            tape_backward(&t3, o3.loss);
            memcpy(gr[v], m->params.grad, P * sizeof(float));
            tape_free(&t3);
        }
        cr_expect(memcmp(gr[0], gr[1], P * sizeof(float)) == 0, "%s: freeing dead values (loss chunk %d) changed a gradient", file, chunk);
        cr_expect(memcmp(gr[0], gr[2], P * sizeof(float)) == 0, "%s: the loss's gradients in forward (loss chunk %d) changed a gradient",
                  file, chunk);
    }
    free(gr[2]);
    free(gr[0]);
    free(gr[1]);
}

static bool run_case(const char *dir, const char *file) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    cJSON *j = tu_json_load(path);
    cr_assert(j != NULL, "%s: not readable JSON", path);
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(j, "config");
    if (!c) {
        cJSON_Delete(j);
        return false;
    }
    cr_log_info("golden model case %s", file);
    Seq2Seq m;
    case_model(&m, c, file);
    case_params(&m, j, file);
    Dataset d;
    Batch batch;
    case_batch(&d, &batch, j, c);
    Tape t, t2;
    tape_init(&t, 1 << 20);
    ModelOutput o = model_forward_all(&t, &m, &batch);
    tape_init(&t2, 1 << 20);
    ModelOutput o2 = model_forward(&t2, &m, &batch, NULL, NULL);
    case_outputs(&m, &batch, o, o2, j, file);
    /* gradients through the training path (no output layer at pads): the goldens' */
    params_zero_grad(&m.params);
    tape_backward(&t2, o2.loss);
    tape_free(&t2);
    case_grads(&m, j, file);
    case_freeing_keeps_gradients(&m, &batch, file);
    tape_free(&t);
    batch_free(&batch);
    dataset_free(&d);
    model_free(&m);
    cJSON_Delete(j);
    return true;
}

static void run_dir(const char *dir) {
    static char names[256][256];
    int n = list_cases(dir, names, 256);
    cr_assert(n >= 0, "cannot open the golden directory %s (set GOLDEN_DIR)", dir);
    int models = 0;
    for (int i = 0; i < n; i++) models += run_case(dir, names[i]);
    cr_assert_gt(models, 0, "no model case (*.json with a \"config\") in %s", dir);
    cr_log_info("%d golden model cases in %s", models, dir);
}

Test(golden, model_cases) { run_dir(tu_golden_dir()); }

/* general and additive attention, and other sizes and combinations (PyTorch, made by
 * tests/golden-extra/make_extra.py) */
Test(golden, extra_model_cases) { run_dir("tests/golden-extra"); }
