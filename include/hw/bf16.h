// bf16: bfloat16 numbers, the upper 16 bits of a float32 (sign, the same 8 exponent bits, 7 of the
// 23 mantissa bits), and the conversions to and from float that the shared weights of
// `--weights bf16` use (Buckwild, De Sa et al. 2015): reads widen exactly; the initial store
// rounds to nearest; every update's write rounds stochastically, without bias.
//
// The per-value rules are inline here so that the update's loop (src/nn/exec.c) vectorises them;
// the whole-buffer conversions (start weights, snapshots, checkpoints) are src/bf16.c's. The
// coupling across ranks sends its changes in bfloat16 with the same rounding to nearest
// (src/comm/couple_rule.c).
#ifndef HW_BF16_H
#define HW_BF16_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

// How a run stores the weights the Hogwild workers share (--weights).
typedef enum { HW_WEIGHTS_F32 = 0, HW_WEIGHTS_BF16 = 1 } hw_weights_dtype;
enum { HW_WEIGHTS_DTYPES = 2 };
// "f32", "bf16" (src/bf16.c).
const char *hw_weights_dtype_name(hw_weights_dtype dtype);
// The dtype named `text`; HW_ERR for any other text, naming both.
int hw_weights_dtype_parse(const char *text, hw_weights_dtype *dtype);
// Bytes a weight takes in that dtype: 4 or 2.
static inline size_t hw_weights_dtype_bytes(hw_weights_dtype dtype) { return dtype == HW_WEIGHTS_BF16 ? 2 : 4; }

static inline uint32_t hw_float_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

// The float whose upper half is h and lower half 0: exact (every bfloat16 is a float).
static inline float hw_bf16_to_float(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

// x rounded to the nearest bfloat16, ties to even (what torch's .bfloat16() does; past the largest
// finite one, infinity). A NaN stays a NaN (quiet), whatever its payload: its truncation could
// otherwise read as an infinity.
static inline uint16_t hw_bf16_from_float(float x) {
    uint32_t u = hw_float_bits(x);
    uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    return (uint16_t)((u & 0x7FFFFFFFu) > 0x7F800000u ? (u >> 16) | 0x40u : rounded);
}

// x rounded stochastically: up (away from zero) to the next bfloat16 with probability equal to the
// fraction of the gap that x lies beyond the one below it, down otherwise, so that the expected
// result is x exactly (unbiased): the low 16 bits of x's float are that fraction in units of
// 2^-16, and adding 16 uniform random bits to them carries into the upper half with that
// probability. It holds in every binade, subnormals included (the gaps are uniform within one, and
// the next binade's first number is the bit pattern after the last), and for negative x (sign and
// magnitude: the magnitude is rounded without bias). A bfloat16 already (low half 0) never moves;
// an infinity stays one; a NaN stays a NaN; a value within a gap of the largest finite one rounds
// to infinity with the probability of its fraction. `random`: its low 16 bits are used.
static inline uint16_t hw_bf16_round_stochastic(float x, uint32_t random) {
    uint32_t u = hw_float_bits(x);
    uint32_t rounded = (u + (random & 0xFFFFu)) >> 16;
    return (uint16_t)((u & 0x7FFFFFFFu) > 0x7F800000u ? (u >> 16) | 0x40u : rounded);
}

// The random bits for the write of weight `index` under `key`: a stateless hash (Wellons'
// lowbias32, two multiplies) of the index mixed with the key, so that a loop over the weights has
// no serial dependency and vectorises. For one key, distinct indices below 2^32 give distinct
// values (each step of the hash is a bijection). A worker draws a fresh 64-bit key from its own
// seeded PCG32 (include/hw/rng.h) for every step: its rounding is reproducible from the seed.
static inline uint32_t hw_bf16_random_bits(uint64_t key, size_t index) {
    uint32_t x = ((uint32_t)index + (uint32_t)key) ^ (uint32_t)(key >> 32);
    x ^= x >> 16;
    x *= 0x7FEB352Du;
    x ^= x >> 15;
    x *= 0x846CA68Bu;
    x ^= x >> 16;
    return x;
}

// n floats rounded to the nearest bfloat16 (hw_bf16_from_float): exact for values that are
// bfloat16 already.
void hw_bf16_from_floats(uint16_t *out, const float *in, size_t n);
// n bfloat16 widened to floats (exact).
void hw_bf16_to_floats(float *out, const uint16_t *in, size_t n);

#endif
