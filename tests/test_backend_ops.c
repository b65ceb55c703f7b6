/* test_backend_ops.c — every op of S2S_OPS run through the back-end interface (ops.h on a tape
 * and its engine) against a plain reference written here: loops in double over the inputs'
 * values, nothing shared with src/core. In the manner of ggml's test-backend-ops: a second back
 * end plugs into the engine and has this check waiting, on each engine this build makes
 * (float32 on oneDNN and on OpenBLAS, bfloat16 where the CPU multiplies it). The gradients are
 * test_gradcheck.c's (finite differences of each op, whatever the back end). */
#include "test_util.h"
#include "s2s/ops.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct Bk {
    Tape t;
    Rng rng;
    double tol;     /* relative to the reference's largest magnitude */
    double tol_mm;  /* for the products (bf16 rounds their operands) */
    bool seen[OP_COUNT];
    int checked;
    const char *engine;
} Bk;

static Tensor *leaf(Bk *k, int ndim, const int *shape, float lo, float hi) {
    Tensor *x = tensor_new(ndim, shape, true);
    tu_fill(x, &k->rng, lo, hi);
    return x;
}
#define SH(...) ((int[]){__VA_ARGS__})

/* y against ref (n values): the largest difference relative to max(1, the largest |ref|). */
static void expect_near(Bk *k, const char *what, const Tensor *y, const double *ref, size_t n, double tol) {
    cr_assert_eq(y->size, n, "%s on %s: %zu values, the reference %zu", what, k->engine, y->size, n);
    double big = 1.0, worst = 0.0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) big = fmax(big, fabs(ref[i]));
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)y->data[i] - ref[i]);
        if (!(d <= worst)) worst = d, at = i;
    }
    cr_expect(worst <= tol * big, "%s on %s: element %zu is %.9g, the reference %.9g (tolerance %.1e of %.3g)", what, k->engine,
              at, (double)y->data[at], ref[at], tol, big);
    k->checked++;
}

/* Marks the ops the tape recorded since node n0, and rewinds it. */
static void done(Bk *k, int n0) {
    for (int i = n0; i < k->t.n_nodes; i++) k->seen[k->t.nodes[i].op] = true;
    tape_reset(&k->t);
}

/* ---- products ---- */

/* op(X)[b][i][j] of a 2-D or 3-D operand stored batch-major or time-major, transposed or not. */
static double at3(const Tensor *x, bool tm, bool trans, int b, int i, int j) {
    if (trans) {
        int s = i;
        i = j, j = s;
    }
    if (x->ndim == 2) return x->data[(size_t)i * x->shape[1] + j];
    return tm ? x->data[((size_t)i * x->shape[1] + b) * x->shape[2] + j] : x->data[((size_t)b * x->shape[1] + i) * x->shape[2] + j];
}

static void matmul_case(Bk *k, int flags, int Bt, int M, int K, int N) {
    bool ta = flags & MM_TRANS_A, tb = flags & MM_TRANS_B, atm = flags & MM_A_TM, btm = flags & MM_B_TM, otm = flags & MM_OUT_TM;
    int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    Tensor *a = Bt ? leaf(k, 3, atm ? SH(ar, Bt, ac) : SH(Bt, ar, ac), -1, 1) : leaf(k, 2, SH(ar, ac), -1, 1);
    Tensor *b = Bt ? leaf(k, 3, btm ? SH(br, Bt, bc) : SH(Bt, br, bc), -1, 1) : leaf(k, 2, SH(br, bc), -1, 1);
    int n0 = k->t.n_nodes, nb = Bt ? Bt : 1;
    Tensor *y = op_matmul(&k->t, a, b, flags);
    double *ref = calloc((size_t)nb * M * N, sizeof *ref);
    for (int bb = 0; bb < nb; bb++)
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double s = 0;
                for (int q = 0; q < K; q++) s += at3(a, atm, ta, bb, i, q) * at3(b, btm, tb, bb, q, j);
                ref[otm && Bt ? ((size_t)i * nb + bb) * N + j : ((size_t)bb * M + i) * N + j] = s;
            }
    char what[64];
    snprintf(what, sizeof what, "matmul flags %d (%d, %d, %d, %d)", flags, Bt, M, K, N);
    expect_near(k, what, y, ref, (size_t)nb * M * N, k->tol_mm);
    free(ref);
    tensor_free(a), tensor_free(b);
    done(k, n0);
}

