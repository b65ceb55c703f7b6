/* tape.c — node recording, the op table, and the backward sweep. */
#include "ops_internal.h"
#include "s2s/par.h"

#include <stdlib.h>
#include <string.h>

const char *const OP_NAME[OP_COUNT] = {
#define S2S_OP_NAME(kind, name, backward) [kind] = name,
    S2S_OPS(S2S_OP_NAME)
#undef S2S_OP_NAME
};

static const OpBackward OP_BACKWARD[OP_COUNT] = {
#define S2S_OP_BACKWARD(kind, name, backward) [kind] = backward,
    S2S_OPS(S2S_OP_BACKWARD)
#undef S2S_OP_BACKWARD
};

TapeMode tape_enter_inference(Tape *t) {
    TapeMode m = {t->grad_enabled, t->training};
    t->grad_enabled = t->training = false;
    return m;
}

void tape_leave(Tape *t, TapeMode m) {
    t->grad_enabled = m.grad_enabled;
    t->training = m.training;
}

void tape_init(Tape *t, size_t arena_bytes) {
    memset(t, 0, sizeof *t);
    arena_init_reserved(&t->arena, arena_bytes);
    t->grad_enabled = true;
    t->training = true;
}

S2sStatus tape_init_engine(Tape *t, Precision precision, GemmLib gemm, int threads, const char *who, S2sError *err) {
    Engine e;
    S2sStatus st = engine_init(&e, precision, gemm, threads, who, err);
    if (st) return st;
    tape_init(t, 1 << 20);
    t->eng = e;
    return S2S_OK;
}

void tape_free(Tape *t) {
    engine_free(&t->eng);
    arena_free(&t->arena);
    free(t->nodes);
    free(t->free_grads);
    memset(t, 0, sizeof *t);
}

void tape_reset(Tape *t) {
    arena_reset(&t->arena);
    t->n_nodes = 0;
    t->n_free_grads = 0;
}

Tensor *tape_tensor(Tape *t, int ndim, const int *shape) {
    Tensor *x = arena_alloc(&t->arena, sizeof *x);
    memset(x, 0, sizeof *x);
    x->ndim = ndim;
    memcpy(x->shape, shape, (size_t)ndim * sizeof *shape);
    x->size = tensor_numel(ndim, shape);
    x->data = arena_alloc(&t->arena, x->size * sizeof(float));
    return x;
}

Tensor *tape_zeros(Tape *t, int ndim, const int *shape) {
    Tensor *x = tape_tensor(t, ndim, shape);
    memset(x->data, 0, x->size * sizeof(float));
    return x;
}

Tensor *tape_tensor1(Tape *t, int d0) { return tape_tensor(t, 1, (int[]){d0}); }
Tensor *tape_tensor2(Tape *t, int d0, int d1) { return tape_tensor(t, 2, (int[]){d0, d1}); }
Tensor *tape_tensor3(Tape *t, int d0, int d1, int d2) { return tape_tensor(t, 3, (int[]){d0, d1, d2}); }

Tensor *tape_view(Tape *t, Tensor *x, size_t offset, int ndim, const int *shape) {
    Tensor *v = arena_alloc(&t->arena, sizeof *v);
    memset(v, 0, sizeof *v);
    v->ndim = ndim;
    memcpy(v->shape, shape, (size_t)ndim * sizeof *shape);
    v->size = tensor_numel(ndim, shape);
    S2S_ASSERT(offset + v->size <= x->size);
    v->base = x->base ? x->base : x;
    v->offset = (x->base ? x->offset : 0) + offset;
    v->data = v->base->data + v->offset;
    v->requires_grad = x->requires_grad;
    return v;
}

Tensor *tape_reshape2(Tape *t, Tensor *x, int d0, int d1) {
    return tape_view(t, x, 0, 2, (int[]){d0, d1});
}

Tensor *tape_reshape3(Tape *t, Tensor *x, int d0, int d1, int d2) {
    return tape_view(t, x, 0, 3, (int[]){d0, d1, d2});
}

float *tensor_grad_if(Tensor *x) {
    if (x->grad) return x->grad;
    if (x->base && x->base->grad) return x->grad = x->base->grad + x->offset;
    return NULL;
}

