// kernels: the simulated CUDA device's kernels (tests only, `make sim`). Each launcher of
// src/cuda/launch.h is here a loop over every index calling the kernel's own per-index code
// (src/cuda/kernels.cuh), run at once on the host, after the launch is checked as a GPU would
// take it (hw_sim_launch_check): a live stream of the current device, and every buffer the
// kernel reads or writes, at its full size, inside memory that device can reach. The GPU
// operations themselves (src/cuda/layer_ops.c) run unchanged on these launchers.
//
// What only the device does is not simulated: the grid and block sizes (every index is visited
// once, as the grid-stride loop does), and the block reductions' shared memory and barriers,
// whose arithmetic is replayed here: each thread's strided_sum, combined in the kernel's order.
#include "cuda/kernels.cuh"  // the kernels' per-index code
#include "cuda/launch.h"

#include "cuda_runtime.h"
#include "hw/err.h"

#include <stdlib.h>

// n floats (or bytes) a launch reads or writes at p.
static hw_sim_span reads(const void *p, int64_t n) { return (hw_sim_span){p, p ? (size_t)n * sizeof(float) : 0, 0}; }
static hw_sim_span writes(const void *p, int64_t n) { return (hw_sim_span){p, p ? (size_t)n * sizeof(float) : 0, 1}; }
static hw_sim_span reads_bytes(const void *p, int64_t n) { return (hw_sim_span){p, p ? (size_t)n : 0, 0}; }
static hw_sim_span writes_bytes(const void *p, int64_t n) { return (hw_sim_span){p, p ? (size_t)n : 0, 1}; }

// Kernels and GEMMs queued, as kernels.cu counts them (hw_cuda_launches).
static long launches;

void launch_counted(void) { __atomic_fetch_add(&launches, 1, __ATOMIC_RELAXED); }

long hw_cuda_launches(void) { return __atomic_load_n(&launches, __ATOMIC_RELAXED); }

// The launch's check, reported as kernels.cu reports a launch that does not go in.
static int launch_check(const char *kernel, hw_cuda_stream stream, const hw_sim_span *spans, int n) {
    launch_counted();
    cudaError_t e = hw_sim_launch_check((cudaStream_t)stream, spans, n);
    if (e == cudaSuccess) return HW_OK;
    const char *why = cudaGetErrorString(e);
    cudaGetLastError();
    return hw_fail("the launch of kernel %s failed (simulated CUDA device): %s", kernel, why);
}

#define CHECK_LAUNCH(kernel, stream, ...)                                                                          \
    do {                                                                                                           \
        const hw_sim_span spans_[] = {__VA_ARGS__};                                                                \
        if (launch_check(kernel, stream, spans_, (int)(sizeof spans_ / sizeof spans_[0])) != HW_OK) return HW_ERR; \
    } while (0)

// The sum of v[0..count) as one block of HW_THREADS adds it (kernels.cu's block_sum): each
// thread's strided_sum, then the shared-memory tree.
static float block_sum(const float *v, int64_t count) {
    float partial[HW_THREADS];
    for (int t = 0; t < HW_THREADS; t++) partial[t] = strided_sum(v, count, 1, t, HW_THREADS);
    for (int half = HW_THREADS / 2; half > 0; half /= 2) {
        for (int t = 0; t < half; t++) partial[t] += partial[t + half];
    }
    return partial[0];
}

// ---- layers ----

int add_bias_cols_launch(hw_cuda_stream stream, float *y, const float *bias, int64_t rows, int64_t cols) {
    CHECK_LAUNCH("add_bias_cols", stream, writes(y, rows * cols), reads(bias, cols));
    for (int64_t i = 0; i < rows * cols; i++) add_bias_cols_element(i, y, bias, cols);
    return HW_OK;
}

