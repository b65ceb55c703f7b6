/* tf_model.c — the Transformer model (model.type = transformer): token embeddings scaled by
 * √d plus positions (sinusoidal or learned), dropout, nn.Transformer's stacks (transformer.h),
 * and a linear generator; PyTorch's names: src_embed.weight, trg_embed.weight, src_pos.weight,
 * trg_pos.weight, transformer.*, generator.weight / generator.bias. */
#include "model_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The family's own layers (m->parts): nn.Transformer's stacks, positions added to the
 * embeddings (scaled by √d). Its decoding state (ds->fam) is the stacks' TfCache: keys and
 * values of every layer. */
typedef struct TfParts {
    Transformer stack;
    Tensor *src_pos, *trg_pos; /* learned positions (P, d), or NULL (sinusoidal) */
} TfParts;

static TfParts *parts(const Seq2Seq *m) { return m->parts; }
static TfCache *cache(const DecodeState *ds) { return ds->fam; }

_Static_assert(TF_MAX_LAYERS <= MODEL_MAX_LAYER_MAPS, "every layer's map can be drawn");

/* A stack's layers: encoder_layers or decoder_layers, where 0 means `layers`. */
static int tf_layers(const ConfigModel *c, bool encoder) {
    int n = encoder ? c->encoder_layers : c->decoder_layers;
    return n > 0 ? n : c->layers;
}

static S2sStatus tf_check_config(const ConfigModel *c, const char *origin, S2sError *err) {
    if (c->d_model % c->heads != 0)
        return s2s_fail(err, S2S_ERR_CONFIG,
                        "%s: model.heads: a transformer splits d_model (%d) into heads of equal width, so heads (%d) must "
                        "divide it",
                        origin, c->d_model, c->heads);
    if (c->embedding_type != EMBEDDING_LEARNED)
        return s2s_fail(err, S2S_ERR_CONFIG, "%s: model.embedding_type: a transformer learns its embeddings (d_model wide)",
                        origin);
    return S2S_OK;
}

static void tf_declare(Seq2Seq *m) {
    const ConfigModel *c = &m->cfg;
    ParamStore *ps = &m->params;
    int d = c->d_model;
    if (c->tie_embeddings != TIE_ALL) embedding_init(&m->enc_emb, ps, "src_embed", m->src_vocab, d);
    if (c->tie_embeddings == TIE_NONE) embedding_init(&m->dec_emb, ps, "trg_embed", m->trg_vocab, d);
    if (c->positions == POSITIONS_LEARNED) {
        parts(m)->src_pos = params_add(ps, "src_pos.weight", 2, (int[]){c->max_positions, d});
        parts(m)->trg_pos = params_add(ps, "trg_pos.weight", 2, (int[]){c->max_positions, d});
    }
    transformer_init(&parts(m)->stack, ps, "transformer", d, c->heads, c->ff, tf_layers(c, true), tf_layers(c, false), c->norm == NORM_PRE,
                     c->activation == ACTIVATION_GELU ? TF_GELU : TF_RELU);
    linear_init(&m->out, ps, "generator", d, m->trg_vocab, true);
    model_tie(m);
    m->enc_dim = d;
}

/* Embeddings N(0, 1/d) (unit variance once scaled by √d), learned positions N(0, 0.02²), the
 * stacks as nn.Transformer initialises them, the generator uniform in ±init_range (tied to the
 * embeddings: theirs). */
static void tf_init_weights(Seq2Seq *m, Rng *rng) {
    params_init_uniform(&m->params, rng, m->cfg.init_range);
    float sd = 1.0f / sqrtf((float)m->cfg.d_model);
    Tensor *emb[2] = {m->enc_emb.w, m->dec_emb.w};
    for (int k = 0; k < 2 && (k == 0 || emb[1] != emb[0]); k++)
        for (size_t i = 0; i < emb[k]->size; i++) tensor_write(emb[k])[i] = sd * (float)rng_normal(rng);
    Tensor *pos[2] = {parts(m)->src_pos, parts(m)->trg_pos};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; pos[k] && i < pos[k]->size; i++) tensor_write(pos[k])[i] = 0.02f * (float)rng_normal(rng);
    transformer_init_weights(&parts(m)->stack, rng);
}

/* Arena floats per step, by the step's big tensors: per layer and position the attention's
 * q, k, v, context and output, the residual sums and norms (≈ 12 d), the feed-forward block
 * (≈ 3 ff), the score maps (heads · S or T per position, a few copies), the logits. */
static double tf_step_bytes(const ConfigModel *c, int src_vocab, int trg_vocab, ModelStepKind kind, int B, int S, int T) {
    (void)src_vocab; /* the embeddings are d wide whatever the vocabulary */
    double d = c->d_model, ff = c->ff, H = c->heads, Le = tf_layers(c, true), L = tf_layers(c, false), b = B, s = S, t = T;
    double enc = Le * b * s * (12 * d + 3 * ff + 3 * H * s), dec = L * b * t * (20 * d + 3 * ff + 3 * H * (t + s));
    double floats;
    switch (kind) {
    case MODEL_STEP_TRAIN: floats = 2.0 * (enc + dec) + 3.0 * b * t * trg_vocab; break;
    case MODEL_STEP_EVAL: floats = enc + dec + 2.0 * b * t * trg_vocab; break;
    case MODEL_STEP_GREEDY: floats = enc + 2.0 * L * b * (t + s) * d + L * b * (20 * d + 3 * ff + 3 * H * (t + s)) + 2.0 * b * trg_vocab; break;
    default: S2S_ASSERT_MSG(false, "step kind %d", (int)kind); floats = 0;
    }
    return 1.3 * 4.0 * floats + (1 << 20);
}

