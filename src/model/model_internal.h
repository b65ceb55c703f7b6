/* model_internal.h — what the files of src/model share: the model-family interface each
 * family implements (rnn_model.c, tf_model.c), the output layer and loss both use
 * (output.c), and load.c's and beam.c's helpers. Not a public header. */
#ifndef S2S_MODEL_INTERNAL_H
#define S2S_MODEL_INTERNAL_H

#include "s2s/model.h"

/* A model family (model.type): one table of functions, one file (rnn_model.c,
 * tf_model.c); model.c, output.c and decode.c are the same for every family and call it. A
 * new family is a file with its table, and its name and case in model.c's model_family(). */
typedef struct ModelFamily {
    const char *name;
    /* the sizes of its private structs: a model's layers (m->parts) and a decoding state's
     * (ds->fam), allocated zeroed by model.c and decode.c */
    size_t parts_size, decode_size;
    /* sentences a greedy batch of decoding takes (model_decode_batch) */
    int decode_batch;
    /* the model section's checks particular to the family; messages start with origin */
    S2sStatus (*check_config)(const ConfigModel *c, const char *origin, S2sError *err);
    /* every parameter declared into m->params (m->cfg and the vocabularies set), the
     * output layer m->out among them, tied by model_tie */
    void (*declare)(Seq2Seq *m);
    void (*init_weights)(Seq2Seq *m, Rng *rng);
    /* an upper estimate of one step's arena bytes (model_step_bytes) */
    double (*step_bytes)(const ConfigModel *c, int src_vocab, int trg_vocab, ModelStepKind kind, int B, int S, int T);
    /* teacher-forced forward: the output layer and loss by model_loss (or over every
     * position with all_positions) */
    ModelOutput (*forward)(Tape *t, Seq2Seq *m, const Batch *b, Rng *drop, bool all_positions, const ModelLoss *loss);
    /* the PyTorch state_dict keys of the decoder's and the encoder's embedding (tying) */
    const char *emb_names[2];
    /* decoding: the encoder once and the family's state; one step's input to the output layer
     * (N, D); rows reordered (beam); the state kept across the step's rewind (NULL: nothing to
     * keep); rows kept (sentences sent[0 .. ns) whole); the weights' heads */
    void (*decode_start)(Tape *t, Seq2Seq *m, const Batch *b, int K, int max_steps, DecodeState *ds);
    Tensor *(*decode_features)(Tape *t, Seq2Seq *m, DecodeState *ds, const int32_t *tokens, AttnWeights *w);
    void (*decode_reorder)(Tape *t, Seq2Seq *m, DecodeState *ds, const int32_t *parent);
    void (*decode_settle)(Seq2Seq *m, DecodeState *ds, int step);
    void (*decode_keep_rows)(Seq2Seq *m, DecodeState *ds, const int32_t *rows, int n, const int32_t *sent, int ns);
    bool (*has_attention)(const Seq2Seq *m);
    int (*heads)(const Seq2Seq *m);
    const char *(*attention_name)(const Seq2Seq *m);
    const char *(*label)(const ConfigModel *c);
    /* the maps drawn layer by layer (model_layer_counts, model_layer_maps); NULL: none */
    void (*layer_counts)(const Seq2Seq *m, int *cross, int *self);
    void (*layer_maps)(Tape *t, Seq2Seq *m, const Batch *b, Tensor **cross, Tensor **self);
} ModelFamily;

/* The family of a model.type (model.c, where each family's table is named). */
const ModelFamily *model_family(ModelType type);

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
/* A decoding step's pick (model_decode_step_pick) from the output layer over x (N, D). */
void model_pick(Tape *t, Seq2Seq *m, Tensor *x, int N, int32_t *best);

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
