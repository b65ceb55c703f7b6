/* ops_shape.c — gather_rows (embedding lookup) and its inverse scatter_rows, concat and slice
 * along the last axis, dropout. */
#include "ops_internal.h"
#include "s2s/par.h"

#include <string.h>

Tensor *op_gather_rows(Tape *t, Tensor *src, const int32_t *ids, int n) {
    int D = tensor_cols(src), R = tensor_rows(src);
    Tensor *y = tape_tensor2(t, n, D);
    for (int i = 0; i < n; i++) {
        S2S_ASSERT(ids[i] >= 0 && ids[i] < R);
        memcpy(y->data + (size_t)i * D, src->data + (size_t)ids[i] * D, (size_t)D * sizeof(float));
    }
    if (tape_wants(t, src, NULL, NULL)) {
        TapeNode *node = tape_record(t, OP_GATHER_ROWS, y);
        node->in[0] = src;
        int32_t *copy = arena_alloc(&t->arena, (size_t)n * sizeof *copy);
        memcpy(copy, ids, (size_t)n * sizeof *copy);
        node->saved = copy;
    }
    return y;
}

Tensor *op_transpose_rows(Tape *t, Tensor *x, int A, int G) {
    S2S_ASSERT(A > 0 && G > 0 && tensor_rows(x) == A * G);
    int32_t *ids = arena_alloc(&t->arena, (size_t)A * G * sizeof *ids);
    for (int a = 0; a < A; a++)
        for (int g = 0; g < G; g++) ids[g * A + a] = a * G + g;
    return op_gather_rows(t, x, ids, A * G);
}

/* Sparse: only the picked rows of the source gradient are touched. */
void op_gather_rows_backward(Tape *t, const TapeNode *node) {
    Tensor *src = node->in[0];
    const int32_t *ids = node->saved;
    int D = tensor_cols(src), n = tensor_rows(node->out);
    float *ds = tensor_grad(t, src);
    const float *dy = node->out->grad;
    for (int i = 0; i < n; i++) {
        float *d = ds + (size_t)ids[i] * D;
        const float *g = dy + (size_t)i * D;
        for (int j = 0; j < D; j++) d[j] += g[j];
    }
}

/* scatter_rows: range [i0, i1) of the picked rows writes them and zeroes the unpicked rows
 * below each (and the last range the rows after the last pick): the ranges' rows are disjoint. */
typedef struct ScatterJob {
    const int32_t *ids;
    size_t n, R, D;
    const float *x; /* forward: src; backward: dy */
    float *y;       /* forward: the output; backward: src's gradient */
} ScatterJob;

static void scatter_range(void *ctx, size_t i0, size_t i1) {
    const ScatterJob *j = ctx;
    size_t D = j->D;
    for (size_t i = i0; i < i1; i++) {
        size_t lo = i ? (size_t)j->ids[i - 1] + 1 : 0, r = (size_t)j->ids[i];
        memset(j->y + lo * D, 0, (r - lo) * D * sizeof(float));
        memcpy(j->y + r * D, j->x + i * D, D * sizeof(float));
    }
    if (i1 == j->n) {
        size_t lo = j->n ? (size_t)j->ids[j->n - 1] + 1 : 0;
        memset(j->y + lo * D, 0, (j->R - lo) * D * sizeof(float));
    }
}

static void scatter_grad_range(void *ctx, size_t i0, size_t i1) {
    const ScatterJob *j = ctx;
    size_t D = j->D;
    for (size_t i = i0; i < i1; i++) {
        const float *g = j->x + (size_t)j->ids[i] * D;
        float *d = j->y + i * D;
        for (size_t k = 0; k < D; k++) d[k] += g[k];
    }
}

Tensor *op_scatter_rows(Tape *t, Tensor *src, const int32_t *ids, int n, int R) {
    int D = tensor_cols(src);
    S2S_ASSERT(tensor_rows(src) == n && n >= 0 && R > 0);
    for (int i = 0; i < n; i++) S2S_ASSERT(ids[i] >= (i ? ids[i - 1] + 1 : 0) && ids[i] < R);
    Tensor *y = tape_tensor2(t, R, D);
    ScatterJob j = {.ids = ids, .n = (size_t)n, .R = (size_t)R, .D = (size_t)D, .x = src->data, .y = y->data};
    if (n) par_for((size_t)n, (size_t)R * D / (size_t)n, scatter_range, &j);
    else scatter_range(&j, 0, 0);
    if (tape_wants(t, src, NULL, NULL)) {
        TapeNode *node = tape_record(t, OP_SCATTER_ROWS, y);
        node->in[0] = src;
        int32_t *copy = arena_alloc(&t->arena, (size_t)(n ? n : 1) * sizeof *copy);
        memcpy(copy, ids, (size_t)n * sizeof *copy);
        node->saved = copy;
        node->i[0] = n;
    }
    return y;
}

