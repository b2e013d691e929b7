// blas: cuBLAS for the GPU backend (blas.cu): a handle per stream and the row-major SGEMMs the
// layer operations (layer_ops.c) are made of. Private to src/cuda/ and the tests.
#ifndef HW_CUDA_BLAS_H
#define HW_CUDA_BLAS_H

#include "device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cublasContext *hw_cublas;  // = cublasHandle_t, named without cuBLAS's header

// A handle bound to `stream`: one per stream and per worker (a handle is not shared between
// threads). Math mode is plain FP32 (no TF32), so results match the CPU path to float rounding.
int hw_cublas_create(hw_cublas *handle, hw_cuda_stream stream);
void hw_cublas_destroy(hw_cublas handle);
// Row-major C[m,n] = alpha * op(A) * op(B) + beta * C, op(X) = X or X^T (trans_x != 0), all
// matrices dense: A is [m,k] (or [k,m] transposed), B is [k,n] (or [n,k]). Wraps the column-major
// cublasSgemm by computing C^T = op(B)^T op(A)^T (col_major_gemm_of, kernels.cuh). Asynchronous on
// the handle's stream.
int hw_cuda_sgemm(hw_cublas handle, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                  const float *b, float beta, float *c);
// Row-major partial[s][m, n] = a[m, chunk s of k] b[n, chunk s of k]^T for s < splits (k a multiple
// of splits): one strided-batched cuBLAS call; the caller sums the partials.
int hw_cuda_sgemm_nt_split_k(hw_cublas handle, int m, int n, int k, int splits, const float *a, const float *b,
                             float *partial);

#ifdef __cplusplus
}
#endif

#endif
