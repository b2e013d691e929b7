// rng: the seeded random generator every worker owns (initialisation, shuffling, dropout).
// PCG32 (O'Neill): small state, good statistics, and the same stream on every platform.
#ifndef HW_RNG_H
#define HW_RNG_H

#include <stdint.h>

typedef struct {
    uint64_t state;
    uint64_t increment;  // odd; selects the stream
} hw_rng;

// Seeds the generator; different stream values give independent sequences for the same seed.
void hw_rng_seed(hw_rng *rng, uint64_t seed, uint64_t stream);
uint32_t hw_rng_u32(hw_rng *rng);
// Uniform in [0, 1) with 24 bits of precision.
float hw_rng_uniform(hw_rng *rng);
// Uniform integer in [0, bound), without modulo bias.
uint32_t hw_rng_below(hw_rng *rng, uint32_t bound);
// Uniform integer in [0, bound) for bounds beyond 32 bits too (a shuffle of more than 2^32
// samples, a histogram's total), without bias; hw_rng_below's draw for a bound that fits 32 bits.
uint64_t hw_rng_below64(hw_rng *rng, uint64_t bound);
// Standard normal (Box-Muller).
float hw_rng_normal(hw_rng *rng);

#endif
