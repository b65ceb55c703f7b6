/* nn.h — layers over padded, time-major batches: linear, embedding, multi-head attention's
 * core, and GRU/LSTM (multi-layer, uni- or bidirectional).
 *
 * A layer struct borrows its parameter tensors from a ParamStore (declared by *_init under
 * PyTorch's names, so weights load by name) and owns nothing else; forward functions
 * allocate their results on the tape. */
#ifndef S2S_NN_H
#define S2S_NN_H

#include "s2s/ops.h"
#include "s2s/params.h"

typedef struct Linear {
    Tensor *w; /* (out, in) */
    Tensor *b; /* (out) or NULL */
} Linear;

void linear_init(Linear *l, ParamStore *ps, const char *prefix, int in, int out, bool bias);
Tensor *linear_forward(Tape *t, const Linear *l, Tensor *x); /* (..., in) → (..., out) */

typedef struct Embedding {
    Tensor *w; /* (V, E) */
} Embedding;

void embedding_init(Embedding *e, ParamStore *ps, const char *prefix, int vocab, int dim);
/* ids (n), each in [0, V) → (n, E) */
Tensor *embedding_forward(Tape *t, const Embedding *e, const int32_t *ids, int n);

/* Multi-head scaled-dot attention's core, shared by the multihead attention variant and the
 * Transformer: q (T, B, E), k and v (S, B, E), already projected, split into heads of
 * E / heads wide (the heads fold into the batch: (T, B·heads, E / heads) time-major);
 * softmax(q_h · k_h / √(E / heads)) under mask (op_softmax's: score row (b·heads + h)·T + i
 * uses mask row r / (rows / mask_rows)), dropout drop_p on the weights (drop_rng NULL: none),
 * times v_h. Returns the context (T, B, E), the heads side by side; *weights gets the weights
 * (B·heads, T, S) before dropout, when not NULL. */
Tensor *mha_forward(Tape *t, Tensor *q, Tensor *k, Tensor *v, int heads, const uint8_t *mask, int mask_rows,
                    float drop_p, Rng *drop_rng, Tensor **weights);
/* A decoding step's attention (q (1, B, E)) over cached k and v (S, W, E), W ≥ B, whose
 * rows sit where slot (S, B) says: position s's row b is its row slot[s·B + b] (NULL: b,
 * and W = B), under mask and with weights as mha_forward's, fused as mha_forward fuses a
 * step: the bits of the rows laid out so. NULL where mha_forward would not fuse (one
 * sentence·head, or a gradient wanted): the caller lays the rows out. */
Tensor *mha_step_slots(Tape *t, Tensor *q, Tensor *k, Tensor *v, int heads, const uint8_t *mask, int mask_rows,
                       const int32_t *slot, Tensor **weights);

#define RNN_MAX_LAYERS 8

typedef struct RnnWeights {
    Tensor *w_ih; /* (G, in), G = 3H (GRU) or 4H (LSTM) */
    Tensor *w_hh; /* (G, H) */
    Tensor *b_ih; /* (G) */
    Tensor *b_hh; /* (G) */
} RnnWeights;

typedef struct Rnn {
    CellKind cell;
    int input, hidden, layers, dirs;
    RnnWeights w[RNN_MAX_LAYERS][2]; /* [layer][direction] */
} Rnn;

/* Declares nn.GRU / nn.LSTM parameters: prefix.weight_ih_l{k}[_reverse] ... With
 * cell_names (one layer, one direction), nn.GRUCell's names instead: prefix.weight_ih. */
void rnn_init(Rnn *r, ParamStore *ps, const char *prefix, CellKind cell, int input, int hidden,
              int layers, bool bidirectional, bool cell_names);

typedef struct RnnOutput {
    Tensor *out;                              /* (S, B, dirs·H), 0 at padding */
    Tensor *h_last[RNN_MAX_LAYERS][2];        /* (B, H) final states: forward: after each
                                                 row's last real step; backward: after step 0 */
    Tensor *c_last[RNN_MAX_LAYERS][2];        /* LSTM cell states, likewise; else NULL */
} RnnOutput;

/* x (S, B, in); lens (B) with 1 ≤ lens[b] ≤ S, or NULL for all S steps. A row's backward
 * direction starts at its last real step, as with PyTorch's packed sequences.
 * h0/c0: [layer·dirs + dir] initial states (B, H), or NULL (or NULL entries) for zeros. */
RnnOutput rnn_forward(Tape *t, const Rnn *r, Tensor *x, const int *lens, Tensor *const *h0,
                      Tensor *const *c0);

#endif
