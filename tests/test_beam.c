/* test_beam.c — beam search: K = 1 is greedy decoding, and beam search finds outputs that
 * score better than greedy's on a small random model. */
#include "test_util.h"
#include "s2s/model.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { NB = 12, VS = 9, VT = 11, MAXLEN = 12 };

static void make_model(Seq2Seq *m, const char *attention, float range) {
    Config c;
    config_defaults(&c);
    bool dot = !strcmp(attention, "dot"); /* dot needs decoder_hidden = 2 x encoder_hidden */
    c.model = (ConfigModel){.cell = "gru", .bidirectional = true, .layers = 1, .embedding_type = "learned",
                            .embedding = 8, .encoder_hidden = dot ? 5 : 8, .decoder_hidden = 10, .attention = "",
                            .kq = 6, .combine = "concat", .init_range = range};
    if (dot) strcpy(c.model.combine, "luong");
    strcpy(c.model.attention, attention);
    S2sError err;
    cr_assert_eq(model_init(m, &c.model, VS, VT, &err), S2S_OK, "%s", err.msg);
    Rng r;
    rng_init(&r, 17, RNG_STREAM_INIT);
    model_init_weights(m, &r);
}

static void make_batch(Dataset *d, Batch *b) {
    dataset_init(d);
    Rng r;
    rng_init(&r, 5, RNG_STREAM_DATA);
    int idx[NB];
    for (int i = 0; i < NB; i++) {
        int32_t src[8], trg[2] = {TOK_SOS, TOK_EOS};
        int n = 2 + (int)rng_below(&r, 6);
        for (int k = 0; k < n; k++) src[k] = TOK_SPECIALS + (int32_t)rng_below(&r, VS - TOK_SPECIALS);
        dataset_add(d, src, n, trg, 2);
        idx[i] = i;
    }
    batch_init(b);
    batch_fill(b, d, idx, NB);
}

/* Σ log p of a given output (plus <eos> when it ended), decoding one sentence step by step. */
static double score_output(Seq2Seq *m, Batch *all, int row, const int32_t *ids, int len, bool ended) {
    Dataset d;
    dataset_init(&d);
    Batch b;
    batch_init(&b);
    int32_t src[16];
    int n = all->src_len[row];
    for (int k = 0; k < n; k++) src[k] = all->src[(size_t)k * all->B + row];
    int32_t trg[2] = {TOK_SOS, TOK_EOS};
    dataset_add(&d, src, n, trg, 2);
    batch_fill(&b, &d, (int[]){0}, 1);
    Tape t;
    tape_init(&t, 1 << 16);
    t.grad_enabled = false;
    t.training = false;
    DecodeState ds;
    model_decode_start(&t, m, &b, 1, &ds);
    double total = 0.0;
    int32_t tok = TOK_SOS;
    for (int k = 0; k <= len; k++) {
        if (k == len && !ended) break;
        Tensor *lg = model_decode_step(&t, m, &ds, &tok, NULL);
        int next = k < len ? ids[k] : TOK_EOS;
        double mx = lg->data[0], s = 0.0;
        for (int v = 1; v < VT; v++) mx = fmax(mx, lg->data[v]);
        for (int v = 0; v < VT; v++) s += exp(lg->data[v] - mx);
        total += lg->data[next] - mx - log(s);
        tok = next;
    }
    tape_free(&t);
    batch_free(&b);
    dataset_free(&d);
    return total;
}

Test(beam, width_one_is_greedy) {
    const char *att[] = {"scaled_dot", "dot", "dummy"};
    for (int a = 0; a < 3; a++) {
        Seq2Seq m;
        make_model(&m, att[a], a == 1 ? 0.8f : 0.5f);
        Dataset d;
        Batch b;
        make_batch(&d, &b);
        Tape t;
        tape_init(&t, 1 << 16);
        int32_t g[NB * MAXLEN];
        int gl[NB];
        model_greedy(&t, &m, &b, MAXLEN, g, gl, NULL);
        BeamHyp h[NB];
        tape_reset(&t);
        model_beam(&t, &m, &b, 1, MAXLEN, 1.0f, 1, h);
        for (int i = 0; i < NB; i++) {
            cr_assert_eq(h[i].len, gl[i], "%s: sentence %d: beam 1 length %d, greedy %d", att[a], i, h[i].len, gl[i]);
            cr_expect_eq(memcmp(h[i].ids, g + i * MAXLEN, (size_t)gl[i] * sizeof(int32_t)), 0, "%s: sentence %d", att[a], i);
        }
        beam_hyps_free(h, NB);
        tape_free(&t);
        batch_free(&b);
        dataset_free(&d);
        model_free(&m);
    }
}

Test(beam, finds_better_scoring_outputs_than_greedy) {
    Seq2Seq m;
    make_model(&m, "scaled_dot", 0.9f);
    Dataset d;
    Batch b;
    make_batch(&d, &b);
    Tape t;
    tape_init(&t, 1 << 16);
    int32_t g[NB * MAXLEN];
    int gl[NB];
    model_greedy(&t, &m, &b, MAXLEN, g, gl, NULL);
    BeamHyp h[NB * 2];
    tape_reset(&t);
    model_beam(&t, &m, &b, 5, MAXLEN, 0.0f, 2, h); /* alpha 0: raw log-probabilities */
    int better = 0;
    for (int i = 0; i < NB; i++) {
        double gs = score_output(&m, &b, i, g + i * MAXLEN, gl[i], gl[i] < MAXLEN);
        BeamHyp *best = &h[i * 2];
        bool ended = best->len < MAXLEN; /* (a hypothesis at the limit may or may not have ended) */
        double bs = score_output(&m, &b, i, best->ids, best->len, ended);
        cr_expect(fabs(bs - best->score) < 1e-3 || !ended, "sentence %d: beam reports %.5f, rescoring gives %.5f", i,
                  best->score, bs);
        cr_expect_geq(best->score, gs - 1e-4, "sentence %d: beam %.5f below greedy %.5f", i, best->score, gs);
        better += best->score > gs + 1e-3;
        cr_expect_geq(best->norm, h[i * 2 + 1].norm, "n-best lists are sorted");
    }
    cr_expect_gt(better, 0, "beam search never beat greedy decoding on %d sentences", NB);
    cr_log_info("beam 5 beat greedy on %d of %d sentences", better, NB);
    beam_hyps_free(h, NB * 2);
    tape_free(&t);
    batch_free(&b);
    dataset_free(&d);
    model_free(&m);
}
