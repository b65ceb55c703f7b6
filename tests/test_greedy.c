/* test_greedy.c — greedy decoding: step by step equals the whole sequence, a batch equals each
 * sentence alone (RNN and Transformer), and the pick (float32 and int8) equals the argmax of
 * the logits, against a plain scan. */
#include "test_beam.h"

/* Decoding one step at a time (the encoder once, the attention's projections of it cached on
 * the first step) gives the logits of the whole teacher-forced sequence at every step, for
 * every attention variant. */
Test(greedy, step_by_step_equals_the_whole_sequence) {
    const char *tf[2] = {"transformer-post", "transformer-pre"};
    for (int a = 0; a < 2 * ATTN_KIND_COUNT + 2; a++) {
        bool lstm = a >= ATTN_KIND_COUNT + 2; /* then every attention again: LSTM, Luong */
        const char *name = a < ATTN_KIND_COUNT ? ATTN_KIND_NAMES[a]
                           : lstm              ? ATTN_KIND_NAMES[a - ATTN_KIND_COUNT - 2]
                                               : tf[a - ATTN_KIND_COUNT];
        Seq2Seq m;
        if (lstm) make_rnn(&m, name, 0.6f, LSTM_LUONG);
        else make_model(&m, name, 0.6f);
        Dataset d;
        dataset_init(&d);
        Rng r;
        rng_init(&r, 9, RNG_STREAM_DATA);
        enum { N = 6 };
        int idx[N];
        for (int i = 0; i < N; i++) {
            int32_t src[8], trg[9] = {TOK_SOS};
            int ls = 2 + (int)rng_below(&r, 6), lt = 1 + (int)rng_below(&r, 6);
            for (int k = 0; k < ls; k++) src[k] = TOK_SPECIALS + (int32_t)rng_below(&r, VS - TOK_SPECIALS);
            for (int k = 1; k <= lt; k++) trg[k] = TOK_SPECIALS + (int32_t)rng_below(&r, VT - TOK_SPECIALS);
            trg[lt + 1] = TOK_EOS;
            dataset_add(&d, src, ls, trg, lt + 2);
            idx[i] = i;
        }
        Batch b;
        batch_init(&b);
        batch_fill(&b, &d, idx, N);
        Tape t;
        tape_init(&t, 1 << 16);
        t.grad_enabled = false;
        t.training = false;
        ModelOutput o = model_forward_all(&t, &m, &b);
        int V = m.trg_vocab, T1 = b.T - 1;
        float *whole = malloc((size_t)T1 * N * V * sizeof *whole);
        memcpy(whole, o.logits->data, (size_t)T1 * N * V * sizeof *whole);
        tape_reset(&t);
        DecodeState ds;
        model_decode_start(&t, &m, &b, 1, T1, &ds);
        double worst = 0;
        for (int i = 0; i < T1; i++) {
            Tensor *lg = model_decode_step(&t, &m, &ds, b.trg + (size_t)i * N, NULL);
            for (int k = 0; k < N * V; k++) /* where the input is real: a Transformer masks padded inputs */
                if (b.trg[(size_t)i * N + k / V] != TOK_PAD) worst = fmax(worst, fabs(lg->data[k] - whole[(size_t)i * N * V + k]));
            model_decode_settle(&t, &m, &ds, i);
        }
        cr_expect_lt(worst, 1e-4, "%s%s: step by step and whole differ by %g", name, lstm ? " (LSTM, Luong)" : "", worst);
        free(whole);
        tape_free(&t);
        batch_free(&b);
        dataset_free(&d);
        model_free(&m);
    }
}

/* Greedy decoding drops finished sentences from the batch as it goes: every sentence's
 * output and attention must equal decoding it alone. LSTM with 2 layers covers the cell
 * states and every layer's kept buffers. */
