/* test_transformer.c — the Transformer stacks against PyTorch's nn.Transformer
 * (tests/golden-extra/make_transformer.py): post-norm and pre-norm, ReLU and GELU, one to two
 * layers of each stack, padding in source and target with the causal mask. The decoder output,
 * every layer's cross-attention weights (mean and per head) and the gradient of every
 * parameter (by PyTorch's name) and of both inputs. */
#include "test_util.h"
#include "s2s/model.h"
#include "s2s/transformer.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define get tu_get

#define expect_json tu_expect_json

static void run_case(const char *file) {
    char path[512];
    snprintf(path, sizeof path, "tests/golden-extra/transformer/%s", file);
    cJSON *j = tu_json_load(path);
    cr_assert(j != NULL, "%s", path);
    int d = get(j, "d")->valueint, H = get(j, "heads")->valueint, ff = get(j, "ff")->valueint;
    int le = get(j, "enc_layers")->valueint, ld = get(j, "dec_layers")->valueint, S = get(j, "S")->valueint,
        T = get(j, "T")->valueint;
    bool norm_first = cJSON_IsTrue(get(j, "norm_first"));
    TfActivation act = !strcmp(get(j, "activation")->valuestring, "gelu") ? TF_GELU : TF_RELU;
    ParamStore ps;
    params_init(&ps);
    Transformer tf;
    transformer_init(&tf, &ps, "tf", d, H, ff, le, ld, norm_first, act);
    S2sError err;
    cr_assert_eq(params_alloc(&ps, &err), S2S_OK);
    const cJSON *gp = get(j, "params"), *p;
    int n_params = tu_load_params(&ps, gp, "tf.");
    cr_assert_eq(n_params, ps.count, "%s: PyTorch has %d parameters, we have %d", file, n_params, ps.count);
    int B = cJSON_GetArraySize(get(j, "src_lens"));
    uint8_t *sm = calloc((size_t)B * S, 1), *tm = calloc((size_t)B * T, 1);
    for (int b = 0; b < B; b++) {
        int ls = cJSON_GetArrayItem(get(j, "src_lens"), b)->valueint, lt = cJSON_GetArrayItem(get(j, "trg_lens"), b)->valueint;
        for (int s = 0; s < ls; s++) sm[b * S + s] = 1;
        for (int s = 0; s < lt; s++) tm[b * T + s] = 1;
    }
    Tensor *src = tu_json_tensor(get(j, "src"), 3, (int[]){S, B, d}, true);
    Tensor *tgt = tu_json_tensor(get(j, "tgt"), 3, (int[]){T, B, d}, true);
    Tensor *seed = tu_json_tensor(get(j, "seed"), 3, (int[]){T, B, d}, false);
    cr_assert(src && tgt && seed);
    Tape t;
    tape_init(&t, 1 << 20);
    Tensor *cross[TF_MAX_LAYERS] = {0};
    Tensor *mem = transformer_encode(&t, &tf, src, sm, (TfDropout){0}, NULL);
    Tensor *out = transformer_decode(&t, &tf, tgt, mem, sm, tm, NULL, (TfDropout){0}, cross);
    char what[160];
    snprintf(what, sizeof what, "%s: out", file);
    expect_json(what, out->data, out->size, get(j, "out"), TU_RTOL_VALUE);
    for (int l = 0; l < ld; l++) {
        cr_assert(cross[l] != NULL);
        snprintf(what, sizeof what, "%s: layer %d cross-attention per head", file, l);
        expect_json(what, cross[l]->data, cross[l]->size, cJSON_GetArrayItem(get(j, "cross_heads"), l), TU_RTOL_VALUE);
        float *mean = calloc((size_t)B * T * S, sizeof *mean); /* the heads' mean, as heatmaps draw it */
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++)
                for (int k = 0; k < T * S; k++) mean[(size_t)b * T * S + k] += cross[l]->data[((size_t)b * H + h) * T * S + k] / (float)H;
        snprintf(what, sizeof what, "%s: layer %d cross-attention mean", file, l);
        expect_json(what, mean, (size_t)B * T * S, cJSON_GetArrayItem(get(j, "cross"), l), TU_RTOL_VALUE);
        free(mean);
    }
    tape_backward_seed(&t, out, seed->data);
    const cJSON *gg = get(j, "grads");
    snprintf(what, sizeof what, "%s: grad src", file);
    expect_json(what, src->grad, src->size, get(gg, "src"), TU_RTOL_GRAD);
    snprintf(what, sizeof what, "%s: grad tgt", file);
    expect_json(what, tgt->grad, tgt->size, get(gg, "tgt"), TU_RTOL_GRAD);
    cJSON_ArrayForEach(p, gp) {
        char full[2 * PARAM_NAME_MAX];
        snprintf(full, sizeof full, "tf.%s", p->string);
        Param *mine = params_find(&ps, full);
        snprintf(what, sizeof what, "%s: grad %s", file, p->string);
        expect_json(what, mine->t->grad, mine->t->size, get(gg, p->string), TU_RTOL_GRAD);
    }
    tape_free(&t);
    tensor_free(src);
    tensor_free(tgt);
    tensor_free(seed);
    free(sm);
    free(tm);
    params_free(&ps);
    cJSON_Delete(j);
}

