// kernels: the simulated CUDA device's kernels (tests only, `make sim`): the hw_cuda_* functions
// that layers.cu, pointwise.cu and loss.cu define, run at once on the host by replay.c (the
// kernels' own per-index code from src/cuda/kernels.cuh, the GEMMs through hw_cuda_sgemm and the
// simulated cuBLAS). Each function keeps its .cu twin's argument checks and early returns; before
// it runs, every launch it makes is checked (hw_sim_launch_check) as a GPU would take it: a live
// stream of the current device, and every buffer the launch reads or writes, at its full size,
// inside memory that device can reach.
#include "replay.h"

#include "cuda_runtime.h"
#include "hw/cuda.h"
#include "hw/err.h"

#include "../../src/cuda/kernels.cuh"  // conv_gemm_size

// n floats (or bytes) a launch reads or writes at p.
static hw_sim_span reads(const void *p, int64_t n) { return (hw_sim_span){p, p ? (size_t)n * sizeof(float) : 0, 0}; }
static hw_sim_span writes(const void *p, int64_t n) { return (hw_sim_span){p, p ? (size_t)n * sizeof(float) : 0, 1}; }
static hw_sim_span reads_bytes(const void *p, int64_t n) { return (hw_sim_span){p, p ? (size_t)n : 0, 0}; }
static hw_sim_span writes_bytes(const void *p, int64_t n) { return (hw_sim_span){p, p ? (size_t)n : 0, 1}; }

// The launches' check, reported as the .cu files report a failed launch (HW_CHECK of cudaGetLastError).
static int launch_check(const char *function, hw_cuda_stream stream, const hw_sim_span *spans, int n) {
    cudaError_t e = hw_sim_launch_check((cudaStream_t)stream, spans, n);
    if (e == cudaSuccess) return HW_OK;
    const char *why = cudaGetErrorString(e);
    cudaGetLastError();
    return hw_fail("a kernel launch of %s failed (simulated CUDA device): %s", function, why);
}

#define CHECK_LAUNCH(stream, ...)                                                                   \
    do {                                                                                            \
        const hw_sim_span spans_[] = {__VA_ARGS__};                                                 \
        if (launch_check(__func__, stream, spans_, (int)(sizeof spans_ / sizeof spans_[0])) != HW_OK) \
            return HW_ERR;                                                                          \
    } while (0)

// The GEMMs of the layers go through hw_cuda_sgemm (blas.cu) and the simulated cuBLAS.
static int device_sgemm(void *handle, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                        const float *b, float beta, float *c) {
    return hw_cuda_sgemm((hw_cublas)handle, trans_a, trans_b, m, n, k, alpha, a, b, beta, c);
}

static replay_blas blas_of(hw_cuda_ctx ctx) { return (replay_blas){device_sgemm, ctx.blas}; }

// ---- layers.cu ----

int hw_cuda_linear_forward(hw_cuda_ctx ctx, float *y, const float *x, const float *w, const float *bias, int batch,
                           int in_features, int out_features) {
    if (batch <= 0) return HW_OK;
    if (bias) CHECK_LAUNCH(ctx.stream, writes(y, (int64_t)batch * out_features), reads(bias, out_features));
    return replay_linear_forward(blas_of(ctx), y, x, w, bias, batch, in_features, out_features);
}

int hw_cuda_linear_backward(hw_cuda_ctx ctx, float *dx, float *dw, float *dbias, const float *dy, const float *x,
                            const float *w, int batch, int in_features, int out_features) {
    if (batch <= 0) return HW_OK;
    if (dbias) CHECK_LAUNCH(ctx.stream, writes(dbias, out_features), reads(dy, (int64_t)batch * out_features));
    return replay_linear_backward(blas_of(ctx), dx, dw, dbias, dy, x, w, batch, in_features, out_features);
}

int hw_cuda_conv2d_forward(hw_cuda_ctx ctx, float *y, const float *x, const float *w, const float *bias,
                           hw_conv_dims d, float *scratch) {
    if (d.batch <= 0) return HW_OK;
    int64_t rows, columns;
    if (!conv_gemm_size(d, &rows, &columns)) {
        return hw_fail("conv2d: batch %d is too large for one GEMM (%lld columns)", d.batch, (long long)columns);
    }
    int64_t in = (int64_t)d.batch * d.in_channels * d.height * d.width, out = d.out_channels * columns;
    CHECK_LAUNCH(ctx.stream, writes(scratch, rows * columns), reads(x, in));  // im2col
    CHECK_LAUNCH(ctx.stream, writes(y, out), reads(scratch + rows * columns, out),
                 reads(bias, d.out_channels));  // cnhw_to_nchw
    return replay_conv2d_forward(blas_of(ctx), y, x, w, bias, d, scratch);
}

