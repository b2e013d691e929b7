// cuda: devices, device and pinned memory, streams, events, IPC handles, cuBLAS GEMM, the layer
// kernels and the GPU model runner.
//
// Device semantics follow PyTorch: a device is "cpu" or "cuda:N" (hw_device, shape.h); a
// process works on one selected CUDA device at a time (hw_cuda_select); memory belongs to the
// device it was allocated on; copies between host and device are explicit.
//
// CUDA and fork: a process that has initialised CUDA cannot hand CUDA to a child it forks. Every
// function here initialises CUDA, so a trainer forks its workers FIRST and only then calls into
// this module (see docs/ARCHITECTURE.md).
//
// Every CUDA, cuBLAS and NCCL call is checked; a failure returns HW_ERR with a message naming
// the call, file:line and the library's error string (hw_error()). A build without CUDA (make
// CUDA=0, or no nvcc) has none of this module: src/train/gpu_plugin.c refuses a GPU run there.
//
// The types below are the CUDA runtime's own handle types (cudaStream_t is struct CUstream_st *,
// cudaEvent_t is struct CUevent_st *, cublasHandle_t is struct cublasContext *), named without
// including the CUDA headers so that this header compiles everywhere.
#ifndef HW_CUDA_H
#define HW_CUDA_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

// nn.h, option.h and shape.h have no C++ guards of their own: the .cu files see them through this block.
#ifdef __cplusplus
extern "C" {
#endif

#include "hw/couple_step.h"
#include "hw/err.h"
#include "hw/host_device.h"
#include "hw/nn.h"
#include "hw/option.h"
#include "hw/shape.h"

typedef struct CUstream_st *hw_cuda_stream;  // = cudaStream_t; NULL is the legacy default stream
typedef struct CUevent_st *hw_cuda_event;    // = cudaEvent_t
typedef struct cublasContext *hw_cublas;     // = cublasHandle_t

// ---- devices ----
// Number of CUDA devices. Fails with "no CUDA device found: <reason>" when there is none (no
// driver, no GPU, or CUDA_VISIBLE_DEVICES hides them all); *count is 0 then.
int hw_cuda_device_count(int *count);
// Makes `device` (cuda:N) current for the calling thread. Fails on cpu, on an index that does not
// exist ("cuda:3 does not exist: this machine has 1 CUDA device(s)") and with no GPU at all.
int hw_cuda_select(hw_device device);
// The current device's free and total memory in bytes.
int hw_cuda_mem_info(size_t *free_bytes, size_t *total_bytes);
// Fails when the current device has less than `bytes` free ("cuda:0 has 120 MiB free, 300 MiB needed").
int hw_cuda_check_free(size_t bytes);
// Fails, naming the mode, when `device`'s compute mode (nvidia-smi -c) lets fewer than two
// processes use it at once (EXCLUSIVE_PROCESS, PROHIBITED): GPU Hogwild needs the parent and
// every worker on it.
int hw_cuda_check_shared_use(hw_device device);
// "NVIDIA H200 (cuda:0, 139.8 GiB, sm_90)" into buf.
int hw_cuda_describe(hw_device device, char *buf, size_t cap);

// ---- device memory (on the current device) ----
int hw_cuda_malloc(void **ptr, size_t bytes);
void hw_cuda_free(void *ptr);  // NULL is fine; errors are ignored (called on cleanup paths)
int hw_cuda_memset(void *ptr, int value, size_t bytes, hw_cuda_stream stream);

// ---- pinned (page-locked) host memory: the source and target of asynchronous copies ----
int hw_cuda_host_alloc(void **ptr, size_t bytes);
void hw_cuda_host_free(void *ptr);

// ---- streams and events ----
// A stream that does not synchronise with the legacy default stream.
int hw_cuda_stream_create(hw_cuda_stream *stream);
void hw_cuda_stream_destroy(hw_cuda_stream stream);
int hw_cuda_stream_sync(hw_cuda_stream stream);
// timing = 0 creates a lighter event that only orders work (cudaEventDisableTiming).
int hw_cuda_event_create(hw_cuda_event *event, int timing);
void hw_cuda_event_destroy(hw_cuda_event event);
int hw_cuda_event_record(hw_cuda_event event, hw_cuda_stream stream);
// Work queued on `stream` after this call waits for the event (the host does not wait).
int hw_cuda_stream_wait_event(hw_cuda_stream stream, hw_cuda_event event);
int hw_cuda_event_sync(hw_cuda_event event);
// Milliseconds between two recorded, completed timing events.
int hw_cuda_event_elapsed_ms(hw_cuda_event start, hw_cuda_event end, float *ms);

// ---- copies, asynchronous on `stream` (host memory should be pinned for real overlap) ----
int hw_cuda_memcpy_h2d(void *dst_dev, const void *src_host, size_t bytes, hw_cuda_stream stream);
int hw_cuda_memcpy_d2h(void *dst_host, const void *src_dev, size_t bytes, hw_cuda_stream stream);
int hw_cuda_memcpy_d2d(void *dst_dev, const void *src_dev, size_t bytes, hw_cuda_stream stream);

// ---- CUDA IPC: one device allocation shared by several processes ----
// The handle is plain bytes: it can be written into host shared memory and read by another
// process, which opens it to get its own pointer to the same device memory.
typedef struct {
    unsigned char bytes[64];  // cudaIpcMemHandle_t
} hw_cuda_ipc_handle;

// `dev_ptr` must be the start of a hw_cuda_malloc allocation.
int hw_cuda_ipc_export(const void *dev_ptr, hw_cuda_ipc_handle *handle);
// Opens a handle exported by ANOTHER process (IPC is between processes), with peer access
// enabled lazily when the memory is on another device than the current one.
int hw_cuda_ipc_open(const hw_cuda_ipc_handle *handle, void **dev_ptr);
// Every process that opened a handle closes it BEFORE the exporting process frees the memory
// (CUDA leaves a free before the close undefined).
int hw_cuda_ipc_close(void *dev_ptr);

// ---- cuBLAS ----
// A handle bound to `stream`: one per stream and per worker (a handle is not shared between
// threads). Math mode is plain FP32 (no TF32), so results match the CPU path to float rounding.
int hw_cublas_create(hw_cublas *handle, hw_cuda_stream stream);
void hw_cublas_destroy(hw_cublas handle);
// Row-major C[m,n] = alpha * op(A) * op(B) + beta * C, op(X) = X or X^T (trans_x != 0), all
// matrices dense: A is [m,k] (or [k,m] transposed), B is [k,n] (or [n,k]). Wraps the column-major
// cublasSgemm by computing C^T = op(B)^T op(A)^T. Asynchronous on the handle's stream.
// Row-major partial[s][m, n] = a[m, chunk s of k] b[n, chunk s of k]^T for s < splits (k a multiple
// of splits): one strided-batched cuBLAS call; the caller sums the partials.
int hw_cuda_sgemm_nt_split_k(hw_cublas handle, int m, int n, int k, int splits, const float *a, const float *b,
                             float *partial);
int hw_cuda_sgemm(hw_cublas handle, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                  const float *b, float beta, float *c);

// ---- layer kernels: the CPU layers' math on device pointers, asynchronous on `stream` ----
// Sizes are per batch; tensors are NCHW (or [batch, features]) and contiguous. Backward
// functions write (overwrite) the gradients they are given; a NULL gradient pointer skips it.
typedef struct {
    hw_cuda_stream stream;
    hw_cublas blas;  // bound to `stream`
} hw_cuda_ctx;

// y[b,o] = sum_i x[b,i] w[o,i] + bias[o]
int hw_cuda_linear_forward(hw_cuda_ctx ctx, float *y, const float *x, const float *w, const float *bias, int batch,
                           int in_features, int out_features);
int hw_cuda_linear_backward(hw_cuda_ctx ctx, float *dx, float *dw, float *dbias, const float *dy, const float *x,
                            const float *w, int batch, int in_features, int out_features);

typedef struct {
    int batch, in_channels, height, width;
    int out_channels, kernel, stride, padding;
} hw_conv_dims;
// Output height and width for the dims.
static inline int hw_conv_out_h(hw_conv_dims d) { return (d.height + 2 * d.padding - d.kernel) / d.stride + 1; }
static inline int hw_conv_out_w(hw_conv_dims d) { return (d.width + 2 * d.padding - d.kernel) / d.stride + 1; }
// Floats of scratch space conv2d needs at any batch up to d.batch: the im2col matrix
// [C*K*K, B*OH*OW], the GEMM output [OC, B*OH*OW] and, where the weight gradient's GEMM is split
// over the batch, its partial sums (which a smaller batch may need where d.batch does not); for
// a direct convolution (conv_is_direct) at least the partial sums of its direct weight gradient.
size_t hw_cuda_conv2d_scratch_floats(hw_conv_dims d);
// im2col over the whole batch, one GEMM, a permute to NCHW with the bias; for few taps
// (conv_is_direct) one direct kernel.
int hw_cuda_conv2d_forward(hw_cuda_ctx ctx, float *y, const float *x, const float *w, const float *bias, hw_conv_dims d,
                           float *scratch);
// dw, dbias by GEMM and reduction over the batch, or, for few taps (conv_is_direct), straight from
// x and dy; dx by GEMM and col2im. dx, dw and dbias may each be NULL: not computed, not written.
int hw_cuda_conv2d_backward(hw_cuda_ctx ctx, float *dx, float *dw, float *dbias, const float *dy, const float *x,
                            const float *w, hw_conv_dims d, float *scratch);

// Max pooling without padding, output floor((h - kernel) / stride) + 1; argmax keeps the flat
// input index (within the sample's channel plane) of each output's maximum, first one on ties.
int hw_cuda_maxpool2d_forward(hw_cuda_stream stream, float *y, int32_t *argmax, const float *x, int batch, int channels,
                              int height, int width, int kernel, int stride);
int hw_cuda_maxpool2d_backward(hw_cuda_stream stream, float *dx, const float *dy, const int32_t *argmax, int batch,
                               int channels, int height, int width, int kernel, int stride);

int hw_cuda_relu_forward(hw_cuda_stream stream, float *y, const float *x, int64_t n);
// dx = dy where y > 0, else 0 (y is the forward output).
int hw_cuda_relu_backward(hw_cuda_stream stream, float *dx, const float *dy, const float *y, int64_t n);

// Dropout: element i of [batch, features] is kept when hw_dropout_uniform(seed, step, i) >= p
// and then scaled by 1/(1-p). Dropout2d drops whole channels: the draw is for index b*channels+c
// and applies to the channel's plane of `plane` elements. The same call with the same
// (seed, step) computes the same mask, so backward recomputes it instead of storing it.
int hw_cuda_dropout_forward(hw_cuda_stream stream, float *y, const float *x, int64_t n, float p, uint64_t seed,
                            uint64_t step);
int hw_cuda_dropout_backward(hw_cuda_stream stream, float *dx, const float *dy, int64_t n, float p, uint64_t seed,
                             uint64_t step);
int hw_cuda_dropout2d_forward(hw_cuda_stream stream, float *y, const float *x, int64_t planes, int64_t plane, float p,
                              uint64_t seed, uint64_t step);
int hw_cuda_dropout2d_backward(hw_cuda_stream stream, float *dx, const float *dy, int64_t planes, int64_t plane,
                               float p, uint64_t seed, uint64_t step);

// Fused log_softmax (numerically stable) and mean NLL: logp = log_softmax(x) per row; with labels
// (device, uint8) the mean -logp[b, label] goes to *loss_dev (device float). labels may be NULL.
int hw_cuda_log_softmax_nll_forward(hw_cuda_stream stream, float *logp, float *loss_dev, const float *x,
                                    const uint8_t *labels, int batch, int classes, float *row_scratch);
// dx = (exp(logp) - onehot(label)) / batch: the gradient of the mean loss wrt the logits.
int hw_cuda_log_softmax_nll_backward(hw_cuda_stream stream, float *dx, const float *logp, const uint8_t *labels,
                                     int batch, int classes);
// *total_dev += *loss_dev * batch (device double and float): sums the training loss on the GPU,
// so that a trainer reads it once in a while instead of waiting for every step.
int hw_cuda_accumulate_loss(hw_cuda_stream stream, double *total_dev, const float *loss_dev, int batch);
// How many rows' argmax equals the label, added into *count_dev (device int32).
int hw_cuda_count_correct(hw_cuda_stream stream, int32_t *count_dev, const float *logp, const uint8_t *labels,
                          int batch, int classes);

// torch.optim.SGD over n floats: d = g + wd*w; with momentum, v = d on the first step (started
// == 0) else v = m*v + d, then d = d + m*v (nesterov) or d = v; w -= lr*d. velocity may be NULL
// when momentum == 0.
int hw_cuda_sgd_step(hw_cuda_stream stream, float *w, const float *g, float *velocity, int64_t n, float lr,
                     float momentum, float weight_decay, int nesterov, int started);

// x[i] = (bytes[i] / 255 - mean) / std: a uint8 batch to the normalised float input.
int hw_cuda_normalize_u8(hw_cuda_stream stream, float *x, const uint8_t *bytes, int64_t n, float mean, float std);

// ---- dropout masks: a counter-based hash, the same on host and device ----
// splitmix64's finaliser: a bijective 64-bit mix.
static inline HW_HOST_DEVICE uint64_t hw_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Uniform in [0, 1) with 24 bits, a pure function of (seed, step, index): reproducible, and
// independent of how the work is split over threads.
static inline HW_HOST_DEVICE float hw_dropout_uniform(uint64_t seed, uint64_t step, uint64_t index) {
    uint64_t h = hw_mix64(hw_mix64(seed ^ hw_mix64(step + 0x9E3779B97F4A7C15ull)) + index);
    return (float)(h >> 40) * (1.0f / 16777216.0f);
}

// The seed the runner gives the dropout layer at index `layer` of a model.
static inline HW_HOST_DEVICE uint64_t hw_dropout_layer_seed(uint64_t seed, int layer) {
    return hw_mix64(seed + 0xD1B54A32D192ED03ull * (uint64_t)(layer + 1));
}

// ---- the GPU model runner: one worker's forward, backward and SGD step on one device ----
// Runs an hw_model description on the GPU. The weights are a device copy of the flat buffer
// (possibly opened through IPC and shared with other processes: Hogwild on one GPU); gradients,
// momentum, activations for max_batch, scratch and two pinned staging slots are the runner's
// own, allocated once in create. A copy stream feeds the input while a compute stream runs: the
// next batch's upload overlaps the current batch's forward/backward/step.
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
// parameters are skipped). Fails on lr < 0, momentum < 0, weight_decay < 0, nesterov w/o momentum.
int hw_cuda_runner_sgd_step(hw_cuda_runner *r, float lr, float momentum, float weight_decay, int nesterov);
// One training step over the oldest queued batch (which has labels): forward, backward and
// hw_cuda_runner_sgd_step, queued without waiting. With config.graph the step's kernels and
// GEMMs are captured once per input slot into a CUDA graph and replayed with one launch (the same
// kernels on the same buffers, so the same results); a new capture happens when the batch size,
// the input kind or the SGD settings change. Where a graph cannot be captured (the simulated
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

// Queues a kernel of one thread that does nothing: timing many measures what a launch costs.
int hw_cuda_launch_empty(hw_cuda_stream stream);
// Kernels and cuBLAS GEMMs this process has queued so far (a GEMM counts once, though cuBLAS may
// run it as more than one kernel): bench/gpu_bench.c's kernels per step.
long hw_cuda_launches(void);

// ---- reductions across the replicas of one process (DataParallel on GPUs) ----
// x[i] *= alpha and y[i] += x[i] over n floats on the current device, asynchronous on `stream`.
int hw_cuda_scale(hw_cuda_stream stream, float *x, int64_t n, float alpha);
int hw_cuda_add(hw_cuda_stream stream, float *y, const float *x, int64_t n);

// Sums K buffers of `count` floats in place, so that every one ends with the element-wise sum:
// buffer k lives on cuda:devices[k] and is ordered on streams[k] (the call only queues work on
// those streams; work queued later on any of them sees the sum, and replica 0's buffer may be
// overwritten by later work on streams[0]). With NCCL compiled in (HW_HAVE_NCCL), allow_nccl and
// every device distinct: ncclAllReduce(ncclSum), one per replica in one ncclGroupStart/End, over
// communicators from ncclCommInitAll. Otherwise (replicas sharing a GPU, which one NCCL
// communicator refuses; no NCCL; NCCL failing to start or to run the first all-reduce of `count`
// floats that create tries on scratch buffers): replica 0 gathers each buffer (a peer copy, or
// none on the same GPU), adds them in replica order with a sum kernel, and every replica copies
// the sum back. Create fails on a device that does not exist.
typedef struct hw_cuda_allreduce hw_cuda_allreduce;
int hw_cuda_allreduce_create(hw_cuda_allreduce **ar, const int *devices, int n, size_t count, int allow_nccl);
void hw_cuda_allreduce_free(hw_cuda_allreduce *ar);
int hw_cuda_allreduce_sum(hw_cuda_allreduce *ar, float *const *buffers, const hw_cuda_stream *streams);
// How it reduces: "nccl (...)", "copies to cuda:0 and a sum kernel (<why not NCCL>)" or "none (one replica)".
const char *hw_cuda_allreduce_method(const hw_cuda_allreduce *ar);

// ---- the rounds of Hogwild's copies on several GPUs (src/cuda/train/gpu_copies.c) ----
// A round on copy c's device, asynchronous on `stream`, n floats each. Send: the copy's change
// since the agreed weights, sent = live - agreed, into `sent` and into `sum`, which the
// all-reduce then sums over the copies. Round: THE rule's step for the summed change
// (hw/couple_step.h; `copies` gives its beta, `ahead` whether the agreed weights hold the
// look-ahead) added to the agreed weights, and the step less `sent` to the live ones.
int hw_cuda_couple_send(hw_cuda_stream stream, float *sent, float *sum, const float *live, const float *agreed,
                        int64_t n);
int hw_cuda_couple_round(hw_cuda_stream stream, float *live, float *agreed, float *velocity, const float *sum,
                         const float *sent, int64_t n, hw_couple_rule rule, int copies, int ahead);

// ---- the sum across the ranks of an mpirun job (DataParallel on GPU ranks, src/cuda/ranks.cu) ----
// One NCCL communicator per rank, on its replica 0's GPU: rank 0 makes the unique id
// (hw_cuda_ranks_id, ncclGetUniqueId), every rank gets it from rank 0 (hw_comm_bcast), then opens
// its place in the communicator (hw_cuda_ranks_open, ncclCommInitRank, which waits for all
// ranks). Every failure names the rank, the host, the GPU and NCCL's own words. Without NCCL
// compiled in (HW_HAVE_NCCL), every call fails saying so.
enum { HW_NCCL_ID_BYTES = 128 };
typedef struct hw_cuda_ranks hw_cuda_ranks;
int hw_cuda_ranks_id(unsigned char id[HW_NCCL_ID_BYTES]);
// `replicas` buffers of `count` floats, buffer k on cuda:devices[k] (replica 0's GPU is the rank's
// in the communicator), will be summed; `world_rank` of `world_size`.
int hw_cuda_ranks_open(hw_cuda_ranks **ranks, const unsigned char id[HW_NCCL_ID_BYTES], int world_rank, int world_size,
                       const int *devices, int replicas, size_t count);
void hw_cuda_ranks_free(hw_cuda_ranks *ranks);
// Sums buffers[0] over the ranks, in place (ncclAllReduce, ncclSum, on streams[0]), WAITS for it,
// polling the stream and NCCL's asynchronous error, at most timeout_s seconds (0: no limit; past
// it the communicator is aborted and the error names --sync-timeout), then queues a copy of the sum
// into buffers[1..replicas) on their streams (later work on any stream sees it). Every rank gets
// the same bits. The buffers must hold this rank's sum already (hw_cuda_allreduce_sum).
int hw_cuda_ranks_sum(hw_cuda_ranks *ranks, float *const *buffers, const hw_cuda_stream *streams, double timeout_s);
// "ncclAllReduce across R ranks (NCCL version)".
const char *hw_cuda_ranks_method(const hw_cuda_ranks *ranks);

#ifdef __cplusplus
}
#endif

#endif
