// runner_state: the GPU runner's state (runner.h is its interface), private to runner.cu, to
// backend.c, whose layer functions launch on its stream, and to the tests, which read the last
// forward's log-probabilities from it: no trainer needs them on the host.
#ifndef HW_CUDA_RUNNER_STATE_H
#define HW_CUDA_RUNNER_STATE_H

#include "blas.h"
#include "device.h"
#include "layer_ops.h"
#include "runner.h"

typedef struct {
    size_t offset, count;
} flat_range;

// What a captured training step bakes into its kernels' arguments besides the buffers: a change
// of any of these needs a new capture. Not the learning rate, which a schedule changes from step
// to step: it is set on the SGD nodes before a replay (step_graph.lr).
typedef struct {
    int batch, u8;
    float momentum, weight_decay;
    int nesterov, started;
} step_key;

// One input slot's captured training step (runner.cu, "the training step as a CUDA graph").
typedef struct {
    void *graph, *exec;  // cudaGraph_t and cudaGraphExec_t; NULL until captured
    step_key key;
    int n_dropout;                           // its dropout kernels, whose step is set at each replay
    void *dropout_nodes[2 * HW_MAX_LAYERS];  // cudaGraphNode_t
    int n_sgd;                               // its SGD kernels, one per trainable range
    void *sgd_nodes[HW_MAX_PARAMS];          // cudaGraphNode_t
    float lr;                                // the learning rate its SGD nodes hold now
} step_graph;

struct hw_cuda_runner {
    hw_device device;
    int selected;  // the device exists and was made current: there is something to free
    int max_batch;
    int n_layers;
    hw_model model;                 // the layers and parameter views it runs (no text, no weights)
    uint8_t *saved[HW_MAX_LAYERS];  // per layer, what forward keeps for backward: maxpool2d's argmax
    int first_trainable;            // backward stops at this layer; n_layers when nothing trains
    int n_classes;
    int64_t in_numel;
    size_t n_weights;
    int n_ranges;  // trainable parts of the flat buffer, for the SGD step
    flat_range ranges[HW_MAX_PARAMS];

    float *weights;  // device; shared with other processes when opened by IPC
    int owns_weights;
    float *grads, *velocity;  // device, private
    int sgd_started;

    float *arena;                    // one allocation: activations, gradients, scratch, loss
    float *acts[HW_MAX_LAYERS + 1];  // acts[i]: input of layer i; acts[n_layers]: log-probabilities
    float *grad_acts[HW_MAX_LAYERS + 1];
    float *scratch;  // conv2d im2col and GEMM output
    float *row_loss, *loss_dev;
    double *train_loss_sum_dev;  // loss x batch summed over the training forwards, on the GPU
    int32_t *argmax_arena, *correct_dev;
    uint8_t *labels_dev;  // the labels of the batch last run forward

    hw_cuda_stream copy, compute;
    hw_cublas blas;

    // staging: two pinned host slots and two device slots, filled in turn
    size_t slot_bytes;
    void *host_x[2], *dev_x[2];
    uint8_t *host_labels[2], *dev_labels[2];
    int slot_batch[2], slot_u8[2], slot_has_labels[2];
    hw_cuda_event copy_start[2], copy_done[2], slot_free[2];
    int copy_timed[2];
    int queued, next_upload, next_forward;
    float *host_scalar;  // pinned: the loss or the correct count on its way back

    // the last forward
    int batch, has_labels, training;
    uint64_t seed, step;
    float mean, std;

    int graph;              // config.graph, until a capture fails
    const char *graph_off;  // NULL, or why the training steps run launch by launch
    char graph_off_text[256];
    step_graph graphs[2];  // per input slot

    int timing;
    hw_cuda_event compute_start, compute_end;
    int compute_timed;
    double copy_ms, compute_ms;
};

// A conv2d layer's sizes as the kernels take them, for `batch` samples.
static inline hw_conv_dims runner_conv_dims(const hw_conv2d_dims *d, int batch) {
    hw_conv_dims c = {batch, d->in_c, d->in_h, d->in_w, d->out_c, d->k, d->stride, d->pad};
    return c;
}

#endif
