/* ops_rnn_seq.c — a whole GRU or LSTM direction over a padded sequence as one op (Marian's
 * layout). Forward: per step one GEMM (h W_hh^T) and one fused pass over the gates.
 * Backward: per step one GEMM (dG W_hh) for the state gradient; then, for all steps at
 * once, dW_hh += dG^T H_prev as a single GEMM, db_hh and dxg as single passes.
 *
 * Padding: a row that is inactive at a step keeps its state unchanged and outputs 0, so the
 * forward direction ends with each row's state at its last real token and the backward
 * direction starts there (PyTorch's packed sequences). The output holds S + 1 rows of
 * (B, H): the S step outputs, then the final state; an LSTM's second output likewise holds
 * the cell states. */
#include "s2s/bf16.h"
#include "s2s/fastmath.h"
#include "s2s/par.h"
#include "ops_internal.h"

#include <string.h>

typedef struct SeqSaved {
    float *hprev;  /* (S, B, H) state before each step, or NULL: the outputs hold it (prev_in_outputs) */
    float *cprev;  /* (S, B, H) LSTM cell before each step, likewise */
    const float *h0, *c0; /* the initial state (inputs: alive until this op's backward) */
    const float *ys, *cs; /* this op's outputs (S + 1, B, H) */
    float *gates;  /* (S, B, G) activations: GRU r, z, n; LSTM i, f, g, o */
    float *aux;    /* (S, B, H) GRU: W_hn h + b_hn, or NULL: recomputed in backward (Tape.recompute).
                    * An LSTM's tanh(c') is always recomputed, from its cell outputs. */
    uint8_t *active; /* (S, B) or NULL */
    int S, B, H;
    bool lstm, reverse;
} SeqSaved;

static inline int step_at(const SeqSaved *q, int k) { return q->reverse ? q->S - 1 - k : k; }

/* The state before processing step k is the previous step's output, or the initial state at
 * k = 0, unless a row had a pause before k with a nonzero state: an inactive row outputs 0
 * but keeps its state. Each row's active steps must then form one run, starting at k = 0 or
 * from a zero initial state (the encoder's). */
static bool prev_in_outputs(const uint8_t *active, int S, int B, int H, bool reverse, const float *h0, const float *c0) {
    if (!active) return true;
    for (int b = 0; b < B; b++) {
        int runs = 0, first = -1;
        for (int k = 0; k < S; k++) {
            int s = reverse ? S - 1 - k : k;
            bool on = active[(size_t)s * B + b], before = k > 0 && active[(size_t)(reverse ? s + 1 : s - 1) * B + b];
            if (on && !before) {
                runs++;
                if (first < 0) first = k;
            }
        }
        if (runs > 1) return false;
        if (first > 0)
            for (int j = 0; j < H; j++)
                if (h0[(size_t)b * H + j] != 0.0f || (c0 && c0[(size_t)b * H + j] != 0.0f)) return false;
    }
    return true;
}

/* (B, H) state before step s (processing step k) */
static const float *state_before(const SeqSaved *q, const float *kept, const float *outs, const float *init, int k) {
    size_t BH = (size_t)q->B * q->H;
    if (kept) return kept + (size_t)step_at(q, k) * BH;
    return k == 0 ? init : outs + (size_t)step_at(q, k - 1) * BH;
}

/* g: the recurrent projection on entry, the gate activations on return. */
static void gru_step(int H, const float *restrict x, const float *restrict b, float *restrict g,
                     const float *restrict hr, float *restrict hn, float *restrict hnew) {
    for (int j = 0; j < H; j++) {
        float rr = s2s_sigmoidf(x[j] + g[j] + b[j]);
        float zz = s2s_sigmoidf(x[H + j] + g[H + j] + b[H + j]);
        float ghn = g[2 * H + j] + b[2 * H + j];
        float nn = s2s_tanhf(x[2 * H + j] + rr * ghn);
        g[j] = rr;
        g[H + j] = zz;
        g[2 * H + j] = nn;
        hn[j] = ghn;
        hnew[j] = (1.0f - zz) * nn + zz * hr[j];
    }
}

