/* ops_softmax.c — masked softmax over the last axis, and cross-entropy (log-softmax + NLL
 * with an ignore index and label smoothing, mean over counted rows). */
#include "s2s/fastmath.h"
#include "ops_internal.h"
#include "s2s/par.h"

#include <math.h>
#include <string.h>

typedef struct SoftmaxJob {
    const float *x, *dy;
    float *y, *dx;
    const uint8_t *mask;
    int cols, per; /* per: rows that share a mask row */
    bool set;      /* backward: dx is a fresh buffer, written rather than added to */
} SoftmaxJob;

void ops_softmax_row(const float *x, float *y, const uint8_t *m, int cols) {
    float mx = -INFINITY;
    for (int c = 0; c < cols; c++)
        if ((!m || m[c]) && x[c] > mx) mx = x[c];
    if (mx == -INFINITY) { /* every entry masked */
        memset(y, 0, (size_t)cols * sizeof *y);
        return;
    }
    /* the exponentials in a loop of their own, which vectorises; the sum in column order
     * after it (a running float sum in the same loop kept it scalar) */
    if (m)
        for (int c = 0; c < cols; c++) y[c] = m[c] ? s2s_expf(x[c] - mx) : 0.0f;
    else
        for (int c = 0; c < cols; c++) y[c] = s2s_expf(x[c] - mx);
    float s = 0.0f;
    for (int c = 0; c < cols; c++) s += y[c];
    float inv = 1.0f / s;
    for (int c = 0; c < cols; c++) y[c] *= inv;
}

/* ops_softmax_row's steps for the nb rows of a block at once, their scores position-major
 * (x[s·nb + i]): each row's maximum, exponentials, sum in position order and scaling are
 * the row's own, so the bits are ops_softmax_row's, and the loops over the rows vectorise
 * (one row's 10–40 positions were a serial chain each). x becomes the weights; ok (the
 * mask, position-major; its masked scores already −∞) NULL: every entry counts. A select on
 * the byte mask inside the maximum kept that loop scalar without AVX. */
void ops_softmax_columns(float *restrict x, const uint8_t *restrict ok, int S, int nb) {
    S2S_ASSERT(nb > 0 && nb <= OPS_SOFTMAX_BLOCK);
    float mx[OPS_SOFTMAX_BLOCK], sum[OPS_SOFTMAX_BLOCK], inv[OPS_SOFTMAX_BLOCK];
    for (int i = 0; i < nb; i++) mx[i] = -INFINITY, sum[i] = 0.0f;
    for (int s = 0; s < S; s++) { /* masked scores are −∞, never above the maximum */
        const float *xs = x + (size_t)s * nb;
        for (int i = 0; i < nb; i++) mx[i] = xs[i] > mx[i] ? xs[i] : mx[i];
    }
    for (int s = 0; s < S; s++) {
        float *xs = x + (size_t)s * nb;
        const uint8_t *os = ok ? ok + (size_t)s * nb : NULL;
        if (os)
            for (int i = 0; i < nb; i++) xs[i] = os[i] ? s2s_expf(xs[i] - mx[i]) : 0.0f;
        else
            for (int i = 0; i < nb; i++) xs[i] = s2s_expf(xs[i] - mx[i]);
        for (int i = 0; i < nb; i++) sum[i] += xs[i];
    }
    for (int i = 0; i < nb; i++) inv[i] = 1.0f / sum[i];
    for (int s = 0; s < S; s++) { /* a row with every entry masked: zeros (ops_softmax_row) */
        float *xs = x + (size_t)s * nb;
        for (int i = 0; i < nb; i++) xs[i] = mx[i] == -INFINITY ? 0.0f : xs[i] * inv[i];
    }
}

enum { SOFTMAX_ROWS = 32, SOFTMAX_SHORT = 64 }; /* rows a block; the longest row taken so */

/* Rows [r0, r0 + nb) of at most SOFTMAX_SHORT entries through ops_softmax_columns: copied in
 * position-major (a masked entry as −∞, as it wants), the weights copied back. */
