// conv2d: 2-D convolution (cross-correlation) as torch.nn.Conv2d with square kernels, zero padding.
// dims.conv2d = {in_c, out_c, k, stride, pad, in_h, in_w, out_h, out_w};
// weight [out, in, k, k], bias [out].
//
// im2col + GEMM, one sample at a time: OpenBLAS runs these small GEMMs (LeNet's conv2: 20 x 250
// by 250 x 64) on its small-matrix kernels at ~110 GFLOP/s, twice the rate it reaches on one big
// GEMM over the whole batch (bench/nn_step.md). A training forward keeps every sample's column
// matrix (the layer's saved state), so that backward's weight gradient does not build it again.
#include "cpu/kernels.h"
#include "cpu_layers.h"
#include "layer_type.h"

#include "hw/blas.h"
#include "hw/err.h"

#include <stdio.h>
#include <string.h>

static int conv2d_configure(hw_layer *layer, hw_shape *params) {
    if (nn_expect_ndim(layer, 3, "an input of shape [C, H, W]") != HW_OK) return HW_ERR;
    int64_t out_c, k, stride, pad;
    if (nn_arg_int(layer, 0, "OUT_CHANNELS", 1, -1, &out_c) != HW_OK) return HW_ERR;
    if (nn_arg_int(layer, 1, "KERNEL", 1, -1, &k) != HW_OK) return HW_ERR;
    if (nn_arg_int(layer, 2, "stride", 1, 1, &stride) != HW_OK) return HW_ERR;
    if (nn_arg_int(layer, 3, "padding", 0, 0, &pad) != HW_OK) return HW_ERR;
    int64_t in_c = layer->in_shape.dims[0], h = layer->in_shape.dims[1], w = layer->in_shape.dims[2];
    if (h + 2 * pad < k || w + 2 * pad < k) {
        char shape[64];
        hw_shape_format(layer->in_shape, shape, sizeof shape);
        return hw_fail("conv2d: kernel %lld does not fit the input %s with padding %lld: expected KERNEL <= %lld",
                       (long long)k, shape, (long long)pad, (long long)((h < w ? h : w) + 2 * pad));
    }
    int64_t out_h = (h + 2 * pad - k) / stride + 1, out_w = (w + 2 * pad - k) / stride + 1;
    if (in_c * k * k * out_h * out_w > HW_LAYER_MAX_NUMEL) {
        return hw_fail("conv2d: the column matrix of one sample (%lld x %lld) is over %d elements",
                       (long long)(in_c * k * k), (long long)(out_h * out_w), HW_LAYER_MAX_NUMEL);
    }
    layer->dims.conv2d = (hw_conv2d_dims){.in_c = (int)in_c,
                                          .out_c = (int)out_c,
                                          .k = (int)k,
                                          .stride = (int)stride,
                                          .pad = (int)pad,
                                          .in_h = (int)h,
                                          .in_w = (int)w,
                                          .out_h = (int)out_h,
                                          .out_w = (int)out_w};
    layer->out_shape = hw_shape_make(3, (int64_t[]){out_c, out_h, out_w});
    params[0] = hw_shape_make(4, (int64_t[]){out_c, in_c, k, k});
    params[1] = hw_shape_make(1, &out_c);
    return HW_OK;
}

// True when the column matrix of a sample is the sample itself (1x1 kernel, stride 1, no padding).
static int cols_are_input(const hw_conv2d_dims *d) { return d->k == 1 && d->stride == 1 && d->pad == 0; }

