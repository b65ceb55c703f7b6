/* onnx.c — the ONNX writer: a graph built node by node, serialised as onnx.proto's protobuf.
 *
 * Protobuf in brief: a message is a sequence of fields, each a key (field number << 3 | wire
 * type) then its value: a varint (type 0), 4 little-endian bytes (type 5) or a length and
 * bytes (type 2: strings, bytes, nested messages, packed repeated numbers). Nested messages
 * are built into buffers of their own and copied in with their length. */
#include "s2s/onnx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PB_LIMIT ((size_t)INT32_MAX) /* protobuf's largest message */

typedef struct Pb {
    unsigned char *p;
    size_t n, cap;
} Pb;

static void pb_raw(Pb *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n) cap *= 2;
        b->p = s2s_xrealloc(b->p, cap);
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, d, n);
    b->n += n;
}

static void pb_varint(Pb *b, uint64_t v) {
    unsigned char t[10];
    int k = 0;
    do {
        t[k++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    pb_raw(b, t, (size_t)k);
}

static void pb_key(Pb *b, int field, int wire) { pb_varint(b, (uint64_t)field << 3 | (uint64_t)wire); }
static void pb_int(Pb *b, int field, int64_t v) { pb_key(b, field, 0), pb_varint(b, (uint64_t)v); }
static void pb_bytes(Pb *b, int field, const void *d, size_t n) { pb_key(b, field, 2), pb_varint(b, n), pb_raw(b, d, n); }
static void pb_str(Pb *b, int field, const char *s) { pb_bytes(b, field, s, strlen(s)); }
static void pb_msg(Pb *b, int field, const Pb *m) { pb_bytes(b, field, m->p, m->n); }
static void pb_f32(Pb *b, int field, float v) {
    unsigned char t[4];
    memcpy(t, &v, 4); /* little-endian hosts only (checkpoint.c asserts the same) */
    pb_key(b, field, 5), pb_raw(b, t, 4);
}
static void pb_free(Pb *b) { free(b->p), *b = (Pb){0}; }

/* onnx.proto's field numbers */
enum { MODEL_IR = 1, MODEL_PRODUCER = 2, MODEL_PRODUCER_VERSION = 3, MODEL_DOC = 6, MODEL_GRAPH = 7, MODEL_OPSET = 8 };
enum { GRAPH_NODE = 1, GRAPH_NAME = 2, GRAPH_INIT = 5, GRAPH_INPUT = 11, GRAPH_OUTPUT = 12 };
enum { NODE_IN = 1, NODE_OUT = 2, NODE_NAME = 3, NODE_OP = 4, NODE_ATTR = 5 };
enum { ATTR_NAME = 1, ATTR_F = 2, ATTR_I = 3, ATTR_S = 4, ATTR_T = 5, ATTR_INTS = 8, ATTR_TYPE = 20 };
enum { ATYPE_FLOAT = 1, ATYPE_INT = 2, ATYPE_STRING = 3, ATYPE_TENSOR = 4, ATYPE_INTS = 7 };
enum { TENSOR_DIMS = 1, TENSOR_TYPE = 2, TENSOR_NAME = 8, TENSOR_RAW = 9 };

struct OnnxNode {
    char *op;
    int n_in, n_out;
    const char **in, **out;
    Pb attrs; /* serialised AttributeProtos, each with its field key */
};

typedef struct Value { /* a graph input or output */
    char *name, *tensor, *dims;
    OnnxType type;
} Value;

struct OnnxGraph {
    char *name;
    OnnxNode **nodes;
    int n_nodes, cap_nodes;
    Pb inits;   /* serialised initializers, each with the graph's field key */
    const char **init_names;
    int n_inits;
    Value *in, *outs;
    int n_in, n_outs;
    char **strs; /* every name the graph owns */
    int n_strs, cap_strs;
    int counter; /* names t0, t1, … for node outputs and constants */
};

static const char *own(OnnxGraph *g, char *s) {
    if (g->n_strs == g->cap_strs) {
        g->cap_strs = g->cap_strs ? 2 * g->cap_strs : 64;
        g->strs = s2s_xrealloc(g->strs, (size_t)g->cap_strs * sizeof *g->strs);
    }
    return g->strs[g->n_strs++] = s;
}

static const char *fresh(OnnxGraph *g, const char *stem) {
    char b[64];
    snprintf(b, sizeof b, "%s%d", stem, g->counter++);
    return own(g, s2s_xstrdup(b));
}

OnnxGraph *onnx_graph_new(const char *name) {
    OnnxGraph *g = s2s_xcalloc(1, sizeof *g);
    g->name = s2s_xstrdup(name);
    return g;
}

void onnx_graph_free(OnnxGraph *g) {
    if (!g) return;
    for (int i = 0; i < g->n_nodes; i++) {
        free(g->nodes[i]->op), free(g->nodes[i]->in), free(g->nodes[i]->out);
        pb_free(&g->nodes[i]->attrs), free(g->nodes[i]);
    }
    for (int i = 0; i < g->n_strs; i++) free(g->strs[i]);
    free(g->nodes), free(g->strs), free(g->in), free(g->outs), free(g->name), free(g->init_names);
    pb_free(&g->inits);
    free(g);
}

static void add_value(Value **v, int *n, const char *name, const char *tensor, OnnxType t, const char *dims) {
    *v = s2s_xrealloc(*v, (size_t)(*n + 1) * sizeof **v);
    (*v)[(*n)++] = (Value){s2s_xstrdup(name), tensor ? s2s_xstrdup(tensor) : NULL, s2s_xstrdup(dims), t};
}

void onnx_input(OnnxGraph *g, const char *name, OnnxType t, const char *dims) {
    add_value(&g->in, &g->n_in, name, NULL, t, dims);
    Value *v = &g->in[g->n_in - 1];
    own(g, v->name), own(g, v->dims);
}

void onnx_output(OnnxGraph *g, const char *tensor, const char *name, OnnxType t, const char *dims) {
    add_value(&g->outs, &g->n_outs, name, tensor, t, dims);
    Value *v = &g->outs[g->n_outs - 1];
    own(g, v->name), own(g, v->tensor), own(g, v->dims);
}

static void tensor_proto(Pb *t, const char *name, OnnxType type, int ndim, const int64_t *shape, const void *d,
                         size_t bytes) {
    for (int i = 0; i < ndim; i++) pb_int(t, TENSOR_DIMS, shape[i]);
    pb_int(t, TENSOR_TYPE, type);
    pb_str(t, TENSOR_NAME, name);
    pb_bytes(t, TENSOR_RAW, d, bytes);
}

static const char *add_init(OnnxGraph *g, const char *name, OnnxType type, int ndim, const int64_t *shape,
                            const void *d, size_t elem) {
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n *= (size_t)shape[i];
    S2S_ASSERT(!onnx_find_init(g, name));
    g->init_names = s2s_xrealloc(g->init_names, (size_t)(g->n_inits + 1) * sizeof *g->init_names);
    g->init_names[g->n_inits++] = name;
    Pb t = {0};
    tensor_proto(&t, name, type, ndim, shape, d, n * elem);
    pb_msg(&g->inits, GRAPH_INIT, &t);
    pb_free(&t);
    return name;
}

const char *onnx_init_f32(OnnxGraph *g, const char *name, int ndim, const int64_t *shape, const void *data) {
    return add_init(g, own(g, s2s_xstrdup(name)), ONNX_FLOAT, ndim, shape, data, 4);
}

const char *onnx_init_i8(OnnxGraph *g, const char *name, int ndim, const int64_t *shape, const int8_t *data) {
    return add_init(g, own(g, s2s_xstrdup(name)), ONNX_INT8, ndim, shape, data, 1);
}

const char *onnx_const_i64(OnnxGraph *g, int n, const int64_t *v) {
    int64_t shape[1] = {n};
    return add_init(g, fresh(g, "c"), ONNX_INT64, 1, shape, v, 8);
}

const char *onnx_const_f64(OnnxGraph *g, int n, const double *v) {
    int64_t shape[1] = {n};
    return add_init(g, fresh(g, "c"), ONNX_DOUBLE, 1, shape, v, 8);
}

const char *onnx_scalar_i64(OnnxGraph *g, int64_t v) { return add_init(g, fresh(g, "c"), ONNX_INT64, 0, NULL, &v, 8); }
const char *onnx_scalar_f32(OnnxGraph *g, float v) { return add_init(g, fresh(g, "c"), ONNX_FLOAT, 0, NULL, &v, 4); }

const char *onnx_find_init(const OnnxGraph *g, const char *name) {
    for (int i = 0; i < g->n_inits; i++)
        if (!strcmp(g->init_names[i], name)) return g->init_names[i];
    return NULL;
}

OnnxNode *onnx_node(OnnxGraph *g, const char *op, int n_in, const char *const *in, int n_out) {
    OnnxNode *n = s2s_xcalloc(1, sizeof *n);
    n->op = s2s_xstrdup(op);
    n->n_in = n_in, n->n_out = n_out;
    n->in = s2s_xcalloc((size_t)(n_in ? n_in : 1), sizeof *n->in);
    n->out = s2s_xcalloc((size_t)(n_out ? n_out : 1), sizeof *n->out);
    for (int i = 0; i < n_in; i++) n->in[i] = own(g, s2s_xstrdup(in[i]));
    for (int i = 0; i < n_out; i++) n->out[i] = fresh(g, "t");
    if (g->n_nodes == g->cap_nodes) {
        g->cap_nodes = g->cap_nodes ? 2 * g->cap_nodes : 64;
        g->nodes = s2s_xrealloc(g->nodes, (size_t)g->cap_nodes * sizeof *g->nodes);
    }
    return g->nodes[g->n_nodes++] = n;
}

const char *onnx_out(const OnnxNode *n, int i) {
    S2S_ASSERT(i >= 0 && i < n->n_out);
    return n->out[i];
}

static void attr(OnnxNode *n, const Pb *a) { pb_msg(&n->attrs, NODE_ATTR, a); }

void onnx_attr_i(OnnxNode *n, const char *name, int64_t v) {
    Pb a = {0};
    pb_str(&a, ATTR_NAME, name), pb_int(&a, ATTR_TYPE, ATYPE_INT), pb_int(&a, ATTR_I, v);
    attr(n, &a), pb_free(&a);
}

void onnx_attr_f(OnnxNode *n, const char *name, float v) {
    Pb a = {0};
    pb_str(&a, ATTR_NAME, name), pb_int(&a, ATTR_TYPE, ATYPE_FLOAT), pb_f32(&a, ATTR_F, v);
    attr(n, &a), pb_free(&a);
}

void onnx_attr_s(OnnxNode *n, const char *name, const char *v) {
    Pb a = {0};
    pb_str(&a, ATTR_NAME, name), pb_int(&a, ATTR_TYPE, ATYPE_STRING), pb_str(&a, ATTR_S, v);
    attr(n, &a), pb_free(&a);
}

void onnx_attr_ints(OnnxNode *n, const char *name, int k, const int64_t *v) {
    Pb a = {0};
    pb_str(&a, ATTR_NAME, name), pb_int(&a, ATTR_TYPE, ATYPE_INTS);
    for (int i = 0; i < k; i++) pb_int(&a, ATTR_INTS, v[i]);
    attr(n, &a), pb_free(&a);
}

void onnx_attr_tensor_f32(OnnxNode *n, const char *name, float v) {
    Pb a = {0}, t = {0};
    int64_t one = 1;
    tensor_proto(&t, "value", ONNX_FLOAT, 1, &one, &v, 4);
    pb_str(&a, ATTR_NAME, name), pb_int(&a, ATTR_TYPE, ATYPE_TENSOR), pb_msg(&a, ATTR_T, &t);
    attr(n, &a), pb_free(&a), pb_free(&t);
}

const char *onnx_op1(OnnxGraph *g, const char *op, const char *a) { return onnx_out(onnx_node(g, op, 1, &a, 1), 0); }

const char *onnx_op2(OnnxGraph *g, const char *op, const char *a, const char *b) {
    const char *in[2] = {a, b};
    return onnx_out(onnx_node(g, op, 2, in, 1), 0);
}

const char *onnx_op3(OnnxGraph *g, const char *op, const char *a, const char *b, const char *c) {
    const char *in[3] = {a, b, c};
    return onnx_out(onnx_node(g, op, 3, in, 1), 0);
}

const char *onnx_ints1(OnnxGraph *g, int64_t a) { return onnx_const_i64(g, 1, &a); }
const char *onnx_unsqueeze(OnnxGraph *g, const char *x, int64_t axis) { return onnx_op2(g, "Unsqueeze", x, onnx_ints1(g, axis)); }
const char *onnx_squeeze(OnnxGraph *g, const char *x, int64_t axis) { return onnx_op2(g, "Squeeze", x, onnx_ints1(g, axis)); }

const char *onnx_transpose(OnnxGraph *g, const char *x, int n, const int64_t *perm) {
    OnnxNode *t = onnx_node(g, "Transpose", 1, &x, 1);
    onnx_attr_ints(t, "perm", n, perm);
    return onnx_out(t, 0);
}

const char *onnx_reshape(OnnxGraph *g, const char *x, int n, const int64_t *shape) {
    return onnx_op2(g, "Reshape", x, onnx_const_i64(g, n, shape));
}

const char *onnx_concat(OnnxGraph *g, int n, const char *const *xs, int64_t axis) {
    OnnxNode *c = onnx_node(g, "Concat", n, xs, 1);
    onnx_attr_i(c, "axis", axis);
    return onnx_out(c, 0);
}

const char *onnx_gather(OnnxGraph *g, const char *x, const char *idx, int64_t axis) {
    OnnxNode *n = onnx_node(g, "Gather", 2, (const char *[]){x, idx}, 1);
    onnx_attr_i(n, "axis", axis);
    return onnx_out(n, 0);
}

const char *onnx_gemm(OnnxGraph *g, const char *x, const char *w, const char *b) {
    const char *in[3] = {x, w, b};
    OnnxNode *n = onnx_node(g, "Gemm", b ? 3 : 2, in, 1);
    onnx_attr_i(n, "transB", 1);
    return onnx_out(n, 0);
}

const char *onnx_softmax(OnnxGraph *g, const char *x) {
    OnnxNode *n = onnx_node(g, "Softmax", 1, &x, 1);
    onnx_attr_i(n, "axis", -1);
    return onnx_out(n, 0);
}

const char *onnx_log_softmax(OnnxGraph *g, const char *x) {
    OnnxNode *n = onnx_node(g, "LogSoftmax", 1, &x, 1);
    onnx_attr_i(n, "axis", -1);
    return onnx_out(n, 0);
}

const char *onnx_zeros(OnnxGraph *g, const char *shape) {
    OnnxNode *z = onnx_node(g, "ConstantOfShape", 1, &shape, 1);
    onnx_attr_tensor_f32(z, "value", 0.0f);
    return onnx_out(z, 0);
}

/* ValueInfoProto { name 1, type 2: TypeProto { tensor_type 1: { elem_type 1, shape 2:
 * TensorShapeProto { dim 1: { dim_value 1 | dim_param 2 } } } } } */
static void value_info(Pb *out, int field, const Value *v) {
    Pb shape = {0}, tt = {0}, type = {0}, vi = {0};
    for (const char *p = v->dims; *p;) {
        size_t len = strcspn(p, ",");
        char item[64];
        S2S_ASSERT(len > 0 && len < sizeof item);
        memcpy(item, p, len), item[len] = 0;
        Pb dim = {0};
        char *end;
        long long num = strtoll(item, &end, 10);
        if (!*end) pb_int(&dim, 1, num);
        else pb_str(&dim, 2, item);
        pb_msg(&shape, 1, &dim), pb_free(&dim);
        p += len + (p[len] == ',');
    }
    pb_int(&tt, 1, v->type), pb_msg(&tt, 2, &shape);
    pb_msg(&type, 1, &tt);
    pb_str(&vi, 1, v->name), pb_msg(&vi, 2, &type);
    pb_msg(out, field, &vi);
    pb_free(&shape), pb_free(&tt), pb_free(&type), pb_free(&vi);
}

static void node_proto(Pb *out, const OnnxNode *n, int index) {
    Pb b = {0};
    char name[32];
    snprintf(name, sizeof name, "n%d", index);
    for (int i = 0; i < n->n_in; i++) pb_str(&b, NODE_IN, n->in[i]);
    for (int i = 0; i < n->n_out; i++) pb_str(&b, NODE_OUT, n->out[i]);
    pb_str(&b, NODE_NAME, name), pb_str(&b, NODE_OP, n->op);
    pb_raw(&b, n->attrs.p, n->attrs.n);
    pb_msg(out, GRAPH_NODE, &b), pb_free(&b);
}

S2sStatus onnx_serialize(const OnnxGraph *g, const char *doc, unsigned char **buf, size_t *len, S2sError *err) {
    Pb gr = {0}, m = {0}, op = {0};
    for (int i = 0; i < g->n_nodes; i++) node_proto(&gr, g->nodes[i], i);
    for (int i = 0; i < g->n_outs; i++) { /* the public names */
        Pb b = {0};
        pb_str(&b, NODE_IN, g->outs[i].tensor), pb_str(&b, NODE_OUT, g->outs[i].name);
        pb_str(&b, NODE_NAME, g->outs[i].name), pb_str(&b, NODE_OP, "Identity");
        pb_msg(&gr, GRAPH_NODE, &b), pb_free(&b);
    }
    pb_str(&gr, GRAPH_NAME, g->name);
    for (int i = 0; i < g->n_in; i++) value_info(&gr, GRAPH_INPUT, &g->in[i]);
    for (int i = 0; i < g->n_outs; i++) value_info(&gr, GRAPH_OUTPUT, &g->outs[i]);
    size_t total = gr.n + g->inits.n + 64;
    if (total > PB_LIMIT) {
        pb_free(&gr);
        return s2s_fail(err, S2S_ERR_DATA, "the %s graph would be %zu MB: ONNX files (protobuf) hold at most 2 GiB",
                        g->name, total >> 20);
    }
    pb_int(&m, MODEL_IR, ONNX_IR_VERSION);
    pb_str(&m, MODEL_PRODUCER, "s2s"), pb_str(&m, MODEL_PRODUCER_VERSION, S2S_VERSION);
    if (doc) pb_str(&m, MODEL_DOC, doc);
    pb_str(&op, 1, ""), pb_int(&op, 2, ONNX_OPSET);
    pb_msg(&m, MODEL_OPSET, &op);
    pb_key(&m, MODEL_GRAPH, 2), pb_varint(&m, gr.n + g->inits.n);
    pb_raw(&m, gr.p, gr.n), pb_raw(&m, g->inits.p, g->inits.n);
    pb_free(&gr), pb_free(&op);
    *buf = m.p, *len = m.n;
    return S2S_OK;
}
