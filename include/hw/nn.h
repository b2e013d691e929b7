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
#include "hw/shape.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct hw_layer hw_layer;
typedef struct hw_layer_type hw_layer_type;

// HW_LAYER_MAX_NUMEL: the most elements one sample's output (or one parameter tensor) may have.
enum { HW_LAYER_MAX_ARGS = 4, HW_LAYER_MAX_PARAMS = 2, HW_LAYER_MAX_NUMEL = 1 << 28 };

// The kinds of layer. hw_layer_types[] (src/nn/layers.c) has one row per kind, in this order (a
// static_assert on HW_LAYER_KINDS beside it), and every backend (the CPU's in src/nn/exec.c, the
// GPU's in src/cuda/backend.c) has one `switch (layer->kind)` per direction without a default:
// -Wswitch (in -Wall, with -Werror) makes a new kind fail to compile until each has its case.
typedef enum {
    HW_LINEAR,
    HW_CONV2D,
    HW_MAXPOOL2D,
    HW_RELU,
    HW_DROPOUT,
    HW_DROPOUT2D,
    HW_FLATTEN,
    HW_LOG_SOFTMAX,
    HW_LAYER_KINDS  // how many kinds there are
} hw_layer_kind;

// The sizes of a layer, per sample (the batch is given per call), set once by its configure.
// relu, flatten and log_softmax need none beyond the layer's shapes.
typedef struct {
    int in, out;  // features; weight [out, in], bias [out]
} hw_linear_dims;

typedef struct {
    int in_c, out_c;     // channels; weight [out_c, in_c, k, k], bias [out_c]
    int k, stride, pad;  // square kernel, zero padding
    int in_h, in_w, out_h, out_w;
} hw_conv2d_dims;

typedef struct {
    int c;          // channels (pooled one by one)
    int k, stride;  // square window, no padding
    int in_h, in_w, out_h, out_w;
} hw_maxpool2d_dims;

typedef struct {
    float p;        // the probability of zeroing; kept values are scaled by 1/(1-p)
    int c;          // dropout2d: channels, each zeroed whole (1 for dropout)
    int64_t plane;  // dropout2d: values per channel (all the sample's for dropout)
} hw_dropout_dims;  // dropout and dropout2d

// One layer as parsed from a model file line: its kind, its sizes, and views of its params (if
// any) into the model's flat buffer.
struct hw_layer {
    const hw_layer_type *type;  // hw_layer_types[kind]
    hw_layer_kind kind;
    char name[HW_NAME_CAP];  // "conv1", "fc2", "relu3": the prefix of its parameter names
    hw_shape in_shape;       // per sample, without the batch dimension
    hw_shape out_shape;
    int first_param;                 // index into hw_model.params, -1 when the layer has none
    int n_params;                    // number of hw_param entries it owns (weight, bias)
    int frozen;                      // marked `frozen` in the model file
    int line;                        // line in the model file, for messages
    double args[HW_LAYER_MAX_ARGS];  // positional numbers, then the type's key=value numbers; NAN when absent
    int n_args;                      // positional numbers given on the line
    union {                          // the sizes of its kind, set by configure
        hw_linear_dims linear;
        hw_conv2d_dims conv2d;
        hw_maxpool2d_dims maxpool2d;
        hw_dropout_dims dropout;  // dropout and dropout2d
    } dims;
};

