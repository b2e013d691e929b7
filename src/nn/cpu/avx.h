// The vector primitives of the CPU kernels (copy.h) on x86 with AVX2: 8 floats in a ymm register. Shared by
// avx2.c and avx512.c, each compiled with its own instruction set (Makefile): the
// same intrinsics become VEX or EVEX instructions, with 16 or 32 registers for the tiles.
#ifndef HW_NN_KERNELS_AVX_H
#define HW_NN_KERNELS_AVX_H

#include <immintrin.h>

typedef __m256 vf;                                // 8 floats: + and * work on it (a GCC/clang vector)
typedef int vi __attribute__((vector_size(32)));  // its lanes as integers: what comparing two vf gives
enum { VW = 8 };

static inline vf vf_load(const float *p) { return _mm256_loadu_ps(p); }
static inline void vf_store(float *p, vf v) { _mm256_storeu_ps(p, v); }
// A broadcast straight from memory: one load, where a scalar load and a shuffle would be two.
static inline vf vf_bcast(const float *p) { return _mm256_broadcast_ss(p); }
static inline vf vf_zero(void) { return _mm256_setzero_ps(); }
static inline vf vf_fma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
// The sum of the lanes: the two halves added, then the halves of that, then the last two.
static inline float vf_sum(vf v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)));
}
// A bit per lane, set where the lane is not zero (NaN included).
static inline int vf_nonzero_bits(vf v) {
    return _mm256_movemask_ps(_mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_NEQ_UQ));
}
// The lanes of v in the order idx gives: lane l takes v[idx[l]].
static inline vf vf_permute(vf v, vi idx) { return _mm256_permutevar8x32_ps(v, (__m256i)idx); }
// The bytes of `order`, from the lowest, as the lanes of a vi.
static inline vi vi_from_bytes(unsigned long long order) {
    return (vi)_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)order));
}
// An empty asm that "changes" v: the compiler may no longer load v again from memory where it is
// used. (Without it GCC folds the weight gradient's input loads into each multiply-add that uses
// them, two loads where one is written, and the loads limit the loop.)
static inline void vf_in_register(vf *v) { __asm__("" : "+x"(*v)); }

// a0 a2 a4 a6 b0 b2 b4 b6, and a1 a3 ... b7: in-lane shuffles, then one 64-bit permute.
static inline vf vf_even(vf a, vf b) {
    __m256d t = _mm256_castps_pd(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)));
    return _mm256_castpd_ps(_mm256_permute4x64_pd(t, _MM_SHUFFLE(3, 1, 2, 0)));
}
static inline vf vf_odd(vf a, vf b) {
    __m256d t = _mm256_castps_pd(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm256_castpd_ps(_mm256_permute4x64_pd(t, _MM_SHUFFLE(3, 1, 2, 0)));
}
// a0 b0 a1 b1 a2 b2 a3 b3, and a4 b4 ... a7 b7.
static inline vf vf_pairs_low(vf a, vf b) {
    return _mm256_permute2f128_ps(_mm256_unpacklo_ps(a, b), _mm256_unpackhi_ps(a, b), 0x20);
}
static inline vf vf_pairs_high(vf a, vf b) {
    return _mm256_permute2f128_ps(_mm256_unpacklo_ps(a, b), _mm256_unpackhi_ps(a, b), 0x31);
}

// r[0..7] as the rows of an 8 x 8 block, transposed in place.
static inline void vf_transpose(vf r[VW]) {
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0)),
           u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0)),
           u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 u4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0)),
           u5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 u6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0)),
           u7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
    r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
    r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
    r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

#endif