int hw_cuda_conv2d_backward(hw_cuda_ctx ctx, float *dx, float *dw, float *dbias, const float *dy, const float *x,
                            const float *w, hw_conv_dims d, float *scratch) {
    if (d.batch <= 0) return HW_OK;
    int64_t rows, columns;
    if (!conv_gemm_size(d, &rows, &columns)) {
        return hw_fail("conv2d: batch %d is too large for one GEMM (%lld columns)", d.batch, (long long)columns);
    }
    int64_t in = (int64_t)d.batch * d.in_channels * d.height * d.width, out = d.out_channels * columns;
    const float *t = scratch + rows * columns;
    CHECK_LAUNCH(ctx.stream, writes(t, out), reads(dy, out));  // nchw_to_cnhw
    if (dbias) CHECK_LAUNCH(ctx.stream, writes(dbias, d.out_channels), reads(t, out));  // sum_rows
    if (dw) CHECK_LAUNCH(ctx.stream, writes(scratch, rows * columns), reads(x, in));    // im2col
    if (dx) CHECK_LAUNCH(ctx.stream, writes(dx, in), reads(scratch, rows * columns));   // col2im
    return replay_conv2d_backward(blas_of(ctx), dx, dw, dbias, dy, x, w, d, scratch);
}

int hw_cuda_maxpool2d_forward(hw_cuda_stream stream, float *y, int32_t *argmax, const float *x, int batch,
                              int channels, int height, int width, int kernel, int stride) {
    int oh = (height - kernel) / stride + 1, ow = (width - kernel) / stride + 1;
    int64_t planes = (int64_t)batch * channels, total = planes * oh * ow;
    if (total <= 0) return HW_OK;
    CHECK_LAUNCH(stream, writes(y, total), writes_bytes(argmax, total * 4), reads(x, planes * height * width));
    replay_maxpool2d_forward(y, argmax, x, (int)planes, height, width, kernel, stride);
    return HW_OK;
}

int hw_cuda_maxpool2d_backward(hw_cuda_stream stream, float *dx, const float *dy, const int32_t *argmax, int batch,
                               int channels, int height, int width, int kernel, int stride) {
    int oh = (height - kernel) / stride + 1, ow = (width - kernel) / stride + 1;
    int64_t planes = (int64_t)batch * channels, total = planes * height * width;
    if (total <= 0) return HW_OK;
    CHECK_LAUNCH(stream, writes(dx, total), reads(dy, planes * oh * ow), reads_bytes(argmax, planes * oh * ow * 4));
    replay_maxpool2d_backward(dx, dy, argmax, (int)planes, height, width, kernel, stride);
    return HW_OK;
}

// ---- pointwise.cu ----

int hw_cuda_relu_forward(hw_cuda_stream stream, float *y, const float *x, int64_t n) {
    if (n <= 0) return HW_OK;
    CHECK_LAUNCH(stream, writes(y, n), reads(x, n));
    replay_relu_forward(y, x, n);
    return HW_OK;
}

int hw_cuda_relu_backward(hw_cuda_stream stream, float *dx, const float *dy, const float *y, int64_t n) {
    if (n <= 0) return HW_OK;
    CHECK_LAUNCH(stream, writes(dx, n), reads(dy, n), reads(y, n));
    replay_relu_backward(dx, dy, y, n);
    return HW_OK;
}

static int dropout_launch(hw_cuda_stream stream, float *out, const float *in, int64_t n, int64_t plane, float p,
                          uint64_t seed, uint64_t step) {
    if (dropout_args_check(p, n, plane) != HW_OK) return HW_ERR;
    if (n <= 0) return HW_OK;
    CHECK_LAUNCH(stream, writes(out, n), reads(in, n));
    replay_dropout(out, in, n, plane, p, seed, step);
    return HW_OK;
}

int hw_cuda_dropout_forward(hw_cuda_stream stream, float *y, const float *x, int64_t n, float p, uint64_t seed,
                            uint64_t step) {
    return dropout_launch(stream, y, x, n, 1, p, seed, step);
}

int hw_cuda_dropout_backward(hw_cuda_stream stream, float *dx, const float *dy, int64_t n, float p, uint64_t seed,
                             uint64_t step) {
    return dropout_launch(stream, dx, dy, n, 1, p, seed, step);
}