static void products(Bk *k) {
    matmul_case(k, 0, 0, 9, 17, 12);
    matmul_case(k, MM_TRANS_A, 0, 16, 8, 33);
    matmul_case(k, MM_TRANS_B, 0, 24, 40, 20);
    matmul_case(k, MM_TRANS_A | MM_TRANS_B, 0, 7, 5, 11);
    matmul_case(k, 0, 3, 5, 6, 7);
    matmul_case(k, MM_TRANS_B | MM_A_TM | MM_B_TM, 4, 6, 16, 9);  /* scores: (T,B,D) · (S,B,D)^T */
    matmul_case(k, MM_B_TM | MM_OUT_TM, 4, 6, 9, 16);              /* contexts: (B,T,S) · (S,B,D) → (T,B,D) */
    /* linear: x W^T + b, and without a bias */
    for (int with_b = 0; with_b < 2; with_b++) {
        Tensor *x = leaf(k, 3, SH(3, 5, 24), -1, 1), *w = leaf(k, 2, SH(18, 24), -1, 1), *b = leaf(k, 1, SH(18), -1, 1);
        int n0 = k->t.n_nodes;
        Tensor *y = op_linear(&k->t, x, w, with_b ? b : NULL);
        double ref[15 * 18];
        for (int r = 0; r < 15; r++)
            for (int o = 0; o < 18; o++) {
                double s = with_b ? b->data[o] : 0.0;
                for (int q = 0; q < 24; q++) s += (double)x->data[r * 24 + q] * w->data[o * 24 + q];
                ref[r * 18 + o] = s;
            }
        expect_near(k, with_b ? "linear" : "linear without bias", y, ref, 15 * 18, k->tol_mm);
        tensor_free(x), tensor_free(w), tensor_free(b);
        done(k, n0);
    }
}

/* ---- element-wise, reductions, shapes ---- */

static double gelu(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }
static double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
static double relu(double x) { return x > 0 ? x : 0.0; }

static void unary(Bk *k, const char *name, Tensor *(*op)(Tape *, Tensor *), double (*f)(double), float lo, float hi) {
    Tensor *x = leaf(k, 2, SH(7, 13), lo, hi);
    int n0 = k->t.n_nodes;
    Tensor *y = op(&k->t, x);
    double ref[91];
    for (int i = 0; i < 91; i++) ref[i] = f(x->data[i]);
    expect_near(k, name, y, ref, 91, k->tol);
    tensor_free(x);
    done(k, n0);
}

static void elementwise(Bk *k) {
    unary(k, "tanh", op_tanh, tanh, -3, 3);
    unary(k, "sigmoid", op_sigmoid, sigmoid, -6, 6);
    unary(k, "relu", op_relu, relu, -2, 2);
    unary(k, "gelu", op_gelu, gelu, -4, 4);
    unary(k, "exp", op_exp, exp, -4, 4);
    unary(k, "log", op_log, log, 0.01f, 5);
    Tensor *a = leaf(k, 3, SH(2, 3, 5), -2, 2), *b = leaf(k, 3, SH(2, 3, 5), -2, 2), *bias = leaf(k, 1, SH(5), -1, 1);
    double ref[30];
    int n0 = k->t.n_nodes;
    Tensor *y = op_add(&k->t, a, b);
    for (int i = 0; i < 30; i++) ref[i] = (double)a->data[i] + b->data[i];
    expect_near(k, "add", y, ref, 30, k->tol);
    y = op_mul(&k->t, a, b);
    for (int i = 0; i < 30; i++) ref[i] = (double)a->data[i] * b->data[i];
    expect_near(k, "mul", y, ref, 30, k->tol);
    y = op_scale(&k->t, a, -0.37f);
    for (int i = 0; i < 30; i++) ref[i] = (double)a->data[i] * -0.37f;
    expect_near(k, "scale", y, ref, 30, k->tol);
    y = op_add_bias(&k->t, a, bias);
    for (int i = 0; i < 30; i++) ref[i] = (double)a->data[i] + bias->data[i % 5];
    expect_near(k, "add_bias", y, ref, 30, k->tol);
    double s = 0;
    for (int i = 0; i < 30; i++) s += a->data[i];
    y = op_sum(&k->t, a);
    expect_near(k, "sum", y, &s, 1, k->tol);
    double m = s / 30;
    y = op_mean(&k->t, a);
    expect_near(k, "mean", y, &m, 1, k->tol);
    tensor_free(a), tensor_free(b), tensor_free(bias);
    done(k, n0);
}

