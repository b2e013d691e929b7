// layers: linear, conv2d (im2col + GEMM over the whole batch) and maxpool2d, forward and backward.
// The math is the CPU layers' (src/nn/), written for the GPU; every reduction runs in a fixed
// order, so a result does not change from run to run. What each kernel computes for one index is
// in kernels.cuh; here are the launches and the order of kernels and GEMMs that makes a layer.
#include "check.cuh"
#include "kernels.cuh"

// ---- bias: add, and the two reductions its gradient needs ----

__global__ static void add_bias_cols(float *y, const float *bias, int64_t rows, int64_t cols) {
    GRID_STRIDE(i, rows * cols) add_bias_cols_element(i, y, bias, cols);
}

// out[c] = sum_r m[r, c]: a block of 32 x SUM_COLS_LANES threads per 32 columns; each row of
// threads sums every SUM_COLS_LANES-th row, then a column's partial sums are added in shared memory.
__global__ static void sum_cols(float *out, const float *m, int64_t rows, int64_t cols) {
    __shared__ float partial[SUM_COLS_LANES][33];
    int64_t c = blockIdx.x * 32 + threadIdx.x;
    partial[threadIdx.y][threadIdx.x] = c < cols ? strided_sum(m + c, rows, cols, threadIdx.y, SUM_COLS_LANES) : 0.0f;
    __syncthreads();
    if (threadIdx.y == 0 && c < cols) {
        float total = 0.0f;
        for (int k = 0; k < SUM_COLS_LANES; k++) total += partial[k][threadIdx.x];
        out[c] = total;
    }
}

// out[r] = sum_c m[r, c]: one block per row, a tree reduction in shared memory.
__global__ static void sum_rows(float *out, const float *m, int64_t cols) {
    __shared__ float partial[HW_THREADS];
    partial[threadIdx.x] = strided_sum(m + blockIdx.x * cols, cols, 1, threadIdx.x, blockDim.x);
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = partial[0];
}

static int launch_sum_cols(hw_cuda_stream stream, float *out, const float *m, int64_t rows, int64_t cols) {
    dim3 block(32, SUM_COLS_LANES);
    dim3 grid((unsigned)((cols + 31) / 32));
    sum_cols<<<grid, block, 0, stream>>>(out, m, rows, cols);
    HW_CHECK(cudaGetLastError());
    return HW_OK;
}

// ---- linear ----

extern "C" int hw_cuda_linear_forward(hw_cuda_ctx ctx, float *y, const float *x, const float *w, const float *bias,
                                      int batch, int in_features, int out_features) {
    if (batch <= 0) return HW_OK;
    // y[B, out] = x[B, in] * w[out, in]^T
    if (hw_cuda_sgemm(ctx.blas, 0, 1, batch, out_features, in_features, 1.0f, x, w, 0.0f, y) != HW_OK) return HW_ERR;
    if (bias) {
        int64_t n = (int64_t)batch * out_features;
        add_bias_cols<<<hw_blocks(n), HW_THREADS, 0, ctx.stream>>>(y, bias, batch, out_features);
        HW_CHECK(cudaGetLastError());
    }
    return HW_OK;
}

