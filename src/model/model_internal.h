/* model_internal.h — what seq2seq.c (the RNN model and the dispatch on model.type) shares
 * with tf_model.c (the Transformer model). Not a public header. */
#ifndef S2S_MODEL_INTERNAL_H
#define S2S_MODEL_INTERNAL_H

#include "s2s/model.h"

/* Declares the Transformer model's parameters into m->params (m->cfg, vocabularies set). */
void tfm_declare(Seq2Seq *m);
S2sStatus tfm_check_config(const ConfigModel *c, const char *origin, S2sError *err);
void tfm_init_weights(Seq2Seq *m, Rng *rng);
double tfm_step_bytes(const ConfigModel *cfg, int trg_vocab, ModelStepKind kind, int B, int S, int T);
ModelOutput tfm_forward(Tape *t, Seq2Seq *m, const Batch *b, Rng *drop, bool all_positions, const ModelLoss *loss);
void tfm_decode_start(Tape *t, Seq2Seq *m, const Batch *b, int K, int max_steps, DecodeState *ds);
/* a decoding step's input to the output layer (N, d_model) */
Tensor *tfm_decode_features(Tape *t, Seq2Seq *m, DecodeState *ds, const int32_t *tokens, AttnWeights *w);

/* The batch's source mask (B, S), copied to the tape: a decoding state's own, which
 * model_decode_keep_rows edits. */
uint8_t *model_decode_mask(Tape *t, const Batch *b);
/* The last real target rows of a batch and their targets, as both models pick them. */
int32_t *model_target_rows(Tape *t, const Batch *b, int *n_tokens);
/* model.tie_embeddings: the tied embeddings become the output layer's weight (declared once,
 * under the output layer's name). */
void model_tie(Seq2Seq *m);
/* The loss's label smoothing: the configured ε when training (a tape with gradients), else 0
 * (validation and test report the plain cross-entropy). */
float model_smoothing(const Tape *t, const ModelLoss *loss);
/* The output layer and loss over x (n_tokens, D), the rows o->rows of the batch's targets. */
void model_loss(Tape *t, Seq2Seq *m, const Batch *b, Tensor *x, ModelOutput *o, const ModelLoss *loss);

/* load.c's checks, shared with the import: a vocabulary from a file's tokens (one word each,
 * unique, the four specials first), and a subword model from bytes attached to the
 * vocabulary whose pieces it must be. Messages name path and which ("source", "target"). */
S2sStatus model_vocab_from(Vocab *v, char *const *tokens, int n, const char *path, const char *which, S2sError *err);
S2sStatus model_attach_subword(Vocab *w, Subword kind, const char *bytes, size_t len, const char *path, const char *which,
                               S2sError *err);

/* Beam search's candidates: a row's C best next tokens (never <pad> or <sos>), each scored
 * base + x[v] − lse, best first, ties to the smaller token; returns how many (C at most, V − 2
 * when fewer). Exposed for its test. */
typedef struct BeamCand {
    float score;
    int slot, token;
} BeamCand;
int beam_top_tokens(const float *x, int V, float base, float lse, int C, int slot, BeamCand *top);

#endif
