/* The training recipe's pieces (issue 18): tied embeddings, label smoothing in the model's
 * loss, the optimiser keys, weight averaging. Each is checked against an identity that must
 * hold, or against PyTorch where a golden exists (test_golden_core.c, test_optim.c). */
#include "test_util.h"

#include "s2s/data.h"
#include "s2s/model.h"
#include "s2s/ops.h"
#include "s2s/optim.h"
#include "s2s/rng.h"
#include "s2s/tape.h"

#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

/* Three sentence pairs of random ids in [4, V) (lengths 3-6), one batch of them. */
static void random_batch(Dataset *d, Batch *bt, int V, uint64_t seed) {
    Rng rng;
    rng_init(&rng, seed, 0);
    dataset_init(d);
    int idx[3];
    for (int b = 0; b < 3; b++) {
        int32_t s[8], t[8];
        int ns = 3 + b, nt = 6 - b;
        for (int i = 0; i < ns; i++) s[i] = 4 + (int32_t)rng_below(&rng, (uint32_t)(V - 4));
        t[0] = TOK_SOS;
        for (int i = 1; i < nt - 1; i++) t[i] = 4 + (int32_t)rng_below(&rng, (uint32_t)(V - 4));
        t[nt - 1] = TOK_EOS;
        dataset_add(d, s, ns, t, nt);
        idx[b] = b;
    }
    batch_init(bt);
    batch_fill(bt, d, idx, 3);
}

static ConfigModel small_model(const char *type) {
    Config c;
    config_defaults(&c);
    char set[64];
    snprintf(set, sizeof set, "model.type=%s", type);
    tu_config_set(&c, set);
    ConfigModel m = c.model;
    m.dropout = 0.0f;
    if (!strcmp(type, "transformer")) {
        m.d_model = 16;
        m.heads = 2;
        m.ff = 24;
        m.layers = 2;
    } else {
        m.embedding = m.encoder_hidden = m.decoder_hidden = 12;
        m.kq = 12;
        m.combine = COMBINE_LUONG;
        m.attention = ATTN_GENERAL;
    }
    return m;
}

/* A tied model is the untied one whose tied matrices hold equal values: the same loss, and
 * the tied matrix's gradient is the sum of the untied ones' (decoder embedding + output layer,
 * and the source embedding with "all"). */
static void tied_equals_untied(const char *type, Tie tie) {
    int V = 11;
    ConfigModel cu = small_model(type), ct = cu;
    ct.tie_embeddings = tie;
    Seq2Seq u, t;
    S2sError err;
    cr_assert_eq(model_init(&u, &cu, V, V, &err), S2S_OK, "%s", err.msg);
    cr_assert_eq(model_init(&t, &ct, V, V, &err), S2S_OK, "%s", err.msg);
    cr_expect_lt(t.params.count, u.params.count, "%s: tying declares fewer tensors", type);
    cr_expect_eq(params_numel(&u.params) - params_numel(&t.params),
                 (size_t)(tie == TIE_ALL ? 2 : 1) * u.out.w->size, "%s: one matrix less per tied embedding", type);
    Rng rng;
    rng_init(&rng, 7, 0);
    model_init_weights(&u, &rng);
    memcpy(u.dec_emb.w->data, u.out.w->data, u.out.w->size * sizeof(float));
    if (tie == TIE_ALL) memcpy(u.enc_emb.w->data, u.out.w->data, u.out.w->size * sizeof(float));
    for (int i = 0; i < t.params.count; i++) { /* every tied tensor by its name in the untied model */
        Param *mine = &t.params.items[i], *theirs = params_find(&u.params, mine->name);
        cr_assert(theirs != NULL, "%s: %s", type, mine->name);
        memcpy(mine->t->data, theirs->t->data, mine->t->size * sizeof(float));
    }
    cr_expect_eq(t.dec_emb.w, t.out.w);
    cr_expect_eq(t.enc_emb.w == t.out.w, tie == TIE_ALL);
    Dataset d;
    Batch bt;
    random_batch(&d, &bt, V, 3);
    float loss[2];
    Seq2Seq *ms[2] = {&u, &t};
    for (int k = 0; k < 2; k++) {
        Tape tp;
        tape_init(&tp, 1 << 20);
        tp.grad_enabled = true;
        params_zero_grad(&ms[k]->params);
        ModelOutput o = model_forward(&tp, ms[k], &bt, NULL, NULL);
        loss[k] = o.loss->data[0];
        tape_backward(&tp, o.loss);
        tape_free(&tp);
    }
    cr_expect_eq(loss[0], loss[1], "%s: loss %.9g untied, %.9g tied", type, loss[0], loss[1]);
    double worst = 0, scale = 0;
    for (size_t i = 0; i < t.out.w->size; i++) {
        double sum = (double)u.out.w->grad[i] + u.dec_emb.w->grad[i] + (tie == TIE_ALL ? u.enc_emb.w->grad[i] : 0.0);
        worst = fmax(worst, fabs(t.out.w->grad[i] - sum));
        scale = fmax(scale, fabs(sum));
    }
    cr_expect_gt(scale, 0.0);
    cr_expect_leq(worst, 1e-6 * scale + 1e-9, "%s, tie %d: tied gradient off the sum by %g (largest %g)", type, (int)tie, worst,
                  scale);
    batch_free(&bt);
    dataset_free(&d);
    model_free(&u);
    model_free(&t);
}

