/* test_gemm.h — what the GEMM suites (test_gemm.c, test_gemm_plans.c, test_gemm_int8.c) share:
 * the headers and the bit helpers. */
#ifndef S2S_TEST_GEMM_H
#define S2S_TEST_GEMM_H

#include "test_util.h"
#include "s2s/fastmath.h"
#include "s2s/bf16.h"
#include "s2s/gemm.h"
#include "../src/core/tape_gemm.h"   /* tape_gemm_op: a product against a frozen weight */
#include "../src/cpu/gemm_internal.h" /* our own kernels (gemm_q8, gemm_rows) */

#include <criterion/criterion.h>
#include <math.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdlib.h>
#include <string.h>

int omp_get_max_threads(void);

#define SH(...) ((int[]){__VA_ARGS__})

static inline uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
static inline float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static inline float round_bf16(float x) {
    uint16_t b;
    bf16_from_f32(&x, &b, 1);
    return bf16_to_f32(b);
}

#endif
