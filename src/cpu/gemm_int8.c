/* gemm_int8.c — int8 products against frozen weights (activations quantised per row at run
 * time, sums exact in int32, on oneDNN or gemm_q8), and the screens greedy decoding bounds
 * its errors with (gemm_frozen_screen: the products and the weights' row norms). */
#include "gemm_impl.h"
#include "s2s/par.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- int8: frozen weights quantised per column, activations per row, at run time ---- */

typedef struct Int8Job {
    const float *A;
    int lda, K, N, ldc;
    int amax, off, ldq; /* activations to ±amax, stored + off in rows ldq apart (zero past K) */
    uint8_t *qa;        /* (M, ldq): round(a / scale) + off */
    float *sa;   /* (M) row scales */
    const int32_t *acc; /* the sums of rows acc_r0 … */
    size_t acc_r0;
    const Pack *pk; /* its scales and column sums */
    float alpha, beta;
    const float *bias; /* (N) added to every row, or NULL */
    float *C;
} Int8Job;

static void int8_quant_rows(void *ctx, size_t r0, size_t r1) {
    Int8Job *j = ctx;
    int K = j->K, off = j->off; /* locals: the stores below could otherwise alias them, and not vectorise */
    float amax = (float)j->amax;
    for (size_t r = r0; r < r1; r++) {
        const float *restrict a = j->A + r * j->lda;
        uint8_t *restrict q = j->qa + r * j->ldq;
        memset(q + K, 0, (size_t)(j->ldq - K));
        uint32_t top = 0; /* max |a| as bits (monotonic for non-negative floats): vectorises */
        for (int k = 0; k < K; k++) {
            uint32_t u;
            memcpy(&u, a + k, sizeof u);
            u &= 0x7fffffffu;
            top = u > top ? u : top;
        }
        if (top >= 0x7f800000u) { /* an Inf or NaN: the row's outputs are NaN, as float32's would be */
            memset(q, off, (size_t)K);
            j->sa[r] = NAN;
            continue;
        }
        float mx;
        memcpy(&mx, &top, sizeof mx);
        float s = mx > 0.0f ? mx / amax : 1.0f, inv = 1.0f / s;
        for (int k = 0; k < K; k++) {
            float v = a[k] * inv; /* |v| <= amax but for rounding at the edge */
            v = v > amax ? amax : v;
            v = v < -amax ? -amax : v;
            v = (v + 12582912.0f) - 12582912.0f; /* to nearest even (1.5 * 2^23), as nearbyintf, but vectorised */
            q[k] = (uint8_t)((int32_t)v + off);
        }
        j->sa[r] = s;
    }
}

/* C = alpha sa[i] sb[j] (acc - off colsum[j]) + beta C (or + bias[j], beta 0): acc holds
 * sum_k (qa + off) qb. */
static void int8_dequant_rows(void *ctx, size_t r0, size_t r1) {
    Int8Job *j = ctx;
    const float *restrict sb = j->pk->scale;
    const int32_t *restrict cs = j->pk->colsum;
    const float *restrict bias = j->bias;
    int N = j->N, off = j->off;
    for (size_t i = r0; i < r1; i++) {
        size_t r = j->acc_r0 + i;
        const int32_t *restrict acc = j->acc + i * N;
        float *restrict c = j->C + r * j->ldc;
        float sr = j->alpha * j->sa[r], beta = j->beta;
        if (bias)
            for (int n = 0; n < N; n++) c[n] = sr * sb[n] * (float)(acc[n] - off * cs[n]) + bias[n];
        else if (beta == 0.0f) /* C may hold garbage */
            for (int n = 0; n < N; n++) c[n] = sr * sb[n] * (float)(acc[n] - off * cs[n]);
        else
            for (int n = 0; n < N; n++) c[n] = sr * sb[n] * (float)(acc[n] - off * cs[n]) + beta * c[n];
    }
}

/* Whether int8 products against op(B) = W^T run on gemm_q8 here: a build with AVX2, on a
 * CPU where oneDNN's kernels have no VNNI (its weights take the same ±63 either way). */
bool gemm_q8_applies(void) { return gemm_q8_available() && gemm_int8_weight_max() == GEMM_Q8_W_MAX; }

/* The activations' quantisation on each int8 path: ±act_max, stored + act_off (u8). */
int gemm_act_max(bool q8) { return q8 ? GEMM_Q8_A_MAX / 2 : 127; }
int gemm_act_off(bool q8) { return q8 ? GEMM_Q8_A_MAX / 2 : 128; }

int gemm_int8_act_max(void) { return gemm_act_max(gemm_q8_applies()); }

/* W (N × K, rows ldb apart) quantised as oneDNN's int8 weights are here (±63 per row) and
 * packed for gemm_q8, once per freeze. */
