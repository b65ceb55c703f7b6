/* engine.c — an execution context set up and freed (see engine.h). */
#include "s2s/gemm.h"
#include "s2s/engine.h"

#include <string.h>

S2sStatus engine_init(Engine *e, Precision precision, GemmLib gemm, int threads, const char *who, S2sError *err) {
    memset(e, 0, sizeof *e);
    S2sStatus st;
    if (precision == PRECISION_BF16 && (st = gemm_bf16_check(who, err))) return st;
    gemm_set_threads(threads > 0 ? threads : gemm_quota_threads(NULL));
    e->precision = precision;
    e->gemm = gemm;
    e->bf16_matmul = precision == PRECISION_BF16 && gemm_cpu_has_amx(); /* AMX is reached through primitives only */
    return S2S_OK;
}

void engine_free(Engine *e) {
    gemm_plans_free(e->gemm_plans);
    if (e->argmax_cache) e->argmax_cache_free(e->argmax_cache);
    memset(e, 0, sizeof *e);
}
