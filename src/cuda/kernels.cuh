// kernels.cuh: what each CUDA kernel computes for one index, as functions the host can call too.
//
// Every element-wise and gather kernel of kernels.cu is a grid-stride loop that calls one of the
// *_element (or *_row) functions below: the math of a kernel is here and only here. The block
// reductions keep their shared-memory combine in their kernel; the partial sum each of their
// threads adds up first is strided_sum. hw_cuda_sgemm's mapping of a row-major GEMM onto
// cuBLAS's column-major one is col_major_gemm_of. The GPU operations' argument checks
// (*_args_check, conv_gemm_size) are here too.
//
// The file is written in the common subset of C11 and CUDA C++ (HW_HOST_DEVICE is empty outside
// nvcc), so that layer_ops.c (plain C) and the simulated device of the tests (tests/simcuda/kernels.c,
// which runs each kernel as a host loop over these functions) include it. Private to src/cuda/
// and the simulated device.
#ifndef HW_CUDA_KERNELS_CUH
#define HW_CUDA_KERNELS_CUH

#include "dropout_mask.h"    // hw_dropout_uniform
#include "hw/couple_step.h"  // hw_couple_step, the rule of the copies' rounds
#include "hw/host_device.h"  // HW_HOST_DEVICE
#include "hw/sgd_update.h"   // hw_sgd_update, the rule of the SGD step
#include "layer_ops.h"       // hw_conv_dims

// err.h has no C++ guards of its own: the .cu files see it through this block.
#ifdef __cplusplus
extern "C" {
#endif
#include "hw/err.h"  // the argument checks' hw_fail
#ifdef __cplusplus
}
#endif

#include <math.h>
#include <stdint.h>

// Threads per block of every launch; the block reductions (sum_rows, mean_rows) combine this
// many partial sums. sum_cols has blocks of 32 columns x SUM_COLS_LANES rows of threads.
// sum_rows gives each block SUM_ROWS_CHUNK columns of a row, so that a long row (a conv bias
// gradient: 295k columns for 10 rows) spreads over the whole GPU, not over one block per row.
enum { HW_THREADS = 256, SUM_COLS_LANES = 8, SUM_ROWS_CHUNK = 4096 };

// sum_rows's chunks per row of `cols` columns, when a scratch of `capacity` floats holds the
// partial sums of `rows` rows: 1 means one pass, straight into the output.
static inline int64_t sum_rows_chunks(int64_t rows, int64_t cols, int64_t capacity) {
    int64_t chunks = (cols + SUM_ROWS_CHUNK - 1) / SUM_ROWS_CHUNK;
    if (rows > 0 && chunks * rows > capacity) chunks = capacity / rows;
    return chunks > 1 ? chunks : 1;
}

// ---- hw_cuda_sgemm: a row-major GEMM as cuBLAS's column-major one ----
//
// Row-major X is column-major X^T, so the row-major C[m,n] = op(A) op(B) is the column-major
// C^T[n,m] = op(B)^T op(A)^T: the column-major call takes B first with B's transposition flag,
// then A with A's. The leading dimension of a row-major matrix is its number of columns as
// stored, and BLAS wants at least 1 even for an empty matrix (k = 0).
typedef struct {
    int m, n, k;                // of the column-major product
    const float *first;         // its first matrix (BLAS's A) ...
    int trans_first, ld_first;  // ... whether it is transposed (1) and its leading dimension
    const float *second;        // its second matrix (BLAS's B)
    int trans_second, ld_second;
    int ldc;
} col_major_gemm;

static inline int at_least_1(int n) { return n > 1 ? n : 1; }

static inline col_major_gemm col_major_gemm_of(int trans_a, int trans_b, int m, int n, int k, const float *a,
                                               const float *b) {
    col_major_gemm g;
    g.m = n;
    g.n = m;
    g.k = k;
    g.first = b;
    g.trans_first = trans_b != 0;
    g.ld_first = at_least_1(trans_b ? k : n);
    g.second = a;
    g.trans_second = trans_a != 0;
    g.ld_second = at_least_1(trans_a ? m : k);
    g.ldc = at_least_1(n);
    return g;
}

