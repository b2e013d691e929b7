// layer_ops: the GPU's layer, loss, optimiser and all-reduce operations (layer_ops.h): for each,
// its argument checks and the kernels (launch.h) and
// GEMMs (hw_cuda_sgemm) it queues on the stream, in order, on the scratch layout it uses. The
// math is the CPU layers' (src/nn/); what each kernel computes for one index is in kernels.cuh.
//
// Plain C: on a GPU the launchers are kernels.cu's; on the simulated device of the tests they are
// host loops over the same per-index code (tests/simcuda/kernels.c). This file runs unchanged on
// both, so the sequence that makes each layer is written here only.
#include "layer_ops.h"

#include "hw/err.h"
#include "hw/sgd_update.h"
#include "kernels.cuh"
#include "launch.h"

// ---- linear ----

int hw_cuda_linear_forward(hw_cuda_ctx ctx, float *y, const float *x, const float *w, const float *bias, int batch,
                           int in_features, int out_features) {
    if (batch <= 0) return HW_OK;
    // y[B, out] = x[B, in] * w[out, in]^T
    if (hw_cuda_sgemm(ctx.blas, 0, 1, batch, out_features, in_features, 1.0f, x, w, 0.0f, y) != HW_OK) return HW_ERR;
    if (bias && out_features > 0) return add_bias_cols_launch(ctx.stream, y, bias, batch, out_features);
    return HW_OK;
}

int hw_cuda_linear_backward(hw_cuda_ctx ctx, float *dx, float *dw, float *dbias, const float *dy, const float *x,
                            const float *w, int batch, int in_features, int out_features) {
    if (batch <= 0) return HW_OK;
    // dw[out, in] = dy[B, out]^T * x[B, in]
    if (dw && hw_cuda_sgemm(ctx.blas, 1, 0, out_features, in_features, batch, 1.0f, dy, x, 0.0f, dw) != HW_OK) {
        return HW_ERR;
    }
    if (dbias && out_features > 0 && sum_cols_launch(ctx.stream, dbias, dy, batch, out_features) != HW_OK) {
        return HW_ERR;
    }
    // dx[B, in] = dy[B, out] * w[out, in]
    if (dx && hw_cuda_sgemm(ctx.blas, 0, 0, batch, in_features, out_features, 1.0f, dy, w, 0.0f, dx) != HW_OK) {
        return HW_ERR;
    }
    return HW_OK;
}

// ---- conv2d ----
//
// One GEMM w[OC, C*K*K] * col gives t[OC, B*OH*OW] (im2col over the whole batch), which a permute
// turns into NCHW y[B, OC, OH, OW] (adding the bias on the way). Backward permutes dy back into
// t, then dw = t * col^T and dbias = row sums of t; dcol = w^T * t and col2im gathers it into dx.
// A convolution of few taps (conv_is_direct) runs its forward, dw and dbias directly from the
// NCHW tensors instead; only its dx, where asked for, takes the permute, the GEMM and col2im.
// The scratch holds col, then t, then the weight gradient's partial sums where its GEMM is split
// over the batch (conv_dw_splits); dbias's partial sums go into col before im2col refills it, and
// so do the direct gradients' partial sums. Its size serves every batch up to d.batch: the
// partial sums are counted at their bound, not at the split of d.batch itself.

size_t hw_cuda_conv2d_scratch_floats(hw_conv_dims d) {
    size_t columns = (size_t)d.batch * (size_t)hw_conv_out_h(d) * (size_t)hw_conv_out_w(d);
    size_t rows = (size_t)d.in_channels * (size_t)(d.kernel * d.kernel);
    size_t partials = (size_t)conv_dw_partials_bound((int64_t)rows, (int64_t)columns);
    size_t floats = (rows + (size_t)d.out_channels) * columns + (size_t)d.out_channels * partials;
    size_t direct = conv_is_direct(d) ? (size_t)conv_dw_direct_partials(d) : 0;  // grows with the batch
    return direct > floats ? direct : floats;
}

static int conv_size(hw_conv_dims d, int64_t *rows, int64_t *columns) {
    if (conv_gemm_size(d, rows, columns)) return HW_OK;
    return hw_fail("conv2d: batch %d is too large for one GEMM (%lld columns)", d.batch, (long long)*columns);
}

int hw_cuda_conv2d_forward(hw_cuda_ctx ctx, float *y, const float *x, const float *w, const float *bias, hw_conv_dims d,
                           float *scratch) {
    if (d.batch <= 0) return HW_OK;
    int64_t rows, columns;
    if (conv_size(d, &rows, &columns) != HW_OK) return HW_ERR;
    if (conv_is_direct(d)) return conv2d_direct_launch(ctx.stream, y, x, w, bias, d);
    float *col = scratch, *t = scratch + rows * columns;
    if (im2col_launch(ctx.stream, col, x, d) != HW_OK) return HW_ERR;
    if (hw_cuda_sgemm(ctx.blas, 0, 0, d.out_channels, (int)columns, (int)rows, 1.0f, w, col, 0.0f, t) != HW_OK) {
        return HW_ERR;
    }
    int64_t plane = (int64_t)hw_conv_out_h(d) * hw_conv_out_w(d);
    return cnhw_to_nchw_launch(ctx.stream, y, t, bias, d.batch, d.out_channels, plane);
}

