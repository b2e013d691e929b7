// The CPU kernels (copy.h) for CPUs with AVX2 and FMA (this file alone is compiled with
// -mavx2 -mfma: Makefile). 16 vector registers: tiles of 10 accumulators.
#include "avx.h"

enum { CONV_MR = 5, CONV_NV = 2, DW_MR = 2, DW_NR = 5, DWT_MR = 4, DWT_NV = 3, DWS_C = 2, DWS_K = 5 };
enum { DXS_K = 5, DXS_CV = 2 };  // input_gradient_sparse: DXS_K taps x DXS_CV vectors of channels
enum { LIN_B = 3, LIN_O = 4, LDW_O = 4, LDW_V = 3, LINEAR_ON_KERNELS = 1 };  // linear.h

#include "positions_vf.h"

static const char KERNELS_NAME[] = "avx2";

#include "copy.h"

const nn_kernels *nn_kernels_avx2(void) { return &kernels; }