static size_t conv2d_scratch_floats(const hw_layer *layer, int batch) {
    (void)batch;
    hw_conv2d_dims d = layer->dims.conv2d;
    if (nn_conv2d_direct(&d)) {  // as much as any copy of the kernels needs: the copy may change (tests)
        const nn_kernels *copies[] = {nn_kernels_avx512(), nn_kernels_avx2(), nn_kernels_baseline()};
        size_t most = 0;
        for (int i = 0; i < 3; i++) {
            size_t need = copies[i]->conv_scratch_floats(&d);
            if (need > most) most = need;
        }
        return most;
    }
    // one sample's column matrix and its gradient, dy^T, and dW^T (see conv2d_backward)
    size_t kk = (size_t)d.in_c * d.k * d.k, out_hw = (size_t)d.out_h * d.out_w;
    return 2 * kk * out_hw + out_hw * d.out_c + kk * d.out_c;
}

// The column matrices of a whole training batch, kept from forward for backward. (calloc'ed and
// only touched by a training forward: an evaluation workspace never makes these pages resident.)
static size_t conv2d_saved_bytes(const hw_layer *layer, int batch) {
    hw_conv2d_dims d = layer->dims.conv2d;
    if (cols_are_input(&d) || nn_conv2d_direct(&d)) return 0;
    return sizeof(float) * (size_t)batch * (size_t)d.in_c * d.k * d.k * (size_t)d.out_h * d.out_w;
}

// The range [*lo, *hi) of output positions o whose input position o*stride - pad + offset lies in [0, n).
static void valid_range(int out_n, int stride, int pad, int offset, int n, int *lo, int *hi) {
    int first = pad - offset;  // smallest o*stride that is >= 0 after the shift
    *lo = first <= 0 ? 0 : (first + stride - 1) / stride;
    int last = n + pad - offset;  // o*stride must stay below this
    *hi = last <= 0 ? 0 : (last + stride - 1) / stride;
    if (*hi > out_n) *hi = out_n;
    if (*lo > *hi) *lo = *hi;
}

// Short rows (8 or 24 floats in LeNet) are copied in blocks of 8 that the compiler turns into
// single vector moves; a generic loop spent more time in its set-up than in the copy.
static inline void copy_row(float *restrict dst, const float *restrict src, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) memcpy(dst + i, src + i, 8 * sizeof(float));
    for (; i < n; i++) dst[i] = src[i];
}

static inline void add_row(float *restrict dst, const float *restrict src, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        for (int j = 0; j < 8; j++) dst[i + j] += src[i + j];
    }
    for (; i < n; i++) dst[i] += src[i];
}

// Sum with 8 partial sums: a single running sum is one long chain of dependent adds (the compiler
// may not reorder float additions), which cost more than the convolution's own im2col.
static float sum_floats(const float *x, int n) {
    float part[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        for (int j = 0; j < 8; j++) part[j] += x[i + j];
    }
    float sum = 0.0f;
    for (; i < n; i++) sum += x[i];
    for (int j = 0; j < 8; j++) sum += part[j];
    return sum;
}

// out [cols, rows] = in [rows, cols]^T
static void transpose(const float *restrict in, int rows, int cols, float *restrict out) {
    for (int r = 0; r < rows; r++) {
        for (int c = 0; c < cols; c++) out[(size_t)c * rows + r] = in[(size_t)r * cols + c];
    }
}

static inline void zero_row(float *dst, int n) {
    for (int i = 0; i < n; i++) dst[i] = 0.0f;
}

// im2col without padding, stride 1 (LeNet's convolutions): no bounds, no zeros, row copies only.
static void im2col_plain(const hw_conv2d_dims *d, const float *restrict x, float *restrict cols) {
    int out_w = d->out_w, out_h = d->out_h, in_w = d->in_w, k = d->k;
    float *dst = cols;
    for (int c = 0; c < d->in_c; c++) {
        const float *xc = x + (size_t)c * d->in_h * in_w;
        for (int ki = 0; ki < k; ki++) {
            for (int kj = 0; kj < k; kj++) {
                const float *src = xc + (size_t)ki * in_w + kj;
                for (int oh = 0; oh < out_h; oh++) {
                    copy_row(dst, src, out_w);
                    dst += out_w;
                    src += in_w;
                }
            }
        }
    }
}

