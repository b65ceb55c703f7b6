/* onnx.h — models as ONNX graphs, for the runtimes people deploy with (ONNX Runtime).
 *
 * Two parts. A small ONNX writer (onnx.c): a graph is built node by node, each node's output
 * named for it, with initializers, typed inputs and outputs whose axes are numbers or names
 * (dynamic axes), and serialised as the protobuf of onnx.proto (ModelProto, IR version 8,
 * opset 17), which the export writes through a temporary file and a rename. An OnnxGraph owns
 * its strings, nodes and the copies of its initializers.
 *
 * And the export (onnx_export.c, onnx_rnn.c, onnx_tf.c): a model file becomes a folder of two
 * graphs and what a caller needs besides them (docs/reference/model-files.md, "ONNX export"):
 *   encoder.onnx   src (B, S) int64, src_len (B) int64 → the memories the decoder reads and
 *                  the decoder's initial state
 *   decoder.onnx   one step: y (B) int64, the state, the memories → logits (B, V), their
 *                  log_softmax log_probs, the next state (each state input NAME has an output
 *                  NAME_out), attention (B, S)
 *   s2s.json       the vocabularies, special ids, decoding settings, the task's reading of
 *                  text, and each tensor's batch axis (beam search reorders along it)
 *   subword*.txt   the subword models, when the model has them
 * The graphs are built from the model file's tensors under their PyTorch names (numerics.md)
 * and its config: nothing of the model module is linked (src/onnx/onnx_internal.h). */
#ifndef S2S_ONNX_H
#define S2S_ONNX_H

#include "s2s/common.h"

#include <stdint.h>

#define ONNX_OPSET 17
#define ONNX_IR_VERSION 8
#define ONNX_EXPORT_VERSION 2 /* s2s.json's "format_version": what the reference decoder reads */

typedef enum OnnxType { ONNX_FLOAT = 1, ONNX_UINT8 = 2, ONNX_INT8 = 3, ONNX_INT64 = 7, ONNX_BOOL = 9, ONNX_DOUBLE = 11 } OnnxType;

typedef struct OnnxGraph OnnxGraph;
typedef struct OnnxNode OnnxNode;

OnnxGraph *onnx_graph_new(const char *name);
void onnx_graph_free(OnnxGraph *g);
/* A graph input or output: dims a comma-separated list of numbers and axis names
 * ("batch,src_len,256"); "" for a scalar. An output names an existing tensor (an Identity node
 * gives it the public name). */
void onnx_input(OnnxGraph *g, const char *name, OnnxType t, const char *dims);
void onnx_output(OnnxGraph *g, const char *tensor, const char *name, OnnxType t, const char *dims);
/* Initializers (copied; data may be unaligned); each returns the name. */
const char *onnx_init_f32(OnnxGraph *g, const char *name, int ndim, const int64_t *shape, const void *data);
const char *onnx_init_i8(OnnxGraph *g, const char *name, int ndim, const int64_t *shape, const int8_t *data);
const char *onnx_const_i64(OnnxGraph *g, int n, const int64_t *v); /* a 1-D tensor of n */
const char *onnx_const_f64(OnnxGraph *g, int n, const double *v);
const char *onnx_scalar_i64(OnnxGraph *g, int64_t v);              /* a 0-D tensor */
const char *onnx_scalar_f32(OnnxGraph *g, float v);

/* A node: inputs by name ("" for an omitted optional one); its outputs are named by the graph. */
OnnxNode *onnx_node(OnnxGraph *g, const char *op, int n_in, const char *const *in, int n_out);
const char *onnx_out(const OnnxNode *n, int i);
void onnx_attr_i(OnnxNode *n, const char *name, int64_t v);
void onnx_attr_f(OnnxNode *n, const char *name, float v);
void onnx_attr_s(OnnxNode *n, const char *name, const char *v);
void onnx_attr_ints(OnnxNode *n, const char *name, int k, const int64_t *v);
void onnx_attr_tensor_f32(OnnxNode *n, const char *name, float v); /* a scalar (ConstantOfShape's value) */
/* The common shapes of a node: one output. */
const char *onnx_op1(OnnxGraph *g, const char *op, const char *a);
const char *onnx_op2(OnnxGraph *g, const char *op, const char *a, const char *b);
const char *onnx_op3(OnnxGraph *g, const char *op, const char *a, const char *b, const char *c);
/* The initializer of g named name, or NULL. */
const char *onnx_find_init(const OnnxGraph *g, const char *name);
/* Shapes and common steps (opset 17's forms: Squeeze/Unsqueeze take their axes as an input). */
const char *onnx_ints1(OnnxGraph *g, int64_t a); /* a 1-D constant of one value */
const char *onnx_unsqueeze(OnnxGraph *g, const char *x, int64_t axis);
const char *onnx_squeeze(OnnxGraph *g, const char *x, int64_t axis);
const char *onnx_transpose(OnnxGraph *g, const char *x, int n, const int64_t *perm);
const char *onnx_reshape(OnnxGraph *g, const char *x, int n, const int64_t *shape); /* 0 keeps, −1 infers */
const char *onnx_concat(OnnxGraph *g, int n, const char *const *xs, int64_t axis);
const char *onnx_gather(OnnxGraph *g, const char *x, const char *idx, int64_t axis); /* x's entries idx along axis */
const char *onnx_gemm(OnnxGraph *g, const char *x, const char *w, const char *b); /* x (B, in) W^T + b; b NULL: none */
const char *onnx_softmax(OnnxGraph *g, const char *x);                            /* over the last axis */
const char *onnx_log_softmax(OnnxGraph *g, const char *x);                        /* the same */
const char *onnx_zeros(OnnxGraph *g, const char *shape);                          /* float zeros of a 1-D int64 shape */

/* The model as protobuf bytes (malloc'd into *buf): S2S_ERR_DATA past protobuf's 2 GiB. */
S2sStatus onnx_serialize(const OnnxGraph *g, const char *doc, unsigned char **buf, size_t *len, S2sError *err);

/* ./export --format onnx [--int8]: the model file at in as the folder out (made whole, or not at
 * all; an existing out is refused). int8: the products by weights in int8, but for an RNN's
 * cells (ONNX's GRU/LSTM operators, float only). */
S2sStatus onnx_export(const char *in, const char *out, bool int8, S2sError *err);

#endif