static void lstm_step(int H, const float *restrict x, const float *restrict b, float *restrict g,
                      const float *restrict cr, float *restrict tc, float *restrict hnew, float *restrict cnew) {
    for (int j = 0; j < H; j++) {
        float ii = s2s_sigmoidf(x[j] + g[j] + b[j]);
        float ff = s2s_sigmoidf(x[H + j] + g[H + j] + b[H + j]);
        float gg = s2s_tanhf(x[2 * H + j] + g[2 * H + j] + b[2 * H + j]);
        float oo = s2s_sigmoidf(x[3 * H + j] + g[3 * H + j] + b[3 * H + j]);
        g[j] = ii;
        g[H + j] = ff;
        g[2 * H + j] = gg;
        g[3 * H + j] = oo;
        float c1 = ff * cr[j] + ii * gg, t1 = s2s_tanhf(c1);
        cnew[j] = c1;
        tc[j] = t1;
        hnew[j] = oo * t1;
    }
}

/* One step's rows after its GEMM (rows are independent: any split gives the same bits). */
typedef struct StepJob {
    int H, G;
    bool lstm;
    const uint8_t *act;
    const float *x, *b; /* x: this step's input projections (B, G) */
    float *g, *h, *c, *aux, *hnew, *cnew, *ys, *cs;
    uint16_t *hbf; /* (B, H) the state in bf16 for the next step's product, or NULL */
    float *keep;   /* (B, G) where the gates are kept for backward, when not in g: the input
                    * projections x, each row read before its gates go over it (padded rows'
                    * gates are never read: not copied); or NULL */
} StepJob;

/* Work per gate value in par_for's units: an exponential and a handful of products each,
 * so a step's rows split over the threads, which would wait for the next GEMM anyway. */
#define STEP_ROW_COST 8

/* A step's rows over libgomp's threads, except on an OpenBLAS tape: its own threads spin
 * between the per-step products, and waking libgomp's between them made both wait
 * (float32 training with "gemm": "openblas" ran 2,403 → 1,666 tok/s). */
static void rows_pass(const Tape *t, int B, int G, ParFn fn, void *job) {
    if (tape_openblas(t)) fn(job, 0, (size_t)B);
    else par_for((size_t)B, (size_t)G * STEP_ROW_COST, fn, job);
}

static void step_rows(void *ctx, size_t r0, size_t r1) {
    const StepJob *j = ctx;
    int H = j->H, G = j->G;
    for (size_t r = r0; r < r1; r++) {
        size_t o = r * (size_t)H;
        if (j->act && !j->act[r]) { /* padding: state kept (its bf16 copy too), output 0 */
            memset(j->ys + o, 0, (size_t)H * sizeof(float));
            if (j->lstm) memset(j->cs + o, 0, (size_t)H * sizeof(float));
            continue;
        }
        const float *x = j->x + r * (size_t)G;
        float *g = j->g + r * (size_t)G;
        if (j->lstm) {
            lstm_step(H, x, j->b, g, j->c + o, j->aux + o, j->hnew + o, j->cnew + o);
            memcpy(j->c + o, j->cnew + o, (size_t)H * sizeof(float));
            memcpy(j->cs + o, j->cnew + o, (size_t)H * sizeof(float));
        } else {
            gru_step(H, x, j->b, g, j->h + o, j->aux + o, j->hnew + o);
        }
        memcpy(j->h + o, j->hnew + o, (size_t)H * sizeof(float));
        memcpy(j->ys + o, j->hnew + o, (size_t)H * sizeof(float));
        if (j->hbf) bf16_from_f32(j->hnew + o, j->hbf + o, (size_t)H);
        if (j->keep) memcpy(j->keep + r * (size_t)G, g, (size_t)G * sizeof(float));
    }
}

