/* rng.c — PCG32 (XSH RR), following the reference pcg32_random_r. */
#include "s2s/rng.h"
#include "s2s/common.h"

#include <math.h>

void rng_init(Rng *r, uint64_t seed, uint64_t stream) {
    r->state = 0;
    r->inc = (stream << 1u) | 1u;
    rng_u32(r);
    r->state += seed;
    rng_u32(r);
}

uint32_t rng_u32(Rng *r) {
    uint64_t old = r->state;
    r->state = old * 6364136223846793005ULL + r->inc;
    uint32_t xorshifted = (uint32_t)(((old >> 18u) ^ old) >> 27u);
    uint32_t rot = (uint32_t)(old >> 59u);
    return (xorshifted >> rot) | (xorshifted << ((-rot) & 31));
}

uint32_t rng_below(Rng *r, uint32_t n) {
    S2S_ASSERT(n > 0);
    uint32_t threshold = (uint32_t)(-n) % n; /* rejection keeps it unbiased */
    for (;;) {
        uint32_t x = rng_u32(r);
        if (x >= threshold) return x % n;
    }
}

float rng_uniform(Rng *r) { return (float)(rng_u32(r) >> 8) * (1.0f / 16777216.0f); }

float rng_uniform_range(Rng *r, float lo, float hi) { return lo + (hi - lo) * rng_uniform(r); }

double rng_normal(Rng *r) {
    double u1 = ((double)rng_u32(r) + 1.0) / 4294967296.0; /* (0, 1] */
    double u2 = (double)rng_u32(r) / 4294967296.0;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void rng_shuffle_int(Rng *r, int *a, int n) {
    for (int i = n - 1; i > 0; i--) {
        int j = (int)rng_below(r, (uint32_t)i + 1);
        int t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}
