/* ops.h — the differentiable operations. Each returns a new tensor in the tape's arena and,
 * when an input requires a gradient and the tape records, a node for backward. Inputs are
 * borrowed; masks, ids and targets are copied into the arena when backward needs them.
 *
 * Dimension letters: B batch, S source length, T target length, E embedding, H hidden,
 * V vocabulary, N rows (leading dimensions flattened). */
#ifndef S2S_OPS_H
#define S2S_OPS_H

#include "s2s/rng.h"
#include "s2s/tape.h"

#include <stdint.h>

typedef enum CellKind { CELL_GRU, CELL_LSTM } CellKind;

/* Matrix product C = op(A) op(B). 2-D operands: (M,K)·(K,N). 3-D operands are batches of
 * matrices, stored batch-major (Bt, r, c) or, with the _TM flag, time-major (r, Bt, c) — the
 * layout of RNN outputs — so attention runs on (S,B,D) encoder states without a transpose.
 * The output is (Bt, M, N), or (M, Bt, N) with MM_OUT_TM. */
enum {
    MM_TRANS_A = 1,
    MM_TRANS_B = 2,
    MM_A_TM = 4,
    MM_B_TM = 8,
    MM_OUT_TM = 16,
};
Tensor *op_matmul(Tape *t, Tensor *a, Tensor *b, int flags);

/* x (..., in) W^T + b: W (out, in), b (out) or NULL → (..., out). */
Tensor *op_linear(Tape *t, Tensor *x, Tensor *w, Tensor *b);

/* For each row of x (N, D): the allowed column v (allowed[v] != 0; NULL: all; at least one)
 * with the largest logit of x W^T + b (W (V, D), b (V) or NULL), each logit taken as
 * gemm_row's float32 dot product (fixed partial sums) plus b_v, so the pick is the same
 * whatever the batch, thread count or back end; as one scan over the allowed columns that
 * moves on only to a strictly higher logit (the first of equals; a NaN never overtakes:
 * model_argmax_rows's rule). Greedy decoding's pick, made without computing every logit
 * exactly: a screen computes them all approximately (Tape.screen: int8 products where the
 * CPU has AVX2 or wider, else bfloat16 where it multiplies them natively, else float32) with
 * a rigorous bound on each one's error (bf16: about 2^-7 |x| |w_v|; int8: half a quantisation
 * step per element, through the 1-norms), and only the columns whose upper bound reaches
 * the lower bound of the column with the best screen value get their exact dot product
 * (the screen's values scaled back inside that pass, never stored; the bounds' per-column
 * factors kept on the tape per frozen W and b, its engine's argmax_cache): 0.5-4 per row with trained
 * Multi30k models, more with random weights (flat logits: about 115 on the homework model).
 * Without VNNI the int8 screen runs coarse first (gemm_q8: x in 7 bits, about twice the
 * bound, a faster kernel) and goes back to 8-bit x for the next 64 calls on a weight whose
 * coarse call left more than V/256 + 1 exact logits a row. On a bf16 tape x came from
 * bf16 products; the pick is still the float32 argmax for that x. Not differentiable (no
 * node); writes best (N). */
void op_linear_argmax(Tape *t, const Tensor *x, const Tensor *w, const Tensor *b, const uint8_t *allowed,
                      int32_t *best);
/* On an int8 tape, outside training, with W frozen: the same pick (the same rule) from the
 * logits op_linear gives there (int8 products, scaled back, plus b), without writing them;
 * returns false, doing nothing, where op_linear would not multiply in int8 (fewer than 8
 * rows or columns, W not frozen, another tape). */
bool op_linear_int8_argmax(Tape *t, const Tensor *x, const Tensor *w, const Tensor *b, const uint8_t *allowed,
                           int32_t *best);

