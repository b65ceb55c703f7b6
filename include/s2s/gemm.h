/* gemm.h — the CPU back end: the matrix products the engine's ops call, and their settings.
 *
 * Owns the kernels and their rules; borrows everything else from its caller through a
 * GemmCtx (the engine's settings and the plans it keeps, the arena for one call's scratch,
 * the FLOP counter). It knows buffers, never tensors or tapes: the graph (src/core) is above
 * it, and a second back end would sit beside it (docs/design/gpu.md).
 *
 * float32 GEMMs (the exact reference) go to oneDNN's dnnl_sgemm, or to OpenBLAS's cblas_sgemm
 * where the caller's engine says so (its gemm, config "gemm": "openblas"). Both are float32 with float32
 * accumulation; they differ in summation order only. oneDNN is the default because it
 * multiplies with AVX-512 on this machine's CPUs whatever OPENBLAS_CORETYPE says (1.1–2.2×
 * OpenBLAS at the model's shapes here); a one-row A (a decoding step's attention) is
 * multiplied on the calling thread by plain vectorised loops in both. Where an engine runs in
 * bfloat16 (precision bf16), both operands are rounded to bfloat16 (round to nearest even) and
 * multiplied by oneDNN with float32 accumulation into a float32 result, as on CPUs with
 * avx512_bf16; weights, gradients and optimizer state stay float32. Products with a side
 * shorter than 8 (matrix-vector-like) stay float32 even then: they are memory-bound.
 *
 * Some products go through oneDNN matmul primitives instead of its GEMM calls, each made once
 * per shape and kept by the engine (gemm_plans, freed by engine_free): float32 products
 * with a transposed B at most 1024 rows tall (decoding and recurrent steps, where dnnl_sgemm
 * repacks B on every call), every product in those shapes whose caller offers B as a weight
 * frozen by params_freeze (the weight is packed once per freeze into the kernel's own
 * layout, converted to bf16 by the same reorder on a bf16 engine; callers offer it where it is
 * used many times per freeze: a recurrent weight at every step, any weight in decoding or
 * evaluation, never a linear layer's in a training step), and every bf16 product where the
 * engine's bf16_matmul says so: engine_init sets it on CPUs with AMX (oneDNN's GEMM calls do not use AMX);
 * tests set it on any CPU to check that path. The choice depends on the shape and the CPU only, never on a
 * timing, so a run's numbers stay the same from run to run.
 *
 * An int8 engine (precision int8, decoding only: `./translate --int8`) multiplies by frozen weights
 * in int8: each weight quantised once per freeze per output channel (scale = max |w| / 127,
 * round to nearest even, ±127; 63 for 127 without AVX-512 VNNI: gemm_int8_weight_max), the
 * activations per row at every call (±127, stored with an offset of 128 as the VNNI
 * instructions want: the offset times the channel's sum is taken back out), the products
 * summed exactly in int32 by oneDNN, then scaled back to float32. Without VNNI, in builds
 * with AVX2, products against W^T (every linear layer's) run on our own kernel instead
 * (gemm_q8.c: the activations to ±63, stored + 63, so that two of vpmaddubsw's pair sums
 * add in int16 exactly: gemm_int8_act_max). On CPUs without AVX-512, where oneDNN's float32
 * kernels pick their blocking by the number of rows, float32 products by a frozen weight, and
 * every float32 product of two rows or more in a call without gradients (GemmCtx.training false), run on our own kernel
 * instead (gemm_rows.c), each element one chain of multiply-adds in k order (the chain
 * gemm_small's batched products sum too): a sentence decodes to the same bits alone and in
 * any batch there too. On CPUs with AMX, oneDNN's bf16 matmul takes AVX-512 kernels for a few
 * rows and AMX above, which round differently: a bf16 product by a frozen weight runs as the
 * fewest rows that take AMX (gemm_plans.c). Products at least 8 wide
 * on both sides only; the rest (attention against the encoder states, thin products) stays
 * float32. Conversions and the primitives' scratch memory borrow the caller's arena (GemmCtx.arena)
 * for the length of one call. */
#ifndef S2S_GEMM_H
#define S2S_GEMM_H

#include "s2s/common.h"
#include "s2s/arena.h"

#include <stddef.h>
#include <stdint.h>

/* The numbers a product is made in (int8: decoding only) and the library that multiplies
 * float32; the engine holds them (engine.h), the config names them. */
