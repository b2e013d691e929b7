// runner: the GPU model runner (runner.cu), one worker's forward, backward and SGD step on one
// device. The GPU trainers (cuda/train/) drive it; its state is runner_state.h's. Private to
// src/cuda/, the tests and the benchmarks.
//
// Runs an hw_model description on the GPU. The weights are a device copy of the flat buffer
// (possibly opened through IPC and shared with other processes: Hogwild on one GPU); gradients,
// momentum, activations for max_batch, scratch and two pinned staging slots are the runner's
// own, allocated once in create. A copy stream feeds the input while a compute stream runs: the
// next batch's upload overlaps the current batch's forward/backward/step.
#ifndef HW_CUDA_RUNNER_H
#define HW_CUDA_RUNNER_H

#include "device.h"

#include <stdint.h>

// nn.h has no C++ guards of its own: the .cu files see it through this block.
#ifdef __cplusplus
extern "C" {
#endif

#include "hw/nn.h"

typedef struct hw_cuda_runner hw_cuda_runner;

typedef struct {
    hw_device device;  // cuda:N
    int max_batch;
    float *weights_dev;  // device flat weights to use (e.g. from hw_cuda_ipc_open); NULL: the
                         // runner allocates its own and uploads model->weights (when set)
    float mean, std;     // normalisation of uint8 input: (b/255 - mean) / std
    uint64_t seed;       // dropout masks (give each worker its own)
    int timing;          // 1: time copies and compute with events (hw_cuda_runner_timing)
    int graph;           // 1: hw_cuda_runner_train_step replays the step as a CUDA graph
                         // (hw_cuda_runner_graph_off says when and why it cannot)
} hw_cuda_runner_config;

// Checks the model (layer kinds, shapes, a log_softmax last), selects the device, checks there is
// enough free memory and allocates everything.
int hw_cuda_runner_create(hw_cuda_runner **runner, const hw_model *model, const hw_cuda_runner_config *config);
void hw_cuda_runner_free(hw_cuda_runner *runner);

// Queues a batch: copies it into the next free pinned slot and starts its H2D copy on the copy
// stream. At most two batches are queued; forward takes the oldest. labels may be NULL (no loss).
int hw_cuda_runner_upload_u8(hw_cuda_runner *r, const uint8_t *x, const uint8_t *labels, int batch);
// The same with an already normalised float batch [batch, input numel].
int hw_cuda_runner_upload_f32(hw_cuda_runner *r, const float *x, const uint8_t *labels, int batch);
// Forward over the oldest queued batch (training = 1: dropout on, the dropout step advances).
// With loss != NULL waits for the result and stores the mean NLL; with NULL nothing waits.
int hw_cuda_runner_forward(hw_cuda_runner *r, int training, float *loss);
// Backward of the mean loss of the last forward (which had labels): overwrites the gradients of
// trainable parameters; stops at the first layer with a trainable parameter.
int hw_cuda_runner_backward(hw_cuda_runner *r);
// torch.optim.SGD step with the runner's momentum buffer on the shared device weights (frozen
// parameters are skipped). Fails on the settings hw_sgd_check refuses (include/hw/sgd_update.h).
int hw_cuda_runner_sgd_step(hw_cuda_runner *r, float lr, float momentum, float weight_decay, int nesterov);
// One training step over the oldest queued batch (which has labels): forward, backward and
// hw_cuda_runner_sgd_step, queued without waiting. With config.graph the step's kernels and
// GEMMs are captured once per input slot into a CUDA graph and replayed with one launch (the same
// kernels on the same buffers, so the same results); a new capture happens when the batch size,
// the input kind or the SGD settings but the learning rate change (a schedule's new rate is set
// on the graph's SGD nodes). Where a graph cannot be captured (the simulated
// device captures none) the step runs launch by launch, and hw_cuda_runner_graph_off says why.
int hw_cuda_runner_train_step(hw_cuda_runner *r, float lr, float momentum, float weight_decay, int nesterov);
// NULL while config.graph is on and working; otherwise why the steps are not graphs.
const char *hw_cuda_runner_graph_off(const hw_cuda_runner *r);
// Correct predictions of the last forward (waits).
int hw_cuda_runner_count_correct(hw_cuda_runner *r, int *correct);
// Waits for all queued work.
int hw_cuda_runner_sync(hw_cuda_runner *r);

// The device flat weights (for hw_cuda_ipc_export when the runner allocated them).
float *hw_cuda_runner_weights(hw_cuda_runner *r);
// Host <-> device copies of the whole flat buffer (checkpoints, evaluation); they wait.
int hw_cuda_runner_weights_upload(hw_cuda_runner *r, const float *host);
int hw_cuda_runner_weights_download(hw_cuda_runner *r, float *host);
// Milliseconds spent so far in H2D input copies and in compute (forward to step), measured with
// events when config.timing = 1; waits for the work in flight.
int hw_cuda_runner_timing(hw_cuda_runner *r, double *copy_ms, double *compute_ms);
// The device gradient buffer (flat, the weights' layout), written by backward and read by the
// SGD step: DataParallel scales and all-reduces it in between.
float *hw_cuda_runner_grads(hw_cuda_runner *r);
// The stream the runner computes on (forward, backward, step): work queued on it is ordered
// with the runner's own.
hw_cuda_stream hw_cuda_runner_stream(hw_cuda_runner *r);
// The mean loss of the last forward with labels (waits for the runner's stream).
int hw_cuda_runner_loss(hw_cuda_runner *r, float *loss);
// The sum of loss x batch over every training forward with labels since the runner was created,
// summed on the GPU (waits for the runner's stream): read it now and then, not every step.
int hw_cuda_runner_train_loss_sum(hw_cuda_runner *r, double *sum);

#ifdef __cplusplus
}
#endif

#endif
