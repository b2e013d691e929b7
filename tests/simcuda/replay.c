// replay: the GPU layer functions on the host, from the kernels' element functions (see replay.h).
#include "replay.h"

#include "../../src/cuda/kernels.cuh"  // the kernels' per-index code (private to src/cuda/ and the tests)

#include "hw/blas.h"

int replay_sgemm(void *unused, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                 const float *b, float beta, float *c) {
    (void)unused;
    if (m == 0 || n == 0) return HW_OK;
    col_major_gemm g = col_major_gemm_of(trans_a, trans_b, m, n, k, a, b);
    hw_sgemm_col_major(g.trans_first ? HW_TRANS : HW_NO_TRANS, g.trans_second ? HW_TRANS : HW_NO_TRANS,
                       g.m, g.n, g.k, alpha, g.first, g.ld_first, g.second, g.ld_second, beta, c, g.ldc);
    return HW_OK;
}

const replay_blas REPLAY_OPENBLAS = {replay_sgemm, NULL};

static int gemm(replay_blas blas, int trans_a, int trans_b, int m, int n, int k, const float *a, const float *b,
                float *c) {
    return blas.sgemm(blas.ctx, trans_a, trans_b, m, n, k, 1.0f, a, b, 0.0f, c);
}

// sum_cols (layers.cu): column c is the sum of its SUM_COLS_LANES partial sums, in lane order.
void replay_sum_cols(float *out, const float *m, int64_t rows, int64_t cols) {
    for (int64_t c = 0; c < cols; c++) {
        float total = 0.0f;
        for (int lane = 0; lane < SUM_COLS_LANES; lane++) total += strided_sum(m + c, rows, cols, lane, SUM_COLS_LANES);
        out[c] = total;
    }
}

// sum_rows (layers.cu) and mean_rows (loss.cu): HW_THREADS partial sums added as the kernels'
// shared-memory tree adds them.
float replay_block_sum(const float *v, int64_t count) {
    float partial[HW_THREADS];
    for (int t = 0; t < HW_THREADS; t++) partial[t] = strided_sum(v, count, 1, t, HW_THREADS);
    for (int half = HW_THREADS / 2; half > 0; half /= 2) {
        for (int t = 0; t < half; t++) partial[t] += partial[t + half];
    }
    return partial[0];
}

// ---- layers.cu ----

// hw_cuda_linear_forward
int replay_linear_forward(replay_blas blas, float *y, const float *x, const float *w, const float *bias, int batch,
                          int in, int out) {
    if (batch <= 0) return HW_OK;
    if (gemm(blas, 0, 1, batch, out, in, x, w, y) != HW_OK) return HW_ERR;
    for (int64_t i = 0; bias && i < (int64_t)batch * out; i++) add_bias_cols_element(i, y, bias, out);
    return HW_OK;
}

// hw_cuda_linear_backward
int replay_linear_backward(replay_blas blas, float *dx, float *dw, float *dbias, const float *dy, const float *x,
                           const float *w, int batch, int in, int out) {
    if (batch <= 0) return HW_OK;
    if (dw && gemm(blas, 1, 0, out, in, batch, dy, x, dw) != HW_OK) return HW_ERR;
    if (dbias) replay_sum_cols(dbias, dy, batch, out);
    if (dx && gemm(blas, 0, 0, batch, in, out, dy, w, dx) != HW_OK) return HW_ERR;
    return HW_OK;
}

// hw_cuda_conv2d_forward: col and t share the scratch as there.
int replay_conv2d_forward(replay_blas blas, float *y, const float *x, const float *w, const float *bias,
                          hw_conv_dims d, float *scratch) {
    if (d.batch <= 0) return HW_OK;
    int oh = hw_conv_out_h(d), ow = hw_conv_out_w(d);
    int64_t columns = (int64_t)d.batch * oh * ow, rows = (int64_t)d.in_channels * d.kernel * d.kernel;
    float *col = scratch, *t = scratch + rows * columns;
    for (int64_t i = 0; i < rows * columns; i++) im2col_element(i, col, x, d, oh, ow);
    if (gemm(blas, 0, 0, d.out_channels, (int)columns, (int)rows, w, col, t) != HW_OK) return HW_ERR;
    for (int64_t i = 0; i < d.out_channels * columns; i++) {
        cnhw_to_nchw_element(i, y, t, bias, d.batch, d.out_channels, (int64_t)oh * ow);
    }
    return HW_OK;
}