// What one call of a layer's forward or backward works on, on the backend's device, as the
// executor's walk sets it up (src/nn/exec.c); each backend's switch passes these on to its
// function for the layer's kind. Activations are [batch, shape] row-major float32 (NCHW for
// images), one sample after another.
typedef struct {
    int batch;
    int training;         // dropout on; in backward, the mode of the forward it follows
    int index;            // the layer's index in the model (the GPU's dropout seed)
    const float *in;      // [batch, in_shape]
    float *out;           // [batch, out_shape]; forward writes it, backward may read it
    const float *weight;  // the layer's parameters (NULL when it has none)
    const float *bias;
    float *scratch;  // type->scratch_floats(layer, batch) floats, free for this call only
    uint8_t *saved;  // type->saved_bytes(layer, batch) bytes forward keeps for backward (NULL: none)
    hw_rng *rng;     // the workspace RNG (CPU dropout)
    void *backend;   // the backend's own state (the GPU runner: stream, labels, loss); CPU: NULL
    // backward only: every output is overwritten, never accumulated
    const float *dout;  // d loss / d out
    float *din;         // d loss / d in; NULL: not needed (first layer, frozen prefix)
    float *dweight;     // NULL: frozen, not computed
    float *dbias;       // NULL: frozen, not computed
} hw_layer_io;

// A kind of layer as the parser knows it. Adding one = its hw_layer_kind; one source file in
// src/nn/ defining a `const hw_layer_type` and its CPU forward and backward (plain functions,
// outputs first, sizes last, declared in src/nn/layer_util.h); one row in hw_layer_types[]
// (src/nn/layers.c); one case in each switch of the CPU backend (src/nn/exec.c); and, for the GPU,
// its kernels and one case in each switch of src/cuda/backend.c. Everything else (parser, summary,
// workspace sizes, initialisation, the walk, the gradient-check test) finds it through the table.
struct hw_layer_type {
    hw_layer_kind kind;                   // its row in hw_layer_types[]
    const char *name;                     // the word in the model file: "conv2d"
    const char *usage;                    // its arguments, for messages: "OUT_CHANNELS KERNEL [stride=S] [padding=P]"
    const char *name_prefix;              // default layer names: prefix + count among layers with that prefix ("conv1")
    int min_args, max_args;               // positional numbers on the line
    int is_loss;                          // the model's loss is taken on its output: it must be the last layer
    const char *keys[HW_LAYER_MAX_ARGS];  // key=value numbers it takes, stored in args[max_args + i]
    const char *param_names[HW_LAYER_MAX_PARAMS];  // "weight", "bias"; NULL-terminated, NULL: no params
    // Checks args against layer->in_shape; sets dims and out_shape and the parameter shapes.
    // On failure hw_fail()s naming what was expected (the parser prefixes "file:line: ").
    int (*configure)(hw_layer *layer, hw_shape *param_shapes);
    size_t (*scratch_floats)(const hw_layer *layer, int batch);  // NULL: none
    size_t (*saved_bytes)(const hw_layer *layer, int batch);     // NULL: none
    double (*flops)(const hw_layer *layer);                      // forward, per sample; NULL: 0
    // Writes a valid line for this type with random sizes and its input shape: the gradient-check
    // test runs every registered type through it.
    void (*example)(hw_rng *rng, hw_shape *in_shape, char *line, size_t cap);
};

// The layer types, one per kind in hw_layer_kind's order, then NULL (src/nn/layers.c).
extern const hw_layer_type *const hw_layer_types[HW_LAYER_KINDS + 1];
// The type called `name`, or NULL.
const hw_layer_type *hw_layer_type_find(const char *name);
// Sets up one layer from a model-file line ("conv2d 10 5 stride=2 frozen name=c1") and its
// input shape: type, kind, args, frozen, name (left "" when not given), dims, out_shape, and the
// shapes of its parameters. Fails naming what was expected (no file:line; the parser adds it).
int hw_layer_setup(hw_layer *layer, const char *line, hw_shape in_shape, hw_shape *param_shapes);

enum { HW_MAX_LAYERS = 64, HW_MAX_PARAMS = 128 };

