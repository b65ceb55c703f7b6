/* gemm.c — oneDNN float32 and bfloat16 matrix products, thread settings (see gemm.h). */
#include "gemm_internal.h"
#include "s2s/bf16.h"
#include "s2s/par.h"

#include <cblas.h>
#if defined(__AVX512F__) || defined(__FMA__)
#include <immintrin.h>
#endif
#include <math.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Exported by libdnnl 2.x but declared only in its test headers: row-major
 * C = alpha op(A) op(B) + beta C with bfloat16 A and B, float32 C and accumulation. */
extern dnnl_status_t dnnl_gemm_bf16bf16f32(char transa, char transb, dnnl_dim_t M, dnnl_dim_t N, dnnl_dim_t K,
                                           float alpha, const uint16_t *A, dnnl_dim_t lda, const uint16_t *B,
                                           dnnl_dim_t ldb, float beta, float *C, dnnl_dim_t ldc);
/* libgomp, oneDNN's threading runtime (declared here: clang has no omp.h without libomp) */
extern void omp_set_num_threads(int n);
extern int omp_get_max_threads(void);

/* Products below this many multiply-adds run on one thread: waking OpenMP's threads costs
 * more than they save, and far more when the cores are busy with other work. */
#define GEMM_SERIAL_MACS (1L << 24)

void gemm_set_threads(int n) {
    if (n <= 0) return;
    openblas_set_num_threads(n);
    omp_set_num_threads(n);
}

/* The ISA values are bit sets, not an order: avx2_vnni (0x407) is above avx512_core_amx (0x3e7). */
static bool cpu_isa_has(dnnl_cpu_isa_t want) {
    return ((unsigned)dnnl_get_effective_cpu_isa() & (unsigned)want) == (unsigned)want;
}

bool gemm_cpu_has_amx(void) { return cpu_isa_has(dnnl_cpu_isa_avx512_core_amx); }

bool gemm_cpu_has_bf16(void) { return cpu_isa_has(dnnl_cpu_isa_avx512_core_bf16); }

/* Without AVX-512 VNNI oneDNN's u8 × s8 kernels add pairs of products in int16 with
 * saturation (vpmaddubsw): 2 · 255 · 127 overflows it, 2 · 255 · 63 does not. AVX2 VNNI is
 * counted as without: whether oneDNN's GEMM uses it there is not something we can see. */
int gemm_int8_weight_max(void) { return cpu_isa_has(dnnl_cpu_isa_avx512_core_vnni) ? 127 : 63; }

const char *gemm_openblas_core(void) {
    const char *core = openblas_get_corename();
    return core ? core : "unknown";
}

S2sStatus gemm_bf16_check(const char *what, S2sError *err) {
    enum { N = 8 };
    uint16_t a[N * N], b[N * N];
    float ones[N * N], c[N * N];
    for (int i = 0; i < N * N; i++) ones[i] = 1.0f;
    bf16_from_f32(ones, a, N * N);
    bf16_from_f32(ones, b, N * N);
    dnnl_status_t s = dnnl_gemm_bf16bf16f32('N', 'N', N, N, N, 1.0f, a, N, b, N, 0.0f, c, N);
    if (s != dnnl_success || c[0] != (float)N || c[N * N - 1] != (float)N)
        return s2s_fail(err, S2S_ERR_CONFIG, "%s: oneDNN cannot run bfloat16 GEMMs on this CPU (status %d); use \"fp32\"",
                        what, (int)s);
    return S2S_OK;
}

typedef struct Bf16Job {
    const float *x;
    uint16_t *y;
    size_t cols, ld;
} Bf16Job;

static void bf16_rows(void *ctx, size_t r0, size_t r1) {
    const Bf16Job *j = ctx;
    if (j->ld == j->cols) {
        bf16_from_f32(j->x + r0 * j->ld, j->y + r0 * j->cols, (r1 - r0) * j->cols);
        return;
    }
    for (size_t r = r0; r < r1; r++) bf16_from_f32(j->x + r * j->ld, j->y + r * j->cols, j->cols);
}

/* The stored matrix behind op(X) (rows × cols with leading dimension ld), packed into bf16,
 * split over the threads (large operands: a step rounds tens of millions of values). */
static const uint16_t *to_bf16(Tape *t, const float *x, int rows, int cols, int ld) {
    uint16_t *y = arena_alloc(&t->arena, (size_t)rows * cols * sizeof *y);
    Bf16Job j = {x, y, (size_t)cols, (size_t)ld};
    par_for((size_t)rows, (size_t)cols, bf16_rows, &j);
    return y;
}

/* A product this small runs on one thread (GEMM_SERIAL_MACS): returns the thread count to
 * give back to serial_end, or 0 when nothing changed. */
static int serial_begin(int M, int N, int K) {
    int threads = omp_get_max_threads();
    if (threads <= 1 || (long)M * N * K >= GEMM_SERIAL_MACS) return 0;
    omp_set_num_threads(1);
    return threads;
}

static void serial_end(int restore) {
    if (restore) omp_set_num_threads(restore);
}

/* Runs one oneDNN GEMM call, on one thread when it is small. */
#define GEMM_ONEDNN(M, N, K, call)                                                     \
    do {                                                                               \
        int restore_ = serial_begin((M), (N), (K));                                    \
        dnnl_status_t s_ = (call);                                                     \
        serial_end(restore_);                                                          \
        S2S_ASSERT(s_ == dnnl_success); /* shapes and strides are the caller's bugs */ \
    } while (0)

/* ---- matmul primitives, cached per shape (GemmPlans) ---- */

#define PLAN_BUCKETS 128
#define PLAN_MAX 512 /* then the cache starts again: a primitive is ~1 ms to make */
#define PACK_MAX 64  /* packed weights kept (each a weight in one layout); oldest goes first */

typedef struct PlanKey { /* zeroed before filling: hashed and compared as bytes */
    int M, N, K, lda, ldb, ldc, threads;
    uint32_t alpha, beta; /* bit patterns */
    uint8_t bf16, ta, tb, packed, int8; /* int8: u8 A, s8 packed B, int32 C, no alpha/beta */
    uint8_t bias;                       /* + a float32 bias row (1, N) */
} PlanKey;

typedef struct Plan {
    struct Plan *next;
    PlanKey key;
    dnnl_primitive_t prim;
    dnnl_memory_t a, b, c, scratch, bias; /* handles set per call (bias: NULL without) */
    dnnl_memory_desc_t w_md;        /* the weights' layout (blocked when packed) */
    size_t scratch_bytes;
} Plan;

