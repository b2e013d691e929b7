// device: the GPU backend's devices, device and pinned memory, streams, events, copies and CUDA
// IPC handles (device.cu). Private to src/cuda/ (the backend, the GPU trainers of cuda/train/) and
// the tests: the rest of hogwild reaches the GPU part only through its entry table
// (include/hw/gpu_train.h).
//
// Device semantics follow PyTorch: a device is "cpu" or "cuda:N" (hw_device, shape.h); a
// process works on one selected CUDA device at a time (hw_cuda_select); memory belongs to the
// device it was allocated on; copies between host and device are explicit.
//
// CUDA and fork: a process that has initialised CUDA cannot hand CUDA to a child it forks. Every
// function of the backend initialises CUDA, so a trainer forks its workers FIRST and only then
// calls into it (see docs/ARCHITECTURE.md).
//
// Every CUDA, cuBLAS and NCCL call of the backend is checked; a failure returns HW_ERR with a
// message naming the call, file:line and the library's error string (hw_error(), check.cuh).
//
// The types below are the CUDA runtime's own handle types (cudaStream_t is struct CUstream_st *,
// cudaEvent_t is struct CUevent_st *), named without including the CUDA headers so that this
// header compiles in plain C, where CUDA's headers are not seen.
#ifndef HW_CUDA_DEVICE_H
#define HW_CUDA_DEVICE_H

#include <stddef.h>

// shape.h has no C++ guards of its own: the .cu files see it through this block.
#ifdef __cplusplus
extern "C" {
#endif

#include "hw/shape.h"

typedef struct CUstream_st *hw_cuda_stream;  // = cudaStream_t; NULL is the legacy default stream
typedef struct CUevent_st *hw_cuda_event;    // = cudaEvent_t

// ---- devices ----
// Number of CUDA devices. Fails with "no CUDA device found: <reason>" when there is none (no
// driver, no GPU, or CUDA_VISIBLE_DEVICES hides them all); *count is 0 then.
int hw_cuda_device_count(int *count);
// Makes `device` (cuda:N) current for the calling thread. Fails on cpu, on an index that does not
// exist ("cuda:3 does not exist: this machine has 1 CUDA device(s)") and with no GPU at all.
int hw_cuda_select(hw_device device);
// The current device's free and total memory in bytes.
int hw_cuda_mem_info(size_t *free_bytes, size_t *total_bytes);
// Fails when the current device has less than `bytes` free ("cuda:0 has 120 MiB free, 300 MiB needed").
int hw_cuda_check_free(size_t bytes);
// Fails, naming the mode, when `device`'s compute mode (nvidia-smi -c) lets fewer than two
// processes use it at once (EXCLUSIVE_PROCESS, PROHIBITED): GPU Hogwild needs the parent and
// every worker on it.
int hw_cuda_check_shared_use(hw_device device);
// "NVIDIA H200 (cuda:0, 139.8 GiB, sm_90)" into buf.
int hw_cuda_describe(hw_device device, char *buf, size_t cap);

// ---- device memory (on the current device) ----
int hw_cuda_malloc(void **ptr, size_t bytes);
void hw_cuda_free(void *ptr);  // NULL is fine; errors are ignored (called on cleanup paths)
int hw_cuda_memset(void *ptr, int value, size_t bytes, hw_cuda_stream stream);

// ---- pinned (page-locked) host memory: the source and target of asynchronous copies ----
int hw_cuda_host_alloc(void **ptr, size_t bytes);
void hw_cuda_host_free(void *ptr);

// ---- streams and events ----
// A stream that does not synchronise with the legacy default stream.
int hw_cuda_stream_create(hw_cuda_stream *stream);
void hw_cuda_stream_destroy(hw_cuda_stream stream);
int hw_cuda_stream_sync(hw_cuda_stream stream);
// timing = 0 creates a lighter event that only orders work (cudaEventDisableTiming).
int hw_cuda_event_create(hw_cuda_event *event, int timing);
void hw_cuda_event_destroy(hw_cuda_event event);
int hw_cuda_event_record(hw_cuda_event event, hw_cuda_stream stream);
// Work queued on `stream` after this call waits for the event (the host does not wait).
int hw_cuda_stream_wait_event(hw_cuda_stream stream, hw_cuda_event event);
int hw_cuda_event_sync(hw_cuda_event event);
// Milliseconds between two recorded, completed timing events.
int hw_cuda_event_elapsed_ms(hw_cuda_event start, hw_cuda_event end, float *ms);

// ---- copies, asynchronous on `stream` (host memory should be pinned for real overlap) ----
int hw_cuda_memcpy_h2d(void *dst_dev, const void *src_host, size_t bytes, hw_cuda_stream stream);
int hw_cuda_memcpy_d2h(void *dst_host, const void *src_dev, size_t bytes, hw_cuda_stream stream);
int hw_cuda_memcpy_d2d(void *dst_dev, const void *src_dev, size_t bytes, hw_cuda_stream stream);

// ---- CUDA IPC: one device allocation shared by several processes ----
// The handle is plain bytes: it can be written into host shared memory and read by another
// process, which opens it to get its own pointer to the same device memory.
typedef struct {
    unsigned char bytes[64];  // cudaIpcMemHandle_t
} hw_cuda_ipc_handle;

// `dev_ptr` must be the start of a hw_cuda_malloc allocation.
int hw_cuda_ipc_export(const void *dev_ptr, hw_cuda_ipc_handle *handle);
// Opens a handle exported by ANOTHER process (IPC is between processes), with peer access
// enabled lazily when the memory is on another device than the current one.
int hw_cuda_ipc_open(const hw_cuda_ipc_handle *handle, void **dev_ptr);
// Every process that opened a handle closes it BEFORE the exporting process frees the memory
// (CUDA leaves a free before the close undefined).
int hw_cuda_ipc_close(void *dev_ptr);

#ifdef __cplusplus
}
#endif

#endif
