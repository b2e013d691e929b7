// exec: the one walk over a model's layers, forward and backward, for every backend, and the
// CPU backend. The walk decides what each call works on (hw_layer_io): the layer's activations,
// its parameters' views into the flat buffers, which gradients are wanted. A backend (hw_backend)
// passes those buffers to the function of the layer's kind: the CPU's, below, to the math of
// src/nn/<kind>.c; the GPU's (src/cuda/backend.c) to its kernels.
#include "layer_util.h"

#include "hw/err.h"

// ---- the CPU backend: which of the call's buffers is which argument of each kind's math ----

// Values per call of an elementwise layer (in and out have the same shape).
static size_t numel_of(const hw_layer *layer, const hw_layer_io *io) {
    return (size_t)io->batch * (size_t)hw_shape_numel(layer->in_shape);
}

// conv2d keeps the batch's column matrices from a training forward for backward; after an
// evaluation forward, backward builds them again.
static float *conv2d_cols(const hw_layer_io *io) { return io->training ? (float *)io->saved : NULL; }

static int cpu_forward(const hw_layer *layer, const hw_layer_io *io) {
    switch (layer->kind) {
    case HW_LINEAR:
        linear_forward(io->out, io->in, io->weight, io->bias, &layer->dims.linear, io->batch);
        return HW_OK;
    case HW_CONV2D:
        conv2d_forward(io->out, conv2d_cols(io), io->scratch, io->in, io->weight, io->bias, &layer->dims.conv2d,
                       io->batch);
        return HW_OK;
    case HW_MAXPOOL2D:
        maxpool2d_forward(io->out, (int32_t *)io->saved, io->in, &layer->dims.maxpool2d, io->batch);
        return HW_OK;
    case HW_RELU:
        relu_forward(io->out, io->in, numel_of(layer, io));
        return HW_OK;
    case HW_DROPOUT:
        dropout_forward(io->out, io->saved, io->rng, io->in, &layer->dims.dropout, io->batch, io->training);
        return HW_OK;
    case HW_DROPOUT2D:
        dropout2d_forward(io->out, io->saved, io->rng, io->in, &layer->dims.dropout, io->batch, io->training);
        return HW_OK;
    case HW_FLATTEN:
        flatten_forward(io->out, io->in, numel_of(layer, io));
        return HW_OK;
    case HW_LOG_SOFTMAX:
        log_softmax_forward(io->out, io->in, io->batch, (int)hw_shape_numel(layer->in_shape));
        return HW_OK;
    case HW_LAYER_KINDS:
        break;
    }
    return hw_fail("no layer of kind %d", (int)layer->kind);
}

static int cpu_backward(const hw_layer *layer, const hw_layer_io *io) {
    switch (layer->kind) {
    case HW_LINEAR:
        linear_backward(io->din, io->dweight, io->dbias, io->dout, io->in, io->weight, &layer->dims.linear, io->batch);
        return HW_OK;
    case HW_CONV2D:
        conv2d_backward(io->din, io->dweight, io->dbias, io->scratch, io->dout, io->in, io->weight, conv2d_cols(io),
                        &layer->dims.conv2d, io->batch);
        return HW_OK;
    case HW_MAXPOOL2D:
        maxpool2d_backward(io->din, io->dout, (const int32_t *)io->saved, &layer->dims.maxpool2d, io->batch);
        return HW_OK;
    case HW_RELU:
        relu_backward(io->din, io->dout, io->out, numel_of(layer, io));
        return HW_OK;
    case HW_DROPOUT:
        dropout_backward(io->din, io->dout, io->saved, &layer->dims.dropout, io->batch, io->training);
        return HW_OK;
    case HW_DROPOUT2D:
        dropout2d_backward(io->din, io->dout, io->saved, &layer->dims.dropout, io->batch, io->training);
        return HW_OK;
    case HW_FLATTEN:
        flatten_backward(io->din, io->dout, numel_of(layer, io));
        return HW_OK;
    case HW_LOG_SOFTMAX:
        log_softmax_backward(io->din, io->dout, io->out, io->batch, (int)hw_shape_numel(layer->in_shape));
        return HW_OK;
    case HW_LAYER_KINDS:
        break;
    }
    return hw_fail("no layer of kind %d", (int)layer->kind);
}

const hw_backend hw_cpu_backend = {.forward = cpu_forward, .backward = cpu_backward};

// ---- the walk ----

// Parameter i of `layer` in `base` (weights or gradients); NULL where the layer has none.
static float *param_in(const hw_model *model, const hw_layer *layer, int i, float *base) {
    if (i >= layer->n_params) return NULL;
    return base + model->params[layer->first_param + i].offset;
}

// The gradient of parameter i of `layer`; NULL where it has none or it is frozen.
static float *grad_in(const hw_model *model, const hw_layer *layer, int i, float *grads) {
    if (i >= layer->n_params || model->params[layer->first_param + i].frozen) return NULL;
    return grads + model->params[layer->first_param + i].offset;
}

static hw_layer_io io_of(const hw_model *model, const hw_exec_buffers *b, int i, int batch, int training) {
    const hw_layer *layer = &model->layers[i];
    return (hw_layer_io){
        .batch = batch,
        .training = training,
        .index = i,
        .in = b->acts[i],
        .out = b->acts[i + 1],
        .weight = param_in(model, layer, 0, b->weights),
        .bias = param_in(model, layer, 1, b->weights),
        .scratch = b->scratch,
        .saved = b->saved ? b->saved[i] : NULL,
        .rng = b->rng,
        .backend = b->backend,
    };
}

int hw_exec_forward(const hw_backend *backend, const hw_model *model, const hw_exec_buffers *b, int batch,
                    int training) {
    for (int i = 0; i < model->n_layers; i++) {
        const hw_layer *layer = &model->layers[i];
        hw_layer_io io = io_of(model, b, i, batch, training);
        if (backend->forward(layer, &io) != HW_OK) return hw_error_prefix("forward, layer %d", i);
    }
    return HW_OK;
}

int hw_exec_backward(const hw_backend *backend, const hw_model *model, const hw_exec_buffers *b, int batch,
                     int training, int first) {
    for (int i = model->n_layers - 1; i >= first; i--) {
        const hw_layer *layer = &model->layers[i];
        hw_layer_io io = io_of(model, b, i, batch, training);
        io.dout = b->grad_acts[i + 1];
        io.din = i > first ? b->grad_acts[i] : NULL;  // no gradient below the first trainable layer
        io.dweight = grad_in(model, layer, 0, b->grads);
        io.dbias = grad_in(model, layer, 1, b->grads);
        if (backend->backward(layer, &io) != HW_OK) return hw_error_prefix("backward, layer %d", i);
    }
    return HW_OK;
}

int hw_exec_first_trainable(const hw_model *model) {
    for (int i = 0; i < model->n_layers; i++) {
        const hw_layer *layer = &model->layers[i];
        for (int j = 0; j < layer->n_params; j++) {
            if (!model->params[layer->first_param + j].frozen) return i;
        }
    }
    return model->n_layers;
}