// cols[(c*k + ki)*k + kj][oh*out_w + ow] = x[c][oh*stride - pad + ki][ow*stride - pad + kj] (0 outside).
static void im2col(const hw_conv2d_dims *d, const float *x, float *cols) {
    if (d->stride == 1 && d->pad == 0) {
        im2col_plain(d, x, cols);
        return;
    }
    int out_hw = d->out_h * d->out_w;
    for (int c = 0; c < d->in_c; c++) {
        const float *xc = x + (size_t)c * d->in_h * d->in_w;
        for (int ki = 0; ki < d->k; ki++) {
            int oh_lo, oh_hi;
            valid_range(d->out_h, d->stride, d->pad, ki, d->in_h, &oh_lo, &oh_hi);
            for (int kj = 0; kj < d->k; kj++) {
                float *row = cols + ((size_t)(c * d->k + ki) * d->k + kj) * out_hw;
                int ow_lo, ow_hi;
                valid_range(d->out_w, d->stride, d->pad, kj, d->in_w, &ow_lo, &ow_hi);
                int n = ow_hi - ow_lo;
                zero_row(row, oh_lo * d->out_w);
                for (int oh = oh_lo; oh < oh_hi; oh++) {
                    float *dst = row + (size_t)oh * d->out_w;
                    zero_row(dst, ow_lo);
                    zero_row(dst + ow_hi, d->out_w - ow_hi);
                    if (n <= 0) continue;
                    // the input row read by this output row, from its first valid column on
                    const float *src =
                        xc + (size_t)(oh * d->stride - d->pad + ki) * d->in_w + (ow_lo * d->stride - d->pad + kj);
                    if (d->stride == 1) {
                        copy_row(dst + ow_lo, src, n);
                    } else {
                        for (int i = 0; i < n; i++) dst[ow_lo + i] = src[i * d->stride];
                    }
                }
                zero_row(row + (size_t)oh_hi * d->out_w, (d->out_h - oh_hi) * d->out_w);
            }
        }
    }
}

// col2im_plain's counterpart of im2col_plain.
static void col2im_plain(const hw_conv2d_dims *d, const float *restrict cols, float *restrict dx) {
    int out_w = d->out_w, out_h = d->out_h, in_w = d->in_w, k = d->k;
    const float *src = cols;
    for (int c = 0; c < d->in_c; c++) {
        float *dxc = dx + (size_t)c * d->in_h * in_w;
        for (int ki = 0; ki < k; ki++) {
            for (int kj = 0; kj < k; kj++) {
                float *dst = dxc + (size_t)ki * in_w + kj;
                for (int oh = 0; oh < out_h; oh++) {
                    add_row(dst, src, out_w);
                    src += out_w;
                    dst += in_w;
                }
            }
        }
    }
}

// The adjoint of im2col: dx = 0, then every column entry is added back where it was read from.
static void col2im(const hw_conv2d_dims *d, const float *cols, float *dx) {
    int out_hw = d->out_h * d->out_w;
    memset(dx, 0, sizeof(float) * (size_t)d->in_c * d->in_h * d->in_w);
    if (d->stride == 1 && d->pad == 0) {
        col2im_plain(d, cols, dx);
        return;
    }
    for (int c = 0; c < d->in_c; c++) {
        float *dxc = dx + (size_t)c * d->in_h * d->in_w;
        for (int ki = 0; ki < d->k; ki++) {
            int oh_lo, oh_hi;
            valid_range(d->out_h, d->stride, d->pad, ki, d->in_h, &oh_lo, &oh_hi);
            for (int kj = 0; kj < d->k; kj++) {
                const float *row = cols + ((size_t)(c * d->k + ki) * d->k + kj) * out_hw;
                int ow_lo, ow_hi;
                valid_range(d->out_w, d->stride, d->pad, kj, d->in_w, &ow_lo, &ow_hi);
                int n = ow_hi - ow_lo;
                if (n <= 0) continue;
                for (int oh = oh_lo; oh < oh_hi; oh++) {
                    float *dst =
                        dxc + (size_t)(oh * d->stride - d->pad + ki) * d->in_w + (ow_lo * d->stride - d->pad + kj);
                    const float *src = row + (size_t)oh * d->out_w + ow_lo;
                    if (d->stride == 1) {
                        add_row(dst, src, n);
                    } else {
                        for (int i = 0; i < n; i++) dst[i * d->stride] += src[i];
                    }
                }
            }
        }
    }
}

