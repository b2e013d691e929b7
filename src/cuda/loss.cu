// loss: log_softmax fused with the mean negative log-likelihood, and the accuracy count.
#include "check.cuh"
#include "kernels.cuh"

// One thread per row (classes are few): log_softmax_row, then the mean of the row losses.
__global__ static void log_softmax_rows(float *logp, float *row_loss, const float *x, const uint8_t *labels, int batch,
                                        int classes) {
    GRID_STRIDE(b, batch) log_softmax_row(b, logp, row_loss, x, labels, classes);
}

// The mean of the row losses in one block, in a fixed order.
__global__ static void mean_rows(float *loss, const float *row_loss, int batch) {
    __shared__ float partial[HW_THREADS];
    partial[threadIdx.x] = strided_sum(row_loss, batch, 1, threadIdx.x, blockDim.x);
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) *loss = partial[0] / (float)batch;
}

__global__ static void nll_backward(float *dx, const float *logp, const uint8_t *labels, int batch, int classes) {
    GRID_STRIDE(i, (int64_t)batch * classes) nll_backward_element(i, dx, logp, labels, batch, classes);
}

// One thread: a running sum in double, as the CPU trainer keeps it.
__global__ static void accumulate_loss(double *total, const float *loss, int batch) { *total += (double)*loss * batch; }

__global__ static void count_correct(int32_t *count, const float *logp, const uint8_t *labels, int batch, int classes) {
    GRID_STRIDE(b, batch) {
        if (count_correct_row(b, logp, labels, classes)) atomicAdd(count, 1);
    }
}

extern "C" int hw_cuda_log_softmax_nll_forward(hw_cuda_stream stream, float *logp, float *loss_dev, const float *x,
                                               const uint8_t *labels, int batch, int classes, float *row_scratch) {
    if (batch <= 0 || classes <= 0) return HW_OK;
    log_softmax_rows<<<hw_blocks(batch), HW_THREADS, 0, stream>>>(logp, row_scratch, x, labels, batch, classes);
    HW_CHECK(cudaGetLastError());
    if (labels) {
        mean_rows<<<1, HW_THREADS, 0, stream>>>(loss_dev, row_scratch, batch);
        HW_CHECK(cudaGetLastError());
    }
    return HW_OK;
}

extern "C" int hw_cuda_log_softmax_nll_backward(hw_cuda_stream stream, float *dx, const float *logp,
                                                const uint8_t *labels, int batch, int classes) {
    int64_t n = (int64_t)batch * classes;
    if (n <= 0) return HW_OK;
    nll_backward<<<hw_blocks(n), HW_THREADS, 0, stream>>>(dx, logp, labels, batch, classes);
    HW_CHECK(cudaGetLastError());
    return HW_OK;
}

extern "C" int hw_cuda_accumulate_loss(hw_cuda_stream stream, double *total_dev, const float *loss_dev, int batch) {
    if (batch <= 0) return HW_OK;
    accumulate_loss<<<1, 1, 0, stream>>>(total_dev, loss_dev, batch);
    HW_CHECK(cudaGetLastError());
    return HW_OK;
}

extern "C" int hw_cuda_count_correct(hw_cuda_stream stream, int32_t *count_dev, const float *logp,
                                     const uint8_t *labels, int batch, int classes) {
    if (batch <= 0) return HW_OK;
    count_correct<<<hw_blocks(batch), HW_THREADS, 0, stream>>>(count_dev, logp, labels, batch, classes);
    HW_CHECK(cudaGetLastError());
    return HW_OK;
}
