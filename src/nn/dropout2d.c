// dropout2d: in training, zeroes whole channels of each sample with probability p and scales the
// kept ones by 1/(1-p) (torch.nn.Dropout2d on [N, C, H, W]); the identity in evaluation.
// dims.dropout.p: 0.5 when not given. One mask byte per (sample, channel), kept for backward.
#include "layer_util.h"

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

int nn_dropout2d_forward(const hw_layer *layer, hw_layer_io *io) {
    size_t planes = (size_t)io->batch * (size_t)layer->dims.dropout.c;
    size_t plane = (size_t)layer->dims.dropout.plane;
    if (!io->training) {
        if (io->out != io->in) memcpy(io->out, io->in, sizeof(float) * planes * plane);
        return HW_OK;
    }
    float p = layer->dims.dropout.p;
    float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    for (size_t c = 0; c < planes; c++) {
        uint8_t keep = hw_rng_uniform(io->rng) >= p;
        io->saved[c] = keep;
        const float *x = io->in + c * plane;
        float *y = io->out + c * plane;
        float s = keep ? scale : 0.0f;
        for (size_t i = 0; i < plane; i++) y[i] = x[i] * s;
    }
    return HW_OK;
}

int nn_dropout2d_backward(const hw_layer *layer, hw_layer_io *io) {
    if (!io->din) return HW_OK;
    size_t planes = (size_t)io->batch * (size_t)layer->dims.dropout.c;
    size_t plane = (size_t)layer->dims.dropout.plane;
    if (!io->training) {
        if (io->din != io->dout) memcpy(io->din, io->dout, sizeof(float) * planes * plane);
        return HW_OK;
    }
    float p = layer->dims.dropout.p;
    float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    for (size_t c = 0; c < planes; c++) {
        const float *dy = io->dout + c * plane;
        float *dx = io->din + c * plane;
        float s = io->saved[c] ? scale : 0.0f;
        for (size_t i = 0; i < plane; i++) dx[i] = dy[i] * s;
    }
    return HW_OK;
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
