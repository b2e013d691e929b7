// The CPU kernels (copy.h) for CPUs with AVX-512 (F, VL, BW, DQ; this file alone is compiled
// with them: Makefile). Its own vectors (vf) stay 8 floats wide, for the kernels that work on
// whole output rows (LeNet's are 24 and 8 floats) or on channels; the forward and the weight
// gradient over positions take 16 (vp, avx512_tiles.h), two runs of a row each: LeNet's
// step 1.3x faster on Zen 5, whose cores run 512-bit multiply-adds at full width (bench/RESULTS.md,
// issue 28). And 32 vector registers: larger tiles, fewer loads per multiply-add.
#include "avx.h"
#include "avx512_tiles.h"

static const char KERNELS_NAME[] = "avx512";

#include "copy.h"

const nn_kernels *nn_kernels_avx512(void) { return &kernels; }
