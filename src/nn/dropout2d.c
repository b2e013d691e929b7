// dropout2d: in training, zeroes whole channels of each sample with probability p and scales the
// kept ones by 1/(1-p) (torch.nn.Dropout2d on [N, C, H, W]); the identity in evaluation.
// dims.dropout.p: 0.5 when not given. One mask byte per (sample, channel), kept for backward.
#include "cpu_layers.h"
#include "layer_type.h"

#include "hw/err.h"

#include <stdio.h>
#include <string.h>

int nn_dropout_configure(hw_layer *layer, int channels, int64_t plane);  // dropout.c

static int dropout2d_configure(hw_layer *layer, hw_shape *params) {
    (void)params;
    if (nn_expect_ndim(layer, 3, "an input of shape [C, H, W]") != HW_OK) return HW_ERR;
    const hw_shape *in = &layer->in_shape;
    return nn_dropout_configure(layer, (int)in->dims[0], in->dims[1] * in->dims[2]);
}

static size_t dropout2d_saved_bytes(const hw_layer *layer, int batch) {
    return (size_t)batch * (size_t)layer->dims.dropout.c;
}

// The training mask: one byte per (sample, channel), 1 where the channel is kept, one uniform draw
// from rng per channel in order. Forward draws it, unless the layer before drew it first to skip
// the channels it drops (a convolution: forward_pair, src/nn/exec.c).
void dropout2d_draw(uint8_t *mask, hw_rng *rng, const hw_dropout_dims *d, int batch) {
    size_t planes = (size_t)batch * (size_t)d->c;
    for (size_t c = 0; c < planes; c++) mask[c] = hw_rng_uniform(rng) >= d->p;
}

// A kept channel scaled by 1/(1-p); a dropped one set to +0.0 without reading it, whatever it holds
// (the GPU's kernel does the same; torch's NaN * 0 would keep a NaN).
void dropout2d_apply(float *out, const uint8_t *mask, const float *in, const hw_dropout_dims *d, int batch) {
    size_t planes = (size_t)batch * (size_t)d->c;
    size_t plane = (size_t)d->plane;
    float p = d->p;
    float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    for (size_t c = 0; c < planes; c++) {
        const float *x = in + c * plane;
        float *y = out + c * plane;
        if (mask[c]) {
            for (size_t i = 0; i < plane; i++) y[i] = x[i] * scale;
        } else {
            memset(y, 0, sizeof(float) * plane);
        }
    }
}

// mask: one byte per (sample, channel), written in training and read by backward.
void dropout2d_forward(float *out, uint8_t *mask, hw_rng *rng, const float *in, const hw_dropout_dims *d, int batch,
                       int training) {
    if (!training) {
        if (out != in) memcpy(out, in, sizeof(float) * (size_t)batch * (size_t)d->c * (size_t)d->plane);
        return;
    }
    dropout2d_draw(mask, rng, d, batch);
    dropout2d_apply(out, mask, in, d, batch);
}

void dropout2d_backward(float *din, const float *dout, const uint8_t *mask, const hw_dropout_dims *d, int batch,
                        int training) {
    if (!din) return;
    size_t planes = (size_t)batch * (size_t)d->c;
    size_t plane = (size_t)d->plane;
    if (!training) {
        if (din != dout) memcpy(din, dout, sizeof(float) * planes * plane);
        return;
    }
    float p = d->p;
    float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    for (size_t c = 0; c < planes; c++) {
        const float *dy = dout + c * plane;
        float *dx = din + c * plane;
        float s = mask[c] ? scale : 0.0f;
        for (size_t i = 0; i < plane; i++) dx[i] = dy[i] * s;
    }
}

static void dropout2d_example(hw_rng *rng, hw_shape *in_shape, char *line, size_t cap) {
    int64_t dims[3] = {nn_rand_int(rng, 1, 9), nn_rand_int(rng, 1, 4), nn_rand_int(rng, 1, 5)};
    *in_shape = hw_shape_make(3, dims);
    snprintf(line, cap, "dropout2d %.2f", 0.1 * nn_rand_int(rng, 1, 8));
}

const hw_layer_type hw_layer_dropout2d = {
    .kind = HW_DROPOUT2D,
    .name = "dropout2d",
    .usage = "[P]",
    .name_prefix = "dropout2d",
    .min_args = 0,
    .max_args = 1,
    .configure = dropout2d_configure,
    .saved_bytes = dropout2d_saved_bytes,
    .example = dropout2d_example,
};
