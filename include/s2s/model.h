/* model.h — the encoder–decoder models: two families behind one interface (model.type:
 * the RNN encoder–decoder with attention, wired exactly as tests/golden/README.md defines
 * it, and the Transformer), their training forward, and decoding step by step (greedy, beam,
 * ensembles, forced).
 *
 * A Seq2Seq owns its ParamStore (weights, gradients, moments) and the layer structs that
 * borrow from it (the family's own in `parts`, private to its file); it borrows nothing. Forward passes allocate on the caller's tape. The RNN:
 * embedding → (dropout) → RNN over the real tokens; bridge: bidirectional →
 * ReLU(fc([h_fwd_last ; h_bwd_first])) per layer (LSTM cell state 0), unidirectional → the
 * encoder's final state; decoder: embedding of trg[0..T-2] → (dropout) → RNN over the whole
 * target at once (no input feeding), then attention and the output layer over all steps. The
 * Transformer: src/model/tf_model.c. */
#ifndef S2S_MODEL_H
#define S2S_MODEL_H

#include "s2s/attn.h"
#include "s2s/config.h"
#include "s2s/data.h"
#include "s2s/transformer.h"

struct ModelFamily;

typedef struct Seq2Seq {
    ConfigModel cfg;
    const struct ModelFamily *family; /* model.type's functions (src/model/model_internal.h) */
    int src_vocab, trg_vocab;
    int enc_dim;              /* encoder output size: dirs · encoder_hidden, or d_model */
    ParamStore params;
    Embedding enc_emb, dec_emb; /* token embeddings, both families */
    Linear out;               /* the output layer both families share: (V, D + Hd) for concat,
                                 (V, Hd) for luong; the transformer's generator (V, d) */
    void *parts;              /* owned: the family's own layers, its file's private struct */
} Seq2Seq;

/* The training loss's settings, passed to the forward (they are the run's, not the model's):
 * they apply on a tape that records gradients; NULL, or a tape without gradients (evaluation):
 * the plain cross-entropy over the whole logits. */
typedef struct ModelLoss {
    float label_smoothing; /* the loss's ε (train.label_smoothing) */
    int chunk;             /* output layer + loss this many rows at a time (0: all; train.loss_chunk) */
} ModelLoss;

/* Whether decoding gives attention weights to draw (not for dummy attention), and how many
 * heads they have (1, or multihead's and the Transformer's heads). */
bool model_has_attention(const Seq2Seq *m);
int model_heads(const Seq2Seq *m);
/* The attention a family draws layer by layer: how many decoder layers' cross-attention maps
 * and encoder layers' self-attention maps it has (a Transformer: every layer's; an RNN: none).
 * MODEL_MAX_LAYER_MAPS at most each. */
#define MODEL_MAX_LAYER_MAPS 16
void model_layer_counts(const Seq2Seq *m, int *cross, int *self);
/* Those maps, teacher-forced over a batch's targets (the pictures of a decoded sentence: its
 * output fed back, as decoding computed it): each decoder layer's cross-attention (B·heads,
 * T − 1, S) into cross[0 .. ) and each encoder layer's self-attention (B·heads, S, S) into
 * self[0 .. ). Only where model_layer_counts gives layers. */
void model_layer_maps(Tape *t, Seq2Seq *m, const Batch *b, Tensor **cross, Tensor **self);
/* What the pictures call its attention: the variant's name, or the Transformer's. */
const char *model_attention_name(const Seq2Seq *m);
/* What a run of this model is named by in logs and tables: its attention variant (an RNN), or
 * its family's name (a Transformer). */
const char *model_label(const ConfigModel *cfg);
/* How many sentences a batch of decoding takes (greedy; beam search takes fewer), the
 * family's best: an RNN's steps are small products, faster on more rows; a Transformer's
 * batches pad less when smaller. */
int model_decode_batch(const Seq2Seq *m, int beam);

/* Checks the model section (names, sizes, cross-field constraints); messages start with
 * `origin` (the config file). */
S2sStatus model_check_config(const ConfigModel *cfg, const char *origin, S2sError *err);
/* Declares and allocates the parameters (zeroed). */
S2sStatus model_init(Seq2Seq *m, const ConfigModel *cfg, int src_vocab, int trg_vocab, S2sError *err);
/* The same, refusing (S2S_ERR_CORRUPT) a model of more than max_params weights (0: no limit):
 * a model file's config cannot make the loader allocate more than the file holds. */
S2sStatus model_init_limited(Seq2Seq *m, const ConfigModel *cfg, int src_vocab, int trg_vocab, size_t max_params,
                             S2sError *err);
void model_free(Seq2Seq *m);
/* The names (into names, up to 2) of the embeddings that model.tie_embeddings makes the output
 * layer's weight: not parameters of their own here, but keys of PyTorch's state_dict. */
int model_tied_names(const ConfigModel *cfg, const char *names[2]);