Tensor *op_add(Tape *t, Tensor *a, Tensor *b);          /* same shapes */
Tensor *op_add_bias(Tape *t, Tensor *x, Tensor *b);     /* x (..., D) + b (D) */
Tensor *op_mul(Tape *t, Tensor *a, Tensor *b);          /* elementwise, same shapes */
Tensor *op_scale(Tape *t, Tensor *x, float s);
Tensor *op_tanh(Tape *t, Tensor *x);
Tensor *op_sigmoid(Tape *t, Tensor *x);
Tensor *op_relu(Tape *t, Tensor *x);
Tensor *op_gelu(Tape *t, Tensor *x);                    /* x Φ(x), exact (erf), as PyTorch's default */
Tensor *op_exp(Tape *t, Tensor *x);
Tensor *op_log(Tape *t, Tensor *x);                     /* x > 0 */

/* Softmax over the last axis. mask (mask_rows, cols), 1 = keep, or NULL: row r of x uses
 * mask row r / (rows / mask_rows), so a (B, S) mask serves scores (B, T, S) and a full
 * (rows, cols) mask serves causal attention. Masked entries are exactly 0; a row with
 * every entry masked is all 0. */
Tensor *op_softmax(Tape *t, Tensor *x, const uint8_t *mask, int mask_rows);

/* Mean over rows whose target != ignore_index of -log softmax(logits)[target].
 * logits (N, V), targets (N) → (1). With no counted row the loss is 0. */
Tensor *op_cross_entropy(Tape *t, Tensor *logits, const int32_t *targets, int ignore_index);
/* The same, for logits that nothing reads after the backward pass (the training loss): where
 * logits is not a view and has no gradient yet, backward writes the gradient over its values
 * instead of keeping a second (N, V) buffer. smoothing ε in [0, 1): each counted row's loss is
 * (1−ε)·NLL + ε·mean over all V classes of −log p (PyTorch's CrossEntropyLoss(label_smoothing
 * = ε, ignore_index)). *nll (if not NULL) receives the plain mean NLL, whatever ε. */
Tensor *op_cross_entropy_consume(Tape *t, Tensor *logits, const int32_t *targets, int ignore_index, float smoothing,
                                 double *nll);
/* op_cross_entropy(op_linear(x, w, b), …) computed `chunk` rows at a time: x (N, D), w (V, D),
 * b (V) or NULL. Only one chunk's logits exist at once; backward computes them again (one
 * more product of the layer's size) instead of keeping (N, V). With t->loss_grads_early the
 * gradients of x, w and b are written while each chunk's logits exist, in forward (the same
 * bits, without the product again); backward then only checks that its seed was 1. */
Tensor *op_linear_xent(Tape *t, Tensor *x, Tensor *w, Tensor *b, const int32_t *targets, int ignore_index, int chunk,
                       float smoothing, double *nll);

/* Rows of src (R, D) picked by ids (n), each in [0, R) → (n, D); backward scatter-adds.
 * Embedding lookup, and picking each sequence's last state. */
Tensor *op_gather_rows(Tape *t, Tensor *src, const int32_t *ids, int n);
/* gather's inverse: src (n, D) as rows ids[0..n) (increasing, below R) of an (R, D) tensor
 * whose other rows are zero; backward gathers. A Transformer decoder's real positions laid
 * back on the (T, B) grid for its attention. */
Tensor *op_scatter_rows(Tape *t, Tensor *src, const int32_t *ids, int n, int R);
/* x's A·G rows as an A × G grid (row a·G + g) → (G·A, D), row g·A + a: the grid transposed.
 * op_transpose_rows(t, y, G, A) undoes it. */
Tensor *op_transpose_rows(Tape *t, Tensor *x, int A, int G);

Tensor *op_concat(Tape *t, Tensor *a, Tensor *b);       /* (..., Da) ++ (..., Db) */
/* Rows ids[0..n) of (R, Da) ++ (R, Db): (n, Da + Db), without the whole concatenation. */
Tensor *op_concat_rows(Tape *t, Tensor *a, Tensor *b, const int32_t *ids, int n);
Tensor *op_slice(Tape *t, Tensor *x, int start, int len); /* last axis [start, start+len) */