/* ids (L·B, time-major) embedded, scaled by √d, plus the positions of rows first .. first + L − 1 → (L, B, d). */
static Tensor *embed(Tape *t, const Seq2Seq *m, const Embedding *e, Tensor *pos_w, const int32_t *ids, int L, int B, int first) {
    int d = m->cfg.d_model;
    Tensor *x = op_scale(t, embedding_forward(t, e, ids, L * B), sqrtf((float)d));
    Tensor *p;
    if (pos_w) { /* learned; positions past the table use its last row */
        int32_t *at = arena_alloc(&t->arena, (size_t)L * B * sizeof *at);
        int P = pos_w->shape[0];
        for (int i = 0; i < L; i++)
            for (int b = 0; b < B; b++) at[(size_t)i * B + b] = first + i < P ? first + i : P - 1;
        p = op_gather_rows(t, pos_w, at, L * B);
    } else { /* sinusoidal (Vaswani et al.): sin at even features, cos at odd, wavelengths 2π … 10000·2π */
        p = tape_tensor2(t, L * B, d);
        for (int i = 0; i < L; i++) {
            float *row = tensor_write(p) + (size_t)i * B * d;
            for (int k = 0; k < d; k += 2) {
                double angle = (double)(first + i) * exp(-log(10000.0) * (double)k / (double)d);
                row[k] = (float)sin(angle);
                if (k + 1 < d) row[k + 1] = (float)cos(angle);
            }
            for (int b = 1; b < B; b++) memcpy(row + (size_t)b * d, row, (size_t)d * sizeof *row);
        }
    }
    return tape_reshape3(t, op_add(t, x, p), L, B, d);
}

static ModelOutput tf_forward(Tape *t, Seq2Seq *m, const Batch *b, Rng *drop, bool all_positions, const ModelLoss *loss) {
    S2S_ASSERT(b->T >= 2);
    int B = b->B, S = b->S, T1 = b->T - 1, d = m->cfg.d_model, V = m->trg_vocab;
    TfDropout dr = {t->training && drop ? m->cfg.dropout : 0.0f, t->training ? drop : NULL};
    Tensor *x = embed(t, m, &m->enc_emb, parts(m)->src_pos, b->src, S, B, 0);
    if (dr.rng && dr.p > 0) x = op_dropout(t, x, dr.p, dr.rng);
    Tensor *memory = transformer_encode(t, &parts(m)->stack, x, b->src_mask, dr, NULL);
    /* decoder inputs trg[0 .. T-2]; a position is real where it is not padding */
    uint8_t *tmask = arena_alloc(&t->arena, (size_t)B * T1);
    for (int bb = 0; bb < B; bb++)
        for (int i = 0; i < T1; i++) tmask[(size_t)bb * T1 + i] = b->trg[(size_t)i * B + bb] != TOK_PAD;
    Tensor *y = embed(t, m, &m->dec_emb, parts(m)->trg_pos, b->trg, T1, B, 0);
    ModelOutput o;
    memset(&o, 0, sizeof o);
    TfRows rows = {NULL, 0, T1, B}; /* training: only the positions with a target */
    if (!all_positions) {
        o.rows = model_target_rows(t, b, &o.n_tokens);
        rows.ids = o.rows;
        rows.n = o.n_tokens;
        y = rows.n == T1 * B ? tape_reshape2(t, y, rows.n, d) : op_gather_rows(t, y, rows.ids, rows.n); /* no padding: all */
    }
    if (dr.rng && dr.p > 0) y = op_dropout(t, y, dr.p, dr.rng);
    Tensor *cross[TF_MAX_LAYERS] = {0};
    Tensor *out = transformer_decode(t, &parts(m)->stack, y, memory, b->src_mask, tmask, rows.ids ? &rows : NULL, dr, cross);
    o.attention = attn_heads_mean(t, cross[parts(m)->stack.dec_layers - 1], parts(m)->stack.heads); /* the last layer's */
    if (!all_positions) {
        model_loss(t, m, b, out, &o, loss);
        return o;
    }
    o.logits = linear_forward(t, &m->out, tape_reshape2(t, out, T1 * B, d));
    o.targets = b->trg + B;
    S2S_ASSERT(o.logits->shape[1] == V);
    o.loss = op_cross_entropy_consume(t, o.logits, o.targets, TOK_PAD, model_smoothing(t, loss), &o.nll);
    return o;
}

