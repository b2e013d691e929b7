// log_softmax: log-probabilities over the features of each sample (dim=1 in PyTorch), computed
// stably as x - max - log(sum(exp(x - max))). The model's loss, the mean negative log-likelihood
// of the labels (F.nll_loss), is taken on this output, so it must be the last layer; the model
// seeds its backward with d(mean NLL)/d(log-probs) = -onehot/batch.
#include "cpu_layers.h"
#include "layer_type.h"

#include <math.h>
#include <stdio.h>

static int log_softmax_configure(hw_layer *layer, hw_shape *params) {
    (void)params;
    if (nn_expect_ndim(layer, 1, "a 1-D input (class scores): put `flatten` before it") != 0) return -1;
    layer->out_shape = layer->in_shape;
    return 0;
}

void log_softmax_forward(float *out, const float *in, int batch, int n) {
    for (int b = 0; b < batch; b++) {
        const float *x = in + (size_t)b * n;
        float *y = out + (size_t)b * n;
        float max = x[0];
        for (int i = 1; i < n; i++) max = x[i] > max ? x[i] : max;
        double sum = 0.0;
        for (int i = 0; i < n; i++) sum += exp((double)(x[i] - max));
        float shift = max + (float)log(sum);
        for (int i = 0; i < n; i++) y[i] = x[i] - shift;
    }
}

// din = dout - softmax * sum(dout), softmax = exp(out).
void log_softmax_backward(float *din, const float *dout, const float *out, int batch, int n) {
    if (!din) return;
    for (int b = 0; b < batch; b++) {
        const float *y = out + (size_t)b * n, *dy = dout + (size_t)b * n;
        float *dx = din + (size_t)b * n;
        float sum = 0.0f;
        for (int i = 0; i < n; i++) sum += dy[i];
        for (int i = 0; i < n; i++) dx[i] = dy[i] - expf(y[i]) * sum;
    }
}

static double log_softmax_flops(const hw_layer *layer) { return 4.0 * (double)layer->in_shape.dims[0]; }

static void log_softmax_example(hw_rng *rng, hw_shape *in_shape, char *line, size_t cap) {
    int64_t n = nn_rand_int(rng, 1, 11);
    *in_shape = hw_shape_make(1, &n);
    snprintf(line, cap, "log_softmax");
}

const hw_layer_type hw_layer_log_softmax = {
    .kind = HW_LOG_SOFTMAX,
    .name = "log_softmax",
    .usage = "(no arguments; the last layer)",
    .name_prefix = "log_softmax",
    .is_loss = 1,
    .configure = log_softmax_configure,
    .flops = log_softmax_flops,
    .example = log_softmax_example,
};