// cols: the column matrices of the whole batch, kept for backward (a training forward), or NULL:
// each sample's is built in scratch and dropped.
void conv2d_forward(float *out, float *cols, float *scratch, const float *in, const float *weight, const float *bias,
                    const uint8_t *keep, const hw_conv2d_dims *d, int batch) {
    if (nn_conv2d_direct(d)) {
        nn_kernels_in_use()->conv_forward(out, scratch, in, weight, bias, keep, d, batch);
        return;
    }
    int kk = d->in_c * d->k * d->k, out_hw = d->out_h * d->out_w;
    size_t in_size = (size_t)d->in_c * d->in_h * d->in_w, out_size = (size_t)d->out_c * out_hw;
    for (int b = 0; b < batch; b++) {
        const float *x = in + b * in_size;
        float *y = out + b * out_size;
        const float *xcols = x;
        if (!cols_are_input(d)) {
            float *dst = cols ? cols + (size_t)b * kk * out_hw : scratch;
            im2col(d, x, dst);
            xcols = dst;
        }
        // y [out_c, out_hw] = W [out_c, kk] x cols [kk, out_hw]
        hw_sgemm(HW_NO_TRANS, HW_NO_TRANS, d->out_c, out_hw, kk, 1.0f, weight, kk, xcols, out_hw, 0.0f, y, out_hw);
        for (int o = 0; o < d->out_c; o++) {
            float bo = bias[o], *yo = y + (size_t)o * out_hw;
            if (keep && !keep[(size_t)b * d->out_c + o]) {  // computed all the same: one GEMM per sample
                memset(yo, 0, sizeof(float) * out_hw);
                continue;
            }
            for (int i = 0; i < out_hw; i++) yo[i] += bo;
        }
    }
}