void op_scatter_rows_backward(Tape *t, const TapeNode *node) {
    Tensor *src = node->in[0];
    int n = node->i[0];
    ScatterJob j = {.ids = node->saved, .n = (size_t)n, .R = (size_t)tensor_rows(node->out), .D = (size_t)tensor_cols(src),
                    .x = node->out->grad, .y = tensor_grad(t, src)};
    if (n) par_for((size_t)n, j.D, scatter_grad_range, &j);
}

/* Row i of y (or of dy, backward) is row ids[i] (or i) of a ++ b. */
typedef struct ConcatJob {
    const int32_t *ids;
    int da, db;
    const float *a, *b; /* forward: the inputs; backward: NULL */
    float *y;           /* forward: the output */
    const float *dy;    /* backward: the output's gradient, added into ga and gb (either NULL) */
    float *ga, *gb;
} ConcatJob;

static void concat_rows_range(void *ctx, size_t i0, size_t i1) {
    const ConcatJob *j = ctx;
    int da = j->da, db = j->db;
    for (size_t i = i0; i < i1; i++) {
        size_t r = j->ids ? (size_t)j->ids[i] : i;
        float *yr = j->y + i * (size_t)(da + db);
        memcpy(yr, j->a + r * da, (size_t)da * sizeof(float));
        memcpy(yr + da, j->b + r * db, (size_t)db * sizeof(float));
    }
}

static void concat_grad_range(void *ctx, size_t i0, size_t i1) {
    const ConcatJob *j = ctx;
    int da = j->da, db = j->db;
    for (size_t i = i0; i < i1; i++) {
        size_t r = j->ids ? (size_t)j->ids[i] : i;
        const float *g = j->dy + i * (size_t)(da + db);
        if (j->ga)
            for (int k = 0; k < da; k++) j->ga[r * da + k] += g[k];
        if (j->gb)
            for (int k = 0; k < db; k++) j->gb[r * db + k] += g[da + k];
    }
}

/* Rows ids[0..n) of a ++ b (all rows, keeping a's leading dimensions, when ids is NULL).
 * The rows split over the threads: a training step's output layer takes its input so (the
 * context and decoder state at every target, about 12 MB a batch). */
static Tensor *concat(Tape *t, Tensor *a, Tensor *b, const int32_t *ids, int n) {
    int da = tensor_cols(a), db = tensor_cols(b), rows = tensor_rows(a);
    S2S_ASSERT(rows == tensor_rows(b));
    Tensor *y;
    if (ids) {
        y = tape_tensor2(t, n, da + db);
    } else {
        int shape[S2S_MAX_DIMS];
        memcpy(shape, a->shape, sizeof shape);
        shape[a->ndim - 1] = da + db;
        y = tape_tensor(t, a->ndim, shape);
        n = rows;
    }
    for (int i = 0; ids && i < n; i++) S2S_ASSERT(ids[i] >= 0 && ids[i] < rows);
    ConcatJob j = {.ids = ids, .da = da, .db = db, .a = a->data, .b = b->data, .y = y->data};
    par_for((size_t)n, (size_t)(da + db), concat_rows_range, &j);
    if (tape_wants(t, a, b, NULL)) {
        TapeNode *node = tape_record(t, OP_CONCAT, y);
        node->in[0] = a;
        node->in[1] = b;
        if (ids) {
            int32_t *copy = arena_alloc(&t->arena, (size_t)(n ? n : 1) * sizeof *copy);
            memcpy(copy, ids, (size_t)n * sizeof *copy);
            node->saved = copy;
        }
        node->i[0] = n;
    }
    return y;
}

Tensor *op_concat(Tape *t, Tensor *a, Tensor *b) { return concat(t, a, b, NULL, 0); }

Tensor *op_concat_rows(Tape *t, Tensor *a, Tensor *b, const int32_t *ids, int n) { return concat(t, a, b, ids, n); }

void op_concat_backward(Tape *t, const TapeNode *n) {
    Tensor *a = n->in[0], *b = n->in[1];
    const int32_t *ids = n->saved;
    int da = tensor_cols(a), db = tensor_cols(b), rows = n->i[0];
    const float *dy = n->out->grad;
    float *ga = a->requires_grad ? tensor_grad(t, a) : NULL;
    float *gb = b->requires_grad ? tensor_grad(t, b) : NULL;
    ConcatJob j = {.ids = ids, .da = da, .db = db, .dy = dy, .ga = ga, .gb = gb};
    /* over the threads where no row is picked twice (increasing picks, or all rows); a row
     * picked twice gets both gradients, in order, on one thread */
    bool distinct = true;
    for (int i = 1; ids && distinct && i < rows; i++) distinct = ids[i] > ids[i - 1];
    if (distinct) par_for((size_t)rows, (size_t)(da + db) * 2, concat_grad_range, &j);
    else concat_grad_range(&j, 0, (size_t)rows);
}

