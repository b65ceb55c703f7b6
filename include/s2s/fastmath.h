/* fastmath.h — exp, sigmoid and tanh for the elementwise loops, branch-free so that the
 * compiler vectorises them (libm's tanhf went through expm1f one value at a time and was a
 * quarter of a training step). gcc vectorises them only with -fno-trapping-math (the
 * Makefile sets it; tests/test_build.c checks the hot loops). Accuracy: exp within 2 ulp
 * (Cephes' polynomial on [-ln2/2, ln2/2]); tanh within ~1e-7 absolute. Shared by core and
 * model (beam search). */
#ifndef S2S_FASTMATH_H
#define S2S_FASTMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float s2s_expf(float xin) {
    float x = xin == xin ? xin : 0.0f; /* NaN: compute on 0, return NaN below (no UB cast) */
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    /* n = round(x / ln2) by the 1.5·2^23 trick: floorf would block vectorisation */
    float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = x - n * 0.693359375f;      /* ln2, high part (exact in float) */
    r = r - n * -2.12194440e-4f;         /* ln2, low part */
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23;
    union {
        int32_t i;
        float f;
    } scale = {bits};
    return xin == xin ? p * scale.f : xin;
}

static inline float s2s_sigmoidf(float x) { return 1.0f / (1.0f + s2s_expf(-x)); }

static inline float s2s_tanhf(float x) {
    float a = fabsf(x);
    float t = 1.0f - 2.0f / (s2s_expf(2.0f * a) + 1.0f);
    return x < 0.0f ? -t : t;
}

/* Eight floats (or int32 lanes) as one AVX register, by the GCC/clang vector extension: each
 * lane rounds as the scalar code does. gcc vectorises neither the 16 lanes of selects in the
 * maximum below nor the beam's block test written as scalars (perf: vmaxss, vucomiss). */
typedef float S2sF8 __attribute__((vector_size(32)));
typedef int32_t S2sI8 __attribute__((vector_size(32)));

/* The helpers take and fill pointers: a 32-byte vector passed by value has another ABI in
 * builds without AVX (ARCH=), which gcc warns of. */
static inline void s2s_f8_load(S2sF8 *v, const float *x) { memcpy(v, x, sizeof *v); }

static inline void s2s_f8_splat(S2sF8 *v, float x) {
    for (int j = 0; j < 8; j++) (*v)[j] = x;
}

/* *l = x > *l ? x : *l in each lane, x[0..8): a NaN in x never wins */
static inline void s2s_f8_max(S2sF8 *l, const float *x) {
    S2sF8 v;
    s2s_f8_load(&v, x);
    S2sI8 gt = v > *l, vi, li;
    memcpy(&vi, &v, sizeof v);
    memcpy(&li, l, sizeof li);
    li = (gt & vi) | (~gt & li);
    memcpy(l, &li, sizeof li);
}

/* log Σ exp(x_i), the max subtracted; 16 independent partial sums let the compiler
 * vectorise the loop (one running float sum would be a serial chain), and 16 lanes of
 * selects the maximum (a NaN never wins but in x[0], as in one running comparison; the
 * sign a zero maximum keeps cannot change the result). */
static inline float s2s_logsumexp(const float *x, int n) {
    float mx = x[0];
    S2sF8 lo, hi; /* lanes 0–7 and 8–15 */
    s2s_f8_splat(&lo, -INFINITY);
    s2s_f8_splat(&hi, -INFINITY);
    int i = 1;
    for (; i + 16 <= n; i += 16) {
        s2s_f8_max(&lo, x + i);
        s2s_f8_max(&hi, x + i + 8);
    }
    for (; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    for (int j = 0; j < 8; j++) mx = lo[j] > mx ? lo[j] : mx;
    for (int j = 0; j < 8; j++) mx = hi[j] > mx ? hi[j] : mx;
    float part[16] = {0};
    i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) part[j] += s2s_expf(x[i + j] - mx);
    float sum = 0.0f;
    for (; i < n; i++) sum += s2s_expf(x[i] - mx);
    for (int j = 0; j < 16; j++) sum += part[j];
    return mx + logf(sum);
}

#endif
