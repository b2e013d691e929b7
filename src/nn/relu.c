// relu: max(x, 0) elementwise; backward lets the gradient through where the output is positive
// (torch's threshold_backward on the result).
#include "layer_util.h"

#include <stdio.h>

static int relu_configure(hw_layer *layer, hw_shape *params) {
    (void)params;
    layer->out_shape = layer->in_shape;
    return 0;
}

// The loops read every operand unconditionally so that they compile to vector selects.
int nn_relu_forward(const hw_layer *layer, hw_layer_io *io) {
    size_t n = (size_t)io->batch * (size_t)hw_shape_numel(layer->in_shape);
    const float *restrict x = io->in;
    float *restrict y = io->out;
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        y[i] = v < 0.0f ? 0.0f : v;  // a NaN passes, as in torch.relu
    }
    return HW_OK;
}

int nn_relu_backward(const hw_layer *layer, hw_layer_io *io) {
    if (!io->din) return HW_OK;
    size_t n = (size_t)io->batch * (size_t)hw_shape_numel(layer->in_shape);
    const float *restrict y = io->out, *restrict dy = io->dout;
    float *restrict dx = io->din;
    for (size_t i = 0; i < n; i++) {
        float g = dy[i];
        dx[i] = y[i] > 0.0f ? g : 0.0f;
    }
    return HW_OK;
}

static void relu_example(hw_rng *rng, hw_shape *in_shape, char *line, size_t cap) {
    int64_t dims[3] = {nn_rand_int(rng, 1, 3), nn_rand_int(rng, 1, 5), nn_rand_int(rng, 1, 5)};
    *in_shape = hw_shape_make(nn_rand_int(rng, 1, 3), dims);
    snprintf(line, cap, "relu");
}

const hw_layer_type hw_layer_relu = {
    .kind = HW_RELU,
    .name = "relu",
    .usage = "(no arguments)",
    .name_prefix = "relu",
    .configure = relu_configure,
    .example = relu_example,
};
