// gpu_shapes: times LeNet's convolution GEMMs and bias reductions on cuda:0 at the shapes the
// trainer gives cuBLAS (batch 64 and 512), each as one plain call and in the candidates that
// might replace it, so that one GPU session decides (issue 25; its results chose the split
// weight-gradient GEMM and the chunked bias sum of src/cuda/):
//   - a plain cublasSgemm, row-major as hw_cuda_sgemm maps it;
//   - the weight gradients (tiny M and N, K = batch x output positions) split over K into S
//     strided-batched GEMMs whose partials one small kernel sums in a fixed order;
//   - the bias gradient: one block per channel (sum_rows today) against a two-pass sum over
//     chunks of each row.
// Prints one line per variant: shape, median microseconds of 50 timed runs (CUDA events, after 5
// warm-ups), GFLOP/s or GB/s, and the largest relative difference from the plain version.
//
//   make build/bench_gpu_shapes && build/bench_gpu_shapes
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <vector>

#define CK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)
#define CB(x)                                                                                     \
    do {                                                                                          \
        cublasStatus_t s_ = (x);                                                                  \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                        \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cublasGetStatusString(s_)); \
            exit(1);                                                                              \
        }                                                                                         \
    } while (0)

static cublasHandle_t blas;

// Row-major C[m,n] = op(A) op(B) through column-major cuBLAS: C^T = op(B)^T op(A)^T.
static void gemm_rm(int ta, int tb, int m, int n, int k, const float *a, const float *b, float *c) {
    float one = 1, zero = 0;
    CB(cublasSgemm(blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &one, b, tb ? k : n,
                   a, ta ? m : k, &zero, c, n));
}

// Row-major dw[m,n] = t[m,k] col[n,k]^T, split into s chunks of k: partial[s][m][n], then summed.
__global__ void sum_partials(float *out, const float *partial, int count, int s) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count) return;
    float total = 0;
    for (int j = 0; j < s; j++) total += partial[(size_t)j * count + i];
    out[i] = total;
}

static void gemm_nt_splitk(int m, int n, int k, int s, const float *t, const float *col, float *partial, float *dw) {
    float one = 1, zero = 0;
    int kc = k / s;
    // column-major: dw^T[n,m] = col'[n,k] (col row-major [n,k] is col-major [k,n], op T) x t'(op N)
    CB(cublasSgemmStridedBatched(blas, CUBLAS_OP_T, CUBLAS_OP_N, n, m, kc, &one, col, k, kc, t, k, kc, &zero, partial,
                                 n, (long long)m * n, s));
    sum_partials<<<(m * n + 255) / 256, 256>>>(dw, partial, m * n, s);
    CK(cudaGetLastError());
}