/* Sizes from the config alone, before anything is allocated, so that a model or a batch this
 * machine cannot hold is refused with a message instead of failing half-way. */
size_t model_param_count(const ConfigModel *cfg, int src_vocab, int trg_vocab);
typedef enum ModelStepKind {
    MODEL_STEP_TRAIN,  /* forward and backward of a training batch */
    MODEL_STEP_EVAL,   /* teacher-forced forward without gradients */
    MODEL_STEP_GREEDY, /* greedy decoding; T is the output limit */
} ModelStepKind;
/* An upper estimate of the tape arena's bytes for one step over B sentences of S source
 * positions and T target positions (<sos> and <eos> included). */
double model_step_bytes(const ConfigModel *cfg, int src_vocab, int trg_vocab, ModelStepKind kind, int B, int S, int T);
/* Uniform in [-init_range, init_range] from rng; one-hot embeddings become the identity. */
void model_init_weights(Seq2Seq *m, Rng *rng);

typedef struct ModelOutput {
    Tensor *loss;            /* (1): mean cross-entropy over non-pad targets; label-smoothed when
                                training with a ModelLoss's ε */
    double nll;              /* the plain mean cross-entropy, whatever the smoothing */
    Tensor *logits;          /* (n_tokens, V): rows at real targets only; model_forward_all:
                                ((T-1)·B, V), every time-major position */
    const int32_t *targets;  /* the target of each logits row (arena) */
    const int32_t *rows;     /* each logits row's time-major position i·B + b, or NULL (all) */
    Tensor *attention;       /* (B, T-1, S), or NULL for dummy */
    int n_tokens;            /* non-pad targets */
} ModelOutput;

/* Teacher-forced forward (and loss) of a batch; the output layer runs only where a target is
 * real (no work on padding). dropout_rng may be NULL when the tape is not training. After
 * tape_backward, o.logits holds the loss's gradient, no longer the logits. */
ModelOutput model_forward(Tape *t, Seq2Seq *m, const Batch *b, Rng *dropout_rng, const ModelLoss *loss);
/* The same with logits at every position, pads included, as PyTorch computes them (goldens). */
ModelOutput model_forward_all(Tape *t, Seq2Seq *m, const Batch *b);

/* The longest output a sentence of n source positions gets: max_decode_len when it is set
 * (> 0), else 2n + 10 — each sentence its own, so that a batch decodes as its sentences
 * alone. A batch's outputs are laid out with L = model_max_output(max_decode_len, b->S) per row. */
int model_max_output(int max_decode_len, int n);

/* Greedy decoding of a batch (no gradients): out (B, L) ids without <sos>, each row ending at
 * its <eos> (not stored) or at its own cap (model_max_output); out_len (B). attn, when not
 * NULL, gets (B, L, S) weights (0 where the variant has none). */
void model_greedy(Tape *t, Seq2Seq *m, const Batch *b, int max_decode_len, int32_t *out, int *out_len, float *attn);
/* The same with each head's weights of multi-head attention too: heads_attn (B, L, heads, S),
 * or NULL; only with a multihead model of more than one head. */
void model_greedy_heads(Tape *t, Seq2Seq *m, const Batch *b, int max_decode_len, int32_t *out, int *out_len, float *attn,
                        float *heads_attn);
/* best[r] = the highest-scoring output token of logits row r (rows × V): never <pad> or
 * <sos>, the first of equals, as one scan from <unk> keeping a later token only when it
 * scores higher (so a NaN never overtakes); rows split over the threads. */
void model_argmax_rows(const Tensor *logits, int rows, int32_t *best);

/* Step-by-step decoding (greedy, beam): the encoder once, then one decoder step at a time
 * for N = B·K rows (K hypotheses per sentence, rows b·K … b·K + K − 1), both model types.
 * Inference only. */
typedef struct DecodeState {
    Tensor *enc;                  /* (S, N / group, D): encoder states (the Transformer's memory, read on the
                                   * first step only: its rows are not dropped, its width stays) */
    const uint8_t *mask;          /* (N / group, S) */
    ArenaMark mark;               /* after the first step: later steps' temporaries go */
    int N, S;
    int group; /* rows per sentence that share its encoder states, mask and cache: a beam's K
                * hypotheses (rows b·K + k, attending as K queries of sentence b), else 1 */
    void *fam; /* the family's own state (its file's private struct), on the tape's arena */
} DecodeState;

/* max_steps: the most decoder steps that will follow (a transformer keeps every position's
 * keys and values). */
