/* ops_elementwise.c — add, bias, mul, scale, tanh, sigmoid, relu, exp, log, sum, mean. */
#include "s2s/fastmath.h"
#include "ops_internal.h"
#include "s2s/par.h"

#include <math.h>
#include <string.h>

/* The loops of the common maps split over the threads when large (par.h): each element is
 * computed alone, so the bits do not depend on the split. */
/* The backward kinds come in pairs: add to a gradient, or write a fresh one (tensor_grad_to_write). */
typedef enum EwKind { EW_ADD, EW_COPY, EW_ACC, EW_SCALE, EW_ACC_SCALED, EW_RELU, EW_RELU_BACK_SET, EW_RELU_BACK } EwKind;

typedef struct EwJob {
    EwKind kind;
    float *y;
    const float *a, *b;
    float s;
} EwJob;

static void ew_range(void *ctx, size_t i0, size_t i1) {
    const EwJob *j = ctx;
    float *y = j->y;
    const float *a = j->a, *b = j->b;
    switch (j->kind) {
    case EW_ADD: for (size_t i = i0; i < i1; i++) y[i] = a[i] + b[i]; break;
    case EW_COPY: memcpy(y + i0, a + i0, (i1 - i0) * sizeof *y); break;
    case EW_ACC: for (size_t i = i0; i < i1; i++) y[i] += a[i]; break;
    case EW_SCALE: for (size_t i = i0; i < i1; i++) y[i] = j->s * a[i]; break;
    case EW_ACC_SCALED: for (size_t i = i0; i < i1; i++) y[i] += j->s * a[i]; break;
    case EW_RELU: for (size_t i = i0; i < i1; i++) y[i] = a[i] > 0.0f ? a[i] : 0.0f; break;
    case EW_RELU_BACK_SET: /* a: the output, b: its gradient */
        for (size_t i = i0; i < i1; i++) y[i] = a[i] > 0.0f ? b[i] : 0.0f;
        break;
    case EW_RELU_BACK:
        for (size_t i = i0; i < i1; i++)
            if (a[i] > 0.0f) y[i] += b[i];
        break;
    }
}

/* Work per element for par_for: a few memory streams each (large tensors go on the threads). */
#define EW_WORK 4

static void ew(EwKind kind, float *y, const float *a, const float *b, float s, size_t n) {
    EwJob j = {kind, y, a, b, s};
    par_for(n, EW_WORK, ew_range, &j);
}

static Tensor *record1(Tape *t, OpKind op, Tensor *y, Tensor *x) {
    if (tape_wants(t, x, NULL, NULL)) tape_record(t, op, y)->in[0] = x;
    return y;
}

static Tensor *record2(Tape *t, OpKind op, Tensor *y, Tensor *a, Tensor *b) {
    if (tape_wants(t, a, b, NULL)) {
        TapeNode *n = tape_record(t, op, y);
        n->in[0] = a;
        n->in[1] = b;
    }
    return y;
}

Tensor *op_add(Tape *t, Tensor *a, Tensor *b) {
    S2S_ASSERT(a->size == b->size);
    Tensor *y = tape_like(t, a);
    ew(EW_ADD, y->data, a->data, b->data, 0.0f, y->size);
    return record2(t, OP_ADD, y, a, b);
}

void op_add_backward(Tape *t, const TapeNode *n) {
    const float *dy = n->out->grad;
    for (int k = 0; k < 2; k++) {
        Tensor *x = n->in[k];
        if (!x->requires_grad) continue;
        bool fresh;
        float *dx = tensor_grad_to_write(t, x, &fresh);
        ew(fresh ? EW_COPY : EW_ACC, dx, dy, NULL, 0.0f, x->size);
    }
}

