/* calc.c — the attention calculator, on the same ops as the models. */
#include "s2s/attn_calc.h"
#include "s2s/ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static Tensor *heap_copy(const Tensor *t) {
    Tensor *c = tensor_new(t->ndim, t->shape, false);
    tensor_copy(c, t);
    return c;
}

static const char *shape(const Tensor *t, char *buf) { return tensor_shape_str(t, buf, 48); }

static bool finite_all(const Tensor *t) {
    for (size_t i = 0; i < t->size; i++)
        if (!isfinite(tensor_item(t, i))) return false;
    return true;
}

static S2sStatus need_matrix(const Tensor *t, const char *name, S2sError *err) {
    if (!t) return s2s_fail(err, S2S_ERR_CONFIG, "%s is missing", name);
    if (t->ndim != 2 || t->size == 0) return s2s_fail(err, S2S_ERR_CONFIG, "%s: expected a non-empty matrix", name);
    return S2S_OK;
}

void attn_calc_free(AttnCalcResult *r) {
    for (int h = 0; h < r->n_heads; h++) {
        tensor_free(r->scores[h]);
        tensor_free(r->weights[h]);
        tensor_free(r->outputs[h]);
        tensor_free(r->q[h]);
        tensor_free(r->k[h]);
        tensor_free(r->v[h]);
    }
    tensor_free(r->output);
    memset(r, 0, sizeof *r);
}

