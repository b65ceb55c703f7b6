/* ops_attend.c — a decoding step's scaled-dot attention fused: one query row a
 * sentence·head against cached, time-major keys and values. The composed ops (a batched
 * one-row op_matmul, op_scale, op_softmax, op_matmul) walk each row's keys B·d floats apart,
 * and those loads stalled the step; here positions go outer and the rows of a position are
 * read in order. Every sum is taken in the composed ops' order, so the bits are theirs. */
#include "ops_internal.h"
#include "s2s/par.h"

typedef struct AttendJob {
    const float *q, *k, *v; /* q (N, D); k, v (S, N, D) */
    const uint8_t *mask;    /* (N / per, S) or NULL */
    float *sc, *p, *ctx;    /* scores and weights (N, S); ctx (N, D) */
    int N, S, D, per;
    float scale;
} AttendJob;

/* The dot of a with b summed as gemm_dots sums it: 16 partial sums in k order, the tail,
 * then the 16 in order. */
static inline float attend_dot1(int K, const float *restrict a, const float *restrict b) {
    float part[16] = {0}, sum = 0.0f;
    int k = 0;
    for (; k + 16 <= K; k += 16)
        for (int q = 0; q < 16; q++) part[q] += a[k + q] * b[k + q];
    for (; k < K; k++) sum += a[k] * b[k];
    for (int q = 0; q < 16; q++) sum += part[q];
    return sum;
}

/* Four rows of a against the four rows of b beside them (rows K apart), each dot summed as
 * attend_dot1 sums it: four independent chains where one would wait on its own adds. */
static inline void attend_dot4(int K, const float *restrict a, const float *restrict b, float *out) {
    float p[4][16] = {{0}}, s[4] = {0};
    int k = 0;
    for (; k + 16 <= K; k += 16)
        for (int r = 0; r < 4; r++)
            for (int q = 0; q < 16; q++) p[r][q] += a[(size_t)r * K + k + q] * b[(size_t)r * K + k + q];
    for (; k < K; k++)
        for (int r = 0; r < 4; r++) s[r] += a[(size_t)r * K + k] * b[(size_t)r * K + k];
    for (int r = 0; r < 4; r++)
        for (int q = 0; q < 16; q++) s[r] += p[r][q];
    for (int r = 0; r < 4; r++) out[r] = s[r];
}

/* Rows [r0, r1) whole: scores, softmax, context. */
static void attend_block(const AttendJob *j, size_t r0, size_t r1) {
    int S = j->S, D = j->D;
    size_t row = (size_t)j->N * D; /* one position's keys (or values) of every row */
    for (int s = 0; s < S; s++) { /* scores: a position's rows read in order */
        const float *ks = j->k + s * row;
        size_t r = r0;
        float d[4];
        for (; r + 4 <= r1; r += 4) {
            attend_dot4(D, j->q + r * D, ks + r * D, d);
            /* op_matmul writes 1·dot + 0 (which makes −0 +0), op_scale multiplies */
            for (int i = 0; i < 4; i++) j->sc[(r + i) * S + s] = j->scale * (d[i] + 0.0f);
        }
        for (; r < r1; r++) j->sc[r * S + s] = j->scale * (attend_dot1(D, j->q + r * D, ks + r * D) + 0.0f);
    }
    for (size_t r = r0; r < r1; r++)
        ops_softmax_row(j->sc + r * S, j->p + r * S, j->mask ? j->mask + (r / (size_t)j->per) * S : NULL, S);
    float *restrict c = j->ctx + r0 * D; /* context: the weighted values added in position order */
    memset(c, 0, (r1 - r0) * D * sizeof *c);
    for (int s = 0; s < S; s++) {
        const float *restrict vs = j->v + s * row + r0 * D;
        for (size_t r = 0; r < r1 - r0; r++) {
            float w = j->p[(r0 + r) * S + s];
            for (int i = 0; i < D; i++) c[r * D + i] += w * vs[r * D + i];
        }
    }
    for (size_t i = 0; i < (r1 - r0) * D; i++) c[i] = c[i] + 0.0f; /* op_matmul's 1·acc + 0 */
}

/* In blocks of rows whose context (about 8 KB) stays in L1 while the positions go by. */
static void attend_rows(void *ctx, size_t r0, size_t r1) {
    const AttendJob *j = ctx;
    size_t blk = (size_t)(2048 / j->D / 4 * 4);
    if (blk < 4) blk = 4;
    for (size_t r = r0; r < r1; r += blk) attend_block(j, r, r + blk < r1 ? r + blk : r1);
}

Tensor *op_attend_row(Tape *t, Tensor *q, Tensor *k, Tensor *v, float scale, const uint8_t *mask, int mask_rows,
                      Tensor **weights) {
    S2S_ASSERT(q->ndim == 3 && k->ndim == 3 && v->ndim == 3 && q->shape[0] == 1);
    int N = q->shape[1], D = q->shape[2], S = k->shape[0];
    S2S_ASSERT(k->shape[1] == N && k->shape[2] == D && v->shape[0] == S && v->shape[1] == N && v->shape[2] == D);
    S2S_ASSERT(!tape_wants(t, q, k, v)); /* decoding only: no backward */
    int per = 1;
    if (mask) {
        S2S_ASSERT(mask_rows > 0 && N % mask_rows == 0);
        per = N / mask_rows;
    }
    Tensor *sc = tape_tensor2(t, N, S), *p = tape_tensor3(t, N, 1, S), *ctx = tape_tensor3(t, 1, N, D);
    t->flops += 4.0 * N * S * D;
    AttendJob j = {q->data, k->data, v->data, mask, sc->data, p->data, ctx->data, N, S, D, per, scale};
    par_for((size_t)N, (size_t)S * D * 2, attend_rows, &j);
    if (weights) *weights = p;
    return ctx;
}