Test(greedy, greedy_batch_equals_one_sentence_at_a_time) {
    const char *att[] = {"scaled_dot", "meanpool", "multihead"};
    /* seeds and <eos> biases found to make sentences end at many different steps */
    const uint64_t seed[] = {5, 3, 8};
    const float eos_bias[] = {0.5f, 0.2f, 0.0f};
    for (int a = 0; a < 3; a++) {
        Config c;
        config_defaults(&c);
        c.model = (ConfigModel){.cell = MODEL_CELL_LSTM, .bidirectional = false, .layers = 2, .embedding_type = EMBEDDING_LEARNED,
                                .embedding = 8, .encoder_hidden = 8, .decoder_hidden = 8, .kq = 6,
                                .combine = COMBINE_CONCAT, .init_range = 0.6f};
        char set[64];
        snprintf(set, sizeof set, "attention=%s", att[a]);
        tu_config_set(&c, set);
        c.model.heads = 2;
        S2sError err;
        Seq2Seq m;
        cr_assert_eq(model_init(&m, &c.model, VS, VT, &err), S2S_OK, "%s", err.msg);
        Rng r;
        rng_init(&r, seed[a], RNG_STREAM_INIT);
        model_init_weights(&m, &r);
        /* make <eos> likely enough that sentences end at different steps */
        m.out.b->data[TOK_EOS] += eos_bias[a];
        Dataset d;
        Batch b;
        make_batch(&d, &b);
        Tape t;
        tape_init(&t, 1 << 16);
        int32_t g[NB * MAXLEN];
        int gl[NB];
        float *attn = calloc((size_t)NB * MAXLEN * b.S, sizeof *attn);
        model_greedy(&t, &m, &b, MAXLEN, g, gl, attn);
        int ended_at[MAXLEN] = {0};
        for (int i = 0; i < NB; i++) {
            Batch one;
            batch_init(&one);
            int e = b.index[i];
            batch_fill(&one, &d, &e, 1);
            int32_t o[MAXLEN];
            int ol;
            float *a1 = calloc((size_t)MAXLEN * one.S, sizeof *a1);
            tape_reset(&t);
            model_greedy(&t, &m, &one, MAXLEN, o, &ol, a1);
            cr_assert_eq(ol, gl[i], "%s: sentence %d: alone %d tokens, in the batch %d", att[a], i, ol, gl[i]);
            cr_expect_eq(memcmp(o, g + i * MAXLEN, (size_t)ol * sizeof *o), 0, "%s: sentence %d differs", att[a], i);
            for (int s = 0; s <= ol && s < MAXLEN; s++)
                for (int k = 0; k < one.S; k++) {
                    float x = a1[(size_t)s * one.S + k], y = attn[((size_t)i * MAXLEN + s) * b.S + k];
                    cr_expect(fabsf(x - y) < 1e-5f, "%s: sentence %d step %d: attention %g vs %g", att[a], i, s, x, y);
                }
            free(a1);
            batch_free(&one);
            if (gl[i] < MAXLEN) ended_at[gl[i]] = 1;
        }
        /* the case must exercise dropping: sentences ended at several different steps */
        int steps = 0;
        for (int k = 0; k < MAXLEN; k++) steps += ended_at[k];
        cr_expect_geq(steps, 3, "%s: sentences ended at only %d different steps", att[a], steps);
        free(attn);
        tape_free(&t);
        batch_free(&b);
        dataset_free(&d);
        model_free(&m);
    }
}

/* Greedy's pick: the first of the highest-scoring rows' tokens, never <pad> or <sos>, a NaN
 * never winning; against one plain scan, on rows made to tie, hold NaN, -inf, or their
 * maximum at <pad>/<sos>, with vocabulary sizes around the 16-wide blocks. */
Test(greedy, argmax_rows_matches_a_plain_scan) {
    Rng rng;
    rng_init(&rng, 77, 0);
    int sizes[] = {5, 19, 20, 21, 35, 100};
    for (int si = 0; si < 6; si++) {
        int V = sizes[si], R = 60;
        Tensor *lg = tensor_new(2, (int[]){R, V}, false);
        for (int r = 0; r < R; r++) {
            float *row = lg->data + (size_t)r * V;
            for (int v = 0; v < V; v++) row[v] = (float)(int)rng_uniform_range(&rng, -4, 4); /* many ties */
            switch (r % 6) {
            case 1: row[TOK_PAD] = 100; row[TOK_SOS] = 99; break; /* never picked */
            case 2: row[(r * 7) % V] = NAN; break;
            case 3: row[TOK_UNK] = NAN; break;
            case 4: for (int v = 0; v < V; v++) row[v] = -INFINITY; break;
            case 5: row[V - 1] = 50; break; /* in the tail past the blocks */
            default: break;
            }
        }
        int32_t best[60];
        model_argmax_rows(lg, R, best);
        for (int r = 0; r < R; r++) {
            const float *row = lg->data + (size_t)r * V;
            int want = TOK_UNK;
            for (int v = TOK_UNK + 1; v < V; v++)
                if (v != TOK_SOS && row[v] > row[want]) want = v;
            cr_expect_eq(best[r], want, "V=%d row %d (case %d): picked %d, a scan picks %d", V, r, r % 6, best[r], want);
        }
        tensor_free(lg);
    }
}

