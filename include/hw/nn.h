// nn: layers, the model built from a model file, forward and exact backward on the CPU.
//
// A model has two halves:
//   hw_model      what the network is (layers, parameter layout) plus a pointer to its flat
//                 parameters. After fork every worker holds the same description and the same
//                 pointer into shared memory: that pointer is what Hogwild shares.
//   hw_workspace  what one worker or replica needs to run it: activations and their gradients
//                 for the largest batch, the flat gradient buffer, scratch space, its own RNG.
//                 Allocated once; nothing is allocated inside the training loop.
#ifndef HW_NN_H
#define HW_NN_H

#include "hw/rng.h"
#include "hw/tensor.h"

#include <stdint.h>
#include <stdio.h>

typedef struct hw_layer hw_layer;
typedef struct hw_layer_type hw_layer_type;

// One layer as parsed from a model file line. Layer types keep their own settings in `args`
// and `config`; params (if any) are views into the model's flat buffer.
struct hw_layer {
    const hw_layer_type *type;
    char name[HW_NAME_CAP];   // "conv1", "fc2", "relu3": the prefix of its parameter names
    hw_shape in_shape;        // per sample, without the batch dimension
    hw_shape out_shape;
    int first_param;          // index into hw_model.params, -1 when the layer has none
    int n_params;             // number of hw_param entries it owns (weight, bias)
    int frozen;               // marked `frozen` in the model file
    int line;                 // line in the model file, for messages
    double args[4];           // numbers from the model file line, as the layer type parsed them
    int n_args;
    int64_t config[8];        // derived integer settings (kernel, stride, padding, ...)
};

enum { HW_MAX_LAYERS = 64, HW_MAX_PARAMS = 128 };

typedef struct {
    char path[256];           // the model file, for messages
    char *text;               // the model file's whole text (stored in checkpoints)
    hw_shape input;           // per-sample input shape, e.g. [1, 28, 28]
    int n_classes;            // features of the last layer's output
    int n_layers;
    hw_layer layers[HW_MAX_LAYERS];
    int n_params;             // number of named parameter tensors
    hw_param params[HW_MAX_PARAMS];
    size_t n_weights;         // floats in the flat parameter buffer
    float *weights;           // the flat parameters: owned, or bound to caller memory
    int owns_weights;
    hw_device device;         // where `weights` lives
} hw_model;

typedef struct {
    int max_batch;
    float **acts;             // acts[i] = output of layer i-1 (acts[0] = the input copy)
    float **grad_acts;        // gradient of the loss with respect to acts[i]
    float *grads;             // flat gradient buffer, same layout as model->weights
    float *scratch;           // im2col and other per-layer temporaries
    uint8_t **masks;          // dropout masks per layer (NULL where unused)
    hw_rng rng;               // dropout draws
    int first_trainable;      // backward stops here: no gradient below the first layer that needs one
} hw_workspace;

// ---- building ----
// Parses a model file. On a bad file the message names "file:line" and what was expected.
int hw_model_load(hw_model *model, const char *path);
// Parses model text; `name` stands for the file name in messages.
int hw_model_parse(hw_model *model, const char *text, const char *name);
// Allocates the model's own flat parameter buffer (zeroed).
int hw_model_alloc_weights(hw_model *model);
// Uses caller memory (e.g. shared storage) of model->n_weights floats as the parameters.
void hw_model_bind_weights(hw_model *model, float *weights);
// PyTorch's default initialisation: kaiming-uniform (a = sqrt(5)) weights, U(+-1/sqrt(fan_in)) biases.
void hw_model_init_weights(hw_model *model, uint64_t seed);
// Marks parameters frozen by name, comma separated ("conv1.weight,conv1.bias"); unknown names fail.
int hw_model_freeze(hw_model *model, const char *names);
// Index of the parameter called `name`, or -1.
int hw_model_find_param(const hw_model *model, const char *name);
void hw_model_free(hw_model *model);
// One line per layer: name, type, output shape, parameter count; then the total.
void hw_model_summary(const hw_model *model, FILE *out);
// Multiply-adds x 2 of one sample's forward pass (for the compute-floor figure in bench/).
double hw_model_forward_flops(const hw_model *model);

// ---- running ----
int hw_workspace_alloc(hw_workspace *ws, const hw_model *model, int max_batch, uint64_t seed);
void hw_workspace_free(hw_workspace *ws);

// Forward pass over `batch` samples of x ([batch, input numel], normalised floats). With
// training = 1 dropout is on. Returns the mean negative log-likelihood over the batch (labels
// may be NULL, then 0 is returned). The log-probabilities stay in the last activation.
float hw_model_forward(const hw_model *model, hw_workspace *ws, const float *x, const uint8_t *labels,
                       int batch, int training);
// Backward of the mean loss after a training forward: overwrites ws->grads (frozen parameters'
// gradients are left at zero and not computed).
void hw_model_backward(const hw_model *model, hw_workspace *ws, const uint8_t *labels, int batch);
// How many of the last forward's predictions (argmax of the log-probabilities) equal the labels.
int hw_model_count_correct(const hw_model *model, const hw_workspace *ws, const uint8_t *labels, int batch);
// The last forward's log-probabilities, [batch, n_classes].
const float *hw_model_output(const hw_model *model, const hw_workspace *ws);

#endif
