/* tape.h — reverse-mode autograd: the tape of recorded ops and the step's arena.
 *
 * A Tape owns an Arena (activations, saved values, temporary gradients) and the list of
 * nodes recorded by the ops of ops.h. Every op runs its forward at once and, when some
 * input requires a gradient and recording is on, appends a node whose backward (in the op
 * table, OP_BACKWARD) accumulates (+=) into its inputs' gradients. tape_reset drops the
 * nodes and everything in the arena in O(1); tensors made by the tape die with it.
 * The tape borrows parameter tensors (their data and grad stay in the ParamStore).
 * During backward, the gradient of a tensor whose producing node has run its backward is
 * dead; its buffer goes to a free list that later gradients draw on, so the arena holds
 * the live gradients rather than all of them. Read intermediate gradients inside backward
 * only: after tape_backward, only leaves' gradients (no producing node) keep their values.
 * With free_values set (a training step, which reads its loss before backward), the forward
 * values of a node's outputs join that free list too once the node has run backward: after
 * tape_backward, no tensor made by an op keeps its values. */
#ifndef S2S_TAPE_H
#define S2S_TAPE_H

#include "s2s/arena.h"
#include "s2s/engine.h"
#include "s2s/tensor.h"

#include <stdint.h>

/* The ops, written once: X(kind, name, backward). OpKind, OP_NAME and tape.c's OP_BACKWARD
 * (and the backwards' declarations, ops_internal.h) are made from this list, so an op is one
 * line here, its forward and backward in an ops_*.c, and its gradient check. */
#define S2S_OPS(X) \
    /* (batched) matrix product with transposes and time-major layouts */ \
    X(OP_MATMUL, "matmul", op_matmul_backward) \
    /* x W^T + b */ \
    X(OP_LINEAR, "linear", op_linear_backward) \
    X(OP_ADD, "add", op_add_backward) \
    /* x + b broadcast over rows */ \
    X(OP_ADD_BIAS, "add_bias", op_add_bias_backward) \
    X(OP_MUL, "mul", op_mul_backward) \
    X(OP_SCALE, "scale", op_scale_backward) \
    X(OP_TANH, "tanh", op_tanh_backward) \
    X(OP_SIGMOID, "sigmoid", op_sigmoid_backward) \
    X(OP_RELU, "relu", op_relu_backward) \
    X(OP_EXP, "exp", op_exp_backward) \
    X(OP_LOG, "log", op_log_backward) \
    /* over the last axis, with an optional mask */ \
    X(OP_SOFTMAX, "softmax", op_softmax_backward) \
    /* log-softmax + NLL, ignore index, mean */ \
    X(OP_CROSS_ENTROPY, "cross_entropy", op_cross_entropy_backward) \
    /* embedding lookup */ \
    X(OP_GATHER_ROWS, "gather_rows", op_gather_rows_backward) \
    /* gather's inverse, zeros elsewhere */ \
    X(OP_SCATTER_ROWS, "scatter_rows", op_scatter_rows_backward) \
    /* along the last axis */ \
    X(OP_CONCAT, "concat", op_concat_backward) \
    /* along the last axis */ \
    X(OP_SLICE, "slice", op_slice_backward) \
    X(OP_DROPOUT, "dropout", op_dropout_backward) \
    X(OP_SUM, "sum", op_sum_backward) \
    X(OP_MEAN, "mean", op_mean_backward) \
    /* a whole GRU/LSTM direction: fused cells, hand-written backward */ \
    X(OP_RNN_SEQ, "rnn_seq", op_rnn_seq_backward) \
    /* v · tanh(q_t + k_s) for every (t, s) */ \
    X(OP_ADDITIVE_SCORES, "additive_scores", op_additive_scores_backward) \
    /* linear + cross entropy a chunk of rows at a time: no whole logits */ \
    X(OP_LINEAR_XENT, "linear_xent", op_linear_xent_backward) \
    /* over the last axis, with gain and bias */ \
    X(OP_LAYER_NORM, "layer_norm", op_layer_norm_backward) \
    /* x Φ(x), exact */ \
    X(OP_GELU, "gelu", op_gelu_backward)

typedef enum OpKind {
#define S2S_OP_KIND(kind, name, backward) kind,
    S2S_OPS(S2S_OP_KIND)
#undef S2S_OP_KIND
    OP_COUNT
} OpKind;

extern const char *const OP_NAME[OP_COUNT];

typedef struct TapeNode {
    OpKind op;
    Tensor *out;
    Tensor *out2;     /* a second output (the LSTM cell state), or NULL */
    Tensor *in[5];
    void *saved;      /* op-specific values kept for backward, in the arena */
    void *saved2;
    const uint8_t *mask; /* a row mask kept for backward (padding), or NULL */
    float f;
    int i[4];
} TapeNode;

/* How op_linear_argmax screens a float32 tape's logits before computing the few it needs
 * exactly: auto takes int8 products where oneDNN has vector int8 kernels (AVX2 or wider),
 * else bfloat16 where the CPU multiplies it natively, else float32; the others force one way. */
typedef enum TapeScreen { TAPE_SCREEN_AUTO, TAPE_SCREEN_F32, TAPE_SCREEN_BF16, TAPE_SCREEN_INT8 } TapeScreen;

