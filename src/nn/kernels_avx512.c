// The kernels of kernels_impl.h for CPUs with AVX-512 (F, VL, BW, DQ; this file alone is compiled
// with them: Makefile). The vectors stay 8 floats wide: LeNet's output rows are 24 and 8 floats,
// and Zen 4 runs 512-bit operations at the rate of two 256-bit ones. What AVX-512 adds here is 32
// vector registers: larger tiles, fewer loads per multiply-add.
#include "kernels_avx.h"
#include "kernels_avx512_tiles.h"

static const char KERNELS_NAME[] = "avx512";

#include "kernels_impl.h"

const nn_kernels *nn_kernels_avx512(void) { return &kernels; }
