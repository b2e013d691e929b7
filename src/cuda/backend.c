// backend: the GPU's case of each layer kind. The executor (src/nn/exec.c) walks the model and
// calls these with device pointers; each passes them to its layer's GPU operation (layer_ops.c), which
// queues its kernels and GEMMs on the runner's compute stream. The runner (runner.cu) is
// io->backend. A new kind fails to compile (-Wswitch) until both switches have its case.
#include "backend.h"
#include "dropout_mask.h"
#include "layer_ops.h"
#include "runner_state.h"

#include "hw/err.h"

static const hw_cuda_runner *runner_of(const hw_layer_io *io) { return (const hw_cuda_runner *)io->backend; }

// The runner's compute stream and its cuBLAS handle: where every layer of the walk runs.
static hw_cuda_ctx ctx_of(const hw_layer_io *io) {
    const hw_cuda_runner *r = runner_of(io);
    return (hw_cuda_ctx){r->compute, r->blas};
}

// Floats of the layer's output for the call's batch.
static int64_t out_numel(const hw_layer *layer, const hw_layer_io *io) {
    return (int64_t)io->batch * hw_shape_numel(layer->out_shape);
}

// The dropout masks are a hash of (seed, step, index): backward recomputes forward's.
static uint64_t dropout_seed(const hw_layer_io *io) { return hw_dropout_layer_seed(runner_of(io)->seed, io->index); }

// Dropout outside training: the identity.
static int copy_through(float *out, const float *in, const hw_layer *layer, const hw_layer_io *io) {
    return hw_cuda_memcpy_d2d(out, in, (size_t)out_numel(layer, io) * sizeof(float), runner_of(io)->compute);
}

// The forward of `layer`'s kind on the GPU, queued on the runner's compute stream; HW_ERR when
// an operation refuses its arguments or a launch fails.
static int gpu_forward(const hw_layer *layer, const hw_layer_io *io) {
    const hw_cuda_runner *r = runner_of(io);
    switch (layer->kind) {
    case HW_LINEAR: {
        const hw_linear_dims *d = &layer->dims.linear;
        return hw_cuda_linear_forward(ctx_of(io), io->out, io->in, io->weight, io->bias, io->batch, d->in, d->out);
    }
    case HW_CONV2D:
        return hw_cuda_conv2d_forward(ctx_of(io), io->out, io->in, io->weight, io->bias,
                                      runner_conv_dims(&layer->dims.conv2d, io->batch), io->scratch);
    case HW_MAXPOOL2D: {  // io->saved: the argmax, int32 [batch, out numel]
        const hw_maxpool2d_dims *d = &layer->dims.maxpool2d;
        return hw_cuda_maxpool2d_forward(r->compute, io->out, (int32_t *)io->saved, io->in, io->batch, d->c, d->in_h,
                                         d->in_w, d->k, d->stride);
    }
    case HW_RELU: return hw_cuda_relu_forward(r->compute, io->out, io->in, out_numel(layer, io));
    case HW_DROPOUT:
        if (!io->training) return copy_through(io->out, io->in, layer, io);
        return hw_cuda_dropout_forward(r->compute, io->out, io->in, out_numel(layer, io), layer->dims.dropout.p,
                                       dropout_seed(io), r->step);
    case HW_DROPOUT2D:  // each sample's channel planes are dropped whole: planes = batch x channels
        if (!io->training) return copy_through(io->out, io->in, layer, io);
        return hw_cuda_dropout2d_forward(r->compute, io->out, io->in, (int64_t)io->batch * layer->dims.dropout.c,
                                         layer->dims.dropout.plane, layer->dims.dropout.p, dropout_seed(io), r->step);
    case HW_FLATTEN:  // a view: the runner gives flatten's output the memory of its input
        return HW_OK;
    case HW_LOG_SOFTMAX:  // fused with the NLL loss: the mean loss on the device when the batch has labels
        return hw_cuda_log_softmax_nll_forward(r->compute, io->out, r->loss_dev, io->in,
                                               r->has_labels ? r->labels_dev : NULL, io->batch,
                                               (int)hw_shape_numel(layer->out_shape), r->row_loss);
    case HW_LAYER_KINDS: break;
    }
    return hw_fail("GPU: no layer of kind %d", (int)layer->kind);
}

// The backward of `layer`'s kind on the GPU, likewise: it overwrites the gradients io asks for.
static int gpu_backward(const hw_layer *layer, const hw_layer_io *io) {
    const hw_cuda_runner *r = runner_of(io);
    switch (layer->kind) {
    case HW_LINEAR: {
        const hw_linear_dims *d = &layer->dims.linear;
        return hw_cuda_linear_backward(ctx_of(io), io->din, io->dweight, io->dbias, io->dout, io->in, io->weight,
                                       io->batch, d->in, d->out);
    }
    case HW_CONV2D:
        return hw_cuda_conv2d_backward(ctx_of(io), io->din, io->dweight, io->dbias, io->dout, io->in, io->weight,
                                       runner_conv_dims(&layer->dims.conv2d, io->batch), io->scratch);
    case HW_MAXPOOL2D: {
        const hw_maxpool2d_dims *d = &layer->dims.maxpool2d;
        if (!io->din) return HW_OK;
        return hw_cuda_maxpool2d_backward(r->compute, io->din, io->dout, (const int32_t *)io->saved, io->batch, d->c,
                                          d->in_h, d->in_w, d->k, d->stride);
    }
    case HW_RELU:
        if (!io->din) return HW_OK;
        return hw_cuda_relu_backward(r->compute, io->din, io->dout, io->out, out_numel(layer, io));
    case HW_DROPOUT:
        if (!io->din) return HW_OK;
        return hw_cuda_dropout_backward(r->compute, io->din, io->dout, out_numel(layer, io), layer->dims.dropout.p,
                                        dropout_seed(io), r->step);
    case HW_DROPOUT2D:
        if (!io->din) return HW_OK;
        return hw_cuda_dropout2d_backward(r->compute, io->din, io->dout, (int64_t)io->batch * layer->dims.dropout.c,
                                          layer->dims.dropout.plane, layer->dims.dropout.p, dropout_seed(io), r->step);
    case HW_FLATTEN:  // a view: the runner gives flatten's input gradient the memory of its output's
        return HW_OK;
    case HW_LOG_SOFTMAX:  // the gradient of the fused loss with respect to the logits (dout is not read)
        if (!io->din) return HW_OK;
        return hw_cuda_log_softmax_nll_backward(r->compute, io->din, io->out, r->labels_dev, io->batch,
                                                (int)hw_shape_numel(layer->out_shape));
    case HW_LAYER_KINDS: break;
    }
    return hw_fail("GPU: no layer of kind %d", (int)layer->kind);
}

const hw_backend hw_cuda_backend = {.forward = gpu_forward, .backward = gpu_backward};