/* consume: xg's values are dead once read (only this op reads them), so the gate
 * activations kept for backward take their place instead of a buffer of the same size. */
static Tensor *rnn_seq(Tape *t, CellKind kind, Tensor *xg, Tensor *h0, Tensor *c0, Tensor *w_hh, Tensor *b_hh,
                       const uint8_t *active, bool reverse, bool consume, Tensor **cells) {
    bool lstm = kind == CELL_LSTM;
    S2S_ASSERT(!consume || !xg->base); /* a view's base may be read by others */
    int B = tensor_rows(h0), H = tensor_cols(h0), G = (lstm ? 4 : 3) * H;
    S2S_ASSERT(tensor_cols(xg) == G && tensor_rows(xg) % B == 0);
    S2S_ASSERT(w_hh->shape[0] == G && w_hh->shape[1] == H && b_hh->size == (size_t)G);
    S2S_ASSERT(!lstm || (c0 && c0->size == h0->size));
    int S = tensor_rows(xg) / B;
    size_t BH = (size_t)B * H, BG = (size_t)B * G;
    Tensor *y = tape_tensor3(t, S + 1, B, H), *cy = lstm ? tape_tensor3(t, S + 1, B, H) : NULL;
    /* what backward needs is kept only when there will be a backward */
    bool record = tape_wants(t, xg, h0, c0) || tape_wants(t, w_hh, b_hh, NULL);
    SeqSaved *q = arena_alloc(&t->arena, sizeof *q);
    /* the states before each step: read back from the outputs where they hold them */
    bool keep_prev = record && !prev_in_outputs(active, S, B, H, reverse, h0->data, lstm ? c0->data : NULL);
    bool keep_hn = record && !lstm && !t->recompute;
    *q = (SeqSaved){.hprev = keep_prev ? arena_alloc(&t->arena, (size_t)S * BH * sizeof(float)) : NULL,
                    .cprev = keep_prev && lstm ? arena_alloc(&t->arena, (size_t)S * BH * sizeof(float)) : NULL,
                    .h0 = h0->data, .c0 = lstm ? c0->data : NULL, .ys = y->data, .cs = lstm ? cy->data : NULL,
                    .gates = !record ? NULL : consume ? xg->data : arena_alloc(&t->arena, (size_t)S * BG * sizeof(float)),
                    .aux = keep_hn ? arena_alloc(&t->arena, (size_t)S * BH * sizeof(float)) : NULL,
                    .S = S, .B = B, .H = H, .lstm = lstm, .reverse = reverse};
    if (active && record) {
        q->active = arena_alloc(&t->arena, (size_t)S * B);
        memcpy(q->active, active, (size_t)S * B);
    }
    float *h = y->data + (size_t)S * BH, *c = lstm ? cy->data + (size_t)S * BH : NULL; /* running state */
    memcpy(h, h0->data, BH * sizeof(float));
    if (lstm) memcpy(c, c0->data, BH * sizeof(float));
    float *hnew = arena_alloc(&t->arena, BH * sizeof(float)), *cnew = lstm ? arena_alloc(&t->arena, BH * sizeof(float)) : NULL;
    const uint16_t *wbf = tape_bf16_weight(t, w_hh); /* once, not per step */
    /* a bf16 product rounds h every step: the row pass writes h in bf16 too, as it writes h,
     * on every thread, instead of one more pass over it on one (a step's state is below
     * par_for's threshold) */
    uint16_t *hbf = S > 1 && tape_bf16_takes(t, B, G, true) ? arena_alloc(&t->arena, BH * sizeof *hbf) : NULL;
    if (hbf) bf16_from_f32(h, hbf, BH);
    /* one step's gates (then into xg when consuming) and its aux values, where not kept */
    float *gstep = consume || !record ? arena_alloc(&t->arena, BG * sizeof(float)) : NULL;
    float *astep = q->aux ? NULL : arena_alloc(&t->arena, BH * sizeof(float));
    for (int k = 0; k < S; k++) {
        int s = step_at(q, k);
        float *gt = gstep ? gstep : q->gates + (size_t)s * BG;
        float *aux = q->aux ? q->aux + (size_t)s * BH : astep;
        if (q->hprev) memcpy(q->hprev + (size_t)s * BH, h, BH * sizeof(float));
        if (q->cprev) memcpy(q->cprev + (size_t)s * BH, c, BH * sizeof(float));
        /* recurrent projection into the gate buffer; the row pass turns it into activations */
        tape_gemm_op(t, false, true, B, G, H, 1.0f, h, H, hbf, w_hh->data, H, wbf, w_hh, 0.0f, gt, G);
        const uint8_t *act = active ? active + (size_t)s * B : NULL;
        StepJob j = {.H = H, .G = G, .lstm = lstm, .act = act, .x = xg->data + (size_t)s * BG, .b = b_hh->data,
                     .g = gt, .h = h, .c = c, .aux = aux, .hnew = hnew, .cnew = cnew, .ys = y->data + (size_t)s * BH,
                     .cs = lstm ? cy->data + (size_t)s * BH : NULL, .hbf = hbf,
                     /* over this step's xg, each row once read: in the row pass, on every thread */
                     .keep = consume && record ? q->gates + (size_t)s * BG : NULL};
        rows_pass(t, B, G, step_rows, &j);
    }
    if (record) {
        TapeNode *n = tape_record(t, OP_RNN_SEQ, y);
        n->in[0] = xg;
        n->in[1] = h0;
        n->in[2] = c0;
        n->in[3] = w_hh;
        n->in[4] = b_hh;
        n->saved = q;
        if (lstm) tape_record_out2(t, n, cy);
    }
    if (cells) *cells = cy;
    return y;
}

