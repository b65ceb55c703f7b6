/* ops_rnn.c — fused GRU and LSTM cells: one GEMM for the recurrent projection, the gates in
 * one pass, a hand-written backward. The input projection (W_ih x + b_ih) is computed by
 * the caller for all time steps at once and arrives here as xg. */
#include "ops_internal.h"

#include <math.h>
#include <string.h>

static inline float sigm(float x) { return 1.0f / (1.0f + expf(-x)); }

static uint8_t *copy_active(Tape *t, const uint8_t *active, int B) {
    if (!active) return NULL;
    uint8_t *a = arena_alloc(&t->arena, (size_t)B);
    memcpy(a, active, (size_t)B);
    return a;
}

/* dst (B, G) = src (B, H) W^T + b: the recurrent projection. */
static float *recurrent_proj(Tape *t, const Tensor *h, const Tensor *w, const Tensor *b, int B, int G, int H) {
    float *hg = arena_alloc(&t->arena, (size_t)B * G * sizeof *hg);
    for (int r = 0; r < B; r++) memcpy(hg + (size_t)r * G, b->data, (size_t)G * sizeof *hg);
    s2s_gemm(false, true, B, G, H, 1.0f, h->data, H, w->data, H, 1.0f, hg, G);
    return hg;
}

/* From dgates (B, G) w.r.t. the recurrent pre-activations: dh += dg W, dW += dg^T h,
 * db += Σ_rows dg. */
static void recurrent_backward(Tape *t, const float *dg, Tensor *h, Tensor *w, Tensor *b, int B, int G, int H) {
    if (h->requires_grad) s2s_gemm(false, false, B, H, G, 1.0f, dg, G, w->data, H, 1.0f, tensor_grad(t, h), H);
    if (w->requires_grad) s2s_gemm(true, false, G, H, B, 1.0f, dg, G, h->data, H, 1.0f, tensor_grad(t, w), H);
    if (b->requires_grad) {
        float *db = tensor_grad(t, b);
        for (int r = 0; r < B; r++)
            for (int j = 0; j < G; j++) db[j] += dg[(size_t)r * G + j];
    }
}

static Tensor *cell_out(Tape *t, Tensor *out, int B, int H) {
    if (!out) return tape_tensor2(t, B, H);
    S2S_ASSERT(out->size == (size_t)B * H);
    return out;
}

Tensor *op_gru_cell(Tape *t, Tensor *xg, Tensor *h, Tensor *w_hh, Tensor *b_hh,
                    const uint8_t *active, Tensor *out) {
    int B = tensor_rows(h), H = tensor_cols(h), G = 3 * H;
    S2S_ASSERT(tensor_rows(xg) == B && tensor_cols(xg) == G);
    S2S_ASSERT(w_hh->shape[0] == G && w_hh->shape[1] == H && b_hh->size == (size_t)G);
    Tensor *y = cell_out(t, out, B, H);
    float *hg = recurrent_proj(t, h, w_hh, b_hh, B, G, H);
    float *gates = arena_alloc(&t->arena, (size_t)B * G * sizeof *gates); /* r, z, n */
    for (int r = 0; r < B; r++) {
        const float *x = xg->data + (size_t)r * G, *hr = h->data + (size_t)r * H, *g = hg + (size_t)r * G;
        float *gt = gates + (size_t)r * G, *yr = y->data + (size_t)r * H;
        if (active && !active[r]) {
            memset(yr, 0, (size_t)H * sizeof *yr);
            continue;
        }
        for (int j = 0; j < H; j++) {
            float rr = sigm(x[j] + g[j]);
            float zz = sigm(x[H + j] + g[H + j]);
            float nn = tanhf(x[2 * H + j] + rr * g[2 * H + j]);
            gt[j] = rr;
            gt[H + j] = zz;
            gt[2 * H + j] = nn;
            yr[j] = (1.0f - zz) * nn + zz * hr[j];
        }
    }
    if (tape_wants(t, xg, h, w_hh) || tape_wants(t, b_hh, NULL, NULL)) {
        TapeNode *n = tape_record(t, OP_GRU_CELL, y);
        n->in[0] = xg;
        n->in[1] = h;
        n->in[2] = w_hh;
        n->in[3] = b_hh;
        n->saved = gates;
        n->saved2 = hg;
        n->mask = copy_active(t, active, B);
    }
    return y;
}

void op_gru_cell_backward(Tape *t, const TapeNode *n) {
    Tensor *xg = n->in[0], *h = n->in[1], *w = n->in[2], *b = n->in[3];
    const uint8_t *active = n->mask;
    const float *gates = n->saved, *hg = n->saved2, *dy = n->out->grad;
    int B = tensor_rows(h), H = tensor_cols(h), G = 3 * H;
    float *dg = arena_calloc(&t->arena, (size_t)B * G * sizeof *dg); /* d recurrent pre-acts */
    float *dxg = xg->requires_grad ? tensor_grad(t, xg) : NULL;
    float *dh = h->requires_grad ? tensor_grad(t, h) : NULL;
    for (int r = 0; r < B; r++) {
        if (active && !active[r]) continue;
        const float *gt = gates + (size_t)r * G, *g = hg + (size_t)r * G, *hr = h->data + (size_t)r * H;
        const float *d = dy + (size_t)r * H;
        float *dgr = dg + (size_t)r * G;
        for (int j = 0; j < H; j++) {
            float rr = gt[j], zz = gt[H + j], nn = gt[2 * H + j];
            float dn = d[j] * (1.0f - zz) * (1.0f - nn * nn); /* through tanh */
            float dz = d[j] * (hr[j] - nn) * zz * (1.0f - zz);
            float dr = dn * g[2 * H + j] * rr * (1.0f - rr);
            dgr[j] = dr;
            dgr[H + j] = dz;
            dgr[2 * H + j] = dn * rr;
            if (dxg) {
                float *dx = dxg + (size_t)r * G;
                dx[j] += dr;
                dx[H + j] += dz;
                dx[2 * H + j] += dn;
            }
            if (dh) dh[(size_t)r * H + j] += d[j] * zz;
        }
    }
    recurrent_backward(t, dg, h, w, b, B, G, H);
}