S2sStatus attn_calc(const AttnCalcInput *in, AttnCalcResult *out, S2sError *err) {
    memset(out, 0, sizeof *out);
    char a[48], b[48];
    S2sStatus st;
    Tape t;
    tape_init(&t, 1 << 16);
    t.grad_enabled = false;
    AttnCalcHead heads[ATTN_CALC_MAX_HEADS];
    int H = in->n_heads;
    if (H < 1) return s2s_fail(err, S2S_ERR_CONFIG, "no queries, keys and values given");
    for (int h = 0; h < H; h++) {
        const AttnCalcHead *x = &in->heads[h];
        if ((st = need_matrix(x->q, "Q", err)) || (st = need_matrix(x->k, "K", err)) || (st = need_matrix(x->v, "V", err)))
            goto out;
        heads[h] = *x;
    }
    for (int h = 0; h < H; h++) { /* projections: the head's own, else the input's */
        Tensor *w[3] = {heads[h].w_q ? heads[h].w_q : in->w_q, heads[h].w_k ? heads[h].w_k : in->w_k,
                        heads[h].w_v ? heads[h].w_v : in->w_v};
        Tensor **m[3] = {&heads[h].q, &heads[h].k, &heads[h].v};
        const char *names[3] = {"W_q", "W_k", "W_v"}, *mn[3] = {"Q", "K", "V"};
        for (int i = 0; i < 3; i++) {
            if (!w[i]) continue;
            if ((st = need_matrix(w[i], names[i], err))) goto out;
            if ((*m[i])->shape[1] != w[i]->shape[0]) {
                st = s2s_fail(err, S2S_ERR_CONFIG, "head %d: %s %s cannot be multiplied by %s %s", h + 1, mn[i], shape(*m[i], a),
                              names[i], shape(w[i], b));
                goto out;
            }
            *m[i] = op_matmul(&t, *m[i], w[i], 0);
        }
    }
    if (H == 1) { /* the split into heads */
        int s = in->split > 0 ? in->split : 1;
        if (s > ATTN_CALC_MAX_HEADS) {
            st = s2s_fail(err, S2S_ERR_CONFIG, "heads: at most %d", ATTN_CALC_MAX_HEADS);
            goto out;
        }
        if (s > 1) {
            Tensor *q = heads[0].q, *k = heads[0].k, *v = heads[0].v;
            if (q->shape[1] % s || k->shape[1] % s || v->shape[1] % s) {
                st = s2s_fail(err, S2S_ERR_CONFIG, "heads %d: the widths of Q %s, K and V must divide by %d", s, shape(q, a), s);
                goto out;
            }
            for (int h = 0; h < s; h++) {
                heads[h].q = op_slice(&t, q, h * (q->shape[1] / s), q->shape[1] / s);
                heads[h].k = op_slice(&t, k, h * (k->shape[1] / s), k->shape[1] / s);
                heads[h].v = op_slice(&t, v, h * (v->shape[1] / s), v->shape[1] / s);
            }
            H = s;
        }
    }
    Tensor *concat = NULL;
    for (int h = 0; h < H; h++) {
        Tensor *q = heads[h].q, *k = heads[h].k, *v = heads[h].v;
        if (q->shape[1] != k->shape[1]) {
            st = s2s_fail(err, S2S_ERR_CONFIG, "head %d: Q %s and K %s need the same width", h + 1, shape(q, a), shape(k, b));
            goto out;
        }
        if (k->shape[0] != v->shape[0]) {
            st = s2s_fail(err, S2S_ERR_CONFIG, "head %d: K %s and V %s need the same number of rows", h + 1, shape(k, a), shape(v, b));
            goto out;
        }
        int nq = q->shape[0], nk = k->shape[0];
        if (h > 0 && nq != heads[0].q->shape[0]) { /* the outputs are put side by side, row by row */
            st = s2s_fail(err, S2S_ERR_CONFIG, "head %d has %d queries, head 1 has %d; heads need the same number of queries", h + 1,
                          nq, heads[0].q->shape[0]);
            goto out;
        }
        if (in->causal && nq != nk) {
            st = s2s_fail(err, S2S_ERR_CONFIG, "causal: needs as many queries as keys, got %d and %d", nq, nk);
            goto out;
        }
        Tensor *sc = op_matmul(&t, q, k, MM_TRANS_B);
        if (in->scaled) sc = op_scale(&t, sc, 1.0f / sqrtf((float)k->shape[1]));
        uint8_t *mask = NULL;
        if (in->causal) {
            mask = arena_alloc(&t.arena, (size_t)nq * nk);
            for (int i = 0; i < nq; i++)
                for (int j = 0; j < nk; j++) mask[i * nk + j] = j <= i;
        }
        Tensor *w = op_softmax(&t, sc, mask, nq);
        Tensor *o = op_matmul(&t, w, v, 0);
        out->scores[h] = heap_copy(sc);
        out->weights[h] = heap_copy(w);
        out->outputs[h] = heap_copy(o);
        out->q[h] = heap_copy(q);
        out->k[h] = heap_copy(k);
        out->v[h] = heap_copy(v);
        out->n_heads = h + 1;
        concat = concat ? op_concat(&t, concat, o) : o;
    }
    if (in->w_o) {
        if ((st = need_matrix(in->w_o, "W_o", err))) goto out;
        if (in->w_o->shape[0] != concat->shape[1]) {
            st = s2s_fail(err, S2S_ERR_CONFIG, "the heads' output %s cannot be multiplied by W_o %s", shape(concat, a),
                          shape(in->w_o, b));
            goto out;
        }
        concat = op_matmul(&t, concat, in->w_o, 0);
    }
    out->output = heap_copy(concat);
    st = S2S_OK;
    for (int h = 0; h < out->n_heads && !st; h++) {
        const Tensor *m[3] = {out->scores[h], out->weights[h], out->outputs[h]};
        for (int i = 0; i < 3 && !st; i++)
            if (!finite_all(m[i]))
                st = s2s_fail(err, S2S_ERR_CONFIG, "head %d: the %s pass float range (values near 3.4e38); scale the inputs down",
                              h + 1, i == 0 ? "scores" : i == 1 ? "weights" : "outputs");
    }
    if (!st && !finite_all(out->output))
        st = s2s_fail(err, S2S_ERR_CONFIG, "the output passes float range (values near 3.4e38); scale the inputs down");
out:
    tape_free(&t);
    if (st) attn_calc_free(out);
    return st;
}