int hw_cuda_dropout2d_forward(hw_cuda_stream stream, float *y, const float *x, int64_t planes, int64_t plane, float p,
                              uint64_t seed, uint64_t step) {
    return dropout_launch(stream, y, x, planes * plane, plane, p, seed, step);
}

int hw_cuda_dropout2d_backward(hw_cuda_stream stream, float *dx, const float *dy, int64_t planes, int64_t plane,
                               float p, uint64_t seed, uint64_t step) {
    return dropout_launch(stream, dx, dy, planes * plane, plane, p, seed, step);
}

int hw_cuda_normalize_u8(hw_cuda_stream stream, float *x, const uint8_t *bytes, int64_t n, float mean, float std) {
    if (normalize_args_check(std) != HW_OK) return HW_ERR;
    if (n <= 0) return HW_OK;
    CHECK_LAUNCH(stream, writes(x, n), reads_bytes(bytes, n));
    replay_normalize_u8(x, bytes, n, mean, std);
    return HW_OK;
}

int hw_cuda_sgd_step(hw_cuda_stream stream, float *w, const float *g, float *velocity, int64_t n, float lr,
                     float momentum, float weight_decay, int nesterov, int started) {
    if (sgd_args_check(momentum, velocity) != HW_OK) return HW_ERR;
    if (n <= 0) return HW_OK;
    CHECK_LAUNCH(stream, writes(w, n), reads(g, n), writes(momentum != 0.0f ? velocity : NULL, n));
    replay_sgd_step(w, g, velocity, n, lr, momentum, weight_decay, nesterov, started);
    return HW_OK;
}

int hw_cuda_scale(hw_cuda_stream stream, float *x, int64_t n, float alpha) {
    if (n <= 0) return HW_OK;
    CHECK_LAUNCH(stream, writes(x, n));
    replay_scale(x, n, alpha);
    return HW_OK;
}

int hw_cuda_add(hw_cuda_stream stream, float *y, const float *x, int64_t n) {
    if (n <= 0) return HW_OK;
    CHECK_LAUNCH(stream, writes(y, n), reads(x, n));
    replay_add(y, x, n);
    return HW_OK;
}

// The simulated device runs every kernel, unless HW_SIM_NO_KERNEL_IMAGE=1 says it is too old.
cudaError_t cuda_kernels_runnable(void) {
    cudaFuncAttributes attributes;
    return cudaFuncGetAttributes(&attributes, NULL);
}

// ---- loss.cu ----

int hw_cuda_log_softmax_nll_forward(hw_cuda_stream stream, float *logp, float *loss_dev, const float *x,
                                    const uint8_t *labels, int batch, int classes, float *row_scratch) {
    if (batch <= 0 || classes <= 0) return HW_OK;
    int64_t n = (int64_t)batch * classes;
    CHECK_LAUNCH(stream, writes(logp, n), reads(x, n), reads_bytes(labels, batch),
                 writes(labels ? row_scratch : NULL, batch));  // log_softmax_rows
    if (labels) CHECK_LAUNCH(stream, writes(loss_dev, 1), reads(row_scratch, batch));  // mean_rows
    replay_log_softmax_nll_forward(logp, loss_dev, x, labels, batch, classes, row_scratch);
    return HW_OK;
}

int hw_cuda_log_softmax_nll_backward(hw_cuda_stream stream, float *dx, const float *logp, const uint8_t *labels,
                                     int batch, int classes) {
    int64_t n = (int64_t)batch * classes;
    if (n <= 0) return HW_OK;
    CHECK_LAUNCH(stream, writes(dx, n), reads(logp, n), reads_bytes(labels, batch));
    replay_nll_backward(dx, logp, labels, batch, classes);
    return HW_OK;
}

int hw_cuda_accumulate_loss(hw_cuda_stream stream, double *total_dev, const float *loss_dev, int batch) {
    if (batch <= 0) return HW_OK;
    CHECK_LAUNCH(stream, writes_bytes(total_dev, sizeof(double)), reads(loss_dev, 1));
    replay_accumulate_loss(total_dev, loss_dev, batch);
    return HW_OK;
}

int hw_cuda_count_correct(hw_cuda_stream stream, int32_t *count_dev, const float *logp, const uint8_t *labels,
                          int batch, int classes) {
    if (batch <= 0) return HW_OK;
    CHECK_LAUNCH(stream, writes_bytes(count_dev, 4), reads(logp, (int64_t)batch * classes), reads_bytes(labels, batch));
    replay_count_correct(count_dev, logp, labels, batch, classes);
    return HW_OK;
}
