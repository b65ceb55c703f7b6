/* test_golden_core.c — the GRU and LSTM cells and the worked attention exercises against
 * PyTorch's float64 values in $S2S_GOLDEN_DIR (tests/golden by default). */
#include "test_util.h"
#include "s2s/attn.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RTOL_VALUE TU_RTOL_VALUE
#define RTOL_GRAD TU_RTOL_GRAD

static cJSON *load_golden(const char *name) {
    const char *path = tu_golden_path(name);
    cJSON *j = tu_json_load(path);
    /* a GOLDEN_DIR given on the command line may hold model cases only */
    const char *custom = getenv("S2S_GOLDEN_CUSTOM");
    if (!j && custom && *custom == '1') cr_skip_test("%s is not in the custom golden directory", name);
    cr_assert(j != NULL, "cannot read golden file %s (set GOLDEN_DIR)", path);
    return j;
}

#define get tu_get

#define expect_json tu_expect_json

static Tensor *jt(const cJSON *j, const char *key, int ndim, const int *shape, bool grad) {
    Tensor *t = tu_json_tensor(get(j, key), ndim, shape, grad);
    cr_assert(t != NULL, "\"%s\" does not have the expected shape", key);
    return t;
}

typedef struct CellCase {
    Tensor *x, *h, *c, *w_ih, *w_hh, *b_ih, *b_hh;
} CellCase;

static CellCase load_cell(const cJSON *j, int B, int E, int H, int G, bool lstm) {
    const cJSON *p = get(j, "params");
    CellCase cc = {0};
    cc.x = jt(j, "x", 2, (int[]){B, E}, true);
    cc.h = jt(j, "h", 2, (int[]){B, H}, true);
    if (lstm) cc.c = jt(j, "c", 2, (int[]){B, H}, true);
    cc.w_ih = jt(p, "weight_ih", 2, (int[]){G, E}, true);
    cc.w_hh = jt(p, "weight_hh", 2, (int[]){G, H}, true);
    cc.b_ih = jt(p, "bias_ih", 1, (int[]){G}, true);
    cc.b_hh = jt(p, "bias_hh", 1, (int[]){G}, true);
    return cc;
}

static void free_cell(CellCase *cc) {
    Tensor *all[] = {cc->x, cc->h, cc->c, cc->w_ih, cc->w_hh, cc->b_ih, cc->b_hh};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tensor_free(all[i]);
}

static void expect_grads(const cJSON *j, CellCase *cc) {
    const cJSON *g = get(j, "grads");
    expect_json("grad weight_ih", cc->w_ih->grad, cc->w_ih->size, get(g, "weight_ih"), RTOL_GRAD);
    expect_json("grad weight_hh", cc->w_hh->grad, cc->w_hh->size, get(g, "weight_hh"), RTOL_GRAD);
    expect_json("grad bias_ih", cc->b_ih->grad, cc->b_ih->size, get(g, "bias_ih"), RTOL_GRAD);
    expect_json("grad bias_hh", cc->b_hh->grad, cc->b_hh->size, get(g, "bias_hh"), RTOL_GRAD);
    expect_json("grad x", cc->x->grad, cc->x->size, get(g, "x"), RTOL_GRAD);
    expect_json("grad h", cc->h->grad, cc->h->size, get(g, "h"), RTOL_GRAD);
    if (cc->c) expect_json("grad c", cc->c->grad, cc->c->size, get(g, "c"), RTOL_GRAD);
}

Test(golden, gru_cell) {
    cJSON *j = load_golden("gru_cell.json");
    int B = 3, E = 4, H = 5;
    CellCase cc = load_cell(j, B, E, H, 3 * H, false);
    Tape t;
    tape_init(&t, 1 << 16);
    /* one step of the cell: the fused recurrence with S = 1; row 0 is h' */
    Tensor *xg = op_linear(&t, cc.x, cc.w_ih, cc.b_ih);
    Tensor *y = op_rnn_seq(&t, CELL_GRU, xg, cc.h, NULL, cc.w_hh, cc.b_hh, NULL, false, NULL);
    Tensor *h1 = tape_view(&t, y, 0, 2, (int[]){B, H});
    expect_json("h_next", h1->data, h1->size, get(j, "h_next"), RTOL_VALUE);
    Tensor *up = jt(j, "upstream", 2, (int[]){B, H}, false);
    tape_backward_seed(&t, h1, up->data); /* loss = sum(h_next * upstream) */
    expect_grads(j, &cc);
    tensor_free(up);
    free_cell(&cc);
    tape_free(&t);
    cJSON_Delete(j);
}

