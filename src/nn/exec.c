// exec: the one walk over a model's layers, forward and backward, for every backend. A backend
// (hw_backend) has one forward and one backward per kind of layer: the CPU's are in src/nn/, the
// GPU's in src/cuda/backend.c. The walk decides what each call works on: the layer's
// activations, its parameters' views into the flat buffers, which gradients are wanted.
#include "hw/nn.h"

#include "hw/err.h"

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
        if (backend->forward[layer->kind](layer, &io) != HW_OK) return hw_error_prefix("forward, layer %d", i);
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
        if (backend->backward[layer->kind](layer, &io) != HW_OK) return hw_error_prefix("backward, layer %d", i);
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