// hw_cuda_conv2d_backward: dcol overwrites col once dw has used it.
int replay_conv2d_backward(replay_blas blas, float *dx, float *dw, float *dbias, const float *dy, const float *x,
                           const float *w, hw_conv_dims d, float *scratch) {
    if (d.batch <= 0) return HW_OK;
    int oh = hw_conv_out_h(d), ow = hw_conv_out_w(d);
    int64_t columns = (int64_t)d.batch * oh * ow, rows = (int64_t)d.in_channels * d.kernel * d.kernel;
    float *col = scratch, *t = scratch + rows * columns;
    for (int64_t i = 0; i < d.out_channels * columns; i++) {
        nchw_to_cnhw_element(i, t, dy, d.batch, d.out_channels, (int64_t)oh * ow);
    }
    for (int oc = 0; dbias && oc < d.out_channels; oc++) dbias[oc] = replay_block_sum(t + oc * columns, columns);
    if (dw) {
        for (int64_t i = 0; i < rows * columns; i++) im2col_element(i, col, x, d, oh, ow);
        if (gemm(blas, 0, 1, d.out_channels, (int)rows, (int)columns, t, col, dw) != HW_OK) return HW_ERR;
    }
    if (dx) {
        if (gemm(blas, 1, 0, (int)rows, (int)columns, d.out_channels, w, t, col) != HW_OK) return HW_ERR;
        int64_t total = (int64_t)d.batch * d.in_channels * d.height * d.width;
        for (int64_t i = 0; i < total; i++) col2im_element(i, dx, col, d, oh, ow);
    }
    return HW_OK;
}

// hw_cuda_maxpool2d_forward
void replay_maxpool2d_forward(float *y, int32_t *argmax, const float *x, int planes, int height, int width, int kernel,
                              int stride) {
    int oh = (height - kernel) / stride + 1, ow = (width - kernel) / stride + 1;
    for (int64_t i = 0; i < (int64_t)planes * oh * ow; i++) {
        maxpool_forward_element(i, y, argmax, x, height, width, kernel, stride, oh, ow);
    }
}

// hw_cuda_maxpool2d_backward
void replay_maxpool2d_backward(float *dx, const float *dy, const int32_t *argmax, int planes, int height, int width,
                               int kernel, int stride) {
    int oh = (height - kernel) / stride + 1, ow = (width - kernel) / stride + 1;
    for (int64_t i = 0; i < (int64_t)planes * height * width; i++) {
        maxpool_backward_element(i, dx, dy, argmax, height, width, kernel, stride, oh, ow);
    }
}

// ---- pointwise.cu ----

void replay_relu_forward(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) relu_forward_element(i, y, x);
}

void replay_relu_backward(float *dx, const float *dy, const float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) relu_backward_element(i, dx, dy, y);
}

void replay_dropout(float *out, const float *in, int64_t n, int64_t plane, float p, uint64_t seed, uint64_t step) {
    for (int64_t i = 0; i < n; i++) dropout_element(i, out, in, plane, p, dropout_scale(p), seed, step);
}

void replay_normalize_u8(float *x, const uint8_t *bytes, int64_t n, float mean, float std) {
    for (int64_t i = 0; i < n; i++) normalize_u8_element(i, x, bytes, mean, std);
}

void replay_sgd_step(float *w, const float *g, float *velocity, int64_t n, float lr, float momentum,
                     float weight_decay, int nesterov, int started) {
    for (int64_t i = 0; i < n; i++) sgd_step_element(i, w, g, velocity, lr, momentum, weight_decay, nesterov, started);
}

// scale_kernel and add_kernel
void replay_scale(float *x, int64_t n, float alpha) {
    for (int64_t i = 0; i < n; i++) x[i] *= alpha;
}

void replay_add(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
}

// ---- loss.cu ----

// hw_cuda_log_softmax_nll_forward: log_softmax_rows, then mean_rows when there are labels.
void replay_log_softmax_nll_forward(float *logp, float *loss, const float *x, const uint8_t *labels, int batch,
                                    int classes, float *row_loss) {
    if (batch <= 0 || classes <= 0) return;
    for (int64_t b = 0; b < batch; b++) log_softmax_row(b, logp, row_loss, x, labels, classes);
    if (labels) *loss = replay_block_sum(row_loss, batch) / (float)batch;
}

void replay_nll_backward(float *dx, const float *logp, const uint8_t *labels, int batch, int classes) {
    for (int64_t i = 0; i < (int64_t)batch * classes; i++) nll_backward_element(i, dx, logp, labels, batch, classes);
}

void replay_accumulate_loss(double *total, const float *loss, int batch) { *total += (double)*loss * batch; }

// count_correct: one atomicAdd per correct row.
void replay_count_correct(int32_t *count, const float *logp, const uint8_t *labels, int batch, int classes) {
    for (int64_t b = 0; b < batch; b++) *count += count_correct_row(b, logp, labels, classes);
}