typedef struct {
    char path[256];  // the model file, for messages
    char *text;      // the model file's whole text (stored in checkpoints)
    hw_shape input;  // per-sample input shape, e.g. [1, 28, 28]
    int n_classes;   // features of the last layer's output
    int n_layers;
    hw_layer layers[HW_MAX_LAYERS];
    int n_params;  // number of named parameter tensors
    hw_param params[HW_MAX_PARAMS];
    size_t n_weights;  // floats in the flat parameter buffer
    float *weights;    // the flat parameters: owned, or bound to caller memory
    int owns_weights;
    hw_device device;  // where `weights` lives
} hw_model;

// What a workspace holds for layer i: the floats of its output and of that output's gradient
// (acts[i + 1], grad_acts[i + 1]), the bytes of saved[i]; `view`: layer i is a flatten, whose
// output buffers are its input's (the workspace owns none: after the input they are the caller's x).
typedef struct {
    size_t act_floats;  // 0 for a view
    size_t saved_bytes;
    uint8_t view;
} hw_workspace_layer;

typedef struct {
    int max_batch;
    int n_layers;                // of the model it was allocated for
    float **acts;                // acts[i] = input of layer i, acts[n_layers] = log-probabilities;
                                 // acts[0] points at the caller's x (not copied) from forward to backward
    float **grad_acts;           // gradient of the loss with respect to acts[i]; grad_acts[0] is NULL:
                                 // the gradient of the network input is never computed
    hw_workspace_layer *layers;  // per layer, what was allocated for it (hw_workspace_fits)
    size_t grad_floats;          // of grads
    size_t scratch_floats;       // of scratch
    float *grads;                // flat gradient buffer, same layout as model->weights
    float *scratch;              // im2col and other per-layer temporaries, shared by all layers
    uint8_t **saved;             // per layer, what its forward keeps for its backward (type->saved_bytes):
                                 // dropout masks, max-pool argmax, conv2d's column matrices; NULL where
                                 // the layer keeps nothing
    hw_rng rng;                  // dropout draws
    int training;                // the mode of the last forward (backward follows it)
    int first_trainable;         // backward stops here: no gradient below the first layer that needs one
                                 // (set by hw_cpu_backward; n_layers when nothing is trainable)
} hw_workspace;

// ---- building ----
// Parses a model file. On a bad file the message names "file:line" and what was expected.
int hw_model_load(hw_model *model, const char *path);
// Parses model text; `name` stands for the file name in messages.
int hw_model_parse(hw_model *model, const char *text, const char *name);
// Allocates the model's own flat parameter buffer (zeroed, 64-byte aligned).
int hw_model_alloc_weights(hw_model *model);
// Uses caller memory (e.g. shared storage) of model->n_weights floats as the parameters; the
// model never frees it.
void hw_model_bind_weights(hw_model *model, float *weights);
// PyTorch's default initialisation: kaiming-uniform (a = sqrt(5)) weights, U(+-1/sqrt(fan_in)) biases,
// i.e. every parameter of a layer from U(-1/sqrt(fan_in), 1/sqrt(fan_in)), drawn in flat order from
// an RNG seeded with `seed`. Needs weights allocated or bound.
void hw_model_init_weights(hw_model *model, uint64_t seed);
// Marks parameters frozen (requires_grad=False) by name, comma separated ("conv1.weight,conv1.bias");
// a layer name ("conv1") freezes all of its parameters. An unknown name fails, naming it and the
// known ones, and freezes nothing.
int hw_model_freeze(hw_model *model, const char *names);
// Index of the parameter called `name`, or -1. Inline: a look-up in the struct, which the
// checkpoints (src/ckpt.c, a room before nn) do without calling into src/nn/.
static inline int hw_model_find_param(const hw_model *model, const char *name) {
    for (int i = 0; i < model->n_params; i++) {
        if (strcmp(model->params[i].name, name) == 0) return i;
    }
    return -1;
}
void hw_model_free(hw_model *model);
// One line per layer: name, type, output shape, parameter count; then the total.
void hw_model_summary(const hw_model *model, FILE *out);
// Multiply-adds x 2 of one sample's forward pass (for the compute-floor figure in bench/).
double hw_model_forward_flops(const hw_model *model);