static void softmax_block(const SoftmaxJob *j, size_t r0, int nb) {
    int S = j->cols;
    float x[SOFTMAX_ROWS * SOFTMAX_SHORT];
    uint8_t ok[SOFTMAX_ROWS * SOFTMAX_SHORT] = {0}; /* gcc cannot tell that a mask fills what is read */
    for (int i = 0; i < nb; i++) {
        const float *xr = j->x + (r0 + (size_t)i) * S;
        const uint8_t *m = j->mask ? j->mask + ((r0 + (size_t)i) / (size_t)j->per) * S : NULL;
        for (int s = 0; s < S; s++) x[s * nb + i] = xr[s];
        if (m)
            for (int s = 0; s < S; s++) {
                ok[s * nb + i] = m[s];
                if (!m[s]) x[s * nb + i] = -INFINITY;
            }
    }
    ops_softmax_columns(x, j->mask ? ok : NULL, S, nb);
    for (int i = 0; i < nb; i++) {
        float *yr = j->y + (r0 + (size_t)i) * S;
        for (int s = 0; s < S; s++) yr[s] = x[s * nb + i];
    }
}

/* Short rows (attention's, 10-40 entries: a serial maximum and sum each) in blocks side by
 * side, longer ones alone; either way each row's bits are ops_softmax_row's, whatever the
 * split. */
static void softmax_rows(void *ctx, size_t begin, size_t end) {
    const SoftmaxJob *j = ctx;
    int cols = j->cols;
    size_t r = begin;
    if (cols <= SOFTMAX_SHORT)
        for (; r < end; r += SOFTMAX_ROWS) softmax_block(j, r, end - r < SOFTMAX_ROWS ? (int)(end - r) : SOFTMAX_ROWS);
    for (; r < end; r++)
        ops_softmax_row(j->x + r * cols, j->y + r * cols, j->mask ? j->mask + (r / (size_t)j->per) * cols : NULL, cols);
}

/* Rows on the threads (each row alone: the same bits whatever the split). */
Tensor *op_softmax(Tape *t, Tensor *x, const uint8_t *mask, int mask_rows) {
    int cols = tensor_cols(x), rows = tensor_rows(x);
    int per = 1;
    if (mask) {
        S2S_ASSERT(mask_rows > 0 && rows % mask_rows == 0);
        per = rows / mask_rows;
    }
    Tensor *y = tape_like(t, x);
    SoftmaxJob j = {.x = x->data, .y = y->data, .mask = mask, .cols = cols, .per = per};
    par_for((size_t)rows, (size_t)cols * 8, softmax_rows, &j);
    if (tape_wants(t, x, NULL, NULL)) tape_record(t, OP_SOFTMAX, y)->in[0] = x;
    return y;
}

static void softmax_back_rows(void *ctx, size_t begin, size_t end) {
    const SoftmaxJob *j = ctx;
    int cols = j->cols;
    for (size_t r = begin; r < end; r++) {
        const float *yr = j->y + r * cols, *gr = j->dy + r * cols;
        float dot = 0.0f;
        for (int c = 0; c < cols; c++) dot += gr[c] * yr[c];
        float *dr = j->dx + r * cols;
        if (j->set)
            for (int c = 0; c < cols; c++) dr[c] = yr[c] * (gr[c] - dot);
        else
            for (int c = 0; c < cols; c++) dr[c] += yr[c] * (gr[c] - dot);
    }
}

/* dx = y ⊙ (dy − Σ dy ⊙ y); masked entries have y = 0 and so get no gradient. */
void op_softmax_backward(Tape *t, const TapeNode *n) {
    const Tensor *y = n->out;
    bool fresh;
    SoftmaxJob j = {.y = y->data, .dy = y->grad, .dx = tensor_grad_to_write(t, n->in[0], &fresh), .cols = tensor_cols(y)};
    j.set = fresh;
    par_for((size_t)tensor_rows(y), (size_t)j.cols * 4, softmax_back_rows, &j);
}

/* saved: targets (N) copy; saved2: per-row log-sum-exp (N), so backward recomputes the
 * softmax from the logits instead of keeping an (N, V) copy. With label smoothing ε a row's
 * loss is lse − (1−ε) x_t − ε mean(x) (PyTorch's: (1−ε) NLL + ε/V Σ_c −log p_c, every class
 * including padding's); the row means go in `mean`. */
typedef struct LseJob {
    const float *x;
    const int32_t *targets;
    float *lse, *mean; /* mean: NULL without smoothing */
    int V, ignore;
} LseJob;

static void lse_rows(void *ctx, size_t begin, size_t end) {
    const LseJob *j = ctx;
    for (size_t r = begin; r < end; r++) {
        if (j->targets[r] == j->ignore) continue;
        const float *x = j->x + r * (size_t)j->V;
        j->lse[r] = s2s_logsumexp(x, j->V);
        if (j->mean) {
            double s = 0.0;
            for (int c = 0; c < j->V; c++) s += x[c];
            j->mean[r] = (float)(s / j->V);
        }
    }
}

