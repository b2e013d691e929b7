// layers: linear, conv2d (im2col + GEMM over the whole batch) and maxpool2d, forward and backward.
// The math is the CPU layers' (src/nn/), written for the GPU; every reduction runs in a fixed
// order, so a result does not change from run to run.
#include "check.cuh"

// ---- bias: add, and the two reductions its gradient needs ----

// y[r, c] += bias[c] over rows x cols.
__global__ static void add_bias_cols(float *y, const float *bias, int64_t rows, int64_t cols) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < rows * cols; i += (int64_t)gridDim.x * blockDim.x) {
        y[i] += bias[i % cols];
    }
}

// out[c] = sum_r m[r, c]: a block of 32 x 8 threads per 32 columns; the 8 rows of threads stride
// down the rows, then the 8 partial sums of a column are added in shared memory.
__global__ static void sum_cols(float *out, const float *m, int64_t rows, int64_t cols) {
    __shared__ float partial[8][33];
    int64_t c = blockIdx.x * 32 + threadIdx.x;
    float sum = 0.0f;
    if (c < cols) {
        for (int64_t r = threadIdx.y; r < rows; r += 8) sum += m[r * cols + c];
    }
    partial[threadIdx.y][threadIdx.x] = sum;
    __syncthreads();
    if (threadIdx.y == 0 && c < cols) {
        float total = 0.0f;
        for (int k = 0; k < 8; k++) total += partial[k][threadIdx.x];
        out[c] = total;
    }
}

// out[r] = sum_c m[r, c]: one block per row, a tree reduction in shared memory.
__global__ static void sum_rows(float *out, const float *m, int64_t cols) {
    __shared__ float partial[HW_THREADS];
    const float *row = m + blockIdx.x * cols;
    float sum = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += row[c];
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = partial[0];
}

static int launch_sum_cols(hw_cuda_stream stream, float *out, const float *m, int64_t rows, int64_t cols) {
    dim3 block(32, 8);
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
// The im2col matrix of the whole batch is col[C*K*K, B*OH*OW]: row (c, ky, kx), column
// (b, oy, ox). One GEMM w[OC, C*K*K] * col gives t[OC, B*OH*OW], which a permute turns into
// NCHW y[B, OC, OH, OW] (adding the bias on the way). Backward permutes dy back into t, then
// dw = t * col^T and dbias = row sums of t; dcol = w^T * t and col2im gathers it into dx.

__global__ static void im2col(float *col, const float *x, hw_conv_dims d, int oh, int ow) {
    int64_t plane = (int64_t)oh * ow;
    int64_t columns = d.batch * plane;
    int64_t total = (int64_t)d.in_channels * d.kernel * d.kernel * columns;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t row = i / columns, j = i % columns;
        int c = (int)(row / (d.kernel * d.kernel));
        int kk = (int)(row % (d.kernel * d.kernel));
        int ky = kk / d.kernel, kx = kk % d.kernel;
        int64_t b = j / plane;
        int p = (int)(j % plane);
        int iy = (p / ow) * d.stride - d.padding + ky;
        int ix = (p % ow) * d.stride - d.padding + kx;
        float v = 0.0f;
        if (iy >= 0 && iy < d.height && ix >= 0 && ix < d.width) {
            v = x[((b * d.in_channels + c) * d.height + iy) * d.width + ix];
        }
        col[i] = v;
    }
}

// dx[b, c, iy, ix] = sum of dcol over the (ky, kx, oy, ox) that read that input pixel. Each
// thread gathers one input pixel: no atomics, a fixed order.
__global__ static void col2im(float *dx, const float *dcol, hw_conv_dims d, int oh, int ow) {
    int64_t plane = (int64_t)oh * ow;
    int64_t columns = d.batch * plane;
    int64_t total = (int64_t)d.batch * d.in_channels * d.height * d.width;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        int ix = (int)(i % d.width);
        int iy = (int)((i / d.width) % d.height);
        int c = (int)((i / ((int64_t)d.width * d.height)) % d.in_channels);
        int64_t b = i / ((int64_t)d.width * d.height * d.in_channels);
        float sum = 0.0f;
        for (int ky = 0; ky < d.kernel; ky++) {
            int ty = iy + d.padding - ky;
            if (ty < 0 || ty % d.stride != 0 || ty / d.stride >= oh) continue;
            int oy = ty / d.stride;
            for (int kx = 0; kx < d.kernel; kx++) {
                int tx = ix + d.padding - kx;
                if (tx < 0 || tx % d.stride != 0 || tx / d.stride >= ow) continue;
                int ox = tx / d.stride;
                int64_t row = ((int64_t)c * d.kernel + ky) * d.kernel + kx;
                sum += dcol[row * columns + b * plane + (int64_t)oy * ow + ox];
            }
        }
        dx[i] = sum;
    }
}