Test(golden, lstm_cell) {
    cJSON *j = load_golden("lstm_cell.json");
    int B = 3, E = 4, H = 5;
    CellCase cc = load_cell(j, B, E, H, 4 * H, true);
    Tape t;
    tape_init(&t, 1 << 16);
    Tensor *xg = op_linear(&t, cc.x, cc.w_ih, cc.b_ih), *cells;
    Tensor *y = op_rnn_seq(&t, CELL_LSTM, xg, cc.h, cc.c, cc.w_hh, cc.b_hh, NULL, false, &cells);
    Tensor *h1 = tape_view(&t, y, 0, 2, (int[]){B, H}), *c1 = tape_view(&t, cells, 0, 2, (int[]){B, H});
    expect_json("h_next", h1->data, h1->size, get(j, "h_next"), RTOL_VALUE);
    expect_json("c_next", c1->data, c1->size, get(j, "c_next"), RTOL_VALUE);
    Tensor *uh = jt(j, "upstream_h", 2, (int[]){B, H}, false);
    Tensor *uc = jt(j, "upstream_c", 2, (int[]){B, H}, false);
    float *gh = tensor_grad(&t, h1), *gc = tensor_grad(&t, c1);
    for (size_t i = 0; i < h1->size; i++) {
        gh[i] += uh->data[i];
        gc[i] += uc->data[i];
    }
    tape_propagate(&t);
    expect_grads(j, &cc);
    tensor_free(uh);
    tensor_free(uc);
    free_cell(&cc);
    tape_free(&t);
    cJSON_Delete(j);
}

/* A nested list's dimensions (up to 2). */
static void dims2(const cJSON *node, int *r, int *c) {
    *r = cJSON_GetArraySize(node);
    *c = cJSON_GetArraySize(cJSON_GetArrayItem(node, 0));
}

static Tensor *matrix(const cJSON *j, const char *key) {
    int r, c;
    dims2(get(j, key), &r, &c);
    return jt(j, key, 2, (int[]){r, c}, false);
}

/* softmax(Q K^T [/ sqrt(d)] [+ causal mask]) V, with the ops the models use. */
static void check_attention_case(const cJSON *ex) {
    const char *name = get(ex, "name")->valuestring;
    Tensor *Q = matrix(ex, "Q"), *K = matrix(ex, "K"), *V = matrix(ex, "V");
    bool scaled = cJSON_IsTrue(get(ex, "scaled"));
    bool causal = strncmp(name, "causal", 6) == 0;
    int nq = Q->shape[0], nk = K->shape[0];
    Tape t;
    tape_init(&t, 1 << 16);
    Tensor *scores = op_matmul(&t, Q, K, MM_TRANS_B);
    if (scaled) scores = op_scale(&t, scores, 1.0f / sqrtf((float)K->shape[1]));
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(ex, "scores");
    if (js) expect_json(name, scores->data, scores->size, js, RTOL_VALUE);
    uint8_t *mask = NULL;
    if (causal) {
        mask = malloc((size_t)nq * nk);
        for (int i = 0; i < nq; i++)
            for (int k = 0; k < nk; k++) mask[i * nk + k] = k <= i;
    }
    Tensor *w = op_softmax(&t, scores, mask, nq);
    expect_json(name, w->data, w->size, get(ex, "weights"), RTOL_VALUE);
    Tensor *out = op_matmul(&t, w, V, 0);
    expect_json(name, out->data, out->size, get(ex, "output"), RTOL_VALUE);
    free(mask);
    tensor_free(Q);
    tensor_free(K);
    tensor_free(V);
    tape_free(&t);
}

Test(golden, exercises) {
    cJSON *j = load_golden("exercises.json");
    int n = 0;
    const cJSON *ex;
    cJSON_ArrayForEach(ex, j) {
        const char *name = get(ex, "name")->valuestring;
        if (strcmp(name, "two_heads_output") == 0) { /* [Z1, Z2] W_O */
            Tensor *z1 = matrix(ex, "Z1"), *z2 = matrix(ex, "Z2"), *wo = matrix(ex, "WO");
            Tape t;
            tape_init(&t, 1 << 16);
            Tensor *out = op_matmul(&t, op_concat(&t, z1, z2), wo, 0);
            expect_json(name, out->data, out->size, get(ex, "output"), RTOL_VALUE);
            tape_free(&t);
            tensor_free(z1);
            tensor_free(z2);
            tensor_free(wo);
        } else {
            check_attention_case(ex);
        }
        n++;
    }
    cr_expect_eq(n, 10, "expected the 10 worked exercises, found %d", n);
    cJSON_Delete(j);
}