void model_decode_start(Tape *t, Seq2Seq *m, const Batch *b, int K, int max_steps, DecodeState *ds);
/* Feeds tokens (N) and returns the logits (N, V); *weights gets (N, 1, S) or NULL. */
Tensor *model_decode_step(Tape *t, Seq2Seq *m, DecodeState *ds, const int32_t *tokens, Tensor **weights);
/* The same with the attention's weights in w (multihead: per head as well, when w->want_heads). */
Tensor *model_decode_step_heads(Tape *t, Seq2Seq *m, DecodeState *ds, const int32_t *tokens, AttnWeights *w);
/* One greedy step: feeds tokens (N), writes the highest-scoring next token of each row to
 * best (N; may be tokens itself), by model_argmax_rows's rule. The pick is op_linear_argmax's:
 * the argmax of the output layer's logits in float32, without computing every one exactly
 * (an int8 or bf16 screen), on float32 and bf16 tapes (where the layer's input was computed
 * in bf16); an int8 tape picks from its own int8 logits. */
void model_decode_step_pick(Tape *t, Seq2Seq *m, DecodeState *ds, const int32_t *tokens, AttnWeights *w,
                            int32_t *best);
/* Row i of the state becomes the old row parent[i]. */
void model_decode_reorder(Tape *t, Seq2Seq *m, DecodeState *ds, const int32_t *parent);
/* Call at the end of each step, once its outputs are used: keeps the state in two buffers
 * swapped each step and releases the step's temporaries, so decoding needs one step's
 * memory however long the output. */
void model_decode_settle(Tape *t, Seq2Seq *m, DecodeState *ds, int step);
/* After settling: keeps only rows rows[0..n) (ascending) of the state, in place, so finished
 * sentences stop costing work; later steps take n rows. */
void model_decode_keep_rows(Seq2Seq *m, DecodeState *ds, const int32_t *rows, int n);

/* Beam search with length normalisation, batched over sentences. A sentence stops when K
 * hypotheses have ended (so K = 1 is greedy decoding); at its own cap (model_max_output of
 * max_decode_len) the unfinished ones compete with the finished after normalisation. Scores are sums of log-probabilities
 * (with <eos>); hypotheses are ranked by score / length^alpha (length with <eos>). */
typedef struct BeamHyp {
    int32_t *ids;   /* without <sos>/<eos>; malloc'd */
    int len;
    float score;    /* Σ log p */
    float norm;     /* score / (len + ended)^alpha */
} BeamHyp;

/* out: (B, n_best) hypotheses, best first (fewer than n_best leave ids NULL, len 0). */
void model_beam(Tape *t, Seq2Seq *m, const Batch *b, int K, int max_decode_len, float alpha, int n_best, BeamHyp *out);
/* The same for an ensemble of n_models models (each with its own tape; one target
 * vocabulary): each step's log-probabilities are the mean of the models' (Σ_k log p_k / n). */
#define MODEL_MAX_ENSEMBLE 16
void model_beam_ensemble(Tape *const *tapes, Seq2Seq *const *ms, int n_models, const Batch *b, int K, int max_decode_len,
                         float alpha, int n_best, BeamHyp *out);
/* Forced decoding: lp (B, T − 1), batch-major, gets log p(target i | source, targets < i) of
 * each real target token of the batch (<eos> included; 0 past a row's end), the mean over the
 * models of an ensemble. */
void model_score_targets(Tape *const *tapes, Seq2Seq *const *ms, int n_models, const Batch *b, float *lp);
void beam_hyps_free(BeamHyp *h, int n);

/* A trained model from its file (model.bin or last.bin): the config, both vocabularies and
 * the weights. On success the caller owns m, src and trg (model_free, vocab_free). */
S2sStatus model_load_file(Seq2Seq *m, Config *cfg, Vocab *src, Vocab *trg, const char *path, S2sError *err);
/* The same from a descriptor open for reading (not closed here; path names it in messages). */
S2sStatus model_load_fd(Seq2Seq *m, Config *cfg, Vocab *src, Vocab *trg, int fd, const char *path, S2sError *err);
/* The same from a file image (for fuzzing); origin names it in messages. */
S2sStatus model_load_memory(Seq2Seq *m, Config *cfg, Vocab *src, Vocab *trg, const void *buf, size_t len,
                            const char *origin, S2sError *err);

/* ./import: a model file (out) from a safetensors file's weights, under the parameter names
 * of the model the config and vocabularies make. Every parameter must be there with its shape
 * (F32, BF16 or F16; finite values) and every tensor must be a parameter, or a tied
 * embedding equal to its weight: else S2S_ERR_DATA naming it. No config or vocabulary, from
 * the arguments or the metadata: S2S_ERR_CONFIG. */
typedef struct ModelImport {
    const char *path;                  /* the safetensors file */
    const Config *cfg;                 /* or NULL: the file's metadata ("s2s.config") */
    const char *src_vocab, *trg_vocab; /* files of one token a line, in id order, or NULL: the metadata's */
    const char *subword;               /* a subword model file serving both sides, or NULL: the metadata's */
    const char *out;
} ModelImport;
S2sStatus model_import(const ModelImport *im, S2sError *err);

#endif