Tensor *op_rnn_seq(Tape *t, CellKind kind, Tensor *xg, Tensor *h0, Tensor *c0, Tensor *w_hh, Tensor *b_hh,
                   const uint8_t *active, bool reverse, Tensor **cells) {
    return rnn_seq(t, kind, xg, h0, c0, w_hh, b_hh, active, reverse, false, cells);
}

Tensor *op_rnn_seq_consume(Tape *t, CellKind kind, Tensor *xg, Tensor *h0, Tensor *c0, Tensor *w_hh, Tensor *b_hh,
                           const uint8_t *active, bool reverse, Tensor **cells) {
    return rnn_seq(t, kind, xg, h0, c0, w_hh, b_hh, active, reverse, true, cells);
}

static void gru_step_backward(int H, const float *restrict gt, const float *restrict hn, const float *restrict hr,
                              const float *restrict d, float *restrict dg, float *restrict dx, float *restrict dh) {
    for (int j = 0; j < H; j++) {
        float rr = gt[j], zz = gt[H + j], nn = gt[2 * H + j];
        float dn = d[j] * (1.0f - zz) * (1.0f - nn * nn);
        float dz = d[j] * (hr[j] - nn) * zz * (1.0f - zz);
        float dr = dn * hn[j] * rr * (1.0f - rr);
        dg[j] = dr;
        dg[H + j] = dz;
        dg[2 * H + j] = dn * rr;
        dx[j] = dr;
        dx[H + j] = dz;
        dx[2 * H + j] = dn;
        dh[j] = d[j] * zz; /* the direct path; dG W_hh is added after the row pass */
    }
}