/* The free list holds dead buffers in the arena's units (64 bytes, 16 floats), which is
 * what each allocation really occupies: neighbours merge, and a buffer larger than asked
 * is split, its rest staying listed. */
#define FREE_UNIT 16
#define FREE_SPLIT_MIN 4096 /* floats: smaller rests stay with the buffer taken */

static size_t free_units(size_t n) { return (n + FREE_UNIT - 1) / FREE_UNIT * FREE_UNIT; }

/* The smallest dead buffer that holds n floats (taken off the list), or NULL; *got: its
 * floats. The list's order depends only on the tape's ops, so the choice is the same every
 * run. */
static float *take_free_grad(Tape *t, size_t n, size_t *got) {
    n = free_units(n);
    int best = -1;
    for (int i = 0; i < t->n_free_grads; i++)
        if (t->free_grads[i].n >= n && (best < 0 || t->free_grads[i].n < t->free_grads[best].n)) best = i;
    if (best < 0) return NULL;
    struct GradBuf *e = &t->free_grads[best];
    float *p = e->p;
    if (e->n - n >= FREE_SPLIT_MIN) { /* the rest stays listed */
        e->p += n;
        e->n -= n;
    } else {
        n = e->n;
        *e = t->free_grads[--t->n_free_grads];
    }
    if (got) *got = n;
    return p;
}

float *tensor_grad(Tape *t, Tensor *x) {
    if (tensor_grad_if(x)) return x->grad;
    Tensor *root = x->base ? x->base : x;
    root->grad = take_free_grad(t, root->size, NULL);
    if (!root->grad) root->grad = arena_alloc(&t->arena, root->size * sizeof(float));
    root->grad_recyclable = true;
    par_zero(root->grad, root->size);
    return x->grad = root->grad + (x->base ? x->offset : 0);
}

float *tensor_grad_to_write(Tape *t, Tensor *x, bool *fresh) {
    *fresh = false;
    if (tensor_grad_if(x) || x->base) return tensor_grad(t, x);
    x->grad = take_free_grad(t, x->size, NULL);
    if (!x->grad) x->grad = arena_alloc(&t->arena, x->size * sizeof(float));
    x->grad_recyclable = true;
    *fresh = true;
    return x->grad;
}

bool tape_wants(const Tape *t, const Tensor *a, const Tensor *b, const Tensor *c) {
    if (!t->grad_enabled) return false;
    return (a && a->requires_grad) || (b && b->requires_grad) || (c && c->requires_grad);
}

/* out is written by the newest node: it carries gradients, and its root remembers its first
 * writer (when that node has run backward, the root's gradient is dead). */
static void mark_output(Tape *t, Tensor *out) {
    Tensor *root = out->base ? out->base : out;
    if (!root->producer) root->producer = t->n_nodes; /* 1 + the newest node's index */
    else root->many_writers = true;
    out->requires_grad = true;
    if (out->base) out->base->requires_grad = true; /* the whole sequence now carries grads */
}

TapeNode *tape_record(Tape *t, OpKind op, Tensor *out) {
    if (t->n_nodes == t->cap_nodes) {
        t->cap_nodes = t->cap_nodes ? 2 * t->cap_nodes : 256;
        t->nodes = s2s_xrealloc(t->nodes, (size_t)t->cap_nodes * sizeof *t->nodes);
    }
    TapeNode *n = &t->nodes[t->n_nodes++];
    memset(n, 0, sizeof *n);
    n->op = op;
    n->out = out;
    mark_output(t, out);
    return n;
}

void tape_record_out2(Tape *t, TapeNode *n, Tensor *out2) {
    S2S_ASSERT(n == &t->nodes[t->n_nodes - 1] && !n->out2);
    n->out2 = out2;
    mark_output(t, out2);
}

