/* transformer.h — the encoder and decoder stacks of PyTorch's nn.Transformer (batch_first
 * False, so time-major (S, B, d) like the RNN layers): multi-head self-attention, cross-
 * attention and a feed-forward block per layer, post-norm (the original) or pre-norm, ReLU or
 * GELU, and the final layer norm nn.Transformer puts after each stack.
 *
 * A Transformer borrows its parameters from a ParamStore, declared under the names of
 * nn.Transformer's state_dict (prefix.encoder.layers.0.self_attn.in_proj_weight, …), so weights
 * load by name; it owns nothing else. Forward functions allocate on the tape. Heads fold into
 * the batch: (T, B, d) is (T, B·heads, d / heads) time-major, no copy. */
#ifndef S2S_TRANSFORMER_H
#define S2S_TRANSFORMER_H

#include "s2s/nn.h"

#define TF_MAX_LAYERS 16

typedef enum TfActivation { TF_RELU, TF_GELU } TfActivation;

/* One nn.MultiheadAttention(d, heads): q, k, v are views of in_proj_weight / in_proj_bias. */
typedef struct TfAttention {
    Linear q, k, v, out;
} TfAttention;

typedef struct TfNorm {
    Tensor *gain, *bias; /* nn.LayerNorm's weight and bias (d) */
} TfNorm;

typedef struct TfEncoderLayer {
    TfAttention self_attn;
    Linear linear1, linear2; /* (ff, d), (d, ff) */
    TfNorm norm1, norm2;
} TfEncoderLayer;

typedef struct TfDecoderLayer {
    TfAttention self_attn, cross_attn; /* cross: PyTorch's multihead_attn */
    Linear linear1, linear2;
    TfNorm norm1, norm2, norm3;
} TfDecoderLayer;

typedef struct Transformer {
    int d, heads, ff, enc_layers, dec_layers;
    bool norm_first;          /* pre-norm: x + f(norm(x)); else post-norm: norm(x + f(x)) */
    TfActivation activation;
    float eps;                /* layer norm's (1e-5) */
    TfEncoderLayer enc[TF_MAX_LAYERS];
    TfDecoderLayer dec[TF_MAX_LAYERS];
    TfNorm enc_norm, dec_norm; /* after each stack */
} Transformer;

/* Declares nn.Transformer(d, heads, enc_layers, dec_layers, ff)'s parameters under prefix. */
void transformer_init(Transformer *tf, ParamStore *ps, const char *prefix, int d, int heads, int ff, int enc_layers,
                      int dec_layers, bool norm_first, TfActivation activation);

/* Dropout inside the layers (nn.Transformer's one rate: attention weights, after each
 * block, inside the feed-forward block); rng NULL or p 0: none. */
typedef struct TfDropout {
    float p;
    Rng *rng;
} TfDropout;

/* x (S, B, d), src_mask (B, S) (1 = a real token) → memory (S, B, d), after enc_norm.
 * self: NULL, or enc_layers slots for each layer's self-attention weights (B·heads, S, S). */
Tensor *transformer_encode(Tape *t, const Transformer *tf, Tensor *x, const uint8_t *src_mask, TfDropout drop, Tensor **self);
/* Some positions of the decoder's (T, B) grid: ids[0..n), increasing, time-major (i·B + b). */
typedef struct TfRows {
    const int32_t *ids;
    int n, T, B;
} TfRows;

/* y (T, B, d), each position attending to itself and the ones before it that are real
 * (trg_mask (B, T), 1 = real; NULL: all), and to memory (S, B, d) where src_mask allows →
 * (T, B, d), after dec_norm. With rows, y (n, d) is only those positions (→ (n, d)): the
 * ones whose outputs are wanted, each with every position before it that it sees among them
 * (a target's, in training); the rest are not computed. cross: NULL, or dec_layers slots for
 * each layer's cross-attention weights (B·heads, T, S), head-minor. */
Tensor *transformer_decode(Tape *t, const Transformer *tf, Tensor *y, Tensor *memory, const uint8_t *src_mask,
                           const uint8_t *trg_mask, const TfRows *rows, TfDropout drop, Tensor **cross);

/* Step-by-step decoding of N rows: each layer's keys and values of the positions fed so far
 * (self-attention), and of the memory (cross-attention, made on the first step). */
typedef struct TfCache {
    Tensor *self_k[TF_MAX_LAYERS], *self_v[TF_MAX_LAYERS];   /* (cap, N, d), rows 0 .. len − 1 filled */
    Tensor *cross_k[TF_MAX_LAYERS], *cross_v[TF_MAX_LAYERS]; /* (S, N / group, d), or NULL before the first step */
    /* (cap, N): position s's row i is its row slot[s·N + i] in self_k and self_v. A beam's
     * reorder moves these indices, not the rows (a copy of every position each step, O(steps²)
     * a sentence); laid out again only where a step cannot read through them, or to drop rows. */
    int32_t *slot;
    bool moved; /* some slot is not its own row */
    /* (S, N / group), made with the memory's projections: where sentence i's rows of cross_k
     * and cross_v are, the same at every position (op_attend_row's slots). Greedy decoding
     * drops finished sentences from this index, not from the projections (whose copy was most
     * of the cost of dropping rows); a beam's (group > 1) are copied, as its steps read them
     * with the composed ops. */
    int32_t *cross_slot;
    bool cross_moved; /* some sentence is not in its own row */
    int len, cap, N;
    int group; /* rows per sentence (b·group + g), sharing its memory: a beam's hypotheses */
} TfCache;

/* Room for cap positions of N rows, group of them per sentence (the memory has N / group
 * sentences), on the tape (allocate it before the steps' temporaries). */
void transformer_cache_init(Tape *t, const Transformer *tf, TfCache *c, int N, int group, int cap);
/* One position more: y (1, N, d), the embedded inputs at position c->len → (1, N, d) after
 * dec_norm; equal to row c->len of transformer_decode over the whole prefix. memory: (S, N /
 * group, d). cross: NULL, or dec_layers slots for each layer's weights (N / group · heads,
 * group, S). */
Tensor *transformer_decode_step(Tape *t, const Transformer *tf, Tensor *y, Tensor *memory, const uint8_t *src_mask,
                                TfCache *c, Tensor **cross);
/* Row i becomes the old row parent[i] (beam search), in every cached position. */
void transformer_cache_reorder(TfCache *c, const int32_t *parent);
/* Keeps rows[0..n) (increasing, whole sentences), in order: the cache of n rows (finished
 * sentences dropped); sents[0..n / group): their sentences, for the memory's projections. */
void transformer_cache_keep_rows(TfCache *c, const int32_t *rows, int n, const int32_t *sents);
/* nn.Transformer's initialisation: Xavier-uniform matrices, zero biases, layer norms 1 and 0. */
void transformer_init_weights(const Transformer *tf, Rng *rng);

#endif
