/* ops_matmul.c — matrix products (gemm.h back ends): matmul (2-D and batched, with
 * transposes and time-major operands) and linear (x W^T + b). */
#include "ops_internal.h"
#include "s2s/par.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* One operand seen as Bt matrices of rows × cols, each at base + b * bstride with leading
 * dimension ld. */
typedef struct MatView {
    int batch, rows, cols, ld;
    size_t bstride;
} MatView;

static MatView mat_view(const Tensor *x, bool time_major) {
    MatView v;
    if (x->ndim == 2) {
        v = (MatView){1, x->shape[0], x->shape[1], x->shape[1], 0};
    } else {
        S2S_ASSERT(x->ndim == 3);
        if (time_major) /* (r, Bt, c) */
            v = (MatView){x->shape[1], x->shape[0], x->shape[2], x->shape[1] * x->shape[2],
                          (size_t)x->shape[2]};
        else /* (Bt, r, c) */
            v = (MatView){x->shape[0], x->shape[1], x->shape[2], x->shape[2],
                          (size_t)x->shape[1] * x->shape[2]};
    }
    return v;
}

typedef struct RowJob {
    bool ta, tb;
    int N, K;
    const float *A, *B;
    MatView va, vb, vc;
    float beta;
    float *C;
} RowJob;

static void rows_range(void *ctx, size_t b0, size_t b1) {
    const RowJob *j = ctx;
    /* a decoding step's cached keys and values are time-major: an entry's rows lie B·d
     * floats apart, which no hardware prefetcher follows, and the loads stalled the step
     * (70 % of gemm_row's samples on them); the rows of an entry ahead are asked for early */
    enum { AHEAD = 2 };
    for (size_t b = b0; b < b1; b++) {
        if (b + AHEAD < b1)
            gemm_prefetch_rows(j->B + (b + AHEAD) * j->vb.bstride, j->tb ? j->N : j->K, j->tb ? j->K : j->N, j->vb.ld);
        gemm_row(j->ta, j->tb, j->N, j->K, 1.0f, j->A + b * j->va.bstride, j->va.ld, j->B + b * j->vb.bstride, j->vb.ld,
                 j->beta, j->C + b * j->vc.bstride);
    }
}

/* C_b (+)= op(A_b) op(B_b) for every batch entry. One-row products (a decoding step's
 * attention, one per sentence) are split over the threads by entry. */
static void gemm_batched(Tape *t, bool ta, bool tb, int M, int N, int K, const float *A, MatView va,
                         const float *B, MatView vb, float beta, float *C, MatView vc) {
    if (M == 1 && N > 0 && K > 0 && vc.batch > 1) {
        t->flops += 2.0 * N * K * vc.batch;
        RowJob j = {ta, tb, N, K, A, B, va, vb, vc, beta, C};
        par_for((size_t)vc.batch, (size_t)N * K, rows_range, &j);
        return;
    }
    if (tape_gemm_small(t, ta, tb, M, N, K, vc.batch, A, va.ld, va.bstride, B, vb.ld, vb.bstride, beta, C, vc.ld,
                           vc.bstride))
        return;
    for (int b = 0; b < vc.batch; b++)
        tape_gemm(t, ta, tb, M, N, K, 1.0f, A + b * va.bstride, va.ld, B + b * vb.bstride, vb.ld,
                 beta, C + b * vc.bstride, vc.ld);
}

Tensor *op_matmul(Tape *t, Tensor *a, Tensor *b, int flags) {
    S2S_ASSERT(a->ndim == b->ndim && (a->ndim == 2 || a->ndim == 3));
    bool ta = flags & MM_TRANS_A, tb = flags & MM_TRANS_B;
    MatView va = mat_view(a, flags & MM_A_TM), vb = mat_view(b, flags & MM_B_TM);
    S2S_ASSERT(va.batch == vb.batch);
    int M = ta ? va.cols : va.rows, K = ta ? va.rows : va.cols;
    int Kb = tb ? vb.cols : vb.rows, N = tb ? vb.rows : vb.cols;
    S2S_ASSERT(K == Kb);
    Tensor *c;
    if (a->ndim == 2) c = tape_tensor2(t, M, N);
    else if (flags & MM_OUT_TM) c = tape_tensor3(t, M, va.batch, N);
    else c = tape_tensor3(t, va.batch, M, N);
    MatView vc = mat_view(c, flags & MM_OUT_TM);
    gemm_batched(t, ta, tb, M, N, K, a->data, va, b->data, vb, 0.0f, c->data, vc);
    if (tape_wants(t, a, b, NULL)) {
        TapeNode *n = tape_record(t, OP_MATMUL, c);
        n->in[0] = a;
        n->in[1] = b;
        n->i[0] = flags;
    }
    return c;
}