typedef struct Tape {
    Arena arena;
    TapeNode *nodes;  /* kept across resets: no malloc in a steady-state step */
    int n_nodes;
    int cap_nodes;
    bool grad_enabled; /* record nodes (training); false for inference */
    bool training;     /* dropout active */
    bool free_values;  /* backward recycles dead forward values as it does dead gradients (above) */
    bool recompute;    /* ops recompute in backward what costs a small product, instead of keeping it */
    TapeScreen screen; /* op_linear_argmax's approximate products (zero: auto) */
    bool screen_check; /* tests: op_linear_argmax asserts its shortcut kept every column it must */
    /* the step's loss is the objective, seeded with 1 (tape_backward), and the parameters'
     * gradients are zeroed before forward: the chunked loss (op_linear_xent) then writes its
     * inputs' gradients as it goes, rather than computing its logits again in backward */
    bool loss_grads_early;
    double flops;      /* GEMM floating-point operations so far (for benchmarks; never reset) */
    Engine eng;        /* where and how it computes: precision, GEMM library, plans, caches (engine.h) */
    /* borrowed: when set, called after each node's turn in backward, last node first (a
     * data-parallel step starts summing the gradients that are final) */
    void (*after_node)(void *ctx, int node);
    void *after_node_ctx;
    /* gradient buffers of tensors whose producer has run its backward: tensor_grad reuses them,
     * so backward holds only the live gradients, not every one (kept across resets) */
    struct GradBuf { float *p; size_t n; } *free_grads;
    int n_free_grads, cap_free_grads;
} Tape;

/* A tape on the default engine (float32, oneDNN); tape_init_engine: on the engine these
 * settings make (engine_init: bf16 checked against this CPU, threads set). */
void tape_init(Tape *t, size_t arena_bytes);
S2sStatus tape_init_engine(Tape *t, Precision precision, GemmLib gemm, int threads, const char *who, S2sError *err);
static inline bool tape_bf16(const Tape *t) { return t->eng.precision == PRECISION_BF16; }
static inline bool tape_int8(const Tape *t) { return t->eng.precision == PRECISION_INT8; }
static inline bool tape_openblas(const Tape *t) { return t->eng.gemm == GEMM_LIB_OPENBLAS; }
/* What a product on this tape borrows (gemm.h): the engine's settings and plans, the tape's
 * arena and FLOP counter, whether gradients follow. Made per call, so it never goes stale. */
static inline GemmCtx tape_gemm_ctx(Tape *t) {
    return (GemmCtx){.precision = t->eng.precision, .lib = t->eng.gemm, .bf16_matmul = t->eng.bf16_matmul,
                     .plans = &t->eng.gemm_plans, .stats = t->eng.gemm_stats, .arena = &t->arena,
                     .flops = &t->flops, .training = t->grad_enabled};
}
/* Row-major C = alpha op(A) op(B) + beta C in the tape's precision (gemm_op, no weight). */
static inline void tape_gemm(Tape *t, bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda,
                             const float *B, int ldb, float beta, float *C, int ldc) {
    GemmCtx g = tape_gemm_ctx(t);
    gemm_op(&g, ta, tb, M, N, K, alpha, A, lda, NULL, B, ldb, NULL, NULL, beta, C, ldc);
}
/* What a tape does besides computing: record for gradients, apply dropout. */
typedef struct TapeMode {
    bool grad_enabled, training;
} TapeMode;
/* Inference (no gradients, no dropout) until tape_leave with the mode returned. */
TapeMode tape_enter_inference(Tape *t);
void tape_leave(Tape *t, TapeMode m);
void tape_free(Tape *t);
void tape_reset(Tape *t);

/* Arena tensors: uninitialised (tape_tensor) or zeroed (tape_zeros). */
Tensor *tape_tensor(Tape *t, int ndim, const int *shape);
Tensor *tape_zeros(Tape *t, int ndim, const int *shape);
Tensor *tape_tensor1(Tape *t, int d0);
Tensor *tape_tensor2(Tape *t, int d0, int d1);
Tensor *tape_tensor3(Tape *t, int d0, int d1, int d2);
/* A view of `size(shape)` elements of x starting at element `offset`; shares data and
 * gradient with x. A reshape is a view at offset 0 with the same number of elements. */
Tensor *tape_view(Tape *t, Tensor *x, size_t offset, int ndim, const int *shape);
Tensor *tape_reshape2(Tape *t, Tensor *x, int d0, int d1);
Tensor *tape_reshape3(Tape *t, Tensor *x, int d0, int d1, int d2);

/* The gradient buffer of x, created zeroed on first use (through the base for views): a
 * dead gradient's buffer when one is large enough, else new arena memory. tensor_grad_if
 * returns NULL instead of creating it. */
float *tensor_grad(Tape *t, Tensor *x);
float *tensor_grad_if(Tensor *x);
/* For a backward that writes every element of x's gradient: when x (not a view) has none
 * yet, a buffer left unzeroed and *fresh set (write, do not add); else tensor_grad's. */
float *tensor_grad_to_write(Tape *t, Tensor *x, bool *fresh);

/* For ops' backward scratch: a dead buffer of at least n floats (*got of them), zeroed when
 * asked (else as it was), or NULL when the free list has none; tape_give_dead hands it back
 * (or any dead buffer). */
float *tape_take_dead(Tape *t, size_t n, bool zero, size_t *got);
void tape_give_dead(Tape *t, float *p, size_t n);

/* For ops: whether the output of inputs a, b, ... needs a node. */
bool tape_wants(const Tape *t, const Tensor *a, const Tensor *b, const Tensor *c);
TapeNode *tape_record(Tape *t, OpKind op, Tensor *out);
/* A second output of the node just recorded (the LSTM's cell states). */
void tape_record_out2(Tape *t, TapeNode *n, Tensor *out2);

/* Backpropagate from a scalar (its gradient seeded with 1), or from any output with a
 * given seed gradient (tests use a random seed: loss = sum(seed * out)). */
void tape_backward(Tape *t, Tensor *loss);
void tape_backward_seed(Tape *t, Tensor *out, const float *seed);
/* Backpropagate from gradients already placed on outputs (with tensor_grad): for several
 * outputs at once. */
void tape_propagate(Tape *t);

#endif
