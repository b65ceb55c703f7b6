/* engine.h — the execution context a tape computes in, and the seam between the graph and a
 * back end: the precision (one enum), the library that multiplies float32, the threads, the
 * route of bf16 products (matmul primitives where the CPU has AMX), and what the back end
 * makes and keeps as it runs: oneDNN's plans and packed weights, the argmax screen's
 * per-weight factors, freed with it (engine_free, which tape_free calls). It borrows the
 * statistics it times products into (gemm_stats).
 *
 * Today the one back end is the CPU's (src/cpu: oneDNN, OpenBLAS and our own kernels,
 * gemm.h), which the graph reaches through a GemmCtx made from the engine per call
 * (tape_gemm_ctx); a second one would plug in here (docs/design/gpu.md). */
#ifndef S2S_ENGINE_H
#define S2S_ENGINE_H

#include "s2s/common.h"
#include "s2s/gemm.h"

typedef struct Engine {
    Precision precision; /* bf16: operands in bfloat16, float32 sums; int8: products against
                            frozen weights in int8, the rest float32 (gemm.h) */
    GemmLib gemm;        /* who multiplies float32 */
    bool bf16_matmul;    /* bf16 products through matmul primitives: set where the CPU has AMX */
    GemmPlans *gemm_plans;            /* matmul primitives and packed weights (gemm_plans.c), made on first use */
    struct ArgmaxCache *argmax_cache; /* op_linear_argmax's per-column bound factors per frozen weight */
    void (*argmax_cache_free)(struct ArgmaxCache *c); /* left by its maker (ops_matmul.c) */
    GemmStats *gemm_stats;            /* borrowed: when set, every product is timed into it (gemm.h) */
} Engine;

/* An engine for these settings: bf16 checked against this CPU (S2S_ERR_CONFIG; `who` starts the
 * message, "translate: --bf16"), the libraries' threads set (0: their choice), AMX's route
 * chosen. Nothing is allocated until the first product. */
S2sStatus engine_init(Engine *e, Precision precision, GemmLib gemm, int threads, const char *who, S2sError *err);
void engine_free(Engine *e);

#endif