// ---- bias and reductions ----

// y[r, c] += bias[c], element i = r * cols + c.
static inline HW_HOST_DEVICE void add_bias_cols_element(int64_t i, float *y, const float *bias, int64_t cols) {
    y[i] += bias[i % cols];
}

// v[lane * stride] + v[(lane + lanes) * stride] + ... over the indices below count: the partial
// sum one of `lanes` threads of a block reduction adds up before the block combines them.
static inline HW_HOST_DEVICE float strided_sum(const float *v, int64_t count, int64_t stride, int64_t lane,
                                               int64_t lanes) {
    float sum = 0.0f;
    for (int64_t j = lane; j < count; j += lanes) sum += v[j * stride];
    return sum;
}

// ---- conv2d ----
//
// The im2col matrix of the whole batch is col[C*K*K, B*OH*OW]: row (c, ky, kx), column
// (b, oy, ox). The GEMM output t[OC, B*OH*OW] is channel-major (CNHW); y and dy are NCHW.

// The sizes of the im2col GEMM over the whole batch: rows = C*K*K, columns = B*OH*OW; 0 when
// they do not fit one cuBLAS call (int sizes) or a sane scratch (2^40 floats).
static inline int conv_gemm_size(hw_conv_dims d, int64_t *rows, int64_t *columns) {
    *columns = (int64_t)d.batch * hw_conv_out_h(d) * hw_conv_out_w(d);
    *rows = (int64_t)d.in_channels * d.kernel * d.kernel;
    return *columns <= INT32_MAX && *rows * *columns <= ((int64_t)1 << 40);
}

// How many chunks of the batch the weight gradient's GEMM dw[OC, C*K*K] = t col^T is split into
// over its long K = B*OH*OW (strided-batched, then the partials summed): cuBLAS gives this tiny
// output (LeNet's 10 x 25 and 20 x 250) too few blocks for a K of 33k to 295k. Measured on an H100
// (bench/gpu_shapes.cu, issue 25): chunks of at least 512 columns, 32 to 128 of them, won (conv1 at
// batch 512: 45 us against cuBLAS's 119); fewer than 32 lost to cuBLAS's own choice. A power of two
// that divides K; 1 (no split) otherwise, or when the partials would outgrow half of t.
enum { CONV_DW_SPLIT_MIN = 32, CONV_DW_SPLIT_MAX = 128, CONV_DW_CHUNK_MIN = 512 };
// Whether `columns` leave room for `splits` chunks: each of at least CONV_DW_CHUNK_MIN columns,
// the partials (splits * rows per output channel) at most half of t. Divisibility aside, the one
// condition of both conv_dw_splits and the scratch's bound below.
static inline int conv_dw_split_fits(int64_t splits, int64_t rows, int64_t columns) {
    return splits * CONV_DW_CHUNK_MIN <= columns && splits * rows <= columns / 2;
}
static inline int conv_dw_splits(int64_t rows, int64_t columns) {
    int splits = 1;
    while (splits < CONV_DW_SPLIT_MAX && columns % (2 * splits) == 0 && conv_dw_split_fits(2 * splits, rows, columns)) {
        splits *= 2;
    }
    return splits >= CONV_DW_SPLIT_MIN ? splits : 1;
}

// The most floats per output channel the split's partial sums (splits * rows) take for any
// number of columns up to `columns`: a runner sizes its scratch once, for its largest batch, and a
// smaller batch may split where the largest does not (672 samples of 5x5 outputs split in 32, 673
// not at all). conv_dw_splits's last doubling, to s, needs conv_dw_split_fits(s); the largest such
// s of CONV_DW_SPLIT_MIN .. MAX bounds every smaller split.
static inline int64_t conv_dw_partials_bound(int64_t rows, int64_t columns) {
    int64_t most = 0;
    for (int64_t s = CONV_DW_SPLIT_MIN; s <= CONV_DW_SPLIT_MAX; s *= 2) {
        if (conv_dw_split_fits(s, rows, columns)) most = s * rows;
    }
    return most;
}