Test(transformer, stacks_equal_pytorch_post_norm_relu) { run_case("stack_post_norm_relu_2x2.json"); }
Test(transformer, stacks_equal_pytorch_pre_norm_gelu) { run_case("stack_pre_norm_gelu_1x2.json"); }
Test(transformer, stacks_equal_pytorch_pre_norm_relu_four_heads) { run_case("stack_pre_norm_relu_2x1.json"); }
Test(transformer, stacks_equal_pytorch_post_norm_gelu_one_head) { run_case("stack_post_norm_gelu_1x1.json"); }

/* A training step's forward (model_forward: the decoder over only the positions with a target)
 * against the same golden: the logits of those rows, the loss and every gradient. */
static void check_target_rows(const cJSON *j, Tape *t, Seq2Seq *m, const Batch *bt, const char *file) {
    ModelOutput o = model_forward(t, m, bt, NULL, NULL);
    int B = bt->B, T1 = bt->T - 1, Vt = m->trg_vocab, real = 0;
    for (int k = 0; k < T1 * B; k++) real += bt->trg[B + k] != TOK_PAD;
    cr_assert(o.n_tokens == real && real < T1 * B, "%s: %d rows of %d targets (%d positions)", file, o.n_tokens, real, T1 * B);
    size_t all = (size_t)B * T1 * Vt;
    double *gl = malloc(all * sizeof *gl), *lg = malloc((size_t)real * Vt * sizeof *lg);
    cr_assert_eq(tu_json_flatten(get(j, "logits"), gl, all), (long)all);
    for (int r = 0; r < real; r++) { /* the golden's (B, T-1, V) at those rows */
        int i = o.rows[r] / B, b = o.rows[r] % B;
        memcpy(lg + (size_t)r * Vt, gl + ((size_t)b * T1 + i) * Vt, (size_t)Vt * sizeof *lg);
    }
    char what[160], why[256];
    bool ok = tu_close(o.logits->data, lg, (size_t)real * Vt, TU_RTOL_VALUE, why, sizeof why);
    cr_expect(ok, "%s: logits at the targets: %s", file, why);
    double want = get(j, "loss")->valuedouble;
    cr_expect(fabs(o.loss->data[0] - want) <= 1e-5 * fabs(want) + 1e-6, "%s: training loss %.8f, PyTorch %.8f", file,
              o.loss->data[0], want);
    params_zero_grad(&m->params);
    tape_backward(t, o.loss);
    const cJSON *p;
    cJSON_ArrayForEach(p, get(j, "grads")) {
        Param *mine = params_find(&m->params, p->string);
        snprintf(what, sizeof what, "%s: training grad %s", file, p->string);
        expect_json(what, mine->t->grad, mine->t->size, p, TU_RTOL_GRAD);
    }
    free(gl);
    free(lg);
}

/* The batch's first sentence alone (no padding: the training decoder's rows are its whole
 * grid) against the golden's logits of that sentence. */
static void check_one_sentence(const cJSON *j, Tape *t, Seq2Seq *m, const Dataset *d, int T1, const char *file) {
    Batch one;
    batch_init(&one);
    int idx = 0, Vt = m->trg_vocab;
    batch_fill(&one, d, &idx, 1);
    ModelOutput o = model_forward(t, m, &one, NULL, NULL);
    int n = one.T - 1;
    cr_assert(o.n_tokens == n && n <= T1, "%s: one sentence, %d rows of %d", file, o.n_tokens, n);
    size_t all = (size_t)cJSON_GetArraySize(get(j, "src")) * T1 * Vt;
    double *gl = malloc(all * sizeof *gl);
    cr_assert_eq(tu_json_flatten(get(j, "logits"), gl, all), (long)all);
    char why[256];
    bool ok = tu_close(o.logits->data, gl, (size_t)n * Vt, TU_RTOL_VALUE, why, sizeof why); /* sentence 0's rows first */
    cr_expect(ok, "%s: the first sentence alone: %s", file, why);
    free(gl);
    batch_free(&one);
}

/* The whole model (model.type = transformer) against tests/golden-extra/transformer/model_*.json:
 * token embeddings scaled by √d plus sinusoidal or learned positions, nn.Transformer, the
 * generator; built from the case's config alone, weights loaded by PyTorch's names; logits
 * at every position, the loss and every gradient. */
