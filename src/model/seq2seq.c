/* seq2seq.c — encoder, bridge, decoder, output layer; greedy decoding. */
#include "model_internal.h"
#include "s2s/gemm.h"
#include "s2s/par.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool model_has_attention(const Seq2Seq *m) { return m->cfg.type == MODEL_TRANSFORMER || m->attn.v->has_weights; }

int model_heads(const Seq2Seq *m) { return m->cfg.type == MODEL_TRANSFORMER ? m->tf.heads : m->attn.heads; }

const char *model_attention_name(const Seq2Seq *m) {
    return m->cfg.type == MODEL_TRANSFORMER ? "transformer cross (last layer)" : ATTN_KIND_NAMES[m->cfg.attention];
}

S2sStatus model_check_config(const ConfigModel *c, const char *origin, S2sError *err) {
    if (c->type == MODEL_TRANSFORMER) return tfm_check_config(c, origin, err);
    const AttnVariant *v = attn_variant(c->attention);
    int enc_dim = (c->bidirectional ? 2 : 1) * c->encoder_hidden;
    if (v->needs_same_dim && enc_dim != c->decoder_hidden)
        return s2s_fail(err, S2S_ERR_CONFIG,
                        "%s: model.attention: \"%s\" scores h . enc_t, so decoder_hidden (%d) must equal the encoder "
                        "output size (%d = %s%d); use scaled_dot or general, or change the sizes",
                        origin, ATTN_KIND_NAMES[c->attention], c->decoder_hidden, enc_dim, c->bidirectional ? "2 x " : "", c->encoder_hidden);
    if (c->attention == ATTN_MULTIHEAD && c->decoder_hidden % c->heads != 0)
        return s2s_fail(err, S2S_ERR_CONFIG,
                        "%s: model.heads: multihead splits decoder_hidden (%d) into heads of equal width, so heads (%d) "
                        "must divide it",
                        origin, c->decoder_hidden, c->heads);
    if (c->tie_embeddings != TIE_NONE) {
        const char *tie = TIE_NAMES[c->tie_embeddings];
        if (c->embedding_type != EMBEDDING_LEARNED)
            return s2s_fail(err, S2S_ERR_CONFIG, "%s: model.tie_embeddings: \"%s\" ties learned embeddings; one-hot ones are "
                            "fixed", origin, tie);
        int rows = c->combine == COMBINE_LUONG ? c->decoder_hidden
                                               : c->decoder_hidden + (c->attention == ATTN_MULTIHEAD ? c->decoder_hidden : enc_dim);
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

S2sStatus model_init(Seq2Seq *m, const ConfigModel *cfg, int src_vocab, int trg_vocab, S2sError *err) {
    return model_init_limited(m, cfg, src_vocab, trg_vocab, 0, err);
}

/* Declares every parameter (names and shapes) without allocating them. */
static void declare(Seq2Seq *m, const ConfigModel *cfg, int src_vocab, int trg_vocab) {
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    m->src_vocab = src_vocab;
    m->trg_vocab = trg_vocab;
    if (cfg->type == MODEL_TRANSFORMER) {
        params_init(&m->params);
        tfm_declare(m);
        return;
    }
    CellKind cell = cell_kind(cfg->cell);
    int dirs = cfg->bidirectional ? 2 : 1, Hd = cfg->decoder_hidden;
    m->enc_dim = dirs * cfg->encoder_hidden;
    bool onehot = is_onehot(cfg);
    int Es = onehot ? src_vocab : cfg->embedding, Et = onehot ? trg_vocab : cfg->embedding;
    ParamStore *ps = &m->params;
    params_init(ps);
    if (cfg->tie_embeddings != TIE_ALL) embedding_init(&m->enc_emb, ps, "encoder.embedding", src_vocab, Es);
    rnn_init(&m->enc_rnn, ps, "encoder.rnn", cell, Es, cfg->encoder_hidden, cfg->layers, cfg->bidirectional, false);
    if (cfg->bidirectional) linear_init(&m->bridge, ps, "encoder.fc", m->enc_dim, Hd, true);
    if (cfg->tie_embeddings == TIE_NONE) embedding_init(&m->dec_emb, ps, "decoder.embedding", trg_vocab, Et);
    rnn_init(&m->dec_rnn, ps, "decoder.rnn", cell, Et, Hd, cfg->layers, false, cfg->layers == 1);
    attn_init(&m->attn, attn_variant(cfg->attention), ps, "decoder.attention", Hd, m->enc_dim, cfg->kq, cfg->heads);
    int C = m->attn.ctx_dim;
    if (is_luong(m)) {
        linear_init(&m->w_c, ps, "decoder.W_c", C + Hd, Hd, false);
        linear_init(&m->out, ps, "decoder.out", Hd, trg_vocab, true);
    } else {
        linear_init(&m->out, ps, "decoder.out", C + Hd, trg_vocab, true);
    }
    model_tie(m);
}

int model_tied_names(const ConfigModel *cfg, const char *names[2]) {
    bool tf = cfg->type == MODEL_TRANSFORMER;
    int n = 0;
    if (cfg->tie_embeddings != TIE_NONE) names[n++] = tf ? "trg_embed.weight" : "decoder.embedding.weight";
    if (cfg->tie_embeddings == TIE_ALL) names[n++] = tf ? "src_embed.weight" : "encoder.embedding.weight";
    return n;
}

void model_tie(Seq2Seq *m) {
    if (m->cfg.tie_embeddings != TIE_NONE) m->dec_emb.w = m->out.w;
    if (m->cfg.tie_embeddings == TIE_ALL) m->enc_emb.w = m->out.w;
}

S2sStatus model_tape_init(Tape *t, Precision precision, GemmLib gemm, int threads, const char *who, S2sError *err) {
    bool bf16 = false, openblas = false, int8 = false;
    switch (precision) {
    case PRECISION_FP32: break;
    case PRECISION_BF16: bf16 = true; break;
    case PRECISION_INT8: int8 = true; break;
    }
    switch (gemm) {
    case GEMM_LIB_ONEDNN: break;
    case GEMM_LIB_OPENBLAS: openblas = true; break;
    }
    S2sStatus st;
    if (bf16 && (st = gemm_bf16_check(who, err))) return st;
    gemm_set_threads(threads);
    tape_init(t, 1 << 20);
    t->bf16 = bf16;
    t->bf16_matmul = bf16 && gemm_cpu_has_amx(); /* AMX is reached through primitives only */
    t->openblas = openblas;
    t->int8 = int8;
    return S2S_OK;
}

size_t model_param_count(const ConfigModel *cfg, int src_vocab, int trg_vocab) {
    Seq2Seq m;
    declare(&m, cfg, src_vocab, trg_vocab);
    size_t n = params_numel(&m.params);
    model_free(&m);
    return n;
}

/* Arena bytes per step: floats per feature, fitted to the measured peaks of 20 shapes (GRU
 * and LSTM, 1-3 layers, every attention, vocabularies 8-11,800, B 32-128, S and T 30-402;
 * the fit is within ±11 % of each), times 1.3. The features are the step's big tensors. */
double model_step_bytes(const ConfigModel *cfg, int src_vocab, int trg_vocab, ModelStepKind kind, int B, int S, int T) {
    if (cfg->type == MODEL_TRANSFORMER) return tfm_step_bytes(cfg, trg_vocab, kind, B, S, T);
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
    double K = 0; /* projected keys */
    switch (cfg->attention) {
    case ATTN_DUMMY:
    case ATTN_MEANPOOL:
    case ATTN_DOT: break;
    case ATTN_SCALED_DOT:
    case ATTN_ADDITIVE: K = cfg->kq; break;
    case ATTN_GENERAL: K = Hd; break;
    case ATTN_MULTIHEAD: K = 2 * Hd; break; /* keys and values */
    }
    double b = B, s = S, t = T;
    bool multihead = cfg->attention == ATTN_MULTIHEAD;
    double C = multihead ? Hd : D, heads = multihead ? cfg->heads : 1; /* the context's size; score maps */
    double x[8] = {b * (s * Es + t * Et), b * s * dirs * L * G * He, b * s * D * L, b * t * L * G * Hd, b * t * (C + Hd),
                   b * (t - 1) * trg_vocab, weights ? b * t * s * heads : 0, b * (s + t) * K};
    double floats = 0;
    for (int i = 0; i < 8; i++) floats += COEF[kind][i] * x[i];
    /* training steps have since freed dead values in backward (tape.h: free_values) and keep
     * less of an RNN's: their peaks fell by 10-30 % (the four shapes of the test now peak at 2.5-2.9x less than this) */
    double margin = kind == MODEL_STEP_TRAIN ? 1.3 * 0.8 : 1.3;
    return margin * 4.0 * floats + (1 << 20);
}

S2sStatus model_init_limited(Seq2Seq *m, const ConfigModel *cfg, int src_vocab, int trg_vocab, size_t max_params,
                             S2sError *err) {
    S2sStatus st = model_check_config(cfg, "model", err);
    if (st) return st;
    if (cfg->tie_embeddings == TIE_ALL && src_vocab != trg_vocab)
        return s2s_fail(err, S2S_ERR_CONFIG,
                        "model.tie_embeddings: \"all\" makes one matrix of the source and target embeddings, so the "
                        "vocabularies must be one (they have %d and %d entries); use a joint subword model or \"decoder\"",
                        src_vocab, trg_vocab);
    declare(m, cfg, src_vocab, trg_vocab);
    ParamStore *ps = &m->params;
    bool onehot = is_onehot(cfg);
    if (max_params && params_numel(ps) > max_params) {
        size_t need = params_numel(ps);
        model_free(m);
        return s2s_fail(err, S2S_ERR_CORRUPT, "the config implies %zu weights, the file holds %zu", need, max_params);
    }
    if ((st = params_alloc(ps, err))) {
        model_free(m);
        return st;
    }
    if (onehot) { /* frozen: no gradient ever reaches them */
        m->enc_emb.w->requires_grad = false;
        m->dec_emb.w->requires_grad = false;
    }
    return S2S_OK;
}

void model_free(Seq2Seq *m) {
    params_free(&m->params);
    memset(m, 0, sizeof *m);
}

void model_init_weights(Seq2Seq *m, Rng *rng) {
    if (m->cfg.type == MODEL_TRANSFORMER) {
        tfm_init_weights(m, rng);
        return;
    }
    params_init_uniform(&m->params, rng, m->cfg.init_range);
    if (is_onehot(&m->cfg)) {
        Tensor *e[2] = {m->enc_emb.w, m->dec_emb.w};
        for (int k = 0; k < 2; k++) {
            memset(e[k]->data, 0, e[k]->size * sizeof(float));
            for (int i = 0; i < e[k]->shape[0] && i < e[k]->shape[1]; i++) e[k]->data[(size_t)i * e[k]->shape[1] + i] = 1.0f;
        }
    }
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
    RnnOutput r = rnn_forward(t, &m->enc_rnn, x, b->src_len, NULL, NULL);
    Encoded e;
    memset(&e, 0, sizeof e);
    e.enc = r.out;
    for (int l = 0; l < m->cfg.layers; l++) {
        if (m->cfg.bidirectional) {
            e.h0[l] = op_relu(t, linear_forward(t, &m->bridge, op_concat(t, r.h_last[l][0], r.h_last[l][1])));
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
    return is_luong(m) ? op_tanh(t, linear_forward(t, &m->w_c, both)) : both;
}

static ModelOutput forward(Tape *t, Seq2Seq *m, const Batch *b, Rng *drop, bool all_positions, const ModelLoss *loss) {
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
    RnnOutput d = rnn_forward(t, &m->dec_rnn, y, NULL, e.h0, m->cfg.bidirectional ? NULL : e.c0);
    ModelOutput o;
    memset(&o, 0, sizeof o);
    Tensor *ctx = attn_forward(t, &m->attn, d.out, e.enc, b->src_mask, &o.attention, NULL);
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
    if (is_luong(m)) both = op_tanh(t, linear_forward(t, &m->w_c, both));
    model_loss(t, m, b, both, &o, loss);
    return o;
}

int32_t *model_target_rows(Tape *t, const Batch *b, int *n_tokens) {
    int T1 = b->T - 1, B = b->B;
    const int32_t *targets = b->trg + B; /* time-major: row i+1 */
    int32_t *rows = arena_alloc(&t->arena, (size_t)T1 * B * sizeof *rows);
    *n_tokens = 0;
    for (int k = 0; k < T1 * B; k++)
        if (targets[k] != TOK_PAD) rows[(*n_tokens)++] = k;
    return rows;
}

float model_smoothing(const Tape *t, const ModelLoss *loss) { return t->grad_enabled && loss ? loss->label_smoothing : 0.0f; }

void model_loss(Tape *t, Seq2Seq *m, const Batch *b, Tensor *x, ModelOutput *o, const ModelLoss *loss) {
    const int32_t *targets = b->trg + b->B;
    int32_t *tg = arena_alloc(&t->arena, (size_t)(o->n_tokens ? o->n_tokens : 1) * sizeof *tg);
    for (int k = 0; k < o->n_tokens; k++) tg[k] = targets[o->rows[k]];
    o->targets = tg;
    float eps = model_smoothing(t, loss);
    if (loss && loss->chunk > 0 && t->grad_enabled) { /* training: never the whole logits (o.logits NULL) */
        o->loss = op_linear_xent(t, x, m->out.w, m->out.b, tg, TOK_PAD, loss->chunk, eps, &o->nll);
        return;
    }
    o->logits = linear_forward(t, &m->out, x);
    o->loss = op_cross_entropy_consume(t, o->logits, o->targets, TOK_PAD, eps, &o->nll); /* nothing reads logits after backward */
}

ModelOutput model_forward(Tape *t, Seq2Seq *m, const Batch *b, Rng *drop, const ModelLoss *loss) {
    return m->cfg.type == MODEL_TRANSFORMER ? tfm_forward(t, m, b, drop, false, loss) : forward(t, m, b, drop, false, loss);
}

ModelOutput model_forward_all(Tape *t, Seq2Seq *m, const Batch *b) {
    return m->cfg.type == MODEL_TRANSFORMER ? tfm_forward(t, m, b, NULL, true, NULL) : forward(t, m, b, NULL, true, NULL);
}

static void alloc_keep(Tape *t, const Seq2Seq *m, DecodeState *ds) {
    for (int k = 0; k < 2; k++)
        for (int l = 0; l < m->cfg.layers; l++) {
            ds->keep[k][0][l] = tape_tensor2(t, ds->N, ds->h[l]->shape[1]);
            /* an LSTM's cell state: also when it starts as zeros (NULL: a bidirectional
             * encoder gives none), as every step after the first has one */
            ds->keep[k][1][l] = m->cfg.cell == MODEL_CELL_LSTM ? tape_tensor2(t, ds->N, m->cfg.decoder_hidden) : NULL;
        }
}

void model_decode_start(Tape *t, Seq2Seq *m, const Batch *b, int K, int max_steps, DecodeState *ds) {
    memset(ds, 0, sizeof *ds);
    if (m->cfg.type == MODEL_TRANSFORMER) {
        tfm_decode_start(t, m, b, K, max_steps, ds);
        return;
    }
    int B = b->B, S = b->S, N = B * K, L = m->cfg.layers;
    Encoded e = encode(t, m, b, NULL);
    ds->N = N;
    ds->S = S;
    ds->group = K; /* the K hypotheses of a sentence read one copy of its states */
    ds->enc = e.enc;
    ds->mask = model_decode_mask(t, b);
    if (K == 1) {
        for (int l = 0; l < L; l++) {
            ds->h[l] = e.h0[l];
            ds->c[l] = m->cfg.bidirectional ? NULL : e.c0[l];
        }
        alloc_keep(t, m, ds);
        return;
    }
    /* each sentence's initial state repeated for its K hypotheses */
    int32_t *rep = arena_alloc(&t->arena, (size_t)N * sizeof *rep);
    for (int i = 0; i < N; i++) rep[i] = i / K;
    for (int l = 0; l < L; l++) {
        ds->h[l] = op_gather_rows(t, e.h0[l], rep, N);
        ds->c[l] = !m->cfg.bidirectional && e.c0[l] ? op_gather_rows(t, e.c0[l], rep, N) : NULL;
    }
    alloc_keep(t, m, ds);
}

uint8_t *model_decode_mask(Tape *t, const Batch *b) {
    uint8_t *mask = arena_alloc(&t->arena, (size_t)b->B * b->S);
    memcpy(mask, b->src_mask, (size_t)b->B * b->S);
    return mask;
}

void model_decode_settle(Tape *t, Seq2Seq *m, DecodeState *ds, int step) {
    if (step == 0) { /* the first step's allocations (the cached keys) stay */
        ds->mark = arena_mark(&t->arena);
        return;
    }
    if (m->cfg.type == MODEL_TRANSFORMER) { /* the caches were made before the mark */
        arena_rewind(&t->arena, ds->mark);
        return;
    }
    Tensor **h = ds->keep[step % 2][0], **c = ds->keep[step % 2][1];
    for (int l = 0; l < m->cfg.layers; l++) {
        memcpy(h[l]->data, ds->h[l]->data, h[l]->size * sizeof(float));
        if (c[l]) memcpy(c[l]->data, ds->c[l]->data, c[l]->size * sizeof(float));
        ds->h[l] = h[l];
        ds->c[l] = c[l];
    }
    arena_rewind(&t->arena, ds->mark);
}

Tensor *model_decode_step(Tape *t, Seq2Seq *m, DecodeState *ds, const int32_t *tokens, Tensor **weights) {
    AttnWeights w = {0};
    Tensor *logits = model_decode_step_heads(t, m, ds, tokens, &w);
    if (weights) *weights = w.mean;
    return logits;
}

/* Beam search's attention (rows b·G + k, G = ds->group): the G hypotheses of sentence b are
 * G queries of one sentence, as a training step's T decoder positions are, so the products
 * read each sentence's states once (small GEMMs of G rows, not G one-row products over G
 * copies). The queries go in as (G, B, H), the context comes back to the rows' order. */
static Tensor *grouped_attention(Tape *t, Seq2Seq *m, DecodeState *ds, Tensor *dec, AttnWeights *w) {
    int N = ds->N, G = ds->group, B = N / G, H = tensor_cols(dec);
    Tensor *q = tape_reshape3(t, op_transpose_rows(t, tape_reshape2(t, dec, N, H), B, G), G, B, H);
    Tensor *ctx = attn_forward_heads(t, &m->attn, q, ds->enc, ds->mask, w, &ds->cache); /* (G, B, D) */
    int D = tensor_cols(ctx);
    /* the weights (B, G, S) are already in the rows' order: (N, 1, S) */
    if (w->mean) w->mean = tape_reshape3(t, w->mean, N, 1, ds->S);
    w->heads = NULL; /* (B·heads, G, S): not the (N·heads, 1, S) a caller would expect */
    return tape_reshape3(t, op_transpose_rows(t, tape_reshape2(t, ctx, N, D), G, B), 1, N, D);
}

/* A step's input to the output layer (N, D). */
static Tensor *decode_features(Tape *t, Seq2Seq *m, DecodeState *ds, const int32_t *tokens, AttnWeights *w) {
    if (m->cfg.type == MODEL_TRANSFORMER) return tfm_decode_features(t, m, ds, tokens, w);
    int N = ds->N, L = m->cfg.layers;
    Tensor *x = tape_reshape3(t, embedding_forward(t, &m->dec_emb, tokens, N), 1, N, tensor_cols(m->dec_emb.w));
    RnnOutput d = rnn_forward(t, &m->dec_rnn, x, NULL, ds->h, ds->c);
    for (int l = 0; l < L; l++) {
        ds->h[l] = d.h_last[l][0];
        ds->c[l] = d.c_last[l][0];
    }
    Tensor *ctx = ds->group == 1 ? attn_forward_heads(t, &m->attn, d.out, ds->enc, ds->mask, w, &ds->cache)
                                 : grouped_attention(t, m, ds, d.out, w);
    Tensor *f = output_features(t, m, ctx, d.out); /* (1, N, D) */
    return tape_reshape2(t, f, N, tensor_cols(f));
}

Tensor *model_decode_step_heads(Tape *t, Seq2Seq *m, DecodeState *ds, const int32_t *tokens, AttnWeights *w) {
    return linear_forward(t, &m->out, decode_features(t, m, ds, tokens, w)); /* (N, V) */
}

void model_decode_step_pick(Tape *t, Seq2Seq *m, DecodeState *ds, const int32_t *tokens, AttnWeights *w,
                            int32_t *best) {
    AttnWeights none = {0};
    Tensor *x = decode_features(t, m, ds, tokens, w ? w : &none);
    int V = m->trg_vocab;
    uint8_t *allowed = arena_alloc(&t->arena, (size_t)V);
    memset(allowed, 1, (size_t)V);
    allowed[TOK_PAD] = allowed[TOK_SOS] = 0; /* not outputs (model_argmax_rows) */
    if (t->int8) { /* its own logits are the ones to pick from */
        if (!op_linear_int8_argmax(t, x, m->out.w, m->out.b, allowed, best))
            model_argmax_rows(linear_forward(t, &m->out, x), ds->N, best);
        return;
    }
    op_linear_argmax(t, x, m->out.w, m->out.b, allowed, best);
}

void model_decode_reorder(Tape *t, Seq2Seq *m, DecodeState *ds, const int32_t *parent) {
    if (m->cfg.type == MODEL_TRANSFORMER) { /* in place: the state is the cached keys and values */
        transformer_cache_reorder(&ds->tf, parent);
        return;
    }
    for (int l = 0; l < m->cfg.layers; l++) {
        ds->h[l] = op_gather_rows(t, ds->h[l], parent, ds->N);
        if (ds->c[l]) ds->c[l] = op_gather_rows(t, ds->c[l], parent, ds->N);
    }
}

static void keep_rows_2d(Tensor *x, const int32_t *rows, int n) {
    int D = x->shape[1];
    for (int i = 0; i < n; i++) memmove(x->data + (size_t)i * D, x->data + (size_t)rows[i] * D, (size_t)D * sizeof(float));
    x->shape[0] = n;
    x->size = (size_t)n * D;
}

void model_decode_keep_rows(Seq2Seq *m, DecodeState *ds, const int32_t *rows, int n) {
    int N = ds->N, S = ds->S, G = ds->group;
    S2S_ASSERT(n > 0 && n <= N && n % G == 0);
    for (int i = 1; i < n; i++) S2S_ASSERT(rows[i] > rows[i - 1]);
    /* the sentences kept, whole groups of rows: the encoder's side is kept by sentence */
    int ns = n / G;
    int32_t *sent = s2s_xmalloc((size_t)ns * sizeof *sent);
    for (int i = 0; i < ns; i++) {
        sent[i] = rows[i * G] / G;
        for (int k = 0; k < G; k++) S2S_ASSERT(rows[i * G + k] == sent[i] * G + k);
    }
    tensor_keep_rows_tm(ds->enc, sent, ns);
    if (ds->cache.keys) tensor_keep_rows_tm(ds->cache.keys, sent, ns);
    if (ds->cache.values) tensor_keep_rows_tm(ds->cache.values, sent, ns);
    uint8_t *mask = (uint8_t *)ds->mask; /* the state's own copy (model_decode_start) */
    for (int i = 0; i < ns; i++) memmove(mask + (size_t)i * S, mask + (size_t)sent[i] * S, (size_t)S);
    bool tf = m->cfg.type == MODEL_TRANSFORMER;
    if (tf) transformer_cache_keep_rows(&ds->tf, rows, n, sent);
    free(sent);
    ds->N = n;
    if (tf) return;
    for (int l = 0; l < m->cfg.layers; l++) {
        keep_rows_2d(ds->h[l], rows, n);
        if (ds->c[l]) keep_rows_2d(ds->c[l], rows, n);
        for (int k = 0; k < 2; k++) /* the buffers later steps settle into: n rows now */
            for (int j = 0; j < 2; j++) {
                Tensor *x = ds->keep[k][j][l];
                if (x && x != ds->h[l] && x != ds->c[l]) {
                    x->shape[0] = n;
                    x->size = (size_t)n * x->shape[1];
                }
            }
    }
}

typedef struct ArgmaxJob {
    const float *logits;
    int V;
    int32_t *best;
} ArgmaxJob;

/* Candidates <unk>, then <eos> onwards (never <pad> or <sos>: they are not outputs, as in
 * beam search). The maximum first, in 16 lanes of selects that vectorise (a NaN never wins),
 * then the first candidate holding it: the same pick as one scan keeping the first of equals. */
static void argmax_range(void *ctx, size_t r0, size_t r1) {
    const ArgmaxJob *j = ctx;
    int V = j->V;
    for (size_t r = r0; r < r1; r++) {
        const float *row = j->logits + r * (size_t)V;
        float lane[16], mx = row[TOK_UNK];
        for (int q = 0; q < 16; q++) lane[q] = -INFINITY;
        int v = TOK_EOS;
        for (; v + 16 <= V; v += 16)
            for (int q = 0; q < 16; q++) lane[q] = row[v + q] > lane[q] ? row[v + q] : lane[q];
        for (; v < V; v++) mx = row[v] > mx ? row[v] : mx;
        for (int q = 0; q < 16; q++) mx = lane[q] > mx ? lane[q] : mx;
        int best = TOK_UNK;
        if (!(row[TOK_UNK] >= mx)) /* <unk> holds it unless something beat it (or it is NaN) */
            for (v = TOK_EOS; v < V; v++)
                if (row[v] == mx) {
                    best = v;
                    break;
                }
        j->best[r] = best;
    }
}

void model_argmax_rows(const Tensor *logits, int rows, int32_t *best) {
    ArgmaxJob j = {logits->data, tensor_cols(logits), best};
    par_for((size_t)rows, (size_t)j.V, argmax_range, &j);
}

int model_max_output(int max_decode_len, int n) { return max_decode_len > 0 ? max_decode_len : 2 * n + 10; }

void model_greedy(Tape *t, Seq2Seq *m, const Batch *b, int max_decode_len, int32_t *out, int *out_len, float *attn) {
    model_greedy_heads(t, m, b, max_decode_len, out, out_len, attn, NULL);
}

void model_greedy_heads(Tape *t, Seq2Seq *m, const Batch *b, int max_decode_len, int32_t *out, int *out_len, float *attn,
                        float *heads_attn) {
    int max_len = model_max_output(max_decode_len, b->S); /* the rows' stride; each row's own cap below */
    int H = model_heads(m);
    S2S_ASSERT(!heads_attn || H > 1);
    TapeMode mode = tape_enter_inference(t);
    int B = b->B, S = b->S;
    DecodeState ds;
    model_decode_start(t, m, b, 1, max_len, &ds);
    int32_t *tok = arena_alloc(&t->arena, (size_t)B * sizeof *tok);
    int32_t *sent = arena_alloc(&t->arena, (size_t)B * sizeof *sent); /* row → sentence */
    int32_t *rows = arena_alloc(&t->arena, (size_t)B * sizeof *rows);
    int32_t *bests = arena_alloc(&t->arena, (size_t)B * sizeof *bests);
    uint8_t *done = arena_calloc(&t->arena, (size_t)B); /* by sentence */
    for (int i = 0; i < B; i++) {
        tok[i] = TOK_SOS;
        sent[i] = i;
        out_len[i] = 0;
    }
    if (attn) memset(attn, 0, (size_t)B * max_len * S * sizeof *attn);
    if (heads_attn) memset(heads_attn, 0, (size_t)B * max_len * H * S * sizeof *heads_attn);
    for (int step = 0; step < max_len && ds.N > 0; step++) {
        AttnWeights aw = {.want_heads = heads_attn != NULL};
        model_decode_step_pick(t, m, &ds, tok, &aw, bests);
        const Tensor *w = aw.mean;
        int alive = 0;
        for (int r = 0; r < ds.N; r++) {
            int i = sent[r];
            if (done[i]) continue; /* finished, not yet dropped */
            int best = bests[r];
            if (attn && w) memcpy(attn + ((size_t)i * max_len + step) * S, w->data + (size_t)r * S, (size_t)S * sizeof *attn);
            if (heads_attn && aw.heads) /* (N·H, 1, S): row r's heads are rows r·H … */
                memcpy(heads_attn + ((size_t)i * max_len + step) * H * S, aw.heads->data + (size_t)r * H * S,
                       (size_t)H * S * sizeof *heads_attn);
            if (best == TOK_EOS) {
                done[i] = 1;
                continue;
            }
            out[(size_t)i * max_len + out_len[i]++] = best;
            if (out_len[i] >= model_max_output(max_decode_len, b->src_len[i])) { /* its own cap, as alone */
                done[i] = 1;
                continue;
            }
            tok[r] = best;
            rows[alive++] = r;
        }
        model_decode_settle(t, m, &ds, step);
        /* drop finished sentences once an eighth of the rows are: the copy costs less than
         * the output layer would spend on them */
        if (alive == 0) break;
        if (alive <= ds.N - (ds.N + 7) / 8) {
            for (int k = 0; k < alive; k++) {
                tok[k] = tok[rows[k]];
                sent[k] = sent[rows[k]];
            }
            model_decode_keep_rows(m, &ds, rows, alive);
        }
    }
    tape_leave(t, mode);
}
