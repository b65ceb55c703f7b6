/* tensor.c — shape helpers and heap tensors. */
#include "s2s/tensor.h"
#include "s2s/common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t tensor_numel(int ndim, const int *shape) {
    S2S_ASSERT(ndim >= 1 && ndim <= S2S_MAX_DIMS);
    size_t n = 1;
    for (int i = 0; i < ndim; i++) {
        S2S_ASSERT(shape[i] >= 0);
        n *= (size_t)shape[i];
    }
    return n;
}

Tensor *tensor_new(int ndim, const int *shape, bool with_grad) {
    Tensor *t = s2s_xcalloc(1, sizeof *t);
    t->ndim = ndim;
    memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    t->size = tensor_numel(ndim, shape);
    t->data = s2s_xcalloc(t->size, sizeof(float));
    if (with_grad) {
        t->grad = s2s_xcalloc(t->size, sizeof(float));
        t->requires_grad = true;
    }
    return t;
}

void tensor_free(Tensor *t) {
    if (!t) return;
    free(t->data);
    free(t->grad);
    free(t);
}

int tensor_cols(const Tensor *t) { return t->shape[t->ndim - 1]; }

int tensor_rows(const Tensor *t) {
    int c = tensor_cols(t);
    return c ? (int)(t->size / (size_t)c) : 0;
}

bool tensor_same_shape(const Tensor *a, const Tensor *b) {
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

const char *tensor_shape_str(const Tensor *t, char *buf, size_t n) {
    size_t k = (size_t)snprintf(buf, n, "(");
    for (int i = 0; i < t->ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, i ? ", %d" : "%d", t->shape[i]);
    if (k < n) snprintf(buf + k, n - k, ")");
    return buf;
}

void tensor_keep_rows_tm(Tensor *x, int steps, const int32_t *rows, int n) {
    S2S_ASSERT(x->ndim == 3 && n >= 0 && n <= x->shape[1] && steps >= 0 && steps <= x->shape[0]);
    int S = x->shape[0], N = x->shape[1], D = x->shape[2];
    for (int s = 0; s < steps; s++)
        for (int i = 0; i < n; i++) {
            size_t to = (size_t)s * n + i, from = (size_t)s * N + rows[i];
            if (to != from) memmove(x->data + to * D, x->data + from * D, (size_t)D * sizeof(float));
        }
    x->shape[1] = n;
    x->size = (size_t)S * n * D;
}

void tensor_keep_rows(Tensor *x, const int32_t *rows, int n) {
    size_t D = (size_t)tensor_cols(x);
    for (int i = 0; i < n; i++) {
        S2S_ASSERT(rows[i] >= i && (i == 0 || rows[i] > rows[i - 1]));
        if (rows[i] != i) memmove(x->data + (size_t)i * D, x->data + (size_t)rows[i] * D, D * sizeof *x->data);
    }
}

const float *tensor_read(const Tensor *t) { return t->data; }

float *tensor_write(Tensor *t) { return t->data; }

float tensor_item(const Tensor *t, size_t i) {
    S2S_ASSERT(i < t->size);
    return t->data[i];
}

void tensor_fill(Tensor *t, float v) {
    for (size_t i = 0; i < t->size; i++) t->data[i] = v;
}

void tensor_copy(Tensor *dst, const Tensor *src) {
    S2S_ASSERT(dst->size == src->size);
    if (dst->data != src->data) memcpy(dst->data, src->data, src->size * sizeof *dst->data);
}

bool tensor_grad_in(const Tensor *t, const float *lo, const float *hi, size_t *at) {
    if (!t->grad || t->grad < lo || t->grad >= hi) return false;
    *at = (size_t)(t->grad - lo);
    return true;
}