static void tf_decode_start(Tape *t, Seq2Seq *m, const Batch *b, int K, int max_steps, DecodeState *ds) {
    int B = b->B, S = b->S, N = B * K;
    Tensor *x = embed(t, m, &m->enc_emb, parts(m)->src_pos, b->src, S, B, 0);
    Tensor *memory = transformer_encode(t, &parts(m)->stack, x, b->src_mask, (TfDropout){0}, NULL);
    ds->N = N;
    ds->S = S;
    ds->group = K; /* a beam's K hypotheses share one copy of their sentence's memory */
    ds->enc = memory;
    ds->mask = model_decode_mask(t, b);
    transformer_cache_init(t, &parts(m)->stack, cache(ds), N, K, max_steps > 0 ? max_steps : 1);
}

/* in place: the state is the cached keys and values */
static void tf_decode_reorder(Tape *t, Seq2Seq *m, DecodeState *ds, const int32_t *parent) {
    (void)t, (void)m;
    transformer_cache_reorder(cache(ds), parent);
}

/* The memory (ds->enc) is read on the first step only, for its projections: not kept. */
static void tf_decode_keep_rows(Seq2Seq *m, DecodeState *ds, const int32_t *rows, int n, const int32_t *sent, int ns) {
    (void)m, (void)ns;
    transformer_cache_keep_rows(cache(ds), rows, n, sent);
}

static Tensor *tf_decode_features(Tape *t, Seq2Seq *m, DecodeState *ds, const int32_t *tokens, AttnWeights *w) {
    int N = ds->N;
    Tensor *y = embed(t, m, &m->dec_emb, parts(m)->trg_pos, tokens, 1, N, cache(ds)->len);
    Tensor *cross[TF_MAX_LAYERS] = {0};
    bool keep = w && !w->skip; /* the weights only to hand back: none when unread */
    Tensor *out = transformer_decode_step(t, &parts(m)->stack, y, ds->enc, ds->mask, cache(ds), keep ? cross : NULL);
    Tensor *last = cross[parts(m)->stack.dec_layers - 1]; /* (B·H, G, S): rows b·G + g of B sentences */
    if (keep) {
        int G = ds->group;
        w->mean = parts(m)->stack.heads == 1 ? last : attn_heads_mean(t, last, parts(m)->stack.heads); /* (B, G, S): (N, 1, S) */
        if (G > 1) w->mean = tape_reshape3(t, w->mean, N, 1, ds->S);
        w->heads = w->want_heads && parts(m)->stack.heads > 1 && G == 1 ? last : NULL; /* per row only when G is 1 */
    }
    return tape_reshape2(t, out, N, m->cfg.d_model);
}

static void tf_layer_counts(const Seq2Seq *m, int *cross, int *self) {
    *cross = parts(m)->stack.dec_layers;
    *self = parts(m)->stack.enc_layers;
}

static void tf_layer_maps(Tape *t, Seq2Seq *m, const Batch *b, Tensor **cross, Tensor **self) {
    TapeMode mode = tape_enter_inference(t);
    int B = b->B, S = b->S, T1 = b->T - 1;
    Tensor *x = embed(t, m, &m->enc_emb, parts(m)->src_pos, b->src, S, B, 0);
    Tensor *memory = transformer_encode(t, &parts(m)->stack, x, b->src_mask, (TfDropout){0}, self);
    uint8_t *tmask = arena_alloc(&t->arena, (size_t)B * T1);
    for (int bb = 0; bb < B; bb++)
        for (int i = 0; i < T1; i++) tmask[(size_t)bb * T1 + i] = b->trg[(size_t)i * B + bb] != TOK_PAD;
    Tensor *y = embed(t, m, &m->dec_emb, parts(m)->trg_pos, b->trg, T1, B, 0);
    transformer_decode(t, &parts(m)->stack, y, memory, b->src_mask, tmask, NULL, (TfDropout){0}, cross);
    tape_leave(t, mode);
}

static bool tf_has_attention(const Seq2Seq *m) {
    (void)m;
    return true;
}
static int tf_heads(const Seq2Seq *m) { return parts(m)->stack.heads; }
static const char *tf_attention_name(const Seq2Seq *m) {
    (void)m;
    return "transformer cross (last layer)";
}

static const char *tf_label(const ConfigModel *c) {
    (void)c;
    return "transformer";
}

const ModelFamily MODEL_FAMILY_TRANSFORMER = {
    .name = "transformer",
    .parts_size = sizeof(TfParts),
    .decode_size = sizeof(TfCache),
    .decode_batch = 32,
    .check_config = tf_check_config,
    .declare = tf_declare,
    .init_weights = tf_init_weights,
    .step_bytes = tf_step_bytes,
    .forward = tf_forward,
    .emb_names = {"trg_embed.weight", "src_embed.weight"},
    .decode_start = tf_decode_start,
    .decode_features = tf_decode_features,
    .decode_reorder = tf_decode_reorder,
    .decode_settle = NULL, /* the caches were made before the step's mark */
    .decode_keep_rows = tf_decode_keep_rows,
    .has_attention = tf_has_attention,
    .heads = tf_heads,
    .attention_name = tf_attention_name,
    .label = tf_label,
    .layer_counts = tf_layer_counts,
    .layer_maps = tf_layer_maps,
};
