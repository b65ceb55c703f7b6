/* rnn_model.c — the RNN family (model.type rnn): embedding → (dropout) → RNN encoder over the
 * real tokens; a bridge to the decoder's start (bidirectional: ReLU(fc([h_fwd_last ;
 * h_bwd_first])) per layer, the LSTM cell at 0; unidirectional: the encoder's final state);
 * the decoder RNN over the whole target (no input feeding), attention over all steps, and the
 * output layer over [context ; state] (concat) or tanh(W_c [context ; state]) (luong).
 * PyTorch's names: encoder.*, decoder.* (tests/golden/README.md). */
#include "model_internal.h"

#include <string.h>

/* The family's own layers (m->parts): the encoder, the decoder and what joins them. */
typedef struct RnnParts {
    Rnn enc_rnn, dec_rnn;
    Linear bridge;            /* bidirectional only: (Hd, 2·He) */
    Attention attn;
    Linear w_c;               /* luong only: (Hd, D + Hd), no bias */
} RnnParts;

/* Its decoding state (ds->fam). */
typedef struct RnnDecodeState {
    Tensor *h[RNN_MAX_LAYERS];    /* (N, Hd) */
    Tensor *c[RNN_MAX_LAYERS];    /* LSTM cells, or NULL */
    AttnCache cache;              /* the attention's projections of enc, made on the first step */
    Tensor *keep[2][2][RNN_MAX_LAYERS]; /* [slot][h/c][layer]: the state kept across rewinds */
} RnnDecodeState;

static RnnParts *parts(const Seq2Seq *m) { return m->parts; }
static RnnDecodeState *state(const DecodeState *ds) { return ds->fam; }

static S2sStatus rnn_check_config(const ConfigModel *c, const char *origin, S2sError *err) {
    const AttnVariant *v = attn_variant(c->attention);
    int enc_dim = (c->bidirectional ? 2 : 1) * c->encoder_hidden;
    if (v->needs_same_dim && enc_dim != c->decoder_hidden)
        return s2s_fail(err, S2S_ERR_CONFIG,
                        "%s: model.attention: \"%s\" scores h . enc_t, so decoder_hidden (%d) must equal the encoder "
                        "output size (%d = %s%d); use scaled_dot or general, or change the sizes",
                        origin, ATTN_KIND_NAMES[c->attention], c->decoder_hidden, enc_dim, c->bidirectional ? "2 x " : "", c->encoder_hidden);
    AttnWidths w = attn_widths(v, c->decoder_hidden, enc_dim, c->kq, c->heads);
    if (w.heads > 1 && c->decoder_hidden % w.heads != 0)
        return s2s_fail(err, S2S_ERR_CONFIG,
                        "%s: model.heads: %s splits decoder_hidden (%d) into heads of equal width, so heads (%d) "
                        "must divide it",
                        origin, ATTN_KIND_NAMES[c->attention], c->decoder_hidden, w.heads);
    if (c->tie_embeddings != TIE_NONE) {
        const char *tie = TIE_NAMES[c->tie_embeddings];
        if (c->embedding_type != EMBEDDING_LEARNED)
            return s2s_fail(err, S2S_ERR_CONFIG, "%s: model.tie_embeddings: \"%s\" ties learned embeddings; one-hot ones are "
                            "fixed", origin, tie);
        int rows = c->combine == COMBINE_LUONG ? c->decoder_hidden : c->decoder_hidden + w.ctx;
        if (c->combine != COMBINE_LUONG || c->embedding != c->decoder_hidden)
            return s2s_fail(err, S2S_ERR_CONFIG,
                            "%s: model.tie_embeddings: \"%s\" makes the output layer's weight the embedding, so its rows "
                            "(%d wide: %s) must be as wide as the embedding (%d); use combine \"luong\" with embedding = "
                            "decoder_hidden",
                            origin, tie, rows, c->combine == COMBINE_LUONG ? "decoder_hidden" : "context + decoder_hidden with "
                            "combine concat", c->embedding);
    }
    if (!c->bidirectional && c->encoder_hidden != c->decoder_hidden)
        return s2s_fail(err, S2S_ERR_CONFIG,
                        "%s: model.decoder_hidden: a unidirectional encoder hands its final state to the decoder, so "
                        "decoder_hidden (%d) must equal encoder_hidden (%d)",
                        origin, c->decoder_hidden, c->encoder_hidden);
    return S2S_OK;
}