typedef struct Pack {
    const float *src; /* the weight's float32 data */
    uint64_t stamp;   /* its Tensor.frozen when packed */
    bool tb;          /* packed from op(W) = W^T (another matrix than W, even when square) */
    bool q8;          /* in gemm_q8's layout (md unused), else in md's */
    dnnl_memory_desc_t md;
    void *buf;
    float *scale;    /* int8: per column of op(B), max |column| / gemm_int8_weight_max() */
    float *norm;     /* a screen's: per column of op(B), its 2-norm rounded up (gemm_frozen_screen) */
    float *l1;       /* an int8 screen's: per column of op(B), its 1-norm rounded up */
    int32_t *colsum; /* int8: per column, the sum of its quantised values */
} Pack;

struct GemmPlans {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    Plan *bucket[PLAN_BUCKETS];
    int n_plans;
    Pack packs[PACK_MAX];
    int n_packs, next_pack; /* next_pack: the slot replaced when all are used */
};

#define DNNL_OK(call) S2S_ASSERT((call) == dnnl_success) /* shapes and strides are the caller's bugs */

static GemmPlans *plans_get(Tape *t) {
    if (t->gemm_plans) return t->gemm_plans;
    GemmPlans *p = s2s_xcalloc(1, sizeof *p);
    DNNL_OK(dnnl_engine_create(&p->engine, dnnl_cpu, 0));
    DNNL_OK(dnnl_stream_create(&p->stream, p->engine, dnnl_stream_default_flags));
    return t->gemm_plans = p;
}

static void plan_destroy(Plan *pl) {
    dnnl_memory_destroy(pl->a);
    dnnl_memory_destroy(pl->b);
    dnnl_memory_destroy(pl->c);
    dnnl_memory_destroy(pl->scratch);
    if (pl->bias) dnnl_memory_destroy(pl->bias);
    dnnl_primitive_destroy(pl->prim);
    free(pl);
}

static void plans_clear(GemmPlans *p) {
    for (int i = 0; i < PLAN_BUCKETS; i++) {
        for (Plan *pl = p->bucket[i], *next; pl; pl = next) {
            next = pl->next;
            plan_destroy(pl);
        }
        p->bucket[i] = NULL;
    }
    p->n_plans = 0;
}

void gemm_plans_free(GemmPlans *p) {
    if (!p) return;
    plans_clear(p);
    for (int i = 0; i < p->n_packs; i++) {
        free(p->packs[i].buf);
        free(p->packs[i].scale);
        free(p->packs[i].colsum);
        free(p->packs[i].norm);
        free(p->packs[i].l1);
    }
    dnnl_stream_destroy(p->stream);
    dnnl_engine_destroy(p->engine);
    free(p);
}

static uint32_t key_hash(const PlanKey *k) {
    const unsigned char *b = (const unsigned char *)k;
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < sizeof *k; i++) h = (h ^ b[i]) * 16777619u;
    return h;
}

/* A row-major rows × cols matrix stored at leading dimension ld, or its transpose's storage. */
static void md_2d(dnnl_memory_desc_t *md, int rows, int cols, bool trans, int ld, dnnl_data_type_t dt) {
    dnnl_dims_t dims = {rows, cols}, strides = {trans ? 1 : ld, trans ? ld : 1};
    DNNL_OK(dnnl_memory_desc_init_by_strides(md, 2, dims, dt, strides));
}

static Plan *plan_make(GemmPlans *p, const PlanKey *k, float alpha, float beta) {
    dnnl_data_type_t dt = k->int8 ? dnnl_s8 : k->bf16 ? dnnl_bf16 : dnnl_f32;
    dnnl_memory_desc_t a_md, b_md, c_md;
    md_2d(&a_md, k->M, k->K, k->ta, k->lda, k->int8 ? dnnl_u8 : dt);
    if (k->packed) {
        dnnl_dims_t dims = {k->K, k->N};
        DNNL_OK(dnnl_memory_desc_init_by_tag(&b_md, 2, dims, dt, dnnl_format_tag_any));
    } else {
        md_2d(&b_md, k->K, k->N, k->tb, k->ldb, dt);
    }
    md_2d(&c_md, k->M, k->N, false, k->ldc, k->int8 ? dnnl_s32 : dnnl_f32);
    dnnl_memory_desc_t bias_md;
    if (k->bias) md_2d(&bias_md, 1, k->N, false, k->N, dnnl_f32);
    dnnl_matmul_desc_t desc;
    DNNL_OK(dnnl_matmul_desc_init(&desc, &a_md, &b_md, k->bias ? &bias_md : NULL, &c_md));
    dnnl_primitive_attr_t attr;
    DNNL_OK(dnnl_primitive_attr_create(&attr));
    DNNL_OK(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user)); /* from the arena */
    if (alpha != 1.0f) DNNL_OK(dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha));
    if (beta != 0.0f) { /* C = alpha AB + beta C */
        dnnl_post_ops_t po;
        DNNL_OK(dnnl_post_ops_create(&po));
        DNNL_OK(dnnl_post_ops_append_sum(po, beta));
        DNNL_OK(dnnl_primitive_attr_set_post_ops(attr, po));
        dnnl_post_ops_destroy(po);
    }
    dnnl_primitive_desc_t pd;
    DNNL_OK(dnnl_primitive_desc_create(&pd, &desc, attr, p->engine, NULL));
    dnnl_primitive_attr_destroy(attr);
    Plan *pl = s2s_xcalloc(1, sizeof *pl);
    pl->key = *k;
    pl->w_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *s_md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    pl->scratch_bytes = dnnl_memory_desc_get_size(s_md);
    DNNL_OK(dnnl_primitive_create(&pl->prim, pd));
    DNNL_OK(dnnl_memory_create(&pl->a, &a_md, p->engine, DNNL_MEMORY_NONE));
    DNNL_OK(dnnl_memory_create(&pl->b, &pl->w_md, p->engine, DNNL_MEMORY_NONE));
    DNNL_OK(dnnl_memory_create(&pl->c, &c_md, p->engine, DNNL_MEMORY_NONE));
    DNNL_OK(dnnl_memory_create(&pl->scratch, s_md, p->engine, DNNL_MEMORY_NONE));
    if (k->bias) DNNL_OK(dnnl_memory_create(&pl->bias, &bias_md, p->engine, DNNL_MEMORY_NONE));
    dnnl_primitive_desc_destroy(pd);
    return pl;
}

static Plan *plan_get(GemmPlans *p, const PlanKey *k, float alpha, float beta) {
    uint32_t h = key_hash(k) % PLAN_BUCKETS;
    for (Plan *pl = p->bucket[h]; pl; pl = pl->next)
        if (!memcmp(&pl->key, k, sizeof *k)) return pl;
    if (p->n_plans >= PLAN_MAX) plans_clear(p); /* the same shapes make the same kernels again */
    Plan *pl = plan_make(p, k, alpha, beta);
    pl->next = p->bucket[h];
    p->bucket[h] = pl;
    p->n_plans++;
    return pl;
}

/* A slot for a new packed copy of B: a stale copy's (B changed since), a free one, or the
 * oldest; emptied. */
