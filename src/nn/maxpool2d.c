// maxpool2d: max over k x k windows, as torch.nn.MaxPool2d (no padding, floor mode).
// dims.maxpool2d = {c, k, stride, in_h, in_w, out_h, out_w}; stride defaults to kernel. Forward keeps, per output,
// where in the input plane its maximum was (the first one on ties; a NaN wins, as in PyTorch's CPU
// kernel); backward sends the gradient there.
#include "cpu/kernels.h"
#include "cpu_layers.h"
#include "layer_type.h"

#include "hw/err.h"

#include <stdio.h>
#include <string.h>

static int maxpool2d_configure(hw_layer *layer, hw_shape *params) {
    (void)params;
    if (nn_expect_ndim(layer, 3, "an input of shape [C, H, W]") != HW_OK) return HW_ERR;
    int64_t k, stride;
    if (nn_arg_int(layer, 0, "KERNEL", 1, -1, &k) != HW_OK) return HW_ERR;
    if (nn_arg_int(layer, 1, "stride", 1, k, &stride) != HW_OK) return HW_ERR;
    int64_t c = layer->in_shape.dims[0], h = layer->in_shape.dims[1], w = layer->in_shape.dims[2];
    if (k > h || k > w) {
        char shape[64];
        hw_shape_format(layer->in_shape, shape, sizeof shape);
        return hw_fail("maxpool2d: kernel %lld does not fit the input %s: expected KERNEL <= %lld", (long long)k, shape,
                       (long long)(h < w ? h : w));
    }
    int64_t out_h = (h - k) / stride + 1, out_w = (w - k) / stride + 1;
    layer->dims.maxpool2d = (hw_maxpool2d_dims){.c = (int)c,
                                                .k = (int)k,
                                                .stride = (int)stride,
                                                .in_h = (int)h,
                                                .in_w = (int)w,
                                                .out_h = (int)out_h,
                                                .out_w = (int)out_w};
    layer->out_shape = hw_shape_make(3, (int64_t[]){c, out_h, out_w});
    return HW_OK;
}

// Per output, the position of its window's maximum in the input plane.
static size_t maxpool2d_saved_bytes(const hw_layer *layer, int batch) {
    return sizeof(int32_t) * (size_t)batch * (size_t)hw_shape_numel(layer->out_shape);
}

// Picks v over the best so far when it is larger, or NaN (PyTorch's CPU rule: the first maximum
// wins ties, a NaN always wins).
static inline int takes_over(float v, float best) { return (v > best) | (v != v); }

// One plane (a channel of a sample). Selects, not branches: which element wins is data, and a
// mispredicted branch per window cost more than all the rest of the pooling.
static void pool_plane(const float *restrict x, float *restrict y, int32_t *restrict arg, int in_w, int out_h,
                       int out_w, int k, int stride) {
    for (int oh = 0; oh < out_h; oh++) {
        for (int ow = 0; ow < out_w; ow++) {
            int32_t first = oh * stride * in_w + ow * stride;
            float best = x[first];
            int32_t where = first;
            for (int i = 0; i < k; i++) {
                for (int j = 0; j < k; j++) {
                    int32_t at = first + i * in_w + j;
                    float v = x[at];
                    int take = takes_over(v, best);
                    best = take ? v : best;
                    where = take ? at : where;
                }
            }
            y[oh * out_w + ow] = best;
            arg[oh * out_w + ow] = where;
        }
    }
}

// The 2x2, stride 2 case of pool_plane (LeNet's), written so that the compiler vectorises it.
static void pool_plane_2x2(const float *restrict x, float *restrict y, int32_t *restrict arg, int in_w, int out_h,
                           int out_w) {
    for (int oh = 0; oh < out_h; oh++) {
        const float *r0 = x + (size_t)2 * oh * in_w, *r1 = r0 + in_w;
        float *yr = y + (size_t)oh * out_w;
        int32_t *ar = arg + (size_t)oh * out_w;
        for (int ow = 0; ow < out_w; ow++) {
            float a = r0[2 * ow], b = r0[2 * ow + 1], c = r1[2 * ow], d = r1[2 * ow + 1];
            int32_t at = 2 * oh * in_w + 2 * ow, where = at;
            float best = a;
            int take = takes_over(b, best);
            best = take ? b : best;
            where = take ? at + 1 : where;
            take = takes_over(c, best);
            best = take ? c : best;
            where = take ? at + in_w : where;
            take = takes_over(d, best);
            best = take ? d : best;
            where = take ? at + in_w + 1 : where;
            yr[ow] = best;
            ar[ow] = where;
        }
    }
}

