// dropout_mask: the GPU's dropout masks, a counter-based hash that the host and the device compute
// alike (HW_HOST_DEVICE): the kernels draw with it (kernels.cuh), the GPU backend seeds each layer
// with it (backend.c), and the tests recompute the masks on the host. Plain C11 outside nvcc.
// Private to src/cuda/ and the tests.
#ifndef HW_CUDA_DROPOUT_MASK_H
#define HW_CUDA_DROPOUT_MASK_H

#include "hw/host_device.h"

#include <stdint.h>

// splitmix64's finaliser: a bijective 64-bit mix.
static inline HW_HOST_DEVICE uint64_t hw_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Uniform in [0, 1) with 24 bits, a pure function of (seed, step, index): reproducible, and
// independent of how the work is split over threads.
static inline HW_HOST_DEVICE float hw_dropout_uniform(uint64_t seed, uint64_t step, uint64_t index) {
    uint64_t h = hw_mix64(hw_mix64(seed ^ hw_mix64(step + 0x9E3779B97F4A7C15ull)) + index);
    return (float)(h >> 40) * (1.0f / 16777216.0f);
}

// The seed the runner gives the dropout layer at index `layer` of a model.
static inline HW_HOST_DEVICE uint64_t hw_dropout_layer_seed(uint64_t seed, int layer) {
    return hw_mix64(seed + 0xD1B54A32D192ED03ull * (uint64_t)(layer + 1));
}

#endif
