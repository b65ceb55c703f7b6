/* test_gradcheck.c — finite-difference gradient checks for every op and every layer, and
 * a test that fails when an op in the op table is exercised by no check. */
#include "test_util.h"

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <string.h>

#define SH(...) ((int[]){__VA_ARGS__})
#define OUT(g, x) ((g)->out[(g)->n_outs++] = (x))

/* ---- matmul: every transpose combination, 2-D and batched, time-major operands ---- */
static void mm2_setup(Gc *g) {
    bool ta = g->flags & MM_TRANS_A, tb = g->flags & MM_TRANS_B;
    gc_leaf(g, 2, ta ? SH(4, 3) : SH(3, 4), -1, 1); /* op(A) (3,4) */
    gc_leaf(g, 2, tb ? SH(5, 4) : SH(4, 5), -1, 1); /* op(B) (4,5) */
}
static void mm_fwd(Tape *t, Gc *g) { OUT(g, op_matmul(t, g->leaf[0], g->leaf[1], g->flags)); }
static void mm2_nn(Gc *g) { g->flags = 0; mm2_setup(g); }
static void mm2_tn(Gc *g) { g->flags = MM_TRANS_A; mm2_setup(g); }
static void mm2_nt(Gc *g) { g->flags = MM_TRANS_B; mm2_setup(g); }
static void mm2_tt(Gc *g) { g->flags = MM_TRANS_A | MM_TRANS_B; mm2_setup(g); }
static void bmm_nn(Gc *g) {
    g->flags = 0;
    gc_leaf(g, 3, SH(2, 3, 4), -1, 1);
    gc_leaf(g, 3, SH(2, 4, 5), -1, 1);
}
static void bmm_tt(Gc *g) {
    g->flags = MM_TRANS_A | MM_TRANS_B;
    gc_leaf(g, 3, SH(2, 4, 3), -1, 1);
    gc_leaf(g, 3, SH(2, 5, 4), -1, 1);
}
/* attention scores: dec (T,B,H) · enc (S,B,H)^T → (B,T,S) */
static void bmm_scores(Gc *g) {
    g->flags = MM_A_TM | MM_B_TM | MM_TRANS_B;
    gc_leaf(g, 3, SH(3, 2, 4), -1, 1);
    gc_leaf(g, 3, SH(5, 2, 4), -1, 1);
}
/* attention context: weights (B,T,S) · enc (S,B,D) → (T,B,D) */
static void bmm_context(Gc *g) {
    g->flags = MM_B_TM | MM_OUT_TM;
    gc_leaf(g, 3, SH(2, 3, 5), -1, 1);
    gc_leaf(g, 3, SH(5, 2, 4), -1, 1);
}
static void bmm_tm_trans_a(Gc *g) {
    g->flags = MM_A_TM | MM_TRANS_A;
    gc_leaf(g, 3, SH(4, 2, 3), -1, 1); /* stored (r=4, Bt=2, c=3): op(A) (3,4) */
    gc_leaf(g, 3, SH(2, 4, 5), -1, 1);
}

/* ---- linear ---- */
static void lin_setup(Gc *g) {
    gc_leaf(g, 3, SH(2, 3, 4), -1, 1);
    gc_leaf(g, 2, SH(5, 4), -1, 1);
    gc_leaf(g, 1, SH(5), -1, 1);
}
static void lin_fwd(Tape *t, Gc *g) { OUT(g, op_linear(t, g->leaf[0], g->leaf[1], g->leaf[2])); }
static void lin_nobias_fwd(Tape *t, Gc *g) { OUT(g, op_linear(t, g->leaf[0], g->leaf[1], NULL)); }

