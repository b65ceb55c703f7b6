/* tensor.h — float32 tensors: row-major, 1 to 3 dimensions, and views.
 *
 * A Tensor describes memory it does not own: data and grad live in the per-step arena
 * (tape_tensor), in the parameter block (ParamStore), or in a heap allocation made by
 * tensor_new (freed by tensor_free). A view (base != NULL) shares its base's data and
 * gradient at an offset, so a gradient written through a view lands in the base: this is
 * how per-time-step slices of a sequence take part in autograd without copies. */
#ifndef S2S_TENSOR_H
#define S2S_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define S2S_MAX_DIMS 3

/* Above core, but for io/ (files) and the tests, a tensor's memory is the back end's: its
 * fields keep their place under other names (the Makefile sets S2S_HOST_ACCESS_ONLY for those
 * modules), so `->data` or `->grad` does not compile there, and the values are reached through
 * the host-access calls below. A back end on a device would copy in them. */
#ifdef S2S_HOST_ACCESS_ONLY
#define S2S_BACKEND_FIELD(name) backend_only_##name
#else
#define S2S_BACKEND_FIELD(name) name
#endif

typedef struct Tensor {
    float *S2S_BACKEND_FIELD(data);
    float *S2S_BACKEND_FIELD(grad); /* NULL until a gradient reaches it (see tensor_grad in tape.h) */
    struct Tensor *base;  /* a view's root tensor (never itself a view), else NULL */
    size_t offset;        /* a view's first element inside base */
    size_t size;          /* number of elements */
    int ndim;
    int shape[S2S_MAX_DIMS];
    bool requires_grad;
    bool grad_recyclable; /* grad came from the tape's arena (tensor_grad): reusable once dead */
    int producer;         /* 1 + index of the first tape node writing it or a view of it; 0: none */
    int first_reader;     /* 1 + index of the first node reading it (set by backward when values are freed) */
    bool many_writers;    /* several nodes write it (views): its values live until the first writer's backward */
    const uint16_t *bf16; /* a bfloat16 copy of data for bf16 GEMMs (params_freeze), or NULL */
    uint64_t frozen;      /* nonzero while data is fixed (params_freeze): a stamp for copies of it */
} Tensor;

/* Heap tensor with zeroed data (and a zeroed grad when with_grad). */
Tensor *tensor_new(int ndim, const int *shape, bool with_grad);
void tensor_free(Tensor *t);

size_t tensor_numel(int ndim, const int *shape);
int tensor_cols(const Tensor *t);   /* last dimension */
int tensor_rows(const Tensor *t);   /* product of the leading dimensions */
bool tensor_same_shape(const Tensor *a, const Tensor *b);
/* Rows rows[0..n) (ascending) of a time-major (S, N, D) tensor, in place: it becomes
 * (S, n, D). Every source lies at or after its destination, so a forward pass never reads
 * what it overwrote (decoding drops finished sentences this way). Only the first `steps`
 * positions are moved (a cache filled that far; S for all): those after hold garbage. */
void tensor_keep_rows_tm(Tensor *x, int steps, const int32_t *rows, int n);
/* Rows rows[0..n) (ascending) of a tensor of rows of tensor_cols values, in place: row
 * rows[i] becomes row i (sources at or after their destinations). */
void tensor_keep_rows(Tensor *x, const int32_t *rows, int n);

/* ---- host access: the values as the host sees them ----
 * tensor_read: to read, valid until the tensor is written; tensor_write: to overwrite
 * (initialisation, a state copied in); the others say what they do. */
const float *tensor_read(const Tensor *t);
float *tensor_write(Tensor *t);
float tensor_item(const Tensor *t, size_t i);
void tensor_fill(Tensor *t, float v);
void tensor_copy(Tensor *dst, const Tensor *src); /* the same size */
/* Whether t's gradient lies in [lo, hi) (a tensor of a parameter block), and where. */
bool tensor_grad_in(const Tensor *t, const float *lo, const float *hi, size_t *at);

/* "(3, 4, 5)": for messages; buf holds at least 48 bytes. */
const char *tensor_shape_str(const Tensor *t, char *buf, size_t n);

#endif
