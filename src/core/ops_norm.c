/* ops_norm.c — layer normalisation over the last axis, as PyTorch's nn.LayerNorm:
 * y = (x − mean) / sqrt(var + eps) ⊙ γ + β, with the biased variance. Backward keeps each
 * row's mean and 1/σ (2 doubles a row) and reads x again, instead of an (N, D) copy. The
 * statistics and x − mean are in double: rows far from zero keep their precision. */
#include "ops_internal.h"
#include "s2s/par.h"

#include <math.h>

typedef struct NormJob {
    const float *x, *gamma, *beta, *dy;
    float *y, *dx, *xhat_dy;
    double *mean, *rstd;
    int cols;
    float eps;
    bool dx_set; /* backward: dx is a fresh buffer, written rather than added to */
} NormJob;

/* Sums of a row in NL independent double lanes, added up in a fixed order at the end: the
 * compiler vectorises them (one running sum is a serial chain of dependent adds). */
#define NL 8

static double lanes_total(const double *lane, double tail) {
    for (int l = 0; l < NL; l++) tail += lane[l];
    return tail;
}

/* One row's y from its mean and 1/σ. Inlined with γ and β as constants at each call, so
 * that no test is left inside the loop and it vectorises. */
static inline __attribute__((always_inline)) void norm_row_out(const float *restrict xr, float *restrict yr, int D,
                                                               double mu, double rs, const float *restrict gamma,
                                                               const float *restrict beta) {
    for (int k = 0; k < D; k++) {
        float h = (float)(((double)xr[k] - mu) * rs);
        yr[k] = gamma ? h * gamma[k] + (beta ? beta[k] : 0.0f) : h;
    }
}

/* Mean and variance in double, two passes: the same bits whatever the row split. */
static void norm_rows(void *ctx, size_t begin, size_t end) {
    const NormJob *j = ctx;
    const float *gamma = j->gamma, *beta = j->beta;
    int D = j->cols, body = D / NL * NL;
    for (size_t r = begin; r < end; r++) {
        const float *xr = j->x + r * (size_t)D;
        double lane[NL] = {0}, s = 0;
        for (int k = 0; k < body; k += NL)
            for (int l = 0; l < NL; l++) lane[l] += xr[k + l];
        for (int k = body; k < D; k++) s += xr[k];
        double mu = lanes_total(lane, s) / D, v = 0;
        for (int l = 0; l < NL; l++) lane[l] = 0;
        for (int k = 0; k < body; k += NL)
            for (int l = 0; l < NL; l++) lane[l] += ((double)xr[k + l] - mu) * ((double)xr[k + l] - mu);
        for (int k = body; k < D; k++) v += ((double)xr[k] - mu) * ((double)xr[k] - mu);
        double rs = 1.0 / sqrt(lanes_total(lane, v) / D + (double)j->eps);
        j->mean[r] = mu;
        j->rstd[r] = rs;
        float *yr = j->y + r * (size_t)D;
        if (gamma && beta) norm_row_out(xr, yr, D, mu, rs, gamma, beta);
        else if (gamma) norm_row_out(xr, yr, D, mu, rs, gamma, NULL);
        else norm_row_out(xr, yr, D, mu, rs, NULL, NULL);
    }
}

Tensor *op_layer_norm(Tape *t, Tensor *x, Tensor *gamma, Tensor *beta, float eps) {
    int D = tensor_cols(x), N = tensor_rows(x);
    S2S_ASSERT(eps > 0 && D > 0);
    S2S_ASSERT(!gamma || gamma->size == (size_t)D);
    S2S_ASSERT(!beta || (gamma && beta->size == (size_t)D));
    Tensor *y = tape_like(t, x);
    double *stats = arena_alloc(&t->arena, 2 * (size_t)N * sizeof *stats); /* mean (N), 1/σ (N) */
    NormJob j = {.x = x->data, .gamma = gamma ? gamma->data : NULL, .beta = beta ? beta->data : NULL, .y = y->data,
                 .mean = stats, .rstd = stats + N, .cols = D, .eps = eps};
    par_for((size_t)N, (size_t)D * 4, norm_rows, &j);
    if (tape_wants(t, x, gamma, beta)) {
        TapeNode *n = tape_record(t, OP_LAYER_NORM, y);
        n->in[0] = x;
        n->in[1] = gamma;
        n->in[2] = beta;
        n->saved = stats;
    }
    return y;
}

