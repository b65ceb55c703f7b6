/* params.c — one block each for parameters, gradients and optimizer state. */
#define _DEFAULT_SOURCE /* clock_gettime, MAP_ANONYMOUS */
#include "s2s/params.h"
#include "s2s/par.h"
#include "s2s/common.h"
#include "s2s/bf16.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define PARAM_ALIGN 16 /* floats: every tensor starts on a 64-byte boundary */

void params_init(ParamStore *ps) { memset(ps, 0, sizeof *ps); }

static void block_free(float *p, size_t total);

void params_free(ParamStore *ps) {
    for (int i = 0; i < ps->count; i++) free(ps->items[i].t);
    for (int i = 0; i < ps->n_views; i++) free(ps->views[i].t);
    free(ps->items);
    free(ps->views);
    block_free(ps->data, ps->total);
    block_free(ps->grad, ps->total);
    block_free(ps->m, ps->total);
    block_free(ps->v, ps->total);
    block_free(ps->ema, ps->total);
    free(ps->bf16);
    memset(ps, 0, sizeof *ps);
}

Tensor *params_add(ParamStore *ps, const char *name, int ndim, const int *shape) {
    S2S_ASSERT(!ps->allocated);
    S2S_ASSERT(strlen(name) < PARAM_NAME_MAX);
    S2S_ASSERT(params_find(ps, name) == NULL);
    if (ps->count == ps->cap) {
        ps->cap = ps->cap ? 2 * ps->cap : 32;
        ps->items = s2s_xrealloc(ps->items, (size_t)ps->cap * sizeof *ps->items);
    }
    Param *p = &ps->items[ps->count++];
    memset(p, 0, sizeof *p);
    strcpy(p->name, name);
    p->t = s2s_xcalloc(1, sizeof *p->t);
    p->t->ndim = ndim;
    memcpy(p->t->shape, shape, (size_t)ndim * sizeof *shape);
    p->t->size = tensor_numel(ndim, shape);
    p->t->requires_grad = true;
    p->offset = ps->total;
    ps->total += (p->t->size + PARAM_ALIGN - 1) / PARAM_ALIGN * PARAM_ALIGN;
    return p->t;
}

Tensor *params_view(ParamStore *ps, Tensor *parent, size_t offset, int ndim, const int *shape) {
    S2S_ASSERT(!ps->allocated);
    int k = 0;
    while (k < ps->count && ps->items[k].t != parent) k++;
    S2S_ASSERT_MSG(k < ps->count, "a view of a tensor that is not a parameter of this store");
    size_t n = tensor_numel(ndim, shape);
    S2S_ASSERT(offset + n <= parent->size);
    if (ps->n_views == ps->cap_views) {
        ps->cap_views = ps->cap_views ? 2 * ps->cap_views : 8;
        ps->views = s2s_xrealloc(ps->views, (size_t)ps->cap_views * sizeof *ps->views);
    }
    Tensor *t = s2s_xcalloc(1, sizeof *t);
    t->ndim = ndim;
    memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    t->size = n;
    t->requires_grad = true;
    ps->views[ps->n_views++] = (ParamView){t, k, offset};
    return t;
}

static size_t block_bytes(size_t total) { return (total ? total : PARAM_ALIGN) * sizeof(float); }

/* Page-aligned and zeroed, or NULL; total is a multiple of PARAM_ALIGN floats. Mapped, not
 * allocated and cleared: the pages are the system's zeros until first written, so a block
 * nothing writes (the gradients of a model loaded to decode) costs no memory and no time,
 * and the weights are written once (by their initialisation or the file), not twice. */