// A convolution with at most CONV_DIRECT_TAPS taps per output (C*K*K: LeNet's conv1 has 25) and
// at most CONV_DIRECT_WEIGHTS weights runs its forward directly, one thread per output position,
// instead of im2col, a GEMM with K = C*K*K and a permute: on an H100 at batch 512 (issue 25)
// those three took 67 us for conv1, all of it moving the 25x larger column matrix. The GPU
// kernel keeps the weights in shared memory and a position's taps in registers (kernels.cu).
// Its weight and bias gradients are direct too (conv_dw_direct below). Wider convolutions keep
// the GEMMs, whose K is long enough.
enum { CONV_DIRECT_TAPS = 32, CONV_DIRECT_WEIGHTS = 4096 };
static inline int conv_is_direct(hw_conv_dims d) {
    int64_t taps = (int64_t)d.in_channels * d.kernel * d.kernel;
    return taps <= CONV_DIRECT_TAPS && taps * d.out_channels <= CONV_DIRECT_WEIGHTS;
}

// Tap t = (c, ky, kx) of a direct convolution's position (iy0, ix0) = (oy, ox) * stride - padding
// in sample b: the input pixel it reads, 0 in the padding.
static inline HW_HOST_DEVICE float conv2d_direct_tap(const float *xb, hw_conv_dims d, int iy0, int ix0, int c, int ky,
                                                     int kx) {
    int iy = iy0 + ky, ix = ix0 + kx;
    if (iy < 0 || iy >= d.height || ix < 0 || ix >= d.width) return 0.0f;
    return xb[((int64_t)c * d.height + iy) * d.width + ix];
}

// The reference of the direct forward (the simulated device runs it; kernels.cu's conv2d_direct
// computes the same sums in the same order): y[b, oc, oy, ox] for every oc, at column
// j = (b, oy, ox), is the sum over the taps t = (c, ky, kx) in that order of w[oc, t] * tap t,
// padding taps counted as 0 (as the GEMM over im2col's zeros counts them), plus bias[oc] (0 when
// NULL).
static inline HW_HOST_DEVICE void conv2d_direct_column(float *y, const float *x, const float *w, const float *bias,
                                                       hw_conv_dims d, int oh, int ow, int j) {
    int plane = oh * ow;
    int b = j / plane, p = j - b * plane;
    int oy = p / ow, ox = p - oy * ow;
    const float *xb = x + (int64_t)b * d.in_channels * d.height * d.width;
    int taps = d.in_channels * d.kernel * d.kernel;
    for (int oc = 0; oc < d.out_channels; oc++) {
        float sum = 0.0f;
        for (int t = 0; t < taps; t++) {
            int c = t / (d.kernel * d.kernel), ky = t / d.kernel % d.kernel, kx = t % d.kernel;
            sum += w[(int64_t)oc * taps + t] *
                   conv2d_direct_tap(xb, d, oy * d.stride - d.padding, ox * d.stride - d.padding, c, ky, kx);
        }
        y[((int64_t)b * d.out_channels + oc) * plane + p] = sum + (bias ? bias[oc] : 0.0f);
    }
}