/* Adds rows [0, n) of logits y (n, V) to the running sums: the objective and the plain NLL. */
static void xent_sum(const float *y, int n, int V, const int32_t *tg, int ignore, const float *lse, const float *mean,
                     float eps, double *total, double *nll, int *count) {
    for (int r = 0; r < n; r++) { /* in row order: the same sum on any thread count */
        if (tg[r] == ignore) continue;
        float xt = y[(size_t)r * V + tg[r]], plain = lse[r] - xt; /* in float, as before smoothing existed */
        *nll += plain;
        *total += mean ? lse[r] - (1.0 - eps) * xt - eps * (double)mean[r] : plain;
        (*count)++;
    }
}

static Tensor *cross_entropy(Tape *t, Tensor *logits, const int32_t *targets, int ignore_index, float eps, bool consume,
                             double *nll_out) {
    S2S_ASSERT(eps >= 0.0f && eps < 1.0f);
    int V = tensor_cols(logits), N = tensor_rows(logits);
    float *lse = arena_alloc(&t->arena, (size_t)N * sizeof *lse);
    ArenaMark m = arena_mark(&t->arena);
    float *mean = eps > 0.0f ? arena_alloc(&t->arena, (size_t)N * sizeof *mean) : NULL;
    for (int r = 0; r < N; r++) S2S_ASSERT(targets[r] == ignore_index || (targets[r] >= 0 && targets[r] < V));
    LseJob job = {logits->data, targets, lse, mean, V, ignore_index};
    par_for((size_t)N, (size_t)V, lse_rows, &job); /* rows on the threads; the sum below in row order */
    double total = 0.0, nll = 0.0;
    int count = 0;
    xent_sum(logits->data, N, V, targets, ignore_index, lse, mean, eps, &total, &nll, &count);
    arena_rewind(&t->arena, m);
    if (nll_out) *nll_out = count ? nll / count : 0.0;
    Tensor *y = tape_tensor1(t, 1);
    y->data[0] = count ? (float)(total / count) : 0.0f;
    if (tape_wants(t, logits, NULL, NULL)) {
        TapeNode *n = tape_record(t, OP_CROSS_ENTROPY, y);
        n->in[0] = logits;
        int32_t *tg = arena_alloc(&t->arena, (size_t)N * sizeof *tg);
        memcpy(tg, targets, (size_t)N * sizeof *tg);
        n->saved = tg;
        n->saved2 = lse;
        n->f = eps;
        n->i[0] = ignore_index;
        n->i[1] = count;
        n->i[2] = consume;
    }
    return y;
}

Tensor *op_cross_entropy(Tape *t, Tensor *logits, const int32_t *targets, int ignore_index) {
    return cross_entropy(t, logits, targets, ignore_index, 0.0f, false, NULL);
}

Tensor *op_cross_entropy_consume(Tape *t, Tensor *logits, const int32_t *targets, int ignore_index, float smoothing,
                                 double *nll) {
    return cross_entropy(t, logits, targets, ignore_index, smoothing, true, nll);
}

/* g: the upstream gradient over the counted rows; the target's share is g (1 − ε) and every
 * class's g ε / V (gs), so that d = g softmax(x) − g (1−ε) onehot − g ε / V. */
typedef struct CeGradJob {
    const float *x;
    float *d;
    const int32_t *tg;
    const float *lse;
    float g, gt, gs;
    int V, ignore;
} CeGradJob;

static CeGradJob ce_job(const float *x, float *d, const int32_t *tg, const float *lse, float g, float eps, int V,
                        int ignore) {
    return (CeGradJob){x, d, tg, lse, g, g * (1.0f - eps), g * eps / (float)V, V, ignore};
}

/* d = g softmax(x) − g (1−ε) onehot − g ε / V, written over x (the consuming loss) */
static void ce_grad_rows_over(void *ctx, size_t begin, size_t end) {
    const CeGradJob *j = ctx;
    for (size_t r = begin; r < end; r++) {
        float *d = j->d + r * (size_t)j->V;
        if (j->tg[r] == j->ignore) {
            memset(d, 0, (size_t)j->V * sizeof *d);
            continue;
        }
        float g = j->g, gs = j->gs, l = j->lse[r]; /* gs 0 without smoothing: x − 0 is x, bit for bit */
        for (int c = 0; c < j->V; c++) d[c] = g * s2s_expf(d[c] - l) - gs; /* reads x_c, then writes d_c */
        d[j->tg[r]] -= j->gt;
    }
}

