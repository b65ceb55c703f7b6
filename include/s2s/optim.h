/* optim.h — optimizers over a ParamStore's blocks: SGD, Adam (PyTorch's formulation and
 * defaults), global-norm gradient clipping, and learning-rate schedules. Adam's moments live
 * in the store (m, v), created zeroed on the first step; the step counter lives in Adam. */
#ifndef S2S_OPTIM_H
#define S2S_OPTIM_H

#include "s2s/config.h"
#include "s2s/params.h"
#include "s2s/tape.h"

typedef struct Adam {
    float lr, beta1, beta2, eps, weight_decay;
    bool decoupled; /* AdamW: weight decay shrinks the weights instead of entering the gradient */
    long step;
} Adam;

/* lr 1e-3, betas (0.9, 0.999), eps 1e-8, no weight decay: torch.optim.Adam's defaults. */
Adam adam_default(void);
/* train.lr, adam_beta1, adam_beta2, adam_eps, weight_decay; decoupled for optimizer adamw:
 * torch.optim.Adam or torch.optim.AdamW with those arguments. */
Adam adam_from_config(const ConfigTrain *tc);
bool optim_is_adam(Optimizer o); /* adam or adamw: moments to keep */
void adam_step(Adam *opt, ParamStore *ps);
/* p −= lr (g + weight_decay p): torch.optim.SGD without momentum. */
void sgd_step(ParamStore *ps, float lr, float weight_decay);
/* After update `step` (1 for the first): ema = d ema + (1 − d) w with d = min(decay, (1 + step)
 * / (10 + step)) (TensorFlow's ExponentialMovingAverage with num_updates: the first updates
 * forget the initial weights fast). */
void optim_ema_update(ParamStore *ps, float decay, long step);
/* The L2 norm of all gradients (computed in double). */
double grad_global_norm(const ParamStore *ps);
/* Scales the gradients so their global norm is at most max_norm (as
 * torch.nn.utils.clip_grad_norm_: coefficient max_norm / (norm + 1e-6), capped at 1).
 * Returns the norm before clipping. */
double grad_clip_global_norm(ParamStore *ps, double max_norm);

/* A data-parallel step (dist.h): every rank's gradient (of the mean over its n_tokens target
 * tokens) weighted by its share of the global batch's tokens and summed in rank order, so
 * that every rank holds the gradient of the mean over all tokens. First the objective and
 * NLL (before backward): *n_tokens becomes the global count, *share this rank's part of it; a
 * non-finite objective on any rank is every rank's (NaN: no rank runs backward). Returns the
 * objective. */
struct Dist;
double optim_objective_over_ranks(const struct Dist *d, double objective, int *n_tokens, double *nll, float *share);

/* Then the gradients, summed in buckets of the gradient block (about bucket_floats each, cut
 * at parameters' starts: train.sum_bucket_kb) that leave while backward still runs
 * (overlap): a bucket goes once every node that reads its parameters has run backward (the
 * output layer's first, the embeddings' last). The same bits with or without overlap, and as
 * one sum of the whole block (dist.h). */
typedef struct GradSum {
    const struct Dist *d;
    ParamStore *ps;
    struct DistSum *sum;
    int *first;   /* per parameter: the first node reading it (INT_MAX: none) */
    int *ready;   /* per bucket: the earliest first reader of its parameters */
    int *order;   /* the buckets by ready, latest first: the order they go */
    int next;     /* order[0 .. next) have gone */
    bool overlap; /* this step's buckets go during backward */
} GradSum;
/* Whether this job overlaps: on, off, or (auto) when its ranks span several machines. */
bool optim_overlap_sum(const struct Dist *d, OverlapSum o);
/* On every rank at once (it makes communicators). */
void optim_grad_sum_init(GradSum *g, const struct Dist *d, ParamStore *ps, size_t bucket_floats);
void optim_grad_sum_free(GradSum *g);
/* After the forward pass and params_zero_grad, before tape_backward (which, with overlap,
 * starts buckets through t->after_node); end after it: the gradients are then the sum. A
 * rank with nothing to run backward on calls both as well. */
void optim_grad_sum_begin(GradSum *g, Tape *t, float share, bool overlap);
void optim_grad_sum_end(GradSum *g, Tape *t);
/* The readiness alone (begin calls it; tests): from the recorded tape, the buckets' order;
 * then, after each node's backward (last node first), how many more buckets of that order
 * are final (order[next − n .. next)). */
void optim_grad_ready_init(GradSum *g, const Tape *t);
int optim_grad_ready_after(GradSum *g, int node);

/* The learning-rate factor of update `step` (1 for the first) at `progress` in [0, 1] (the
 * share of the run's steps done before it): "constant" 1; "linear" 1 − progress; "cosine"
 * (1 + cos(π progress)) / 2 (both decays start at 1 and reach 0 after the last step, so the
 * final updates are small); "inverse_sqrt" sqrt(warmup / step) once past the warmup (1/√step
 * without one). A warmup of w steps multiplies by step / w for the first w steps (linear from
 * 1/w to 1), in front of any schedule; as PyTorch's LambdaLR with that function of the step. */
double optim_lr_factor(LrSchedule schedule, double progress, long step, int warmup);

#endif