/* ---- elementwise ---- */
static void two_setup(Gc *g) {
    gc_leaf(g, 2, SH(3, 4), -1, 1);
    gc_leaf(g, 2, SH(3, 4), -1, 1);
}
static void one_setup(Gc *g) { gc_leaf(g, 2, SH(3, 4), -2, 2); }
static void pos_setup(Gc *g) { gc_leaf(g, 2, SH(3, 4), 0.5f, 2); }
/* relu: inputs kept at least 0.1 away from the kink */
static void relu_setup(Gc *g) {
    Tensor *x = gc_leaf(g, 2, SH(3, 4), -1, 1);
    for (size_t i = 0; i < x->size; i++) x->data[i] += x->data[i] >= 0 ? 0.1f : -0.1f;
}
static void bias_setup(Gc *g) {
    gc_leaf(g, 3, SH(2, 3, 4), -1, 1);
    gc_leaf(g, 1, SH(4), -1, 1);
}
static void add_fwd(Tape *t, Gc *g) { OUT(g, op_add(t, g->leaf[0], g->leaf[1])); }
static void bias_fwd(Tape *t, Gc *g) { OUT(g, op_add_bias(t, g->leaf[0], g->leaf[1])); }
static void mul_fwd(Tape *t, Gc *g) { OUT(g, op_mul(t, g->leaf[0], g->leaf[1])); }
static void scale_fwd(Tape *t, Gc *g) { OUT(g, op_scale(t, g->leaf[0], -1.7f)); }
static void tanh_fwd(Tape *t, Gc *g) { OUT(g, op_tanh(t, g->leaf[0])); }
static void sigmoid_fwd(Tape *t, Gc *g) { OUT(g, op_sigmoid(t, g->leaf[0])); }
static void relu_fwd(Tape *t, Gc *g) { OUT(g, op_relu(t, g->leaf[0])); }
static void exp_fwd(Tape *t, Gc *g) { OUT(g, op_exp(t, g->leaf[0])); }
static void log_fwd(Tape *t, Gc *g) { OUT(g, op_log(t, g->leaf[0])); }
static void sum_fwd(Tape *t, Gc *g) { OUT(g, op_sum(t, g->leaf[0])); }
static void mean_fwd(Tape *t, Gc *g) { OUT(g, op_mean(t, g->leaf[0])); }
/* the same tensor used by several ops: gradients must accumulate */
static void accum_fwd(Tape *t, Gc *g) {
    Tensor *x = g->leaf[0];
    OUT(g, op_add(t, op_mul(t, x, x), op_tanh(t, x)));
}

/* The ops whose backward writes a fresh gradient instead of adding to a zeroed one (an input
 * that is not a leaf: leaves come with zeroed gradients, so the cases above add to them) */
static Tensor *inner(Tape *t, Tensor *x) { return op_tanh(t, x); }
static void add_fresh_fwd(Tape *t, Gc *g) { OUT(g, op_add(t, inner(t, g->leaf[0]), inner(t, g->leaf[1]))); }
static void scale_fresh_fwd(Tape *t, Gc *g) { OUT(g, op_scale(t, inner(t, g->leaf[0]), 0.6f)); }
static void relu_fresh_fwd(Tape *t, Gc *g) { OUT(g, op_relu(t, inner(t, g->leaf[0]))); } /* tanh keeps the sign */
static void mm_fresh_fwd(Tape *t, Gc *g) { OUT(g, op_matmul(t, inner(t, g->leaf[0]), inner(t, g->leaf[1]), g->flags)); }
static void dropout_fresh_fwd(Tape *t, Gc *g) {
    Rng r;
    rng_init(&r, 5, RNG_STREAM_DROPOUT);
    OUT(g, op_dropout(t, inner(t, g->leaf[0]), 0.4f, &r));
}

/* ---- softmax: plain, a (B,S) mask over (B,T,S), a causal full mask ---- */
static void sm_setup(Gc *g) { gc_leaf(g, 2, SH(3, 5), -2, 2); }
static void sm_fwd(Tape *t, Gc *g) { OUT(g, op_softmax(t, g->leaf[0], NULL, 0)); }
static void sm_mask_setup(Gc *g) {
    gc_leaf(g, 3, SH(2, 3, 4), -2, 2);
    const uint8_t m[] = {1, 1, 1, 0, 1, 1, 0, 0}; /* (B=2, S=4) */
    memcpy(g->mask, m, sizeof m);
}
static void sm_mask_fwd(Tape *t, Gc *g) { OUT(g, op_softmax(t, g->leaf[0], g->mask, 2)); }
static void sm_fresh_fwd(Tape *t, Gc *g) { OUT(g, op_softmax(t, inner(t, g->leaf[0]), g->mask, 2)); }
static void sm_causal_setup(Gc *g) {
    gc_leaf(g, 2, SH(4, 4), -2, 2);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) g->mask[i * 4 + j] = j <= i;
}
static void sm_causal_fwd(Tape *t, Gc *g) { OUT(g, op_softmax(t, g->leaf[0], g->mask, 4)); }