static void shapes(Bk *k) {
    Tensor *a = leaf(k, 3, SH(2, 3, 4), -1, 1), *b = leaf(k, 3, SH(2, 3, 5), -1, 1), *src = leaf(k, 2, SH(6, 4), -1, 1);
    int n0 = k->t.n_nodes;
    double ref[54];
    Tensor *y = op_concat(&k->t, a, b);
    for (int r = 0; r < 6; r++)
        for (int c = 0; c < 9; c++) ref[r * 9 + c] = c < 4 ? a->data[r * 4 + c] : b->data[r * 5 + c - 4];
    expect_near(k, "concat", y, ref, 54, k->tol);
    y = op_slice(&k->t, b, 1, 3);
    for (int r = 0; r < 6; r++)
        for (int c = 0; c < 3; c++) ref[r * 3 + c] = b->data[r * 5 + 1 + c];
    expect_near(k, "slice", y, ref, 18, k->tol);
    int32_t ids[7] = {5, 0, 2, 2, 4, 1, 5};
    y = op_gather_rows(&k->t, src, ids, 7);
    for (int r = 0; r < 7; r++)
        for (int c = 0; c < 4; c++) ref[r * 4 + c] = src->data[ids[r] * 4 + c];
    expect_near(k, "gather_rows", y, ref, 28, k->tol);
    Tensor *few = leaf(k, 2, SH(3, 4), -1, 1);
    int32_t at[3] = {0, 3, 4}; /* rows 0, 3 and 4 of 6 are few's; the others zero */
    y = op_scatter_rows(&k->t, few, at, 3, 6);
    for (int r = 0; r < 6; r++)
        for (int c = 0; c < 4; c++) ref[r * 4 + c] = r == 0 ? few->data[c] : r == 3 ? few->data[4 + c] : r == 4 ? few->data[8 + c] : 0.0;
    expect_near(k, "scatter_rows", y, ref, 24, k->tol);
    tensor_free(few);
    /* dropout: each value kept as x / (1 − p) or dropped to 0, about p of them dropped */
    Tensor *x = leaf(k, 2, SH(40, 50), 0.5f, 1.5f);
    k->t.training = true;
    Rng r;
    rng_init(&r, 9, RNG_STREAM_DROPOUT);
    y = op_dropout(&k->t, x, 0.25f, &r);
    k->t.training = false;
    int dropped = 0;
    bool scaled = true;
    for (size_t i = 0; i < x->size; i++) {
        if (y->data[i] == 0.0f) dropped++;
        else scaled &= fabs((double)y->data[i] - x->data[i] / 0.75) <= 1e-6 * x->data[i];
    }
    cr_expect(scaled, "dropout on %s: a kept value is not x / (1 − p)", k->engine);
    cr_expect(dropped > 400 && dropped < 600, "dropout on %s: %d of 2000 dropped at p = 0.25", k->engine, dropped);
    k->checked++;
    tensor_free(a), tensor_free(b), tensor_free(src), tensor_free(x);
    done(k, n0);
}

/* ---- softmax, losses, normalisation ---- */

