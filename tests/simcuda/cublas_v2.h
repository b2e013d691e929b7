// The simulated CUDA device's cublas_v2.h: the cuBLAS calls of src/cuda/blas.cu, implemented in
// runtime.c with OpenBLAS's column-major cblas_sgemm, run at once on the host. For tests only.
#ifndef HW_SIMCUDA_CUBLAS_H
#define HW_SIMCUDA_CUBLAS_H

#include "cuda_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_EXECUTION_FAILED = 13,
} cublasStatus_t;

typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;
typedef enum { CUBLAS_DEFAULT_MATH = 0, CUBLAS_TF32_TENSOR_OP_MATH = 3 } cublasMath_t;

typedef struct cublasContext *cublasHandle_t;

cublasStatus_t cublasCreate(cublasHandle_t *handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode);
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream);
const char *cublasGetStatusString(cublasStatus_t status);
cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t trans_a, cublasOperation_t trans_b, int m, int n,
                           int k, const float *alpha, const float *a, int lda, const float *b, int ldb,
                           const float *beta, float *c, int ldc);
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t trans_a, cublasOperation_t trans_b,
                                         int m, int n, int k, const float *alpha, const float *a, int lda,
                                         long long stride_a, const float *b, int ldb, long long stride_b,
                                         const float *beta, float *c, int ldc, long long stride_c, int batch_count);

#ifdef __cplusplus
}
#endif

#endif