// Column c is the sum of its SUM_COLS_LANES partial sums, in lane order.
int sum_cols_launch(hw_cuda_stream stream, float *out, const float *m, int64_t rows, int64_t cols) {
    CHECK_LAUNCH("sum_cols", stream, writes(out, cols), reads(m, rows * cols));
    for (int64_t c = 0; c < cols; c++) {
        float total = 0.0f;
        for (int lane = 0; lane < SUM_COLS_LANES; lane++) total += strided_sum(m + c, rows, cols, lane, SUM_COLS_LANES);
        out[c] = total;
    }
    return HW_OK;
}

int sum_rows_launch(hw_cuda_stream stream, float *out, const float *m, int64_t rows, int64_t cols, float *scratch,
                    int64_t scratch_floats) {
    int64_t chunks = sum_rows_chunks(rows, cols, scratch_floats), chunk = (cols + chunks - 1) / chunks;
    CHECK_LAUNCH("sum_rows", stream, writes(chunks > 1 ? scratch : out, rows * chunks), reads(m, rows * cols));
    float *partial = chunks > 1 ? scratch : out;
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t k = 0; k < chunks; k++) {
            int64_t begin = k * chunk;
            partial[r * chunks + k] = block_sum(m + r * cols + begin, cols - begin < chunk ? cols - begin : chunk);
        }
    }
    if (chunks == 1) return HW_OK;
    CHECK_LAUNCH("sum_row_chunks", stream, writes(out, rows), reads(scratch, rows * chunks));
    for (int64_t r = 0; r < rows; r++) out[r] = strided_sum(scratch + r * chunks, chunks, 1, 0, 1);
    return HW_OK;
}

int im2col_launch(hw_cuda_stream stream, float *col, const float *x, hw_conv_dims d) {
    int oh = hw_conv_out_h(d), ow = hw_conv_out_w(d);
    int64_t columns = (int64_t)d.batch * oh * ow;
    CHECK_LAUNCH("im2col", stream, writes(col, (int64_t)d.in_channels * d.kernel * d.kernel * columns),
                 reads(x, (int64_t)d.batch * d.in_channels * d.height * d.width));
    for (int c = 0; c < d.in_channels; c++) {
        for (int64_t j = 0; j < columns; j++) im2col_column(col, x, d, oh, ow, c, (int)j);
    }
    return HW_OK;
}

int conv2d_direct_launch(hw_cuda_stream stream, float *y, const float *x, const float *w, const float *bias,
                         hw_conv_dims d) {
    int oh = hw_conv_out_h(d), ow = hw_conv_out_w(d);
    int64_t columns = (int64_t)d.batch * oh * ow;
    CHECK_LAUNCH("conv2d_direct", stream, writes(y, columns * d.out_channels),
                 reads(x, (int64_t)d.batch * d.in_channels * d.height * d.width),
                 reads(w, (int64_t)d.out_channels * d.in_channels * d.kernel * d.kernel), reads(bias, d.out_channels));
    for (int64_t j = 0; j < columns; j++) conv2d_direct_column(y, x, w, bias, d, oh, ow, (int)j);
    return HW_OK;
}