static Pack *q8_pack_get(GemmPlans *p, const float *W, int ldb, uint64_t stamp, int N, int K) {
    for (int i = 0; i < p->n_packs; i++)
        if (p->packs[i].q8 && p->packs[i].src == W && p->packs[i].stamp == stamp) return &p->packs[i];
    Pack *pk = gemm_pack_slot(p, W, stamp);
    *pk = (Pack){.src = W, .stamp = stamp, .tb = true, .q8 = true, .buf = s2s_xmalloc(gemm_q8_packed_bytes(N, K)),
                 .scale = s2s_xmalloc((size_t)N * sizeof *pk->scale),
                 .colsum = s2s_xmalloc((size_t)N * sizeof *pk->colsum)};
    int8_t *quant = s2s_xmalloc((size_t)N * K);
    gemm_quantise_columns(W, ldb, true, K, N, GEMM_Q8_W_MAX, quant, pk->scale, pk->colsum);
    gemm_q8_pack(quant, N, K, pk->buf);
    free(quant);
    return pk;
}

/* Rows a block whose int32 sums (4N bytes a row) stay within about half a core's L2: all M
 * when they fit in 1 MiB, else a multiple of 16 rows (16 at least). */
static int int8_block_rows(int M, int N) {
    if ((size_t)M * N * 4 <= (1u << 20)) return M;
    int b = (int)((512u << 10) / ((size_t)N * 4)) / 16 * 16;
    b = b < 16 ? 16 : b;
    return b < M ? b : M;
}

/* C = alpha A op(B) + beta C with B a frozen weight: A quantised per row, B per column (s8,
 * packed once per freeze), the product summed exactly in int32, then scaled back here. On
 * gemm_q8 where it applies to op(B) = W^T and the caller does not ask for 8-bit A (fine): A
 * to ±63, stored + 63; else on oneDNN: A to ±127, stored + 128 (the VNNI instructions'
 * operand). The offset times the column's sum is taken back out in scaling back. */
Pack *gemm_int8_run(const GemmCtx *g, PlanKey *k, float alpha, float beta, const float *A, int lda, const float *B, int ldb,
                      uint64_t Bstamp, float *C, int ldc, const float *bias, GemmInt8Sums *raw, bool fine) {
    S2S_ASSERT(!k->ta && k->K <= 65536); /* (qa + 128) qb sums stay inside int32 */
    S2S_ASSERT(!bias || beta == 0.0f);
    GemmPlans *p = gemm_plans_get(g);
    int M = k->M, N = k->N, K = k->K, restore = 0;
    bool q8 = !fine && k->tb && gemm_q8_applies();
    /* the sums of a block of rows turned to floats while they are in the cache: a beam's
     * output layer (320 × 8,361) made 10.7 MB of them a step, written and read back */
    int blk = raw || q8 ? M : int8_block_rows(M, N);
    Int8Job j = {.A = A, .lda = lda, .K = K, .N = N, .ldc = ldc, .alpha = alpha, .beta = beta, .bias = bias, .C = C};
    Plan *pl = NULL;
    Pack *pk;
    if (q8) { /* threads: gemm_q8 splits its columns itself */
        pk = q8_pack_get(p, B, ldb, Bstamp, N, K);
        j.ldq = gemm_q8_lda(K);
    } else {
        restore = gemm_serial_begin(M, N, K);
        k->threads = omp_get_max_threads();
        k->int8 = k->packed = 1;
        k->lda = K; /* the quantised copy */
        k->ldc = N; /* the int32 sums */
        k->M = blk;
        pl = gemm_plan_get(p, k, 1.0f, 0.0f);
        pk = gemm_pack_get(p, pl, B, ldb, Bstamp);
        j.ldq = K;
    }
    j.amax = gemm_act_max(q8), j.off = gemm_act_off(q8);
    j.pk = pk;
    ArenaMark m = arena_mark(g->arena);
    j.qa = arena_alloc(g->arena, (size_t)M * j.ldq);
    j.sa = raw ? raw->row_scale : arena_alloc(g->arena, (size_t)M * sizeof *j.sa);
    int32_t *acc = raw ? raw->sums : arena_alloc(g->arena, (size_t)blk * N * sizeof *acc);
    j.acc = acc;
    /* work per element: two passes and a conversion (quantising), four operations (back):
     * a decoding step's rows then split over the threads, which wait for the GEMM anyway */
    par_for((size_t)M, (size_t)K * 4, int8_quant_rows, &j);
    if (q8) {
        gemm_q8(j.qa, M, K, pk->buf, N, acc, N);
        if (!raw) par_for((size_t)M, (size_t)N * 4, int8_dequant_rows, &j);
    }
    for (int r0 = 0; !q8 && r0 < M; r0 += blk) { /* the sums are exact: any blocking gives the same bits */
        int rows = M - r0 < blk ? M - r0 : blk;
        if (rows != k->M) { /* the last block's own plan, on the same packed weights */
            k->M = rows;
            pl = gemm_plan_get(p, k, 1.0f, 0.0f);
        }
        const Pack *w = rows == blk ? pk : gemm_pack_get(p, pl, B, ldb, Bstamp);
        gemm_plan_execute(g, p, pl, j.qa + (size_t)r0 * j.ldq, w->buf, acc, NULL);
        j.acc_r0 = (size_t)r0;
        if (!raw) par_for((size_t)rows, (size_t)N * 4, int8_dequant_rows, &j);
    }
    k->M = M;
    arena_rewind(g->arena, m);
    gemm_serial_end(restore);
    return pk;
}

