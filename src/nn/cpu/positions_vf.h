// The vectors of output positions of the CPU kernels (vp, copy.h) for a copy whose own vectors fill no more
// than half of an output row's multiple of NN_KERNEL_VECTOR (AVX2's 8 floats, SSE2's 4): vp is vf.
// A vector's two runs then lie next to each other in one row: vp_rows is one load from lo.
#ifndef HW_NN_KERNELS_POSITIONS_VF_H
#define HW_NN_KERNELS_POSITIONS_VF_H

typedef vf vp;
enum { VP = VW };

static inline vp vp_load(const float *p) { return vf_load(p); }
static inline void vp_store(float *p, vp v) { vf_store(p, v); }
static inline vp vp_bcast(const float *p) { return vf_bcast(p); }
static inline vp vp_zero(void) { return vf_zero(); }
static inline vp vp_fma(vp a, vp b, vp c) { return vf_fma(a, b, c); }
static inline void vp_in_register(vp *v) { vf_in_register(v); }
static inline float vp_sum(vp v) { return vf_sum(v); }
static inline vp vp_rows(const float *lo, const float *hi) {
    (void)hi;  // lo + VP / 2
    return vf_load(lo);
}

#endif
