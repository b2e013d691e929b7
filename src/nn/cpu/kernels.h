// kernels: the CPU kernels of src/nn/ that run at the speed of the CPU, one copy per instruction
// set (AVX-512, AVX2 + FMA, the x86-64 baseline), chosen at run time by what the CPU reports;
// HOGWILD_CPU_PATH forces one (hw_nn_kernels_select, include/hw/nn.h). Private to src/nn/.
//
// The math is written once (copy.h: conv_pool.h, linear.h); cpu/<isa>.c compiles it with that instruction
// set's vector primitives and register tiles (and only that file gets the instruction set's
// compiler flags: Makefile), and defines the table below.
#ifndef HW_NN_KERNELS_H
#define HW_NN_KERNELS_H

#include "hw/nn.h"
#include "hw/sgd_update.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *name;  // "avx512", "avx2", "baseline": the values of HOGWILD_CPU_PATH
    // Floats of scratch the convolution kernels need for a layer of these sizes.
    size_t (*conv_scratch_floats)(const hw_conv2d_dims *d);
    // conv2d for the sizes nn_conv2d_direct accepts, with conv2d_forward's and conv2d_backward's
    // arguments (src/nn/cpu_layers.h). backward_weight writes dweight and dbias (either may be NULL).
    // conv_forward's keep: NULL, or a byte per (sample, output channel), 0 where the channel is not
    // needed: its plane is set to zero, not computed.
    void (*conv_forward)(float *out, float *scratch, const float *in, const float *weight, const float *bias,
                         const uint8_t *keep, const hw_conv2d_dims *d, int batch);
    void (*conv_backward_weight)(float *dweight, float *dbias, float *scratch, const float *in, const float *dout,
                                 const hw_conv2d_dims *d, int batch);
    void (*conv_backward_input)(float *din, float *scratch, const float *dout, const float *weight,
                                const hw_conv2d_dims *d, int batch);
    // maxpool2d with 2x2 windows, stride 2, over `planes` planes whose output rows are at least a
    // vector long or half of one (nn_pool2x2_kernel), with maxpool2d's rule and argmax. Backward
    // writes every input a window covers; the caller zeroes an odd last row or column.
    void (*pool2x2_forward)(float *out, int32_t *argmax, const float *in, int planes, int in_h, int in_w, int out_h,
                            int out_w);
    void (*pool2x2_backward)(float *din, const float *dout, const int32_t *argmax, int planes, int in_h, int in_w,
                             int out_h, int out_w);
    // linear for the sizes nn_linear_direct accepts (linear.h): out = in W^T + bias, and
    // the weight gradient dweight = dout^T in (written, not added to). linear_on_kernels: 1 where
    // the copy's linear ran faster than the BLAS (avx512, avx2), 0 where the BLAS runs the layer
    // (baseline: SSE2 without FMA ran 4.6x slower than OpenBLAS's own kernels for that CPU).
    int linear_on_kernels;
    void (*linear_forward)(float *out, const float *in, const float *weight, const float *bias, int n_in, int n_out,
                           int batch);
    void (*linear_backward_weight)(float *dweight, const float *dout, const float *in, int n_in, int n_out, int batch);
    // --weights bf16's SGD pass over n shared bfloat16 weights w, the first of them weight `first`
    // of the flat buffer (sgd_bf16.h says how): the rule in form `variant` in float, each result
    // rounded stochastically with hw_bf16_random_bits(key, first + i), copy (NULL: none) given the
    // float of each weight written, applied (NULL: none) the increments written.
    void (*sgd_bf16)(hw_sgd_variant variant, uint16_t *w, float *copy, float *v, const float *g, double *applied,
                     size_t n, size_t first, uint64_t key, float lr, float momentum, float wd);
} nn_kernels;

// Each copy's table, from its cpu/<isa>.c.
const nn_kernels *nn_kernels_avx512(void);
const nn_kernels *nn_kernels_avx2(void);
const nn_kernels *nn_kernels_baseline(void);

// The rows of output the kernels take are multiples of NN_KERNEL_VECTOR floats (convolution) or at
// least that long (pooling): a multiple of every copy's vector (8 floats with AVX, 4 with SSE2).
enum { NN_KERNEL_VECTOR = 8 };

// The copy in use: the one hw_nn_kernels_select chose, or on first use the one HOGWILD_CPU_PATH
// names or the automatic choice, the copy needing the most that the CPU runs (kernels.c says why)
// (exits with the message when HOGWILD_CPU_PATH names no copy, or one this CPU cannot run).
const nn_kernels *nn_kernels_in_use(void);

// True when conv2d of these sizes runs on the kernels: stride 1, no padding, output rows of whole
// vectors (LeNet's convolutions). Other sizes take im2col and the BLAS.
int nn_conv2d_direct(const hw_conv2d_dims *d);

// True when maxpool2d of these sizes runs on the kernels: 2x2 windows, stride 2, output rows of at
// least NN_KERNEL_VECTOR floats (LeNet's pool1: 12), or of half of it over an even number of rows
// (pool2: 4 x 4).
int nn_pool2x2_kernel(const hw_maxpool2d_dims *d);

// True when linear of these sizes runs on the kernels (forward and weight gradient; the input
// gradient stays a BLAS GEMM): the copy in use has linear_on_kernels, and the layer is of the
// sizes where they were measured faster than OpenBLAS (Zen 5, batch 64; bench/nn_step.md,
// "Linear layers on the kernels"): NN_LINEAR_MIN_IN to NN_LINEAR_MAX_IN inputs, a multiple of
// NN_LINEAR_IN_VECTOR (the widest copy's vector, AVX-512's 16: whole vectors in every copy), and
// at least NN_LINEAR_MIN_WEIGHTS weights.
// - Fewer inputs: each output's VP partial sums are added up once per output, which a short sum
//   does not pay back (128 -> 128: 18.7 us against OpenBLAS's 11.8 forward; 256 -> 128 and 320 -> 128
//   lost too). Inputs past whole vectors take a scalar loop: 63 -> 1000 ran 5x slower.
// - More inputs: the avx2 copy's weight gradient lost from 1024 (193 against 137 us: rows of x 4 KB
//   apart fall in the same L1 sets).
// - Fewer weights: the 10-output layers ran faster on OpenBLAS's small-matrix kernels.
// The MLP's first layer (784 -> 128) is the one such layer of the shipped models.
enum { NN_LINEAR_MIN_IN = 512, NN_LINEAR_MAX_IN = 1000, NN_LINEAR_IN_VECTOR = 16, NN_LINEAR_MIN_WEIGHTS = 4096 };
int nn_linear_direct(const hw_linear_dims *d);

#endif