/* ---- cross-entropy with an ignored target ---- */
static void ce_setup(Gc *g) {
    gc_leaf(g, 2, SH(5, 6), -2, 2);
    const int32_t tg[] = {3, 0, 5, 1, 0}; /* 0 ignored */
    memcpy(g->ids, tg, sizeof tg);
}
static void ce_fwd(Tape *t, Gc *g) { OUT(g, op_cross_entropy(t, g->leaf[0], g->ids, 0)); }
/* linear + loss in chunks of 2 rows (5 rows: the last chunk short), with an ignored row */
static void xent_setup(Gc *g) {
    gc_leaf(g, 2, SH(5, 4), -1, 1); /* x */
    gc_leaf(g, 2, SH(6, 4), -1, 1); /* w */
    gc_leaf(g, 1, SH(6), -1, 1);    /* b */
    const int32_t tg[] = {3, 0, 5, 1, 2}; /* 0 ignored */
    memcpy(g->ids, tg, sizeof tg);
}
static void xent_fwd(Tape *t, Gc *g) { OUT(g, op_linear_xent(t, g->leaf[0], g->leaf[1], g->leaf[2], g->ids, 0, 2, 0.0f, NULL)); }
/* consuming: logits made by an op (a leaf already has a gradient), so backward overwrites them */
static void ce_consume_fwd(Tape *t, Gc *g) {
    OUT(g, op_cross_entropy_consume(t, op_scale(t, g->leaf[0], 1.5f), g->ids, 0, 0.0f, NULL));
}
/* label smoothing: every class gets a share of the gradient, the ignored row none */
static void ce_smooth_fwd(Tape *t, Gc *g) {
    OUT(g, op_cross_entropy_consume(t, op_scale(t, g->leaf[0], 1.5f), g->ids, 0, 0.3f, NULL));
}
static void xent_smooth_fwd(Tape *t, Gc *g) {
    OUT(g, op_linear_xent(t, g->leaf[0], g->leaf[1], g->leaf[2], g->ids, 0, 2, 0.1f, NULL));
}

/* ---- gather (repeated ids accumulate), concat, slice, dropout ---- */
static void gather_setup(Gc *g) {
    gc_leaf(g, 2, SH(5, 3), -1, 1);
    const int32_t ids[] = {4, 1, 4, 0, 1, 1};
    memcpy(g->ids, ids, sizeof ids);
}
static void gather_fwd(Tape *t, Gc *g) { OUT(g, op_gather_rows(t, g->leaf[0], g->ids, 6)); }
/* scatter: rows 1, 2, 5 of 7 (gaps before, between and after); scaled so the zero rows get a
 * gradient too and must give none back */
static void scatter_setup(Gc *g) {
    gc_leaf(g, 2, SH(3, 4), -1, 1);
    const int32_t ids[] = {1, 2, 5};
    memcpy(g->ids, ids, sizeof ids);
}
static void scatter_fwd(Tape *t, Gc *g) { OUT(g, op_scale(t, op_scatter_rows(t, g->leaf[0], g->ids, 3, 7), 1.5f)); }
static void concat_setup(Gc *g) {
    gc_leaf(g, 3, SH(2, 3, 2), -1, 1);
    gc_leaf(g, 3, SH(2, 3, 4), -1, 1);
}
static void concat_fwd(Tape *t, Gc *g) { OUT(g, op_concat(t, g->leaf[0], g->leaf[1])); }
static void slice_fwd(Tape *t, Gc *g) { OUT(g, op_slice(t, g->leaf[1], 1, 2)); }
static void concat_rows_setup(Gc *g) {
    gc_leaf(g, 2, SH(5, 2), -1, 1);
    gc_leaf(g, 2, SH(5, 3), -1, 1);
    const int32_t ids[] = {4, 1, 4, 0};
    memcpy(g->ids, ids, sizeof ids);
}
static void concat_rows_fwd(Tape *t, Gc *g) { OUT(g, op_concat_rows(t, g->leaf[0], g->leaf[1], g->ids, 4)); }
static void dropout_fwd(Tape *t, Gc *g) {
    Rng r;
    rng_init(&r, 5, RNG_STREAM_DROPOUT); /* the same mask on every evaluation */
    OUT(g, op_dropout(t, g->leaf[0], 0.4f, &r));
}