static float *block_alloc(size_t total) {
    if (total > SIZE_MAX / sizeof(float) - PARAM_ALIGN) return NULL;
    void *p = mmap(NULL, block_bytes(total), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void block_free(float *p, size_t total) {
    if (p) munmap(p, block_bytes(total));
}

static S2sStatus no_memory(const ParamStore *ps, const char *what, S2sError *err) {
    return s2s_fail(err, S2S_ERR_NOMEM, "out of memory for the %s of %zu weights (%.1f MB)", what, params_numel(ps),
                    (double)ps->total * sizeof(float) / 1e6);
}

S2sStatus params_alloc(ParamStore *ps, S2sError *err) {
    S2S_ASSERT(!ps->allocated);
    ps->data = block_alloc(ps->total);
    ps->grad = ps->data ? block_alloc(ps->total) : NULL;
    if (!ps->grad) {
        block_free(ps->data, ps->total);
        ps->data = NULL;
        return no_memory(ps, "weights and gradients", err);
    }
    for (int i = 0; i < ps->count; i++) {
        ps->items[i].t->data = ps->data + ps->items[i].offset;
        ps->items[i].t->grad = ps->grad + ps->items[i].offset;
    }
    for (int i = 0; i < ps->n_views; i++) {
        const ParamView *v = &ps->views[i];
        v->t->data = ps->items[v->parent].t->data + v->offset;
        v->t->grad = ps->items[v->parent].t->grad + v->offset;
    }
    ps->allocated = true;
    return S2S_OK;
}

Param *params_find(ParamStore *ps, const char *name) {
    for (int i = 0; i < ps->count; i++)
        if (strcmp(ps->items[i].name, name) == 0) return &ps->items[i];
    return NULL;
}

size_t params_numel(const ParamStore *ps) {
    size_t n = 0;
    for (int i = 0; i < ps->count; i++) n += ps->items[i].t->size;
    return n;
}

S2sStatus params_alloc_moments(ParamStore *ps, S2sError *err) {
    S2S_ASSERT(ps->allocated);
    if (ps->m) return S2S_OK;
    ps->m = block_alloc(ps->total);
    ps->v = ps->m ? block_alloc(ps->total) : NULL;
    if (!ps->v) {
        block_free(ps->m, ps->total);
        ps->m = NULL;
        return no_memory(ps, "optimizer moments", err);
    }
    return S2S_OK;
}

S2sStatus params_alloc_ema(ParamStore *ps, S2sError *err) {
    S2S_ASSERT(ps->allocated);
    if (ps->ema) return S2S_OK;
    if (!(ps->ema = block_alloc(ps->total))) return no_memory(ps, "the weights' moving average", err);
    memcpy(ps->ema, ps->data, ps->total * sizeof *ps->ema);
    return S2S_OK;
}

void params_swap_ema(ParamStore *ps) {
    S2S_ASSERT(ps->ema);
    for (size_t i = 0; i < ps->total; i++) {
        float w = ps->data[i];
        ps->data[i] = ps->ema[i];
        ps->ema[i] = w;
    }
}

void params_zero_grad(ParamStore *ps) { par_zero(ps->grad, ps->total); }

void params_init_uniform(ParamStore *ps, Rng *rng, float a) {
    for (int i = 0; i < ps->count; i++) {
        Tensor *t = ps->items[i].t;
        for (size_t k = 0; k < t->size; k++) t->data[k] = rng_uniform_range(rng, -a, a);
    }
}

void params_freeze(ParamStore *ps, bool bf16) {
    S2S_ASSERT(ps->allocated);
    /* Stamps name a weight's contents to caches keyed by its address: a clock keeps them
     * unique across stores, so a store freed and another made at the same address differ */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    ps->stamp = now > ps->stamp ? now : ps->stamp + 1;
    if (bf16) {
        if (!ps->bf16) ps->bf16 = s2s_xmalloc(ps->total * sizeof *ps->bf16);
        par_bf16_from_f32(ps->data, ps->bf16, ps->total);
    }
    for (int i = 0; i < ps->count; i++) {
        Tensor *t = ps->items[i].t;
        t->frozen = ps->stamp;
        t->bf16 = bf16 ? ps->bf16 + ps->items[i].offset : NULL;
    }
    for (int i = 0; i < ps->n_views; i++) {
        const ParamView *v = &ps->views[i];
        v->t->frozen = ps->stamp;
        v->t->bf16 = bf16 ? ps->bf16 + ps->items[v->parent].offset + v->offset : NULL;
    }
}

void params_thaw(ParamStore *ps) {
    for (int i = 0; i < ps->count; i++) {
        ps->items[i].t->frozen = 0;
        ps->items[i].t->bf16 = NULL;
    }
    for (int i = 0; i < ps->n_views; i++) {
        ps->views[i].t->frozen = 0;
        ps->views[i].t->bf16 = NULL;
    }
}