typedef enum Precision { PRECISION_FP32, PRECISION_BF16, PRECISION_INT8 } Precision;
typedef enum GemmLib { GEMM_LIB_ONEDNN, GEMM_LIB_OPENBLAS } GemmLib;

typedef struct GemmPlans GemmPlans; /* gemm_impl.h */
struct GemmStats;
/* What a product borrows from its caller, made per call (tape_gemm_ctx): the engine's
 * settings and the plans it keeps, scratch memory for the length of the call, the FLOP
 * counter, and whether gradients will follow (the bf16 rule below). */
typedef struct GemmCtx {
    Precision precision;
    GemmLib lib;
    bool bf16_matmul;         /* bf16 products through matmul primitives (AMX CPUs) */
    GemmPlans **plans;        /* the engine's plans and packed weights, made on first use */
    struct GemmStats *stats;  /* when set, every product is timed into it */
    Arena *arena;
    double *flops;
    bool training;            /* gradients follow (a training step), not decoding */
} GemmCtx;
static inline bool gemm_ctx_bf16(const GemmCtx *g) { return g->precision == PRECISION_BF16; }
static inline bool gemm_ctx_int8(const GemmCtx *g) { return g->precision == PRECISION_INT8; }
static inline bool gemm_ctx_openblas(const GemmCtx *g) { return g->lib == GEMM_LIB_OPENBLAS; }

/* A product's B when it is a model weight: its data, and while it is frozen (params_freeze)
 * the stamp of that freeze (0: not frozen), under which a packed copy is kept. */
typedef struct GemmWeight {
    const float *data;
    uint64_t frozen;
} GemmWeight;

/* Threads of both back ends (OpenBLAS and oneDNN's OpenMP); n <= 0 leaves their defaults. */
void gemm_set_threads(int n);
/* The thread count a cgroup's CPU quota sets when it allows fewer CPUs than OpenMP would use
 * (a container given 1 CPU on a 2-core host: libgomp counts CPUs, not quotas): the quota's
 * whole CPUs, at least 1. 0 when there is no such quota or OMP_NUM_THREADS chooses. The quota
 * in thousandths of a CPU in *milli when not NULL. */
int gemm_quota_threads(size_t *milli);
/* The CPUs this process may run on (its affinity mask, as OpenMP counts them). */
int gemm_cpus(void);

/* The kernel set OpenBLAS chose at load: OPENBLAS_CORETYPE's, or its own guess from the CPU.
 * Either can be older than the CPU runs (Debian's 0.3.21 guessed Prescott on a Xeon with AMX),
 * which `make bench` checks. */
const char *gemm_openblas_core(void);

/* Whether oneDNN runs AMX kernels on this CPU (then bf16 engines set bf16_matmul). */
bool gemm_cpu_has_amx(void);
/* Whether this CPU multiplies bfloat16 natively (avx512_bf16 or AMX), not by emulation. */
bool gemm_cpu_has_bf16(void);
/* Whether oneDNN runs int8 products with vector kernels here (AVX2 or wider: VNNI, or pairs
 * of products added in 16 bits without it). */
bool gemm_cpu_has_int8(void);
/* The largest |value| of an int8 weight: 127 where oneDNN runs AVX-512 VNNI kernels, 63 on
 * other CPUs, whose kernels add pairs of u8 × s8 products in saturating int16. */
int gemm_int8_weight_max(void);
/* The largest |value| of an int8 engine's activations: 127, or 63 where its products run on
 * our own kernel (builds with AVX2 on CPUs without VNNI: see above). */
int gemm_int8_act_max(void);

/* Whether this machine runs oneDNN's bfloat16 GEMM (a tiny product, checked once per call);
 * an S2S_ERR_CONFIG error naming `what` when it does not. */
S2sStatus gemm_bf16_check(const char *what, S2sError *err);

