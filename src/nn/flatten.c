// flatten: [C, H, W] -> [C*H*W] in NCHW order (torch's x.view(-1, C*H*W)); data unchanged.
#include "cpu_layers.h"
#include "layer_type.h"

#include <stdio.h>
#include <string.h>

static int flatten_configure(hw_layer *layer, hw_shape *params) {
    (void)params;
    int64_t n = hw_shape_numel(layer->in_shape);
    layer->out_shape = hw_shape_make(1, &n);
    return 0;
}

// Nothing to do where out is in: the CPU's workspace (src/nn/workspace.c) and the GPU runner
// (src/cuda/runner.cu) both give flatten's output its input's memory. A copy otherwise.
void flatten_forward(float *out, const float *in, size_t n) {
    if (out != in) memcpy(out, in, sizeof(float) * n);
}

void flatten_backward(float *din, const float *dout, size_t n) {
    if (din && din != dout) memcpy(din, dout, sizeof(float) * n);
}

static void flatten_example(hw_rng *rng, hw_shape *in_shape, char *line, size_t cap) {
    int64_t dims[3] = {nn_rand_int(rng, 1, 3), nn_rand_int(rng, 1, 4), nn_rand_int(rng, 1, 4)};
    *in_shape = hw_shape_make(nn_rand_int(rng, 1, 3), dims);
    snprintf(line, cap, "flatten");
}

const hw_layer_type hw_layer_flatten = {
    .kind = HW_FLATTEN,
    .name = "flatten",
    .usage = "(no arguments)",
    .name_prefix = "flatten",
    .configure = flatten_configure,
    .example = flatten_example,
};
