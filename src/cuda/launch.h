// launch.h: one launcher per CUDA kernel, the door between the GPU operations and the device.
//
// layer_ops.c builds every hw_cuda_* layer, loss, optimiser and all-reduce function from these calls
// (and hw_cuda_sgemm). On a GPU, kernels.cu defines each launcher as one `<<<grid, block>>>`
// launch of its kernel on `stream`. On the simulated device of the tests (make sim), the same
// launchers are tests/simcuda/kernels.c: a loop over every index calling the kernel's element
// function of kernels.cuh, after checking the memory the launch touches. Either way layer_ops.c runs
// as it is, so the order of kernels and GEMMs that makes a layer is written once.
//
// Each launcher queues its kernel asynchronously and returns HW_OK, or HW_ERR when the launch
// itself fails (hw_error()). Sizes are > 0: layer_ops.c returns before launching on empty work.
// Plain C, private to src/cuda/ and the simulated device.
#ifndef HW_CUDA_LAUNCH_H
#define HW_CUDA_LAUNCH_H

#include "device.h"          // hw_cuda_stream
#include "hw/couple_step.h"  // hw_couple_rule
#include "hw/sgd_update.h"   // hw_sgd_variant
#include "layer_ops.h"       // hw_conv_dims

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// ---- layers: bias, reductions, conv2d's im2col and permutes, maxpool2d ----

// y[r, c] += bias[c] over y[rows, cols].
int add_bias_cols_launch(hw_cuda_stream stream, float *y, const float *bias, int64_t rows, int64_t cols);
// out[c] = sum over r of m[r, c]: SUM_COLS_LANES partial sums per column, added in lane order.
int sum_cols_launch(hw_cuda_stream stream, float *out, const float *m, int64_t rows, int64_t cols);
// out[r] = sum over c of m[r, c]: a block of HW_THREADS per chunk of a row (a tree of partial
// sums), then the chunks' sums in order; the chunks' sums go into scratch (sum_rows_chunks).
int sum_rows_launch(hw_cuda_stream stream, float *out, const float *m, int64_t rows, int64_t cols, float *scratch,
                    int64_t scratch_floats);
// y (NCHW) = the convolution of x by w plus bias (may be NULL), one thread per output position
// (conv_is_direct).
int conv2d_direct_launch(hw_cuda_stream stream, float *y, const float *x, const float *w, const float *bias,
                         hw_conv_dims d);
// dw and dbias (either may be NULL) of a direct convolution (conv_is_direct) from its input x
// and output gradient dy, both NCHW: two kernels, the chunks' sums into partial
// (conv_dw_direct_partials(d) floats), then those added in order.
int conv_dw_direct_launch(hw_cuda_stream stream, float *dw, float *dbias, float *partial, const float *x,
                          const float *dy, hw_conv_dims d);
// col[C*K*K, B*OH*OW] from the NCHW input x of d.
int im2col_launch(hw_cuda_stream stream, float *col, const float *x, hw_conv_dims d);
// dx (NCHW, d's input) gathered from dcol[C*K*K, B*OH*OW].
int col2im_launch(hw_cuda_stream stream, float *dx, const float *dcol, hw_conv_dims d);
// y[b, c, p] = t[c, b*plane + p] + bias[c] (bias may be NULL), and the reverse without a bias.
int cnhw_to_nchw_launch(hw_cuda_stream stream, float *y, const float *t, const float *bias, int64_t batch,
                        int64_t channels, int64_t plane);
int nchw_to_cnhw_launch(hw_cuda_stream stream, float *t, const float *dy, int64_t batch, int64_t channels,
                        int64_t plane);
// Max pooling of `planes` planes of height x width (no padding, floor mode), and its gradient.
int maxpool_forward_launch(hw_cuda_stream stream, float *y, int32_t *argmax, const float *x, int64_t planes, int height,
                           int width, int kernel, int stride);
int maxpool_backward_launch(hw_cuda_stream stream, float *dx, const float *dy, const int32_t *argmax, int64_t planes,
                            int height, int width, int kernel, int stride);

// ---- pointwise ----

int relu_forward_launch(hw_cuda_stream stream, float *y, const float *x, int64_t n);
int relu_backward_launch(hw_cuda_stream stream, float *dx, const float *dy, const float *y, int64_t n);
// out = in masked by the draws for index i / plane, scaled by 1 / (1 - p).
int dropout_launch(hw_cuda_stream stream, float *out, const float *in, int64_t n, int64_t plane, float p, uint64_t seed,
                   uint64_t step);
int normalize_u8_launch(hw_cuda_stream stream, float *x, const uint8_t *bytes, int64_t n, float mean, float std);
// The SGD rule in form `variant` over n weights (sgd_step_element); `first`: the velocity holds
// no step yet.
int sgd_step_launch(hw_cuda_stream stream, float *w, const float *g, float *velocity, int64_t n, hw_sgd_variant variant,
                    float lr, float momentum, float weight_decay, int first);
int scale_launch(hw_cuda_stream stream, float *x, int64_t n, float alpha);
int add_launch(hw_cuda_stream stream, float *y, const float *x, int64_t n);

// ---- the rounds of Hogwild's copies on several GPUs ----

int couple_send_launch(hw_cuda_stream stream, float *sent, float *sum, const float *live, const float *agreed,
                       int64_t n);
int couple_round_launch(hw_cuda_stream stream, float *live, float *agreed, float *velocity, const float *sum,
                        const float *sent, int64_t n, hw_couple_rule rule, float beta, float mean, float ahead);

// ---- loss ----

// log_softmax of each row into logp and, with labels, each row's loss into row_loss.
int log_softmax_rows_launch(hw_cuda_stream stream, float *logp, float *row_loss, const float *x, const uint8_t *labels,
                            int batch, int classes);
// *loss = the mean of row_loss[batch], one block of HW_THREADS in a fixed order.
int mean_rows_launch(hw_cuda_stream stream, float *loss, const float *row_loss, int batch);
int nll_backward_launch(hw_cuda_stream stream, float *dx, const float *logp, const uint8_t *labels, int batch,
                        int classes);
// *total += *loss * batch, in double, one thread.
int accumulate_loss_launch(hw_cuda_stream stream, double *total, const float *loss, int batch);
// *count += the rows whose argmax is their label.
int count_correct_launch(hw_cuda_stream stream, int32_t *count, const float *logp, const uint8_t *labels, int batch,
                         int classes);

// ---- what the runner and the benchmark need to know of the launches ----

// An empty kernel of one thread: the cost of a launch itself (bench/gpu_bench.c).
int empty_launch(hw_cuda_stream stream);
// Counts one kernel or GEMM queued (hw_cuda_launches reads the count).
void launch_counted(void);
// The dropout kernel as a captured graph's kernel node names it (cudaKernelNodeParams.func), and
// the place of its `step` argument among its DROPOUT_KERNEL_ARGS: the runner's CUDA graph sets it
// before every replay, so that each step draws new masks. NULL on the simulated device, which
// captures no graphs.
const void *dropout_kernel(void);
enum { DROPOUT_KERNEL_ARGS = 8, DROPOUT_STEP_ARG = 7 };
// The SGD kernel likewise, and the place of its learning rate among its SGD_KERNEL_ARGS: a
// schedule changes the rate between steps (--lr-schedule), and the graph's SGD nodes take the new
// one before the replay instead of a new capture. NULL on the simulated device.
const void *sgd_kernel(void);
enum { SGD_KERNEL_ARGS = 9, SGD_LR_ARG = 5 };

#ifdef __cplusplus
}
#endif

#endif