/* cn: the cell after the step, whose tanh the forward took (the same function: the same bits) */
static void lstm_step_backward(int H, const float *restrict gt, const float *restrict cr, const float *restrict cn,
                               const float *restrict d, float *restrict dcs, float *restrict dg) {
    for (int j = 0; j < H; j++) {
        float ii = gt[j], ff = gt[H + j], gg = gt[2 * H + j], oo = gt[3 * H + j], tc = s2s_tanhf(cn[j]);
        float dct = dcs[j] + d[j] * oo * (1.0f - tc * tc);
        dg[j] = dct * gg * ii * (1.0f - ii);
        dg[H + j] = dct * cr[j] * ff * (1.0f - ff);
        dg[2 * H + j] = dct * ii * (1.0f - gg * gg);
        dg[3 * H + j] = d[j] * tc * oo * (1.0f - oo);
        dcs[j] = dct * ff;
    }
}

typedef struct BackJob {
    int H, G;
    bool lstm;
    bool over;    /* the gates' memory takes d xg: each row's gates are copied to stage first */
    float *stage; /* (B, G) */
    const uint8_t *act;
    const float *gt, *aux, *hp, *cp, *cn, *dy, *dcy; /* this step's saved values and output gradients */
    float *dh, *dc, *dtot, *dhd, *dgs, *dxs;
    float *dgn; /* GRU: (B, H) the n columns of d recurrent pre-activations, kept for dW_hh */
    uint16_t *dgbf; /* (B, G) this step's d recurrent pre-activations in bf16 for dG W_hh, or NULL */
} BackJob;

static void back_rows(void *ctx, size_t r0, size_t r1) {
    const BackJob *j = ctx;
    int H = j->H, G = j->G;
    for (size_t r = r0; r < r1; r++) {
        size_t o = r * (size_t)H;
        const float *gt = j->gt + r * (size_t)G;
        if (j->act && !j->act[r]) { /* state passed through unchanged: its gradient too */
            memcpy(j->dhd + o, j->dh + o, (size_t)H * sizeof(float));
            if (j->over) /* d xg of the row is 0, written over its (unused) gates */
                memset((j->lstm ? j->dgs : j->dxs) + r * (size_t)G, 0, (size_t)G * sizeof(float));
            if (!j->lstm) /* the GRU's step buffer is reused: its row must read 0 */
                memset(j->dgs + r * (size_t)G, 0, (size_t)G * sizeof(float));
            if (j->dgbf) bf16_from_f32(j->dgs + r * (size_t)G, j->dgbf + r * (size_t)G, (size_t)G);
            continue;
        }
        if (j->over) {
            memcpy(j->stage + r * (size_t)G, gt, (size_t)G * sizeof(float));
            gt = j->stage + r * (size_t)G;
        }
        for (int k = 0; k < H; k++) j->dtot[o + k] = j->dh[o + k] + (j->dy ? j->dy[o + k] : 0.0f);
        if (j->lstm) {
            float *dcs = j->dc + o;
            if (j->dcy)
                for (int k = 0; k < H; k++) dcs[k] += j->dcy[o + k];
            lstm_step_backward(H, gt, j->cp + o, j->cn + o, j->dtot + o, dcs, j->dgs + r * (size_t)G);
            memset(j->dhd + o, 0, (size_t)H * sizeof(float));
        } else {
            float *dg = j->dgs + r * (size_t)G;
            gru_step_backward(H, gt, j->aux + o, j->hp + o, j->dtot + o, dg, j->dxs + r * (size_t)G, j->dhd + o);
            memcpy(j->dgn + o, dg + 2 * H, (size_t)H * sizeof(float));
        }
        if (j->dgbf) bf16_from_f32(j->dgs + r * (size_t)G, j->dgbf + r * (size_t)G, (size_t)G);
    }
}

/* gw (Gc, H) += D^T H_prev over all steps, D (S, B, ldd) read in its first Gc columns.
 * Without kept states, H_prev is the outputs one step back and the initial state. */
