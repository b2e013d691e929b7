// rng: PCG32 (XSH RR variant), see https://www.pcg-random.org.
#include "hw/rng.h"

#include <math.h>

void hw_rng_seed(hw_rng *rng, uint64_t seed, uint64_t stream) {
    rng->state = 0;
    rng->increment = (stream << 1u) | 1u;
    hw_rng_u32(rng);
    rng->state += seed;
    hw_rng_u32(rng);
}

uint32_t hw_rng_u32(hw_rng *rng) {
    uint64_t old = rng->state;
    rng->state = old * 6364136223846793005ULL + rng->increment;
    uint32_t xorshifted = (uint32_t)(((old >> 18u) ^ old) >> 27u);
    uint32_t rot = (uint32_t)(old >> 59u);
    return (xorshifted >> rot) | (xorshifted << ((-rot) & 31u));
}

float hw_rng_uniform(hw_rng *rng) { return (float)(hw_rng_u32(rng) >> 8) * (1.0f / 16777216.0f); }

uint32_t hw_rng_below(hw_rng *rng, uint32_t bound) {
    // Lemire's rejection: values below `threshold` would bias the result, so they are drawn again.
    uint32_t threshold = (-bound) % bound;
    for (;;) {
        uint32_t r = hw_rng_u32(rng);
        if (r >= threshold) return r % bound;
    }
}

uint64_t hw_rng_below64(hw_rng *rng, uint64_t bound) {
    if (bound <= UINT32_MAX) return hw_rng_below(rng, (uint32_t)bound);
    uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    for (;;) {
        uint64_t high = hw_rng_u32(rng);  // two statements: the draws' order is fixed
        uint64_t r = high << 32 | hw_rng_u32(rng);
        if (r < limit) return r % bound;
    }
}

float hw_rng_normal(hw_rng *rng) {
    float u1 = hw_rng_uniform(rng);
    float u2 = hw_rng_uniform(rng);
    if (u1 < 1e-12f) u1 = 1e-12f;
    return sqrtf(-2.0f * logf(u1)) * cosf(6.28318530717958647692f * u2);
}
