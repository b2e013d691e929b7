// The register tiles and the vectors of output positions (vp) of the AVX-512 copy of the CPU kernels
// (copy.h): 32 vector registers, larger tiles than AVX2's 16 allow. A header of its own so
// that the tests compile the same tiles and 16-position vectors with AVX2 as well
// (tests/unit/kernels_avx512_tiles.c) and check their edge cases on CPUs without AVX-512, where the
// real copy cannot run.
#ifndef HW_NN_KERNELS_AVX512_TILES_H
#define HW_NN_KERNELS_AVX512_TILES_H

#include <string.h>

enum { CONV_MR = 5, CONV_NV = 4, DW_MR = 4, DW_NR = 5, DWT_MR = 6, DWT_NV = 3, DWS_C = 4, DWS_K = 5 };
enum { DXS_K = 5, DXS_CV = 2 };  // input_gradient_sparse: DXS_K taps x DXS_CV vectors of channels
enum { LIN_B = 4, LIN_O = 5, LDW_O = 6, LDW_V = 4, LINEAR_ON_KERNELS = 1 };  // linear.h

// The vectors of output positions (conv_pool.h, vp): 16 floats, a zmm register. LeNet's output
// rows are 24 and 8 floats, so a vector is two runs of 8 (position_rows), each within one row:
// vp_rows joins them. Without AVX-512 (the tests' copy) the same 16 lanes as GCC vector operations
// and AVX2 multiply-adds.
typedef float vp __attribute__((vector_size(64)));
enum { VP = 16 };

static inline vp vp_load(const float *p) {
    vp v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void vp_store(float *p, vp v) { memcpy(p, &v, sizeof v); }
static inline vp vp_zero(void) { return (vp){0}; }
#ifdef __AVX512F__
// One vbroadcastss from memory, a load alone. (`vp_zero() + *p` is not the same: 0 + -0.0 is +0.0,
// so GCC kept the addition and broadcast from a register, two more instructions per weight, one of
// them on the multiply-adds' port 5 in Intel's cores.)
static inline vp vp_bcast(const float *p) { return (vp)_mm512_set1_ps(*p); }
static inline vp vp_rows(const float *lo, const float *hi) {
    return (vp)_mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(lo)), _mm256_loadu_ps(hi), 1);
}
static inline vp vp_fma(vp a, vp b, vp c) { return (vp)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c); }
static inline void vp_in_register(vp *v) { __asm__("" : "+v"(*v)); }
static inline float vp_sum(vp v) {  // the 8-float halves added, then as AVX2's vf_sum
    return vf_sum(_mm256_add_ps(_mm512_castps512_ps256((__m512)v), _mm512_extractf32x8_ps((__m512)v, 1)));
}
#else
static inline vp vp_bcast(const float *p) {
    const float x = *p;
    return (vp){x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x};
}
static inline vp vp_rows(const float *lo, const float *hi) {
    vp v;
    memcpy(&v, lo, sizeof v / 2);
    memcpy((float *)&v + VP / 2, hi, sizeof v / 2);
    return v;
}
// Fused, as AVX2's 8-float halves: the forward's sums then round as the AVX2 copy's do, bit for bit.
static inline vp vp_fma(vp a, vp b, vp c) {
    __m256 a2[2], b2[2], c2[2];
    memcpy(a2, &a, sizeof a);
    memcpy(b2, &b, sizeof b);
    memcpy(c2, &c, sizeof c);
    for (int h = 0; h < 2; h++) c2[h] = _mm256_fmadd_ps(a2[h], b2[h], c2[h]);
    memcpy(&c, c2, sizeof c);
    return c;
}
static inline void vp_in_register(vp *v) { (void)v; }
static inline float vp_sum(vp v) {  // the same order as the AVX-512 copy's
    __m256 h[2];
    memcpy(h, &v, sizeof v);
    return vf_sum(_mm256_add_ps(h[0], h[1]));
}
#endif

#endif