// sum_rows today: one block of 256 per row.
__global__ void sum_rows_block(float *out, const float *m, long cols) {
    __shared__ float partial[256];
    const float *row = m + blockIdx.x * cols;
    float total = 0;
    for (long c = threadIdx.x; c < cols; c += blockDim.x) total += row[c];
    partial[threadIdx.x] = total;
    __syncthreads();
    for (int half = 128; half > 0; half /= 2) {
        if ((int)threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = partial[0];
}

// Two passes: grid (chunks, rows) of 256 threads, each block one chunk of a row; then per row.
__global__ void sum_rows_chunks(float *partial, const float *m, long cols, long chunk) {
    __shared__ float part[256];
    const float *row = m + blockIdx.y * cols;
    long begin = blockIdx.x * chunk, end = min(cols, begin + chunk);
    float total = 0;
    for (long c = begin + threadIdx.x; c < end; c += blockDim.x) total += row[c];
    part[threadIdx.x] = total;
    __syncthreads();
    for (int half = 128; half > 0; half /= 2) {
        if ((int)threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.y * gridDim.x + blockIdx.x] = part[0];
}

template <class F>
static float median_us(F f) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = 0; i < 5; i++) f();
    std::vector<float> ms;
    for (int i = 0; i < 50; i++) {
        CK(cudaEventRecord(a));
        f();
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float t;
        CK(cudaEventElapsedTime(&t, a, b));
        ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2] * 1000;
}

static float *random_buffer(size_t n) {
    std::vector<float> h(n);
    for (auto &v : h) v = (float)rand() / RAND_MAX - 0.5f;
    float *d;
    CK(cudaMalloc(&d, n * sizeof(float)));
    CK(cudaMemcpy(d, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    return d;
}

static double max_rel(const float *da, const float *db, size_t n) {
    std::vector<float> a(n), b(n);
    CK(cudaMemcpy(a.data(), da, n * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(b.data(), db, n * 4, cudaMemcpyDeviceToHost));
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) num += (a[i] - b[i]) * (double)(a[i] - b[i]), den += (double)b[i] * b[i];
    return std::sqrt(num / (den > 0 ? den : 1));
}

int main(void) {
    CB(cublasCreate(&blas));
    CB(cublasSetMathMode(blas, CUBLAS_DEFAULT_MATH));
    struct conv {
        const char *name;
        int oc, rows, positions;  // rows = C*K*K, positions = OH*OW
    } convs[] = {{"conv1", 10, 25, 576}, {"conv2", 20, 250, 64}};
    for (int batch : {64, 512}) {
        for (auto c : convs) {
            long k = (long)batch * c.positions;  // the GEMM's columns
            float *w = random_buffer((size_t)c.oc * c.rows), *col = random_buffer((size_t)c.rows * k);
            float *t = random_buffer((size_t)c.oc * k), *out = random_buffer((size_t)c.rows * k);
            float *dw = random_buffer((size_t)c.oc * c.rows), *dw2 = random_buffer((size_t)c.oc * c.rows);
            float *partial = random_buffer((size_t)512 * c.oc * c.rows);
            double flop = 2.0 * c.oc * c.rows * k;
            printf("b%d %s: oc %d rows %d columns %ld\n", batch, c.name, c.oc, c.rows, k);
            float us = median_us([&] { gemm_rm(0, 0, c.oc, (int)k, c.rows, w, col, t); });
            printf("  forward  t = w col        %8.1f us  %7.0f GFLOP/s\n", us, flop / us / 1e3);
            us = median_us([&] { gemm_rm(1, 0, c.rows, (int)k, c.oc, w, t, out); });
            printf("  backward dcol = w^T t     %8.1f us  %7.0f GFLOP/s\n", us, flop / us / 1e3);
            us = median_us([&] { gemm_rm(0, 1, c.oc, c.rows, (int)k, t, col, dw); });
            printf("  backward dw = t col^T     %8.1f us  %7.0f GFLOP/s\n", us, flop / us / 1e3);
            for (int s : {8, 32, 64, 128, 256, 512}) {
                if (k % s) continue;
                us = median_us([&] { gemm_nt_splitk(c.oc, c.rows, (int)k, s, t, col, partial, dw2); });
                printf("  dw split-K S=%-4d          %8.1f us  %7.0f GFLOP/s  rel diff %.1e\n", s, us, flop / us / 1e3,
                       max_rel(dw2, dw, (size_t)c.oc * c.rows));
            }
            double bytes = 4.0 * c.oc * k;
            us = median_us([&] { sum_rows_block<<<c.oc, 256>>>(dw, t, k); });
            printf("  dbias one block per row   %8.1f us  %7.0f GB/s\n", us, bytes / us / 1e3);
            for (long chunk : {2048L, 8192L, 32768L}) {
                long chunks = (k + chunk - 1) / chunk;
                us = median_us([&] {
                    sum_rows_chunks<<<dim3((unsigned)chunks, c.oc), 256>>>(partial, t, k, chunk);
                    sum_partials<<<1, 256>>>(dw2, partial, 0, 0);  // the second pass's launch, for its cost
                });
                printf("  dbias chunks of %-6ld     %8.1f us  %7.0f GB/s\n", chunk, us, bytes / us / 1e3);
            }
            CK(cudaGetLastError());
            for (float *p : {w, col, t, out, dw, dw2, partial}) CK(cudaFree(p));
        }
    }
    CK(cudaDeviceSynchronize());
    return 0;
}