// argmax: per output, where in its input plane the maximum was; read by backward.
void maxpool2d_forward(float *out, int32_t *argmax, const float *in, const hw_maxpool2d_dims *d, int batch) {
    int k = d->k, stride = d->stride, out_h = d->out_h, out_w = d->out_w, in_h = d->in_h, in_w = d->in_w;
    int planes = batch * d->c;
    if (nn_pool2x2_kernel(d)) {  // LeNet's pools: the CPU kernels
        nn_kernels_in_use()->pool2x2_forward(out, argmax, in, planes, in_h, in_w, out_h, out_w);
        return;
    }
    size_t in_plane = (size_t)in_h * in_w, out_plane = (size_t)out_h * out_w;
    for (int p = 0; p < planes; p++) {
        const float *x = in + p * in_plane;
        float *y = out + p * out_plane;
        if (k == 2 && stride == 2) {
            pool_plane_2x2(x, y, argmax + p * out_plane, in_w, out_h, out_w);
        } else {
            pool_plane(x, y, argmax + p * out_plane, in_w, out_h, out_w, k, stride);
        }
    }
}

void maxpool2d_backward(float *din, const float *dout, const int32_t *argmax, const hw_maxpool2d_dims *d, int batch) {
    if (!din) return;
    int k = d->k, stride = d->stride, out_h = d->out_h, out_w = d->out_w, in_h = d->in_h, in_w = d->in_w;
    int planes = batch * d->c;
    size_t in_plane = (size_t)in_h * in_w, out_plane = (size_t)out_h * out_w;
    if (nn_pool2x2_kernel(d)) {  // every covered input written, no scatter
        nn_kernels_in_use()->pool2x2_backward(din, dout, argmax, planes, in_h, in_w, out_h, out_w);
        for (int p = 0; p < planes; p++) {  // an odd last column or row, which no window covers
            float *dx = din + p * in_plane;
            if (in_w > 2 * out_w) {
                for (int i = 0; i < 2 * out_h; i++) dx[(size_t)i * in_w + in_w - 1] = 0.0f;
            }
            if (in_h > 2 * out_h) memset(dx + (size_t)(in_h - 1) * in_w, 0, sizeof(float) * in_w);
        }
        return;
    }
    memset(din, 0, sizeof(float) * planes * in_plane);
    for (int p = 0; p < planes; p++) {
        float *restrict dx = din + p * in_plane;
        const float *restrict dy = dout + p * out_plane;
        const int32_t *restrict arg = argmax + p * out_plane;
        if (stride >= k) {  // windows do not overlap: each input gets at most one gradient
            for (size_t o = 0; o < out_plane; o++) dx[arg[o]] = dy[o];
        } else {
            for (size_t o = 0; o < out_plane; o++) dx[arg[o]] += dy[o];
        }
    }
}

static void maxpool2d_example(hw_rng *rng, hw_shape *in_shape, char *line, size_t cap) {
    int k = nn_rand_int(rng, 1, 3), stride = nn_rand_int(rng, 1, 3);
    int64_t dims[3] = {nn_rand_int(rng, 1, 3), nn_rand_int(rng, k, 7), nn_rand_int(rng, k, 8)};
    if (hw_rng_below(rng, 2)) {  // half the time LeNet's 2x2 windows, stride 2, which have their own code
        k = stride = 2;
        dims[1] = 2 * nn_rand_int(rng, 1, 3);
        dims[2] = 2 * nn_rand_int(rng, 1, 3) + (int)hw_rng_below(rng, 2);  // odd widths leave a column out
        if (hw_rng_below(rng, 2)) {  // rows of 4 or 8 outputs or more: the CPU kernels (odd sizes leave some out)
            dims[1] = 2 * nn_rand_int(rng, 1, 2) + (int)hw_rng_below(rng, 2);
            dims[2] = 2 * nn_rand_int(rng, 8, 13) + (int)hw_rng_below(rng, 2);
            if (hw_rng_below(rng, 2)) dims[1] = 4 * nn_rand_int(rng, 1, 2) + (int)hw_rng_below(rng, 2), dims[2] = 8;
        }
    }
    *in_shape = hw_shape_make(3, dims);
    snprintf(line, cap, "maxpool2d %d stride=%d", k, stride);
}

const hw_layer_type hw_layer_maxpool2d = {
    .kind = HW_MAXPOOL2D,
    .name = "maxpool2d",
    .usage = "KERNEL [stride=S]",
    .name_prefix = "pool",
    .min_args = 1,
    .max_args = 1,
    .keys = {"stride"},
    .configure = maxpool2d_configure,
    .saved_bytes = maxpool2d_saved_bytes,
    .example = maxpool2d_example,
};
