// dropout: in training, zeroes each element with probability p and scales the kept ones by
// 1/(1-p) (torch.nn.Dropout); the identity in evaluation. dims.dropout.p: 0.5 when not given. The mask
// comes from the workspace RNG and is kept for backward.
#include "cpu_layers.h"
#include "layer_type.h"

#include "hw/err.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

// Shared with dropout2d: checks P (0.5, torch's default, when absent) and sets dims.dropout with
// `channels` channels of `plane` values each.
int nn_dropout_configure(hw_layer *layer, int channels, int64_t plane);

int nn_dropout_configure(hw_layer *layer, int channels, int64_t plane) {
    double p = isnan(layer->args[0]) ? 0.5 : layer->args[0];
    if (!(p >= 0.0 && p <= 1.0)) return hw_fail("%s: P must be a probability in [0, 1], got %g", layer->type->name, p);
    layer->dims.dropout = (hw_dropout_dims){.p = (float)p, .c = channels, .plane = plane};
    layer->out_shape = layer->in_shape;
    return HW_OK;
}

static int dropout_configure(hw_layer *layer, hw_shape *params) {
    (void)params;
    return nn_dropout_configure(layer, 1, hw_shape_numel(layer->in_shape));
}

static size_t dropout_saved_bytes(const hw_layer *layer, int batch) {
    return (size_t)batch * (size_t)hw_shape_numel(layer->in_shape);
}

// p = 1 drops everything; the kept values' scale is then irrelevant.
static float keep_scale(float p) { return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f; }

// in * scale where keep is 1, +0.0 where it is 0, without a branch: the value's bits anded with
// all ones or all zeros. A dropped value is 0 whatever it was (NaN, infinity), as the CUDA
// kernel writes it.
static inline float kept(float value, float scale, uint8_t keep) {
    float scaled = value * scale;
    uint32_t bits;
    memcpy(&bits, &scaled, sizeof bits);
    bits &= 0u - (uint32_t)keep;
    memcpy(&scaled, &bits, sizeof bits);
    return scaled;
}

// mask: one byte per value, written in training and read by backward.
void dropout_forward(float *out, uint8_t *mask, hw_rng *rng, const float *in, const hw_dropout_dims *d, int batch,
                     int training) {
    size_t n = (size_t)batch * (size_t)d->plane;
    if (!training) {
        if (out != in) memcpy(out, in, sizeof(float) * n);
        return;
    }
    // Without a branch on `keep`: it is a coin flip, and a mispredicted branch per value cost more
    // than the generator (34 us for LeNet's 64 x 50 values, 10 ns each, against 3 ns to draw one).
    float p = d->p, scale = keep_scale(p);
    for (size_t i = 0; i < n; i++) {
        uint8_t keep = hw_rng_uniform(rng) >= p;
        mask[i] = keep;
        out[i] = kept(in[i], scale, keep);
    }
}

void dropout_backward(float *din, const float *dout, const uint8_t *mask, const hw_dropout_dims *d, int batch,
                      int training) {
    if (!din) return;
    size_t n = (size_t)batch * (size_t)d->plane;
    if (!training) {  // after an evaluation forward: the identity
        if (din != dout) memcpy(din, dout, sizeof(float) * n);
        return;
    }
    float scale = keep_scale(d->p);
    for (size_t i = 0; i < n; i++) din[i] = kept(dout[i], scale, mask[i]);
}

static void dropout_example(hw_rng *rng, hw_shape *in_shape, char *line, size_t cap) {
    int64_t dims[3] = {nn_rand_int(rng, 1, 9), nn_rand_int(rng, 1, 4), nn_rand_int(rng, 1, 4)};
    *in_shape = hw_shape_make(nn_rand_int(rng, 1, 3), dims);
    snprintf(line, cap, "dropout %.2f", 0.1 * nn_rand_int(rng, 1, 8));
}

const hw_layer_type hw_layer_dropout = {
    .kind = HW_DROPOUT,
    .name = "dropout",
    .usage = "[P]",
    .name_prefix = "dropout",
    .min_args = 0,
    .max_args = 1,
    .configure = dropout_configure,
    .saved_bytes = dropout_saved_bytes,
    .example = dropout_example,
};
