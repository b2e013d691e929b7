// The CPU kernels (copy.h) for any x86-64 CPU (this file alone is compiled for the x86-64
// baseline, SSE2: Makefile), and the reference the faster copies are tested against: 4 floats in
// an xmm register, 16 registers, no FMA (a * b + c rounds twice).
#include <emmintrin.h>

typedef __m128 vf;                                // 4 floats: + and * work on it (a GCC/clang vector)
typedef int vi __attribute__((vector_size(16)));  // its lanes as integers: what comparing two vf gives
enum { VW = 4 };

static inline vf vf_load(const float *p) { return _mm_loadu_ps(p); }
static inline void vf_store(float *p, vf v) { _mm_storeu_ps(p, v); }
static inline vf vf_bcast(const float *p) { return _mm_load1_ps(p); }
static inline vf vf_zero(void) { return _mm_setzero_ps(); }
static inline vf vf_fma(vf a, vf b, vf c) { return a * b + c; }
static inline float vf_sum(vf v) {  // the halves added, then the last two
    __m128 s = _mm_add_ps(v, _mm_movehl_ps(v, v));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)));
}
static inline int vf_nonzero_bits(vf v) { return _mm_movemask_ps(_mm_cmpneq_ps(v, _mm_setzero_ps())); }
// An empty asm that "changes" v: the compiler may no longer load v again from memory where it is
// used. (Without it GCC folds the weight gradient's input loads into each multiply-add that uses
// them, two loads where one is written, and the loads limit the loop.)
static inline void vf_in_register(vf *v) { __asm__("" : "+x"(*v)); }
static inline vf vf_permute(vf v, vi idx) {
    float in[4], out[4];
    _mm_storeu_ps(in, v);
    for (int l = 0; l < 4; l++) out[l] = in[idx[l]];
    return _mm_loadu_ps(out);
}
static inline vi vi_from_bytes(unsigned long long order) {
    return (vi){(int)(order & 255), (int)(order >> 8 & 255), (int)(order >> 16 & 255), (int)(order >> 24 & 255)};
}
static inline vf vf_even(vf a, vf b) { return _mm_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)); }
static inline vf vf_odd(vf a, vf b) { return _mm_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1)); }
static inline vf vf_pairs_low(vf a, vf b) { return _mm_unpacklo_ps(a, b); }
static inline vf vf_pairs_high(vf a, vf b) { return _mm_unpackhi_ps(a, b); }
static inline void vf_transpose(vf r[VW]) { _MM_TRANSPOSE4_PS(r[0], r[1], r[2], r[3]); }

enum { CONV_MR = 4, CONV_NV = 2, DW_MR = 2, DW_NR = 4, DWT_MR = 3, DWT_NV = 3, DWS_C = 1, DWS_K = 5 };
enum { DXS_K = 5, DXS_CV = 2 };  // input_gradient_sparse: DXS_K taps x DXS_CV vectors of channels
// linear.h's tiles; linear runs on the BLAS, whose own kernels for the CPU ran 4.6x faster.
enum { LIN_B = 3, LIN_O = 4, LDW_O = 4, LDW_V = 3, LINEAR_ON_KERNELS = 0 };

#include "positions_vf.h"

static const char KERNELS_NAME[] = "baseline";

#include "copy.h"

const nn_kernels *nn_kernels_baseline(void) { return &kernels; }
