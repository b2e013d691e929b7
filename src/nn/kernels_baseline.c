// The kernels of kernels_impl.h for any x86-64 CPU (this file alone is compiled for the x86-64
// baseline, SSE2: Makefile), and the reference the faster copies are tested against. A vector of
// 8 floats is two SSE registers (the compiler splits each operation); no FMA: a * b + c rounds twice.
#include <string.h>

typedef float vf __attribute__((vector_size(32)));
enum { VW = 8 };

static inline vf vf_load(const float *p) {
    vf v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void vf_store(float *p, vf v) { memcpy(p, &v, sizeof v); }
static inline vf vf_bcast(const float *p) { return (vf){*p, *p, *p, *p, *p, *p, *p, *p}; }
static inline vf vf_zero(void) { return (vf){0}; }
static inline vf vf_fma(vf a, vf b, vf c) { return a * b + c; }

enum { CONV_MR = 3, CONV_NV = 2, DW_MR = 2, DW_NR = 3, DWT_MR = 2, DWT_NV = 2 };

#include "kernels_impl.h"

const nn_kernels nn_kernels_baseline = {
    .name = "baseline",
    .conv_scratch_floats = conv_scratch_floats,
    .conv_forward = conv_forward,
    .conv_backward_weight = conv_backward_weight,
    .conv_backward_input = conv_backward_input,
};
