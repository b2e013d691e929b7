// relu: max(x, 0) elementwise; backward lets the gradient through where the output is positive
// (torch's threshold_backward on the result).
#include "cpu_layers.h"
#include "layer_type.h"

#include <stdio.h>

static int relu_configure(hw_layer *layer, hw_shape *params) {
    (void)params;
    layer->out_shape = layer->in_shape;
    return 0;
}

// The loops read every operand unconditionally so that they compile to vector selects.
void relu_forward(float *restrict out, const float *restrict in, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float v = in[i];
        out[i] = v < 0.0f ? 0.0f : v;  // a NaN passes, as in torch.relu
    }
}

void relu_backward(float *restrict din, const float *restrict dout, const float *restrict out, size_t n) {
    if (!din) return;
    for (size_t i = 0; i < n; i++) {
        float g = dout[i];
        din[i] = out[i] > 0.0f ? g : 0.0f;
    }
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
