/* ops_attend.c — a decoding step's scaled-dot attention fused: one query row a
 * sentence·head against cached, time-major keys and values. The composed ops (a batched
 * one-row op_matmul, op_scale, op_softmax, op_matmul) walk each row's keys B·d floats apart,
 * and those loads stalled the step; here positions go outer and the rows of a position are
 * read in order. Every sum is taken in the composed ops' order (the dots: gemm_dots_pairs),
 * so the bits are theirs. Owns nothing: q, k, v and the mask are borrowed, the outputs are
 * the tape's. */
#include "ops_internal.h"
#include "s2s/fastmath.h"
#include "s2s/par.h"

typedef struct AttendJob {
    const float *q, *k, *v; /* q (N, D); k, v (S, NK, D), NK = N without slots */
    const int32_t *slot;    /* (S, N / group) or NULL: where a position's rows are */
    int group;
    const uint8_t *mask;    /* (N / per, S) or NULL */
    float *sc, *p, *ctx;    /* scratch (N·S); weights (N, S) or NULL; ctx (N, D) */
    uint8_t *ok;            /* scratch (N·S): the mask, position-major; NULL without one */
    int N, NK, S, D, per;
    float scale;
} AttendJob;

/* Rows [r, *end) lie together at position s, from the row returned on: all of [r, r1)
 * without slots, else the rest of r's slot of group rows (a beam's reorders move the index,
 * not the rows). */
static inline size_t attend_run(const AttendJob *j, int s, size_t r, size_t r1, size_t *end) {
    if (!j->slot) {
        *end = r1;
        return r;
    }
    size_t g = (size_t)j->group, e = (r / g + 1) * g;
    *end = e < r1 ? e : r1;
    return (size_t)j->slot[(size_t)s * ((size_t)j->N / g) + r / g] * g + r % g;
}

enum { ATTEND_BLOCK = OPS_SOFTMAX_BLOCK };

/* Rows [r0, r1) whole: scores, softmax, context. Each dot and each context row is its own
 * sum, so reading the rows run by run gives the bits of reading them all at once. */
static void attend_block(const AttendJob *j, size_t r0, size_t r1) {
    int S = j->S, D = j->D, nb = (int)(r1 - r0);
    size_t row = (size_t)j->NK * D; /* one position's keys (or values) of every row */
    float d[ATTEND_BLOCK];         /* a block's dots at one position */
    float *x = j->sc + r0 * S;     /* the block's scores, then weights, position-major */
    uint8_t *ok = j->ok ? j->ok + r0 * S : NULL;
    for (int s = 0; s < S; s++) { /* scores: a position's rows read in order */
        for (size_t r = r0, e; r < r1; r = e) {
            size_t at = attend_run(j, s, r, r1, &e);
            gemm_dots_pairs(D, j->q + r * D, j->k + s * row + at * D, (int)(e - r), d + (r - r0));
        }
        /* op_matmul's 1·dot + 0 is the dot itself: a sum begun at +0 is never −0 */
        for (int i = 0; i < nb; i++) x[(size_t)s * nb + i] = j->scale * d[i];
        for (int i = 0; ok && i < nb; i++) { /* a masked score is −∞: the maximum skips it unasked */
            uint8_t m = j->mask[((r0 + (size_t)i) / (size_t)j->per) * S + s];
            ok[(size_t)s * nb + i] = m;
            if (!m) x[(size_t)s * nb + i] = -INFINITY;
        }
    }
    ops_softmax_columns(x, ok, S, nb);
    if (j->p)
        for (int s = 0; s < S; s++)
            for (int i = 0; i < nb; i++) j->p[(r0 + (size_t)i) * S + s] = x[(size_t)s * nb + i];
    float *restrict c = j->ctx + r0 * D; /* context: the weighted values added in position order */
    memset(c, 0, (r1 - r0) * D * sizeof *c);
    for (int s = 0; s < S; s++)
        for (size_t r = r0, e; r < r1; r = e) {
            const float *restrict vs = j->v + s * row + attend_run(j, s, r, r1, &e) * D;
            for (size_t y = r; y < e; y++, vs += D) {
                float w = x[(size_t)s * nb + (y - r0)], *restrict cx = c + (y - r0) * D;
                for (int i = 0; i < D; i++) cx[i] += w * vs[i];
            }
        }
}

/* In blocks of rows whose context (about 8 KB) stays in L1 while the positions go by. */
static void attend_rows(void *ctx, size_t r0, size_t r1) {
    const AttendJob *j = ctx;
    size_t blk = (size_t)(2048 / j->D / 4 * 4);
    blk = blk < 4 ? 4 : blk > ATTEND_BLOCK ? ATTEND_BLOCK : blk;
    for (size_t r = r0; r < r1; r += blk) attend_block(j, r, r + blk < r1 ? r + blk : r1);
}

Tensor *op_attend_row(Tape *t, Tensor *q, Tensor *k, Tensor *v, float scale, const uint8_t *mask, int mask_rows,
                      const int32_t *slot, int group, Tensor **weights) {
    S2S_ASSERT(q->ndim == 3 && k->ndim == 3 && v->ndim == 3 && q->shape[0] == 1);
    int N = q->shape[1], D = q->shape[2], S = k->shape[0], NK = k->shape[1];
    S2S_ASSERT((NK == N || (slot && NK > N)) && k->shape[2] == D && v->shape[0] == S && v->shape[1] == NK && v->shape[2] == D);
    S2S_ASSERT(!tape_wants(t, q, k, v)); /* decoding only: no backward */
    S2S_ASSERT(!slot || (group > 0 && N % group == 0));
    int per = 1;
    if (mask) {
        S2S_ASSERT(mask_rows > 0 && N % mask_rows == 0);
        per = N / mask_rows;
    }
    Tensor *sc = tape_tensor2(t, N, S), *p = weights ? tape_tensor3(t, N, 1, S) : NULL, *ctx = tape_tensor3(t, 1, N, D);
    uint8_t *ok = mask ? arena_alloc(&t->arena, (size_t)N * S) : NULL;
    t->flops += 4.0 * N * S * D;
    AttendJob j = {q->data, k->data, v->data, slot, group, mask, sc->data, p ? p->data : NULL, ctx->data, ok, N, NK, S, D, per, scale};
    par_for((size_t)N, (size_t)S * D * 2, attend_rows, &j);
    if (weights) *weights = p;
    return ctx;
}
