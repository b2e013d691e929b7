// blas: cuBLAS handles and the row-major SGEMM wrapper (the CPU BLAS is src/blas.c).
#include "blas.h"
#include "check.cuh"
#include "kernels.cuh"
#include "launch.h"

extern "C" int hw_cublas_create(hw_cublas *handle, hw_cuda_stream stream) {
    cublasHandle_t h = NULL;
    HW_CHECK(cublasCreate(&h));
    *handle = h;
    // Plain FP32: no TF32 tensor-core rounding, so GPU results match the CPU layers.
    cublasStatus_t status = cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
    if (status == CUBLAS_STATUS_SUCCESS) status = cublasSetStream(h, stream);
    if (status != CUBLAS_STATUS_SUCCESS) {
        cublasDestroy(h);
        *handle = NULL;
        return hw_fail("cublasSetMathMode/cublasSetStream failed at %s:%d: %s", __FILE__, __LINE__,
                       cublasGetStatusString(status));
    }
    return HW_OK;
}

extern "C" void hw_cublas_destroy(hw_cublas handle) {
    if (handle) cublasDestroy(handle);
}

extern "C" int hw_cuda_sgemm(hw_cublas handle, int trans_a, int trans_b, int m, int n, int k, float alpha,
                             const float *a, const float *b, float beta, float *c) {
    if (m < 0 || n < 0 || k < 0) return hw_fail("hw_cuda_sgemm: negative size (m=%d, n=%d, k=%d)", m, n, k);
    if (m == 0 || n == 0) return HW_OK;
    col_major_gemm g = col_major_gemm_of(trans_a, trans_b, m, n, k, a, b);  // kernels.cuh
    cublasOperation_t op_first = g.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t op_second = g.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N;
    launch_counted();  // one, though cuBLAS may split a GEMM into more kernels
    HW_CHECK(cublasSgemm(handle, op_first, op_second, g.m, g.n, g.k, &alpha, g.first, g.ld_first, g.second, g.ld_second,
                         &beta, c, g.ldc));
    return HW_OK;
}

extern "C" int hw_cuda_sgemm_nt_split_k(hw_cublas handle, int m, int n, int k, int splits, const float *a,
                                        const float *b, float *partial) {
    if (m <= 0 || n <= 0 || k <= 0 || splits <= 0 || k % splits != 0) {
        return hw_fail("hw_cuda_sgemm_nt_split_k: bad sizes (m=%d, n=%d, k=%d, splits=%d)", m, n, k, splits);
    }
    int chunk = k / splits;
    float one = 1.0f, zero = 0.0f;
    launch_counted();
    // As col_major_gemm_of maps a row-major A B^T (B first, transposed; A second; both with
    // leading dimension k), each batch entry's chunk starting `chunk` floats further along k.
    HW_CHECK(cublasSgemmStridedBatched(handle, CUBLAS_OP_T, CUBLAS_OP_N, n, m, chunk, &one, b, k, chunk, a, k, chunk,
                                       &zero, partial, n, (long long)m * n, splits));
    return HW_OK;
}