/* d += the same */
static void ce_grad_rows_add(void *ctx, size_t begin, size_t end) {
    const CeGradJob *j = ctx;
    for (size_t r = begin; r < end; r++) {
        if (j->tg[r] == j->ignore) continue;
        const float *x = j->x + r * (size_t)j->V;
        float *d = j->d + r * (size_t)j->V;
        for (int c = 0; c < j->V; c++) d[c] += j->g * s2s_expf(x[c] - j->lse[r]) - j->gs;
        d[j->tg[r]] -= j->gt;
    }
}

void op_cross_entropy_backward(Tape *t, const TapeNode *n) {
    Tensor *logits = n->in[0];
    const int32_t *tg = n->saved;
    const float *lse = n->saved2;
    int V = tensor_cols(logits), N = tensor_rows(logits), count = n->i[1];
    if (!count) return;
    float g = n->out->grad[0] / (float)count;
    CeGradJob job = ce_job(logits->data, NULL, tg, lse, g, n->f, V, n->i[0]);
    if (n->i[2] && !logits->grad && !logits->base) { /* the gradient takes the logits' place */
        logits->grad = logits->data;
        logits->grad_recyclable = true; /* dead, values and gradient, once its producer ran backward */
        job.d = logits->grad;
        par_for((size_t)N, (size_t)V, ce_grad_rows_over, &job);
        return;
    }
    job.d = tensor_grad(t, logits);
    par_for((size_t)N, (size_t)V, ce_grad_rows_add, &job);
}

/* ---- linear + cross entropy, a chunk of rows at a time ---- */

/* logits (n, V) of rows r0 .. r0+n of x into y: x W^T + b. W's products are not marked as a
 * frozen weight's: packing (V, D) per step would cost more than it saves. */
static void xent_logits(Tape *t, const Tensor *x, const Tensor *w, const Tensor *b, const uint16_t *wbf, int r0, int n,
                        float *y) {
    int D = tensor_cols(x), V = w->shape[0];
    if (b) tape_gemm_bias(t, n, V, D, x->data + (size_t)r0 * D, D, w->data, wbf, NULL, b->data, y, V);
    else tape_gemm_op(t, false, true, n, V, D, 1.0f, x->data + (size_t)r0 * D, D, NULL, w->data, D, wbf, NULL, 0.0f, y, V);
}

/* One chunk's share of the gradients: d logits (n, V) written over the logits y, then
 * dx (n, D) += d W, dW += d^T x, db += column sums of d. */
static void xent_chunk_grads(Tape *t, const Tensor *x, const Tensor *w, const uint16_t *wbf, const int32_t *tg,
                             const float *lse, float g, float eps, int ignore, int r0, int n, float *y, float *dx,
                             float *dw, float *db) {
    int D = tensor_cols(x), V = w->shape[0];
    CeGradJob job = ce_job(y, y, tg + r0, lse + r0, g, eps, V, ignore);
    par_for((size_t)n, (size_t)V, ce_grad_rows_over, &job);
    if (dx) /* dx (n, D) += dlogits (n, V) W (V, D) */
        tape_gemm_op(t, false, false, n, D, V, 1.0f, y, V, NULL, w->data, D, wbf, NULL, 1.0f, dx + (size_t)r0 * D, D);
    if (dw) /* dW (V, D) += dlogits^T x */
        tape_gemm_op(t, true, false, V, D, n, 1.0f, y, V, NULL, x->data + (size_t)r0 * D, D, NULL, NULL, 1.0f, dw, D);
    if (db) ops_bias_grad(db, y, n, V);
}

