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

/* Mean and variance in double, two passes: the same bits whatever the row split. */
static void norm_rows(void *ctx, size_t begin, size_t end) {
    const NormJob *j = ctx;
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
        for (int k = 0; k < D; k++) {
            float h = (float)(((double)xr[k] - mu) * rs);
            yr[k] = j->gamma ? h * j->gamma[k] + (j->beta ? j->beta[k] : 0.0f) : h;
        }
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
 * (rows of dy ⊙ x̂ kept, then summed by column as the bias gradients are: split-independent). */
static void norm_back_rows(void *ctx, size_t begin, size_t end) {
    const NormJob *j = ctx;
    int D = j->cols, body = D / NL * NL;
    for (size_t r = begin; r < end; r++) {
        const float *xr = j->x + r * (size_t)D, *gr = j->dy + r * (size_t)D;
        double m = j->mean[r], rs = j->rstd[r];
        if (j->xhat_dy)
            for (int k = 0; k < D; k++) j->xhat_dy[r * (size_t)D + k] = gr[k] * (float)(((double)xr[k] - m) * rs);
        if (!j->dx) continue;
        double sg = 0, sgh = 0, lg[NL] = {0}, lgh[NL] = {0};
        for (int k = 0; k < body; k += NL)
            for (int l = 0; l < NL; l++) {
                double g = j->gamma ? gr[k + l] * j->gamma[k + l] : gr[k + l];
                lg[l] += g;
                lgh[l] += g * (((double)xr[k + l] - m) * rs);
            }
        for (int k = body; k < D; k++) {
            double g = j->gamma ? gr[k] * j->gamma[k] : gr[k];
            sg += g;
            sgh += g * (((double)xr[k] - m) * rs);
        }
        double mg = lanes_total(lg, sg) / D, mgh = lanes_total(lgh, sgh) / D;
        float *dr = j->dx + r * (size_t)D;
        for (int k = 0; k < D; k++) {
            double g = j->gamma ? gr[k] * j->gamma[k] : gr[k];
            float d = (float)(rs * (g - mg - ((double)xr[k] - m) * rs * mgh));
            dr[k] = j->dx_set ? d : dr[k] + d;
        }
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