/* Layer norm against PyTorch's nn.LayerNorm (tests/golden-extra/make_ops.py, float64): the
 * output and every gradient, with and without gain and bias, rows far from zero (where
 * E[x²] − E[x]² in float32 loses the variance) and wide rows. */
Test(golden, layer_norm) {
    cJSON *j = tu_json_load("tests/golden-extra/ops/layer_norm.json");
    cr_assert(j != NULL, "tests/golden-extra/ops/layer_norm.json");
    const cJSON *c;
    int n_cases = 0;
    cJSON_ArrayForEach(c, get(j, "cases")) {
        const char *name = get(c, "name")->valuestring;
        int shape[3], nd = 0;
        const cJSON *d;
        cJSON_ArrayForEach(d, get(c, "shape")) shape[nd++] = d->valueint;
        bool affine = cJSON_IsTrue(get(c, "affine"));
        int D = shape[nd - 1];
        Tensor *x = jt(c, "x", nd, shape, true), *seed = jt(c, "seed", nd, shape, false);
        Tensor *gain = affine ? jt(c, "gain", 1, &D, true) : NULL, *bias = affine ? jt(c, "bias", 1, &D, true) : NULL;
        Tape t;
        tape_init(&t, 1 << 20);
        Tensor *y = op_layer_norm(&t, x, gain, bias, (float)get(c, "eps")->valuedouble);
        char what[96];
        snprintf(what, sizeof what, "%s: y", name);
        expect_json(what, y->data, y->size, get(c, "y"), RTOL_VALUE);
        tape_backward_seed(&t, y, seed->data);
        snprintf(what, sizeof what, "%s: dx", name);
        expect_json(what, x->grad, x->size, get(c, "dx"), RTOL_GRAD);
        if (affine) {
            snprintf(what, sizeof what, "%s: dgain", name);
            expect_json(what, gain->grad, gain->size, get(c, "dgain"), RTOL_GRAD);
            snprintf(what, sizeof what, "%s: dbias", name);
            expect_json(what, bias->grad, bias->size, get(c, "dbias"), RTOL_GRAD);
        }
        tape_free(&t);
        tensor_free(x);
        tensor_free(seed);
        tensor_free(gain);
        tensor_free(bias);
        n_cases++;
    }
    cr_expect_eq(n_cases, 4);
    cJSON_Delete(j);
}

/* Label smoothing against PyTorch's CrossEntropyLoss(label_smoothing = ε, ignore_index = 0)
 * (tests/golden-extra/make_ops.py): the loss, the plain NLL beside it, and the gradient, for
 * the loss on logits and for the chunked output layer + loss (an identity layer, so its input
 * is the logits and its input gradient their gradient; chunks of 3 leave a short last one). */
Test(golden, label_smoothing) {
    cJSON *j = tu_json_load("tests/golden-extra/ops/label_smoothing.json");
    cr_assert(j != NULL, "tests/golden-extra/ops/label_smoothing.json");
    const cJSON *c;
    int n_cases = 0;
    cJSON_ArrayForEach(c, get(j, "cases")) {
        const char *name = get(c, "name")->valuestring;
        int N = get(c, "N")->valueint, V = get(c, "V")->valueint;
        float eps = (float)get(c, "eps")->valuedouble;
        int32_t tg[16];
        cr_assert(N <= 16);
        for (int r = 0; r < N; r++) tg[r] = cJSON_GetArrayItem(get(c, "targets"), r)->valueint;
        for (int path = 0; path < 2; path++) {
            Tensor *x = jt(c, "x", 2, (int[]){N, V}, true), *eye = tensor_new(2, (int[]){V, V}, false);
            for (int i = 0; i < V; i++) eye->data[(size_t)i * V + i] = 1.0f;
            Tape t;
            tape_init(&t, 1 << 22);
            t.grad_enabled = true;
            double nll = -1;
            Tensor *loss = path ? op_linear_xent(&t, x, eye, NULL, tg, 0, 3, eps, &nll)
                                : op_cross_entropy_consume(&t, x, tg, 0, eps, &nll);
            char what[96];
            snprintf(what, sizeof what, "%s (%s): loss", name, path ? "linear_xent" : "cross_entropy");
            double want = get(c, "loss")->valuedouble, want_nll = get(c, "nll")->valuedouble;
            cr_expect(fabs(loss->data[0] - want) <= 2e-6 * fmax(1.0, fabs(want)), "%s %.8f, PyTorch %.8f", what,
                      loss->data[0], want);
            cr_expect(fabs(nll - want_nll) <= 2e-6 * fmax(1.0, fabs(want_nll)), "%s: nll %.8f, PyTorch %.8f", what, nll,
                      want_nll);
            tape_backward(&t, loss);
            snprintf(what, sizeof what, "%s (%s): dx", name, path ? "linear_xent" : "cross_entropy");
            expect_json(what, x->grad, x->size, get(c, "dx"), RTOL_GRAD);
            tape_free(&t);
            tensor_free(x);
            tensor_free(eye);
        }
        n_cases++;
    }
    cr_expect_eq(n_cases, 3);
    cJSON_Delete(j);
}

