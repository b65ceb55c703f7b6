/* optim.c — SGD, Adam, clipping: single loops over the parameter blocks. */
#include "s2s/optim.h"
#include "s2s/common.h"

#include <math.h>

Adam adam_default(void) { return (Adam){.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f}; }

/* torch.optim.Adam (non-amsgrad): m = b1 m + (1-b1) g; v = b2 v + (1-b2) g²;
 * p -= lr/(1-b1^t) · m / (sqrt(v)/sqrt(1-b2^t) + eps). Padding between tensors has zero
 * gradient and stays zero. */
void adam_step(Adam *opt, ParamStore *ps) {
    S2S_ASSERT(ps->allocated);
    params_alloc_moments(ps);
    opt->step++;
    double bc1 = 1.0 - pow(opt->beta1, (double)opt->step);
    double bc2 = 1.0 - pow(opt->beta2, (double)opt->step);
    float step_size = (float)(opt->lr / bc1);
    float inv_sqrt_bc2 = (float)(1.0 / sqrt(bc2));
    float b1 = opt->beta1, b2 = opt->beta2, eps = opt->eps, wd = opt->weight_decay;
    float *p = ps->data, *g = ps->grad, *m = ps->m, *v = ps->v;
    for (size_t i = 0; i < ps->total; i++) {
        float gi = g[i] + wd * p[i];
        m[i] = b1 * m[i] + (1.0f - b1) * gi;
        v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
        p[i] -= step_size * m[i] / (sqrtf(v[i]) * inv_sqrt_bc2 + eps);
    }
}

void sgd_step(ParamStore *ps, float lr) {
    for (size_t i = 0; i < ps->total; i++) ps->data[i] -= lr * ps->grad[i];
}

double grad_global_norm(const ParamStore *ps) {
    double s = 0.0;
    for (size_t i = 0; i < ps->total; i++) s += (double)ps->grad[i] * ps->grad[i];
    return sqrt(s);
}

double grad_clip_global_norm(ParamStore *ps, double max_norm) {
    double norm = grad_global_norm(ps);
    double coef = max_norm / (norm + 1e-6);
    if (coef < 1.0) {
        float c = (float)coef;
        for (size_t i = 0; i < ps->total; i++) ps->grad[i] *= c;
    }
    return norm;
}