/* ---- the fused recurrence: reversed, padded, with an initial state ---- */
static void seq_setup_state(Gc *g, CellKind kind, float state) {
    int S = 4, B = 3, H = 3, G = (kind == CELL_GRU ? 3 : 4) * H;
    gc_leaf(g, 2, SH(S * B, G), -1, 1); /* xg */
    gc_leaf(g, 2, SH(B, H), -state, state); /* h0 */
    gc_leaf(g, 2, SH(G, H), -0.8f, 0.8f);
    gc_leaf(g, 1, SH(G), -0.5f, 0.5f);
    if (kind == CELL_LSTM) gc_leaf(g, 2, SH(B, H), -state, state); /* c0 */
    const int lens[3] = {4, 2, 1};
    for (int s = 0; s < S; s++)
        for (int b = 0; b < B; b++) g->mask[s * B + b] = s < lens[b];
    g->flags = kind;
}
static void gru_seq_setup(Gc *g) { seq_setup_state(g, CELL_GRU, 1.0f); }
static void lstm_seq_setup(Gc *g) { seq_setup_state(g, CELL_LSTM, 1.0f); }
/* a zero initial state: reversed padded rows start from it, so backward reads the states
 * before each step from the outputs (the encoder's case) instead of keeping them */
static void gru_seq_zero_setup(Gc *g) { seq_setup_state(g, CELL_GRU, 0.0f); }
static void lstm_seq_zero_setup(Gc *g) { seq_setup_state(g, CELL_LSTM, 0.0f); }
static void seq_dir_fwd(Tape *t, Gc *g, bool reverse) {
    CellKind kind = (CellKind)g->flags;
    Tensor *cells = NULL;
    OUT(g, op_rnn_seq(t, kind, g->leaf[0], g->leaf[1], kind == CELL_LSTM ? g->leaf[4] : NULL, g->leaf[2], g->leaf[3],
                      g->mask, reverse, &cells));
    if (cells) OUT(g, cells);
}
static void seq_fwd(Tape *t, Gc *g) { seq_dir_fwd(t, g, true); }
/* train.recompute: the GRU's W_hn h made again in backward */
static void seq_recompute_fwd(Tape *t, Gc *g) {
    t->recompute = true;
    seq_dir_fwd(t, g, true);
}
static void seq_forward_fwd(Tape *t, Gc *g) { seq_dir_fwd(t, g, false); }
/* consuming: xg made by an op, whose values the gates then overwrite */
static void seq_consume_fwd(Tape *t, Gc *g) {
    CellKind kind = (CellKind)g->flags;
    Tensor *cells = NULL;
    OUT(g, op_rnn_seq_consume(t, kind, op_scale(t, g->leaf[0], 1.5f), g->leaf[1], kind == CELL_LSTM ? g->leaf[4] : NULL,
                              g->leaf[2], g->leaf[3], g->mask, true, &cells));
    if (cells) OUT(g, cells);
}

/* ---- additive attention scores ---- */
static void additive_setup(Gc *g) {
    gc_leaf(g, 3, SH(3, 2, 4), -1, 1); /* q (T, B, A) */
    gc_leaf(g, 3, SH(5, 2, 4), -1, 1); /* k (S, B, A) */
    gc_leaf(g, 1, SH(4), -1, 1);       /* v */
}
static void additive_fwd(Tape *t, Gc *g) { OUT(g, op_additive_scores(t, g->leaf[0], g->leaf[1], g->leaf[2])); }

