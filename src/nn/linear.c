// linear: y = x W^T + b, as torch.nn.Linear. dims.linear = {in, out} features;
// weight [out, in], bias [out].
#include "cpu/kernels.h"
#include "cpu_layers.h"
#include "layer_type.h"

#include "hw/blas.h"
#include "hw/err.h"

#include <stdio.h>
#include <string.h>

static int linear_configure(hw_layer *layer, hw_shape *params) {
    if (layer->in_shape.ndim != 1) {
        char shape[64];
        hw_shape_format(layer->in_shape, shape, sizeof shape);
        return hw_fail("linear needs a 1-D input (features), got shape %s: put `flatten` before it", shape);
    }
    int64_t out;
    if (nn_arg_int(layer, 0, "OUT_FEATURES", 1, -1, &out) != HW_OK) return HW_ERR;
    int64_t in = layer->in_shape.dims[0];
    layer->dims.linear = (hw_linear_dims){.in = (int)in, .out = (int)out};
    layer->out_shape = hw_shape_make(1, &out);
    params[0] = hw_shape_make(2, (int64_t[]){out, in});
    params[1] = hw_shape_make(1, &out);
    return HW_OK;
}

void linear_forward(float *out, const float *in, const float *weight, const float *bias, const hw_linear_dims *d,
                    int batch) {
    int n_in = d->in, n_out = d->out;
    if (nn_linear_direct(d)) {  // the CPU kernels (cpu/linear.h says why not the BLAS)
        nn_kernels_in_use()->linear_forward(out, in, weight, bias, n_in, n_out, batch);
        return;
    }
    // [batch, in] x [out, in]^T: one GEMM for the whole batch, then the bias on each row.
    hw_sgemm(HW_NO_TRANS, HW_TRANS, batch, n_out, n_in, 1.0f, in, n_in, weight, n_in, 0.0f, out, n_out);
    for (int b = 0; b < batch; b++) {
        float *row = out + (size_t)b * n_out;
        for (int j = 0; j < n_out; j++) row[j] += bias[j];
    }
}

void linear_backward(float *din, float *dweight, float *dbias, const float *dout, const float *in, const float *weight,
                     const hw_linear_dims *d, int batch) {
    int n_in = d->in, n_out = d->out;
    if (dweight && nn_linear_direct(d)) {
        nn_kernels_in_use()->linear_backward_weight(dweight, dout, in, n_in, n_out, batch);
    } else if (dweight) {  // dW [out, in] = dY^T [out, batch] x X [batch, in]
        hw_sgemm(HW_TRANS, HW_NO_TRANS, n_out, n_in, batch, 1.0f, dout, n_out, in, n_in, 0.0f, dweight, n_in);
    }
    if (dbias) {
        memset(dbias, 0, sizeof(float) * (size_t)n_out);
        for (int b = 0; b < batch; b++) {
            const float *row = dout + (size_t)b * n_out;
            for (int j = 0; j < n_out; j++) dbias[j] += row[j];
        }
    }
    if (din) {  // dX [batch, in] = dY [batch, out] x W [out, in]
        hw_sgemm(HW_NO_TRANS, HW_NO_TRANS, batch, n_in, n_out, 1.0f, dout, n_out, weight, n_in, 0.0f, din, n_in);
    }
}

static double linear_flops(const hw_layer *layer) { return 2.0 * layer->dims.linear.in * layer->dims.linear.out; }

static void linear_example(hw_rng *rng, hw_shape *in_shape, char *line, size_t cap) {
    int64_t in = nn_rand_int(rng, 1, 9);
    *in_shape = hw_shape_make(1, &in);
    snprintf(line, cap, "linear %d", nn_rand_int(rng, 1, 7));
}

const hw_layer_type hw_layer_linear = {
    .kind = HW_LINEAR,
    .name = "linear",
    .usage = "OUT_FEATURES",
    .name_prefix = "fc",
    .min_args = 1,
    .max_args = 1,
    .param_names = {"weight", "bias"},
    .configure = linear_configure,
    .flops = linear_flops,
    .example = linear_example,
};
