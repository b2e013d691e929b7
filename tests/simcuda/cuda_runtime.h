// The simulated CUDA device's cuda_runtime.h: the part of the CUDA runtime API that hogwild's host
// code uses (src/cuda/runner.cu, device.cu, blas.cu, allreduce.cu, ranks.cu), implemented on the host by
// runtime.c. For tests only: `make sim` compiles that code against this header instead of the
// toolkit's. Names, types and values follow the real header where the code relies on them.
#ifndef HW_SIMCUDA_RUNTIME_H
#define HW_SIMCUDA_RUNTIME_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInitializationError = 3,
    cudaErrorInvalidDevice = 101,
    cudaErrorInvalidDevicePointer = 17,
    cudaErrorInvalidMemcpyDirection = 21,
    cudaErrorInsufficientDriver = 35,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorNotReady = 600,
    cudaErrorPeerAccessAlreadyEnabled = 704,
    cudaErrorPeerAccessNotEnabled = 705,
    cudaErrorMapBufferObjectFailed = 205,
    cudaErrorIllegalAddress = 700,
    cudaErrorAssert = 710,
    cudaErrorIllegalInstruction = 715,
    cudaErrorMisalignedAddress = 716,
    cudaErrorLaunchFailure = 719,
    cudaErrorNoKernelImageForDevice = 209,
    cudaErrorNotSupported = 801,
} cudaError_t;

typedef enum {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4,
} cudaMemcpyKind;

typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;

// CUDA graphs: the types the runner names. The simulated device captures no graphs
// (cudaStreamBeginCapture answers cudaErrorNotSupported), so the rest is never reached.
typedef struct CUgraph_st *cudaGraph_t;
typedef struct CUgraphExec_st *cudaGraphExec_t;
typedef struct CUgraphNode_st *cudaGraphNode_t;
typedef enum { cudaStreamCaptureModeGlobal = 0, cudaStreamCaptureModeThreadLocal = 1 } cudaStreamCaptureMode;
typedef enum { cudaGraphNodeTypeKernel = 0 } cudaGraphNodeType;
typedef struct {
    unsigned x, y, z;
} dim3;
typedef struct {
    void *func;
    dim3 gridDim, blockDim;
    unsigned sharedMemBytes;
    void **kernelParams;
    void **extra;
} cudaKernelNodeParams;

typedef struct {
    char reserved[64];
} cudaIpcMemHandle_t;

typedef struct {
    char name[256];
    size_t totalGlobalMem;
    int major, minor;
    int multiProcessorCount;
} cudaDeviceProp;

enum cudaComputeMode {
    cudaComputeModeDefault = 0,
    cudaComputeModeExclusive = 1,
    cudaComputeModeProhibited = 2,
    cudaComputeModeExclusiveProcess = 3,
};

enum cudaDeviceAttr {
    cudaDevAttrComputeMode = 20,
};

typedef struct {
    int maxThreadsPerBlock;
    int numRegs;
} cudaFuncAttributes;

enum {
    cudaStreamDefault = 0,
    cudaStreamNonBlocking = 1,
    cudaEventDefault = 0,
    cudaEventBlockingSync = 1,
    cudaEventDisableTiming = 2,
    cudaHostAllocDefault = 0,
    cudaHostAllocPortable = 1,
    cudaIpcMemLazyEnablePeerAccess = 1,
};

const char *cudaGetErrorString(cudaError_t error);
cudaError_t cudaGetLastError(void);
cudaError_t cudaDriverGetVersion(int *version);
cudaError_t cudaRuntimeGetVersion(int *version);
cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device);
cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device);
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaDeviceCanAccessPeer(int *can, int device, int peer);
cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned flags);

cudaError_t cudaMalloc(void **ptr, size_t bytes);
cudaError_t cudaFree(void *ptr);
cudaError_t cudaHostAlloc(void **ptr, size_t bytes, unsigned flags);
cudaError_t cudaFreeHost(void *ptr);
cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes, cudaStream_t stream);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream);
cudaError_t cudaMemcpyPeer(void *dst, int dst_device, const void *src, int src_device, size_t bytes);
cudaError_t cudaMemcpyPeerAsync(void *dst, int dst_device, const void *src, int src_device, size_t bytes,
                                cudaStream_t stream);

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamQuery(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end);

cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *ptr);
cudaError_t cudaIpcOpenMemHandle(void **ptr, cudaIpcMemHandle_t handle, unsigned flags);
cudaError_t cudaIpcCloseMemHandle(void *ptr);

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *count);
cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, cudaGraphNodeType *type);
cudaError_t cudaGraphKernelNodeGetParams(cudaGraphNode_t node, cudaKernelNodeParams *params);
cudaError_t cudaGraphExecKernelNodeSetParams(cudaGraphExec_t exec, cudaGraphNode_t node,
                                             const cudaKernelNodeParams *params);

// The real cudaFuncGetAttributes takes a kernel; the simulated kernels are host functions
// (tests/simcuda/kernels.c), which answer for themselves (cuda_kernels_runnable).
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes *attributes, const void *kernel);

// ---- for the simulated kernels (tests/simcuda/kernels.c), not part of CUDA ----
// The bytes a kernel reads (writes = 0) or writes at ptr (NULL with 0 bytes: not used by this launch).
typedef struct {
    const void *ptr;
    size_t bytes;
    int writes;
} hw_sim_span;
// Checks that a kernel may run on `stream` (a live stream of the current device, or the legacy
// one) touching `spans` (each inside device memory the current device can reach: its own, a peer's
// with peer access enabled, memory opened by IPC, or pinned host memory, and ordered after every
// other stream's conflicting access to it). cudaSuccess, or the error a real launch would give
// (also left for cudaGetLastError), with the misuse on stderr.
cudaError_t hw_sim_launch_check(cudaStream_t stream, const hw_sim_span *spans, int n_spans);

#ifdef __cplusplus
}
#endif

#endif