/* ---- layers: embedding, linear, GRU/LSTM over padded batches ---- */
static void emb_layer_setup(Gc *g) {
    gc_leaf(g, 2, SH(7, 3), -1, 1);
    const int32_t ids[] = {6, 2, 2, 0, 5};
    memcpy(g->ids, ids, sizeof ids);
}
static void emb_layer_fwd(Tape *t, Gc *g) {
    Embedding e = {g->leaf[0]};
    OUT(g, embedding_forward(t, &e, g->ids, 5));
}
static void lin_layer_fwd(Tape *t, Gc *g) {
    Linear l = {g->leaf[1], g->leaf[2]};
    OUT(g, linear_forward(t, &l, g->leaf[0]));
}

/* An Rnn whose weights are gradcheck leaves: x (S,B,E) is leaf 0, h0 leaf 1 (and c0 leaf 2
 * for an LSTM), then 4 tensors per (layer, direction). */
enum { RS = 4, RB = 3, RE = 3, RH = 3 };
static void rnn_setup_common(Gc *g, CellKind cell, int layers, int dirs, bool init_state) {
    int G = (cell == CELL_GRU ? 3 : 4) * RH;
    gc_leaf(g, 3, SH(RS, RB, RE), -1, 1);
    if (init_state) {
        gc_leaf(g, 2, SH(RB, RH), -1, 1);
        if (cell == CELL_LSTM) gc_leaf(g, 2, SH(RB, RH), -1, 1);
    }
    for (int l = 0; l < layers; l++)
        for (int d = 0; d < dirs; d++) {
            int in = l == 0 ? RE : dirs * RH;
            gc_leaf(g, 2, SH(G, in), -0.7f, 0.7f);
            gc_leaf(g, 2, SH(G, RH), -0.7f, 0.7f);
            gc_leaf(g, 1, SH(G), -0.5f, 0.5f);
            gc_leaf(g, 1, SH(G), -0.5f, 0.5f);
        }
    g->lens[0] = 4;
    g->lens[1] = 2;
    g->lens[2] = 1;
    g->flags = (int)cell | (layers << 4) | (dirs << 8) | (init_state << 12);
}
static void rnn_fwd(Tape *t, Gc *g) {
    CellKind cell = (CellKind)(g->flags & 15);
    int layers = (g->flags >> 4) & 15, dirs = (g->flags >> 8) & 15;
    bool init_state = (g->flags >> 12) & 1;
    Rnn r;
    memset(&r, 0, sizeof r);
    r.cell = cell;
    r.input = RE;
    r.hidden = RH;
    r.layers = layers;
    r.dirs = dirs;
    int k = 1;
    Tensor *h0[1] = {NULL}, *c0[1] = {NULL};
    if (init_state) {
        h0[0] = g->leaf[k++];
        if (cell == CELL_LSTM) c0[0] = g->leaf[k++];
    }
    for (int l = 0; l < layers; l++)
        for (int d = 0; d < dirs; d++) {
            r.w[l][d] = (RnnWeights){g->leaf[k], g->leaf[k + 1], g->leaf[k + 2], g->leaf[k + 3]};
            k += 4;
        }
    RnnOutput o = rnn_forward(t, &r, g->leaf[0], g->lens, init_state ? h0 : NULL, init_state ? c0 : NULL);
    OUT(g, o.out);
    OUT(g, o.h_last[layers - 1][0]);
    if (dirs == 2) OUT(g, o.h_last[layers - 1][1]);
    if (cell == CELL_LSTM) OUT(g, o.c_last[layers - 1][0]);
}
static void gru_bi2_setup(Gc *g) { rnn_setup_common(g, CELL_GRU, 2, 2, false); }
static void gru_uni_h0_setup(Gc *g) { rnn_setup_common(g, CELL_GRU, 1, 1, true); }
static void lstm_uni_setup(Gc *g) { rnn_setup_common(g, CELL_LSTM, 1, 1, true); }
static void lstm_bi_setup(Gc *g) { rnn_setup_common(g, CELL_LSTM, 1, 2, false); }

/* ---- layer norm: with gain and bias, without, and rows of a 3-D tensor ---- */
static void gelu_fwd(Tape *t, Gc *g) { OUT(g, op_gelu(t, g->leaf[0])); }