static bool is_luong(const Seq2Seq *m) { return m->cfg.combine == COMBINE_LUONG; }
static bool is_onehot(const ConfigModel *c) { return c->embedding_type == EMBEDDING_ONEHOT; }

static CellKind cell_kind(ModelCell c) {
    switch (c) {
    case MODEL_CELL_GRU: return CELL_GRU;
    case MODEL_CELL_LSTM: return CELL_LSTM;
    }
    S2S_ASSERT_MSG(false, "model.cell %d is none of the config's", (int)c);
    return CELL_GRU;
}

static void rnn_declare(Seq2Seq *m) {
    const ConfigModel *cfg = &m->cfg;
    RnnParts *r = parts(m);
    int src_vocab = m->src_vocab, trg_vocab = m->trg_vocab;
    CellKind cell = cell_kind(cfg->cell);
    int dirs = cfg->bidirectional ? 2 : 1, Hd = cfg->decoder_hidden;
    m->enc_dim = dirs * cfg->encoder_hidden;
    bool onehot = is_onehot(cfg);
    int Es = onehot ? src_vocab : cfg->embedding, Et = onehot ? trg_vocab : cfg->embedding;
    ParamStore *ps = &m->params;
    if (cfg->tie_embeddings != TIE_ALL) embedding_init(&m->enc_emb, ps, "encoder.embedding", src_vocab, Es);
    rnn_init(&r->enc_rnn, ps, "encoder.rnn", cell, Es, cfg->encoder_hidden, cfg->layers, cfg->bidirectional, false);
    if (cfg->bidirectional) linear_init(&r->bridge, ps, "encoder.fc", m->enc_dim, Hd, true);
    if (cfg->tie_embeddings == TIE_NONE) embedding_init(&m->dec_emb, ps, "decoder.embedding", trg_vocab, Et);
    rnn_init(&r->dec_rnn, ps, "decoder.rnn", cell, Et, Hd, cfg->layers, false, cfg->layers == 1);
    attn_init(&r->attn, attn_variant(cfg->attention), ps, "decoder.attention", Hd, m->enc_dim, cfg->kq, cfg->heads);
    int C = r->attn.ctx_dim;
    if (is_luong(m)) {
        linear_init(&r->w_c, ps, "decoder.W_c", C + Hd, Hd, false);
        linear_init(&m->out, ps, "decoder.out", Hd, trg_vocab, true);
    } else {
        linear_init(&m->out, ps, "decoder.out", C + Hd, trg_vocab, true);
    }
    model_tie(m);
}

/* Uniform in [-init_range, init_range]; one-hot embeddings become the identity. */
static void rnn_init_weights(Seq2Seq *m, Rng *rng) {
    params_init_uniform(&m->params, rng, m->cfg.init_range);
    if (is_onehot(&m->cfg)) {
        Tensor *e[2] = {m->enc_emb.w, m->dec_emb.w};
        for (int k = 0; k < 2; k++) {
            tensor_fill(e[k], 0.0f);
            float *ed = tensor_write(e[k]);
            for (int i = 0; i < e[k]->shape[0] && i < e[k]->shape[1]; i++) ed[(size_t)i * e[k]->shape[1] + i] = 1.0f;
        }
    }
}

/* Arena bytes per step: floats per feature, fitted to the measured peaks of 20 shapes (GRU
 * and LSTM, 1-3 layers, every attention, vocabularies 8-11,800, B 32-128, S and T 30-402;
 * the fit is within ±11 % of each), times 1.3. The features are the step's big tensors. */
