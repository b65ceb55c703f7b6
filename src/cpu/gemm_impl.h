/* gemm_impl.h — what the gemm_*.c files share below gemm_internal.h: oneDNN's plans and
 * packed weights (owned by the engine's GemmPlans, freed with it), the int8 quantisation, the
 * thread rule for small products, and the per-shape statistics. Not for the ops. */
#ifndef S2S_GEMM_IMPL_H
#define S2S_GEMM_IMPL_H

#include "gemm_internal.h"

#include <oneapi/dnnl/dnnl.h>
#include <stdint.h>

/* Exported by libdnnl 2.x but declared only in its test headers: row-major
 * C = alpha op(A) op(B) + beta C with bfloat16 A and B, float32 C and accumulation. */
extern dnnl_status_t dnnl_gemm_bf16bf16f32(char transa, char transb, dnnl_dim_t M, dnnl_dim_t N, dnnl_dim_t K,
                                           float alpha, const uint16_t *A, dnnl_dim_t lda, const uint16_t *B,
                                           dnnl_dim_t ldb, float beta, float *C, dnnl_dim_t ldc);
/* libgomp, oneDNN's threading runtime (declared here: clang has no omp.h without libomp) */
extern void omp_set_num_threads(int n);
extern int omp_get_max_threads(void);
extern int omp_get_num_procs(void);

/* Runs one oneDNN GEMM call, on one thread when it is small. */
#define GEMM_ONEDNN(M, N, K, call)                                                     \
    do {                                                                               \
        int restore_ = gemm_serial_begin((M), (N), (K));                               \
        dnnl_status_t s_ = (call);                                                     \
        gemm_serial_end(restore_);                                                     \
        S2S_ASSERT(s_ == dnnl_success); /* shapes and strides are the caller's bugs */ \
    } while (0)

#define PLAN_BUCKETS 128
#define PLAN_MAX 512 /* then the cache starts again: a primitive is ~1 ms to make */
#define PACK_MAX 64  /* packed weights kept (each a weight in one layout); oldest goes first */

typedef struct PlanKey { /* zeroed before filling: hashed and compared as bytes */
    int M, N, K, lda, ldb, ldc, threads;
    uint32_t alpha, beta; /* bit patterns */
    uint8_t bf16, ta, tb, packed, int8; /* int8: u8 A, s8 packed B, int32 C, no alpha/beta */
    uint8_t bias;                       /* + a float32 bias row (1, N) */
    uint8_t piece;                      /* 1 + its index for a piece's own plan (gemm_plans.c), else 0 */
} PlanKey;

typedef struct Plan {
    struct Plan *next;
    PlanKey key;
    dnnl_primitive_t prim;
    dnnl_memory_t a, b, c, scratch, bias; /* handles set per call (bias: NULL without) */
    dnnl_memory_desc_t w_md;        /* the weights' layout (blocked when packed) */
    size_t scratch_bytes;
    bool amx;                       /* oneDNN chose an AMX kernel */
    int pad_rows;                   /* bf16 by a packed weight on an AMX CPU: the rows it runs as (0: not yet known) */
} Plan;

typedef struct Pack {
    const float *src; /* the weight's float32 data */
    uint64_t stamp;   /* its Tensor.frozen when packed */
    bool tb;          /* packed from op(W) = W^T (another matrix than W, even when square) */
    bool q8;          /* in gemm_q8's layout (md unused), else in md's */
    bool rows;        /* in gemm_rows's layout (md unused) */
    dnnl_memory_desc_t md;
    void *buf;
    float *scale;    /* int8: per column of op(B), max |column| / gemm_int8_weight_max() */
    float *norm;     /* a screen's: per column of op(B), its 2-norm rounded up (gemm_frozen_screen) */
    float *l1;       /* an int8 screen's: per column of op(B), its 1-norm rounded up */
    int32_t *colsum; /* int8: per column, the sum of its quantised values */
} Pack;

#define PIECES_MAX 8 /* a packed product's pieces on the pool, at most */

struct GemmPlans {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    dnnl_stream_t piece_stream[PIECES_MAX]; /* one a piece: they run at once (made when first needed) */
    unsigned clears;                        /* times the plan cache started again */
    Plan *bucket[PLAN_BUCKETS];
    int n_plans;
    Pack packs[PACK_MAX];
    int n_packs, next_pack; /* next_pack: the slot replaced when all are used */
};

#define DNNL_OK(call) S2S_ASSERT((call) == dnnl_success) /* shapes and strides are the caller's bugs */

/* gemm_base.c */
bool gemm_cpu_isa_has(dnnl_cpu_isa_t want);
int gemm_serial_begin(int M, int N, int K);
void gemm_serial_end(int restore);

/* gemm_base.c: bf16 copies, statistics */
const uint16_t *gemm_to_bf16(const GemmCtx *g, const float *x, int rows, int cols, int ld);
void gemm_stats_add(GemmStats *st, const GemmShapeStat *x, long calls, double seconds);

/* gemm_plans.c */
GemmPlans *gemm_plans_get(const GemmCtx *g);
Plan *gemm_plan_get(GemmPlans *p, const PlanKey *k, float alpha, float beta);
Pack *gemm_pack_slot(GemmPlans *p, const float *B, uint64_t stamp);
void gemm_quantise_columns(const float *B, int ldb, bool tb, int K, int N, int top, int8_t *quant, float *scale,
                           int32_t *colsum);
Pack *gemm_pack_get(GemmPlans *p, const Plan *pl, const float *B, int ldb, uint64_t stamp);
void gemm_plan_execute(const GemmCtx *g, GemmPlans *p, const Plan *pl, const void *A, const void *B, void *C, const float *bias);
Pack *gemm_matmul_run(const GemmCtx *g, PlanKey *k, float alpha, float beta, const void *A, const void *B, uint64_t Bstamp,
                      float *C, const float *bias);

/* op(B) (K × N, stored with ldb) in gemm_rows's layout, packed once per freeze. */
Pack *gemm_rows_pack_get(GemmPlans *p, const float *B, int ldb, bool tb, uint64_t stamp, int N, int K);

/* gemm_int8.c */
bool gemm_q8_applies(void);
int gemm_act_max(bool q8);
int gemm_act_off(bool q8);
Pack *gemm_int8_run(const GemmCtx *g, PlanKey *k, float alpha, float beta, const float *A, int lda, const float *B, int ldb,
                    uint64_t Bstamp, float *C, int ldc, const float *bias, GemmInt8Sums *raw, bool fine);

#endif