/* Multi-head attention against PyTorch's nn.MultiheadAttention(E, heads, kdim = vdim = D)
 * (tests/golden-extra/make_ops.py): the output, the head-averaged and per-head weights, and the
 * gradient of every parameter (under PyTorch's names: in_proj_weight when D = E, else
 * q/k/v_proj_weight) and of both inputs, with padded sources. */
Test(golden, multihead_attention) {
    cJSON *j = tu_json_load("tests/golden-extra/ops/multihead.json");
    cr_assert(j != NULL, "tests/golden-extra/ops/multihead.json");
    const cJSON *c;
    int n_cases = 0;
    cJSON_ArrayForEach(c, get(j, "cases")) {
        const char *name = get(c, "name")->valuestring;
        int T = get(c, "T")->valueint, S = get(c, "S")->valueint, B = get(c, "B")->valueint;
        int E = get(c, "E")->valueint, D = get(c, "D")->valueint, H = get(c, "heads")->valueint;
        ParamStore ps;
        params_init(&ps);
        Attention a;
        attn_init(&a, attn_variant(ATTN_MULTIHEAD), &ps, "att", E, D, 1, H);
        S2sError err;
        cr_assert_eq(params_alloc(&ps, &err), S2S_OK);
        const cJSON *gp = get(c, "params"), *p;
        int n_params = tu_load_params(&ps, gp, "att.");
        cr_assert_eq(n_params, ps.count, "%s: PyTorch has %d parameters, we have %d", name, n_params, ps.count);
        Tensor *dec = jt(c, "dec", 3, (int[]){T, B, E}, true), *enc = jt(c, "enc", 3, (int[]){S, B, D}, true);
        Tensor *seed = jt(c, "seed", 3, (int[]){T, B, E}, false);
        uint8_t mask[64];
        const cJSON *l;
        int b = 0;
        cJSON_ArrayForEach(l, get(c, "lens")) {
            for (int s = 0; s < S; s++) mask[b * S + s] = s < l->valueint;
            b++;
        }
        Tape t;
        tape_init(&t, 1 << 20);
        AttnWeights w = {.want_heads = true};
        Tensor *out = attn_forward_heads(&t, &a, dec, enc, mask, &w, NULL);
        char what[96];
        snprintf(what, sizeof what, "%s: out", name);
        expect_json(what, out->data, out->size, get(c, "out"), RTOL_VALUE);
        snprintf(what, sizeof what, "%s: weights", name);
        expect_json(what, w.mean->data, w.mean->size, get(c, "weights"), RTOL_VALUE);
        snprintf(what, sizeof what, "%s: head weights", name);
        const Tensor *hw = H > 1 ? w.heads : w.mean; /* one head: its weights are the mean */
        cr_assert(hw != NULL);
        expect_json(what, hw->data, hw->size, get(c, "head_weights"), RTOL_VALUE);
        tape_backward_seed(&t, out, seed->data);
        const cJSON *gg = get(c, "grads");
        snprintf(what, sizeof what, "%s: grad dec", name);
        expect_json(what, dec->grad, dec->size, get(gg, "dec"), RTOL_GRAD);
        snprintf(what, sizeof what, "%s: grad enc", name);
        expect_json(what, enc->grad, enc->size, get(gg, "enc"), RTOL_GRAD);
        cJSON_ArrayForEach(p, gp) {
            char full[PARAM_NAME_MAX];
            snprintf(full, sizeof full, "att.%s", p->string);
            Param *mine = params_find(&ps, full);
            snprintf(what, sizeof what, "%s: grad %s", name, p->string);
            expect_json(what, mine->t->grad, mine->t->size, get(gg, p->string), RTOL_GRAD);
        }
        tape_free(&t);
        tensor_free(dec);
        tensor_free(enc);
        tensor_free(seed);
        params_free(&ps);
        n_cases++;
    }
    cr_expect_eq(n_cases, 3);
    cJSON_Delete(j);
}
