// backend: the GPU's row of each layer kind. The executor (src/nn/exec.c) walks the model and
// calls these with device pointers; each launches its layer's kernels (layers.cu, pointwise.cu,
// loss.cu) on the runner's compute stream. The runner (runner.cu) is io->backend.
#include "runner.h"

#include <assert.h>

static_assert(HW_LAYER_KINDS == 8, "a new hw_layer_kind needs its row in hw_cuda_layers below; then update this count");

static const hw_cuda_runner *runner_of(const hw_layer_io *io) { return (const hw_cuda_runner *)io->backend; }

static hw_cuda_ctx ctx_of(const hw_layer_io *io) {
    const hw_cuda_runner *r = runner_of(io);
    return (hw_cuda_ctx){r->compute, r->blas};
}

static hw_cuda_stream stream_of(const hw_layer_io *io) { return runner_of(io)->compute; }

static int64_t out_numel(const hw_layer *layer, const hw_layer_io *io) {
    return (int64_t)io->batch * hw_shape_numel(layer->out_shape);
}

// The dropout masks are a hash of (seed, step, index): backward recomputes forward's.
static uint64_t dropout_seed(const hw_layer_io *io) { return hw_dropout_layer_seed(runner_of(io)->seed, io->index); }

static int linear_forward(const hw_layer *layer, hw_layer_io *io) {
    const hw_linear_dims *d = &layer->dims.linear;
    return hw_cuda_linear_forward(ctx_of(io), io->out, io->in, io->weight, io->bias, io->batch, d->in, d->out);
}

static int linear_backward(const hw_layer *layer, hw_layer_io *io) {
    const hw_linear_dims *d = &layer->dims.linear;
    return hw_cuda_linear_backward(ctx_of(io), io->din, io->dweight, io->dbias, io->dout, io->in, io->weight,
                                   io->batch, d->in, d->out);
}

static int conv2d_forward(const hw_layer *layer, hw_layer_io *io) {
    return hw_cuda_conv2d_forward(ctx_of(io), io->out, io->in, io->weight, io->bias,
                                  runner_conv_dims(&layer->dims.conv2d, io->batch), io->scratch);
}

static int conv2d_backward(const hw_layer *layer, hw_layer_io *io) {
    return hw_cuda_conv2d_backward(ctx_of(io), io->din, io->dweight, io->dbias, io->dout, io->in, io->weight,
                                   runner_conv_dims(&layer->dims.conv2d, io->batch), io->scratch);
}

// io->saved: the argmax, int32 [batch, out numel].
static int maxpool2d_forward(const hw_layer *layer, hw_layer_io *io) {
    const hw_maxpool2d_dims *d = &layer->dims.maxpool2d;
    return hw_cuda_maxpool2d_forward(stream_of(io), io->out, (int32_t *)io->saved, io->in, io->batch, d->c, d->in_h,
                                     d->in_w, d->k, d->stride);
}

static int maxpool2d_backward(const hw_layer *layer, hw_layer_io *io) {
    const hw_maxpool2d_dims *d = &layer->dims.maxpool2d;
    if (!io->din) return HW_OK;
    return hw_cuda_maxpool2d_backward(stream_of(io), io->din, io->dout, (const int32_t *)io->saved, io->batch, d->c,
                                      d->in_h, d->in_w, d->k, d->stride);
}

static int relu_forward(const hw_layer *layer, hw_layer_io *io) {
    return hw_cuda_relu_forward(stream_of(io), io->out, io->in, out_numel(layer, io));
}

static int relu_backward(const hw_layer *layer, hw_layer_io *io) {
    if (!io->din) return HW_OK;
    return hw_cuda_relu_backward(stream_of(io), io->din, io->dout, io->out, out_numel(layer, io));
}

static int dropout_forward(const hw_layer *layer, hw_layer_io *io) {
    int64_t n = out_numel(layer, io);
    if (!io->training) return hw_cuda_memcpy_d2d(io->out, io->in, (size_t)n * sizeof(float), stream_of(io));
    return hw_cuda_dropout_forward(stream_of(io), io->out, io->in, n, layer->dims.dropout.p, dropout_seed(io),
                                   runner_of(io)->step);
}

static int dropout_backward(const hw_layer *layer, hw_layer_io *io) {
    if (!io->din) return HW_OK;
    return hw_cuda_dropout_backward(stream_of(io), io->din, io->dout, out_numel(layer, io), layer->dims.dropout.p,
                                    dropout_seed(io), runner_of(io)->step);
}

// Each sample's channel planes are dropped whole: planes = batch x channels.
static int dropout2d_forward(const hw_layer *layer, hw_layer_io *io) {
    const hw_dropout_dims *d = &layer->dims.dropout;
    if (!io->training) {
        return hw_cuda_memcpy_d2d(io->out, io->in, (size_t)out_numel(layer, io) * sizeof(float), stream_of(io));
    }
    return hw_cuda_dropout2d_forward(stream_of(io), io->out, io->in, (int64_t)io->batch * d->c,
                                     hw_shape_numel(layer->in_shape) / d->c, d->p, dropout_seed(io),
                                     runner_of(io)->step);
}

static int dropout2d_backward(const hw_layer *layer, hw_layer_io *io) {
    const hw_dropout_dims *d = &layer->dims.dropout;
    if (!io->din) return HW_OK;
    return hw_cuda_dropout2d_backward(stream_of(io), io->din, io->dout, (int64_t)io->batch * d->c,
                                      hw_shape_numel(layer->in_shape) / d->c, d->p, dropout_seed(io),
                                      runner_of(io)->step);
}

// A view: the runner gives flatten's output the memory of its input, and the same for gradients.
static int flatten_either(const hw_layer *layer, hw_layer_io *io) {
    (void)layer, (void)io;
    return HW_OK;
}

// Fused with the NLL loss: forward writes the mean loss on the device when the batch has labels;
// backward is the gradient of that loss with respect to the logits (dout is not read).
static int log_softmax_forward(const hw_layer *layer, hw_layer_io *io) {
    const hw_cuda_runner *r = runner_of(io);
    return hw_cuda_log_softmax_nll_forward(r->compute, io->out, r->loss_dev, io->in, r->has_labels ? r->labels_dev : NULL,
                                           io->batch, (int)hw_shape_numel(layer->out_shape), r->row_loss);
}

static int log_softmax_backward(const hw_layer *layer, hw_layer_io *io) {
    const hw_cuda_runner *r = runner_of(io);
    if (!io->din) return HW_OK;
    return hw_cuda_log_softmax_nll_backward(r->compute, io->din, io->out, r->labels_dev, io->batch,
                                            (int)hw_shape_numel(layer->out_shape));
}

const hw_backend hw_cuda_layers = {
    .forward = {[HW_LINEAR] = linear_forward, [HW_CONV2D] = conv2d_forward, [HW_MAXPOOL2D] = maxpool2d_forward,
                [HW_RELU] = relu_forward, [HW_DROPOUT] = dropout_forward, [HW_DROPOUT2D] = dropout2d_forward,
                [HW_FLATTEN] = flatten_either, [HW_LOG_SOFTMAX] = log_softmax_forward},
    .backward = {[HW_LINEAR] = linear_backward, [HW_CONV2D] = conv2d_backward, [HW_MAXPOOL2D] = maxpool2d_backward,
                 [HW_RELU] = relu_backward, [HW_DROPOUT] = dropout_backward, [HW_DROPOUT2D] = dropout2d_backward,
                 [HW_FLATTEN] = flatten_either, [HW_LOG_SOFTMAX] = log_softmax_backward},
};
