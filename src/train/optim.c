/* optim.c — SGD, Adam, clipping: loops over the parameter blocks, split over the threads. */
#include "s2s/optim.h"
#include "s2s/dist.h"
#include "s2s/common.h"
#include "s2s/par.h"

#include <math.h>
#include <string.h>

Adam adam_default(void) { return (Adam){.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f}; }

Adam adam_from_config(const ConfigTrain *tc) {
    return (Adam){.lr = tc->lr, .beta1 = tc->adam_beta1, .beta2 = tc->adam_beta2, .eps = tc->adam_eps,
                  .weight_decay = tc->weight_decay, .decoupled = tc->optimizer == OPTIMIZER_ADAMW};
}

bool optim_is_adam(Optimizer o) { return o == OPTIMIZER_ADAM || o == OPTIMIZER_ADAMW; }

/* torch.optim.Adam (non-amsgrad): m = b1 m + (1-b1) g; v = b2 v + (1-b2) g²;
 * p -= lr/(1-b1^t) · m / (sqrt(v)/sqrt(1-b2^t) + eps), with g + wd p for g (L2), or, as
 * torch.optim.AdamW, p *= 1 − lr wd first (shrink). Padding between tensors has zero gradient
 * and zero weight, and stays zero. */
typedef struct AdamJob {
    float *p, *g, *m, *v;
    float b1, b2, eps, wd, shrink, step_size, inv_sqrt_bc2;
} AdamJob;

static void adam_range(void *ctx, size_t begin, size_t end) {
    const AdamJob *j = ctx;
    float *restrict p = j->p, *restrict m = j->m, *restrict v = j->v;
    const float *restrict g = j->g;
    float b1 = j->b1, b2 = j->b2, eps = j->eps, wd = j->wd, step_size = j->step_size, inv_sqrt_bc2 = j->inv_sqrt_bc2;
    if (j->shrink != 1.0f)
        for (size_t i = begin; i < end; i++) p[i] *= j->shrink;
    for (size_t i = begin; i < end; i++) {
        float gi = g[i] + wd * p[i];
        m[i] = b1 * m[i] + (1.0f - b1) * gi;
        v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
        p[i] -= step_size * m[i] / (sqrtf(v[i]) * inv_sqrt_bc2 + eps);
    }
}

void adam_step(Adam *opt, ParamStore *ps) {
    S2S_ASSERT(ps->allocated);
    S2sError err;
    S2sStatus st = params_alloc_moments(ps, &err); /* the trainer makes them first, with a checked error */
    S2S_ASSERT_MSG(st == S2S_OK, "%s", err.msg);
    opt->step++;
    double bc1 = 1.0 - pow(opt->beta1, (double)opt->step);
    double bc2 = 1.0 - pow(opt->beta2, (double)opt->step);
    float wd = opt->decoupled ? 0.0f : opt->weight_decay, shrink = opt->decoupled ? 1.0f - opt->lr * opt->weight_decay : 1.0f;
    AdamJob j = {ps->data, ps->grad, ps->m, ps->v, opt->beta1, opt->beta2, opt->eps, wd, shrink,
                 (float)(opt->lr / bc1), (float)(1.0 / sqrt(bc2))};
    par_for(ps->total, 1, adam_range, &j);
}

typedef struct EmaJob {
    float *ema;
    const float *w;
    float d;
} EmaJob;

static void ema_range(void *ctx, size_t begin, size_t end) {
    const EmaJob *j = ctx;
    float d = j->d, e = 1.0f - d;
    for (size_t i = begin; i < end; i++) j->ema[i] = d * j->ema[i] + e * j->w[i];
}

void optim_ema_update(ParamStore *ps, float decay, long step) {
    S2S_ASSERT(ps->ema && step >= 1);
    double warm = (1.0 + (double)step) / (10.0 + (double)step);
    EmaJob j = {ps->ema, ps->data, (float)(decay < warm ? decay : warm)};
    par_for(ps->total, 1, ema_range, &j);
}

void sgd_step(ParamStore *ps, float lr, float weight_decay) {
    if (weight_decay == 0.0f) { /* the same bits as before the key existed */
        for (size_t i = 0; i < ps->total; i++) ps->data[i] -= lr * ps->grad[i];
        return;
    }
    for (size_t i = 0; i < ps->total; i++) ps->data[i] -= lr * (ps->grad[i] + weight_decay * ps->data[i]);
}

double grad_global_norm(const ParamStore *ps) { return sqrt(par_sum_sq(ps->grad, ps->total)); }

typedef struct ScaleJob {
    float *x, c;
} ScaleJob;

static void scale_range(void *ctx, size_t begin, size_t end) {
    const ScaleJob *j = ctx;
    for (size_t i = begin; i < end; i++) j->x[i] *= j->c;
}

double grad_clip_global_norm(ParamStore *ps, double max_norm) {
    double norm = grad_global_norm(ps);
    double coef = max_norm / (norm + 1e-6);
    if (coef < 1.0) {
        ScaleJob j = {ps->grad, (float)coef};
        par_for(ps->total, 1, scale_range, &j);
    }
    return norm;
}

double optim_lr_factor(LrSchedule schedule, double progress, long step, int warmup) {
    double p = progress < 0 ? 0 : progress > 1 ? 1 : progress, s = step < 1 ? 1 : (double)step;
    double warm = warmup > 0 && s < warmup ? s / warmup : 1.0;
    switch (schedule) {
    case LR_CONSTANT: return warm;
    case LR_LINEAR: return warm * (1.0 - p);
    case LR_COSINE: return warm * 0.5 * (1.0 + cos(3.14159265358979323846 * p));
    case LR_INVERSE_SQRT: return warmup > 0 ? (s < warmup ? warm : sqrt(warmup / s)) : 1.0 / sqrt(s);
    }
    S2S_ASSERT_MSG(false, "train.lr_schedule %d is none of the config's", (int)schedule);
    return 1.0;
}

double optim_sum_over_ranks(const Dist *d, ParamStore *ps, float *scratch, double objective, int *n_tokens, double *nll) {
    double x[4] = {isfinite(objective) ? objective * *n_tokens : 0, *nll * *n_tokens, *n_tokens, isfinite(objective) ? 0 : 1};
    dist_sum_doubles(d, x, 4);
    if (x[3] > 0) return NAN;
    float share = x[2] > 0 ? (float)(*n_tokens / x[2]) : 0.0f;
    for (size_t i = 0; i < ps->total; i++) ps->grad[i] *= share;
    dist_sum_floats(d, ps->grad, ps->total, scratch);
    *n_tokens = (int)x[2];
    *nll = x[2] > 0 ? x[1] / x[2] : 0;
    return x[2] > 0 ? x[0] / x[2] : 0;
}
