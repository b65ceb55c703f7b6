/* onnx_internal.h — private to src/onnx: what the two families' graph builders read from a
 * model file (its config and weights by name), shared with the export that calls them. */
#ifndef S2S_ONNX_INTERNAL_H
#define S2S_ONNX_INTERNAL_H

#include "s2s/config.h"
#include "s2s/onnx.h"

typedef struct Checkpoint Checkpoint; /* checkpoint.h: only onnx_weights.c and onnx_export.c read one */

#define TF_ONNX_MAX_LAYERS 16

/* What a family's graphs need: the model file's config and tensors, and the first weight
 * that was missing or misshapen (the graphs are built on, and then not written). */
typedef struct OnnxSource {
    const Checkpoint *ckpt;
    int n_src, n_trg;   /* its vocabularies' sizes */
    Config cfg;
    const char *origin; /* the model file, for messages */
    bool int8;          /* products by weights in int8 (onnx_linear_q8), but for an RNN's cells */
    S2sStatus st;
    S2sError err;
} OnnxSource;

/* A malloc'd float32 copy of the weight named name, which must have the shape given; else
 * zeros of that shape, and s->st and s->err say which weight and why. */
float *onnx_read(OnnxSource *s, const char *name, int ndim, const int64_t *shape);
/* The weight name (m, n) (n 0: a vector of m), whole (rows < 0) or its rows r0 .. r0 + rows,
 * transposed when t, as an initializer of g (made once per graph); returns its name. */
const char *onnx_weight(OnnxGraph *g, OnnxSource *s, const char *name, int64_t m, int64_t n, int64_t r0, int64_t rows,
                        bool t);
/* x (…, in) times the weight name's rows r0 .. r0 + rows (rows < 0: all m) transposed, plus the
 * vector bias (NULL: none), in int8 as ONNX Runtime's dynamic quantisation writes it: the weight
 * int8 per output channel (scale max |w| / 127, to nearest even), x uint8 per tensor
 * (DynamicQuantizeLinear), MatMulInteger's exact int32 sums scaled back to float32. */
const char *onnx_linear_q8(OnnxGraph *g, OnnxSource *s, const char *x, const char *name, int64_t m, int64_t in, int64_t r0,
                           int64_t rows, const char *bias);
/* The families: the two graphs, and the names and batch axes of the decoder's state and
 * memories into meta (a cJSON object: "state", "memory"). */
S2sStatus onnx_rnn_graphs(OnnxSource *s, OnnxGraph *enc, OnnxGraph *dec, void *meta, S2sError *err);
S2sStatus onnx_tf_graphs(OnnxSource *s, OnnxGraph *enc, OnnxGraph *dec, void *meta, S2sError *err);

#endif
