/* test_beam.c — beam search: K = 1 is greedy decoding, beam search finds outputs that score
 * better than greedy's on a small random model, the top tokens equal sorting them all, a
 * batch (and an ensemble) equals each sentence alone, and two threads equal one. Greedy
 * decoding: test_greedy.c. */
#include "test_beam.h"

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
    model_decode_start(&t, m, &b, 1, len + 1, &ds);
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
    const char *att[] = {"scaled_dot", "dot", "dummy", "multihead", "transformer-post", "transformer-pre"};
    for (int a = 0; a < 6; a++) {
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

/* A row's best C tokens against sorting them all: vocabularies around the 16-token blocks the
 * selection skips, ties (scores on a coarse grid), −inf, lists of 1 to 12. */
static int cmp_ref(const void *a, const void *b) {
    const BeamCand *x = a, *y = b;
    if (x->score != y->score) return x->score < y->score ? 1 : -1;
    return x->token - y->token;
}

Test(beam, top_tokens_equal_sorting_them_all) {
    enum { MAXV = 4000 };
    static float x[MAXV];
    static BeamCand all[MAXV];
    const int vs[] = {3, 5, 16, 17, 31, 33, 100, 4000};
    const int cs[] = {1, 2, 5, 10, 12};
    Rng r;
    rng_init(&r, 41, RNG_STREAM_DATA);
    for (int vi = 0; vi < 8; vi++)
        for (int ci = 0; ci < 5; ci++)
            for (int rep = 0; rep < 6; rep++) {
                int V = vs[vi], C = cs[ci];
                bool grid = rep % 2; /* few distinct values: many ties */
                for (int v = 0; v < V; v++) {
                    float u = rng_uniform_range(&r, -8.0f, 8.0f);
                    x[v] = grid ? floorf(u) : u;
                    if (rep == 4 && rng_below(&r, 3) == 0) x[v] = -INFINITY;
                }
                if (rep == 5) /* the best tokens at the end: every block has to be looked at */
                    for (int v = 0; v < V; v++) x[v] = (float)v * 0.01f;
                float base = rng_uniform_range(&r, -3.0f, 0.0f), lse = rng_uniform_range(&r, 0.0f, 9.0f);
                BeamCand top[16];
                int nt = beam_top_tokens(x, V, base, lse, C, 2, top);
                int n = 0;
                for (int v = 0; v < V; v++)
                    if (v != TOK_PAD && v != TOK_SOS) all[n++] = (BeamCand){base + (x[v] - lse), 2, v};
                qsort(all, (size_t)n, sizeof *all, cmp_ref);
                int want = n < C ? n : C;
                cr_assert_eq(nt, want, "V=%d C=%d case %d: %d tokens, want %d", V, C, rep, nt, want);
                for (int k = 0; k < nt; k++) {
                    cr_assert_eq(top[k].token, all[k].token, "V=%d C=%d case %d: place %d holds token %d (%g), want %d (%g)", V,
                                 C, rep, k, top[k].token, top[k].score, all[k].token, all[k].score);
                    cr_assert(top[k].score == all[k].score || (isinf(top[k].score) && isinf(all[k].score)));
                    cr_assert_eq(top[k].slot, 2);
                }
            }
}

/* Beam search drops the sentences it is done with from the batch too (their K rows, in every
 * model of an ensemble): each sentence's n-best list equals searching it alone. Models: a
 * bidirectional GRU, an LSTM with the Luong combination (cell states), a Transformer (cached
 * keys and values), and the GRU and a pre-norm Transformer as an ensemble; each with the
 * first <eos> bias of a sweep whose best outputs have four or more lengths, so sentences
 * finish at different steps. */
enum { BK = 3, BN = 2 };

static void beam_models(Seq2Seq *ms, int kind, float eos_bias) {
    if (kind == 0 || kind == 3) make_rnn(&ms[0], "scaled_dot", 0.6f, GRU_DEFAULT);
    if (kind == 1) make_rnn(&ms[0], "general", 1.5f, LSTM_LUONG);
    if (kind == 2) make_transformer(&ms[0], false, 3, 0.0f);
    if (kind == 3) make_transformer(&ms[1], true, 4, 0.0f);
    for (int k = 0; k < (kind == 3 ? 2 : 1); k++) ms[k].out.b->data[TOK_EOS] += eos_bias;
}

Test(beam, beam_batch_equals_one_sentence_at_a_time) {
    const char *name[] = {"GRU", "LSTM", "transformer", "ensemble"};
    for (int kind = 0; kind < 4; kind++) {
        int nm = kind == 3 ? 2 : 1, lengths = 0;
        Seq2Seq ms[2];
        Seq2Seq *mp[2] = {&ms[0], &ms[1]};
        Tape tapes[2];
        Tape *tp[2] = {&tapes[0], &tapes[1]};
        for (int k = 0; k < nm; k++) tape_init(&tapes[k], 1 << 16);
        Dataset d;
        Batch b;
        make_batch(&d, &b);
        BeamHyp h[NB * BN];
        for (int tries = 0; tries < 80 && lengths < 4; tries++) {
            if (tries) {
                beam_hyps_free(h, NB * BN);
                for (int k = 0; k < nm; k++) model_free(&ms[k]);
            }
            beam_models(ms, kind, 0.05f * (float)tries - 2.0f);
            for (int k = 0; k < nm; k++) tape_reset(&tapes[k]);
            model_beam_ensemble(tp, mp, nm, &b, BK, MAXLEN, 1.0f, BN, h);
            int seen[MAXLEN + 1] = {0};
            for (int i = 0; i < NB; i++) seen[h[i * BN].len] = 1;
            lengths = 0;
            for (int l = 0; l < MAXLEN; l++) lengths += seen[l];
        }
        cr_assert_geq(lengths, 4, "%s: no <eos> bias tried gives best outputs of four lengths", name[kind]);
        for (int i = 0; i < NB; i++) {
            Batch one;
            batch_init(&one);
            int e = b.index[i];
            batch_fill(&one, &d, &e, 1);
            BeamHyp h1[BN];
            for (int k = 0; k < nm; k++) tape_reset(&tapes[k]);
            model_beam_ensemble(tp, mp, nm, &one, BK, MAXLEN, 1.0f, BN, h1);
            for (int j = 0; j < BN; j++) {
                const BeamHyp *x = &h1[j], *y = &h[i * BN + j];
                cr_assert_eq(x->len, y->len, "%s: sentence %d, %d-th best: alone %d tokens, in the batch %d", name[kind], i, j,
                             x->len, y->len);
                cr_expect(x->len == 0 || memcmp(x->ids, y->ids, (size_t)x->len * sizeof *x->ids) == 0,
                          "%s: sentence %d, %d-th best differs", name[kind], i, j);
                cr_expect(fabsf(x->score - y->score) < 1e-4f, "%s: sentence %d, %d-th best: score %g alone, %g in the batch",
                          name[kind], i, j, x->score, y->score);
            }
            beam_hyps_free(h1, BN);
            batch_free(&one);
        }
        beam_hyps_free(h, NB * BN);
        for (int k = 0; k < nm; k++) {
            model_free(&ms[k]);
            tape_free(&tapes[k]);
        }
        batch_free(&b);
        dataset_free(&d);
    }
}

/* A beam's K rows of a sentence attend as K queries of that sentence (one copy of its states):
 * every step's logits and attention weights equal decoding a batch where each sentence is
 * repeated K times, one row each, for every attention variant, with a GRU and with an LSTM
 * (Luong), and both Transformers (two heads), the rows fed different tokens. */
Test(beam, beam_rows_equal_repeated_sentences) {
    enum { K = 3, STEPS = 4 };
    for (int a = 0; a < 2 * ATTN_KIND_COUNT + 2; a++) {
        bool lstm = a >= ATTN_KIND_COUNT, tf = a >= 2 * ATTN_KIND_COUNT;
        const char *name = tf ? (a % 2 ? "transformer-pre" : "transformer-post") : ATTN_KIND_NAMES[a % ATTN_KIND_COUNT];
        Seq2Seq m;
        if (tf) make_transformer(&m, a % 2, 17, 0.0f);
        else make_rnn(&m, name, 0.6f, lstm ? LSTM_LUONG : GRU_DEFAULT);
        Dataset d;
        Batch b, rep;
        make_batch(&d, &b);
        int idx[NB * K];
        for (int i = 0; i < NB * K; i++) idx[i] = b.index[i / K];
        batch_init(&rep);
        batch_fill(&rep, &d, idx, NB * K);
        Tape t1, t2;
        tape_init(&t1, 1 << 16);
        tape_init(&t2, 1 << 16);
        t1.grad_enabled = t2.grad_enabled = false;
        t1.training = t2.training = false;
        DecodeState beam, one;
        model_decode_start(&t1, &m, &b, K, STEPS, &beam);
        model_decode_start(&t2, &m, &rep, 1, STEPS, &one);
        Rng r;
        rng_init(&r, 3, RNG_STREAM_DATA);
        int32_t tok[NB * K];
        double worst = 0, worst_w = 0;
        for (int s = 0; s < STEPS; s++) {
            for (int i = 0; i < NB * K; i++) tok[i] = s == 0 ? TOK_SOS : TOK_SPECIALS + (int32_t)rng_below(&r, VT - TOK_SPECIALS);
            Tensor *w1 = NULL, *w2 = NULL;
            Tensor *l1 = model_decode_step(&t1, &m, &beam, tok, &w1), *l2 = model_decode_step(&t2, &m, &one, tok, &w2);
            cr_assert_eq(l1->size, l2->size);
            for (size_t k = 0; k < l1->size; k++) worst = fmax(worst, fabs(l1->data[k] - l2->data[k]));
            cr_assert_eq(w1 == NULL, w2 == NULL, "%s: weights from one side only", name);
            if (w1) {
                cr_assert_eq(w1->size, w2->size, "%s: weights of %zu and %zu values", name, w1->size, w2->size);
                for (size_t k = 0; k < w1->size; k++) worst_w = fmax(worst_w, fabs(w1->data[k] - w2->data[k]));
            }
            model_decode_settle(&t1, &m, &beam, s);
            model_decode_settle(&t2, &m, &one, s);
        }
        const char *cell = tf ? "" : lstm ? " (LSTM)" : " (GRU)";
        cr_expect_lt(worst, 1e-5, "%s%s: logits differ by %g", name, cell, worst);
        cr_expect_lt(worst_w, 1e-6, "%s%s: attention weights differ by %g", name, cell, worst_w);
        tape_free(&t1);
        tape_free(&t2);
        batch_free(&rep);
        batch_free(&b);
        dataset_free(&d);
        model_free(&m);
    }
}

/* Beam search and the per-sentence attention rows of decoding split over threads when they
 * are large (par_for): two threads give the same hypotheses, scores and greedy attention as
 * one. Sizes chosen above PAR_MIN_WORK: 64 sentences × 5 beams × 4,000 target words, and
 * encoder states 512 wide. */
Test(beam, same_results_on_two_threads, .timeout = 120) {
    enum { B = 64, BIG_VT = 4000, L = 10, K = 5 };
    Config c;
    config_defaults(&c);
    c.model = (ConfigModel){.cell = MODEL_CELL_GRU, .bidirectional = true, .layers = 1, .embedding_type = EMBEDDING_LEARNED,
                            .embedding = 8, .encoder_hidden = 256, .decoder_hidden = 12, .attention = ATTN_SCALED_DOT,
                            .kq = 6, .combine = COMBINE_CONCAT, .init_range = 0.5f};
    S2sError err;
    Seq2Seq m;
    cr_assert_eq(model_init(&m, &c.model, VS, BIG_VT, &err), S2S_OK, "%s", err.msg);
    Rng r;
    rng_init(&r, 23, RNG_STREAM_INIT);
    model_init_weights(&m, &r);
    Dataset d;
    Batch b;
    make_batch_n(&d, &b, B, 6);
    int restore = omp_get_max_threads();
    static BeamHyp h[2][B];
    static int32_t g[2][B * L];
    static float att[2][B * L * 8];
    int gl[2][B];
    for (int th = 1; th <= 2; th++) {
        gemm_set_threads(th);
        Tape t;
        tape_init(&t, 1 << 16);
        model_beam(&t, &m, &b, K, L, 1.0f, 1, h[th - 1]);
        tape_reset(&t);
        memset(att[th - 1], 0, sizeof att[0]);
        model_greedy(&t, &m, &b, L, g[th - 1], gl[th - 1], att[th - 1]);
        tape_free(&t);
    }
    gemm_set_threads(restore);
    for (int i = 0; i < B; i++) {
        cr_assert_eq(h[0][i].len, h[1][i].len, "sentence %d: beam lengths %d and %d", i, h[0][i].len, h[1][i].len);
        cr_expect_eq(memcmp(h[0][i].ids, h[1][i].ids, (size_t)h[0][i].len * sizeof(int32_t)), 0, "sentence %d", i);
        cr_expect_eq(memcmp(&h[0][i].score, &h[1][i].score, sizeof(float)), 0, "sentence %d: score", i);
        cr_assert_eq(gl[0][i], gl[1][i], "sentence %d: greedy lengths", i);
    }
    cr_expect_eq(memcmp(g[0], g[1], sizeof g[0]), 0, "greedy outputs differ");
    cr_expect_eq(memcmp(att[0], att[1], sizeof att[0]), 0, "greedy attention differs");
    beam_hyps_free(h[0], B);
    beam_hyps_free(h[1], B);
    batch_free(&b);
    dataset_free(&d);
    model_free(&m);
}
