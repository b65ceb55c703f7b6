/* bf16.h — bfloat16 numbers: float32 rounded to nearest even in the top 16 bits, and back.
 *
 * The lowest piece of the bf16 path, below the GEMM back end and the parameter store (its
 * snapshot of the weights): pure arithmetic, no state, no memory of its own. */
#ifndef S2S_BF16_H
#define S2S_BF16_H

#include <stddef.h>
#include <stdint.h>

/* y[i] = x[i] rounded to the nearest bfloat16 (ties to even; NaN stays NaN). */
void bf16_from_f32(const float *x, uint16_t *y, size_t n);
/* The float32 value of a bfloat16. */
float bf16_to_f32(uint16_t b);

#endif