// ---- conv2d's weight and bias gradients, direct (conv_is_direct) ----
//
// dw[oc, t] = the sum over the columns j = (b, oy, ox) of dy[b, oc, oy, ox] * tap t of column j,
// and dbias[oc] = the sum of dy[b, oc, oy, ox], read from x and dy as they are (NCHW): no im2col
// matrix in device memory, no permute of dy, no GEMM. (Through im2col on an H100 at batch 512,
// issue 25, LeNet's conv1 spent 88 us there: the permute, the bias's row sums, im2col, the split
// GEMM and its sum.) The sums and their order:
// - Block (s, g) takes chunk s of the columns and up to CONV_DW_DIRECT_OCS output channels from
//   g * CONV_DW_DIRECT_OCS on. A chunk is whole tiles of CONV_DW_DIRECT_TILE columns, as many as
//   make about CONV_DW_DIRECT_BLOCKS blocks (conv_dw_direct_chunk), which the GPU needs: LeNet's
//   step at batch 512 on an H100 took 0.337, 0.341 and 0.332 ms with about 256, 512 and 1024
//   blocks (with 72 and 144 blocks of an earlier version of the kernel, 0.431 and 0.379 ms).
// - Each output (oc, t) of the block is one thread's four sums over the chunk, column i of the
//   chunk into sum i % 4, in order (conv_dw_direct_column's products), then ((s0 + s1) + s2) + s3
//   into partial[s, oc, 0 .. taps] (the bias's sum last): four chains of additions, which the GPU
//   overlaps, where one would wait on each addition.
// - A second kernel adds the chunks: CONV_DW_FINISH_LANES strided sums, then those in lane order
//   (conv_dw_direct_store). A fixed order, as every reduction here.
enum { CONV_DW_DIRECT_TILE = 128, CONV_DW_DIRECT_BLOCKS = 1024, CONV_DW_DIRECT_OCS = 16, CONV_DW_FINISH_LANES = 32 };
static inline int64_t conv_dw_direct_chunk(int64_t columns) {
    int64_t tiles = (columns + (int64_t)CONV_DW_DIRECT_TILE * CONV_DW_DIRECT_BLOCKS - 1) /
                    ((int64_t)CONV_DW_DIRECT_TILE * CONV_DW_DIRECT_BLOCKS);
    return (tiles > 1 ? tiles : 1) * CONV_DW_DIRECT_TILE;
}
// At least one: with no columns, one block writes the zero sums (a grid of 0 blocks is no launch).
static inline int64_t conv_dw_direct_chunks(int64_t columns) {
    int64_t chunks = (columns + conv_dw_direct_chunk(columns) - 1) / conv_dw_direct_chunk(columns);
    return chunks > 1 ? chunks : 1;
}
// The floats of partial sums for any batch up to d's: OC x (taps + 1) per chunk, and there are at
// most CONV_DW_DIRECT_BLOCKS chunks (each chunk holds at least columns / BLOCKS) and at most one per
// tile, a bound that grows with the batch (the chunks themselves do not: 131072 columns make 1024
// chunks of one tile, 131073 make 513 of two).
static inline int64_t conv_dw_direct_partials(hw_conv_dims d) {
    int64_t columns = (int64_t)d.batch * hw_conv_out_h(d) * hw_conv_out_w(d);
    int64_t tiles = (columns + CONV_DW_DIRECT_TILE - 1) / CONV_DW_DIRECT_TILE;
    int64_t chunks = tiles < 1 ? 1 : tiles < CONV_DW_DIRECT_BLOCKS ? tiles : (int64_t)CONV_DW_DIRECT_BLOCKS;
    return chunks * d.out_channels * ((int64_t)d.in_channels * d.kernel * d.kernel + 1);
}

// Column j's share of output channel oc's gradients: acc[t] += dy * tap t for t < taps, and
// acc[taps] += dy.
static inline HW_HOST_DEVICE void conv_dw_direct_column(float *acc, const float *x, const float *dy, hw_conv_dims d,
                                                        int oh, int ow, int oc, int j) {
    int plane = oh * ow;
    int b = j / plane, p = j - b * plane;
    int oy = p / ow, ox = p - oy * ow;
    const float *xb = x + (int64_t)b * d.in_channels * d.height * d.width;
    float g = dy[((int64_t)b * d.out_channels + oc) * plane + p];
    int taps = d.in_channels * d.kernel * d.kernel;
    for (int t = 0; t < taps; t++) {
        int c = t / (d.kernel * d.kernel), ky = t / d.kernel % d.kernel, kx = t % d.kernel;
        acc[t] += g * conv2d_direct_tap(xb, d, oy * d.stride - d.padding, ox * d.stride - d.padding, c, ky, kx);
    }
    acc[taps] += g;
}

