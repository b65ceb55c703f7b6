/* gemm.h — the matrix-product back ends and their thread settings.
 *
 * float32 GEMMs (the exact reference) go to oneDNN's dnnl_sgemm, or to OpenBLAS's cblas_sgemm
 * where a tape says so (its engine's gemm, config "gemm": "openblas"). Both are float32 with float32
 * accumulation; they differ in summation order only. oneDNN is the default because it
 * multiplies with AVX-512 on this machine's CPUs whatever OPENBLAS_CORETYPE says (1.1–2.2×
 * OpenBLAS at the model's shapes here); a one-row A (a decoding step's attention) is
 * multiplied on the calling thread by plain vectorised loops in both. Where a tape runs in
 * bfloat16 (engine precision bf16), both operands are rounded to bfloat16 (round to nearest even) and
 * multiplied by oneDNN with float32 accumulation into a float32 result, as on CPUs with
 * avx512_bf16; weights, gradients and optimizer state stay float32. Products with a side
 * shorter than 8 (matrix-vector-like) stay float32 even then: they are memory-bound.
 *
 * Some products go through oneDNN matmul primitives instead of its GEMM calls, each made once
 * per shape and kept in the tape's engine (gemm_plans, freed by tape_free): float32 products
 * with a transposed B at most 1024 rows tall (decoding and recurrent steps, where dnnl_sgemm
 * repacks B on every call), every product in those shapes whose caller offers B as a weight
 * frozen by params_freeze (the weight is packed once per freeze into the kernel's own
 * layout, converted to bf16 by the same reorder on a bf16 tape; callers offer it where it is
 * used many times per freeze: a recurrent weight at every step, any weight in decoding or
 * evaluation, never a linear layer's in a training step), and every bf16 product where the
 * engine's bf16_matmul says so: engine_init sets it on CPUs with AMX (oneDNN's GEMM calls do not use AMX);
 * tests set it on any CPU to check that path. The choice depends on the shape and the CPU only, never on a
 * timing, so a run's numbers stay the same from run to run.
 *
 * An int8 tape (engine precision int8, decoding only: `./translate --int8`) multiplies by frozen weights
 * in int8: each weight quantised once per freeze per output channel (scale = max |w| / 127,
 * round to nearest even, ±127; 63 for 127 without AVX-512 VNNI: gemm_int8_weight_max), the
 * activations per row at every call (±127, stored with an offset of 128 as the VNNI
 * instructions want: the offset times the channel's sum is taken back out), the products
 * summed exactly in int32 by oneDNN, then scaled back to float32. Without VNNI, in builds
 * with AVX2, products against W^T (every linear layer's) run on our own kernel instead
 * (gemm_q8.c: the activations to ±63, stored + 63, so that two of vpmaddubsw's pair sums
 * add in int16 exactly: gemm_int8_act_max). On CPUs without AVX-512, where oneDNN's float32
 * kernels pick their blocking by the number of rows, float32 products by a frozen weight, and
 * every float32 product of two rows or more on a tape without gradients, run on our own kernel
 * instead (gemm_rows.c), each element one chain of multiply-adds in k order (the chain
 * gemm_small's batched products sum too): a sentence decodes to the same bits alone and in
 * any batch there too. On CPUs with AMX, oneDNN's bf16 matmul takes AVX-512 kernels for a few
 * rows and AMX above, which round differently: a bf16 product by a frozen weight runs as the
 * fewest rows that take AMX (gemm_plans.c). Products at least 8 wide
 * on both sides only; the rest (attention against the encoder states, thin products) stays
 * float32. Conversions and the primitives' scratch memory borrow the tape's arena for the
 * length of one call. */
#ifndef S2S_GEMM_H
#define S2S_GEMM_H

#include "s2s/common.h"
#include "s2s/tape.h"

#include <stddef.h>
#include <stdint.h>

/* Threads of both back ends (OpenBLAS and oneDNN's OpenMP); n <= 0 leaves their defaults. */
void gemm_set_threads(int n);

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
/* The largest |value| of an int8 tape's activations: 127, or 63 where its products run on
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
    GEMM_PATH_Q8,           /* int8 on gemm_q8 (AVX2 without VNNI: int8 tapes, greedy's screen) */
    GEMM_PATH_ROWS,         /* float32 on gemm_rows, each row alone (CPUs without AVX-512) */
    GEMM_PATH_COUNT
} GemmPath;
extern const char *const GEMM_PATH_NAMES[GEMM_PATH_COUNT];

/* Time spent per product shape and back end, for benchmarks (./speed --gemm-profile): a
 * tape whose gemm_stats is set times every product it makes (a clock read on each side). */
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
double gemm_primitive_rate(Tape *t, const GemmShapeStat *s, bool bf16);

/* Row-major C = alpha op(A) op(B) + beta C in the tape's precision (what the ops call). */
void gemm_tape(Tape *t, bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda,
               const float *B, int ldb, float beta, float *C, int ldc);

#endif