/* Inverted dropout with keep-mask drawn from rng; identity when the tape is not training
 * or p == 0. */
Tensor *op_dropout(Tape *t, Tensor *x, float p, Rng *rng);

Tensor *op_sum(Tape *t, Tensor *x);                     /* → (1) */
Tensor *op_mean(Tape *t, Tensor *x);                    /* → (1) */

/* A whole recurrent direction over a padded sequence, as one op, with PyTorch's equations
 * and gate order, so weights are interchangeable with nn.GRU / nn.LSTM:
 *   GRU (r, z, n): r = σ(xg_r + W_hr h + b_hr), z = σ(xg_z + W_hz h + b_hz),
 *                  n = tanh(xg_n + r ⊙ (W_hn h + b_hn)), h' = (1 − z) ⊙ n + z ⊙ h;
 *   LSTM (i, f, g, o): c' = σ(f) ⊙ c + σ(i) ⊙ tanh(g), h' = σ(o) ⊙ tanh(c').
 * One step of a cell is this op with S = 1.
 * xg (S·B, G) = W_ih x + b_ih for every step (one GEMM beforehand; G = 3H or 4H);
 * h0, c0 (B, H) the initial state (c0 only for an LSTM); active (S, B) or NULL;
 * reverse runs the steps S-1 … 0. Returns (S + 1, B, H): the step outputs (0 where a row is
 * inactive), then the final state. For an LSTM *cells gets the same layout of cell states.
 * An inactive row keeps its state, so the final state is each row's state after its last
 * real token. */
Tensor *op_rnn_seq(Tape *t, CellKind kind, Tensor *xg, Tensor *h0, Tensor *c0, Tensor *w_hh, Tensor *b_hh,
                   const uint8_t *active, bool reverse, Tensor **cells);
/* The same, keeping the gate activations for backward in xg's own memory: for an xg that
 * nothing else reads (the layer's input projection), whose values it overwrites. */
Tensor *op_rnn_seq_consume(Tape *t, CellKind kind, Tensor *xg, Tensor *h0, Tensor *c0, Tensor *w_hh, Tensor *b_hh,
                           const uint8_t *active, bool reverse, Tensor **cells);

/* Additive (Bahdanau) attention scores: q (T, B, A) and k (S, B, A), time-major, and
 * v (A) → scores (B, T, S) with score[b,t,s] = v · tanh(q[t,b] + k[s,b]). */
Tensor *op_additive_scores(Tape *t, Tensor *q, Tensor *k, Tensor *v);

/* A decoding step's scaled-dot attention, fused, for tapes that need no gradient: q (1, N, D)
 * one query row a sentence·head, k and v (S, N, D) time-major → context (1, N, D), and the
 * weights p (N, 1, S) in *weights when asked. Row r's mask is mask[r / (N / mask_rows)]
 * (mask NULL: none). The same bits as the composed ops: op_matmul (q k^T), op_scale,
 * op_softmax, op_matmul (p v). slot (S, N / group), or NULL: position s's rows
 * g·group … g·group + group − 1 are rows slot[s·(N / group) + g]·group … of k and v there
 * (the bits those of k and v laid out so); with slots k and v may hold more rows, (S, NK, D)
 * with NK > N (rows dropped from the index, not from the cache). */
Tensor *op_attend_row(Tape *t, Tensor *q, Tensor *k, Tensor *v, float scale, const uint8_t *mask, int mask_rows,
                      const int32_t *slot, int group, Tensor **weights);

/* Layer normalisation over the last axis (PyTorch's nn.LayerNorm): x (..., D), gain and bias
 * (D) or NULL (then neither) → (..., D), y = (x − mean) / sqrt(var + eps) ⊙ gain + bias with
 * the biased variance. */
Tensor *op_layer_norm(Tape *t, Tensor *x, Tensor *gain, Tensor *bias, float eps);

#endif