// The GPU's sums replayed (kernels.cuh, conv_dw_direct): each output's four sums over a chunk's
// columns (column i of the chunk into sum i % 4), added as ((s0 + s1) + s2) + s3, then the chunks in
// CONV_DW_FINISH_LANES strided sums added in lane order.
int conv_dw_direct_launch(hw_cuda_stream stream, float *dw, float *dbias, float *partial, const float *x,
                          const float *dy, hw_conv_dims d) {
    int oh = hw_conv_out_h(d), ow = hw_conv_out_w(d);
    int64_t columns = (int64_t)d.batch * oh * ow, chunk = conv_dw_direct_chunk(columns);
    int64_t chunks = conv_dw_direct_chunks(columns);
    int taps = d.in_channels * d.kernel * d.kernel;
    int64_t per_chunk = (int64_t)d.out_channels * (taps + 1);
    CHECK_LAUNCH("conv_dw_direct", stream, writes(partial, chunks * per_chunk),
                 reads(x, (int64_t)d.batch * d.in_channels * d.height * d.width), reads(dy, columns * d.out_channels));
    float *sums = calloc((size_t)(4 * per_chunk), sizeof(float));
    if (!sums) return hw_fail("conv_dw_direct (simulated CUDA device): out of host memory");
    for (int64_t s = 0; s < chunks; s++) {
        int64_t begin = s * chunk, end = columns - begin < chunk ? columns : begin + chunk;
        for (int64_t i = 0; i < 4 * per_chunk; i++) sums[i] = 0.0f;
        for (int oc = 0; oc < d.out_channels; oc++) {
            for (int64_t j = begin; j < end; j++) {
                float *lane = sums + ((j - begin) % 4) * per_chunk + (int64_t)oc * (taps + 1);
                conv_dw_direct_column(lane, x, dy, d, oh, ow, oc, (int)j);
            }
        }
        for (int64_t i = 0; i < per_chunk; i++) {
            partial[s * per_chunk + i] =
                ((sums[i] + sums[per_chunk + i]) + sums[2 * per_chunk + i]) + sums[3 * per_chunk + i];
        }
    }
    free(sums);
    CHECK_LAUNCH("conv_dw_direct_finish", stream, writes(dw, (int64_t)d.out_channels * taps),
                 writes(dbias, d.out_channels), reads(partial, chunks * per_chunk));
    for (int64_t i = 0; i < per_chunk; i++) {
        float total = 0.0f;
        for (int l = 0; l < CONV_DW_FINISH_LANES; l++) {
            total += strided_sum(partial + i, chunks, per_chunk, l, CONV_DW_FINISH_LANES);
        }
        conv_dw_direct_store(dw, dbias, taps, i, total);
    }
    return HW_OK;
}

int col2im_launch(hw_cuda_stream stream, float *dx, const float *dcol, hw_conv_dims d) {
    int oh = hw_conv_out_h(d), ow = hw_conv_out_w(d);
    int64_t planes = (int64_t)d.batch * d.in_channels;
    CHECK_LAUNCH("col2im", stream, writes(dx, planes * d.height * d.width),
                 reads(dcol, (int64_t)d.in_channels * d.kernel * d.kernel * d.batch * oh * ow));
    for (int64_t q = 0; q < planes; q++) {
        for (int pixel = 0; pixel < d.height * d.width; pixel++) col2im_pixel(dx, dcol, d, oh, ow, q, pixel);
    }
    return HW_OK;
}

int cnhw_to_nchw_launch(hw_cuda_stream stream, float *y, const float *t, const float *bias, int64_t batch,
                        int64_t channels, int64_t plane) {
    int64_t n = batch * channels * plane;
    CHECK_LAUNCH("cnhw_to_nchw", stream, writes(y, n), reads(t, n), reads(bias, channels));
    for (int oc = 0; oc < channels; oc++) {
        for (int64_t j = 0; j < batch * plane; j++)
            cnhw_to_nchw_element(y, t, bias, batch, (int)channels, (int)plane, oc, (int)j);
    }
    return HW_OK;
}

int nchw_to_cnhw_launch(hw_cuda_stream stream, float *t, const float *dy, int64_t batch, int64_t channels,
                        int64_t plane) {
    int64_t n = batch * channels * plane;
    CHECK_LAUNCH("nchw_to_cnhw", stream, writes(t, n), reads(dy, n));
    for (int oc = 0; oc < channels; oc++) {
        for (int64_t j = 0; j < batch * plane; j++)
            nchw_to_cnhw_element(t, dy, batch, (int)channels, (int)plane, oc, (int)j);
    }
    return HW_OK;
}