static Pack *pack_slot(GemmPlans *p, const float *B, uint64_t stamp) {
    Pack *q = NULL;
    for (int i = 0; i < p->n_packs && !q; i++) /* a stale copy of this weight (it changed since) */
        if (p->packs[i].src == B && p->packs[i].stamp != stamp) q = &p->packs[i];
    if (!q && p->n_packs < PACK_MAX) q = &p->packs[p->n_packs++];
    if (!q) {
        q = &p->packs[p->next_pack];
        p->next_pack = (p->next_pack + 1) % PACK_MAX;
    }
    free(q->buf);
    free(q->scale);
    free(q->colsum);
    free(q->norm);
    free(q->l1);
    memset(q, 0, sizeof *q);
    return q;
}

/* op(B) (K × N, B stored with ldb) quantised per column into quant, in op(B)'s own strides
 * (N × K when tb, else K × N): scale = max |column| / top, values rounded to nearest even
 * and clamped to ±top, and each column's sum of them. */
static void int8_quantise_columns(const float *B, int ldb, bool tb, int K, int N, int top, int8_t *quant, float *scale,
                                  int32_t *colsum) {
    for (int n = 0; n < N; n++) {
        size_t step = tb ? 1 : (size_t)ldb, at = tb ? (size_t)n * ldb : (size_t)n; /* op(B)[k, n] = B[at + k step] */
        size_t qstep = tb ? 1 : (size_t)N, qat = tb ? (size_t)n * K : (size_t)n;
        float mx = 0.0f;
        for (int kk = 0; kk < K; kk++) mx = fmaxf(mx, fabsf(B[at + kk * step]));
        float s = mx > 0.0f ? mx / (float)top : 1.0f, inv = 1.0f / s;
        int32_t sum = 0;
        for (int kk = 0; kk < K; kk++) {
            int v = (int)nearbyintf(B[at + kk * step] * inv);
            v = v > top ? top : v < -top ? -top : v;
            quant[qat + kk * qstep] = (int8_t)v;
            sum += v;
        }
        scale[n] = s;
        colsum[n] = sum;
    }
}

/* The weight B (op(B) is K × N, stored with ldb) in the plan's packed layout: made by one
 * reorder (float32 to the plan's type) the first time, then kept while the weight stays frozen. */
static Pack *pack_get(GemmPlans *p, const Plan *pl, const float *B, int ldb, uint64_t stamp) {
    bool tb = pl->key.tb;
    for (int i = 0; i < p->n_packs; i++) {
        Pack *q = &p->packs[i];
        if (q->src == B && q->stamp == stamp && q->tb == tb && !q->q8 && dnnl_memory_desc_equal(&q->md, &pl->w_md))
            return q;
    }
    Pack *q = pack_slot(p, B, stamp);
    size_t bytes = dnnl_memory_desc_get_size(&pl->w_md);
    *q = (Pack){.src = B, .stamp = stamp, .tb = tb, .md = pl->w_md, .buf = s2s_xmalloc(bytes)};
    dnnl_memory_desc_t src_md;
    const void *src = B;
    int8_t *quant = NULL;
    if (pl->key.int8) { /* quantised per column of op(B) first, into op(B)'s own strides */
        int K = pl->key.K, N = pl->key.N;
        quant = s2s_xmalloc((size_t)K * N);
        q->scale = s2s_xmalloc((size_t)N * sizeof *q->scale);
        q->colsum = s2s_xmalloc((size_t)N * sizeof *q->colsum);
        int8_quantise_columns(B, ldb, tb, K, N, gemm_int8_weight_max(), quant, q->scale, q->colsum);
        md_2d(&src_md, K, N, tb, tb ? K : N, dnnl_s8);
        src = quant;
    } else {
        md_2d(&src_md, pl->key.K, pl->key.N, tb, ldb, dnnl_f32);
    }
    dnnl_primitive_desc_t rpd;
    dnnl_primitive_t r;
    dnnl_memory_t from, to;
    DNNL_OK(dnnl_reorder_primitive_desc_create(&rpd, &src_md, p->engine, &pl->w_md, p->engine, NULL));
    DNNL_OK(dnnl_primitive_create(&r, rpd));
    DNNL_OK(dnnl_memory_create(&from, &src_md, p->engine, (void *)src));
    DNNL_OK(dnnl_memory_create(&to, &pl->w_md, p->engine, q->buf));
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    DNNL_OK(dnnl_primitive_execute(r, p->stream, 2, args));
    DNNL_OK(dnnl_stream_wait(p->stream));
    dnnl_memory_destroy(from);
    dnnl_memory_destroy(to);
    dnnl_primitive_destroy(r);
    dnnl_primitive_desc_destroy(rpd);
    free(quant);
    return q;
}

/* Executes a plan on these operands (bias: the plan's, or NULL), its scratchpad borrowed
 * from the arena. */
static void plan_execute(Tape *t, GemmPlans *p, const Plan *pl, const void *A, const void *B, void *C, const float *bias) {
    S2S_ASSERT(!pl->key.bias == !bias);
    ArenaMark m = arena_mark(&t->arena);
    void *scratch = pl->scratch_bytes ? arena_alloc(&t->arena, pl->scratch_bytes) : NULL;
    DNNL_OK(dnnl_memory_set_data_handle(pl->a, (void *)A));
    DNNL_OK(dnnl_memory_set_data_handle(pl->b, (void *)B));
    DNNL_OK(dnnl_memory_set_data_handle(pl->c, C));
    DNNL_OK(dnnl_memory_set_data_handle(pl->scratch, scratch));
    dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, pl->a}, {DNNL_ARG_WEIGHTS, pl->b}, {DNNL_ARG_DST, pl->c},
                               {DNNL_ARG_SCRATCHPAD, pl->scratch}, {DNNL_ARG_BIAS, pl->bias}};
    if (bias) DNNL_OK(dnnl_memory_set_data_handle(pl->bias, (void *)bias));
    DNNL_OK(dnnl_primitive_execute(pl->prim, p->stream, bias ? 5 : 4, args));
    DNNL_OK(dnnl_stream_wait(p->stream));
    arena_rewind(&t->arena, m);
}

/* One product through a cached matmul primitive. A and B are bf16 (packed as the key says)
 * when key.bf16, else float32; B is the float32 weight (packed here) when Bstamp != 0; bias:
 * a row added to every row of the product (alpha 1), or NULL. */
static Pack *matmul_run(Tape *t, PlanKey *k, float alpha, float beta, const void *A, const void *B, uint64_t Bstamp,
                       float *C, const float *bias) {
    S2S_ASSERT(!bias || alpha == 1.0f);
    GemmPlans *p = plans_get(t);
    int restore = serial_begin(k->M, k->N, k->K);
    k->threads = omp_get_max_threads(); /* some kernels are made for a thread count */
    k->packed = Bstamp != 0;
    k->bias = bias != NULL;
    memcpy(&k->alpha, &alpha, sizeof alpha);
    memcpy(&k->beta, &beta, sizeof beta);
    Plan *pl = plan_get(p, k, alpha, beta);
    Pack *pk = NULL;
    if (Bstamp) {
        pk = pack_get(p, pl, B, k->ldb, Bstamp);
        B = pk->buf;
    }
    plan_execute(t, p, pl, A, B, C, bias);
    serial_end(restore);
    return pk;
}