static double rnn_step_bytes(const ConfigModel *cfg, int src_vocab, int trg_vocab, ModelStepKind kind, int B, int S, int T) {
    static const double COEF[3][8] = {
        /* embeddings, encoder gates, encoder outputs, decoder gates, output-layer inputs, logits, attention, keys */
        [MODEL_STEP_TRAIN] = {3.84, 2.56, 5.30, 5.20, 4.79, 1.00, 1.45, 4.55},
        [MODEL_STEP_EVAL] = {1.11, 3.14, 0.00, 4.35, 0.98, 0.94, 1.22, 2.14},
        [MODEL_STEP_GREEDY] = {0.00, 3.39, 0.00, 0.00, 0.00, 0.10, 0.00, 0.19},
    };
    bool onehot = is_onehot(cfg);
    double Es = onehot ? src_vocab : cfg->embedding, Et = onehot ? trg_vocab : cfg->embedding;
    double G = cell_kind(cfg->cell) == CELL_GRU ? 3 : 4, dirs = cfg->bidirectional ? 2 : 1, L = cfg->layers;
    double He = cfg->encoder_hidden, Hd = cfg->decoder_hidden, D = dirs * He;
    bool weights = attn_variant(cfg->attention)->has_weights;
    AttnWidths w = attn_widths(attn_variant(cfg->attention), (int)Hd, (int)D, cfg->kq, cfg->heads);
    double b = B, s = S, t = T;
    double K = w.keys, C = w.ctx, heads = w.heads; /* projected keys; the context's size; score maps */
    double x[8] = {b * (s * Es + t * Et), b * s * dirs * L * G * He, b * s * D * L, b * t * L * G * Hd, b * t * (C + Hd),
                   b * (t - 1) * trg_vocab, weights ? b * t * s * heads : 0, b * (s + t) * K};
    double floats = 0;
    for (int i = 0; i < 8; i++) floats += COEF[kind][i] * x[i];
    /* training steps have since freed dead values in backward (tape.h: free_values) and keep
     * less of an RNN's: their peaks fell by 10-30 % (the four shapes of the test now peak at 2.5-2.9x less than this) */
    double margin = kind == MODEL_STEP_TRAIN ? 1.3 * 0.8 : 1.3;
    return margin * 4.0 * floats + (1 << 20);
}

/* Encoder states and the decoder's initial state, one per decoder layer. */
typedef struct Encoded {
    Tensor *enc;                  /* (S, B, D) */
    Tensor *h0[RNN_MAX_LAYERS];   /* (B, Hd) */
    Tensor *c0[RNN_MAX_LAYERS];   /* LSTM, or NULL (zeros) */
} Encoded;

static Encoded encode(Tape *t, Seq2Seq *m, const Batch *b, Rng *drop) {
    int S = b->S, B = b->B;
    Tensor *x = embedding_forward(t, &m->enc_emb, b->src, S * B);
    if (drop) x = op_dropout(t, x, m->cfg.dropout, drop);
    x = tape_reshape3(t, x, S, B, tensor_cols(x));
    RnnOutput r = rnn_forward(t, &parts(m)->enc_rnn, x, b->src_len, NULL, NULL);
    Encoded e;
    memset(&e, 0, sizeof e);
    e.enc = r.out;
    for (int l = 0; l < m->cfg.layers; l++) {
        if (m->cfg.bidirectional) {
            e.h0[l] = op_relu(t, linear_forward(t, &parts(m)->bridge, op_concat(t, r.h_last[l][0], r.h_last[l][1])));
        } else {
            e.h0[l] = r.h_last[l][0];
            e.c0[l] = r.c_last[l][0];
        }
    }
    return e;
}

/* the output layer's input (T, B, D + Hd) from context (T, B, D) and decoder states (T, B, Hd) */
static Tensor *output_features(Tape *t, Seq2Seq *m, Tensor *ctx, Tensor *dec) {
    Tensor *both = op_concat(t, ctx, dec);
    return is_luong(m) ? op_tanh(t, linear_forward(t, &parts(m)->w_c, both)) : both;
}

static ModelOutput rnn_forward_batch(Tape *t, Seq2Seq *m, const Batch *b, Rng *drop, bool all_positions,
                                     const ModelLoss *loss) {
    S2S_ASSERT(b->T >= 2);
    int B = b->B, T1 = b->T - 1, V = m->trg_vocab;
    if (!t->training || m->cfg.dropout == 0.0f) drop = NULL;
    Encoded e = encode(t, m, b, drop);
    /* decoder inputs trg[0 .. T-2], targets trg[1 .. T-1]; a row's last input is at len-2 */
    Tensor *y = embedding_forward(t, &m->dec_emb, b->trg, T1 * B);
    if (drop) y = op_dropout(t, y, m->cfg.dropout, drop);
    y = tape_reshape3(t, y, T1, B, tensor_cols(y));
    /* every row runs all T-1 steps, as PyTorch's loop does: the steps past a row's <eos>
     * cost the same inside the batched GEMMs and their targets are ignored by the loss */
    RnnOutput d = rnn_forward(t, &parts(m)->dec_rnn, y, NULL, e.h0, m->cfg.bidirectional ? NULL : e.c0);
    ModelOutput o;
    memset(&o, 0, sizeof o);
    Tensor *ctx = attn_forward(t, &parts(m)->attn, d.out, e.enc, b->src_mask, &o.attention, NULL);
    if (all_positions) {
        o.logits = tape_reshape2(t, linear_forward(t, &m->out, output_features(t, m, ctx, d.out)), T1 * B, V);
        o.targets = b->trg + B;
        o.loss = op_cross_entropy_consume(t, o.logits, o.targets, TOK_PAD, model_smoothing(t, loss), &o.nll);
        return o;
    }
    /* the output layer (most of the step's work) only at real targets, whose rows are
     * picked straight from the context and the decoder states (no whole concatenation) */
    o.rows = model_target_rows(t, b, &o.n_tokens);
    Tensor *both = op_concat_rows(t, tape_reshape2(t, ctx, T1 * B, tensor_cols(ctx)),
                                  tape_reshape2(t, d.out, T1 * B, tensor_cols(d.out)), o.rows, o.n_tokens);
    if (is_luong(m)) both = op_tanh(t, linear_forward(t, &parts(m)->w_c, both));
    model_loss(t, m, b, both, &o, loss);
    return o;
}