static void ln_setup(Gc *g) {
    gc_leaf(g, 3, SH(2, 3, 6), -2, 2);
    gc_leaf(g, 1, SH(6), 0.5f, 1.5f);
    gc_leaf(g, 1, SH(6), -0.5f, 0.5f);
}
static void ln_fwd(Tape *t, Gc *g) { OUT(g, op_layer_norm(t, g->leaf[0], g->leaf[1], g->leaf[2], 1e-5f)); }
static void ln_bare_setup(Gc *g) { gc_leaf(g, 2, SH(4, 5), -1, 1); }
/* rows of 37: the kernels' 8-wide lanes (and their vector loops) and a tail of 5 */
static void ln_wide_setup(Gc *g) {
    gc_leaf(g, 2, SH(3, 37), -2, 2);
    gc_leaf(g, 1, SH(37), 0.5f, 1.5f);
    gc_leaf(g, 1, SH(37), -0.5f, 0.5f);
}
static void ln_wide_bare_setup(Gc *g) { gc_leaf(g, 2, SH(3, 37), -1, 1); }
static void ln_bare_fwd(Tape *t, Gc *g) { OUT(g, op_layer_norm(t, g->leaf[0], NULL, NULL, 0.1f)); }
static void ln_bare_fresh_fwd(Tape *t, Gc *g) { OUT(g, op_layer_norm(t, inner(t, g->leaf[0]), NULL, NULL, 0.1f)); }
static void ln_fresh_fwd(Tape *t, Gc *g) {
    OUT(g, op_layer_norm(t, inner(t, g->leaf[0]), g->leaf[1], g->leaf[2], 1e-5f));
}