// Element i = oc * (taps + 1) + t of the gradients, whose chunks add up to sum: dw[oc, t] for
// t < taps (dw may be NULL), dbias[oc] for t = taps (dbias may be NULL).
static inline HW_HOST_DEVICE void conv_dw_direct_store(float *dw, float *dbias, int taps, int64_t i, float sum) {
    int64_t oc = i / (taps + 1), t = i - oc * (taps + 1);
    if (t < taps) {
        if (dw) dw[oc * taps + t] = sum;
    } else if (dbias) {
        dbias[oc] = sum;
    }
}

// Column j = (b, oy, ox) of col, in the K*K rows of input channel c: col[(c, ky, kx), j] is the
// input pixel that tap reads, 0 in the padding. One thread writes all K*K, so the index
// arithmetic is paid once per column, not per element; j < B*OH*OW fits an int (conv_gemm_size).
static inline HW_HOST_DEVICE void im2col_column(float *col, const float *x, hw_conv_dims d, int oh, int ow, int c,
                                                int j) {
    int plane = oh * ow;
    int b = j / plane, p = j - b * plane;
    int oy = p / ow, ox = p - oy * ow;
    int64_t columns = (int64_t)d.batch * plane;
    const float *xc = x + ((int64_t)b * d.in_channels + c) * d.height * d.width;
    float *out = col + (int64_t)c * d.kernel * d.kernel * columns + j;
    for (int ky = 0; ky < d.kernel; ky++) {
        int iy = oy * d.stride - d.padding + ky;
        for (int kx = 0; kx < d.kernel; kx++) {
            int ix = ox * d.stride - d.padding + kx;
            float v = 0.0f;
            if (iy >= 0 && iy < d.height && ix >= 0 && ix < d.width) v = xc[iy * d.width + ix];
            out[(int64_t)(ky * d.kernel + kx) * columns] = v;
        }
    }
}

// The outputs o = 0 .. out - 1 whose window (o * stride - padding + 0 .. kernel - 1) holds input
// position i: lo .. hi (empty when lo > hi), found without a division per tap.
static inline HW_HOST_DEVICE void conv_windows_of(int i, int kernel, int stride, int padding, int out, int *lo,
                                                  int *hi) {
    int first = i + padding - kernel + 1;  // o * stride >= first
    *lo = first <= 0 ? 0 : (first + stride - 1) / stride;
    int last = (i + padding) / stride;  // o * stride <= i + padding
    *hi = last < out - 1 ? last : out - 1;
}

// dx[b, c, iy, ix] for plane q = b * C + c and pixel = iy * W + ix: the sum of dcol over the
// (ky, kx, oy, ox) that read that input pixel, taps in ascending (ky, kx) order (the windows in
// descending order). Each thread gathers its own pixel: no atomics, a fixed order.
static inline HW_HOST_DEVICE void col2im_pixel(float *dx, const float *dcol, hw_conv_dims d, int oh, int ow, int64_t q,
                                               int pixel) {
    int64_t plane = (int64_t)oh * ow;
    int64_t columns = d.batch * plane;
    int64_t b = q / d.in_channels;
    int c = (int)(q - b * d.in_channels);
    int iy = pixel / d.width, ix = pixel - iy * d.width;
    int oy_lo, oy_hi, ox_lo, ox_hi;
    conv_windows_of(iy, d.kernel, d.stride, d.padding, oh, &oy_lo, &oy_hi);
    conv_windows_of(ix, d.kernel, d.stride, d.padding, ow, &ox_lo, &ox_hi);
    const float *base = dcol + (int64_t)c * d.kernel * d.kernel * columns + b * plane;
    float sum = 0.0f;
    for (int oy = oy_hi; oy >= oy_lo; oy--) {
        int ky = iy + d.padding - oy * d.stride;
        for (int ox = ox_hi; ox >= ox_lo; ox--) {
            int kx = ix + d.padding - ox * d.stride;
            sum += base[(int64_t)(ky * d.kernel + kx) * columns + oy * ow + ox];
        }
    }
    dx[q * d.height * d.width + pixel] = sum;
}