Tensor *op_linear_xent(Tape *t, Tensor *x, Tensor *w, Tensor *b, const int32_t *targets, int ignore_index, int chunk,
                       float smoothing, double *nll_out) {
    int N = tensor_rows(x), D = tensor_cols(x), V = w->shape[0];
    S2S_ASSERT(w->ndim == 2 && w->shape[1] == D && (!b || b->size == (size_t)V) && chunk > 0);
    S2S_ASSERT(smoothing >= 0.0f && smoothing < 1.0f);
    int counted = 0;
    for (int r = 0; r < N; r++) {
        S2S_ASSERT(targets[r] == ignore_index || (targets[r] >= 0 && targets[r] < V));
        counted += targets[r] != ignore_index;
    }
    bool wants = tape_wants(t, x, w, b), early = wants && t->loss_grads_early && counted > 0;
    float *dx = NULL, *dw = NULL, *db = NULL;
    if (early) { /* before the mark: dx outlives the step's forward */
        dx = x->requires_grad ? tensor_grad(t, x) : NULL;
        dw = w->requires_grad ? tensor_grad(t, w) : NULL;
        db = b && b->requires_grad ? tensor_grad(t, b) : NULL;
    }
    float *lse = arena_alloc(&t->arena, (size_t)(N ? N : 1) * sizeof *lse);
    ArenaMark m = arena_mark(&t->arena);
    const uint16_t *wbf = tape_bf16_weight(t, w); /* once for all chunks */
    int rows = N < chunk ? (N ? N : 1) : chunk;
    float *y = arena_alloc(&t->arena, (size_t)rows * V * sizeof *y);
    float *mean = smoothing > 0.0f ? arena_alloc(&t->arena, (size_t)rows * sizeof *mean) : NULL;
    double total = 0.0, nll = 0.0;
    int count = 0;
    float g = early ? 1.0f / (float)counted : 0.0f; /* backward's seed / count, the seed being 1 */
    for (int r0 = 0; r0 < N; r0 += chunk) {
        int n = N - r0 < chunk ? N - r0 : chunk;
        xent_logits(t, x, w, b, wbf, r0, n, y);
        LseJob job = {y, targets + r0, lse + r0, mean, V, ignore_index};
        par_for((size_t)n, (size_t)V, lse_rows, &job);
        xent_sum(y, n, V, targets + r0, ignore_index, lse + r0, mean, smoothing, &total, &nll, &count);
        if (early) xent_chunk_grads(t, x, w, wbf, targets, lse, g, smoothing, ignore_index, r0, n, y, dx, dw, db);
    }
    S2S_ASSERT(count == counted);
    arena_rewind(&t->arena, m);
    if (nll_out) *nll_out = count ? nll / count : 0.0;
    Tensor *out = tape_tensor1(t, 1);
    out->data[0] = count ? (float)(total / count) : 0.0f;
    if (wants) {
        TapeNode *node = tape_record(t, OP_LINEAR_XENT, out);
        node->in[0] = x;
        node->in[1] = w;
        node->in[2] = b;
        int32_t *tg = arena_alloc(&t->arena, (size_t)(N ? N : 1) * sizeof *tg);
        memcpy(tg, targets, (size_t)N * sizeof *tg);
        node->saved = tg;
        node->saved2 = lse;
        node->f = smoothing;
        node->i[0] = ignore_index;
        node->i[1] = count;
        node->i[2] = chunk;
        node->i[3] = early;
    }
    return out;
}

void op_linear_xent_backward(Tape *t, const TapeNode *node) {
    Tensor *x = node->in[0], *w = node->in[1], *b = node->in[2];
    const int32_t *tg = node->saved;
    const float *lse = node->saved2;
    int N = tensor_rows(x), V = w->shape[0], count = node->i[1], chunk = node->i[2];
    if (!count) return;
    if (node->i[3]) { /* written in forward (loss_grads_early), for a seed of 1 */
        S2S_ASSERT(node->out->grad[0] == 1.0f);
        return;
    }
    float g = node->out->grad[0] / (float)count;
    float *dx = x->requires_grad ? tensor_grad(t, x) : NULL, *dw = w->requires_grad ? tensor_grad(t, w) : NULL;
    float *db = b && b->requires_grad ? tensor_grad(t, b) : NULL;
    ArenaMark m = arena_mark(&t->arena);
    const uint16_t *wbf = tape_bf16_weight(t, w);
    float *y = arena_alloc(&t->arena, (size_t)(N < chunk ? N : chunk) * V * sizeof *y);
    for (int r0 = 0; r0 < N; r0 += chunk) {
        int n = N - r0 < chunk ? N - r0 : chunk;
        xent_logits(t, x, w, b, wbf, r0, n, y); /* the forward's logits again, bit for bit */
        xent_chunk_grads(t, x, w, wbf, tg, lse, g, node->f, node->i[0], r0, n, y, dx, dw, db);
    }
    arena_rewind(&t->arena, m);
}