// y[b, oc, p] = t[oc, b*plane + p] + bias[oc]
__global__ static void cnhw_to_nchw(float *y, const float *t, const float *bias, int64_t batch, int64_t channels,
                                    int64_t plane) {
    int64_t total = batch * channels * plane;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t p = i % plane, oc = (i / plane) % channels, b = i / (plane * channels);
        y[i] = t[oc * batch * plane + b * plane + p] + (bias ? bias[oc] : 0.0f);
    }
}

// t[oc, b*plane + p] = dy[b, oc, p]
__global__ static void nchw_to_cnhw(float *t, const float *dy, int64_t batch, int64_t channels, int64_t plane) {
    int64_t total = batch * channels * plane;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t p = i % plane, oc = (i / plane) % channels, b = i / (plane * channels);
        t[oc * batch * plane + b * plane + p] = dy[i];
    }
}

extern "C" int hw_cuda_conv2d_forward(hw_cuda_ctx ctx, float *y, const float *x, const float *w, const float *bias,
                                      hw_conv_dims d, float *scratch) {
    if (d.batch <= 0) return HW_OK;
    int oh = hw_conv_out_h(d), ow = hw_conv_out_w(d);
    int64_t columns = (int64_t)d.batch * oh * ow;
    int64_t rows = (int64_t)d.in_channels * d.kernel * d.kernel;
    if (columns > INT32_MAX || rows * columns > ((int64_t)1 << 40)) {
        return hw_fail("conv2d: batch %d is too large for one GEMM (%lld columns)", d.batch, (long long)columns);
    }
    float *col = scratch, *t = scratch + rows * columns;
    im2col<<<hw_blocks(rows * columns), HW_THREADS, 0, ctx.stream>>>(col, x, d, oh, ow);
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
    int64_t columns = (int64_t)d.batch * oh * ow;
    int64_t rows = (int64_t)d.in_channels * d.kernel * d.kernel;
    if (columns > INT32_MAX) return hw_fail("conv2d: batch %d is too large for one GEMM", d.batch);
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
        im2col<<<hw_blocks(rows * columns), HW_THREADS, 0, ctx.stream>>>(col, x, d, oh, ow);
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
        col2im<<<hw_blocks(total), HW_THREADS, 0, ctx.stream>>>(dx, col, d, oh, ow);
        HW_CHECK(cudaGetLastError());
    }
    return HW_OK;
}

// ---- maxpool2d ----

__global__ static void maxpool_forward(float *y, int32_t *argmax, const float *x, int64_t planes, int height, int width,
                                       int kernel, int stride, int oh, int ow) {
    int64_t total = planes * oh * ow;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        int ox = (int)(i % ow), oy = (int)((i / ow) % oh);
        const float *in = x + (i / ((int64_t)oh * ow)) * height * width;
        int best_index = oy * stride * width + ox * stride;
        float best = in[best_index];
        for (int ky = 0; ky < kernel; ky++) {
            for (int kx = 0; kx < kernel; kx++) {
                int index = (oy * stride + ky) * width + ox * stride + kx;
                if (in[index] > best) {  // strict: the first maximum wins ties
                    best = in[index];
                    best_index = index;
                }
            }
        }
        y[i] = best;
        argmax[i] = best_index;
    }
}

// Each input pixel gathers the gradients of the windows whose maximum it was (no atomics).
__global__ static void maxpool_backward(float *dx, const float *dy, const int32_t *argmax, int64_t planes, int height,
                                        int width, int kernel, int stride, int oh, int ow) {
    int64_t total = planes * height * width;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        int index = (int)(i % ((int64_t)height * width));
        int iy = index / width, ix = index % width;
        int64_t out_base = (i / ((int64_t)height * width)) * oh * ow;
        int oy_lo = iy < kernel ? 0 : (iy - kernel) / stride + 1, oy_hi = min(iy / stride, oh - 1);
        int ox_lo = ix < kernel ? 0 : (ix - kernel) / stride + 1, ox_hi = min(ix / stride, ow - 1);
        float sum = 0.0f;
        for (int oy = oy_lo; oy <= oy_hi; oy++) {
            for (int ox = ox_lo; ox <= ox_hi; ox++) {
                int64_t o = out_base + (int64_t)oy * ow + ox;
                if (argmax[o] == index) sum += dy[o];
            }
        }
        dx[i] = sum;
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
