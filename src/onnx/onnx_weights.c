/* onnx_weights.c — a model file's weights as a graph's initializers: read by name and checked
 * against the shape the config makes, sliced and transposed as a product wants them, or
 * quantised to int8 for ONNX's integer products. */
#include "onnx_internal.h"
#include "s2s/checkpoint.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The tensor's floats, copied, or NULL with s->st set when the file has no such tensor or
 * another shape: the shape a config asks for is not allocated before the file has shown it. */
float *onnx_read(OnnxSource *s, const char *name, int ndim, const int64_t *shape) {
    const CkptTensor *t = NULL;
    for (int i = 0; i < s->ckpt->n_tensors && !t; i++)
        if (!strcmp(s->ckpt->tensors[i].name, name)) t = &s->ckpt->tensors[i];
    bool same = t && t->ndim == ndim;
    size_t n = 1;
    for (int d = 0; same && d < ndim; d++) same = t->shape[d] == shape[d], n *= (size_t)shape[d];
    if (same) {
        float *out = s2s_xmalloc(n * sizeof *out);
        memcpy(out, t->data, n * sizeof *out);
        return out;
    }
    if (s->st) return NULL;
    s->st = S2S_ERR_CORRUPT;
    char want[96] = "", have[96] = "";
    for (int d = 0; d < ndim; d++)
        snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", d ? " x " : "", (long long)shape[d]);
    if (!t) {
        snprintf(s->err.msg, sizeof s->err.msg, "%s: no tensor \"%s\" (its config's model has one of %s)", s->origin,
                 name, want);
        return NULL;
    }
    for (int d = 0; d < t->ndim; d++)
        snprintf(have + strlen(have), sizeof have - strlen(have), "%s%d", d ? " x " : "", t->shape[d]);
    snprintf(s->err.msg, sizeof s->err.msg, "%s: tensor \"%s\" is %s; its config's model makes it %s", s->origin, name,
             have, want);
    return NULL;
}

const char *onnx_weight(OnnxGraph *g, OnnxSource *s, const char *name, int64_t m, int64_t n, int64_t r0, int64_t rows,
                        bool t) {
    int64_t R = rows < 0 ? m : rows, cols = n ? n : 1;
    S2S_ASSERT(r0 >= 0 && r0 + R <= m);
    char as[160];
    snprintf(as, sizeof as, "%s%s", name, t ? ".T" : rows >= 0 ? ".rows" : "");
    if (rows >= 0) snprintf(as + strlen(as), sizeof as - strlen(as), "%lld", (long long)r0);
    const char *id = onnx_find_init(g, as);
    if (id) return id;
    float *w = onnx_read(s, name, n ? 2 : 1, (int64_t[]){m, n});
    if (!w) return ""; /* s->st says why; the graph is not written */
    float *p = s2s_xmalloc((size_t)(R * cols) * sizeof *p);
    for (int64_t i = 0; i < R; i++)
        for (int64_t j = 0; j < cols; j++) p[t ? j * R + i : i * cols + j] = w[(r0 + i) * cols + j];
    id = onnx_init_f32(g, as, n ? 2 : 1, (int64_t[]){t ? cols : R, t ? R : cols}, p);
    free(p), free(w);
    return id;
}

const char *onnx_linear_q8(OnnxGraph *g, OnnxSource *s, const char *x, const char *name, int64_t m, int64_t in, int64_t r0,
                           int64_t rows, const char *bias) {
    int64_t N = rows < 0 ? m : rows;
    char qn[180], sn[180];
    snprintf(qn, sizeof qn, "%s.q8_%lld", name, (long long)r0), snprintf(sn, sizeof sn, "%s.q8scale_%lld", name, (long long)r0);
    const char *wq = onnx_find_init(g, qn), *ws = onnx_find_init(g, sn);
    if (!wq) { /* (in, N) int8, column n the output channel n */
        float *w = onnx_read(s, name, 2, (int64_t[]){m, in});
        if (!w) return "";
        float *scale = s2s_xmalloc((size_t)N * sizeof *scale);
        int8_t *q = s2s_xmalloc((size_t)(N * in));
        for (int64_t n = 0; n < N; n++) {
            const float *row = w + (r0 + n) * in;
            float mx = 0;
            for (int64_t k = 0; k < in; k++) mx = fmaxf(mx, fabsf(row[k]));
            scale[n] = mx / 127.0f;
            for (int64_t k = 0; k < in; k++) q[k * N + n] = (int8_t)(mx > 0 ? rintf(row[k] / scale[n]) : 0.0f);
        }
        wq = onnx_init_i8(g, qn, 2, (int64_t[]){in, N}, q);
        ws = onnx_init_f32(g, sn, 1, (int64_t[]){N}, scale);
        free(w), free(scale), free(q);
    }
    OnnxNode *dq = onnx_node(g, "DynamicQuantizeLinear", 1, &x, 3); /* x as uint8, its scale and zero point */
    const char *in4[4] = {onnx_out(dq, 0), wq, onnx_out(dq, 2), ""};
    const char *acc = onnx_out(onnx_node(g, "MatMulInteger", 3, in4, 1), 0);
    OnnxNode *cast = onnx_node(g, "Cast", 1, &acc, 1);
    onnx_attr_i(cast, "to", ONNX_FLOAT);
    const char *y = onnx_op2(g, "Mul", onnx_out(cast, 0), onnx_op2(g, "Mul", onnx_out(dq, 1), ws));
    return bias ? onnx_op2(g, "Add", y, bias) : y;
}

