// The AVX-512 copy of the CPU kernels with AVX2 instructions: the same math (copy.h), the
// same 8-float vectors, 16-position vectors and register tiles (avx512_tiles.h) as
// src/nn/cpu/avx512.c, compiled with -mavx2 -mfma only (Makefile). The tiles' edge cases (a
// last tile of fewer channels, taps or vectors, a plane's last vector of one run) are what the
// copies differ in; with this the tests check the AVX-512 copy's on any AVX2 CPU (test_nn.c), not
// only on one with AVX-512.
#include "nn/cpu/avx.h"
#include "nn/cpu/avx512_tiles.h"

static const char KERNELS_NAME[] = "avx512 tiles on avx2";

#include "nn/cpu/copy.h"

const nn_kernels *nn_test_kernels_avx512_tiles(void);
const nn_kernels *nn_test_kernels_avx512_tiles(void) { return &kernels; }