// Column j = (b, p) of channel oc in t[OC, B*plane] against y[b, oc, p] (NCHW): y = t + bias[oc]
// (bias may be NULL), and the reverse without a bias. j fits an int (conv_gemm_size).
static inline HW_HOST_DEVICE void cnhw_to_nchw_element(float *y, const float *t, const float *bias, int64_t batch,
                                                       int channels, int plane, int oc, int j) {
    int b = j / plane, p = j - b * plane;
    y[((int64_t)b * channels + oc) * plane + p] = t[oc * batch * plane + j] + (bias ? bias[oc] : 0.0f);
}

static inline HW_HOST_DEVICE void nchw_to_cnhw_element(float *t, const float *dy, int64_t batch, int channels,
                                                       int plane, int oc, int j) {
    int b = j / plane, p = j - b * plane;
    t[oc * batch * plane + j] = dy[((int64_t)b * channels + oc) * plane + p];
}

// ---- maxpool2d (no padding, floor mode) ----

// PyTorch's rule, on the CPU and in CUDA, and the CPU layer's: v takes over from the best so far
// when it is larger or NaN. The first maximum wins ties; a NaN always takes over.
static inline HW_HOST_DEVICE int pool_takes_over(float v, float best) { return v > best || v != v; }

// Output i = (plane, oy, ox): the window's maximum, and its flat index within the input plane.
static inline HW_HOST_DEVICE void maxpool_forward_element(int64_t i, float *y, int32_t *argmax, const float *x,
                                                          int height, int width, int kernel, int stride, int oh,
                                                          int ow) {
    int ox = (int)(i % ow), oy = (int)((i / ow) % oh);
    const float *in = x + (i / ((int64_t)oh * ow)) * height * width;
    int best_index = oy * stride * width + ox * stride;
    float best = in[best_index];
    for (int ky = 0; ky < kernel; ky++) {
        for (int kx = 0; kx < kernel; kx++) {
            int index = (oy * stride + ky) * width + ox * stride + kx;
            if (pool_takes_over(in[index], best)) {
                best = in[index];
                best_index = index;
            }
        }
    }
    y[i] = best;
    argmax[i] = best_index;
}

// Pixel `index` of plane q gathers the gradients of the windows whose maximum it was (no atomics).
static inline HW_HOST_DEVICE void maxpool_backward_element(float *dx, const float *dy, const int32_t *argmax,
                                                           int height, int width, int kernel, int stride, int oh,
                                                           int ow, int64_t q, int index) {
    int iy = index / width, ix = index - iy * width;
    int64_t out_base = q * oh * ow;
    // the windows that contain (iy, ix): oy * stride <= iy < oy * stride + kernel, likewise ox
    int oy_lo = iy < kernel ? 0 : (iy - kernel) / stride + 1, oy_hi = iy / stride < oh - 1 ? iy / stride : oh - 1;
    int ox_lo = ix < kernel ? 0 : (ix - kernel) / stride + 1, ox_hi = ix / stride < ow - 1 ? ix / stride : ow - 1;
    float sum = 0.0f;
    for (int oy = oy_lo; oy <= oy_hi; oy++) {
        for (int ox = ox_lo; ox <= ox_hi; ox++) {
            int64_t o = out_base + (int64_t)oy * ow + ox;
            if (argmax[o] == index) sum += dy[o];
        }
    }
    dx[q * height * width + index] = sum;
}