Tensor *op_slice(Tape *t, Tensor *x, int start, int len) {
    int cols = tensor_cols(x), rows = tensor_rows(x);
    S2S_ASSERT(start >= 0 && len >= 0 && start + len <= cols);
    int shape[S2S_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[x->ndim - 1] = len;
    Tensor *y = tape_tensor(t, x->ndim, shape);
    for (int r = 0; r < rows; r++)
        memcpy(y->data + (size_t)r * len, x->data + (size_t)r * cols + start, (size_t)len * sizeof(float));
    if (tape_wants(t, x, NULL, NULL)) {
        TapeNode *n = tape_record(t, OP_SLICE, y);
        n->in[0] = x;
        n->i[0] = start;
    }
    return y;
}

void op_slice_backward(Tape *t, const TapeNode *n) {
    Tensor *x = n->in[0];
    int cols = tensor_cols(x), rows = tensor_rows(x), len = tensor_cols(n->out), start = n->i[0];
    float *dx = tensor_grad(t, x);
    const float *dy = n->out->grad;
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < len; j++) dx[(size_t)r * cols + start + j] += dy[(size_t)r * len + j];
}

/* saved: the keep mask (1 byte per element); kept entries are scaled by 1/(1−p). */
/* Dropout's mask is a function of a key (two draws from rng per call) and the element's
 * index: a counter-based generator (murmur3's 32-bit finaliser over the index mixed with the
 * key), so the mask is made in parallel with the same bits on any number of threads, and
 * backward makes it again instead of keeping it; 32-bit arithmetic without branches lets the
 * loops vectorise. An element is kept when its top 24 bits reach p·2²⁴. */
typedef struct DropKey {
    uint32_t k0, k1;
    uint32_t threshold;
    float scale;
} DropKey;

static inline float drop_factor(uint32_t k0, uint32_t k1, uint32_t threshold, float scale, uint32_t i) {
    uint32_t h = (i * 0x9E3779B9u) ^ k0;
    h += k1;
    h ^= h >> 16;
    h *= 0x85EBCA6Bu;
    h ^= h >> 13;
    h *= 0xC2B2AE35u;
    h ^= h >> 16;
    return (h >> 8) >= threshold ? scale : 0.0f;
}

typedef struct DropJob {
    const DropKey *k;
    const float *x;
    float *y;
    bool add; /* backward: y += x · factor */
} DropJob;

static void drop_range(void *ctx, size_t begin, size_t end) {
    const DropJob *j = ctx;
    const uint32_t k0 = j->k->k0, k1 = j->k->k1, th = j->k->threshold, b = (uint32_t)begin, e = (uint32_t)end;
    const float s = j->k->scale;
    const float *restrict x = j->x;
    float *restrict y = j->y;
    if (j->add)
        for (uint32_t i = b; i < e; i++) y[i] += x[i] * drop_factor(k0, k1, th, s, i);
    else
        for (uint32_t i = b; i < e; i++) y[i] = x[i] * drop_factor(k0, k1, th, s, i);
}

Tensor *op_dropout(Tape *t, Tensor *x, float p, Rng *rng) {
    S2S_ASSERT(p >= 0.0f && p < 1.0f);
    if (!t->training || p == 0.0f) return x;
    S2S_ASSERT(x->size < ((size_t)1 << 32)); /* elements are counted in 32 bits */
    Tensor *y = tape_like(t, x);
    DropKey *k = arena_alloc(&t->arena, sizeof *k);
    k->k0 = rng_u32(rng);
    k->k1 = rng_u32(rng);
    k->threshold = (uint32_t)((double)p * 16777216.0);
    k->scale = 1.0f / (1.0f - p);
    DropJob j = {k, x->data, y->data, false};
    par_for(x->size, 8, drop_range, &j);
    if (tape_wants(t, x, NULL, NULL)) {
        TapeNode *n = tape_record(t, OP_DROPOUT, y);
        n->in[0] = x;
        n->saved = k;
    }
    return y;
}

void op_dropout_backward(Tape *t, const TapeNode *n) {
    bool fresh;
    float *dx = tensor_grad_to_write(t, n->in[0], &fresh);
    DropJob j = {n->saved, n->out->grad, dx, !fresh};
    par_for(n->out->size, 8, drop_range, &j);
}