/* The Transformer's decoding drops finished sentences too (its cached keys and values lose
 * their rows, the memory's its index): every sentence's output and attention equal decoding
 * it alone, and the outputs without the attention asked for (no weights made) the same. The
 * model is the first of a few seeds and <eos> biases whose sentences end at three or more
 * steps: post- and pre-norm, and one with a single head, whose last sentence left (one
 * sentence·head) takes the composed ops, the memory laid out again. */
Test(greedy, transformer_greedy_batch_equals_one_sentence_at_a_time) {
    for (int variant = 0; variant < 3; variant++) {
        bool pre = variant == 1;
        int heads = variant == 2 ? 1 : 2;
        Seq2Seq m;
        Dataset d;
        Batch b;
        make_batch(&d, &b);
        Tape t;
        tape_init(&t, 1 << 16);
        int32_t g[NB * MAXLEN];
        int gl[NB], steps = 0;
        float *attn = calloc((size_t)NB * MAXLEN * b.S, sizeof *attn);
        for (int k = 0; k < 40 && steps < 3; k++) {
            if (k) model_free(&m);
            make_transformer_heads(&m, pre, 1 + (uint64_t)k / 4, 0.25f * (float)(k % 4), heads);
            tape_reset(&t);
            model_greedy(&t, &m, &b, MAXLEN, g, gl, attn);
            int ended_at[MAXLEN + 1] = {0};
            for (int i = 0; i < NB; i++) ended_at[gl[i]] = 1;
            steps = 0;
            for (int s = 0; s < MAXLEN; s++) steps += ended_at[s];
        }
        cr_assert_geq(steps, 3, "no model of the few tried ends its sentences at three different steps");
        int32_t g2[NB * MAXLEN];
        int gl2[NB];
        tape_reset(&t);
        model_greedy(&t, &m, &b, MAXLEN, g2, gl2, NULL);
        for (int i = 0; i < NB; i++) {
            cr_assert_eq(gl2[i], gl[i], "sentence %d: %d tokens without the attention, %d with", i, gl2[i], gl[i]);
            cr_expect_eq(memcmp(g2 + i * MAXLEN, g + i * MAXLEN, (size_t)gl[i] * sizeof *g), 0,
                         "sentence %d differs without the attention", i);
        }
        for (int i = 0; i < NB; i++) {
            Batch one;
            batch_init(&one);
            int e = b.index[i];
            batch_fill(&one, &d, &e, 1);
            int32_t o[MAXLEN];
            int ol;
            float *a1 = calloc((size_t)MAXLEN * one.S, sizeof *a1);
            tape_reset(&t);
            model_greedy(&t, &m, &one, MAXLEN, o, &ol, a1);
            cr_assert_eq(ol, gl[i], "sentence %d: alone %d tokens, in the batch %d", i, ol, gl[i]);
            cr_expect_eq(memcmp(o, g + i * MAXLEN, (size_t)ol * sizeof *o), 0, "sentence %d differs", i);
            for (int s = 0; s <= ol && s < MAXLEN; s++)
                for (int k = 0; k < one.S; k++) {
                    float x = a1[(size_t)s * one.S + k], y = attn[((size_t)i * MAXLEN + s) * b.S + k];
                    cr_expect(fabsf(x - y) < 1e-5f, "sentence %d step %d: attention %g vs %g", i, s, x, y);
                }
            free(a1);
            batch_free(&one);
        }
        free(attn);
        tape_free(&t);
        batch_free(&b);
        dataset_free(&d);
        model_free(&m);
    }
}

/* Greedy's pick on a float32 tape (op_linear_argmax: a screen, then exact logits) against
 * the step's whole logits and model_argmax_rows, step by step, for the RNN kinds and both
 * Transformers, weights frozen (the packed screen) and not, each screen: the same outputs. */