// dw = t * col^T, split over the batch where that is faster (conv_dw_splits).
static int conv_dw_gemm(hw_cuda_ctx ctx, float *dw, float *t, const float *col, hw_conv_dims d, int64_t rows,
                        int64_t columns) {
    int splits = conv_dw_splits(rows, columns);
    if (splits == 1)
        return hw_cuda_sgemm(ctx.blas, 0, 1, d.out_channels, (int)rows, (int)columns, 1.0f, t, col, 0.0f, dw);
    float *partial = t + d.out_channels * columns;  // the scratch after t
    if (hw_cuda_sgemm_nt_split_k(ctx.blas, d.out_channels, (int)rows, (int)columns, splits, t, col, partial) != HW_OK) {
        return HW_ERR;
    }
    return sum_cols_launch(ctx.stream, dw, partial, splits, d.out_channels * rows);
}

int hw_cuda_conv2d_backward(hw_cuda_ctx ctx, float *dx, float *dw, float *dbias, const float *dy, const float *x,
                            const float *w, hw_conv_dims d, float *scratch) {
    if (d.batch <= 0) return HW_OK;
    int64_t rows, columns;
    if (conv_size(d, &rows, &columns) != HW_OK) return HW_ERR;
    int direct = conv_is_direct(d);
    if (direct && (dw || dbias) && conv_dw_direct_launch(ctx.stream, dw, dbias, scratch, x, dy, d) != HW_OK) {
        return HW_ERR;
    }
    if (direct && !dx) return HW_OK;
    float *col = scratch, *t = scratch + rows * columns;
    int64_t plane = (int64_t)hw_conv_out_h(d) * hw_conv_out_w(d);
    if (nchw_to_cnhw_launch(ctx.stream, t, dy, d.batch, d.out_channels, plane) != HW_OK) return HW_ERR;
    if (!direct && dbias &&
        sum_rows_launch(ctx.stream, dbias, t, d.out_channels, columns, col, rows * columns) != HW_OK) {
        return HW_ERR;
    }
    // The forward's columns are not kept: rebuilding them costs less than B*OH*OW*C*K*K floats per layer.
    if (!direct && dw &&
        (im2col_launch(ctx.stream, col, x, d) != HW_OK || conv_dw_gemm(ctx, dw, t, col, d, rows, columns) != HW_OK)) {
        return HW_ERR;
    }
    if (dx) {  // dcol overwrites col, which dw is done with
        if (hw_cuda_sgemm(ctx.blas, 1, 0, (int)rows, (int)columns, d.out_channels, 1.0f, w, t, 0.0f, col) != HW_OK) {
            return HW_ERR;
        }
        if (col2im_launch(ctx.stream, dx, col, d) != HW_OK) return HW_ERR;
    }
    return HW_OK;
}

// ---- maxpool2d ----

int hw_cuda_maxpool2d_forward(hw_cuda_stream stream, float *y, int32_t *argmax, const float *x, int batch, int channels,
                              int height, int width, int kernel, int stride) {
    int oh = (height - kernel) / stride + 1, ow = (width - kernel) / stride + 1;
    if ((int64_t)batch * channels * oh * ow <= 0) return HW_OK;
    return maxpool_forward_launch(stream, y, argmax, x, (int64_t)batch * channels, height, width, kernel, stride);
}

int hw_cuda_maxpool2d_backward(hw_cuda_stream stream, float *dx, const float *dy, const int32_t *argmax, int batch,
                               int channels, int height, int width, int kernel, int stride) {
    if ((int64_t)batch * channels * height * width <= 0) return HW_OK;
    return maxpool_backward_launch(stream, dx, dy, argmax, (int64_t)batch * channels, height, width, kernel, stride);
}

// ---- relu, dropout, dropout2d ----

int hw_cuda_relu_forward(hw_cuda_stream stream, float *y, const float *x, int64_t n) {
    return n > 0 ? relu_forward_launch(stream, y, x, n) : HW_OK;
}

int hw_cuda_relu_backward(hw_cuda_stream stream, float *dx, const float *dy, const float *y, int64_t n) {
    return n > 0 ? relu_backward_launch(stream, dx, dy, y, n) : HW_OK;
}

// The forward and the backward are the same masking: y = mask * x / (1-p), dx = mask * dy / (1-p).
static int dropout_mask(hw_cuda_stream stream, float *out, const float *in, int64_t n, int64_t plane, float p,
                        uint64_t seed, uint64_t step) {
    if (dropout_args_check(p, n, plane) != HW_OK) return HW_ERR;
    return n > 0 ? dropout_launch(stream, out, in, n, plane, p, seed, step) : HW_OK;
}