int maxpool_forward_launch(hw_cuda_stream stream, float *y, int32_t *argmax, const float *x, int64_t planes, int height,
                           int width, int kernel, int stride) {
    int oh = (height - kernel) / stride + 1, ow = (width - kernel) / stride + 1;
    int64_t n = planes * oh * ow;
    CHECK_LAUNCH("maxpool_forward", stream, writes(y, n), writes_bytes(argmax, n * 4),
                 reads(x, planes * height * width));
    for (int64_t i = 0; i < n; i++) maxpool_forward_element(i, y, argmax, x, height, width, kernel, stride, oh, ow);
    return HW_OK;
}

int maxpool_backward_launch(hw_cuda_stream stream, float *dx, const float *dy, const int32_t *argmax, int64_t planes,
                            int height, int width, int kernel, int stride) {
    int oh = (height - kernel) / stride + 1, ow = (width - kernel) / stride + 1;
    int64_t n = planes * height * width, outputs = planes * oh * ow;
    CHECK_LAUNCH("maxpool_backward", stream, writes(dx, n), reads(dy, outputs), reads_bytes(argmax, outputs * 4));
    for (int64_t q = 0; q < planes; q++) {
        if (maxpool_windows_tile(height, width, kernel, stride)) {
            for (int window = 0; window < oh * ow; window++) {
                maxpool_backward_window(dx, dy, argmax, height, width, kernel, oh, ow, q, window);
            }
            continue;
        }
        for (int index = 0; index < height * width; index++) {
            maxpool_backward_element(dx, dy, argmax, height, width, kernel, stride, oh, ow, q, index);
        }
    }
    return HW_OK;
}

// ---- pointwise ----

int relu_forward_launch(hw_cuda_stream stream, float *y, const float *x, int64_t n) {
    CHECK_LAUNCH("relu_forward", stream, writes(y, n), reads(x, n));
    for (int64_t i = 0; i < n; i++) relu_forward_element(i, y, x);
    return HW_OK;
}

int relu_backward_launch(hw_cuda_stream stream, float *dx, const float *dy, const float *y, int64_t n) {
    CHECK_LAUNCH("relu_backward", stream, writes(dx, n), reads(dy, n), reads(y, n));
    for (int64_t i = 0; i < n; i++) relu_backward_element(i, dx, dy, y);
    return HW_OK;
}

int dropout_launch(hw_cuda_stream stream, float *out, const float *in, int64_t n, int64_t plane, float p, uint64_t seed,
                   uint64_t step) {
    CHECK_LAUNCH("dropout_apply", stream, writes(out, n), reads(in, n));
    for (int64_t i = 0; i < n; i++) dropout_element(i, out, in, plane, p, dropout_scale(p), seed, step);
    return HW_OK;
}

int normalize_u8_launch(hw_cuda_stream stream, float *x, const uint8_t *bytes, int64_t n, float mean, float std) {
    CHECK_LAUNCH("normalize_u8", stream, writes(x, n), reads_bytes(bytes, n));
    for (int64_t i = 0; i < n; i++) normalize_u8_element(i, x, bytes, mean, std);
    return HW_OK;
}

int sgd_step_launch(hw_cuda_stream stream, float *w, const float *g, float *velocity, int64_t n, hw_sgd_variant variant,
                    float lr, float momentum, float weight_decay, int first) {
    CHECK_LAUNCH("sgd_step", stream, writes(w, n), reads(g, n), writes(variant != HW_SGD_PLAIN ? velocity : NULL, n));
    for (int64_t i = 0; i < n; i++) sgd_step_element(i, w, g, velocity, variant, lr, momentum, weight_decay, first);
    return HW_OK;
}

int scale_launch(hw_cuda_stream stream, float *x, int64_t n, float alpha) {
    CHECK_LAUNCH("scale", stream, writes(x, n));
    for (int64_t i = 0; i < n; i++) scale_element(i, x, alpha);
    return HW_OK;
}

int add_launch(hw_cuda_stream stream, float *y, const float *x, int64_t n) {
    CHECK_LAUNCH("add", stream, writes(y, n), reads(x, n));
    for (int64_t i = 0; i < n; i++) add_element(i, y, x);
    return HW_OK;
}