Test(greedy, greedy_pick_equals_argmax_of_the_logits) {
    const char *kinds[] = {"scaled_dot", "dot", "lstm-luong", "transformer-post", "transformer-pre"};
    for (int ki = 0; ki < 5; ki++)
        for (int screen = TAPE_SCREEN_AUTO; screen <= TAPE_SCREEN_INT8; screen++)
            for (int frozen = 0; frozen < 2; frozen++) {
                if (screen == TAPE_SCREEN_BF16 && gemm_bf16_check("test", &(S2sError){0}) != S2S_OK) continue;
                Seq2Seq m;
                if (!strcmp(kinds[ki], "lstm-luong")) make_rnn(&m, "additive", 0.5f, LSTM_LUONG);
                else make_model(&m, kinds[ki], 0.5f);
                m.out.b->data[TOK_EOS] -= 1.5f; /* sentences of several lengths */
                if (frozen) params_freeze(&m.params, false);
                Dataset d;
                Batch b;
                make_batch(&d, &b);
                Tape t;
                tape_init(&t, 1 << 20);
                t.screen = (TapeScreen)screen;
                int32_t out[NB * MAXLEN];
                int out_len[NB];
                model_greedy(&t, &m, &b, MAXLEN, out, out_len, NULL);
                tape_reset(&t);
                t.grad_enabled = t.training = false;
                DecodeState ds;
                model_decode_start(&t, &m, &b, 1, MAXLEN, &ds);
                int32_t tok[NB], best[NB];
                bool done[NB] = {0};
                for (int i = 0; i < NB; i++) tok[i] = TOK_SOS;
                int picks = 0;
                for (int step = 0; step < MAXLEN; step++) {
                    Tensor *lg = model_decode_step(&t, &m, &ds, tok, NULL);
                    model_argmax_rows(lg, NB, best);
                    for (int i = 0; i < NB; i++) {
                        if (done[i]) continue;
                        picks++;
                        if (best[i] == TOK_EOS) {
                            cr_expect_eq(out_len[i], step, "%s screen %d frozen %d: sentence %d ends at %d, not %d",
                                         kinds[ki], screen, frozen, i, out_len[i], step);
                            done[i] = true;
                            continue;
                        }
                        cr_expect(step < out_len[i] && out[i * MAXLEN + step] == best[i],
                                  "%s screen %d frozen %d: sentence %d step %d: greedy %d, the logits' argmax %d", kinds[ki],
                                  screen, frozen, i, step, step < out_len[i] ? out[i * MAXLEN + step] : -1, best[i]);
                        tok[i] = best[i];
                    }
                    model_decode_settle(&t, &m, &ds, step);
                }
                cr_expect_gt(picks, NB * 3, "%s: too few picks compared (%d)", kinds[ki], picks);
                tape_free(&t);
                batch_free(&b);
                dataset_free(&d);
                model_free(&m);
            }
}

/* An int8 tape's greedy pick (op_linear_int8_argmax: its own logits, never written) against
 * the same step's int8 logits and model_argmax_rows, on two decoding states fed the same
 * tokens, for the RNN kinds and both Transformers: the same pick at every step. */
Test(greedy, int8_pick_equals_argmax_of_its_logits) {
    const char *kinds[] = {"scaled_dot", "dot", "lstm-luong", "transformer-post", "transformer-pre"};
    for (int ki = 0; ki < 5; ki++) {
        Seq2Seq m;
        if (!strcmp(kinds[ki], "lstm-luong")) make_rnn(&m, "additive", 1.5f, LSTM_LUONG);
        else make_model(&m, kinds[ki], 0.5f);
        for (size_t k = 0; k < m.out.w->size; k++) m.out.w->data[k] *= 8.0f; /* picks that vary by row and step */
        params_freeze(&m.params, false);
        Dataset d;
        Batch b;
        make_batch(&d, &b);
        Tape t1, t2;
        tape_init(&t1, 1 << 20);
        tape_init(&t2, 1 << 20);
        t1.eng.precision = t2.eng.precision = PRECISION_INT8;
        t1.grad_enabled = t1.training = t2.grad_enabled = t2.training = false;
        DecodeState d1, d2;
        model_decode_start(&t1, &m, &b, 1, MAXLEN, &d1);
        model_decode_start(&t2, &m, &b, 1, MAXLEN, &d2);
        int32_t tok[NB], got[NB], want[NB];
        for (int i = 0; i < NB; i++) tok[i] = TOK_SOS;
        int differ = 0, seen[VT] = {0}, kinds_seen = 0;
        for (int step = 0; step < MAXLEN; step++) {
            model_decode_step_pick(&t1, &m, &d1, tok, NULL, got);
            Tensor *lg = model_decode_step(&t2, &m, &d2, tok, NULL);
            model_argmax_rows(lg, NB, want);
            for (int i = 0; i < NB; i++) {
                differ += got[i] != want[i];
                kinds_seen += !seen[want[i]]++;
                tok[i] = want[i];
            }
            model_decode_settle(&t1, &m, &d1, step);
            model_decode_settle(&t2, &m, &d2, step);
        }
        cr_expect_eq(differ, 0, "%s: %d of %d picks differ from the int8 logits' argmax", kinds[ki], differ, NB * MAXLEN);
        cr_expect_geq(kinds_seen, 3, "%s: only %d different tokens picked: too little compared", kinds[ki], kinds_seen);
        tape_free(&t1);
        tape_free(&t2);
        batch_free(&b);
        dataset_free(&d);
        model_free(&m);
    }
}