static void add_dw(Tape *t, const SeqSaved *q, int Gc, const float *D, int ldd, float *gw) {
    int S = q->S, B = q->B, H = q->H;
    size_t BH = (size_t)B * H, BD = (size_t)B * ldd;
    if (q->hprev) {
        tape_gemm(t, true, false, Gc, H, S * B, 1.0f, D, ldd, q->hprev, H, 1.0f, gw, H);
        return;
    }
    if (S > 1) /* forward: steps 1.. against outputs 0..; reverse: steps 0.. against outputs 1.. */
        tape_gemm(t, true, false, Gc, H, (S - 1) * B, 1.0f, q->reverse ? D : D + BD, ldd, q->reverse ? q->ys + BH : q->ys, H,
                 1.0f, gw, H);
    tape_gemm(t, true, false, Gc, H, B, 1.0f, D + (size_t)step_at(q, 0) * BD, ldd, q->h0, H, 1.0f, gw, H);
}

void op_rnn_seq_backward(Tape *t, const TapeNode *n) {
    const SeqSaved *q = n->saved;
    Tensor *xg = n->in[0], *h0 = n->in[1], *c0 = n->in[2], *w = n->in[3], *b = n->in[4];
    int S = q->S, B = q->B, H = q->H, G = (q->lstm ? 4 : 3) * H;
    size_t BH = (size_t)B * H, BG = (size_t)B * G;
    const float *dy = tensor_grad_if(n->out), *dcy = n->out2 ? tensor_grad_if(n->out2) : NULL;
    /* d xg is written once, whole: where xg has no gradient yet (the usual case: only this op
     * reads it), it is written straight into xg's gradient instead of a buffer added later */
    bool own = xg->requires_grad && !xg->grad && !xg->base;
    /* consumed (the gates live in xg's memory) and ours alone: d xg is written over the gates,
     * each step's just read, as the consuming loss writes over its logits */
    bool over = own && q->gates == xg->data;
    if (over) {
        xg->grad = xg->data;
        xg->grad_recyclable = true; /* dead, values and gradient, once its producer ran backward */
    }
    /* the gradients that outlive this op first; then its scratch, given back at the end */
    float *gx = xg->requires_grad ? tensor_grad(t, xg) : NULL, *gh0 = h0->requires_grad ? tensor_grad(t, h0) : NULL;
    float *gc0 = q->lstm && c0->requires_grad ? tensor_grad(t, c0) : NULL;
    float *gw = w->requires_grad ? tensor_grad(t, w) : NULL, *gb = b->requires_grad ? tensor_grad(t, b) : NULL;
    ArenaMark scratch = arena_mark(&t->arena);
    /* d recurrent pre-activations. An LSTM's equal d xg. A GRU's differ from d xg only in
     * the n columns (dn r against dn): those alone are kept, (S, B, H), from a dead buffer
     * where the tape has one; each step's whole rows go through a (B, G) step buffer. */
    size_t dead_n = 0;
    float *dead = q->lstm ? NULL : tape_take_dead(t, (size_t)S * BH, true, &dead_n);
    float *dGn = q->lstm ? NULL : dead ? dead : arena_calloc(&t->arena, (size_t)S * BH * sizeof(float));
    float *dX = !own ? arena_calloc(&t->arena, (size_t)S * BG * sizeof(float)) : gx; /* d xg */
    float *dG = q->lstm ? dX : arena_alloc(&t->arena, BG * sizeof(float));
    const uint16_t *wbf = tape_bf16_weight(t, w);
    float *stage = over ? arena_alloc(&t->arena, BG * sizeof(float)) : NULL;
    /* the row pass writes d pre-activations in bf16 too, for dG W_hh (as forward writes h;
     * one step alone leaves it to the product, as forward does) */
    uint16_t *dgbf = S > 1 && tape_bf16_takes(t, B, H, true) ? arena_alloc(&t->arena, BG * sizeof *dgbf) : NULL;
    float *hn = !q->lstm && !q->aux ? arena_alloc(&t->arena, BH * sizeof(float)) : NULL;
    float *dh = arena_calloc(&t->arena, BH * sizeof(float)), *dc = q->lstm ? arena_calloc(&t->arena, BH * sizeof(float)) : NULL;
    float *dtot = arena_alloc(&t->arena, BH * sizeof(float)), *dhd = arena_alloc(&t->arena, BH * sizeof(float));
    if (dy) memcpy(dh, dy + (size_t)S * BH, BH * sizeof(float)); /* the final state's gradient */
    if (dcy) memcpy(dc, dcy + (size_t)S * BH, BH * sizeof(float));
    for (int k = S - 1; k >= 0; k--) {
        int s = step_at(q, k);
        const uint8_t *act = q->active ? q->active + (size_t)s * B : NULL;
        const float *gt = q->gates + (size_t)s * BG, *hp = state_before(q, q->hprev, q->ys, q->h0, k);
        const float *aux = q->aux ? q->aux + (size_t)s * BH : NULL;
        if (!q->lstm && !aux) { /* recomputed: W_hn h + b_hn (inactive rows: unused) */
            tape_gemm_op(t, false, true, B, H, H, 1.0f, hp, H, NULL, w->data + (size_t)2 * H * H, H,
                         wbf ? wbf + (size_t)2 * H * H : NULL, NULL, 0.0f, hn, H);
            for (int r = 0; r < B; r++)
                for (int i = 0; i < H; i++) hn[(size_t)r * H + i] += b->data[2 * H + i];
            aux = hn;
        }
        BackJob j = {.H = H, .G = G, .lstm = q->lstm, .over = over, .stage = stage, .act = act, .gt = gt, .aux = aux, .hp = hp,
                     .cp = q->lstm ? state_before(q, q->cprev, q->cs, q->c0, k) : NULL,
                     .cn = q->lstm ? q->cs + (size_t)s * BH : NULL, .dy = dy ? dy + (size_t)s * BH : NULL,
                     .dcy = dcy ? dcy + (size_t)s * BH : NULL, .dh = dh, .dc = dc, .dtot = dtot, .dhd = dhd,
                     .dgs = q->lstm ? dG + (size_t)s * BG : dG, .dxs = dX + (size_t)s * BG,
                     .dgn = dGn ? dGn + (size_t)s * BH : NULL, .dgbf = dgbf};
        rows_pass(t, B, G, back_rows, &j);
        float *dgs = j.dgs;
        /* dh_prev = direct path + dG_s W_hh (inactive rows have dG = 0) */
        memcpy(dh, dhd, BH * sizeof(float));
        tape_gemm_op(t, false, false, B, H, G, 1.0f, dgs, G, dgbf, w->data, H, wbf, w, 1.0f, dh, H);
    }
    if (gh0)
        for (size_t i = 0; i < BH; i++) gh0[i] += dh[i];
    if (gc0)
        for (size_t i = 0; i < BH; i++) gc0[i] += dc[i];
    size_t rows = (size_t)S * B;
    /* all steps at once: dW_hh += dG^T H_prev, db_hh += column sums of dG; a GRU's dG is
     * d xg's r, z columns and its own n columns */
    int Grz = q->lstm ? G : 2 * H;
    if (gw) {
        add_dw(t, q, Grz, dX, G, gw);
        if (!q->lstm) add_dw(t, q, H, dGn, H, gw + (size_t)Grz * H);
    }
    if (gb)
        for (size_t r = 0; r < rows; r++) {
            for (int j = 0; j < Grz; j++) gb[j] += dX[r * G + j];
            if (!q->lstm)
                for (int j = 0; j < H; j++) gb[Grz + j] += dGn[r * H + j];
        }
    if (gx && !own)
        for (size_t i = 0; i < rows * G; i++) gx[i] += dX[i];
    arena_rewind(&t->arena, scratch);
    if (dead) tape_give_dead(t, dead, dead_n);
}