/* ---- int8: frozen weights quantised per column, activations per row, at run time ---- */

typedef struct Int8Job {
    const float *A;
    int lda, K, N, ldc;
    int amax, off, ldq; /* activations to ±amax, stored + off in rows ldq apart (zero past K) */
    uint8_t *qa;        /* (M, ldq): round(a / scale) + off */
    float *sa;   /* (M) row scales */
    const int32_t *acc;
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
    for (size_t r = r0; r < r1; r++) {
        const int32_t *restrict acc = j->acc + r * N;
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
static bool q8_applies(void) { return gemm_q8_available() && gemm_int8_weight_max() == GEMM_Q8_W_MAX; }

/* The activations' quantisation on each int8 path: ±act_max, stored + act_off (u8). */
static int int8_act_max(bool q8) { return q8 ? GEMM_Q8_A_MAX / 2 : 127; }
static int int8_act_off(bool q8) { return q8 ? GEMM_Q8_A_MAX / 2 : 128; }

int gemm_int8_act_max(void) { return int8_act_max(q8_applies()); }

/* W (N × K, rows ldb apart) quantised as oneDNN's int8 weights are here (±63 per row) and
 * packed for gemm_q8, once per freeze. */
static Pack *q8_pack_get(GemmPlans *p, const float *W, int ldb, uint64_t stamp, int N, int K) {
    for (int i = 0; i < p->n_packs; i++)
        if (p->packs[i].q8 && p->packs[i].src == W && p->packs[i].stamp == stamp) return &p->packs[i];
    Pack *pk = pack_slot(p, W, stamp);
    *pk = (Pack){.src = W, .stamp = stamp, .tb = true, .q8 = true, .buf = s2s_xmalloc(gemm_q8_packed_bytes(N, K)),
                 .scale = s2s_xmalloc((size_t)N * sizeof *pk->scale),
                 .colsum = s2s_xmalloc((size_t)N * sizeof *pk->colsum)};
    int8_t *quant = s2s_xmalloc((size_t)N * K);
    int8_quantise_columns(W, ldb, true, K, N, GEMM_Q8_W_MAX, quant, pk->scale, pk->colsum);
    gemm_q8_pack(quant, N, K, pk->buf);
    free(quant);
    return pk;
}

/* C = alpha A op(B) + beta C with B a frozen weight: A quantised per row, B per column (s8,
 * packed once per freeze), the product summed exactly in int32, then scaled back here. On
 * gemm_q8 where it applies to op(B) = W^T and the caller does not ask for 8-bit A (fine): A
 * to ±63, stored + 63; else on oneDNN: A to ±127, stored + 128 (the VNNI instructions'
 * operand). The offset times the column's sum is taken back out in scaling back. */
static Pack *int8_run(Tape *t, PlanKey *k, float alpha, float beta, const float *A, int lda, const float *B, int ldb,
                      uint64_t Bstamp, float *C, int ldc, const float *bias, GemmInt8Sums *raw, bool fine) {
    S2S_ASSERT(!k->ta && k->K <= 65536); /* (qa + 128) qb sums stay inside int32 */
    S2S_ASSERT(!bias || beta == 0.0f);
    GemmPlans *p = plans_get(t);
    int M = k->M, N = k->N, K = k->K, restore = 0;
    bool q8 = !fine && k->tb && q8_applies();
    Int8Job j = {.A = A, .lda = lda, .K = K, .N = N, .ldc = ldc, .alpha = alpha, .beta = beta, .bias = bias, .C = C};
    Plan *pl = NULL;
    Pack *pk;
    if (q8) { /* threads: gemm_q8 splits its columns itself */
        pk = q8_pack_get(p, B, ldb, Bstamp, N, K);
        j.ldq = gemm_q8_lda(K);
    } else {
        restore = serial_begin(M, N, K);
        k->threads = omp_get_max_threads();
        k->int8 = k->packed = 1;
        k->lda = K; /* the quantised copy */
        k->ldc = N; /* the int32 sums */
        pl = plan_get(p, k, 1.0f, 0.0f);
        pk = pack_get(p, pl, B, ldb, Bstamp);
        j.ldq = K;
    }
    j.amax = int8_act_max(q8), j.off = int8_act_off(q8);
    j.pk = pk;
    ArenaMark m = arena_mark(&t->arena);
    j.qa = arena_alloc(&t->arena, (size_t)M * j.ldq);
    j.sa = raw ? raw->row_scale : arena_alloc(&t->arena, (size_t)M * sizeof *j.sa);
    int32_t *acc = raw ? raw->sums : arena_alloc(&t->arena, (size_t)M * N * sizeof *acc);
    j.acc = acc;
    /* work per element: two passes and a conversion (quantising), four operations (back):
     * a decoding step's rows then split over the threads, which wait for the GEMM anyway */
    par_for((size_t)M, (size_t)K * 4, int8_quant_rows, &j);
    if (q8)
        gemm_q8(j.qa, M, K, pk->buf, N, acc, N);
    else
        plan_execute(t, p, pl, j.qa, pk->buf, acc, NULL);
    if (!raw) par_for((size_t)M, (size_t)N * 4, int8_dequant_rows, &j);
    arena_rewind(&t->arena, m);
    serial_end(restore);
    return pk;
}

void gemm_f32_onednn(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                     int ldb, float beta, float *C, int ldc) {
    GEMM_ONEDNN(M, N, K, dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc));
}

/* One dot in gemm_dots's order, a's values inc apart (a one-row A transposed is a column):
 * 16 partial sums so the loop vectorises. */
static inline float dot1(int K, const float *restrict a, size_t inc, const float *restrict b) {
    float part[16] = {0}, sum = 0.0f;
    int k = 0;
    for (; k + 16 <= K; k += 16)
        for (int q = 0; q < 16; q++) part[q] += a[(size_t)(k + q) * inc] * b[k + q];
    for (; k < K; k++) sum += a[(size_t)k * inc] * b[k];
    for (int q = 0; q < 16; q++) sum += part[q];
    return sum;
}

/* Four dots, each summed as dot1 sums it: four independent chains of adds where one dot
 * waits on its own, and a loaded once for the four. */
static inline void dot4(int K, const float *restrict a, const float *restrict b0, const float *restrict b1,
                        const float *restrict b2, const float *restrict b3, float *out) {
    float p0[16] = {0}, p1[16] = {0}, p2[16] = {0}, p3[16] = {0};
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
    int k = 0;
    for (; k + 16 <= K; k += 16)
        for (int q = 0; q < 16; q++) {
            float x = a[k + q];
            p0[q] += x * b0[k + q];
            p1[q] += x * b1[k + q];
            p2[q] += x * b2[k + q];
            p3[q] += x * b3[k + q];
        }
    for (; k < K; k++) {
        float x = a[k];
        s0 += x * b0[k], s1 += x * b1[k], s2 += x * b2[k], s3 += x * b3[k];
    }
    for (int q = 0; q < 16; q++) s0 += p0[q], s1 += p1[q], s2 += p2[q], s3 += p3[q];
    out[0] = s0, out[1] = s1, out[2] = s2, out[3] = s3;
}

void gemm_dots(int K, const float *a, const float *const *b, int n, float *out) {
    int i = 0;
    for (; i + 4 <= n; i += 4) dot4(K, a, b[i], b[i + 1], b[i + 2], b[i + 3], out + i);
    for (; i < n; i++) out[i] = dot1(K, a, 1, b[i]);
}

void gemm_row(bool ta, bool tb, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb, float beta,
              float *C) {
    size_t inc = ta ? (size_t)lda : 1; /* a transposed one-row A is a column of its stored matrix */
    if (tb && inc == 1) { /* C[j] = a · B[j, :], four rows of B at a time */
        for (int j = 0; j < N; j += 4) {
            int n = N - j < 4 ? N - j : 4;
            const float *rows[4];
            float dots[4];
            for (int i = 0; i < n; i++) rows[i] = B + (size_t)(j + i) * ldb;
            gemm_dots(K, A, rows, n, dots);
            for (int i = 0; i < n; i++)
                C[j + i] = alpha * dots[i] + (beta == 0.0f ? 0.0f : beta * C[j + i]); /* beta 0: C may hold NaN */
        }
        return;
    }
    if (tb) { /* the same sums with A strided */
        for (int j = 0; j < N; j++)
            C[j] = alpha * dot1(K, A, inc, B + (size_t)j * ldb) + (beta == 0.0f ? 0.0f : beta * C[j]);
        return;
    }
    enum { CHUNK = 256 }; /* C = sum_k a[k] B[k, :], rows of B added in order, a chunk of columns at a time */
    for (int j0 = 0; j0 < N; j0 += CHUNK) {
        int n = N - j0 < CHUNK ? N - j0 : CHUNK;
        float acc[CHUNK] = {0};
        for (int k = 0; k < K; k++) {
            const float *b = B + (size_t)k * ldb + j0;
            float ak = A[(size_t)k * inc];
            for (int j = 0; j < n; j++) acc[j] += ak * b[j];
        }
        for (int j = 0; j < n; j++) C[j0 + j] = alpha * acc[j] + (beta == 0.0f ? 0.0f : beta * C[j0 + j]);
    }
}

/* Products at most this tall multiply a frozen weight in the layout its kernel wants (packed
 * once per freeze): decoding steps and recurrent steps, where the GEMM call repacks the
 * weight every time. Taller ones (a whole sequence's output layer) pack as they go anyway. */
#define PACK_MAX_ROWS 1024

static bool frozen_weight(const Tensor *Bw, const float *B, bool ta, int M) {
    if (!Bw || !Bw->frozen || ta || M > PACK_MAX_ROWS) return false;
    S2S_ASSERT(B == Bw->data);
    return true;
}

bool gemm_int8_applies(const Tape *t, const Tensor *Bw, int N) {
    return t->int8 && Bw && Bw->frozen && N >= GEMM_BF16_MIN_SIDE;
}

typedef struct BiasFill {
    float *C;
    const float *bias;
    int N, ldc;
} BiasFill;

static void bias_fill_rows(void *ctx, size_t r0, size_t r1) {
    const BiasFill *j = ctx;
    for (size_t r = r0; r < r1; r++) memcpy(j->C + r * j->ldc, j->bias, (size_t)j->N * sizeof *j->C);
}

/* For a path without a bias in its epilogue: every row of C starts as the bias, and the
 * product adds to it (the beta to use then). */
static float bias_first(const float *bias, float *C, int M, int N, int ldc, float beta) {
    if (!bias) return beta;
    BiasFill j = {C, bias, N, ldc};
    par_for((size_t)M, (size_t)N, bias_fill_rows, &j);
    return 1.0f;
}

/* The product (M, N, K > 0) by the back end the rules pick; returns that back end's name.
 * bias (alpha 1, beta 0): in the epilogue of the int8 and matmul paths, else C first. */
static GemmPath gemm_dispatch(Tape *t, bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda,
                              const uint16_t *Abf, const float *B, int ldb, const uint16_t *Bbf, const Tensor *Bw,
                              float beta, float *C, int ldc, const float *bias) {
    S2S_ASSERT(!bias || (alpha == 1.0f && beta == 0.0f));
    if (Bw && Bw->frozen && !ta && M > PACK_MAX_ROWS) { /* a frozen weight's rows in pieces its packed
                                                         * plans serve: every row through one kernel */
        GemmPath path = GEMM_PATH_PACKED;
        for (int r0 = 0; r0 < M; r0 += PACK_MAX_ROWS) {
            int m = M - r0 < PACK_MAX_ROWS ? M - r0 : PACK_MAX_ROWS;
            path = gemm_dispatch(t, ta, tb, m, N, K, alpha, A + (size_t)r0 * lda, lda, Abf ? Abf + (size_t)r0 * lda : NULL,
                                 B, ldb, Bbf, Bw, beta, C + (size_t)r0 * ldc, ldc, bias);
        }
        return path;
    }
    PlanKey k;
    memset(&k, 0, sizeof k);
    k.M = M, k.N = N, k.K = K, k.lda = lda, k.ldb = ldb, k.ldc = ldc, k.ta = ta, k.tb = tb;
    if (!ta && gemm_int8_applies(t, Bw, N)) {
        S2S_ASSERT(B == Bw->data);
        const Pack *pk = int8_run(t, &k, alpha, beta, A, lda, B, ldb, Bw->frozen, C, ldc, bias, NULL, false);
        return pk->q8 ? GEMM_PATH_Q8 : GEMM_PATH_INT8;
    }
    bool frozen = frozen_weight(Bw, B, ta, M);
    if (gemm_bf16_takes(t, M, N, Bw != NULL)) {
        GemmPath path = GEMM_PATH_BF16_PACKED;
        ArenaMark m = arena_mark(&t->arena);
        if (!Abf) {
            Abf = to_bf16(t, A, ta ? K : M, ta ? M : K, lda);
            k.lda = lda = ta ? M : K;
        }
        k.bf16 = 1;
        if (frozen) { /* packed from the float32 weight, rounded by the reorder */
            matmul_run(t, &k, alpha, beta, Abf, B, Bw->frozen, C, bias);
        } else {
            if (!Bbf) {
                Bbf = to_bf16(t, B, tb ? N : K, tb ? K : N, ldb);
                k.ldb = ldb = tb ? K : N;
            }
            if (t->bf16_matmul) { /* only the matmul primitive reaches AMX in oneDNN 2.x */
                matmul_run(t, &k, alpha, beta, Abf, Bbf, 0, C, bias);
                path = GEMM_PATH_BF16_MATMUL;
            } else { /* gemm_bf16_check ran before any tape turned bf16 on */
                beta = bias_first(bias, C, M, N, ldc, beta);
                GEMM_ONEDNN(M, N, K, dnnl_gemm_bf16bf16f32(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, Abf, lda, Bbf,
                                                          ldb, beta, C, ldc));
                path = GEMM_PATH_BF16_GEMM;
            }
        }
        arena_rewind(&t->arena, m);
        return path;
    }
    if (M == 1 && !frozen) { /* a row times a matrix (one decoding step's attention): a GEMM's
                              * packing, or waking BLAS threads for it, would cost more than the
                              * product; a frozen weight is packed already, and one row of it goes
                              * through the same kernel as many (a sentence decodes as in a batch) */
        gemm_row(ta, tb, N, K, alpha, A, lda, B, ldb, bias_first(bias, C, M, N, ldc, beta), C);
        return GEMM_PATH_ROW;
    }
    if (t->openblas) {
        beta = bias_first(bias, C, M, N, ldc, beta);
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A,
                    lda, B, ldb, beta, C, ldc);
        return GEMM_PATH_OPENBLAS;
    }
    /* dnnl_sgemm repacks a transposed B on every call: thin products against one go faster
     * through the matmul primitive, and faster still with a frozen weight packed once */
    if (frozen || (tb && !ta && M <= PACK_MAX_ROWS)) {
        matmul_run(t, &k, alpha, beta, A, B, frozen ? Bw->frozen : 0, C, bias);
        return frozen ? GEMM_PATH_PACKED : GEMM_PATH_MATMUL;
    }
    gemm_f32_onednn(ta, tb, M, N, K, alpha, A, lda, B, ldb, bias_first(bias, C, M, N, ldc, beta), C, ldc);
    return GEMM_PATH_SGEMM;
}