static void softmax_ref(const float *x, const uint8_t *keep, int n, double *out) {
    double mx = -INFINITY, s = 0;
    for (int i = 0; i < n; i++)
        if (!keep || keep[i]) mx = fmax(mx, x[i]);
    for (int i = 0; i < n; i++) s += (!keep || keep[i]) ? exp(x[i] - mx) : 0.0;
    for (int i = 0; i < n; i++) out[i] = (!keep || keep[i]) && s > 0 ? exp(x[i] - mx) / s : 0.0;
}

/* −log softmax(x)[y], and the mean over all classes of −log p. */
static double nll(const float *x, int n, int y, double *mean_all) {
    double mx = -INFINITY, s = 0, sum = 0;
    for (int i = 0; i < n; i++) mx = fmax(mx, x[i]);
    for (int i = 0; i < n; i++) s += exp(x[i] - mx);
    double lse = mx + log(s);
    for (int i = 0; i < n; i++) sum += lse - x[i];
    *mean_all = sum / n;
    return lse - x[y];
}

static void losses(Bk *k) {
    Tensor *x = leaf(k, 3, SH(2, 3, 6), -3, 3);
    uint8_t mask[2 * 6] = {1, 1, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0}; /* the second mask row: all masked */
    int n0 = k->t.n_nodes;
    double ref[40];
    Tensor *y = op_softmax(&k->t, x, NULL, 0);
    for (int r = 0; r < 6; r++) softmax_ref(x->data + r * 6, NULL, 6, ref + r * 6);
    expect_near(k, "softmax", y, ref, 36, k->tol);
    y = op_softmax(&k->t, x, mask, 2);
    for (int r = 0; r < 6; r++) softmax_ref(x->data + r * 6, mask + (r / 3) * 6, 6, ref + r * 6);
    expect_near(k, "softmax, masked", y, ref, 36, k->tol);
    /* cross-entropy over counted rows, label smoothing ε: (1 − ε) NLL + ε mean −log p */
    Tensor *lg = leaf(k, 2, SH(5, 9), -4, 4), *h = leaf(k, 2, SH(5, 7), -1, 1), *w = leaf(k, 2, SH(9, 7), -1, 1),
           *b = leaf(k, 1, SH(9), -1, 1);
    int32_t tg[5] = {3, 0, 8, 1, 4}; /* 0: ignored */
    for (int e = 0; e < 2; e++) {
        float eps = e ? 0.2f : 0.0f;
        double loss = 0, ma;
        for (int r = 0; r < 5; r++)
            if (tg[r]) loss += (1 - eps) * nll(lg->data + r * 9, 9, tg[r], &ma) + eps * ma;
        loss /= 4;
        y = e ? op_cross_entropy_consume(&k->t, op_scale(&k->t, lg, 1.0f), tg, 0, eps, NULL) : op_cross_entropy(&k->t, lg, tg, 0);
        expect_near(k, e ? "cross_entropy, smoothed" : "cross_entropy", y, &loss, 1, k->tol);
        /* the same through the output layer, two rows a chunk */
        float z[5 * 9];
        loss = 0;
        for (int r = 0; r < 5; r++)
            for (int v = 0; v < 9; v++) {
                double s = b->data[v];
                for (int q = 0; q < 7; q++) s += (double)h->data[r * 7 + q] * w->data[v * 7 + q];
                z[r * 9 + v] = (float)s;
            }
        for (int r = 0; r < 5; r++)
            if (tg[r]) loss += (1 - eps) * nll(z + r * 9, 9, tg[r], &ma) + eps * ma;
        loss /= 4;
        y = op_linear_xent(&k->t, h, w, b, tg, 0, 2, eps, NULL);
        expect_near(k, e ? "linear_xent, smoothed" : "linear_xent", y, &loss, 1, k->tol_mm);
    }
    /* layer norm with the biased variance */
    Tensor *ln = leaf(k, 2, SH(4, 10), -2, 3), *g = leaf(k, 1, SH(10), 0.5f, 1.5f), *bb = leaf(k, 1, SH(10), -1, 1);
    y = op_layer_norm(&k->t, ln, g, bb, 1e-5f);
    for (int r = 0; r < 4; r++) {
        double mu = 0, var = 0;
        for (int c = 0; c < 10; c++) mu += ln->data[r * 10 + c] / 10.0;
        for (int c = 0; c < 10; c++) var += (ln->data[r * 10 + c] - mu) * (ln->data[r * 10 + c] - mu) / 10.0;
        for (int c = 0; c < 10; c++) ref[r * 10 + c] = (ln->data[r * 10 + c] - mu) / sqrt(var + 1e-5) * g->data[c] + bb->data[c];
    }
    expect_near(k, "layer_norm", y, ref, 40, k->tol);
    tensor_free(x), tensor_free(lg), tensor_free(h), tensor_free(w), tensor_free(b);
    tensor_free(ln), tensor_free(g), tensor_free(bb);
    done(k, n0);
}