Tensor *op_add_bias(Tape *t, Tensor *x, Tensor *b) {
    int cols = tensor_cols(x), rows = tensor_rows(x);
    S2S_ASSERT(b->size == (size_t)cols);
    Tensor *y = tape_like(t, x);
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j++) y->data[(size_t)r * cols + j] = x->data[(size_t)r * cols + j] + b->data[j];
    return record2(t, OP_ADD_BIAS, y, x, b);
}

void op_add_bias_backward(Tape *t, const TapeNode *n) {
    Tensor *x = n->in[0], *b = n->in[1];
    const float *dy = n->out->grad;
    int cols = tensor_cols(x), rows = tensor_rows(x);
    if (x->requires_grad) {
        float *dx = tensor_grad(t, x);
        for (size_t i = 0; i < x->size; i++) dx[i] += dy[i];
    }
    if (b->requires_grad) {
        float *db = tensor_grad(t, b);
        for (int r = 0; r < rows; r++)
            for (int j = 0; j < cols; j++) db[j] += dy[(size_t)r * cols + j];
    }
}

Tensor *op_mul(Tape *t, Tensor *a, Tensor *b) {
    S2S_ASSERT(a->size == b->size);
    Tensor *y = tape_like(t, a);
    for (size_t i = 0; i < y->size; i++) y->data[i] = a->data[i] * b->data[i];
    return record2(t, OP_MUL, y, a, b);
}

void op_mul_backward(Tape *t, const TapeNode *n) {
    Tensor *a = n->in[0], *b = n->in[1];
    const float *dy = n->out->grad;
    if (a->requires_grad) {
        float *da = tensor_grad(t, a);
        for (size_t i = 0; i < a->size; i++) da[i] += dy[i] * b->data[i];
    }
    if (b->requires_grad) {
        float *db = tensor_grad(t, b);
        for (size_t i = 0; i < b->size; i++) db[i] += dy[i] * a->data[i];
    }
}

Tensor *op_scale(Tape *t, Tensor *x, float s) {
    Tensor *y = tape_like(t, x);
    ew(EW_SCALE, y->data, x->data, NULL, s, y->size);
    if (tape_wants(t, x, NULL, NULL)) {
        TapeNode *n = tape_record(t, OP_SCALE, y);
        n->in[0] = x;
        n->f = s;
    }
    return y;
}

void op_scale_backward(Tape *t, const TapeNode *n) {
    Tensor *x = n->in[0];
    bool fresh;
    float *dx = tensor_grad_to_write(t, x, &fresh);
    ew(fresh ? EW_SCALE : EW_ACC_SCALED, dx, n->out->grad, NULL, n->f, x->size);
}

/* Unary maps whose derivative is a function of the output y (tanh, sigmoid, relu, exp) or
 * of the input (log). */
Tensor *op_tanh(Tape *t, Tensor *x) {
    Tensor *y = tape_like(t, x);
    for (size_t i = 0; i < y->size; i++) y->data[i] = s2s_tanhf(x->data[i]);
    return record1(t, OP_TANH, y, x);
}

void op_tanh_backward(Tape *t, const TapeNode *n) {
    const float *y = n->out->data, *dy = n->out->grad;
    float *dx = tensor_grad(t, n->in[0]);
    for (size_t i = 0; i < n->out->size; i++) dx[i] += dy[i] * (1.0f - y[i] * y[i]);
}


Tensor *op_sigmoid(Tape *t, Tensor *x) {
    Tensor *y = tape_like(t, x);
    for (size_t i = 0; i < y->size; i++) y->data[i] = s2s_sigmoidf(x->data[i]);
    return record1(t, OP_SIGMOID, y, x);
}

void op_sigmoid_backward(Tape *t, const TapeNode *n) {
    const float *y = n->out->data, *dy = n->out->grad;
    float *dx = tensor_grad(t, n->in[0]);
    for (size_t i = 0; i < n->out->size; i++) dx[i] += dy[i] * y[i] * (1.0f - y[i]);
}

