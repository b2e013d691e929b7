// layer_ops: the GPU operations (layer_ops.c): each layer's forward and backward, the fused loss,
// the SGD step, the input's normalisation, the reductions of DataParallel within a process and the
// rounds of Hogwild's copies on several GPUs, on device pointers and asynchronous on a stream.
// Each checks its arguments, then queues its kernels (launch.h) and GEMMs (blas.h) in order. The
// GPU backend (backend.c) calls the layers' and the loss's, the runner (runner.cu) the step's and
// the input's, the GPU trainers (cuda/train/) the reductions and the rounds. Private to src/cuda/
// and the tests.
//
// Sizes are per batch; tensors are NCHW (or [batch, features]) and contiguous. Backward
// functions write (overwrite) the gradients they are given; a NULL gradient pointer skips it.
#ifndef HW_CUDA_LAYER_OPS_H
#define HW_CUDA_LAYER_OPS_H

#include "blas.h"
#include "device.h"
#include "hw/couple_step.h"  // hw_couple_rule

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// The stream a layer runs on and the cuBLAS handle for its GEMMs.
typedef struct {
    hw_cuda_stream stream;
    hw_cublas blas;  // bound to `stream`
} hw_cuda_ctx;

// ---- linear ----

// y[b,o] = sum_i x[b,i] w[o,i] + bias[o]
int hw_cuda_linear_forward(hw_cuda_ctx ctx, float *y, const float *x, const float *w, const float *bias, int batch,
                           int in_features, int out_features);
int hw_cuda_linear_backward(hw_cuda_ctx ctx, float *dx, float *dw, float *dbias, const float *dy, const float *x,
                            const float *w, int batch, int in_features, int out_features);

// ---- conv2d ----

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

// ---- maxpool2d, relu, dropout ----

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
// (dropout_mask.h) and then scaled by 1/(1-p). Dropout2d drops whole channels: the draw is for
// index b*channels+c and applies to the channel's plane of `plane` elements. The same call with
// the same (seed, step) computes the same mask, so backward recomputes it instead of storing it.
int hw_cuda_dropout_forward(hw_cuda_stream stream, float *y, const float *x, int64_t n, float p, uint64_t seed,
                            uint64_t step);
int hw_cuda_dropout_backward(hw_cuda_stream stream, float *dx, const float *dy, int64_t n, float p, uint64_t seed,
                             uint64_t step);
int hw_cuda_dropout2d_forward(hw_cuda_stream stream, float *y, const float *x, int64_t planes, int64_t plane, float p,
                              uint64_t seed, uint64_t step);
int hw_cuda_dropout2d_backward(hw_cuda_stream stream, float *dx, const float *dy, int64_t planes, int64_t plane,
                               float p, uint64_t seed, uint64_t step);

// ---- the loss and the accuracy ----

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

// ---- the SGD step and the input ----

// torch.optim.SGD over n floats, THE rule of include/hw/sgd_update.h for each: d = g + wd*w;
// with momentum, v = d on the first step (started == 0) else v = m*v + d, then d = d + m*v
// (nesterov) or d = v; w -= lr*d. velocity may be NULL when momentum == 0. Fails on the settings
// hw_sgd_check refuses, and on a momentum without a velocity buffer.
int hw_cuda_sgd_step(hw_cuda_stream stream, float *w, const float *g, float *velocity, int64_t n, float lr,
                     float momentum, float weight_decay, int nesterov, int started);

// x[i] = (bytes[i] / 255 - mean) / std: a uint8 batch to the normalised float input.
int hw_cuda_normalize_u8(hw_cuda_stream stream, float *x, const uint8_t *bytes, int64_t n, float mean, float std);

// ---- reductions across the replicas of one process (DataParallel on GPUs) ----

// x[i] *= alpha and y[i] += x[i] over n floats on the current device, asynchronous on `stream`.
int hw_cuda_scale(hw_cuda_stream stream, float *x, int64_t n, float alpha);
int hw_cuda_add(hw_cuda_stream stream, float *y, const float *x, int64_t n);

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

// ---- the cost of a launch (bench/gpu_bench.c) ----

// Queues a kernel of one thread that does nothing: timing many measures what a launch costs.
int hw_cuda_launch_empty(hw_cuda_stream stream);
// Kernels and cuBLAS GEMMs this process has queued so far (a GEMM counts once, though cuBLAS may
// run it as more than one kernel; kernels.cu counts them): bench/gpu_bench.c's kernels per step.
long hw_cuda_launches(void);

#ifdef __cplusplus
}
#endif

#endif
