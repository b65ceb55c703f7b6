/* rng.h — a seeded, deterministic random number generator (PCG32, O'Neill 2014).
 *
 * Each Rng is a small value (no globals). rng_init(seed, stream) gives statistically
 * independent sequences for the same seed, one per RngStream, so that e.g. changing the
 * dropout rate does not change the initial weights or the data order. */
#ifndef S2S_RNG_H
#define S2S_RNG_H

#include <stdint.h>

typedef enum RngStream {
    RNG_STREAM_INIT = 1,    /* parameter initialisation */
    RNG_STREAM_DROPOUT = 2, /* dropout masks */
    RNG_STREAM_SHUFFLE = 3, /* batch order */
    RNG_STREAM_DATA = 4,    /* generated datasets */
    RNG_STREAM_SUBWORD = 5, /* BPE-dropout's segmentations */
    RNG_STREAM_CORPORA = 6, /* the pairs an epoch draws from weighted corpora */
} RngStream;

typedef struct Rng {
    uint64_t state;
    uint64_t inc;
} Rng;

void rng_init(Rng *r, uint64_t seed, uint64_t stream);
uint32_t rng_u32(Rng *r);
uint32_t rng_below(Rng *r, uint32_t n);   /* uniform in [0, n), unbiased; n > 0 */
float rng_uniform(Rng *r);                /* uniform in [0, 1), 24 random bits */
float rng_uniform_range(Rng *r, float lo, float hi);
double rng_normal(Rng *r);                /* standard normal (Box–Muller) */
void rng_shuffle_int(Rng *r, int *a, int n);

#endif