// When the windows tile the plane exactly (stride == kernel, height and width multiples of it:
// LeNet's 2x2 pools), every input pixel lies in exactly one window, and the gradient can be written
// window by window: output o's thread writes its window's pixels, dy[o] at its maximum and 0
// elsewhere, the values maxpool_backward_element gathers, for one window's index arithmetic per
// kernel*kernel pixels (on an H100 the per-pixel gather took 22 us for LeNet's conv1 pool at batch
// 512, instruction-bound).
static inline int maxpool_windows_tile(int height, int width, int kernel, int stride) {
    return stride == kernel && height % kernel == 0 && width % kernel == 0;
}

static inline HW_HOST_DEVICE void maxpool_backward_window(float *dx, const float *dy, const int32_t *argmax, int height,
                                                          int width, int kernel, int oh, int ow, int64_t q,
                                                          int window) {
    int oy = window / ow, ox = window - oy * ow;
    int64_t o = q * oh * ow + window;
    int best = argmax[o];
    float g = dy[o];
    float *plane = dx + q * height * width;
    for (int ky = 0; ky < kernel; ky++) {
        for (int kx = 0; kx < kernel; kx++) {
            int index = (oy * kernel + ky) * width + ox * kernel + kx;
            plane[index] = index == best ? g : 0.0f;
        }
    }
}

// ---- pointwise ----

// The GPU operations' argument checks (layer_ops.c): HW_OK, or HW_ERR with the message. An empty
// launch (n <= 0) needs no channel plane.
static inline int dropout_args_check(float p, int64_t n, int64_t plane) {
    if (!(p >= 0.0f && p <= 1.0f)) return hw_fail("dropout: p = %g is not in [0, 1]", (double)p);
    if (n > 0 && plane <= 0) return hw_fail("dropout2d: empty channel plane");
    return HW_OK;
}

static inline int normalize_args_check(float std) {
    return std > 0.0f ? HW_OK : hw_fail("normalize: std = %g must be > 0", (double)std);
}

// A NaN passes, as in torch.relu, and -0 stays -0, as in the CPU layer.
static inline HW_HOST_DEVICE void relu_forward_element(int64_t i, float *y, const float *x) {
    y[i] = x[i] < 0.0f ? 0.0f : x[i];
}

