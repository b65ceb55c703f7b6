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
#include "s2s/tensor.h"

#include <stdint.h>

/* One entry per op; OP_NAME and OP_BACKWARD (tape.c) are indexed by it. */
typedef enum OpKind {
    OP_MATMUL,        /* (batched) matrix product with transposes and time-major layouts */
    OP_LINEAR,        /* x W^T + b */
    OP_ADD,
    OP_ADD_BIAS,      /* x + b broadcast over rows */
    OP_MUL,
    OP_SCALE,
    OP_TANH,
    OP_SIGMOID,
    OP_RELU,
    OP_EXP,
    OP_LOG,
    OP_SOFTMAX,       /* over the last axis, with an optional mask */
    OP_CROSS_ENTROPY, /* log-softmax + NLL, ignore index, mean */
    OP_GATHER_ROWS,   /* embedding lookup */
    OP_CONCAT,        /* along the last axis */
    OP_SLICE,         /* along the last axis */
    OP_DROPOUT,
    OP_SUM,
    OP_MEAN,
    OP_RNN_SEQ,       /* a whole GRU/LSTM direction: fused cells, hand-written backward */
    OP_ADDITIVE_SCORES, /* v · tanh(q_t + k_s) for every (t, s) */
    OP_LINEAR_XENT,   /* linear + cross entropy a chunk of rows at a time: no whole logits */
    OP_LAYER_NORM,    /* over the last axis, with gain and bias */
    OP_GELU,          /* x Φ(x), exact */
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

typedef struct GemmPlans GemmPlans;

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
    bool bf16;         /* GEMM operands in bfloat16, float32 accumulation (gemm.h) */
    bool openblas;     /* float32 GEMMs by OpenBLAS instead of oneDNN (gemm.h) */
    bool int8;         /* products against frozen weights in int8, the rest float32 (gemm.h) */
    bool bf16_matmul;  /* bf16 products through matmul primitives: set where the CPU has AMX (gemm.h) */
    bool free_values;  /* backward recycles dead forward values as it does dead gradients (above) */
    bool recompute;    /* ops recompute in backward what costs a small product, instead of keeping it */
    TapeScreen screen; /* op_linear_argmax's approximate products (zero: auto) */
    bool screen_check; /* tests: op_linear_argmax asserts its shortcut kept every column it must */
    /* the step's loss is the objective, seeded with 1 (tape_backward), and the parameters'
     * gradients are zeroed before forward: the chunked loss (op_linear_xent) then writes its
     * inputs' gradients as it goes, rather than computing its logits again in backward */
    bool loss_grads_early;
    double flops;      /* GEMM floating-point operations so far (for benchmarks; never reset) */
    struct GemmPlans *gemm_plans; /* matmul primitives and packed weights (gemm.c), made on first use */
    struct ArgmaxCache *argmax_cache; /* op_linear_argmax's per-column bound factors per frozen weight */
    struct GemmStats *gemm_stats; /* borrowed: when set, every product is timed into it (gemm.h) */
    /* borrowed: when set, called after each node's turn in backward, last node first (a
     * data-parallel step starts summing the gradients that are final) */
    void (*after_node)(void *ctx, int node);
    void *after_node_ctx;
    /* gradient buffers of tensors whose producer has run its backward: tensor_grad reuses them,
     * so backward holds only the live gradients, not every one (kept across resets) */
    struct GradBuf { float *p; size_t n; } *free_grads;
    int n_free_grads, cap_free_grads;
} Tape;

void tape_init(Tape *t, size_t arena_bytes);
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