void op_matmul_backward(Tape *t, const TapeNode *n) {
    Tensor *a = n->in[0], *b = n->in[1], *c = n->out;
    int flags = n->i[0];
    bool ta = flags & MM_TRANS_A, tb = flags & MM_TRANS_B;
    MatView va = mat_view(a, flags & MM_A_TM), vb = mat_view(b, flags & MM_B_TM);
    MatView vc = mat_view(c, flags & MM_OUT_TM);
    int M = vc.rows, N = vc.cols, K = ta ? va.rows : va.cols;
    const float *dc = c->grad;
    bool fresh; /* a fresh gradient is written (beta 0), not zeroed and added to */
    if (a->requires_grad) {
        float *da = tensor_grad_to_write(t, a, &fresh);
        if (!ta) /* dA (M,K) += dC op(B)^T */
            gemm_batched(t, false, !tb, M, K, N, dc, vc, b->data, vb, fresh ? 0.0f : 1.0f, da, va);
        else /* dA (K,M) += op(B) dC^T */
            gemm_batched(t, tb, true, K, M, N, b->data, vb, dc, vc, fresh ? 0.0f : 1.0f, da, va);
    }
    if (b->requires_grad) {
        float *db = tensor_grad_to_write(t, b, &fresh);
        if (!tb) /* dB (K,N) += op(A)^T dC */
            gemm_batched(t, !ta, false, K, N, M, a->data, va, dc, vc, fresh ? 0.0f : 1.0f, db, vb);
        else /* dB (N,K) += dC^T op(A) */
            gemm_batched(t, true, ta, N, K, M, dc, vc, a->data, va, fresh ? 0.0f : 1.0f, db, vb);
    }
}