/* ---- attention scores and the recurrence ---- */

static void additive(Bk *k) {
    int T = 3, B = 2, S = 4, A = 5;
    Tensor *q = leaf(k, 3, SH(T, B, A), -1, 1), *kk = leaf(k, 3, SH(S, B, A), -1, 1), *v = leaf(k, 1, SH(A), -1, 1);
    int n0 = k->t.n_nodes;
    Tensor *y = op_additive_scores(&k->t, q, kk, v);
    double ref[2 * 3 * 4];
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int s = 0; s < S; s++) {
                double sc = 0;
                for (int a = 0; a < A; a++) sc += v->data[a] * tanh((double)q->data[(t * B + b) * A + a] + kk->data[(s * B + b) * A + a]);
                ref[(b * T + t) * S + s] = sc;
            }
    expect_near(k, "additive_scores", y, ref, (size_t)B * T * S, k->tol);
    tensor_free(q), tensor_free(kk), tensor_free(v);
    done(k, n0);
}

/* One direction of a GRU or LSTM over S steps, PyTorch's equations and gate order, inactive
 * rows keeping their state; out (S + 1, B, H): the outputs, then the final state. */
static void rnn_ref(CellKind kind, const Tensor *xg, const Tensor *h0, const Tensor *c0, const Tensor *w, const Tensor *bh,
                    const uint8_t *active, bool reverse, int S, int B, int H, double *out) {
    int G = kind == CELL_GRU ? 3 * H : 4 * H;
    double *h = calloc((size_t)B * H, sizeof *h), *c = calloc((size_t)B * H, sizeof *c), *gh = calloc((size_t)G, sizeof *gh);
    for (int i = 0; i < B * H; i++) h[i] = h0->data[i], c[i] = c0 ? c0->data[i] : 0.0;
    for (int st = 0; st < S; st++) {
        int s = reverse ? S - 1 - st : st;
        for (int b = 0; b < B; b++) {
            double *o = out + ((size_t)s * B + b) * H, *hb = h + (size_t)b * H, *cb = c + (size_t)b * H;
            if (active && !active[s * B + b]) {
                for (int j = 0; j < H; j++) o[j] = 0.0;
                continue;
            }
            const float *x = xg->data + ((size_t)s * B + b) * G;
            for (int r = 0; r < G; r++) {
                gh[r] = bh->data[r];
                for (int j = 0; j < H; j++) gh[r] += (double)w->data[(size_t)r * H + j] * hb[j];
            }
            for (int j = 0; j < H; j++) {
                if (kind == CELL_GRU) {
                    double rr = sigmoid(x[j] + gh[j]), z = sigmoid(x[H + j] + gh[H + j]);
                    double n = tanh(x[2 * H + j] + rr * gh[2 * H + j]);
                    o[j] = (1 - z) * n + z * hb[j];
                } else {
                    double ig = sigmoid(x[j] + gh[j]), fg = sigmoid(x[H + j] + gh[H + j]);
                    double gg = tanh(x[2 * H + j] + gh[2 * H + j]), og = sigmoid(x[3 * H + j] + gh[3 * H + j]);
                    cb[j] = fg * cb[j] + ig * gg;
                    o[j] = og * tanh(cb[j]);
                }
            }
            for (int j = 0; j < H; j++) hb[j] = o[j];
        }
    }
    for (int i = 0; i < B * H; i++) out[(size_t)S * B * H + i] = h[i];
    free(h), free(c), free(gh);
}