void tape_give_dead(Tape *t, float *p, size_t n) {
    n = free_units(n);
    int below = -1, above = -1; /* listed neighbours in the arena: merged with it */
    for (int i = 0; i < t->n_free_grads; i++) {
        if (t->free_grads[i].p + t->free_grads[i].n == p) below = i;
        if (p + n == t->free_grads[i].p) above = i;
    }
    if (below >= 0 && above >= 0) {
        t->free_grads[below].n += n + t->free_grads[above].n;
        t->free_grads[above] = t->free_grads[--t->n_free_grads];
        return;
    }
    if (below >= 0) {
        t->free_grads[below].n += n;
        return;
    }
    if (above >= 0) {
        t->free_grads[above].p = p;
        t->free_grads[above].n += n;
        return;
    }
    if (t->n_free_grads == t->cap_free_grads) {
        t->cap_free_grads = t->cap_free_grads ? 2 * t->cap_free_grads : 64;
        t->free_grads = s2s_xrealloc(t->free_grads, (size_t)t->cap_free_grads * sizeof *t->free_grads);
    }
    t->free_grads[t->n_free_grads++] = (struct GradBuf){p, n};
}

float *tape_take_dead(Tape *t, size_t n, bool zero, size_t *got) {
    float *p = take_free_grad(t, n, got);
    if (p && zero) par_zero(p, n);
    return p;
}

static void release_grad(Tape *t, Tensor *out, int node) {
    Tensor *root = out->base ? out->base : out;
    if (root->producer != node + 1 || !root->grad_recyclable || !root->grad) return;
    tape_give_dead(t, root->grad, root->size);
    root->grad_recyclable = false;
}

static void free_value(Tape *t, Tensor *root) {
    if (!root->data || root->data == root->grad) return; /* consumed: freed as a gradient */
    tape_give_dead(t, root->data, root->size);
    root->data = NULL; /* a read after this is a bug: fail loudly */
}

/* Every node that reads or writes out's root comes after its first writer: once that
 * writer has run backward, nothing reads the values again. */
static void release_value(Tape *t, Tensor *out, int node) {
    Tensor *root = out->base ? out->base : out;
    if (root->producer == node + 1) free_value(t, root);
}

/* The backward of these reads its own output (the derivative is a function of it). */
static const bool OP_READS_OUT[OP_COUNT] = {
    [OP_TANH] = true, [OP_SIGMOID] = true, [OP_RELU] = true, [OP_EXP] = true, [OP_SOFTMAX] = true,
    [OP_RNN_SEQ] = true, /* the states before each step, from its outputs */
};

/* Earlier still: an input's values are dead once its first reader has run backward (every
 * reader has then), unless its producer's backward reads them or several nodes wrote it. */
static void release_input(Tape *t, Tensor *in, int node) {
    Tensor *root = in->base ? in->base : in;
    if (root->first_reader != node + 1 || !root->producer || root->many_writers) return;
    if (OP_READS_OUT[t->nodes[root->producer - 1].op]) return;
    free_value(t, root);
}

static void find_first_readers(Tape *t) {
    for (int i = 0; i < t->n_nodes; i++)
        for (int k = 0; k < 5; k++) {
            Tensor *x = t->nodes[i].in[k];
            if (!x) continue;
            Tensor *root = x->base ? x->base : x;
            if (!root->first_reader) root->first_reader = i + 1;
        }
}

void tape_propagate(Tape *t) {
    if (t->free_values) find_first_readers(t);
    for (int i = t->n_nodes - 1; i >= 0; i--) {
        const TapeNode *n = &t->nodes[i];
        /* no gradient reached this node's outputs: nothing to propagate */
        if (!tensor_grad_if(n->out) && !(n->out2 && tensor_grad_if(n->out2))) {
            if (t->after_node) t->after_node(t->after_node_ctx, i);
            continue;
        }
        OP_BACKWARD[n->op](t, n);
        /* every writer of these outputs has now run backward: their gradients are dead */
        release_grad(t, n->out, i);
        if (n->out2) release_grad(t, n->out2, i);
        if (t->free_values) {
            release_value(t, n->out, i);
            if (n->out2) release_value(t, n->out2, i);
            for (int k = 0; k < 5; k++)
                if (n->in[k]) release_input(t, n->in[k], i);
        }
        if (t->after_node) t->after_node(t->after_node_ctx, i);
    }
}

void tape_backward(Tape *t, Tensor *loss) {
    S2S_ASSERT(loss->size == 1);
    float *g = tensor_grad(t, loss);
    g[0] += 1.0f;
    tape_propagate(t);
}

void tape_backward_seed(Tape *t, Tensor *out, const float *seed) {
    float *g = tensor_grad(t, out);
    for (size_t i = 0; i < out->size; i++) g[i] += seed[i];
    tape_propagate(t);
}