/* g = dy ⊙ γ, x̂ = (x − mean)/σ: dx = (g − mean(g) − x̂ ⊙ mean(g ⊙ x̂)) / σ; dγ = Σ_rows dy ⊙ x̂
 * (rows of dy ⊙ x̂ kept, then summed by column as the bias gradients are: split-independent).
 * One row's dx; inlined with γ and `set` as constants at each call, so the loops vectorise. */
static inline __attribute__((always_inline)) void norm_back_row(const float *restrict xr, const float *restrict gr,
                                                                float *restrict dr, int D, double m, double rs,
                                                                const float *restrict gamma, bool set) {
    int body = D / NL * NL;
    double sg = 0, sgh = 0, lg[NL] = {0}, lgh[NL] = {0};
    for (int k = 0; k < body; k += NL) /* two passes: in one the compiler left a sum scalar */
        for (int l = 0; l < NL; l++) lg[l] += (double)(gamma ? gr[k + l] * gamma[k + l] : gr[k + l]);
    for (int k = 0; k < body; k += NL)
        for (int l = 0; l < NL; l++)
            lgh[l] += (double)(gamma ? gr[k + l] * gamma[k + l] : gr[k + l]) * (((double)xr[k + l] - m) * rs);
    for (int k = body; k < D; k++) {
        double g = gamma ? gr[k] * gamma[k] : gr[k];
        sg += g;
        sgh += g * (((double)xr[k] - m) * rs);
    }
    double mg = lanes_total(lg, sg) / D, mgh = lanes_total(lgh, sgh) / D;
    for (int k = 0; k < D; k++) {
        double g = gamma ? gr[k] * gamma[k] : gr[k];
        float d = (float)(rs * (g - mg - ((double)xr[k] - m) * rs * mgh));
        dr[k] = set ? d : dr[k] + d;
    }
}

static void norm_back_rows(void *ctx, size_t begin, size_t end) {
    const NormJob *j = ctx;
    const float *gamma = j->gamma;
    int D = j->cols;
    for (size_t r = begin; r < end; r++) {
        const float *xr = j->x + r * (size_t)D, *gr = j->dy + r * (size_t)D;
        double m = j->mean[r], rs = j->rstd[r];
        if (j->xhat_dy) {
            float *restrict xd = j->xhat_dy + r * (size_t)D;
            for (int k = 0; k < D; k++) xd[k] = gr[k] * (float)(((double)xr[k] - m) * rs);
        }
        if (!j->dx) continue;
        float *dr = j->dx + r * (size_t)D;
        if (gamma && j->dx_set) norm_back_row(xr, gr, dr, D, m, rs, gamma, true);
        else if (gamma) norm_back_row(xr, gr, dr, D, m, rs, gamma, false);
        else if (j->dx_set) norm_back_row(xr, gr, dr, D, m, rs, NULL, true);
        else norm_back_row(xr, gr, dr, D, m, rs, NULL, false);
    }
}

void op_layer_norm_backward(Tape *t, const TapeNode *n) {
    Tensor *x = n->in[0], *gamma = n->in[1], *beta = n->in[2];
    int D = tensor_cols(x), N = tensor_rows(x);
    double *stats = n->saved;
    float *dgamma = gamma && gamma->requires_grad ? tensor_grad(t, gamma) : NULL;
    bool fresh = false;
    NormJob j = {.x = x->data, .gamma = gamma ? gamma->data : NULL, .dy = n->out->grad, .mean = stats,
                 .rstd = stats + N, .dx = x->requires_grad ? tensor_grad_to_write(t, x, &fresh) : NULL, .cols = D};
    j.dx_set = fresh;
    size_t got = 0;
    float *tmp = NULL;
    if (dgamma) {
        tmp = tape_take_dead(t, (size_t)N * D, false, &got); /* every element written */
        if (!tmp) tmp = arena_alloc(&t->arena, (size_t)N * D * sizeof *tmp);
        j.xhat_dy = tmp;
    }
    par_for((size_t)N, (size_t)D * 6, norm_back_rows, &j);
    if (dgamma) {
        ops_bias_grad(dgamma, tmp, N, D);
        if (got) tape_give_dead(t, tmp, got);
    }
    if (beta && beta->requires_grad) ops_bias_grad(tensor_grad(t, beta), n->out->grad, N, D);
}
