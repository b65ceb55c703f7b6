/* test_beam.h — what the decoding suites (test_beam.c, test_greedy.c) share: small random
 * models of each family and a batch of random sources. */
#ifndef S2S_TEST_BEAM_H
#define S2S_TEST_BEAM_H

#include "test_util.h"
#include "s2s/gemm.h"
#include "s2s/model.h"
#include "../src/model/model_internal.h" /* beam_top_tokens */

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int omp_get_max_threads(void);

enum { NB = 12, VS = 9, VT = 11, MAXLEN = 12 };

/* A small Transformer (model.type): "transformer-post" (sinusoidal positions) or
 * "transformer-pre" (pre-norm, learned positions, GELU). */
static inline void make_transformer_heads(Seq2Seq *m, bool pre, uint64_t seed, float eos_bias, int heads) {
    Config c;
    config_defaults(&c);
    tu_config_set(&c, "model.type=transformer");
    if (pre) {
        tu_config_set(&c, "model.norm=pre");
        tu_config_set(&c, "model.positions=learned");
        tu_config_set(&c, "model.activation=gelu");
    }
    c.model.d_model = 8;
    c.model.heads = heads;
    c.model.ff = 16;
    c.model.layers = 2;
    c.model.max_positions = 32;
    c.model.init_range = 1.0f; /* the generator's: outputs that depend on the input */
    S2sError err;
    cr_assert_eq(model_init(m, &c.model, VS, VT, &err), S2S_OK, "%s", err.msg);
    Rng r;
    rng_init(&r, seed, RNG_STREAM_INIT);
    model_init_weights(m, &r);
    m->out.b->data[TOK_EOS] += eos_bias;
}

static inline void make_transformer(Seq2Seq *m, bool pre, uint64_t seed, float eos_bias) {
    make_transformer_heads(m, pre, seed, eos_bias, 2);
}

/* An RNN model of the attention kind given: a bidirectional GRU (concat, or Luong for dot),
 * or LSTM_LUONG: an LSTM with the Luong combination s~ = tanh(W_c [c; s]). */
enum { GRU_DEFAULT, LSTM_LUONG };

static inline void make_rnn(Seq2Seq *m, const char *attention, float range, int kind) {
    Config c;
    config_defaults(&c);
    bool dot = !strcmp(attention, "dot"); /* dot needs decoder_hidden = 2 x encoder_hidden */
    c.model = (ConfigModel){.cell = kind == LSTM_LUONG ? MODEL_CELL_LSTM : MODEL_CELL_GRU, .bidirectional = true, .layers = 1,
                            .embedding_type = EMBEDDING_LEARNED, .embedding = 8, .encoder_hidden = dot ? 5 : 8,
                            .decoder_hidden = 10, .kq = 6,
                            .combine = dot || kind == LSTM_LUONG ? COMBINE_LUONG : COMBINE_CONCAT, .init_range = range};
    char set[64];
    snprintf(set, sizeof set, "attention=%s", attention);
    tu_config_set(&c, set);
    c.model.heads = 2;
    S2sError err;
    cr_assert_eq(model_init(m, &c.model, VS, VT, &err), S2S_OK, "%s", err.msg);
    Rng r;
    rng_init(&r, 17, RNG_STREAM_INIT);
    model_init_weights(m, &r);
}

static inline void make_model(Seq2Seq *m, const char *attention, float range) {
    if (!strncmp(attention, "transformer", 11)) make_transformer(m, !strcmp(attention, "transformer-pre"), 17, 0.0f);
    else make_rnn(m, attention, range, GRU_DEFAULT);
}

/* n random sources over the source vocabulary (lengths 2..7), targets <sos> <eos>. */
static inline void make_batch_n(Dataset *d, Batch *b, int n, uint64_t seed) {
    dataset_init(d);
    Rng r;
    rng_init(&r, seed, RNG_STREAM_DATA);
    int *idx = malloc((size_t)n * sizeof *idx);
    for (int i = 0; i < n; i++) {
        int32_t src[8], trg[2] = {TOK_SOS, TOK_EOS};
        int len = 2 + (int)rng_below(&r, 6);
        for (int k = 0; k < len; k++) src[k] = TOK_SPECIALS + (int32_t)rng_below(&r, VS - TOK_SPECIALS);
        dataset_add(d, src, len, trg, 2);
        idx[i] = i;
    }
    batch_init(b);
    batch_fill(b, d, idx, n);
    free(idx);
}

static inline void make_batch(Dataset *d, Batch *b) { make_batch_n(d, b, NB, 5); }

#endif
