// loss: log_softmax fused with the mean negative log-likelihood, and the accuracy count.
#include "check.cuh"

#include <math.h>

// One thread per row (classes are few): the stable log_softmax x - max - log(sum exp(x - max)),
// and the row's loss -logp[label] (NaN for a label out of range, so that it cannot pass unseen).
__global__ static void log_softmax_rows(float *logp, float *row_loss, const float *x, const uint8_t *labels, int batch,
                                        int classes) {
    for (int b = blockIdx.x * blockDim.x + threadIdx.x; b < batch; b += gridDim.x * blockDim.x) {
        const float *in = x + (int64_t)b * classes;
        float *out = logp + (int64_t)b * classes;
        float max = in[0];
        for (int c = 1; c < classes; c++) max = fmaxf(max, in[c]);
        float sum = 0.0f;
        for (int c = 0; c < classes; c++) sum += expf(in[c] - max);
        float log_sum = max + logf(sum);
        for (int c = 0; c < classes; c++) out[c] = in[c] - log_sum;
        if (labels) row_loss[b] = labels[b] < classes ? -out[labels[b]] : nanf("");
    }
}

// The mean of the row losses in one block, in a fixed order.
__global__ static void mean_rows(float *loss, const float *row_loss, int batch) {
    __shared__ float partial[HW_THREADS];
    float sum = 0.0f;
    for (int b = threadIdx.x; b < batch; b += blockDim.x) sum += row_loss[b];
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) *loss = partial[0] / (float)batch;
}

__global__ static void nll_backward(float *dx, const float *logp, const uint8_t *labels, int batch, int classes) {
    int64_t n = (int64_t)batch * classes;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int c = (int)(i % classes);
        int64_t b = i / classes;
        dx[i] = (expf(logp[i]) - (labels[b] == c ? 1.0f : 0.0f)) / (float)batch;
    }
}

__global__ static void count_correct(int32_t *count, const float *logp, const uint8_t *labels, int batch, int classes) {
    for (int b = blockIdx.x * blockDim.x + threadIdx.x; b < batch; b += gridDim.x * blockDim.x) {
        const float *row = logp + (int64_t)b * classes;
        int best = 0;
        for (int c = 1; c < classes; c++) {
            if (row[c] > row[best]) best = c;  // the first maximum, as torch.argmax
        }
        if (best == labels[b]) atomicAdd(count, 1);
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

extern "C" int hw_cuda_count_correct(hw_cuda_stream stream, int32_t *count_dev, const float *logp,
                                     const uint8_t *labels, int batch, int classes) {
    if (batch <= 0) return HW_OK;
    count_correct<<<hw_blocks(batch), HW_THREADS, 0, stream>>>(count_dev, logp, labels, batch, classes);
    HW_CHECK(cudaGetLastError());
    return HW_OK;
}
