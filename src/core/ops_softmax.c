/* ops_softmax.c — masked softmax over the last axis, and cross-entropy (log-softmax + NLL
 * with an ignore index, mean over counted rows). */
#include "s2s/fastmath.h"
#include "ops_internal.h"

#include <math.h>
#include <string.h>

Tensor *op_softmax(Tape *t, Tensor *x, const uint8_t *mask, int mask_rows) {
    int cols = tensor_cols(x), rows = tensor_rows(x);
    int per = 1;
    if (mask) {
        S2S_ASSERT(mask_rows > 0 && rows % mask_rows == 0);
        per = rows / mask_rows;
    }
    Tensor *y = tape_like(t, x);
    for (int r = 0; r < rows; r++) {
        const float *xr = x->data + (size_t)r * cols;
        float *yr = y->data + (size_t)r * cols;
        const uint8_t *m = mask ? mask + (size_t)(r / per) * cols : NULL;
        float mx = -INFINITY;
        for (int j = 0; j < cols; j++)
            if ((!m || m[j]) && xr[j] > mx) mx = xr[j];
        if (mx == -INFINITY) { /* every entry masked */
            memset(yr, 0, (size_t)cols * sizeof *yr);
            continue;
        }
        float s = 0.0f;
        for (int j = 0; j < cols; j++) {
            yr[j] = (!m || m[j]) ? s2s_expf(xr[j] - mx) : 0.0f;
            s += yr[j];
        }
        float inv = 1.0f / s;
        for (int j = 0; j < cols; j++) yr[j] *= inv;
    }
    if (tape_wants(t, x, NULL, NULL)) tape_record(t, OP_SOFTMAX, y)->in[0] = x;
    return y;
}

/* dx = y ⊙ (dy − Σ dy ⊙ y); masked entries have y = 0 and so get no gradient. */
void op_softmax_backward(Tape *t, const TapeNode *n) {
    const Tensor *y = n->out;
    int cols = tensor_cols(y), rows = tensor_rows(y);
    float *dx = tensor_grad(t, n->in[0]);
    for (int r = 0; r < rows; r++) {
        const float *yr = y->data + (size_t)r * cols, *gr = y->grad + (size_t)r * cols;
        float dot = 0.0f;
        for (int j = 0; j < cols; j++) dot += gr[j] * yr[j];
        float *dr = dx + (size_t)r * cols;
        for (int j = 0; j < cols; j++) dr[j] += yr[j] * (gr[j] - dot);
    }
}

/* saved: targets (N) copy; saved2: per-row log-sum-exp (N), so backward recomputes the
 * softmax from the logits instead of keeping an (N, V) copy. */
static Tensor *cross_entropy(Tape *t, Tensor *logits, const int32_t *targets, int ignore_index, bool consume) {
    int V = tensor_cols(logits), N = tensor_rows(logits);
    float *lse = arena_alloc(&t->arena, (size_t)N * sizeof *lse);
    double total = 0.0;
    int count = 0;
    for (int r = 0; r < N; r++) {
        if (targets[r] == ignore_index) continue;
        S2S_ASSERT(targets[r] >= 0 && targets[r] < V);
        const float *x = logits->data + (size_t)r * V;
        float mx = x[0];
        for (int j = 1; j < V; j++) mx = x[j] > mx ? x[j] : mx;
        float s = 0.0f;
        for (int j = 0; j < V; j++) s += s2s_expf(x[j] - mx);
        lse[r] = mx + logf(s);
        total += lse[r] - x[targets[r]];
        count++;
    }
    Tensor *y = tape_tensor1(t, 1);
    y->data[0] = count ? (float)(total / count) : 0.0f;
    if (tape_wants(t, logits, NULL, NULL)) {
        TapeNode *n = tape_record(t, OP_CROSS_ENTROPY, y);
        n->in[0] = logits;
        int32_t *tg = arena_alloc(&t->arena, (size_t)N * sizeof *tg);
        memcpy(tg, targets, (size_t)N * sizeof *tg);
        n->saved = tg;
        n->saved2 = lse;
        n->i[0] = ignore_index;
        n->i[1] = count;
        n->i[2] = consume;
    }
    return y;
}

Tensor *op_cross_entropy(Tape *t, Tensor *logits, const int32_t *targets, int ignore_index) {
    return cross_entropy(t, logits, targets, ignore_index, false);
}

Tensor *op_cross_entropy_consume(Tape *t, Tensor *logits, const int32_t *targets, int ignore_index) {
    return cross_entropy(t, logits, targets, ignore_index, true);
}

void op_cross_entropy_backward(Tape *t, const TapeNode *n) {
    Tensor *logits = n->in[0];
    const int32_t *tg = n->saved;
    const float *lse = n->saved2;
    int V = tensor_cols(logits), N = tensor_rows(logits), count = n->i[1];
    if (!count) return;
    float g = n->out->grad[0] / (float)count;
    if (n->i[2] && !logits->grad && !logits->base) { /* the gradient takes the logits' place */
        logits->grad = logits->data;
        for (int r = 0; r < N; r++) {
            float *d = logits->grad + (size_t)r * V;
            if (tg[r] == n->i[0]) {
                memset(d, 0, (size_t)V * sizeof *d);
                continue;
            }
            for (int j = 0; j < V; j++) d[j] = g * s2s_expf(d[j] - lse[r]); /* reads x_j, then writes d_j */
            d[tg[r]] -= g;
        }
        return;
    }
    float *dx = tensor_grad(t, logits);
    for (int r = 0; r < N; r++) {
        if (tg[r] == n->i[0]) continue;
        const float *x = logits->data + (size_t)r * V;
        float *d = dx + (size_t)r * V;
        for (int j = 0; j < V; j++) d[j] += g * s2s_expf(x[j] - lse[r]);
        d[tg[r]] -= g;
    }
}