static void run_model_case(const char *file) {
    char path[512];
    snprintf(path, sizeof path, "tests/golden-extra/transformer/%s", file);
    cJSON *j = tu_json_load(path);
    cr_assert(j != NULL, "%s", path);
    const cJSON *c = get(j, "config");
    Config full;
    config_defaults(&full);
    char set[128];
    const char *choices[3] = {"norm", "positions", "activation"};
    for (int k = 0; k < 3; k++) {
        snprintf(set, sizeof set, "model.%s=%s", choices[k], get(c, choices[k])->valuestring);
        tu_config_set(&full, set);
    }
    tu_config_set(&full, "model.type=transformer");
    ConfigModel mc = full.model;
    mc.d_model = get(c, "d_model")->valueint;
    mc.heads = get(c, "heads")->valueint;
    mc.ff = get(c, "ff")->valueint;
    mc.layers = get(c, "layers")->valueint;
    const cJSON *el = cJSON_GetObjectItemCaseSensitive(c, "encoder_layers"), *dl = cJSON_GetObjectItemCaseSensitive(c, "decoder_layers");
    mc.encoder_layers = el ? el->valueint : 0;
    mc.decoder_layers = dl ? dl->valueint : 0;
    mc.max_positions = get(c, "max_positions")->valueint;
    mc.dropout = 0.0f;
    int Vs = get(c, "src_vocab")->valueint, Vt = get(c, "trg_vocab")->valueint;
    Seq2Seq m;
    S2sError err;
    cr_assert_eq(model_init(&m, &mc, Vs, Vt, &err), S2S_OK, "%s", err.msg);
    const cJSON *gp = get(j, "params"), *p;
    int n_params = tu_load_params(&m.params, gp, "");
    cr_assert_eq(n_params, m.params.count, "%s: PyTorch has %d parameters, we have %d", file, n_params, m.params.count);
    /* the batch: sources without markers, targets <sos> … <eos>, padding stripped */
    Dataset d;
    dataset_init(&d);
    int B = cJSON_GetArraySize(get(j, "src"));
    int idx[16];
    for (int b = 0; b < B; b++) {
        int32_t s[64], tg[64];
        int ns = 0, nt = 0;
        const cJSON *x;
        cJSON_ArrayForEach(x, cJSON_GetArrayItem(get(j, "src"), b)) if (x->valueint != TOK_PAD) s[ns++] = x->valueint;
        cJSON_ArrayForEach(x, cJSON_GetArrayItem(get(j, "trg"), b)) if (x->valueint != TOK_PAD) tg[nt++] = x->valueint;
        dataset_add(&d, s, ns, tg, nt);
        idx[b] = b;
    }
    Batch bt;
    batch_init(&bt);
    batch_fill(&bt, &d, idx, B);
    Tape t;
    tape_init(&t, 1 << 20);
    ModelOutput o = model_forward_all(&t, &m, &bt);
    int T1 = bt.T - 1;
    float *lg = malloc((size_t)B * T1 * Vt * sizeof *lg); /* (B, T-1, V) as the golden */
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T1; i++) memcpy(lg + ((size_t)b * T1 + i) * Vt, o.logits->data + ((size_t)i * B + b) * Vt, (size_t)Vt * sizeof *lg);
    char what[160];
    snprintf(what, sizeof what, "%s: logits", file);
    expect_json(what, lg, (size_t)B * T1 * Vt, get(j, "logits"), TU_RTOL_VALUE);
    double want = get(j, "loss")->valuedouble;
    cr_expect(fabs(o.loss->data[0] - want) <= 1e-5 * fabs(want) + 1e-6, "%s: loss %.8f, PyTorch %.8f", file, o.loss->data[0], want);
    params_zero_grad(&m.params);
    tape_backward(&t, o.loss);
    const cJSON *gg = get(j, "grads");
    cJSON_ArrayForEach(p, gg) {
        Param *mine = params_find(&m.params, p->string);
        snprintf(what, sizeof what, "%s: grad %s", file, p->string);
        expect_json(what, mine->t->grad, mine->t->size, p, TU_RTOL_GRAD);
    }
    free(lg);
    tape_reset(&t);
    check_target_rows(j, &t, &m, &bt, file);
    tape_reset(&t);
    check_one_sentence(j, &t, &m, &d, T1, file);
    tape_free(&t);
    batch_free(&bt);
    dataset_free(&d);
    model_free(&m);
    cJSON_Delete(j);
}

Test(transformer, model_equals_pytorch_post_norm_sinusoidal) { run_model_case("model_post_sinusoidal_relu.json"); }
Test(transformer, model_equals_pytorch_pre_norm_learned_positions) { run_model_case("model_pre_learned_gelu.json"); }
Test(transformer, model_equals_pytorch_deep_encoder_shallow_decoder) { run_model_case("model_pre_deep_encoder.json"); }