Tensor *op_lstm_cell(Tape *t, Tensor *xg, Tensor *h, Tensor *c, Tensor *w_hh, Tensor *b_hh,
                     const uint8_t *active, Tensor *h_out, Tensor *c_out, Tensor **c_next) {
    int B = tensor_rows(h), H = tensor_cols(h), G = 4 * H;
    S2S_ASSERT(tensor_rows(xg) == B && tensor_cols(xg) == G && c->size == h->size);
    S2S_ASSERT(w_hh->shape[0] == G && w_hh->shape[1] == H && b_hh->size == (size_t)G);
    Tensor *y = cell_out(t, h_out, B, H), *cy = cell_out(t, c_out, B, H);
    float *gates = recurrent_proj(t, h, w_hh, b_hh, B, G, H); /* becomes i, f, g, o */
    float *tc = arena_alloc(&t->arena, (size_t)B * H * sizeof *tc); /* tanh(c') */
    for (int r = 0; r < B; r++) {
        const float *x = xg->data + (size_t)r * G, *cr = c->data + (size_t)r * H;
        float *gt = gates + (size_t)r * G, *yr = y->data + (size_t)r * H, *cn = cy->data + (size_t)r * H;
        if (active && !active[r]) {
            memset(yr, 0, (size_t)H * sizeof *yr);
            memset(cn, 0, (size_t)H * sizeof *cn);
            continue;
        }
        for (int j = 0; j < H; j++) {
            float ii = sigm(x[j] + gt[j]);
            float ff = sigm(x[H + j] + gt[H + j]);
            float gg = tanhf(x[2 * H + j] + gt[2 * H + j]);
            float oo = sigm(x[3 * H + j] + gt[3 * H + j]);
            gt[j] = ii;
            gt[H + j] = ff;
            gt[2 * H + j] = gg;
            gt[3 * H + j] = oo;
            cn[j] = ff * cr[j] + ii * gg;
            tc[(size_t)r * H + j] = tanhf(cn[j]);
            yr[j] = oo * tc[(size_t)r * H + j];
        }
    }
    if (tape_wants(t, xg, h, c) || tape_wants(t, w_hh, b_hh, NULL)) {
        TapeNode *n = tape_record(t, OP_LSTM_CELL, y);
        n->out2 = cy;
        cy->requires_grad = true;
        if (cy->base) cy->base->requires_grad = true;
        n->in[0] = xg;
        n->in[1] = h;
        n->in[2] = c;
        n->in[3] = w_hh;
        n->in[4] = b_hh;
        n->saved = gates;
        n->saved2 = tc;
        n->mask = copy_active(t, active, B);
    }
    *c_next = cy;
    return y;
}

void op_lstm_cell_backward(Tape *t, const TapeNode *n) {
    Tensor *xg = n->in[0], *h = n->in[1], *c = n->in[2], *w = n->in[3], *b = n->in[4];
    const uint8_t *active = n->mask;
    const float *gates = n->saved, *tc = n->saved2;
    const float *dy = tensor_grad_if(n->out), *dcy = tensor_grad_if(n->out2);
    int B = tensor_rows(h), H = tensor_cols(h), G = 4 * H;
    float *dg = arena_calloc(&t->arena, (size_t)B * G * sizeof *dg);
    float *dxg = xg->requires_grad ? tensor_grad(t, xg) : NULL;
    float *dc = c->requires_grad ? tensor_grad(t, c) : NULL;
    for (int r = 0; r < B; r++) {
        if (active && !active[r]) continue;
        const float *gt = gates + (size_t)r * G, *cr = c->data + (size_t)r * H, *tcr = tc + (size_t)r * H;
        float *dgr = dg + (size_t)r * G;
        for (int j = 0; j < H; j++) {
            float ii = gt[j], ff = gt[H + j], gg = gt[2 * H + j], oo = gt[3 * H + j];
            float dh_ = dy ? dy[(size_t)r * H + j] : 0.0f;
            float dct = (dcy ? dcy[(size_t)r * H + j] : 0.0f) + dh_ * oo * (1.0f - tcr[j] * tcr[j]);
            dgr[j] = dct * gg * ii * (1.0f - ii);
            dgr[H + j] = dct * cr[j] * ff * (1.0f - ff);
            dgr[2 * H + j] = dct * ii * (1.0f - gg * gg);
            dgr[3 * H + j] = dh_ * tcr[j] * oo * (1.0f - oo);
            if (dc) dc[(size_t)r * H + j] += dct * ff;
        }
    }
    if (dxg)
        for (size_t k = 0; k < (size_t)B * G; k++) dxg[k] += dg[k];
    recurrent_backward(t, dg, h, w, b, B, G, H);
}