Tensor *op_relu(Tape *t, Tensor *x) {
    Tensor *y = tape_like(t, x);
    ew(EW_RELU, y->data, x->data, NULL, 0.0f, y->size);
    return record1(t, OP_RELU, y, x);
}

void op_relu_backward(Tape *t, const TapeNode *n) {
    bool fresh;
    float *dx = tensor_grad_to_write(t, n->in[0], &fresh);
    ew(fresh ? EW_RELU_BACK_SET : EW_RELU_BACK, dx, n->out->data, n->out->grad, 0.0f, n->out->size);
}

/* GELU, exact (PyTorch's default): x Φ(x) = x (1 + erf(x / √2)) / 2. Backward reads x. */
Tensor *op_gelu(Tape *t, Tensor *x) {
    Tensor *y = tape_like(t, x);
    for (size_t i = 0; i < y->size; i++) y->data[i] = 0.5f * x->data[i] * (1.0f + erff(x->data[i] * 0.70710678118654752f));
    return record1(t, OP_GELU, y, x);
}

/* d/dx x Φ(x) = Φ(x) + x φ(x) */
void op_gelu_backward(Tape *t, const TapeNode *n) {
    const float *x = n->in[0]->data, *dy = n->out->grad;
    float *dx = tensor_grad(t, n->in[0]);
    const float inv_sqrt_2pi = 0.3989422804014327f;
    for (size_t i = 0; i < n->out->size; i++) {
        float v = x[i], cdf = 0.5f * (1.0f + erff(v * 0.70710678118654752f)), pdf = inv_sqrt_2pi * expf(-0.5f * v * v);
        dx[i] += dy[i] * (cdf + v * pdf);
    }
}

Tensor *op_exp(Tape *t, Tensor *x) {
    Tensor *y = tape_like(t, x);
    for (size_t i = 0; i < y->size; i++) y->data[i] = s2s_expf(x->data[i]);
    return record1(t, OP_EXP, y, x);
}

void op_exp_backward(Tape *t, const TapeNode *n) {
    const float *y = n->out->data, *dy = n->out->grad;
    float *dx = tensor_grad(t, n->in[0]);
    for (size_t i = 0; i < n->out->size; i++) dx[i] += dy[i] * y[i];
}

Tensor *op_log(Tape *t, Tensor *x) {
    Tensor *y = tape_like(t, x);
    for (size_t i = 0; i < y->size; i++) y->data[i] = logf(x->data[i]);
    return record1(t, OP_LOG, y, x);
}

void op_log_backward(Tape *t, const TapeNode *n) {
    const float *x = n->in[0]->data, *dy = n->out->grad;
    float *dx = tensor_grad(t, n->in[0]);
    for (size_t i = 0; i < n->out->size; i++) dx[i] += dy[i] / x[i];
}

Tensor *op_sum(Tape *t, Tensor *x) {
    Tensor *y = tape_tensor1(t, 1);
    double s = 0.0;
    for (size_t i = 0; i < x->size; i++) s += x->data[i];
    y->data[0] = (float)s;
    return record1(t, OP_SUM, y, x);
}

void op_sum_backward(Tape *t, const TapeNode *n) {
    float g = n->out->grad[0];
    float *dx = tensor_grad(t, n->in[0]);
    for (size_t i = 0; i < n->in[0]->size; i++) dx[i] += g;
}

Tensor *op_mean(Tape *t, Tensor *x) {
    S2S_ASSERT(x->size > 0);
    Tensor *y = tape_tensor1(t, 1);
    double s = 0.0;
    for (size_t i = 0; i < x->size; i++) s += x->data[i];
    y->data[0] = (float)(s / (double)x->size);
    return record1(t, OP_MEAN, y, x);
}

void op_mean_backward(Tape *t, const TapeNode *n) {
    float g = n->out->grad[0] / (float)n->in[0]->size;
    float *dx = tensor_grad(t, n->in[0]);
    for (size_t i = 0; i < n->in[0]->size; i++) dx[i] += g;
}
