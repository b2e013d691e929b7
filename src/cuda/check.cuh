// check.cuh: the CUDA module's one checking macro (llm.c's cudaCheck, returning instead of
// exiting), the grid-stride loop and the kernel launch sizes. Private to src/cuda/.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#ifdef HW_HAVE_NCCL
#include <nccl.h>
#endif

extern "C" {
#include "hw/err.h"
}
#include "kernels.cuh"  // HW_THREADS

// The three libraries report failure with their own status types; one overload each gives the
// macro below whether a status is a failure and the library's own words for it.
static inline bool hw_status_failed(cudaError_t status) { return status != cudaSuccess; }
static inline const char *hw_status_string(cudaError_t status) { return cudaGetErrorString(status); }
static inline bool hw_status_failed(cublasStatus_t status) { return status != CUBLAS_STATUS_SUCCESS; }
static inline const char *hw_status_string(cublasStatus_t status) { return cublasGetStatusString(status); }
#ifdef HW_HAVE_NCCL
static inline bool hw_status_failed(ncclResult_t status) { return status != ncclSuccess; }
static inline const char *hw_status_string(ncclResult_t status) { return ncclGetErrorString(status); }
static inline const char *hw_status_hint(ncclResult_t) { return ""; }
#endif
static inline const char *hw_status_hint(cublasStatus_t) { return ""; }

// Kernels run asynchronously, so a kernel's fault is reported by whichever later call looks
// first, not by its launch: for those errors the message says how to find the kernel.
static inline const char *hw_status_hint(cudaError_t status) {
    switch (status) {
    case cudaErrorIllegalAddress:
    case cudaErrorMisalignedAddress:
    case cudaErrorIllegalInstruction:
    case cudaErrorAssert:
    case cudaErrorLaunchFailure:
        return " (an earlier kernel failed and this call reported it; rerun with CUDA_LAUNCH_BLOCKING=1 to name "
               "the kernel)";
    default: return "";
    }
}

// Runs a CUDA, cuBLAS or NCCL call; on failure returns HW_ERR from the calling function with
// "<the call> failed at <file>:<line>: <the library's error string>" and, for an asynchronous
// kernel fault, the hint above.
#define HW_CHECK(call)                                                                                          \
    do {                                                                                                        \
        auto hw_status_ = (call);                                                                               \
        if (hw_status_failed(hw_status_)) {                                                                     \
            cudaGetLastError(); /* clear it, or the next launch check would report it again */                  \
            return hw_fail("%s failed at %s:%d: %s%s", #call, __FILE__, __LINE__, hw_status_string(hw_status_), \
                           hw_status_hint(hw_status_));                                                         \
        }                                                                                                       \
    } while (0)

// cudaSuccess when the current device can run this binary's kernels (it has machine code or PTX
// for the device's architecture); the runtime's error otherwise. In kernels.cu, with the kernels.
extern "C" cudaError_t cuda_kernels_runnable(void);

// Kernels use grid-stride loops: the loop below visits every index in [0, n) once, whatever the
// grid, and hw_blocks caps the grid so that any n fits.
#define GRID_STRIDE(i, n) \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

static inline unsigned hw_blocks(int64_t n) {
    int64_t blocks = (n + HW_THREADS - 1) / HW_THREADS;
    return (unsigned)(blocks < 65536 ? blocks : 65536);
}