// ---- the executor: one walk over the layers for every backend ----
// A layer's forward or backward on one backend: HW_OK, or HW_ERR with the message set.
// Backward overwrites the gradients it is given and skips any that are NULL (din, dweight, dbias).
typedef int (*hw_layer_fn)(const hw_layer *layer, const hw_layer_io *io);

// A backend: how one device runs a layer of any kind. Each is a switch on layer->kind that passes
// io's buffers to that kind's function.
typedef struct {
    hw_layer_fn forward;
    hw_layer_fn backward;
    // Optional (NULL: none): two neighbouring layers that the backend runs in one forward call,
    // doing less than the two calls would. pairs() says whether it does for these two (the CPU: a
    // convolution and the dropout2d after it, in training); forward_pair() then runs both, each
    // with its own io, and leaves the same outputs and saved state as the two calls.
    int (*pairs)(const hw_layer *layer, const hw_layer *next, int training);
    int (*forward_pair)(const hw_layer *layer, const hw_layer_io *io, const hw_layer *next, const hw_layer_io *next_io);
} hw_backend;

// The CPU's: the functions of src/nn/<kind>.c (src/nn/exec.c).
extern const hw_backend hw_cpu_backend;

// What one walk works on, in the backend's memory: the flat weights and gradients,
// acts[0..n_layers] (acts[i] the input of layer i) and their gradients, per-layer saved state
// (NULL entries where a layer keeps none), the shared scratch, the CPU's dropout RNG and the
// backend's own state.
typedef struct {
    float *weights, *grads;
    float **acts, **grad_acts;
    uint8_t **saved;
    float *scratch;
    hw_rng *rng;
    void *backend;
} hw_exec_buffers;

// Forward of every layer over `batch` samples of b->acts[0]; fails naming the layer.
int hw_exec_forward(const hw_backend *backend, const hw_model *model, const hw_exec_buffers *b, int batch,
                    int training);
// Backward from b->grad_acts[n_layers] (the loss's gradient, which the caller has set) down to layer
// `first` (hw_exec_first_trainable): frozen parameters get no gradient, and neither does the input
// of layer `first`. Fails naming the layer.
int hw_exec_backward(const hw_backend *backend, const hw_model *model, const hw_exec_buffers *b, int batch,
                     int training, int first);
// The first layer with a parameter that is not frozen; n_layers when none is.
int hw_exec_first_trainable(const hw_model *model);
// One layer's part of each walk (layer i), for whoever times the layers one by one (bench/).
int hw_exec_layer_forward(const hw_backend *backend, const hw_model *model, const hw_exec_buffers *b, int i, int batch,
                          int training);
// True when the forward walk runs layers i and i + 1 in one call (backend->pairs); then
// hw_exec_pair_forward is that call.
int hw_exec_pairs(const hw_backend *backend, const hw_model *model, int i, int training);
int hw_exec_pair_forward(const hw_backend *backend, const hw_model *model, const hw_exec_buffers *b, int i, int batch,
                         int training);
int hw_exec_layer_backward(const hw_backend *backend, const hw_model *model, const hw_exec_buffers *b, int i, int batch,
                           int training, int first);

// ---- the CPU kernels (src/nn/cpu/kernels.c) ----
// The layers' fast kernels exist in one copy per instruction set: "avx512", "avx2" (and FMA),
// "baseline" (any x86-64 CPU). hw_nn_kernels_select chooses the copy that runs: `name`, or the best
// this CPU runs for NULL, "" or "auto". It fails, naming what this CPU runs, for an unknown name or
// one the CPU cannot run. ./hogwild calls it at start with $HOGWILD_CPU_PATH; where nobody calls it,
// the first layer that needs the kernels does (and exits with the message on failure).
int hw_nn_kernels_select(const char *name);
// Whether this CPU (and its OS) can run the named copy.
int hw_nn_kernels_runnable(const char *name);
// "avx2 (the CPU's best; this CPU runs avx2, baseline; HOGWILD_CPU_PATH forces one)": for --version.
const char *hw_nn_kernels_info(void);

