// pointwise: relu, dropout, dropout2d, the uint8 -> float input conversion, the SGD step, the
// all-reduce's scale and add, and the probe that tells whether the device can run these kernels.
//
// Every kernel launch of the CUDA module is in this file, layers.cu and loss.cu: the rest
// (runner.cu, device.cu, blas.cu, allreduce.cu) is host code, which the simulated device of the
// tests (tests/simcuda/) compiles with the host compiler.
#include "check.cuh"
#include "kernels.cuh"

// One grid-stride loop per kernel; what each index computes is in kernels.cuh.

__global__ static void relu_forward(float *y, const float *x, int64_t n) {
    GRID_STRIDE(i, n) relu_forward_element(i, y, x);
}

__global__ static void relu_backward(float *dx, const float *dy, const float *y, int64_t n) {
    GRID_STRIDE(i, n) relu_backward_element(i, dx, dy, y);
}

__global__ static void dropout_apply(float *out, const float *in, int64_t n, int64_t plane, float p, float scale,
                                     uint64_t seed, uint64_t step) {
    GRID_STRIDE(i, n) dropout_element(i, out, in, plane, p, scale, seed, step);
}

__global__ static void normalize_u8(float *x, const uint8_t *bytes, int64_t n, float mean, float std) {
    GRID_STRIDE(i, n) normalize_u8_element(i, x, bytes, mean, std);
}

__global__ static void sgd_step(float *w, const float *g, float *velocity, int64_t n, float lr, float momentum,
                                float weight_decay, int nesterov, int started) {
    GRID_STRIDE(i, n) sgd_step_element(i, w, g, velocity, lr, momentum, weight_decay, nesterov, started);
}

extern "C" int hw_cuda_relu_forward(hw_cuda_stream stream, float *y, const float *x, int64_t n) {
    if (n <= 0) return HW_OK;
    relu_forward<<<hw_blocks(n), HW_THREADS, 0, stream>>>(y, x, n);
    HW_CHECK(cudaGetLastError());
    return HW_OK;
}

extern "C" int hw_cuda_relu_backward(hw_cuda_stream stream, float *dx, const float *dy, const float *y, int64_t n) {
    if (n <= 0) return HW_OK;
    relu_backward<<<hw_blocks(n), HW_THREADS, 0, stream>>>(dx, dy, y, n);
    HW_CHECK(cudaGetLastError());
    return HW_OK;
}

// The forward and the backward are the same masking: y = mask * x / (1-p), dx = mask * dy / (1-p).
static int dropout_launch(hw_cuda_stream stream, float *out, const float *in, int64_t n, int64_t plane, float p,
                          uint64_t seed, uint64_t step) {
    if (dropout_args_check(p, n, plane) != HW_OK) return HW_ERR;
    if (n <= 0) return HW_OK;
    dropout_apply<<<hw_blocks(n), HW_THREADS, 0, stream>>>(out, in, n, plane, p, dropout_scale(p), seed, step);
    HW_CHECK(cudaGetLastError());
    return HW_OK;
}

extern "C" int hw_cuda_dropout_forward(hw_cuda_stream stream, float *y, const float *x, int64_t n, float p,
                                       uint64_t seed, uint64_t step) {
    return dropout_launch(stream, y, x, n, 1, p, seed, step);
}

extern "C" int hw_cuda_dropout_backward(hw_cuda_stream stream, float *dx, const float *dy, int64_t n, float p,
                                        uint64_t seed, uint64_t step) {
    return dropout_launch(stream, dx, dy, n, 1, p, seed, step);
}

extern "C" int hw_cuda_dropout2d_forward(hw_cuda_stream stream, float *y, const float *x, int64_t planes,
                                         int64_t plane, float p, uint64_t seed, uint64_t step) {
    return dropout_launch(stream, y, x, planes * plane, plane, p, seed, step);
}

extern "C" int hw_cuda_dropout2d_backward(hw_cuda_stream stream, float *dx, const float *dy, int64_t planes,
                                          int64_t plane, float p, uint64_t seed, uint64_t step) {
    return dropout_launch(stream, dx, dy, planes * plane, plane, p, seed, step);
}

extern "C" int hw_cuda_normalize_u8(hw_cuda_stream stream, float *x, const uint8_t *bytes, int64_t n, float mean,
                                    float std) {
    if (normalize_args_check(std) != HW_OK) return HW_ERR;
    if (n <= 0) return HW_OK;
    normalize_u8<<<hw_blocks(n), HW_THREADS, 0, stream>>>(x, bytes, n, mean, std);
    HW_CHECK(cudaGetLastError());
    return HW_OK;
}

extern "C" int hw_cuda_sgd_step(hw_cuda_stream stream, float *w, const float *g, float *velocity, int64_t n, float lr,
                                float momentum, float weight_decay, int nesterov, int started) {
    if (sgd_args_check(momentum, velocity) != HW_OK) return HW_ERR;
    if (n <= 0) return HW_OK;
    sgd_step<<<hw_blocks(n), HW_THREADS, 0, stream>>>(w, g, velocity, n, lr, momentum, weight_decay, nesterov, started);
    HW_CHECK(cudaGetLastError());
    return HW_OK;
}

// ---- the all-reduce's scale and sum (allreduce.cu) ----

__global__ static void scale_kernel(float *x, int64_t n, float alpha) {
    GRID_STRIDE(i, n) { x[i] *= alpha; }
}

__global__ static void add_kernel(float *y, const float *x, int64_t n) {
    GRID_STRIDE(i, n) { y[i] += x[i]; }
}

extern "C" int hw_cuda_scale(hw_cuda_stream stream, float *x, int64_t n, float alpha) {
    if (n <= 0) return HW_OK;
    scale_kernel<<<hw_blocks(n), HW_THREADS, 0, stream>>>(x, n, alpha);
    HW_CHECK(cudaGetLastError());
    return HW_OK;
}

extern "C" int hw_cuda_add(hw_cuda_stream stream, float *y, const float *x, int64_t n) {
    if (n <= 0) return HW_OK;
    add_kernel<<<hw_blocks(n), HW_THREADS, 0, stream>>>(y, x, n);
    HW_CHECK(cudaGetLastError());
    return HW_OK;
}

// ---- can the current device run these kernels? ----

// Never launched: hw_cuda_select asks for its attributes, which the runtime gives only when the
// device has machine code or PTX for it in this binary.
__global__ static void probe_kernel(void) {}

extern "C" cudaError_t cuda_kernels_runnable(void) {
    cudaFuncAttributes attributes;
    return cudaFuncGetAttributes(&attributes, probe_kernel);
}