// ---- the rounds of Hogwild's copies on several GPUs ----

int couple_send_launch(hw_cuda_stream stream, float *sent, float *sum, const float *live, const float *agreed,
                       int64_t n) {
    CHECK_LAUNCH("couple_send", stream, writes(sent, n), writes(sum, n), reads(live, n), reads(agreed, n));
    for (int64_t i = 0; i < n; i++) couple_send_element(i, sent, sum, live, agreed);
    return HW_OK;
}

int couple_round_launch(hw_cuda_stream stream, float *live, float *agreed, float *velocity, const float *sum,
                        const float *sent, int64_t n, hw_couple_rule rule, float beta, float mean, float ahead) {
    CHECK_LAUNCH("couple_round", stream, writes(live, n), writes(agreed, n), writes(velocity, n), reads(sum, n),
                 reads(sent, n));
    for (int64_t i = 0; i < n; i++) couple_round_element(i, live, agreed, velocity, sum, sent, rule, beta, mean, ahead);
    return HW_OK;
}

// ---- loss ----

int log_softmax_rows_launch(hw_cuda_stream stream, float *logp, float *row_loss, const float *x, const uint8_t *labels,
                            int batch, int classes) {
    int64_t n = (int64_t)batch * classes;
    CHECK_LAUNCH("log_softmax_rows", stream, writes(logp, n), reads(x, n), reads_bytes(labels, batch),
                 writes(labels ? row_loss : NULL, batch));
    for (int64_t b = 0; b < batch; b++) log_softmax_row(b, logp, row_loss, x, labels, classes);
    return HW_OK;
}

int mean_rows_launch(hw_cuda_stream stream, float *loss, const float *row_loss, int batch) {
    CHECK_LAUNCH("mean_rows", stream, writes(loss, 1), reads(row_loss, batch));
    *loss = block_sum(row_loss, batch) / (float)batch;
    return HW_OK;
}

int nll_backward_launch(hw_cuda_stream stream, float *dx, const float *logp, const uint8_t *labels, int batch,
                        int classes) {
    int64_t n = (int64_t)batch * classes;
    CHECK_LAUNCH("nll_backward", stream, writes(dx, n), reads(logp, n), reads_bytes(labels, batch));
    for (int64_t i = 0; i < n; i++) nll_backward_element(i, dx, logp, labels, batch, classes);
    return HW_OK;
}

int accumulate_loss_launch(hw_cuda_stream stream, double *total, const float *loss, int batch) {
    CHECK_LAUNCH("accumulate_loss", stream, writes_bytes(total, sizeof(double)), reads(loss, 1));
    accumulate_loss_element(total, loss, batch);
    return HW_OK;
}

// One atomicAdd per correct row.
int count_correct_launch(hw_cuda_stream stream, int32_t *count, const float *logp, const uint8_t *labels, int batch,
                         int classes) {
    CHECK_LAUNCH("count_correct", stream, writes_bytes(count, 4), reads(logp, (int64_t)batch * classes),
                 reads_bytes(labels, batch));
    for (int64_t b = 0; b < batch; b++) *count += count_correct_row(b, logp, labels, classes);
    return HW_OK;
}

// The simulated device runs every kernel, unless HW_SIM_NO_KERNEL_IMAGE=1 says it is too old.
cudaError_t cuda_kernels_runnable(void) {
    cudaFuncAttributes attributes;
    return cudaFuncGetAttributes(&attributes, NULL);
}

// ---- what the runner and the benchmark need to know of the launches ----

int empty_launch(hw_cuda_stream stream) {
    const hw_sim_span none = {NULL, 0, 0};
    return launch_check("probe_kernel", stream, &none, 1);
}

// The simulated device captures no graphs (cudaStreamBeginCapture refuses), so no graph node
// is ever this kernel.
const void *dropout_kernel(void) { return NULL; }
const void *sgd_kernel(void) { return NULL; }