// ---- the CPU's workspace (src/nn/workspace.c) ----
// Everything one worker needs to run `model` on batches of up to max_batch samples, zeroed;
// `seed` seeds its dropout RNG. The workspace does not depend on the weights (bind at will).
int hw_workspace_alloc(hw_workspace *ws, const hw_model *model, int max_batch, uint64_t seed);
void hw_workspace_free(hw_workspace *ws);
// Seeds the workspace's dropout RNG with `seed`, as hw_workspace_alloc does: the simulator's
// virtual workers (src/train/simulate.c) each start their own generator as a real worker's.
void hw_workspace_seed(hw_workspace *ws, uint64_t seed);
// Keeps the workspace's buffers out of every process this one forks later (MADV_DONTFORK): for
// the parent's evaluation workspace, which workers never use. Inherited, it would be copied into
// each worker page by page as the parent wrote it during the run.
int hw_workspace_keep_from_children(hw_workspace *ws);
// True when the workspace holds every buffer `model` needs at its max_batch, each as large as it
// needs, and its flatten views where the model's flattens are: a model of other layers may not
// run in it (hw_cpu_forward and hw_cpu_backward refuse).
int hw_workspace_fits(const hw_workspace *ws, const hw_model *model);

// ---- one training step on the CPU (src/nn/exec.c) ----
// The workspace's buffers as the walk takes them (the model's weights, the workspace's
// activations, gradients, saved state, scratch and RNG). It first points each flatten's view at
// the buffer below it, so that a walk after ws->acts[0] changed reads the new input.
hw_exec_buffers hw_workspace_buffers(const hw_model *model, hw_workspace *ws);
// Forward pass over `batch` samples of x ([batch, input numel], normalised floats): the walk over
// the layers, then the loss. With training = 1 dropout is on. Returns the mean negative
// log-likelihood over the batch (labels may be NULL, then 0 is returned). The log-probabilities
// stay in the last activation. x is read in place, not copied: it must stay valid until
// hw_cpu_backward. Returns NAN (message set) when batch is outside [1, max_batch] or the model has
// no weights, and NAN when a label is >= n_classes.
float hw_cpu_forward(const hw_model *model, hw_workspace *ws, const float *x, const uint8_t *labels, int batch,
                     int training);
// Backward of the mean loss of the last forward (training or not; dropout follows the forward's
// mode): the loss's gradient, then the walk back. Overwrites ws->grads. Frozen parameters'
// gradients are not computed nor written (they stay zero), and nothing below the first
// trainable layer is computed. Fails (message set, the gradients untouched) when batch is
// outside [1, max_batch] or labels is NULL.
int hw_cpu_backward(const hw_model *model, hw_workspace *ws, const uint8_t *labels, int batch);
// (The update: hw_sgd_step and its variants, include/hw/optim.h, also in src/nn/exec.c.)

// The loss: the mean negative log-likelihood of the labels over `batch` rows of log-probabilities
// (F.nll_loss); NAN when a label is >= n_classes.
float hw_nll_loss(const float *logp, const uint8_t *labels, int batch, int n_classes);
// Its gradient with respect to the log-probabilities: -1/batch at each row's label, 0 elsewhere.
void hw_nll_loss_backward(float *dlogp, const uint8_t *labels, int batch, int n_classes);
// How many of the last forward's predictions (argmax of the log-probabilities) equal the labels.
int hw_model_count_correct(const hw_model *model, const hw_workspace *ws, const uint8_t *labels, int batch);
// The last forward's log-probabilities, [batch, n_classes].
const float *hw_model_output(const hw_model *model, const hw_workspace *ws);

#endif