const char *const GEMM_PATH_NAMES[GEMM_PATH_COUNT] = {
    "row",         "sgemm",       "openblas", "matmul", "matmul_packed", "bf16_gemm",
    "bf16_matmul", "bf16_packed", "int8",     "small",  "q8"};

static void stats_add(GemmStats *st, const GemmShapeStat *x, long calls, double seconds) {
    for (int i = 0; i < st->n; i++) {
        GemmShapeStat *s = &st->items[i];
        if (s->path == x->path && s->ta == x->ta && s->tb == x->tb && s->M == x->M && s->N == x->N && s->K == x->K) {
            s->calls += calls;
            s->seconds += seconds;
            return;
        }
    }
    if (st->n == st->cap) {
        st->cap = st->cap ? 2 * st->cap : 64;
        st->items = s2s_xrealloc(st->items, (size_t)st->cap * sizeof *st->items);
    }
    st->items[st->n] = *x;
    st->items[st->n].calls = calls;
    st->items[st->n].seconds = seconds;
    st->n++;
}

void gemm_stats_free(GemmStats *st) {
    free(st->items);
    memset(st, 0, sizeof *st);
}

static void gemm_pre(Tape *t, bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda,
                     const uint16_t *Abf, const float *B, int ldb, const uint16_t *Bbf, const Tensor *Bw, float beta,
                     float *C, int ldc, const float *bias) {
    if (M == 0 || N == 0) return;
    t->flops += 2.0 * M * N * K;
    if (K == 0) { /* BLAS would still scale C by beta; keep that contract explicit */
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++)
                C[(size_t)i * ldc + j] = bias ? bias[j] : beta == 0.0f ? 0.0f : beta * C[(size_t)i * ldc + j];
        return;
    }
    if (!t->gemm_stats) {
        gemm_dispatch(t, ta, tb, M, N, K, alpha, A, lda, Abf, B, ldb, Bbf, Bw, beta, C, ldc, bias);
        return;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    GemmPath path = gemm_dispatch(t, ta, tb, M, N, K, alpha, A, lda, Abf, B, ldb, Bbf, Bw, beta, C, ldc, bias);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    GemmShapeStat x = {.path = path, .ta = ta, .tb = tb, .M = M, .N = N, .K = K};
    stats_add(t->gemm_stats, &x, 1, (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
}

void s2s_gemm_pre(Tape *t, bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda,
                  const uint16_t *Abf, const float *B, int ldb, const uint16_t *Bbf, const Tensor *Bw, float beta,
                  float *C, int ldc) {
    gemm_pre(t, ta, tb, M, N, K, alpha, A, lda, Abf, B, ldb, Bbf, Bw, beta, C, ldc, NULL);
}

void s2s_gemm_bias(Tape *t, int M, int N, int K, const float *A, int lda, const float *W, const uint16_t *Wbf,
                   const Tensor *Bw, const float *bias, float *C, int ldc) {
    gemm_pre(t, false, true, M, N, K, 1.0f, A, lda, NULL, W, K, Wbf, Bw, 0.0f, C, ldc, bias);
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

bool gemm_cpu_has_int8(void) { return cpu_isa_has(dnnl_cpu_isa_avx2); }

GemmScreenCols gemm_frozen_screen(Tape *t, TapeScreen kind, int M, int N, int K, const float *A, int lda,
                                  const Tensor *W, float *C, GemmInt8Sums *raw) {
    S2S_ASSERT(W->frozen && W->ndim == 2 && W->shape[0] == N && W->shape[1] == K && M > 0 && N > 0 && K > 0);
    S2S_ASSERT(kind == TAPE_SCREEN_F32 || kind == TAPE_SCREEN_BF16 || kind == TAPE_SCREEN_INT8);
    S2S_ASSERT(kind == TAPE_SCREEN_INT8 ? raw && raw->sums && raw->row_scale : C != NULL);
    struct timespec t0, t1;
    if (t->gemm_stats) clock_gettime(CLOCK_MONOTONIC, &t0);
    Pack *pk = NULL;
    if (kind == TAPE_SCREEN_INT8) { /* any height: the int8 plan packs for its own */
        PlanKey k;
        memset(&k, 0, sizeof k);
        k.M = M, k.N = N, k.K = K, k.lda = lda, k.ldb = K, k.ldc = N, k.tb = 1;
        pk = int8_run(t, &k, 1.0f, 0.0f, A, lda, W->data, K, W->frozen, NULL, N, NULL, raw, raw->fine);
    } else {
        for (int r0 = 0; r0 < M; r0 += PACK_MAX_ROWS) { /* the packed layout serves plans this tall */
            int m = M - r0 < PACK_MAX_ROWS ? M - r0 : PACK_MAX_ROWS;
            PlanKey k;
            memset(&k, 0, sizeof k);
            k.M = m, k.N = N, k.K = K, k.lda = lda, k.ldb = K, k.ldc = N, k.tb = 1, k.bf16 = kind == TAPE_SCREEN_BF16;
            ArenaMark mk = arena_mark(&t->arena);
            const void *a = A + (size_t)r0 * lda;
            if (k.bf16) {
                a = to_bf16(t, A + (size_t)r0 * lda, m, K, lda);
                k.lda = K;
            }
            pk = matmul_run(t, &k, 1.0f, 0.0f, a, W->data, W->frozen, C + (size_t)r0 * N, NULL);
            arena_rewind(&t->arena, mk);
        }
    }
    if (!pk->norm) { /* once per packed copy: it lives as long as the weight stays frozen */
        pk->norm = s2s_xmalloc((size_t)N * sizeof *pk->norm);
        gemm_row_norms(W->data, N, K, K, pk->norm);
    }
    if (kind == TAPE_SCREEN_INT8 && !pk->l1) {
        pk->l1 = s2s_xmalloc((size_t)N * sizeof *pk->l1);
        gemm_row_l1(W->data, N, K, K, pk->l1);
    }
    t->flops += 2.0 * M * N * K;
    bool q8 = pk->q8; /* gemm_q8's sums: A in 7 bits */
    if (t->gemm_stats) {
        clock_gettime(CLOCK_MONOTONIC, &t1);
        GemmPath path = q8                         ? GEMM_PATH_Q8
                        : kind == TAPE_SCREEN_INT8 ? GEMM_PATH_INT8
                        : kind == TAPE_SCREEN_BF16 ? GEMM_PATH_BF16_PACKED
                                                   : GEMM_PATH_PACKED;
        GemmShapeStat x = {.path = path, .tb = true, .M = M, .N = N, .K = K};
        stats_add(t->gemm_stats, &x, 1, (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    }
    bool q = kind == TAPE_SCREEN_INT8;
    return (GemmScreenCols){pk->norm, q ? pk->l1 : NULL, q ? pk->scale : NULL, q ? pk->colsum : NULL,
                            .zero = int8_act_off(q8), .act_max = int8_act_max(q8), .coarse = q8};
}

double gemm_primitive_rate(Tape *t, const GemmShapeStat *s, bool bf16) {
    int M = s->M, N = s->N, K = s->K;
    size_t es = bf16 ? sizeof(uint16_t) : sizeof(float);
    void *A = s2s_xcalloc((size_t)M * K, es), *B = s2s_xcalloc((size_t)K * N, es);
    float *C = s2s_xcalloc((size_t)M * N, sizeof *C);
    if (bf16) { /* ones and small integers: exact, and no subnormal slows a kernel down */
        for (size_t i = 0; i < (size_t)M * K; i++) ((uint16_t *)A)[i] = (uint16_t)(0x3f80 + i % 3);
        for (size_t i = 0; i < (size_t)K * N; i++) ((uint16_t *)B)[i] = (uint16_t)(0x3f80 + i % 5);
    } else {
        for (size_t i = 0; i < (size_t)M * K; i++) ((float *)A)[i] = (float)(i % 3);
        for (size_t i = 0; i < (size_t)K * N; i++) ((float *)B)[i] = (float)(i % 5);
    }
    PlanKey k;
    memset(&k, 0, sizeof k);
    k.M = M, k.N = N, k.K = K, k.ta = s->ta, k.tb = s->tb, k.bf16 = bf16;
    k.lda = s->ta ? M : K, k.ldb = s->tb ? K : N, k.ldc = N;
    double best = 0;
    for (int r = 0; r < 4; r++) { /* the first makes the kernel */
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        matmul_run(t, &k, 1.0f, 0.0f, A, B, 0, C, NULL);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double sec = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        if (r > 0 && (best == 0 || sec < best)) best = sec;
    }
    free(A);
    free(B);
    free(C);
    return 2.0 * M * N * K / best / 1e9;
}

/* ---- batched small products: one head's attention in a training step (15×15×32) ---- */

/* op(B) row-major in SMALL_MAX_B floats, rows padded to whole vectors; rows of C of at most
 * SMALL_MAX_N; and at most SMALL_MAX_MNK multiply-adds, past which a GEMM call's overhead
 * no longer dominates. */
#define SMALL_MAX_B 8192
#define SMALL_MAX_N 256
#define SMALL_MAX_MNK (64 * 64 * 64)
/* floats a vector: the CPU's own width (a wider generic vector compiled, without AVX-512,
 * into spills and shuffles: the Transformer's attention products ran at 7 GFLOP/s) */
#if defined(__AVX512F__)
#define SMALL_VEC 16
#elif defined(__AVX__)
#define SMALL_VEC 8
#else
#define SMALL_VEC 4
#endif

static int small_pad(int n) { return (n + SMALL_VEC - 1) / SMALL_VEC * SMALL_VEC; }

static bool small_fits(int M, int N, int K) {
    return N <= SMALL_MAX_N && (size_t)K * (size_t)small_pad(N) <= SMALL_MAX_B && (size_t)M * N * K <= SMALL_MAX_MNK;
}

typedef struct SmallJob {
    bool ta, tb;
    int M, N, K, lda, ldb, ldc;
    const float *A, *B;
    size_t sa, sb, sc; /* batch strides */
    float beta;
    float *C;
} SmallJob;

typedef float SmallVec __attribute__((vector_size(SMALL_VEC * sizeof(float)))); /* gcc and clang */
/* a b + c, rounded once where the CPU has vector FMA (the same bits on every run of a
 * build). Macros, not functions: a vector passed by value changes the ABI between builds. A
 * block of C is up to SMALL_RB rows × SMALL_VB vectors kept in registers: 24 of AVX-512's
 * 32 registers, 12 of AVX2's (or SSE's) 16, with the row of B and a broadcast beside them. */
#define SMALL_RB 6
#if defined(__AVX512F__)
#define SMALL_VB 4
#define SMALL_FMA(a, b, c) ((SmallVec)_mm512_fmadd_ps((__m512)(a), (__m512)(b), (__m512)(c)))
#elif defined(__AVX__)
#define SMALL_VB 2
#if defined(__FMA__)
#define SMALL_FMA(a, b, c) ((SmallVec)_mm256_fmadd_ps((__m256)(a), (__m256)(b), (__m256)(c)))
#else
#define SMALL_FMA(a, b, c) ((a) * (b) + (c))
#endif
#else
#define SMALL_VB 2
#define SMALL_FMA(a, b, c) ((a) * (b) + (c))
#endif
#define SMALL_SPLAT(s) ((s) - (SmallVec){0}) /* x - 0 is x for every x, -0 included */

/* acc[r][v] = sum over k of op(A)(r, k) bp[k][v] for rows r < RB and vectors v < NV, k in
 * order from zero. Inlined with constant RB and NV, so the loops unroll and acc stays in
 * registers. */
static inline __attribute__((always_inline)) void small_block(const float *bp, int Np, int K, const float *A, size_t ai,
                                                              size_t ak, int RB, int NV, SmallVec acc[SMALL_RB][SMALL_VB]) {
    for (int r = 0; r < RB; r++)
        for (int v = 0; v < NV; v++) acc[r][v] = SMALL_SPLAT(0.0f);
    for (int k = 0; k < K; k++) {
        const float *b = bp + (size_t)k * Np;
        SmallVec bv[SMALL_VB];
        for (int v = 0; v < NV; v++) memcpy(&bv[v], b + v * SMALL_VEC, sizeof bv[v]);
        for (int r = 0; r < RB; r++) {
            float a = A[r * ai + k * ak];
            SmallVec x = SMALL_SPLAT(a);
            for (int v = 0; v < NV; v++) acc[r][v] = SMALL_FMA(x, bv[v], acc[r][v]);
        }
    }
}

/* C = op(A) op(B) + beta C for one batch entry: op(B) copied into bp (K, Np) with zero
 * padding, then C in blocks kept in registers: the same bits on any thread, for any split
 * of the batch. */
static void small_one(const SmallJob *j, const float *A, const float *B, float *C) {
    float bp[SMALL_MAX_B] __attribute__((aligned(64)));
    int M = j->M, N = j->N, K = j->K, Np = small_pad(N);
    if (j->tb) {
        for (int n = 0; n < N; n++)
            for (int k = 0; k < K; k++) bp[(size_t)k * Np + n] = B[(size_t)n * j->ldb + k];
    } else {
        for (int k = 0; k < K; k++) memcpy(bp + (size_t)k * Np, B + (size_t)k * j->ldb, (size_t)N * sizeof *bp);
    }
    for (int k = 0; k < K; k++)
        for (int n = N; n < Np; n++) bp[(size_t)k * Np + n] = 0.0f;
    size_t ai = j->ta ? 1 : (size_t)j->lda, ak = j->ta ? (size_t)j->lda : 1; /* op(A)(i, k) = A[i ai + k ak] */
    for (int n0 = 0; n0 < Np; n0 += SMALL_VB * SMALL_VEC) {
        int nv = (Np - n0) / SMALL_VEC < SMALL_VB ? (Np - n0) / SMALL_VEC : SMALL_VB;
        int w = N - n0 < SMALL_VB * SMALL_VEC ? N - n0 : SMALL_VB * SMALL_VEC;
        for (int i0 = 0; i0 < M;) {
            int left = M - i0, rb = left >= SMALL_RB ? SMALL_RB : left >= 3 ? 3 : left; /* 15 rows: 6, 6, 3 */
            SmallVec acc[SMALL_RB][SMALL_VB];
            const float *a = A + i0 * ai;
#define SMALL_CASE(NV)                                                                \
    case NV:                                                                            \
        switch (rb) {                                                                   \
        case SMALL_RB: small_block(bp + n0, Np, K, a, ai, ak, SMALL_RB, NV, acc); break; \
        case 3: small_block(bp + n0, Np, K, a, ai, ak, 3, NV, acc); break;               \
        case 2: small_block(bp + n0, Np, K, a, ai, ak, 2, NV, acc); break;               \
        default: small_block(bp + n0, Np, K, a, ai, ak, 1, NV, acc); break;              \
        }                                                                               \
        break;
            switch (nv) {
                SMALL_CASE(1)
                SMALL_CASE(2)
#if SMALL_VB == 4
                SMALL_CASE(3)
                SMALL_CASE(4)
#endif
            }
#undef SMALL_CASE
            for (int r = 0; r < rb; r++) {
                float *c = C + (size_t)(i0 + r) * j->ldc + n0;
                float out[SMALL_VB * SMALL_VEC];
                memcpy(out, acc[r], (size_t)nv * sizeof acc[r][0]);
                if (j->beta == 0.0f) /* C may hold NaN garbage */
                    memcpy(c, out, (size_t)w * sizeof *c);
                else
                    for (int n = 0; n < w; n++) c[n] = j->beta * c[n] + out[n];
            }
            i0 += rb;
        }
    }
}

/* Asks for the rows of a matrix (rows × cols floats, leading dimension ld) to be cached. */
static void small_prefetch(const float *x, int rows, int cols, int ld) {
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c += 16) __builtin_prefetch(x + (size_t)r * ld + c);
}

static void small_range(void *ctx, size_t b0, size_t b1) {
    const SmallJob *j = ctx;
    enum { AHEAD = 2 }; /* time-major operands put an entry's rows far apart (B·heads·d): no
                         * hardware prefetcher follows them, so the loads are asked for early */
    for (size_t b = b0; b < b1; b++) {
        if (b + AHEAD < b1) {
            size_t n = b + AHEAD;
            small_prefetch(j->A + n * j->sa, j->ta ? j->K : j->M, j->ta ? j->M : j->K, j->lda);
            small_prefetch(j->B + n * j->sb, j->tb ? j->N : j->K, j->tb ? j->K : j->N, j->ldb);
            small_prefetch(j->C + n * j->sc, j->M, j->N, j->ldc);
        }
        small_one(j, j->A + b * j->sa, j->B + b * j->sb, j->C + b * j->sc);
    }
}

bool gemm_small_batched(Tape *t, bool ta, bool tb, int M, int N, int K, int batch, const float *A, int lda, size_t sa,
                        const float *B, int ldb, size_t sb, float beta, float *C, int ldc, size_t sc) {
    if (batch < 2 || M < 2 || N < 1 || K < 1 || !small_fits(M, N, K)) return false;
    t->flops += 2.0 * M * N * K * batch;
    SmallJob j = {ta, tb, M, N, K, lda, ldb, ldc, A, B, sa, sb, sc, beta, C};
    struct timespec t0, t1;
    if (t->gemm_stats) clock_gettime(CLOCK_MONOTONIC, &t0);
    par_for((size_t)batch, (size_t)M * N * K, small_range, &j);
    if (t->gemm_stats) {
        clock_gettime(CLOCK_MONOTONIC, &t1);
        GemmShapeStat x = {.path = GEMM_PATH_SMALL, .ta = ta, .tb = tb, .M = M, .N = N, .K = K};
        stats_add(t->gemm_stats, &x, batch, (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    }
    return true;
}

uint16_t *gemm_bf16_copy(Tape *t, const float *x, size_t n) {
    uint16_t *y = arena_alloc(&t->arena, n * sizeof *y);
    par_bf16_from_f32(x, y, n);
    return y;
}

void gemm_tape(Tape *t, bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda,
               const float *B, int ldb, float beta, float *C, int ldc) {
    s2s_gemm_pre(t, ta, tb, M, N, K, alpha, A, lda, NULL, B, ldb, NULL, NULL, beta, C, ldc);
}