/* Which back end multiplied a product (the rules above). */
typedef enum GemmPath {
    GEMM_PATH_ROW,          /* one row, plain loops */
    GEMM_PATH_SGEMM,        /* dnnl_sgemm */
    GEMM_PATH_OPENBLAS,     /* cblas_sgemm */
    GEMM_PATH_MATMUL,       /* float32 matmul primitive */
    GEMM_PATH_PACKED,       /* float32 matmul primitive, weight packed */
    GEMM_PATH_BF16_GEMM,    /* dnnl_gemm_bf16bf16f32 */
    GEMM_PATH_BF16_MATMUL,  /* bf16 matmul primitive (AMX CPUs) */
    GEMM_PATH_BF16_PACKED,  /* bf16 matmul primitive, weight packed */
    GEMM_PATH_INT8,         /* int8 matmul primitive, weight packed */
    GEMM_PATH_SMALL,        /* batched small products (attention heads), plain loops */
    GEMM_PATH_Q8,           /* int8 on gemm_q8 (AVX2 without VNNI: int8 engines, greedy's screen) */
    GEMM_PATH_ROWS,         /* float32 on gemm_rows, each row alone (CPUs without AVX-512) */
    GEMM_PATH_COUNT
} GemmPath;
extern const char *const GEMM_PATH_NAMES[GEMM_PATH_COUNT];

/* Time spent per product shape and back end, for benchmarks (./speed --gemm-profile): an
 * engine whose gemm_stats is set times every product it makes (a clock read on each side). */
typedef struct GemmShapeStat {
    GemmPath path;
    bool ta, tb;
    int M, N, K;
    long calls;
    double seconds;
} GemmShapeStat;
typedef struct GemmStats {
    GemmShapeStat *items;
    int n, cap;
    long argmax_rows, argmax_exact; /* greedy picks made, and the exact logits they computed */
} GemmStats;
void gemm_stats_free(GemmStats *st);
/* GFLOP/s of the same product (operands as stored, no packing) on a oneDNN matmul primitive
 * in float32 or bf16, best of three after the first call: what the kernel alone can do. */
double gemm_primitive_rate(const GemmCtx *g, const GemmShapeStat *s, bool bf16);

/* The engine's plans and packed weights (gemm_plans.c); engine_free calls it. */
void gemm_plans_free(GemmPlans *p);

/* A bf16 call rounds only products whose both sides reach this: thinner ones (the attention
 * of one decoding step is a matrix-vector product per sentence) are memory-bound, and
 * rounding their operands would cost more than the bf16 multiply saves. */
#define GEMM_BF16_MIN_SIDE 8

/* Whether a product of M × N (any K) reads its operands in bf16: then the caller may hand
 * over a bf16 copy it made as it wrote the operand (gemm_op's Abf), not a second pass over
 * it. Training: both sides reach GEMM_BF16_MIN_SIDE. Decoding (no gradients): a product by a
 * weight (N a model size) does whatever its rows, one of two activations (attention) never,
 * so that no sentence's products depend on the batch it is in (how many rows are left, how
 * long the longest source is): a batch decodes as its sentences alone. */
static inline bool gemm_bf16_takes(const GemmCtx *g, int M, int N, bool by_weight) {
    if (!gemm_ctx_bf16(g) || N < GEMM_BF16_MIN_SIDE) return false;
    return g->training ? M >= GEMM_BF16_MIN_SIDE : by_weight;
}

/* Row-major C = alpha op(A) op(B) + beta C in the caller's precision; counts its FLOPs.
 * Abf/Bbf: bf16 copies of A/B (gemm_bf16_copy) or NULL; used only when the engine is bf16.
 * Bw: the weight whose data B is, or NULL: while it is frozen, thin products use a copy
 * packed once in the kernel's layout (kept by the engine's GemmPlans). */
void gemm_op(const GemmCtx *g, bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda,
             const uint16_t *Abf, const float *B, int ldb, const uint16_t *Bbf, const GemmWeight *Bw, float beta,
             float *C, int ldc);
/* A linear layer's product: C (M × N) = A W^T + bias (N, added to every row; or NULL), W
 * (N × K, rows K apart) as in gemm_op. The bias goes into the product's epilogue where the
 * path has one (int8's scaling back, oneDNN's matmul primitive), else C starts as it. */
void gemm_bias(const GemmCtx *g, int M, int N, int K, const float *A, int lda, const float *W, const uint16_t *Wbf,
               const GemmWeight *Bw, const float *bias, float *C, int ldc);
/* C_b = op(A_b) op(B_b) + beta C_b for b < batch (operands at batch strides sa, sb, sc), when
 * the products are small (one attention head's scores or context in training): plain loops,
 * the batch split over the threads, float32 in any precision, the same bits on any thread
 * count; counts FLOPs. Returns false, doing nothing, for shapes a GEMM call serves better. */
bool gemm_small_batched(const GemmCtx *g, bool ta, bool tb, int M, int N, int K, int batch, const float *A, int lda,
                        size_t sa, const float *B, int ldb, size_t sb, float beta, float *C, int ldc, size_t sc);