static void recurrence(Bk *k) {
    int S = 5, B = 3, H = 6;
    uint8_t active[5 * 3] = {1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 0, 0, 1, 0, 0}; /* lengths 5, 3, 2 */
    for (int kind = 0; kind < 2; kind++)
        for (int rev = 0; rev < 2; rev++) {
            int G = kind == CELL_GRU ? 3 * H : 4 * H;
            Tensor *xg = leaf(k, 2, SH(S * B, G), -1, 1), *h0 = leaf(k, 2, SH(B, H), -1, 1), *c0 = leaf(k, 2, SH(B, H), -1, 1);
            Tensor *w = leaf(k, 2, SH(G, H), -0.5f, 0.5f), *bh = leaf(k, 1, SH(G), -0.5f, 0.5f);
            int n0 = k->t.n_nodes;
            Tensor *cells = NULL;
            Tensor *y = op_rnn_seq(&k->t, (CellKind)kind, xg, h0, kind == CELL_LSTM ? c0 : NULL, w, bh, active, rev, &cells);
            double *ref = calloc((size_t)(S + 1) * B * H, sizeof *ref);
            rnn_ref((CellKind)kind, xg, h0, kind == CELL_LSTM ? c0 : NULL, w, bh, active, rev, S, B, H, ref);
            char what[48];
            snprintf(what, sizeof what, "rnn_seq %s%s", kind == CELL_GRU ? "gru" : "lstm", rev ? ", reversed" : "");
            expect_near(k, what, y, ref, (size_t)(S + 1) * B * H, k->tol_mm);
            free(ref);
            tensor_free(xg), tensor_free(h0), tensor_free(c0), tensor_free(w), tensor_free(bh);
            done(k, n0);
        }
}

/* Runs every case on one engine; false when this build has none such (no bf16 here). */
static bool run_engine(Bk *k, Precision p, GemmLib lib, const char *name) {
    memset(k, 0, sizeof *k);
    S2sError err;
    if (tape_init_engine(&k->t, p, lib, 1, "backend-ops", &err)) return false;
    k->t.grad_enabled = true; /* nodes recorded: which ops ran */
    rng_init(&k->rng, 4, RNG_STREAM_INIT);
    k->engine = name;
    k->tol = 1e-5;
    k->tol_mm = p == PRECISION_BF16 ? 2e-2 : 1e-5;
    products(k);
    elementwise(k);
    shapes(k);
    losses(k);
    additive(k);
    recurrence(k);
    tape_free(&k->t);
    return true;
}

Test(backend_ops, every_op_against_a_plain_reference_float32) {
    static Bk k[2];
    cr_assert(run_engine(&k[0], PRECISION_FP32, GEMM_LIB_ONEDNN, "float32 (oneDNN)"));
    cr_assert(run_engine(&k[1], PRECISION_FP32, GEMM_LIB_OPENBLAS, "float32 (OpenBLAS)"));
    for (int op = 0; op < OP_COUNT; op++) cr_expect(k[0].seen[op], "op %s has no case against a reference", OP_NAME[op]);
    cr_expect_gt(k[0].checked, 35);
    cr_expect_eq(k[0].checked, k[1].checked);
}

Test(backend_ops, every_op_against_a_plain_reference_bf16) {
    tu_require_bf16();
    static Bk k;
    cr_assert(run_engine(&k, PRECISION_BF16, GEMM_LIB_ONEDNN, "bf16"));
    for (int op = 0; op < OP_COUNT; op++) cr_expect(k.seen[op], "op %s has no case against a reference", OP_NAME[op]);
}
