// The vector primitives of kernels_impl.h on x86 with AVX: 8 floats in a ymm register. Shared by
// kernels_avx2.c and kernels_avx512.c, each compiled with its own instruction set (Makefile): the
// same intrinsics become VEX or EVEX instructions, with 16 or 32 registers for the tiles.
#ifndef HW_NN_KERNELS_AVX_H
#define HW_NN_KERNELS_AVX_H

#include <immintrin.h>

typedef __m256 vf;  // a GCC/clang vector of 8 floats: + and * work on it
enum { VW = 8 };

static inline vf vf_load(const float *p) { return _mm256_loadu_ps(p); }
static inline void vf_store(float *p, vf v) { _mm256_storeu_ps(p, v); }
// A broadcast straight from memory: one load, where a scalar load and a shuffle would be two.
static inline vf vf_bcast(const float *p) { return _mm256_broadcast_ss(p); }
static inline vf vf_zero(void) { return _mm256_setzero_ps(); }
static inline vf vf_fma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }

#endif