/* ---- decoding: the state is each layer's h (and an LSTM's c) ---- */

static void alloc_keep(Tape *t, const Seq2Seq *m, DecodeState *ds) {
    for (int k = 0; k < 2; k++)
        for (int l = 0; l < m->cfg.layers; l++) {
            state(ds)->keep[k][0][l] = tape_tensor2(t, ds->N, state(ds)->h[l]->shape[1]);
            /* an LSTM's cell state: also when it starts as zeros (NULL: a bidirectional
             * encoder gives none), as every step after the first has one */
            state(ds)->keep[k][1][l] = m->cfg.cell == MODEL_CELL_LSTM ? tape_tensor2(t, ds->N, m->cfg.decoder_hidden) : NULL;
        }
}

static void rnn_decode_start(Tape *t, Seq2Seq *m, const Batch *b, int K, int max_steps, DecodeState *ds) {
    (void)max_steps; /* the state does not grow with the steps */
    int B = b->B, S = b->S, N = B * K, L = m->cfg.layers;
    Encoded e = encode(t, m, b, NULL);
    ds->N = N;
    ds->S = S;
    ds->group = K; /* the K hypotheses of a sentence read one copy of its states */
    ds->enc = e.enc;
    ds->mask = model_decode_mask(t, b);
    RnnDecodeState *r = state(ds);
    if (K == 1) {
        for (int l = 0; l < L; l++) {
            r->h[l] = e.h0[l];
            r->c[l] = m->cfg.bidirectional ? NULL : e.c0[l];
        }
        alloc_keep(t, m, ds);
        return;
    }
    /* each sentence's initial state repeated for its K hypotheses */
    int32_t *rep = arena_alloc(&t->arena, (size_t)N * sizeof *rep);
    for (int i = 0; i < N; i++) rep[i] = i / K;
    for (int l = 0; l < L; l++) {
        r->h[l] = op_gather_rows(t, e.h0[l], rep, N);
        r->c[l] = !m->cfg.bidirectional && e.c0[l] ? op_gather_rows(t, e.c0[l], rep, N) : NULL;
    }
    alloc_keep(t, m, ds);
}

static void rnn_decode_settle(Seq2Seq *m, DecodeState *ds, int step) {
    RnnDecodeState *r = state(ds);
    Tensor **h = r->keep[step % 2][0], **c = r->keep[step % 2][1];
    for (int l = 0; l < m->cfg.layers; l++) {
        tensor_copy(h[l], r->h[l]);
        if (c[l]) tensor_copy(c[l], r->c[l]);
        r->h[l] = h[l];
        r->c[l] = c[l];
    }
}

/* Beam search's attention (rows b·G + k, G = ds->group): the G hypotheses of sentence b are
 * G queries of one sentence, as a training step's T decoder positions are, so the products
 * read each sentence's states once (small GEMMs of G rows, not G one-row products over G
 * copies). The queries go in as (G, B, H), the context comes back to the rows' order. */
static Tensor *grouped_attention(Tape *t, Seq2Seq *m, DecodeState *ds, Tensor *dec, AttnWeights *w) {
    int N = ds->N, G = ds->group, B = N / G, H = tensor_cols(dec);
    Tensor *q = tape_reshape3(t, op_transpose_rows(t, tape_reshape2(t, dec, N, H), B, G), G, B, H);
    Tensor *ctx = attn_forward_heads(t, &parts(m)->attn, q, ds->enc, ds->mask, w, &state(ds)->cache); /* (G, B, D) */
    int D = tensor_cols(ctx);
    /* the weights (B, G, S) are already in the rows' order: (N, 1, S) */
    if (w->mean) w->mean = tape_reshape3(t, w->mean, N, 1, ds->S);
    w->heads = NULL; /* (B·heads, G, S): not the (N·heads, 1, S) a caller would expect */
    return tape_reshape3(t, op_transpose_rows(t, tape_reshape2(t, ctx, N, D), G, B), 1, N, D);
}

