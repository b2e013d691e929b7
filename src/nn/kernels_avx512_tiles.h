// The register tiles of the AVX-512 copy of the CPU kernels (kernels_impl.h): 32 vector registers,
// larger tiles than AVX2's 16 allow. A header of its own so that the tests compile the same tiles
// with AVX2 as well (tests/unit/kernels_avx512_tiles.c) and check their edge cases on CPUs without
// AVX-512, where the real copy cannot run.
#ifndef HW_NN_KERNELS_AVX512_TILES_H
#define HW_NN_KERNELS_AVX512_TILES_H

enum { CONV_MR = 5, CONV_NV = 4, DW_MR = 4, DW_NR = 5, DWT_MR = 6, DWT_NV = 3, DWS_C = 4, DWS_K = 5 };
enum { DXS_K = 5, DXS_CV = 2 };  // input_gradient_sparse: DXS_K taps x DXS_CV vectors of channels

#endif
