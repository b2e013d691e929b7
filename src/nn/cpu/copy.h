// copy: one copy of the CPU kernels (kernels.h), the file each src/nn/cpu/<isa>.c includes to
// compile every kernel for its instruction set (its flags are in the Makefile): the convolution
// and 2x2 max-pooling kernels (conv_pool.h), the linear kernels (linear.h), the SGD pass over
// bfloat16 weights (sgd_bf16.h, plain C the compiler vectorises), and the copy's table.
// The kernels are written once, over the vector primitives and register tiles that the including
// file defines first:
//
//   vf                        a vector of VW floats with + and * (GCC and clang vector extensions)
//   vf_load, vf_store         unaligned loads and stores of VW floats
//   vf_bcast(p)               *p in every lane;  vf_zero()  all lanes 0
//   vf_fma(a, b, c)           a * b + c (fused where the instruction set has FMA)
//   vf_even, vf_odd           the even and the odd lanes of a, then of b; vf_pairs_low, _high:
//                             a0 b0 a1 b1 ... from the first and from the second half of the lanes
//   vf_transpose(r)           r[0..VW) as the rows of a square block, transposed in place
//   vf_in_register(&v)        nothing, but the compiler must hold v in a register from there on
//   vf_sum(v), vp_sum(v)      the sum of v's lanes, added as a tree (halves, then halves of those)
//   vf_nonzero_bits(v)        a bit per lane, set where the lane is not 0 (NaN included)
//   vf_permute(v, idx)        lane l takes v[idx[l]];  vi_from_bytes(u)  the bytes of u as a vi
//   CONV_MR, CONV_NV          the register tile: CONV_MR output channels x CONV_NV vectors of positions
//   DW_MR, DW_NR              the weight gradient's tile over positions: DW_MR channels x DW_NR taps
//   DWT_MR, DWT_NV            and over channels: DWT_MR taps x DWT_NV vectors of channels
//   DWS_C, DWS_K              the weight gradient over dy's nonzeros: DWS_C channels x DWS_K kernel rows
//   DXS_K, DXS_CV             the input gradient over dy's nonzeros: DXS_K taps x DXS_CV vectors of channels
//   vi                        a vector of VW ints (what comparing two vf gives)
//   vp, VP                    a vector of VP output positions, for the forward and the weight gradient over
//                             positions: vf itself (VP = VW: positions_vf.h) or wider (AVX-512: 16)
//   vp_rows(lo, hi)           VP floats: VP / 2 from lo, then VP / 2 from hi (two runs of an output row each)
//   vp_load, vp_store, vp_bcast, vp_zero, vp_fma, vp_in_register   as vf's
//   LIN_B, LIN_O              the linear forward's tile: LIN_B samples x LIN_O outputs
//   LDW_O, LDW_V              the linear weight gradient's tile: LDW_O outputs x LDW_V vectors of inputs
//   LINEAR_ON_KERNELS         1 where linear runs on these kernels, 0 where on the BLAS (kernels.h)
//   KERNELS_NAME              the copy's name: "avx2"
//
// Every function of the kernels is static: each instruction set's copy stays in its own object
// file, and only its table (`kernels`, below, which the including file returns from
// nn_kernels_<isa>()) is seen from outside.

#include "conv_pool.h"
#include "linear.h"
#include "sgd_bf16.h"

static const nn_kernels kernels = {
    .name = KERNELS_NAME,
    .conv_scratch_floats = conv_scratch_floats,
    .conv_forward = conv_forward,
    .conv_backward_weight = conv_backward_weight,
    .conv_backward_input = conv_backward_input,
    .pool2x2_forward = pool2x2_forward,
    .pool2x2_backward = pool2x2_backward,
    .linear_on_kernels = LINEAR_ON_KERNELS,
    .linear_forward = linear_forward,
    .linear_backward_weight = linear_backward_weight,
    .sgd_bf16 = sgd_bf16,
};
