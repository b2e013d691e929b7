// The kernels of kernels_impl.h for CPUs with AVX2 and FMA (this file alone is compiled with
// -mavx2 -mfma: Makefile). 16 vector registers: tiles of 10 accumulators.
#include "kernels_avx.h"

enum { CONV_MR = 5, CONV_NV = 2, DW_MR = 2, DW_NR = 5, DWT_MR = 4, DWT_NV = 3 };

#include "kernels_impl.h"

const nn_kernels nn_kernels_avx2 = {
    .name = "avx2",
    .conv_scratch_floats = conv_scratch_floats,
    .conv_forward = conv_forward,
    .conv_backward_weight = conv_backward_weight,
    .conv_backward_input = conv_backward_input,
};