int hw_cuda_dropout_forward(hw_cuda_stream stream, float *y, const float *x, int64_t n, float p, uint64_t seed,
                            uint64_t step) {
    return dropout_mask(stream, y, x, n, 1, p, seed, step);
}

int hw_cuda_dropout_backward(hw_cuda_stream stream, float *dx, const float *dy, int64_t n, float p, uint64_t seed,
                             uint64_t step) {
    return dropout_mask(stream, dx, dy, n, 1, p, seed, step);
}

int hw_cuda_dropout2d_forward(hw_cuda_stream stream, float *y, const float *x, int64_t planes, int64_t plane, float p,
                              uint64_t seed, uint64_t step) {
    return dropout_mask(stream, y, x, planes * plane, plane, p, seed, step);
}

int hw_cuda_dropout2d_backward(hw_cuda_stream stream, float *dx, const float *dy, int64_t planes, int64_t plane,
                               float p, uint64_t seed, uint64_t step) {
    return dropout_mask(stream, dx, dy, planes * plane, plane, p, seed, step);
}

// ---- the loss ----

int hw_cuda_log_softmax_nll_forward(hw_cuda_stream stream, float *logp, float *loss_dev, const float *x,
                                    const uint8_t *labels, int batch, int classes, float *row_scratch) {
    if (batch <= 0 || classes <= 0) return HW_OK;
    if (log_softmax_rows_launch(stream, logp, row_scratch, x, labels, batch, classes) != HW_OK) return HW_ERR;
    return labels ? mean_rows_launch(stream, loss_dev, row_scratch, batch) : HW_OK;
}

int hw_cuda_log_softmax_nll_backward(hw_cuda_stream stream, float *dx, const float *logp, const uint8_t *labels,
                                     int batch, int classes) {
    if ((int64_t)batch * classes <= 0) return HW_OK;
    return nll_backward_launch(stream, dx, logp, labels, batch, classes);
}

int hw_cuda_accumulate_loss(hw_cuda_stream stream, double *total_dev, const float *loss_dev, int batch) {
    return batch > 0 ? accumulate_loss_launch(stream, total_dev, loss_dev, batch) : HW_OK;
}

int hw_cuda_count_correct(hw_cuda_stream stream, int32_t *count_dev, const float *logp, const uint8_t *labels,
                          int batch, int classes) {
    return batch > 0 ? count_correct_launch(stream, count_dev, logp, labels, batch, classes) : HW_OK;
}

// ---- the SGD step, the input, the all-reduce's scale and sum ----

int hw_cuda_sgd_step(hw_cuda_stream stream, float *w, const float *g, float *velocity, int64_t n, float lr,
                     float momentum, float weight_decay, int nesterov, int started) {
    if (hw_sgd_check(lr, momentum, weight_decay, nesterov) != HW_OK) return HW_ERR;
    hw_sgd_variant variant = hw_sgd_variant_of(momentum, nesterov);
    if (variant != HW_SGD_PLAIN && !velocity) {
        return hw_fail("sgd: momentum %g needs a velocity buffer", (double)momentum);
    }
    return n > 0 ? sgd_step_launch(stream, w, g, velocity, n, variant, lr, momentum, weight_decay, !started) : HW_OK;
}

int hw_cuda_normalize_u8(hw_cuda_stream stream, float *x, const uint8_t *bytes, int64_t n, float mean, float std) {
    if (normalize_args_check(std) != HW_OK) return HW_ERR;
    return n > 0 ? normalize_u8_launch(stream, x, bytes, n, mean, std) : HW_OK;
}

int hw_cuda_scale(hw_cuda_stream stream, float *x, int64_t n, float alpha) {
    return n > 0 ? scale_launch(stream, x, n, alpha) : HW_OK;
}

int hw_cuda_add(hw_cuda_stream stream, float *y, const float *x, int64_t n) {
    return n > 0 ? add_launch(stream, y, x, n) : HW_OK;
}

int hw_cuda_couple_send(hw_cuda_stream stream, float *sent, float *sum, const float *live, const float *agreed,
                        int64_t n) {
    return n > 0 ? couple_send_launch(stream, sent, sum, live, agreed, n) : HW_OK;
}

int hw_cuda_couple_round(hw_cuda_stream stream, float *live, float *agreed, float *velocity, const float *sum,
                         const float *sent, int64_t n, hw_couple_rule rule, int copies, int ahead) {
    if (copies < 1) return hw_fail("a round of %d copies", copies);
    return n > 0 ? couple_round_launch(stream, live, agreed, velocity, sum, sent, n, rule, hw_couple_beta(copies),
                                       hw_couple_mean(copies), (float)ahead)
                 : HW_OK;
}

// ---- the cost of a launch itself (bench/gpu_bench.c) ----

int hw_cuda_launch_empty(hw_cuda_stream stream) { return empty_launch(stream); }