extern "C" int hw_cuda_linear_backward(hw_cuda_ctx ctx, float *dx, float *dw, float *dbias, const float *dy,
                                       const float *x, const float *w, int batch, int in_features, int out_features) {
    if (batch <= 0) return HW_OK;
    // dw[out, in] = dy[B, out]^T * x[B, in]
    if (dw && hw_cuda_sgemm(ctx.blas, 1, 0, out_features, in_features, batch, 1.0f, dy, x, 0.0f, dw) != HW_OK) {
        return HW_ERR;
    }
    if (dbias && launch_sum_cols(ctx.stream, dbias, dy, batch, out_features) != HW_OK) return HW_ERR;
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

__global__ static void im2col(float *col, const float *x, hw_conv_dims d, int oh, int ow, int64_t n) {
    GRID_STRIDE(i, n) im2col_element(i, col, x, d, oh, ow);
}

__global__ static void col2im(float *dx, const float *dcol, hw_conv_dims d, int oh, int ow, int64_t n) {
    GRID_STRIDE(i, n) col2im_element(i, dx, dcol, d, oh, ow);
}

__global__ static void cnhw_to_nchw(float *y, const float *t, const float *bias, int64_t batch, int64_t channels,
                                    int64_t plane) {
    GRID_STRIDE(i, batch * channels * plane) cnhw_to_nchw_element(i, y, t, bias, batch, channels, plane);
}

__global__ static void nchw_to_cnhw(float *t, const float *dy, int64_t batch, int64_t channels, int64_t plane) {
    GRID_STRIDE(i, batch * channels * plane) nchw_to_cnhw_element(i, t, dy, batch, channels, plane);
}

extern "C" int hw_cuda_conv2d_forward(hw_cuda_ctx ctx, float *y, const float *x, const float *w, const float *bias,
                                      hw_conv_dims d, float *scratch) {
    if (d.batch <= 0) return HW_OK;
    int oh = hw_conv_out_h(d), ow = hw_conv_out_w(d);
    int64_t rows, columns;
    if (!conv_gemm_size(d, &rows, &columns)) {
        return hw_fail("conv2d: batch %d is too large for one GEMM (%lld columns)", d.batch, (long long)columns);
    }
    float *col = scratch, *t = scratch + rows * columns;
    im2col<<<hw_blocks(rows * columns), HW_THREADS, 0, ctx.stream>>>(col, x, d, oh, ow, rows * columns);
    HW_CHECK(cudaGetLastError());
    if (hw_cuda_sgemm(ctx.blas, 0, 0, d.out_channels, (int)columns, (int)rows, 1.0f, w, col, 0.0f, t) != HW_OK) {
        return HW_ERR;
    }
    int64_t n = (int64_t)d.out_channels * columns;
    cnhw_to_nchw<<<hw_blocks(n), HW_THREADS, 0, ctx.stream>>>(y, t, bias, d.batch, d.out_channels, (int64_t)oh * ow);
    HW_CHECK(cudaGetLastError());
    return HW_OK;
}

extern "C" int hw_cuda_conv2d_backward(hw_cuda_ctx ctx, float *dx, float *dw, float *dbias, const float *dy,
                                       const float *x, const float *w, hw_conv_dims d, float *scratch) {
    if (d.batch <= 0) return HW_OK;
    int oh = hw_conv_out_h(d), ow = hw_conv_out_w(d);
    int64_t rows, columns;
    if (!conv_gemm_size(d, &rows, &columns)) {
        return hw_fail("conv2d: batch %d is too large for one GEMM (%lld columns)", d.batch, (long long)columns);
    }
    float *col = scratch, *t = scratch + rows * columns;
    int64_t n = (int64_t)d.out_channels * columns;
    nchw_to_cnhw<<<hw_blocks(n), HW_THREADS, 0, ctx.stream>>>(t, dy, d.batch, d.out_channels, (int64_t)oh * ow);
    HW_CHECK(cudaGetLastError());
    if (dbias) {
        sum_rows<<<(unsigned)d.out_channels, HW_THREADS, 0, ctx.stream>>>(dbias, t, columns);
        HW_CHECK(cudaGetLastError());
    }
    if (dw) {
        // The forward's columns are not kept: rebuilding them costs less than B*OH*OW*C*K*K floats per layer.
        im2col<<<hw_blocks(rows * columns), HW_THREADS, 0, ctx.stream>>>(col, x, d, oh, ow, rows * columns);
        HW_CHECK(cudaGetLastError());
        if (hw_cuda_sgemm(ctx.blas, 0, 1, d.out_channels, (int)rows, (int)columns, 1.0f, t, col, 0.0f, dw) != HW_OK) {
            return HW_ERR;
        }
    }
    if (dx) {
        if (hw_cuda_sgemm(ctx.blas, 1, 0, (int)rows, (int)columns, d.out_channels, 1.0f, w, t, 0.0f, col) != HW_OK) {
            return HW_ERR;
        }
        int64_t total = (int64_t)d.batch * d.in_channels * d.height * d.width;
        col2im<<<hw_blocks(total), HW_THREADS, 0, ctx.stream>>>(dx, col, d, oh, ow, total);
        HW_CHECK(cudaGetLastError());
    }
    return HW_OK;
}

// ---- maxpool2d ----

__global__ static void maxpool_forward(float *y, int32_t *argmax, const float *x, int64_t planes, int height, int width,
                                       int kernel, int stride, int oh, int ow) {
    GRID_STRIDE(i, planes * oh * ow) maxpool_forward_element(i, y, argmax, x, height, width, kernel, stride, oh, ow);
}

__global__ static void maxpool_backward(float *dx, const float *dy, const int32_t *argmax, int64_t planes, int height,
                                        int width, int kernel, int stride, int oh, int ow) {
    GRID_STRIDE(i, planes * height * width) {
        maxpool_backward_element(i, dx, dy, argmax, height, width, kernel, stride, oh, ow);
    }
}

extern "C" int hw_cuda_maxpool2d_forward(hw_cuda_stream stream, float *y, int32_t *argmax, const float *x, int batch,
                                         int channels, int height, int width, int kernel, int stride) {
    int oh = (height - kernel) / stride + 1, ow = (width - kernel) / stride + 1;
    int64_t total = (int64_t)batch * channels * oh * ow;
    if (total <= 0) return HW_OK;
    maxpool_forward<<<hw_blocks(total), HW_THREADS, 0, stream>>>(y, argmax, x, (int64_t)batch * channels, height, width,
                                                                 kernel, stride, oh, ow);
    HW_CHECK(cudaGetLastError());
    return HW_OK;
}

extern "C" int hw_cuda_maxpool2d_backward(hw_cuda_stream stream, float *dx, const float *dy, const int32_t *argmax,
                                          int batch, int channels, int height, int width, int kernel, int stride) {
    int oh = (height - kernel) / stride + 1, ow = (width - kernel) / stride + 1;
    int64_t total = (int64_t)batch * channels * height * width;
    if (total <= 0) return HW_OK;
    maxpool_backward<<<hw_blocks(total), HW_THREADS, 0, stream>>>(dx, dy, argmax, (int64_t)batch * channels, height,
                                                                  width, kernel, stride, oh, ow);
    HW_CHECK(cudaGetLastError());
    return HW_OK;
}
