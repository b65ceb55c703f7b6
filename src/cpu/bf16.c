/* bf16.c — float32 ↔ bfloat16. */
#include "s2s/bf16.h"

#include <string.h>

void bf16_from_f32(const float *restrict x, uint16_t *restrict y, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, x + i, sizeof u);
        uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
        /* a NaN must not round into Inf: keep its top bits and make it quiet */
        y[i] = (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u : r);
    }
}

float bf16_to_f32(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