static Tensor *rnn_decode_features(Tape *t, Seq2Seq *m, DecodeState *ds, const int32_t *tokens, AttnWeights *w) {
    int N = ds->N, L = m->cfg.layers;
    RnnDecodeState *r = state(ds);
    Tensor *x = tape_reshape3(t, embedding_forward(t, &m->dec_emb, tokens, N), 1, N, tensor_cols(m->dec_emb.w));
    RnnOutput d = rnn_forward(t, &parts(m)->dec_rnn, x, NULL, r->h, r->c);
    for (int l = 0; l < L; l++) {
        r->h[l] = d.h_last[l][0];
        r->c[l] = d.c_last[l][0];
    }
    Tensor *ctx = ds->group == 1 ? attn_forward_heads(t, &parts(m)->attn, d.out, ds->enc, ds->mask, w, &r->cache)
                                 : grouped_attention(t, m, ds, d.out, w);
    Tensor *f = output_features(t, m, ctx, d.out); /* (1, N, D) */
    return tape_reshape2(t, f, N, tensor_cols(f));
}

static void rnn_decode_reorder(Tape *t, Seq2Seq *m, DecodeState *ds, const int32_t *parent) {
    RnnDecodeState *r = state(ds);
    for (int l = 0; l < m->cfg.layers; l++) {
        r->h[l] = op_gather_rows(t, r->h[l], parent, ds->N);
        if (r->c[l]) r->c[l] = op_gather_rows(t, r->c[l], parent, ds->N);
    }
}

static void keep_rows_2d(Tensor *x, const int32_t *rows, int n) {
    int D = x->shape[1];
    tensor_keep_rows(x, rows, n);
    x->shape[0] = n;
    x->size = (size_t)n * D;
}

static void rnn_decode_keep_rows(Seq2Seq *m, DecodeState *ds, const int32_t *rows, int n, const int32_t *sent, int ns) {
    RnnDecodeState *r = state(ds);
    tensor_keep_rows_tm(ds->enc, ds->enc->shape[0], sent, ns); /* every step attends over it */
    if (r->cache.keys) tensor_keep_rows_tm(r->cache.keys, r->cache.keys->shape[0], sent, ns);
    if (r->cache.values) tensor_keep_rows_tm(r->cache.values, r->cache.values->shape[0], sent, ns);
    for (int l = 0; l < m->cfg.layers; l++) {
        keep_rows_2d(r->h[l], rows, n);
        if (r->c[l]) keep_rows_2d(r->c[l], rows, n);
        for (int k = 0; k < 2; k++) /* the buffers later steps settle into: n rows now */
            for (int j = 0; j < 2; j++) {
                Tensor *x = r->keep[k][j][l];
                if (x && x != r->h[l] && x != r->c[l]) {
                    x->shape[0] = n;
                    x->size = (size_t)n * x->shape[1];
                }
            }
    }
}

static bool rnn_has_attention(const Seq2Seq *m) { return parts(m)->attn.v->has_weights; }
static int rnn_heads(const Seq2Seq *m) { return parts(m)->attn.heads; }
static const char *rnn_attention_name(const Seq2Seq *m) { return ATTN_KIND_NAMES[m->cfg.attention]; }

static const char *rnn_label(const ConfigModel *c) { return ATTN_KIND_NAMES[c->attention]; }

const ModelFamily MODEL_FAMILY_RNN = {
    .name = "rnn",
    .parts_size = sizeof(RnnParts),
    .decode_size = sizeof(RnnDecodeState),
    .decode_batch = 64,
    .check_config = rnn_check_config,
    .declare = rnn_declare,
    .init_weights = rnn_init_weights,
    .step_bytes = rnn_step_bytes,
    .forward = rnn_forward_batch,
    .emb_names = {"decoder.embedding.weight", "encoder.embedding.weight"},
    .decode_start = rnn_decode_start,
    .decode_features = rnn_decode_features,
    .decode_reorder = rnn_decode_reorder,
    .decode_settle = rnn_decode_settle,
    .decode_keep_rows = rnn_decode_keep_rows,
    .has_attention = rnn_has_attention,
    .heads = rnn_heads,
    .attention_name = rnn_attention_name,
    .label = rnn_label,
    .layer_counts = NULL, /* one attention, drawn whole */
    .layer_maps = NULL,
};