Test(recipe, tied_rnn_decoder) { tied_equals_untied("rnn", TIE_DECODER); }
Test(recipe, tied_rnn_all) { tied_equals_untied("rnn", TIE_ALL); }
Test(recipe, tied_transformer_decoder) { tied_equals_untied("transformer", TIE_DECODER); }
Test(recipe, tied_transformer_all) { tied_equals_untied("transformer", TIE_ALL); }

/* Tying what cannot be one matrix is refused, naming the key and the sizes. */
Test(recipe, tying_unequal_sizes_refused) {
    S2sError err;
    Seq2Seq m;
    ConfigModel c = small_model("rnn");
    c.tie_embeddings = TIE_DECODER;
    c.combine = COMBINE_CONCAT;
    cr_expect_eq(model_init(&m, &c, 9, 9, &err), S2S_ERR_CONFIG);
    cr_expect(strstr(err.msg, "model.tie_embeddings") && strstr(err.msg, "luong"), "%s", err.msg);
    c.combine = COMBINE_LUONG;
    c.embedding = 8;
    cr_expect_eq(model_init(&m, &c, 9, 9, &err), S2S_ERR_CONFIG);
    cr_expect(strstr(err.msg, "(8)"), "%s", err.msg);
    c = small_model("transformer");
    c.tie_embeddings = TIE_ALL;
    cr_expect_eq(model_init(&m, &c, 9, 10, &err), S2S_ERR_CONFIG);
    cr_expect(strstr(err.msg, "9 and 10"), "%s", err.msg);
    c.tie_embeddings = TIE_DECODER; /* different vocabularies: only the target side is tied */
    cr_assert_eq(model_init(&m, &c, 9, 10, &err), S2S_OK, "%s", err.msg);
    model_free(&m);
}

/* The model's loss with label smoothing: smoothed when the tape records gradients, the plain
 * cross-entropy beside it (o.nll) and when evaluating; ε = 0 gives the same bits as before. */
Test(recipe, label_smoothing_in_the_model_loss) {
    int V = 13;
    ConfigModel c = small_model("rnn");
    Seq2Seq m;
    S2sError err;
    cr_assert_eq(model_init(&m, &c, V, V, &err), S2S_OK, "%s", err.msg);
    Rng rng;
    rng_init(&rng, 5, 0);
    model_init_weights(&m, &rng);
    Dataset d;
    Batch bt;
    random_batch(&d, &bt, V, 4);
    float loss[3];
    double nll[3];
    for (int k = 0; k < 3; k++) { /* plain training, smoothed training, smoothed model evaluated */
        ModelLoss smooth = {k ? 0.2f : 0.0f, 0};
        Tape tp;
        tape_init(&tp, 1 << 20);
        tp.grad_enabled = k < 2;
        ModelOutput o = model_forward(&tp, &m, &bt, NULL, &smooth);
        loss[k] = o.loss->data[0];
        nll[k] = o.nll;
        tape_free(&tp);
    }
    cr_expect_eq((float)nll[0], loss[0], "ε 0: the loss is the NLL");
    cr_expect_neq(loss[1], loss[0], "ε 0.2 changes the training loss");
    cr_expect_eq(nll[1], nll[0], "the NLL beside it is the plain one");
    cr_expect_eq(loss[2], loss[0], "evaluation reports the plain loss");
    batch_free(&bt);
    dataset_free(&d);
    model_free(&m);
}

/* The moving average: d = min(decay, (1 + n) / (10 + n)) after update n, against the
 * recurrence written out in double; the swap exchanges weights and average exactly. */
Test(recipe, moving_average_of_the_weights) {
    ParamStore ps;
    params_init(&ps);
    Tensor *w = params_add(&ps, "w", 1, (int[]){5});
    S2sError err;
    cr_assert_eq(params_alloc(&ps, &err), S2S_OK);
    for (int i = 0; i < 5; i++) w->data[i] = (float)i;
    cr_assert_eq(params_alloc_ema(&ps, &err), S2S_OK);
    double want[5];
    for (int i = 0; i < 5; i++) want[i] = i;
    for (long n = 1; n <= 40; n++) {
        for (int i = 0; i < 5; i++) w->data[i] = (float)(i + 0.5 * n); /* the weights move */
        optim_ema_update(&ps, 0.8f, n);
        double d = fmin(0.8f, (1.0 + n) / (10.0 + n));
        for (int i = 0; i < 5; i++) want[i] = d * want[i] + (1 - d) * w->data[i];
    }
    for (int i = 0; i < 5; i++)
        cr_expect(fabs(ps.ema[ps.items[0].offset + i] - want[i]) <= 1e-5 * fabs(want[i]) + 1e-6, "%d: %.7f vs %.7f", i,
                  ps.ema[ps.items[0].offset + i], want[i]);
    float before[5], avg[5];
    memcpy(before, w->data, sizeof before);
    memcpy(avg, ps.ema + ps.items[0].offset, sizeof avg);
    params_swap_ema(&ps);
    cr_expect(memcmp(w->data, avg, sizeof avg) == 0 && memcmp(ps.ema + ps.items[0].offset, before, sizeof before) == 0);
    params_free(&ps);
}