/* A bf16 copy of x in the call's arena, for an operand used by many GEMMs of one op. */
uint16_t *gemm_bf16_copy(const GemmCtx *g, const float *x, size_t n);

/* C (1 × N) = alpha op(A) op(B) + beta C for a one-row A, on the calling thread; touches
 * nothing shared, so batched products may run it on several threads (gemm_small.c). */
void gemm_row(bool ta, bool tb, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb, float beta,
              float *C);
/* out[i] = a · b[i], K values each, summed as gemm_row sums a dot (16 partial sums in k
 * order, the tail, then the 16 in order): the same bits as gemm_row's, eight or four at a time. */
void gemm_dots(int K, const float *a, const float *const *b, int n, float *out);
/* out[i] = a_i · b_i for n pairs of rows, a_i = a + i·K and b_i = b + i·K, each summed as
 * gemm_dots sums a dot (ops_attend.c: a decoding step's queries against one position's keys). */
void gemm_dots_pairs(int K, const float *a, const float *b, int n, float *out);
/* Asks for the rows of a matrix (rows × cols floats, ld apart) to be cached: a batch's
 * time-major operands put an entry's rows far apart, where no hardware prefetcher follows. */
void gemm_prefetch_rows(const float *x, int rows, int cols, int ld);

/* norm[r] = the 2-norm of row r of X (rows × cols, leading dimension ld), summed in double
 * and rounded up: an upper bound (Inf or NaN where the row holds one). */
void gemm_row_norms(const float *X, int rows, int cols, int ld, float *norm);
/* l1[r] = the 1-norm of row r of X, summed in double and rounded up. */
void gemm_row_l1(const float *X, int rows, int cols, int ld, float *l1);
/* What a screen's error bound needs of each row of W, kept with its packed copy while W
 * stays frozen: 2-norms (every screen), and for int8 the 1-norms and the quantisation
 * scales (max |w_v| / 127) its products used; NULL where not made. */
typedef struct GemmScreenCols {
    const float *norm, *l1, *scale;
    const int32_t *colsum; /* int8: per row of W, the sum of its quantised values */
    int zero, act_max;     /* int8: A's offset and largest |value| (128 and 127; 63 and 63 on gemm_q8) */
    bool coarse;           /* int8: the sums came from gemm_q8 (A in 7 bits) */
} GemmScreenCols;
/* Whether an int8 engine multiplies A by op(B) = Bw^T (N columns) in int8: a frozen
 * weight offered for packing (Bw, not transposed A) of at least GEMM_BF16_MIN_SIDE columns,
 * whatever the rows (as gemm_bf16_takes decodes: the batch does not pick the path). */
bool gemm_int8_applies(const GemmCtx *g, const GemmWeight *Bw, int N);
/* An int8 screen's result before scaling back: sums[m N + n] = sum_k (qa[m, k] + zero) qw[n, k]
 * exactly, and the row scales of A (NaN for a row holding an Inf or NaN). The logit is then
 * row_scale[m] * scale[n] * (float)(sums - zero colsum[n]), as an int8 engine scales back
 * (zero = 128, or 63 where gemm_q8 made them: GemmScreenCols says which). fine: A in 8 bits
 * on oneDNN even where gemm_q8 would apply (op_linear_argmax's fallback from its coarse screen). */
typedef struct GemmInt8Sums {
    int32_t *sums;    /* (M, N) */
    float *row_scale; /* (M) */
    bool fine;
} GemmInt8Sums;
/* How a screen multiplies: as an int8 engine does (A quantised per row, W per row, exact
 * int32 sums, left in *raw for the caller to scale back), with both operands rounded to
 * bfloat16 (float32 accumulation), or in float32. */
typedef enum GemmScreen { GEMM_SCREEN_F32, GEMM_SCREEN_BF16, GEMM_SCREEN_INT8 } GemmScreen;
/* A W^T (M × N) for a frozen weight W (N × K, row-major) in the screen's numbers, into C
 * (leading dimension N), in any precision: op_linear_argmax's approximate logits, W packed
 * once per freeze. */
GemmScreenCols gemm_frozen_screen(const GemmCtx *g, GemmScreen kind, int M, int N, int K, const float *A, int lda,
                                  const GemmWeight *W, float *C, GemmInt8Sums *raw);
#endif