// cols: what a training forward kept, or NULL: built again here, in scratch (only the tests
// run backward after an evaluation forward).
void conv2d_backward(float *din, float *dweight, float *dbias, float *scratch, const float *dout, const float *in,
                     const float *weight, const float *cols, const hw_conv2d_dims *d, int batch) {
    if (nn_conv2d_direct(d)) {
        const nn_kernels *kernels = nn_kernels_in_use();
        if (dweight || dbias) kernels->conv_backward_weight(dweight, dbias, scratch, in, dout, d, batch);
        if (din) kernels->conv_backward_input(din, scratch, dout, weight, d, batch);
        return;
    }
    int kk = d->in_c * d->k * d->k, out_hw = d->out_h * d->out_w;
    size_t in_size = (size_t)d->in_c * d->in_h * d->in_w, out_size = (size_t)d->out_c * out_hw;
    float *cols_buf = scratch, *dcols = cols_buf + (size_t)kk * out_hw;
    float *dy_t = dcols + (size_t)kk * out_hw, *dw_t = dy_t + (size_t)out_hw * d->out_c;
    // dW as dW^T = cols x dy^T (a transposed copy of dy, then a plain GEMM) when the column matrix
    // is tall (LeNet's conv2: 250 x 64): OpenBLAS's small-matrix kernels run that form ~1.4x
    // faster than dy x cols^T. For a wide one (conv1: 25 x 576) the transposes cost more than
    // they save. Measured with bench/nn_step --layers.
    int transposed = kk >= out_hw;
    if (dbias) memset(dbias, 0, sizeof(float) * (size_t)d->out_c);
    for (int b = 0; b < batch; b++) {
        const float *x = in + b * in_size, *dy = dout + b * out_size;
        if (dweight) {
            const float *xcols = x;
            if (!cols_are_input(d) && cols) {
                xcols = cols + (size_t)b * kk * out_hw;
            } else if (!cols_are_input(d)) {
                im2col(d, x, cols_buf);
                xcols = cols_buf;
            }
            // The first sample overwrites, the others add.
            if (transposed) {  // dW^T [kk, out_c] += cols [kk, out_hw] x dy^T [out_hw, out_c]
                transpose(dy, d->out_c, out_hw, dy_t);
                hw_sgemm(HW_NO_TRANS, HW_NO_TRANS, kk, d->out_c, out_hw, 1.0f, xcols, out_hw, dy_t, d->out_c,
                         b == 0 ? 0.0f : 1.0f, dw_t, d->out_c);
            } else {  // dW [out_c, kk] += dy [out_c, out_hw] x cols^T [out_hw, kk]
                hw_sgemm(HW_NO_TRANS, HW_TRANS, d->out_c, kk, out_hw, 1.0f, dy, out_hw, xcols, out_hw,
                         b == 0 ? 0.0f : 1.0f, dweight, kk);
            }
        }
        if (dbias) {
            for (int o = 0; o < d->out_c; o++) dbias[o] += sum_floats(dy + (size_t)o * out_hw, out_hw);
        }
        if (din) {
            float *dx = din + b * in_size;
            if (cols_are_input(d)) {  // dx [in_c, hw] = W^T [in_c, out_c] x dy [out_c, hw]
                hw_sgemm(HW_TRANS, HW_NO_TRANS, kk, out_hw, d->out_c, 1.0f, weight, kk, dy, out_hw, 0.0f, dx, out_hw);
            } else {
                hw_sgemm(HW_TRANS, HW_NO_TRANS, kk, out_hw, d->out_c, 1.0f, weight, kk, dy, out_hw, 0.0f, dcols,
                         out_hw);
                col2im(d, dcols, dx);
            }
        }
    }
    if (dweight && transposed) transpose(dw_t, kk, d->out_c, dweight);
}

static double conv2d_flops(const hw_layer *layer) {
    hw_conv2d_dims d = layer->dims.conv2d;
    return 2.0 * d.out_c * d.out_h * d.out_w * d.in_c * d.k * d.k;
}

static void conv2d_example(hw_rng *rng, hw_shape *in_shape, char *line, size_t cap) {
    int k = nn_rand_int(rng, 1, 4), stride = nn_rand_int(rng, 1, 3), pad = nn_rand_int(rng, 0, 2);
    if (hw_rng_below(rng, 2)) stride = 1, pad = 0;  // half the time the plain case, which has its own code
    int64_t dims[3] = {nn_rand_int(rng, 1, 3), nn_rand_int(rng, k, 8), nn_rand_int(rng, k, 7)};
    if (stride == 1 && pad == 0 && hw_rng_below(rng, 2)) dims[2] = 8 + k - 1;  // rows of 8: the CPU kernels
    *in_shape = hw_shape_make(3, dims);
    snprintf(line, cap, "conv2d %d %d stride=%d padding=%d", nn_rand_int(rng, 1, 4), k, stride, pad);
}

const hw_layer_type hw_layer_conv2d = {
    .kind = HW_CONV2D,
    .name = "conv2d",
    .usage = "OUT_CHANNELS KERNEL [stride=S] [padding=P]",
    .name_prefix = "conv",
    .min_args = 2,
    .max_args = 2,
    .keys = {"stride", "padding"},
    .param_names = {"weight", "bias"},
    .configure = conv2d_configure,
    .scratch_floats = conv2d_scratch_floats,
    .saved_bytes = conv2d_saved_bytes,
    .flops = conv2d_flops,
    .example = conv2d_example,
};