void gemm_row_norms(const float *X, int rows, int cols, int ld, float *norm) {
    for (int r = 0; r < rows; r++) /* rounded up, with room for the double sum's own error */
        norm[r] = nextafterf((float)(sqrt(par_sum_sq(X + (size_t)r * ld, (size_t)cols)) * (1.0 + 0x1p-40)), INFINITY);
}

void gemm_row_l1(const float *X, int rows, int cols, int ld, float *l1) {
    for (int r = 0; r < rows; r++) {
        const float *x = X + (size_t)r * ld;
        double part[8] = {0}, sum = 0.0;
        int k = 0;
        for (; k + 8 <= cols; k += 8)
            for (int q = 0; q < 8; q++) part[q] += fabs((double)x[k + q]);
        for (; k < cols; k++) sum += fabs((double)x[k]);
        for (int q = 0; q < 8; q++) sum += part[q];
        l1[r] = nextafterf((float)(sum * (1.0 + 0x1p-40)), INFINITY);
    }
}

GemmScreenCols gemm_frozen_screen(const GemmCtx *g, GemmScreen kind, int M, int N, int K, const float *A, int lda,
                                  const GemmWeight *W, float *C, GemmInt8Sums *raw) {
    S2S_ASSERT(W->frozen && M > 0 && N > 0 && K > 0);
    S2S_ASSERT(kind == GEMM_SCREEN_F32 || kind == GEMM_SCREEN_BF16 || kind == GEMM_SCREEN_INT8);
    S2S_ASSERT(kind == GEMM_SCREEN_INT8 ? raw && raw->sums && raw->row_scale : C != NULL);
    struct timespec t0, t1;
    if (g->stats) clock_gettime(CLOCK_MONOTONIC, &t0);
    Pack *pk = NULL;
    if (kind == GEMM_SCREEN_INT8) { /* any height: the int8 plan packs for its own */
        PlanKey k;
        memset(&k, 0, sizeof k);
        k.M = M, k.N = N, k.K = K, k.lda = lda, k.ldb = K, k.ldc = N, k.tb = 1;
        pk = gemm_int8_run(g, &k, 1.0f, 0.0f, A, lda, W->data, K, W->frozen, NULL, N, NULL, raw, raw->fine);
    } else {
        for (int r0 = 0; r0 < M; r0 += PACK_MAX_ROWS) { /* the packed layout serves plans this tall */
            int m = M - r0 < PACK_MAX_ROWS ? M - r0 : PACK_MAX_ROWS;
            PlanKey k;
            memset(&k, 0, sizeof k);
            k.M = m, k.N = N, k.K = K, k.lda = lda, k.ldb = K, k.ldc = N, k.tb = 1, k.bf16 = kind == GEMM_SCREEN_BF16;
            ArenaMark mk = arena_mark(g->arena);
            const void *a = A + (size_t)r0 * lda;
            if (k.bf16) {
                a = gemm_to_bf16(g, A + (size_t)r0 * lda, m, K, lda);
                k.lda = K;
            }
            pk = gemm_matmul_run(g, &k, 1.0f, 0.0f, a, W->data, W->frozen, C + (size_t)r0 * N, NULL);
            arena_rewind(g->arena, mk);
        }
    }
    if (!pk->norm) { /* once per packed copy: it lives as long as the weight stays frozen */
        pk->norm = s2s_xmalloc((size_t)N * sizeof *pk->norm);
        gemm_row_norms(W->data, N, K, K, pk->norm);
    }
    if (kind == GEMM_SCREEN_INT8 && !pk->l1) {
        pk->l1 = s2s_xmalloc((size_t)N * sizeof *pk->l1);
        gemm_row_l1(W->data, N, K, K, pk->l1);
    }
    *g->flops += 2.0 * M * N * K;
    bool q8 = pk->q8; /* gemm_q8's sums: A in 7 bits */
    if (g->stats) {
        clock_gettime(CLOCK_MONOTONIC, &t1);
        GemmPath path = q8                         ? GEMM_PATH_Q8
                        : kind == GEMM_SCREEN_INT8 ? GEMM_PATH_INT8
                        : kind == GEMM_SCREEN_BF16 ? GEMM_PATH_BF16_PACKED
                                                   : GEMM_PATH_PACKED;
        GemmShapeStat x = {.path = path, .tb = true, .M = M, .N = N, .K = K};
        gemm_stats_add(g->stats, &x, 1, (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    }
    bool q = kind == GEMM_SCREEN_INT8;
    return (GemmScreenCols){pk->norm, q ? pk->l1 : NULL, q ? pk->scale : NULL, q ? pk->colsum : NULL,
                            .zero = gemm_act_off(q8), .act_max = gemm_act_max(q8), .coarse = q8};
}
