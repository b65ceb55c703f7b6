/* ops_attention.c — Bahdanau's additive scores, fused: score[b,t,s] = v · tanh(q[t,b] + k[s,b]).
 * The (B, T, S, A) tensor of pre-activations is never stored: backward recomputes the tanh,
 * which keeps memory at O(B·T·S) for a cost of one more pass. */
#include "s2s/fastmath.h"
#include "ops_internal.h"

#include <string.h>

/* q (T, B, A), k (S, B, A) time-major; v (A) → scores (B, T, S). */
Tensor *op_additive_scores(Tape *t, Tensor *q, Tensor *k, Tensor *v) {
    S2S_ASSERT(q->ndim == 3 && k->ndim == 3 && q->shape[1] == k->shape[1]);
    int T = q->shape[0], B = q->shape[1], A = q->shape[2], S = k->shape[0];
    S2S_ASSERT(k->shape[2] == A && v->size == (size_t)A);
    Tensor *y = tape_tensor3(t, B, T, S);
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T; i++) {
            const float *qi = q->data + ((size_t)i * B + b) * A;
            for (int s = 0; s < S; s++) {
                const float *ks = k->data + ((size_t)s * B + b) * A;
                float acc = 0.0f;
                for (int a = 0; a < A; a++) acc += v->data[a] * s2s_tanhf(qi[a] + ks[a]);
                y->data[((size_t)b * T + i) * S + s] = acc;
            }
        }
    if (tape_wants(t, q, k, v)) {
        TapeNode *n = tape_record(t, OP_ADDITIVE_SCORES, y);
        n->in[0] = q;
        n->in[1] = k;
        n->in[2] = v;
    }
    return y;
}

void op_additive_scores_backward(Tape *t, const TapeNode *n) {
    Tensor *q = n->in[0], *k = n->in[1], *v = n->in[2];
    int T = q->shape[0], B = q->shape[1], A = q->shape[2], S = k->shape[0];
    const float *dy = n->out->grad;
    float *dq = q->requires_grad ? tensor_grad(t, q) : NULL;
    float *dk = k->requires_grad ? tensor_grad(t, k) : NULL;
    float *dv = v->requires_grad ? tensor_grad(t, v) : NULL;
    float *tmp = arena_alloc(&t->arena, (size_t)A * sizeof *tmp);
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T; i++) {
            const float *qi = q->data + ((size_t)i * B + b) * A;
            for (int s = 0; s < S; s++) {
                float g = dy[((size_t)b * T + i) * S + s];
                if (g == 0.0f) continue; /* masked scores: softmax passed no gradient */
                const float *ks = k->data + ((size_t)s * B + b) * A;
                for (int a = 0; a < A; a++) {
                    float th = s2s_tanhf(qi[a] + ks[a]);
                    if (dv) dv[a] += g * th;
                    tmp[a] = g * v->data[a] * (1.0f - th * th);
                }
                if (dq)
                    for (int a = 0; a < A; a++) dq[((size_t)i * B + b) * A + a] += tmp[a];
                if (dk)
                    for (int a = 0; a < A; a++) dk[((size_t)s * B + b) * A + a] += tmp[a];
            }
        }
}