static const GradCase CASES[] = {
    {"matmul_nn", mm2_nn, mm_fwd},
    {"matmul_tn", mm2_tn, mm_fwd},
    {"matmul_nt", mm2_nt, mm_fwd},
    {"matmul_tt", mm2_tt, mm_fwd},
    {"bmm_nn", bmm_nn, mm_fwd},
    {"bmm_tt", bmm_tt, mm_fwd},
    {"bmm_scores_time_major", bmm_scores, mm_fwd},
    {"bmm_context_time_major", bmm_context, mm_fwd},
    {"bmm_time_major_trans_a", bmm_tm_trans_a, mm_fwd},
    {"linear", lin_setup, lin_fwd},
    {"linear_nobias", lin_setup, lin_nobias_fwd},
    {"add", two_setup, add_fwd},
    {"add_bias", bias_setup, bias_fwd},
    {"mul", two_setup, mul_fwd},
    {"scale", one_setup, scale_fwd},
    {"tanh", one_setup, tanh_fwd},
    {"sigmoid", one_setup, sigmoid_fwd},
    {"relu", relu_setup, relu_fwd},
    {"exp", one_setup, exp_fwd},
    {"log", pos_setup, log_fwd},
    {"sum", one_setup, sum_fwd},
    {"mean", one_setup, mean_fwd},
    {"accumulate", one_setup, accum_fwd},
    {"add_fresh", two_setup, add_fresh_fwd},
    {"scale_fresh", one_setup, scale_fresh_fwd},
    {"relu_fresh", relu_setup, relu_fresh_fwd},
    {"matmul_nt_fresh", mm2_nt, mm_fresh_fwd},
    {"bmm_time_major_trans_a_fresh", bmm_tm_trans_a, mm_fresh_fwd},
    {"dropout_fresh", one_setup, dropout_fresh_fwd},
    {"softmax", sm_setup, sm_fwd},
    {"softmax_mask", sm_mask_setup, sm_mask_fwd},
    {"softmax_causal", sm_causal_setup, sm_causal_fwd},
    {"softmax_mask_fresh", sm_mask_setup, sm_fresh_fwd},
    {"cross_entropy", ce_setup, ce_fwd},
    {"cross_entropy_consume", ce_setup, ce_consume_fwd},
    {"linear_xent", xent_setup, xent_fwd},
    {"cross_entropy_smoothed", ce_setup, ce_smooth_fwd},
    {"linear_xent_smoothed", xent_setup, xent_smooth_fwd},
    {"gather_rows", gather_setup, gather_fwd},
    {"scatter_rows", scatter_setup, scatter_fwd},
    {"concat", concat_setup, concat_fwd},
    {"concat_rows", concat_rows_setup, concat_rows_fwd},
    {"slice", concat_setup, slice_fwd},
    {"dropout", one_setup, dropout_fwd},
    {"gru_seq_reverse_padded", gru_seq_setup, seq_fwd},
    {"lstm_seq_reverse_padded", lstm_seq_setup, seq_fwd},
    {"gru_seq_reverse_padded_zero_state", gru_seq_zero_setup, seq_fwd},
    {"lstm_seq_reverse_padded_zero_state", lstm_seq_zero_setup, seq_fwd},
    {"gru_seq_forward_padded", gru_seq_setup, seq_forward_fwd},
    {"gru_seq_reverse_padded_recompute", gru_seq_setup, seq_recompute_fwd},
    {"gru_seq_reverse_padded_zero_state_recompute", gru_seq_zero_setup, seq_recompute_fwd},
    {"lstm_seq_forward_padded", lstm_seq_setup, seq_forward_fwd},
    {"gru_seq_consume", gru_seq_setup, seq_consume_fwd},
    {"lstm_seq_consume", lstm_seq_setup, seq_consume_fwd},
    {"additive_scores", additive_setup, additive_fwd},
    {"layer_norm", ln_setup, ln_fwd},
    {"gelu", one_setup, gelu_fwd},
    {"layer_norm_bare", ln_bare_setup, ln_bare_fwd},
    {"layer_norm_fresh", ln_setup, ln_fresh_fwd},
    {"layer_norm_wide", ln_wide_setup, ln_fwd},
    {"layer_norm_wide_fresh", ln_wide_setup, ln_fresh_fwd},
    {"layer_norm_wide_bare", ln_wide_bare_setup, ln_bare_fwd},
    {"layer_norm_wide_bare_fresh", ln_wide_bare_setup, ln_bare_fresh_fwd},
    {"layer_embedding", emb_layer_setup, emb_layer_fwd},
    {"layer_linear", lin_setup, lin_layer_fwd},
    {"layer_gru_bidir_2layers", gru_bi2_setup, rnn_fwd},
    {"layer_gru_h0", gru_uni_h0_setup, rnn_fwd},
    {"layer_lstm_h0_c0", lstm_uni_setup, rnn_fwd},
    {"layer_lstm_bidir", lstm_bi_setup, rnn_fwd},
};
#define N_CASES ((int)(sizeof CASES / sizeof CASES[0]))

ParameterizedTestParameters(gradcheck, op) {
    static int idx[N_CASES];
    for (int i = 0; i < N_CASES; i++) idx[i] = i;
    return cr_make_param_array(int, idx, N_CASES);
}

ParameterizedTest(int *i, gradcheck, op) {
    char why[256] = "";
    cr_log_info("case %s", CASES[*i].name);
    bool ok = gc_run(&CASES[*i], why, sizeof why, NULL);
    cr_assert(ok, "%s", why);
}

/* Every op of the op table must be exercised by some check above: a new op without a
 * gradient check fails here. */
Test(gradcheck, every_op_is_checked) {
    bool seen[OP_COUNT] = {false};
    char why[256];
    for (int i = 0; i < N_CASES; i++) gc_run(&CASES[i], why, sizeof why, seen);
    for (int op = 0; op < OP_COUNT; op++) cr_expect(seen[op], "op %s has no gradient check", OP_NAME[op]);
}

/* The checker itself must catch a wrong gradient: a deliberately broken backward. */
static void broken_fwd(Tape *t, Gc *g) {
    Tensor *y = op_tanh(t, g->leaf[0]);
    t->nodes[t->n_nodes - 1].op = OP_SIGMOID; /* tanh's forward with sigmoid's backward */
    OUT(g, y);
}
Test(gradcheck, detects_a_wrong_backward) {
    GradCase c = {"broken", one_setup, broken_fwd};
    char why[256] = "";
    cr_assert(!gc_run(&c, why, sizeof why, NULL), "a wrong gradient passed the check");
}
