/* optim.c — SGD, Adam, clipping: loops over the parameter blocks, split over the threads. */
#include "s2s/optim.h"
#include "s2s/dist.h"
#include "s2s/common.h"
#include "s2s/hash.h"
#include "s2s/par.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
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

double optim_objective_over_ranks(const Dist *d, double objective, int *n_tokens, double *nll, float *share) {
    double x[4] = {isfinite(objective) ? objective * *n_tokens : 0, *nll * *n_tokens, *n_tokens, isfinite(objective) ? 0 : 1};
    dist_sum_doubles(d, x, 4);
    *share = x[2] > 0 ? (float)(*n_tokens / x[2]) : 0.0f;
    if (x[3] > 0) return NAN;
    *n_tokens = (int)x[2];
    *nll = x[2] > 0 ? x[1] / x[2] : 0;
    return x[2] > 0 ? x[0] / x[2] : 0;
}

bool optim_overlap_sum(const Dist *d, OverlapSum o) { return o == OVERLAP_ON || (o == OVERLAP_AUTO && d->machines > 1); }

void optim_grad_sum_init(GradSum *g, const Dist *d, ParamStore *ps, size_t bucket_floats) {
    memset(g, 0, sizeof *g);
    g->d = d;
    g->ps = ps;
    S2S_ASSERT(bucket_floats > 0);
    size_t *cuts = s2s_xmalloc(((size_t)ps->count + 1) * sizeof *cuts);
    int n_cuts = 0;
    size_t end = ps->total; /* from the end: cut at parameters' starts */
    for (int p = ps->count - 1; p > 0; p--)
        if (end - ps->items[p].offset >= bucket_floats) {
            end = ps->items[p].offset;
            cuts[n_cuts++] = end;
        }
    for (int i = 0; i < n_cuts / 2; i++) { /* ascending */
        size_t c = cuts[i];
        cuts[i] = cuts[n_cuts - 1 - i];
        cuts[n_cuts - 1 - i] = c;
    }
    g->sum = dist_sum_new(d, ps->total, cuts, n_cuts);
    free(cuts);
    int nb = dist_sum_buckets(g->sum);
    g->first = s2s_xmalloc((size_t)(ps->count + 1) * sizeof *g->first);
    g->ready = s2s_xmalloc((size_t)(nb + 1) * sizeof *g->ready);
    g->order = s2s_xmalloc((size_t)(nb + 1) * sizeof *g->order);
}

void optim_grad_sum_free(GradSum *g) {
    dist_sum_free(g->sum);
    free(g->first);
    free(g->ready);
    free(g->order);
    memset(g, 0, sizeof *g);
}

/* The parameter whose block range holds gradient element off (items ascend by offset). */
static int param_at(const ParamStore *ps, size_t off) {
    int lo = 0, hi = ps->count - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (ps->items[mid].offset <= off) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

void optim_grad_ready_init(GradSum *g, const Tape *t) {
    const ParamStore *ps = g->ps;
    for (int p = 0; p < ps->count; p++) g->first[p] = INT_MAX;
    for (int i = 0; i < t->n_nodes; i++)
        for (int k = 0; k < 5; k++) {
            const Tensor *x = t->nodes[i].in[k];
            if (!x) continue;
            const Tensor *root = x->base ? x->base : x;
            size_t at;
            if (!tensor_grad_in(root, ps->grad, ps->grad + ps->total, &at)) continue;
            int p = param_at(ps, at + (x->base ? x->offset : 0));
            if (i < g->first[p]) g->first[p] = i;
        }
    /* a bucket is final once backward has run every node from its parameters' earliest
     * reader on; they go in that order (a tied embedding, last in the block but read first,
     * goes last), ties from the end of the block down */
    int nb = dist_sum_buckets(g->sum);
    for (int b = 0; b < nb; b++) {
        size_t from, to;
        dist_sum_bucket(g->sum, b, &from, &to);
        g->ready[b] = INT_MAX;
        for (int p = param_at(ps, from); p < ps->count && ps->items[p].offset < to; p++)
            if (g->first[p] < g->ready[b]) g->ready[b] = g->first[p];
    }
    for (int q = 0; q < nb; q++) { /* insertion sort: a few dozen buckets */
        int b = nb - 1 - q, at = q;
        while (at > 0 && g->ready[g->order[at - 1]] < g->ready[b]) {
            g->order[at] = g->order[at - 1];
            at--;
        }
        g->order[at] = b;
    }
    g->next = 0;
}

int optim_grad_ready_after(GradSum *g, int node) {
    int from = g->next, nb = dist_sum_buckets(g->sum);
    while (g->next < nb && g->ready[g->order[g->next]] >= node) g->next++;
    return g->next - from;
}

static void grad_sum_after_node(void *ctx, int node) {
    GradSum *g = ctx;
    int from = g->next, n = optim_grad_ready_after(g, node);
    for (int q = from; q < from + n; q++) dist_sum_go(g->sum, g->order[q]);
    if (!n) dist_sum_poll(g->sum);
}

void optim_grad_sum_begin(GradSum *g, Tape *t, float share, bool overlap) {
    dist_sum_start(g->sum, g->ps->grad, share);
    g->overlap = false;
    if (!overlap || g->d->size == 1) return;
    /* the ranks' tapes have the same structure, so the same order, but the collectives pair
     * up by order: the ranks check that they agree (a rank with nothing to run backward on
     * does not), else every bucket goes after backward */
    int mine = -1;
    if (t->n_nodes > 0) {
        optim_grad_ready_init(g, t);
        uint64_t h = hash_fnv(HASH_FNV_BASIS, g->order, (size_t)dist_sum_buckets(g->sum) * sizeof *g->order);
        mine = (int)(h & 0x7fffffff);
    }
    int hi = dist_max_int(g->d, mine), lo = -dist_max_int(g->d, -mine);
    if (mine < 0 || hi != lo) return;
    g->overlap = true;
    t->after_node = grad_sum_after_node;
    t->after_node_ctx = g;
}

void optim_grad_sum_end(GradSum *g, Tape *t) {
    t->after_node = NULL;
    t->after_node_ctx = NULL;
    if (g->overlap) /* the rest in the agreed order */
        for (int nb = dist_sum_buckets(g->sum); g->next < nb; g->next++) dist_sum_go(g->sum, g->order[g->next]);
    dist_sum_finish(g->sum);
}
