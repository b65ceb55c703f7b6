/* params.h — the model's parameters, gradients and optimizer moments, one block each.
 *
 * A ParamStore owns four contiguous float blocks (data, grad, and the two optimizer
 * moments, made on demand) and one Tensor per parameter whose data and grad point into
 * them. Parameters are declared first (params_add, by PyTorch-style name and shape), then
 * params_alloc lays the blocks out; the Tensor pointers handed out stay valid from
 * declaration to params_free. Zeroing, clipping and Adam are then single loops over the
 * blocks, and a checkpoint is a table plus one write. The blocks are anonymous mappings
 * (page-aligned zeros that cost nothing until written: a decoder never touches its
 * gradients). */
#ifndef S2S_PARAMS_H
#define S2S_PARAMS_H

#include "s2s/common.h"
#include "s2s/rng.h"
#include "s2s/tensor.h"

#define PARAM_NAME_MAX 64

typedef struct Param {
    char name[PARAM_NAME_MAX];
    Tensor *t;
    size_t offset; /* first element in the blocks */
} Param;

typedef struct ParamView {
    Tensor *t;     /* owned */
    int parent;    /* index in items */
    size_t offset; /* first element inside the parent */
} ParamView;

typedef struct ParamStore {
    Param *items;
    int count, cap;
    ParamView *views; /* parts of parameters used as tensors of their own (params_view) */
    int n_views, cap_views;
    size_t total;  /* elements, including alignment padding */
    float *data;   /* (total) */
    float *grad;   /* (total) */
    float *m, *v;  /* (total) optimizer moments, NULL until an optimizer asks */
    float *ema;    /* (total) the weights' exponential moving average, NULL unless asked */
    uint16_t *bf16; /* (total) bfloat16 snapshot of data, NULL until one is made */
    uint64_t stamp; /* the last params_freeze's: unique in the process (a clock in ns, kept rising) */
    bool allocated;
} ParamStore;

void params_init(ParamStore *ps);
void params_free(ParamStore *ps);
/* Declares a parameter; its data is usable after params_alloc. Names are unique. */
Tensor *params_add(ParamStore *ps, const char *name, int ndim, const int *shape);
/* Zeroed data and grads; S2S_ERR_NOMEM (nothing allocated) when memory runs out. */
S2sStatus params_alloc(ParamStore *ps, S2sError *err);
/* Zeroed m and v, once; S2S_ERR_NOMEM when memory runs out. */
S2sStatus params_alloc_moments(ParamStore *ps, S2sError *err);
/* The moving average's block, a copy of the weights, once; S2S_ERR_NOMEM when memory runs out. */
S2sStatus params_alloc_ema(ParamStore *ps, S2sError *err);
/* Exchanges the weights and their moving average (evaluating or saving the average, then
 * back); thaw first, freeze after. */
void params_swap_ema(ParamStore *ps);
/* A part of a declared parameter as a tensor of its own: `size(shape)` elements from element
 * offset, sharing the parameter's data, gradient and bf16 copy (PyTorch's in_proj_weight holds
 * the query, key and value projections; each is used alone). Not a parameter itself: the
 * store, the checkpoint and the optimizer see only the whole. */
Tensor *params_view(ParamStore *ps, Tensor *parent, size_t offset, int ndim, const int *shape);
Param *params_find(ParamStore *ps, const char *name);
size_t params_numel(const ParamStore *ps); /* real elements, without padding */
void params_zero_grad(ParamStore *ps);
/* Declares the weights fixed until params_thaw (a training step, evaluation, decoding): each
 * Tensor's `frozen` gets a new stamp, under which GEMMs keep copies packed for their kernels
 * (gemm.c), and with bf16 a bfloat16 copy of every parameter is made (each Tensor's bf16
 * points into it) instead of rounding the weights on every call. Nothing follows changes
 * of the weights in between: thaw before they change. */
void params_freeze(ParamStore *ps, bool bf16);
void params_thaw(ParamStore *ps);
/* Every parameter uniform in [-a, a] from rng, in declaration order. */
void params_init_uniform(ParamStore *ps, Rng *rng, float a);

#endif
