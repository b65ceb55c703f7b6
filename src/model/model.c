/* model.c — a model as every family has it: the family table chosen by model.type, the
 * config's checks, parameters declared and allocated, sizes estimated before anything is
 * allocated, weights initialised, and the training forward handed to the family. */
#include "model_internal.h"

#include <stdlib.h>
#include <string.h>

/* The families' tables, each defined in its own file: a new family is its file, and its name
 * here and its case below (-Wswitch-enum points at the case). */
extern const ModelFamily MODEL_FAMILY_RNN, MODEL_FAMILY_TRANSFORMER;

const ModelFamily *model_family(ModelType type) {
    switch (type) {
    case MODEL_RNN: return &MODEL_FAMILY_RNN;
    case MODEL_TRANSFORMER: return &MODEL_FAMILY_TRANSFORMER;
    }
    S2S_ASSERT_MSG(false, "model.type %d is none of the config's", (int)type);
    return &MODEL_FAMILY_RNN;
}

bool model_has_attention(const Seq2Seq *m) { return m->family->has_attention(m); }

int model_heads(const Seq2Seq *m) { return m->family->heads(m); }

const char *model_attention_name(const Seq2Seq *m) { return m->family->attention_name(m); }

const char *model_label(const ConfigModel *cfg) { return model_family(cfg->type)->label(cfg); }

int model_decode_batch(const Seq2Seq *m, int beam) { return beam > 1 ? 32 : m->family->decode_batch; }

void model_layer_counts(const Seq2Seq *m, int *cross, int *self) {
    *cross = *self = 0;
    if (m->family->layer_counts) m->family->layer_counts(m, cross, self);
    S2S_ASSERT(*cross <= MODEL_MAX_LAYER_MAPS && *self <= MODEL_MAX_LAYER_MAPS);
}

void model_layer_maps(Tape *t, Seq2Seq *m, const Batch *b, Tensor **cross, Tensor **self) {
    S2S_ASSERT(m->family->layer_maps);
    m->family->layer_maps(t, m, b, cross, self);
}

S2sStatus model_check_config(const ConfigModel *c, const char *origin, S2sError *err) {
    return model_family(c->type)->check_config(c, origin, err);
}

S2sStatus model_init(Seq2Seq *m, const ConfigModel *cfg, int src_vocab, int trg_vocab, S2sError *err) {
    return model_init_limited(m, cfg, src_vocab, trg_vocab, 0, err);
}

/* Declares every parameter (names and shapes) without allocating them. */
static void declare(Seq2Seq *m, const ConfigModel *cfg, int src_vocab, int trg_vocab) {
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    m->family = model_family(cfg->type);
    m->src_vocab = src_vocab;
    m->trg_vocab = trg_vocab;
    params_init(&m->params);
    m->parts = s2s_xcalloc(1, m->family->parts_size);
    m->family->declare(m);
}

int model_tied_names(const ConfigModel *cfg, const char *names[2]) {
    const ModelFamily *f = model_family(cfg->type);
    int n = 0;
    if (cfg->tie_embeddings != TIE_NONE) names[n++] = f->emb_names[0];
    if (cfg->tie_embeddings == TIE_ALL) names[n++] = f->emb_names[1];
    return n;
}

void model_tie(Seq2Seq *m) {
    if (m->cfg.tie_embeddings != TIE_NONE) m->dec_emb.w = m->out.w;
    if (m->cfg.tie_embeddings == TIE_ALL) m->enc_emb.w = m->out.w;
}

size_t model_param_count(const ConfigModel *cfg, int src_vocab, int trg_vocab) {
    Seq2Seq m;
    declare(&m, cfg, src_vocab, trg_vocab);
    size_t n = params_numel(&m.params);
    model_free(&m);
    return n;
}

double model_step_bytes(const ConfigModel *cfg, int src_vocab, int trg_vocab, ModelStepKind kind, int B, int S, int T) {
    return model_family(cfg->type)->step_bytes(cfg, src_vocab, trg_vocab, kind, B, S, T);
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
    if (max_params && params_numel(ps) > max_params) {
        size_t need = params_numel(ps);
        model_free(m);
        return s2s_fail(err, S2S_ERR_CORRUPT, "the config implies %zu weights, the file holds %zu", need, max_params);
    }
    if ((st = params_alloc(ps, err))) {
        model_free(m);
        return st;
    }
    if (cfg->embedding_type == EMBEDDING_ONEHOT) { /* frozen: no gradient ever reaches them */
        m->enc_emb.w->requires_grad = false;
        m->dec_emb.w->requires_grad = false;
    }
    return S2S_OK;
}

void model_free(Seq2Seq *m) {
    params_free(&m->params);
    free(m->parts);
    memset(m, 0, sizeof *m);
}

void model_init_weights(Seq2Seq *m, Rng *rng) { m->family->init_weights(m, rng); }

ModelOutput model_forward(Tape *t, Seq2Seq *m, const Batch *b, Rng *drop, const ModelLoss *loss) {
    return m->family->forward(t, m, b, drop, false, loss);
}

ModelOutput model_forward_all(Tape *t, Seq2Seq *m, const Batch *b) { return m->family->forward(t, m, b, NULL, true, NULL); }
