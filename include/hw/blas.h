// blas: the one place that calls a CPU BLAS (OpenBLAS through CBLAS).
//
// Row-major everywhere, as in the rest of hogwild. The GPU side (cuBLAS) lives in the cuda module.
//
// OpenBLAS is loaded at run time (dlopen) by hw_blas_open, because the two choices that matter are
// read from the environment when the library initialises, and both are made here first:
// - the build and its threads: the pthread build, run with ONE thread per caller. It is safe to
//   call from several threads at once (DataParallel's CPU replicas are threads), where the serial
//   build is not: its buffer allocator takes no lock, and concurrent GEMMs corrupt each other's
//   results. One thread per caller means no thread pool, so nothing runs in the parent at fork.
// - the kernels: the fastest the CPU reports (see hw_blas_pick_kernels).
#ifndef HW_BLAS_H
#define HW_BLAS_H

typedef enum { HW_NO_TRANS = 0, HW_TRANS = 1 } hw_blas_trans;

// Loads OpenBLAS once (later calls return at once): picks the kernels, forces one thread per
// caller, checks the build is thread-safe. Call it from the main thread before any other thread or
// worker exists (it sets environment variables); ./hogwild does at start. hw_sgemm loads it on
// first use when nobody did, and exits with the message if that fails. HW_ERR (hw_error() says why,
// naming the library) when no usable OpenBLAS is found.
int hw_blas_open(void);

// C[m x n] = alpha * op(A) op(B) + beta * C, row-major. op(A) is m x k (A stored k x m when
// transposed), op(B) is k x n; lda, ldb, ldc are the row strides of A, B, C as stored.
// beta = 0 overwrites C (never reads it: NaN or stale values in C do not leak through).
void hw_sgemm(hw_blas_trans trans_a, hw_blas_trans trans_b, int m, int n, int k, float alpha, const float *a, int lda,
              const float *b, int ldb, float beta, float *c, int ldc);
// The same in column-major storage (lda, ldb, ldc are column strides), as cuBLAS takes it: the
// simulated cuBLAS of the tests runs on it.
void hw_sgemm_col_major(hw_blas_trans trans_a, hw_blas_trans trans_b, int m, int n, int k, float alpha, const float *a,
                        int lda, const float *b, int ldb, float beta, float *c, int ldc);

// "OpenBLAS 0.3.21 (pthread build, 1 thread per caller), kernels Zen (OpenBLAS's choice for this CPU)":
// the library, its threading, the kernel set in use and who chose it. Loads the library if needed.
const char *hw_blas_info(void);
// The kernel set in use ("Haswell", "SkylakeX", ...), as OpenBLAS names it.
const char *hw_blas_kernels(void);

// The kernel set hogwild asks OpenBLAS for on this CPU, or NULL to leave the choice to OpenBLAS;
// *why says why. OpenBLAS 0.3.21 picks kernels by CPU family and model, so a CPU newer than the
// library (AMD Zen 4) gets its AVX2 Haswell kernels although it has AVX-512; its AVX-512 kernels
// measured 1.5-1.7x faster there. So a CPU that reports AVX-512 (F, CD, DQ, BW, VL) with its state
// enabled by the OS gets "Cooperlake" (with AVX512_BF16) or "SkylakeX"; any other CPU keeps
// OpenBLAS's own choice. OPENBLAS_CORETYPE set by the user always wins.
const char *hw_blas_pick_kernels(const char **why);

#endif
