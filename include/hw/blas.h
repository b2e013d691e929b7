// blas: the one place that calls a CPU BLAS (OpenBLAS through CBLAS, the serial build).
//
// Row-major everywhere, as in the rest of hogwild. The GPU side (cuBLAS) lives in the cuda module.
// Serial on purpose: a Hogwild worker is one process and one thread, and the threaded OpenBLAS
// would start its thread pool in the parent before fork.
#ifndef HW_BLAS_H
#define HW_BLAS_H

typedef enum { HW_NO_TRANS = 0, HW_TRANS = 1 } hw_blas_trans;

// C[m x n] = alpha * op(A) op(B) + beta * C, row-major. op(A) is m x k (A stored k x m when
// transposed), op(B) is k x n; lda, ldb, ldc are the row strides of A, B, C as stored.
// beta = 0 overwrites C (never reads it: NaN or stale values in C do not leak through).
void hw_sgemm(hw_blas_trans trans_a, hw_blas_trans trans_b, int m, int n, int k, float alpha, const float *a,
              int lda, const float *b, int ldb, float beta, float *c, int ldc);

// "OpenBLAS 0.3.21 ... | Cooperlake": the library's build and the kernel set it picked for this CPU.
const char *hw_blas_info(void);

#endif