static inline HW_HOST_DEVICE void relu_backward_element(int64_t i, float *dx, const float *dy, const float *y) {
    dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

// What the kept values are multiplied by. p = 1 drops everything (torch returns zeros): the test
// u >= 1 is never true, and the scale does not matter.
static inline float dropout_scale(float p) { return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f; }

// Element i keeps its value (times scale) when the draw for index i / plane is >= p: plane = 1
// is dropout, plane = H*W is dropout2d (one draw per sample and channel).
static inline HW_HOST_DEVICE void dropout_element(int64_t i, float *out, const float *in, int64_t plane, float p,
                                                  float scale, uint64_t seed, uint64_t step) {
    float u = hw_dropout_uniform(seed, step, (uint64_t)(i / plane));
    out[i] = u >= p ? in[i] * scale : 0.0f;
}

static inline HW_HOST_DEVICE void normalize_u8_element(int64_t i, float *x, const uint8_t *bytes, float mean,
                                                       float std) {
    x[i] = ((float)bytes[i] / 255.0f - mean) / std;
}

// torch.optim.SGD for weight i: THE rule, hw_sgd_update (include/hw/sgd_update.h), in form
// `variant`; `first`: the velocity holds no step yet. The weight is read once and written once
// (Hogwild: other workers may write it in between).
static inline HW_HOST_DEVICE void sgd_step_element(int64_t i, float *w, const float *g, float *velocity,
                                                   hw_sgd_variant variant, float lr, float momentum, float weight_decay,
                                                   int first) {
    float *v = variant == HW_SGD_PLAIN ? NULL : &velocity[i];
    w[i] = hw_sgd_update(variant, w[i], g[i], v, lr, momentum, weight_decay, first);
}

// x *= alpha (a replica weighs its gradient by its share of the batch) and y += x (the
// all-reduce's sum).
static inline HW_HOST_DEVICE void scale_element(int64_t i, float *x, float alpha) { x[i] *= alpha; }

static inline HW_HOST_DEVICE void add_element(int64_t i, float *y, const float *x) { y[i] += x[i]; }

// ---- the rounds of Hogwild's copies on several GPUs (src/cuda/train/gpu_copies.c) ----

// Copy c's change since the agreed weights, into `sent` (kept for the round's end) and `sum` (which
// the all-reduce then sums over the copies in place).
static inline HW_HOST_DEVICE void couple_send_element(int64_t i, float *sent, float *sum, const float *live,
                                                      const float *agreed) {
    float change = live[i] - agreed[i];
    sent[i] = change;
    sum[i] = change;
}

// A round's end on copy c's device: the agreed weight takes THE rule's step for the copies' summed
// change (hw_couple_step; every device holds the same sum, agreed weights and velocity, so every
// device takes the same step), and the live weight takes the step less the copy's own change, which
// it holds already. The copy's workers write `live` too: a read-modify-write that races their
// steps as they race each other.
static inline HW_HOST_DEVICE void couple_round_element(int64_t i, float *live, float *agreed, float *velocity,
                                                       const float *sum, const float *sent, hw_couple_rule rule,
                                                       float beta, float mean, float ahead) {
    float step = hw_couple_step(rule, beta, mean, &velocity[i], sum[i], ahead);
    agreed[i] += step;
    live[i] += step - sent[i];
}

// ---- loss ----

// Row b: the stable log_softmax x - max - log(sum exp(x - max)), and, with labels, the row's loss
// -logp[label] (NaN for a label out of range, so that it cannot pass unseen).
static inline HW_HOST_DEVICE void log_softmax_row(int64_t b, float *logp, float *row_loss, const float *x,
                                                  const uint8_t *labels, int classes) {
    const float *in = x + b * classes;
    float *out = logp + b * classes;
    float max = in[0];
    for (int c = 1; c < classes; c++) max = fmaxf(max, in[c]);
    float sum = 0.0f;
    for (int c = 0; c < classes; c++) sum += expf(in[c] - max);
    float log_sum = max + logf(sum);
    for (int c = 0; c < classes; c++) out[c] = in[c] - log_sum;
    if (labels) row_loss[b] = labels[b] < classes ? -out[labels[b]] : nanf("");
}

// dx[i] = dx[b, c] = (exp(logp[b, c]) - onehot(label[b])[c]) / batch: the gradient of the mean
// NLL with respect to the logits.
static inline HW_HOST_DEVICE void nll_backward_element(int64_t i, float *dx, const float *logp, const uint8_t *labels,
                                                       int batch, int classes) {
    int c = (int)(i % classes);
    int64_t b = i / classes;
    dx[i] = (expf(logp[i]) - (labels[b] == c ? 1.0f : 0.0f)) / (float)batch;
}

// The training loss summed in double, as the CPU trainer sums it: one thread.
static inline HW_HOST_DEVICE void accumulate_loss_element(double *total, const float *loss, int batch) {
    *total += (double)*loss * batch;
}

// 1 when row b's argmax (the first maximum, as torch.argmax) is its label.
static inline HW_HOST_DEVICE int count_correct_row(int64_t b, const float *logp, const uint8_t *labels, int classes) {
    const float *row = logp + b * classes;
    int best = 0;
    for (int c = 1; c < classes; c++) {
        if (row[c] > row[best]) best = c;
    }
    return best == labels[b];
}

#endif