Tensor *op_linear(Tape *t, Tensor *x, Tensor *w, Tensor *b) {
    int in = tensor_cols(x), rows = tensor_rows(x);
    S2S_ASSERT(w->ndim == 2 && w->shape[1] == in);
    int out = w->shape[0];
    S2S_ASSERT(!b || (b->size == (size_t)out));
    int shape[S2S_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[x->ndim - 1] = out;
    Tensor *y = tape_tensor(t, x->ndim, shape);
    /* the weight is offered for packing (gemm.h) only outside training: a training step
     * multiplies by it once forward and once backward, in two layouts, so packing it every
     * step cost more than it saved (batches of 32: 3,300-3,438 against 4,009-4,025 tok/s) */
    tape_gemm_bias(t, rows, out, in, x->data, in, w->data, w->bf16, t->grad_enabled ? NULL : w, b ? b->data : NULL, y->data,
                  out);
    if (tape_wants(t, x, w, b)) {
        TapeNode *n = tape_record(t, OP_LINEAR, y);
        n->in[0] = x;
        n->in[1] = w;
        n->in[2] = b;
    }
    return y;
}

void op_linear_backward(Tape *t, const TapeNode *n) {
    Tensor *x = n->in[0], *w = n->in[1], *b = n->in[2], *y = n->out;
    int in = tensor_cols(x), rows = tensor_rows(x), out = w->shape[0];
    const float *dy = y->grad;
    bool fresh = false; /* dx written, not added to, when it is x's first gradient */
    float *dx = x->requires_grad ? tensor_grad_to_write(t, x, &fresh) : NULL, *dw = w->requires_grad ? tensor_grad(t, w) : NULL;
    /* on a bf16 tape both products read dy in bf16: rounded once, for the two of them */
    ArenaMark m = arena_mark(&t->arena);
    const uint16_t *dybf =
        dx && dw && tape_bf16_takes(t, rows, in, true) && out >= GEMM_BF16_MIN_SIDE ? tape_bf16_copy(t, dy, (size_t)rows * out) : NULL;
    if (dx) /* dx (rows,in) += dy (rows,out) W (out,in) */
        tape_gemm_op(t, false, false, rows, in, out, 1.0f, dy, out, dybf, w->data, in, w->bf16, NULL, fresh ? 0.0f : 1.0f,
                     dx, in);
    if (dw) /* dW (out,in) += dy^T x */
        tape_gemm_op(t, true, false, out, in, rows, 1.0f, dy, out, dybf, x->data, in, NULL, NULL, 1.0f, dw, in);
    arena_rewind(&t->arena, m);
    if (b && b->requires_grad) ops_bias_grad(tensor_grad(t, b), dy, rows, out);
}

typedef struct BiasJob {
    float *db;
    const float *dy;
    int rows, cols;
} BiasJob;

/* Each column's sum over the rows in row order (the same sums on any split), a block of
 * BIAS_BLOCK columns held in registers: adding into db row by row waited on each store. */
enum { BIAS_BLOCK = 64 };

static void bias_blocks(void *ctx, size_t b0, size_t b1) {
    const BiasJob *j = ctx;
    for (size_t b = b0; b < b1; b++) {
        size_t c = b * BIAS_BLOCK;
        float acc[BIAS_BLOCK];
        if (c + BIAS_BLOCK <= (size_t)j->cols) {
            memcpy(acc, j->db + c, sizeof acc);
            for (int r = 0; r < j->rows; r++) {
                const float *g = j->dy + (size_t)r * j->cols + c;
                for (int q = 0; q < BIAS_BLOCK; q++) acc[q] += g[q];
            }
            memcpy(j->db + c, acc, sizeof acc);
        } else { /* the last, narrower block */
            size_t w = (size_t)j->cols - c;
            memcpy(acc, j->db + c, w * sizeof *acc);
            for (int r = 0; r < j->rows; r++) {
                const float *g = j->dy + (size_t)r * j->cols + c;
                for (size_t q = 0; q < w; q++) acc[q] += g[q];
            }
            memcpy(j->db + c, acc, w * sizeof *acc);
        }
    }
}

void ops_bias_grad(float *db, const float *dy, int rows, int cols) {
    BiasJob j = {db, dy, rows, cols};
    par_for(((size_t)cols + BIAS_BLOCK - 1) / BIAS_BLOCK, (size_t)rows * BIAS_BLOCK, bias_blocks, &j);
}

/* ---- argmax of a linear layer (greedy decoding): a screen, then exact logits where needed ---- */

typedef struct ArgmaxJob {
    const float *x, *w;
    const float *approx; /* (N, V): the float32 and bf16 screens' logits (without the bias) */
    GemmInt8Sums q8;     /* the int8 screen's exact sums and row scales, scaled back here */
    const float *wscale; /* int8: per column, its weight row's scale */
    const int32_t *zc; /* int8: per column, the activations' offset (GemmScreenCols.zero) times its sum */
    float act_max; /* int8: their largest |value| (x's scale is max |x| / act_max) */
    /* per column: the bound is xn slope[v] + sx p[v] + (l1x + D sx / 2) q[v] + base[v]
     * + 2^-22 (|approx| + |value|) (see argmax_cols_fill); gate[v] 0 where allowed, -Inf
     * where not; bias[v] b[v] or 0 */
    const float *slope, *p, *q, *base, *gate, *bias;
    float wmax, bmax;   /* the largest |w_v| and |b_v|: exact dots cannot overflow below 2^126 */
    float smax, pmax, qmax, basemax; /* the largest slope, p, q and base: no bound exceeds their sum's */
    float *blk; /* per row, each block's highest value (with its gate): the pass's output */
    bool int8, check;
    const uint8_t *allowed;
    int V, D;
    int32_t *best;
    int32_t *exact; /* per row, the exact logits computed (for the coarse screen's rule and ./speed) */
} ArgmaxJob;

/* Candidates waiting for their exact logits, and the best so far. */
enum { EXACT_BATCH = 16 };
typedef struct ExactBatch {
    int32_t col[EXACT_BATCH];
    int n;
    int32_t best;
    float mx;
} ExactBatch;

/* The waiting candidates' exact logits, the logits every pick is made on: gemm_row's dot
 * (gemm_dots, eight or four at a time), then the bias (0 without one). Taken in column order: only a
 * strictly higher one replaces the best (so a NaN never overtakes). */
static void exact_batch_flush(const ArgmaxJob *j, const float *x, ExactBatch *eb, int32_t *count) {
    const float *rows[EXACT_BATCH];
    float z[EXACT_BATCH];
    for (int i = 0; i < eb->n; i++) rows[i] = j->w + (size_t)eb->col[i] * j->D;
    gemm_dots(j->D, x, rows, eb->n, z);
    for (int i = 0; i < eb->n; i++) {
        float zi = z[i] + j->bias[eb->col[i]];
        if (eb->best < 0 || zi > eb->mx) eb->mx = zi, eb->best = eb->col[i];
    }
    *count += eb->n;
    eb->n = 0;
}

/* Column v joins the waiting candidates (the batch computed first when full). */
static inline void exact_batch_add(const ArgmaxJob *j, const float *x, ExactBatch *eb, int32_t v, int32_t *count) {
    if (eb->n == EXACT_BATCH) exact_batch_flush(j, x, eb, count);
    eb->col[eb->n++] = v;
}

/* Every allowed logit exactly, in one scan from the first allowed column that moves on only
 * to a strictly higher logit (so a NaN never overtakes, and a row of NaN keeps the first).
 * For rows the screen cannot bound (an Inf or NaN in x, w or the logits). */
static int32_t argmax_exact_row(const ArgmaxJob *j, const float *x, int32_t *count) {
    ExactBatch eb = {.best = -1, .mx = -INFINITY};
    for (int v = 0; v < j->V; v++) {
        if (j->allowed && !j->allowed[v]) continue;
        exact_batch_add(j, x, &eb, v, count);
    }
    exact_batch_flush(j, x, &eb, count);
    return eb.best;
}

enum { LANES = 16, BLOCK = 4 * LANES }; /* BLOCK: columns under one maximum kept for the second pass */

/* Column v's bound: the exact logit lies within it of approx + b_v. */
static inline float bound(const ArgmaxJob *j, int v, float approx, float val, float xn, float sx, float l1x) {
    return xn * j->slope[v] + sx * j->p[v] + l1x * j->q[v] + j->base[v] + 0x1p-22f * (fabsf(approx) + fabsf(val));
}

/* A row's screen logits without the bias: the float32 or bf16 screen's, or the int8 sums
 * scaled back as an int8 tape does. */
typedef struct ScreenRow {
    const float *restrict a;
    const int32_t *restrict sums, *restrict zc;
    const float *restrict wscale;
    float sr;
} ScreenRow;

static inline __attribute__((always_inline)) float screen_at(const ScreenRow *s, bool int8, int v) {
    return int8 ? s->sr * s->wscale[v] * (float)(s->sums[v] - s->zc[v]) : s->a[v];
}

/* The pass over every column: the allowed column u with the highest screen value, the largest
 * |value|, whether any value is an Inf or NaN, and each block's highest value (with its gate)
 * into blk, for the second pass to skip the blocks below its cut unread. */
static inline __attribute__((always_inline)) int32_t screen_pass(const ArgmaxJob *j, const ScreenRow *s, bool int8,
                                                                 float *restrict blk, float *mabs_out, int *bad_out) {
    const float *restrict gate = j->gate, *restrict bias = j->bias;
    int V = j->V;
    float lmax[LANES], labs[LANES], bm[LANES];
    int32_t lidx[LANES];
    int bad[LANES];
    for (int q = 0; q < LANES; q++) lmax[q] = -INFINITY, labs[q] = 0.0f, lidx[q] = -1, bad[q] = 0;
#define SCREEN_PASS1(I, Q)                                                \
    do {                                                                  \
        float val_ = screen_at(s, int8, (I)) + bias[I];                   \
        float g_ = val_ + gate[I];                                        \
        int q_ = (Q);                                                     \
        bad[q_] |= !(fabsf(val_) <= FLT_MAX);                             \
        labs[q_] = fabsf(val_) > labs[q_] ? fabsf(val_) : labs[q_];       \
        lidx[q_] = g_ > lmax[q_] ? (I) : lidx[q_];                        \
        lmax[q_] = g_ > lmax[q_] ? g_ : lmax[q_];                         \
        bm[q_] = g_ > bm[q_] ? g_ : bm[q_];                               \
    } while (0)
    for (int v = 0; v < V; v += BLOCK) {
        for (int q = 0; q < LANES; q++) bm[q] = -INFINITY;
        if (v + BLOCK <= V) {
            for (int k = 0; k < BLOCK; k += LANES)
                for (int q = 0; q < LANES; q++) SCREEN_PASS1(v + k + q, q);
        } else {
            for (int c = v; c < V; c++) SCREEN_PASS1(c, 0);
        }
        float m = -INFINITY;
        for (int q = 0; q < LANES; q++) m = bm[q] > m ? bm[q] : m;
        blk[v / BLOCK] = m;
    }
#undef SCREEN_PASS1
    float top_val = -INFINITY, mabs = 0.0f;
    int32_t u = -1;
    int any_bad = 0;
    for (int q = 0; q < LANES; q++) {
        any_bad |= bad[q];
        mabs = labs[q] > mabs ? labs[q] : mabs;
        if (lidx[q] >= 0 && (u < 0 || lmax[q] > top_val)) top_val = lmax[q], u = lidx[q];
    }
    *mabs_out = mabs;
    *bad_out = any_bad;
    return u;
}

/* One row. The allowed column u with the highest screen value gives a lower bound on the
 * best exact logit, top = value_u - beta_u; a column whose value + beta_v is below it cannot
 * win. Rather than a bound for every column, one pass finds u, the largest |value| and any
 * Inf or NaN; a second keeps only the columns within R = max slope xn + max p sx + max q
 * l1x + max base + 2^-21 max |value| + 2^-22 max |b| of top (no beta_v exceeds R, as
 * |approx_v| = |value_v - b_v|), whose own bound then decides; the columns left (one,
 * nearly always) are settled by their exact logits. */
static inline __attribute__((always_inline)) int32_t argmax_screened_row_k(const ArgmaxJob *j, const ScreenRow *s,
                                                                           bool int8, const float *x, float xn,
                                                                           float sx, float l1x, float *blk,
                                                                           int32_t *count) {
    const float *restrict gate = j->gate, *restrict bias = j->bias;
    float mabs;
    int bad;
    int32_t u = screen_pass(j, s, int8, blk, &mabs, &bad);
    if (bad || u < 0) return argmax_exact_row(j, x, count);
    float au = screen_at(s, int8, u), vu = au + bias[u];
    float top = vu - bound(j, u, au, vu, xn, sx, l1x);
    double reach = ((double)xn * j->smax + (double)sx * j->pmax + (double)l1x * j->qmax + j->basemax) +
                   0x1p-21 * (double)mabs + 0x1p-22 * (double)j->bmax;
    double cut_d = (double)top - reach * (1.0 + 0x1p-10); /* room for the float sums of each beta_v */
    float cut = (float)cut_d;
    if ((double)cut > cut_d) cut = nextafterf(cut, -INFINITY);
    if (!(top > -INFINITY) || !(cut > -INFINITY)) return argmax_exact_row(j, x, count);
    for (int c = 0; j->check && c < j->V; c++) { /* every column the bounds keep passes the cut */
        float ac = screen_at(s, int8, c), vc = ac + bias[c];
        S2S_ASSERT(!((vc + bound(j, c, ac, vc, xn, sx, l1x)) + gate[c] >= top) || vc + gate[c] >= cut);
    }
    /* the candidates in column order, their exact logits a batch at a time (none for a lone
     * one); the first holding the highest wins */
    ExactBatch eb = {.best = -1, .mx = -INFINITY};
    for (int v = 0; v < j->V; v += BLOCK) {
        if (!(blk[v / BLOCK] >= cut)) continue; /* no value in it reaches the cut */
        int n = j->V - v < BLOCK ? j->V - v : BLOCK;
        uint8_t keep[BLOCK]; /* both tests in lanes, then the few kept: branches on each column mispredict */
        for (int i = 0; i < n; i++) {
            int c = v + i;
            float ac = screen_at(s, int8, c), vc = ac + bias[c];
            /* below the cut, its bound cannot reach top either (the check above) */
            keep[i] = (vc + gate[c] >= cut) & ((vc + bound(j, c, ac, vc, xn, sx, l1x)) + gate[c] >= top);
        }
        for (int i0 = 0; i0 < n; i0 += 8) {
            uint64_t word = 0; /* eight columns' flags at once: nearly always all zero */
            memcpy(&word, keep + i0, (size_t)(n - i0 < 8 ? n - i0 : 8));
            for (int i = i0; word && i < n && i < i0 + 8; i++) {
                if (!keep[i]) continue;
                exact_batch_add(j, x, &eb, v + i, count);
            }
        }
    }
    if (eb.best < 0 && eb.n == 1) return eb.col[0];
    exact_batch_flush(j, x, &eb, count);
    return eb.best; /* no exact logit is NaN: |partial sums| <= |x| |w_v| < 2^126 */
}

static int32_t argmax_screened_row(const ArgmaxJob *j, size_t r, const float *x, float xn, float sx, float l1x,
                                   int32_t *count) {
    float *blk = j->blk + r * (size_t)((j->V + BLOCK - 1) / BLOCK);
    if (j->int8) {
        ScreenRow s = {.sums = j->q8.sums + r * j->V, .zc = j->zc, .wscale = j->wscale, .sr = j->q8.row_scale[r]};
        return argmax_screened_row_k(j, &s, true, x, xn, sx, l1x, blk, count);
    }
    ScreenRow s = {.a = j->approx + r * j->V};
    return argmax_screened_row_k(j, &s, false, x, xn, sx, l1x, blk, count);
}

static void argmax_rows_range(void *ctx, size_t r0, size_t r1) {
    const ArgmaxJob *j = ctx;
    for (size_t r = r0; r < r1; r++) {
        const float *x = j->x + r * j->D;
        float xn, sx = 0.0f, l1x = 0.0f;
        gemm_row_norms(x, 1, j->D, j->D, &xn);
        if (j->int8) { /* the row's scale as int8 quantisation takes it (gemm_int8.c) */
            float mx = 0.0f;
            for (int k = 0; k < j->D; k++) mx = fabsf(x[k]) > mx ? fabsf(x[k]) : mx;
            sx = mx > 0.0f ? mx / j->act_max : 1.0f;
            gemm_row_l1(x, 1, j->D, j->D, &l1x);
            l1x = (float)(((double)l1x + 0.5001 * j->D * (double)sx) * (1.0 + 0x1p-20));
        }
        bool tame = xn * j->wmax <= 0x1p126f && j->bmax <= 0x1p126f; /* false for Inf and NaN too */
        int32_t count = 0;
        j->best[r] = tame ? argmax_screened_row(j, r, x, xn, sx, l1x, &count) : argmax_exact_row(j, x, &count);
        if (j->exact) j->exact[r] = count;
    }
}

/* The int8 tape's own pick: its logits (the int8 sums scaled back, plus the bias, as op_linear
 * computes them there) in the scan of op_linear_argmax's rule: the first allowed column,
 * then only a strictly higher logit; as lanes of maxima (a NaN never wins) and the first
 * allowed column holding the maximum, unless the first allowed one already does (or is NaN). */
static void own_rows_range(void *ctx, size_t r0, size_t r1) {
    const ArgmaxJob *j = ctx;
    const float *restrict gate = j->gate, *restrict bias = j->bias;
    int V = j->V, f = 0;
    while (gate[f] != 0.0f) f++;
    for (size_t r = r0; r < r1; r++) {
        ScreenRow s = {.sums = j->q8.sums + r * V, .zc = j->zc, .wscale = j->wscale, .sr = j->q8.row_scale[r]};
        float first = screen_at(&s, true, f) + bias[f], lane[LANES];
        for (int q = 0; q < LANES; q++) lane[q] = -INFINITY;
        int v = f + 1;
        for (; v + LANES <= V; v += LANES)
            for (int q = 0; q < LANES; q++) {
                float g = (screen_at(&s, true, v + q) + bias[v + q]) + gate[v + q];
                lane[q] = g > lane[q] ? g : lane[q];
            }
        float mx = first;
        for (; v < V; v++) {
            float g = (screen_at(&s, true, v) + bias[v]) + gate[v];
            mx = g > mx ? g : mx;
        }
        for (int q = 0; q < LANES; q++) mx = lane[q] > mx ? lane[q] : mx;
        int32_t best = f;
        if (!(first >= mx))
            for (v = f + 1; v < V; v++)
                if (gate[v] == 0.0f && screen_at(&s, true, v) + bias[v] == mx) {
                    best = v;
                    break;
                }
        j->best[r] = best;
    }
}

/* The bound's per-column factors (slope, p, q, base: see argmax_cols_fill) and their maxima.
 * They depend only on the weight, its screen and the bias, so they are kept per frozen weight
 * and bias (a few slots, the oldest replaced): made at every decoding step they were a
 * serial pass of double arithmetic over every column. */
typedef struct ArgmaxCols {
    const float *w, *b; /* the key: data, freeze stamps, screen kind (2 kind + coarse) and shape */
    uint64_t w_stamp, b_stamp;
    int kind, V, D;
    float *slope, *p, *q, *base; /* one block of 4 V */
    float wmax, bmax, smax, pmax, qmax, basemax;
} ArgmaxCols;

/* Per frozen weight: whether its int8 screen may run coarse (gemm_q8, A in 7 bits, where it
 * applies). Its bound is about twice as wide, so where logits crowd (an untrained model) it
 * leaves several times more exact logits: 732 a row against 115 for the fine screen on the
 * homework model's untrained output layer, 2.2 against 0.7 after 65 training steps. After a
 * coarse call leaving more than COARSE_MAX_EXACT(V) a row the next FINE_CALLS run fine. Speed
 * only: every screen picks the same columns. */
typedef struct CoarseState {
    const float *w;
    uint64_t stamp;
    int fine_left;
} CoarseState;
/* an exact logit costs about 1/45 of what the coarse screen saves a row at V = 5921 (Zen 3) */
#define COARSE_MAX_EXACT(V) ((V) / 256 + 1)
enum { FINE_CALLS = 64 };

enum { ARGMAX_CACHE_SLOTS = 4 };
struct ArgmaxCache {
    ArgmaxCols slot[ARGMAX_CACHE_SLOTS];
    int next;
    CoarseState coarse[ARGMAX_CACHE_SLOTS];
    int coarse_next;
};

static struct ArgmaxCache *argmax_cache(Tape *t) {
    if (!t->eng.argmax_cache) {
        t->eng.argmax_cache = s2s_xcalloc(1, sizeof *t->eng.argmax_cache);
        t->eng.argmax_cache_free = ops_argmax_cache_free; /* the engine frees it, knowing no op */
    }
    return t->eng.argmax_cache;
}

/* The coarse screen's state of a frozen weight (a slot, the oldest replaced). */
static CoarseState *coarse_state(Tape *t, const Tensor *w) {
    struct ArgmaxCache *c = argmax_cache(t);
    for (int i = 0; i < ARGMAX_CACHE_SLOTS; i++)
        if (c->coarse[i].w == w->data && c->coarse[i].stamp == w->frozen) return &c->coarse[i];
    CoarseState *cs = &c->coarse[c->coarse_next];
    c->coarse_next = (c->coarse_next + 1) % ARGMAX_CACHE_SLOTS;
    *cs = (CoarseState){.w = w->data, .stamp = w->frozen};
    return cs;
}

void ops_argmax_cache_free(struct ArgmaxCache *c) {
    if (!c) return;
    for (int i = 0; i < ARGMAX_CACHE_SLOTS; i++) free(c->slot[i].slope);
    free(c);
}

/* |approx + b - exact| <= c (|x| |w_v| + |b_v|) + (int8) e: c = 2u + u^2 + 2 gamma, with
 * u = 2^-8 for each operand rounded to bfloat16 (0 otherwise) and gamma = (D + 1) 2^-24
 * for the float32 sums of the screen and of the exact dot (any order); for int8, each
 * value within 0.5001 of its scale of the quantised one (rounding of x / s included):
 * e = sx |w_v|_1 / 2 + s_v (|x|_1 + D sx / 2) / 2. All with room to spare; 2^-100 (1 + |w_v|)
 * for values flushed to zero (bf16 kernels treat subnormals as zero), and 2^-22 (|approx|
 * + |value|), added per row, for the rounding of scaling back and of the bounds themselves.
 * The four columns are laid out in block (4 V floats). */
static void argmax_cols_fill(ArgmaxCols *ac, float *block, double u, const float *bias, GemmScreenCols wc) {
    int V = ac->V, D = ac->D;
    ac->slope = block, ac->p = block + V, ac->q = block + 2 * (size_t)V, ac->base = block + 3 * (size_t)V;
    double c = (2.0 * u + u * u + 2.5 * (D + 2) * 0x1p-24) * (1.0 + 0x1p-10);
    const float *wn = wc.norm;
    float wmax = 0.0f, bmax = 0.0f, smax = 0.0f, pmax = 0.0f, qmax = 0.0f, basemax = 0.0f;
    for (int v = 0; v < V; v++) {
        float bv = bias[v];
        wmax = wn[v] > wmax || wn[v] != wn[v] ? wn[v] : wmax; /* NaN sticks */
        bmax = fabsf(bv) > bmax || bv != bv ? fabsf(bv) : bmax;
        ac->slope[v] = (float)(c * wn[v] * (1.0 + 0x1p-20)); /* rounded up, in effect */
        ac->p[v] = wc.l1 ? (float)(0.5001 * wc.l1[v] * (1.0 + 0x1p-20)) : 0.0f;
        ac->q[v] = wc.scale ? (float)(0.5001 * wc.scale[v] * (1.0 + 0x1p-20)) : 0.0f;
        ac->base[v] = (float)((c * fabs((double)bv) + 0x1p-100 * (1.0 + wn[v])) * (1.0 + 0x1p-20));
        smax = fmaxf(smax, ac->slope[v]), pmax = fmaxf(pmax, ac->p[v]), qmax = fmaxf(qmax, ac->q[v]);
        basemax = fmaxf(basemax, ac->base[v]);
    }
    ac->wmax = wmax, ac->bmax = bmax, ac->smax = smax, ac->pmax = pmax, ac->qmax = qmax, ac->basemax = basemax;
}

/* The factors for this call: a slot's when the weight and the bias (if any) are frozen, else
 * made in the arena. */
static const ArgmaxCols *argmax_cols(Tape *t, TapeScreen kind, const Tensor *w, const Tensor *b, const float *bias,
                                     GemmScreenCols wc, int V, int D) {
    double u = kind == TAPE_SCREEN_BF16 || (!w->frozen && tape_bf16(t)) ? 0x1p-8 : 0.0; /* a bf16 tape's own product */
    ArgmaxCols key = {.w = w->data, .b = b ? b->data : NULL, .w_stamp = w->frozen, .b_stamp = b ? b->frozen : 0,
                      .kind = 2 * (int)kind + wc.coarse, .V = V, .D = D};
    if (!w->frozen || (b && !b->frozen)) {
        ArgmaxCols *ac = arena_alloc(&t->arena, sizeof *ac);
        *ac = key;
        argmax_cols_fill(ac, arena_alloc(&t->arena, (size_t)4 * V * sizeof(float)), u, bias, wc);
        return ac;
    }
    struct ArgmaxCache *cache = argmax_cache(t);
    for (int i = 0; i < ARGMAX_CACHE_SLOTS; i++) {
        ArgmaxCols *ac = &cache->slot[i];
        if (ac->slope && ac->w == key.w && ac->b == key.b && ac->w_stamp == key.w_stamp && ac->b_stamp == key.b_stamp &&
            ac->kind == key.kind && ac->V == V && ac->D == D)
            return ac;
    }
    ArgmaxCols *ac = &cache->slot[cache->next];
    cache->next = (cache->next + 1) % ARGMAX_CACHE_SLOTS;
    free(ac->slope);
    *ac = key;
    argmax_cols_fill(ac, s2s_xmalloc((size_t)4 * V * sizeof(float)), u, bias, wc);
    return ac;
}

/* Per column, from the arena: gate (0 where allowed, -Inf where not; at least one allowed)
 * then bias (b, or 0 without one), V floats each. */
static float *argmax_gate_bias(Tape *t, int V, const Tensor *b, const uint8_t *allowed) {
    float *gate = arena_alloc(&t->arena, (size_t)2 * V * sizeof *gate), *bias = gate + V;
    int n_allowed = 0;
    for (int v = 0; v < V; v++) {
        n_allowed += !allowed || allowed[v];
        gate[v] = !allowed || allowed[v] ? 0.0f : -INFINITY;
        bias[v] = b ? b->data[v] : 0.0f;
    }
    S2S_ASSERT(n_allowed > 0);
    return gate;
}

/* zero colsum[v] per column, from the arena: taken out of every row's sums */
static int32_t *offset_sums(Tape *t, GemmScreenCols wc, int V) {
    int32_t *zc = arena_alloc(&t->arena, (size_t)V * sizeof *zc);
    for (int v = 0; v < V; v++) zc[v] = wc.zero * wc.colsum[v];
    return zc;
}

bool op_linear_int8_argmax(Tape *t, const Tensor *x, const Tensor *w, const Tensor *b, const uint8_t *allowed,
                           int32_t *best) {
    int N = tensor_rows(x), D = tensor_cols(x), V = w->shape[0];
    S2S_ASSERT(w->ndim == 2 && w->shape[1] == D && (!b || b->size == (size_t)V) && V > 0 && D > 0);
    if (N == 0) return true;
    /* as op_linear offers the weight (only outside training) and gemm.c then decides */
    if (!tape_int8_applies(t, t->grad_enabled ? NULL : w, V) || D > 65536) return false;
    ArenaMark m = arena_mark(&t->arena);
    float *gate = argmax_gate_bias(t, V, b, allowed), *bias = gate + V; /* op_linear: x + 1 b, or x alone */
    GemmInt8Sums q8 = {arena_alloc(&t->arena, (size_t)N * V * sizeof *q8.sums),
                       arena_alloc(&t->arena, (size_t)N * sizeof *q8.row_scale), .fine = false};
    GemmScreenCols wc = tape_frozen_screen(t, TAPE_SCREEN_INT8, N, V, D, x->data, D, w, NULL, &q8);
    ArgmaxJob j = {.q8 = q8, .wscale = wc.scale, .zc = offset_sums(t, wc, V), .gate = gate, .bias = bias,
                   .V = V, .best = best};
    par_for((size_t)N, (size_t)V * 4, own_rows_range, &j);
    arena_rewind(&t->arena, m);
    return true;
}

void op_linear_argmax(Tape *t, const Tensor *x, const Tensor *w, const Tensor *b, const uint8_t *allowed,
                      int32_t *best) {
    int N = tensor_rows(x), D = tensor_cols(x), V = w->shape[0];
    S2S_ASSERT(w->ndim == 2 && w->shape[1] == D && (!b || b->size == (size_t)V) && V > 0 && D > 0);
    if (N == 0) return;
    TapeScreen kind = t->screen, fallback = gemm_cpu_has_bf16() ? TAPE_SCREEN_BF16 : TAPE_SCREEN_F32;
    if (kind == TAPE_SCREEN_AUTO) kind = gemm_cpu_has_int8() ? TAPE_SCREEN_INT8 : fallback;
    if (kind == TAPE_SCREEN_INT8 && D > 65536) kind = fallback; /* int32 sums would overflow */
    if (!w->frozen) kind = TAPE_SCREEN_F32; /* weights not frozen: nothing is packed, and the norms are made here */
    ArenaMark m = arena_mark(&t->arena);
    float *approx = NULL;
    GemmInt8Sums q8 = {0};
    CoarseState *cs = NULL;
    if (kind == TAPE_SCREEN_INT8) {
        q8.sums = arena_alloc(&t->arena, (size_t)N * V * sizeof *q8.sums);
        q8.row_scale = arena_alloc(&t->arena, (size_t)N * sizeof *q8.row_scale);
        cs = coarse_state(t, w);
        q8.fine = cs->fine_left > 0;
        if (cs->fine_left > 0) cs->fine_left--;
    } else {
        approx = arena_alloc(&t->arena, (size_t)N * V * sizeof *approx);
    }
    GemmScreenCols wc = {0};
    if (w->frozen) {
        wc = tape_frozen_screen(t, kind, N, V, D, x->data, D, w, approx, &q8);
    } else {
        float *norm = arena_alloc(&t->arena, (size_t)V * sizeof *norm);
        gemm_row_norms(w->data, V, D, D, norm);
        tape_gemm(t, false, true, N, V, D, 1.0f, x->data, D, w->data, D, 0.0f, approx, V);
        wc.norm = norm;
    }
    float *gate = argmax_gate_bias(t, V, b, allowed), *bias = gate + V;
    const ArgmaxCols *ac = argmax_cols(t, kind, w, b, bias, wc, V, D);
    float *blk = arena_alloc(&t->arena, (size_t)N * ((V + BLOCK - 1) / BLOCK) * sizeof *blk);
    ArgmaxJob j = {.x = x->data, .w = w->data, .approx = approx, .q8 = q8, .wscale = wc.scale,
                   .zc = kind == TAPE_SCREEN_INT8 ? offset_sums(t, wc, V) : NULL, .act_max = (float)wc.act_max,
                   .slope = ac->slope, .p = ac->p, .q = ac->q, .base = ac->base, .gate = gate, .bias = bias,
                   .wmax = ac->wmax, .bmax = ac->bmax, .smax = ac->smax, .pmax = ac->pmax, .qmax = ac->qmax,
                   .basemax = ac->basemax, .blk = blk, .int8 = kind == TAPE_SCREEN_INT8, .check = t->screen_check,
                   .allowed = allowed, .V = V, .D = D, .best = best};
    j.exact = arena_alloc(&t->arena, (size_t)N * sizeof *j.exact);
    par_for((size_t)N, (size_t)V * 4, argmax_rows_range, &j);
    long exact = 0;
    for (int r = 0; r < N; r++) exact += j.exact[r];
    if (wc.coarse && exact > (long)N * COARSE_MAX_EXACT(V)) cs->fine_left = FINE_CALLS;
    if (t->eng.gemm_stats) { /* ./speed --gemm-profile: how much the screen left to the exact logits */
        t->eng.gemm_stats->argmax_rows += N;
        t->eng.gemm_stats->argmax_exact += exact;
    }
    arena_rewind(&t->arena, m);
}
