// device: device selection, device and pinned memory, streams, events, copies, CUDA IPC.
#include "check.cuh"
#include "device.h"

extern "C" {
#include "hw/option.h"  // hw_option_hint: option.h has no C++ guards of its own
}

#include <stdio.h>
#include <string.h>

static const size_t MIB = 1024 * 1024;

extern "C" int hw_cuda_device_count(int *count) {
    *count = 0;
    int n = 0;
    cudaError_t status = cudaGetDeviceCount(&n);
    if (status != cudaSuccess) {
        cudaGetLastError();  // clear it, so that it does not resurface in a later unrelated check
        // The runtime says "driver insufficient" both with no driver at all and with one too old
        // for it; the driver's own version tells the two apart.
        int driver = 0, runtime = 0;
        cudaDriverGetVersion(&driver);
        cudaRuntimeGetVersion(&runtime);
        if (status == cudaErrorInsufficientDriver && driver == 0) {
            return hw_fail("no CUDA device found: no NVIDIA driver is installed (cudaGetDeviceCount)");
        }
        if (status == cudaErrorInsufficientDriver) {
            return hw_fail("no CUDA device found: the NVIDIA driver supports CUDA %d.%d, this build needs CUDA %d.%d "
                           "(update the driver, or build with an older CUDA toolkit)",
                           driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);
        }
        return hw_fail("no CUDA device found: %s (cudaGetDeviceCount)", cudaGetErrorString(status));
    }
    if (n == 0) return hw_fail("no CUDA device found: the driver reports 0 devices (is CUDA_VISIBLE_DEVICES empty?)");
    *count = n;
    return HW_OK;
}

extern "C" int hw_cuda_select(hw_device device) {
    char name[32];
    hw_device_format(device, name, sizeof name);
    if (device.type != HW_DEVICE_CUDA) return hw_fail("%s is not a CUDA device (expected cuda or cuda:N)", name);
    int count = 0;
    if (hw_cuda_device_count(&count) != HW_OK) return HW_ERR;
    if (device.index < 0 || device.index >= count) {
        return hw_fail("%s does not exist: this machine has %d CUDA device(s)", name, count);
    }
    HW_CHECK(cudaSetDevice(device.index));
    // A GPU older than the architectures this binary was built for (Makefile: CUDA_ARCH) would
    // fail every kernel launch; asking for a kernel's attributes tells it here, by name. Asked once
    // per device and process: DataParallel selects its replicas' devices at every step.
    static unsigned char runnable[256];
    if (device.index < (int)sizeof runnable && runnable[device.index]) return HW_OK;
    cudaError_t status = cuda_kernels_runnable();  // kernels.cu
    if (status == cudaSuccess && device.index < (int)sizeof runnable) runnable[device.index] = 1;
    if (status != cudaSuccess) {
        cudaGetLastError();
        cudaDeviceProp prop;
        if (cudaGetDeviceProperties(&prop, device.index) != cudaSuccess) prop.major = prop.minor = 0;
        return hw_fail("%s (sm_%d%d) cannot run hogwild's kernels: %s (rebuild with CUDA_ARCH for this GPU, "
                       "see the Makefile)",
                       name, prop.major, prop.minor, cudaGetErrorString(status));
    }
    return HW_OK;
}

extern "C" int hw_cuda_mem_info(size_t *free_bytes, size_t *total_bytes) {
    HW_CHECK(cudaMemGetInfo(free_bytes, total_bytes));
    return HW_OK;
}

extern "C" int hw_cuda_check_free(size_t bytes) {
    int device = 0;
    size_t free_bytes = 0, total_bytes = 0;
    HW_CHECK(cudaGetDevice(&device));
    HW_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    if (free_bytes < bytes) {
        return hw_fail("cuda:%d has %zu MiB free, %zu MiB needed", device, free_bytes / MIB, (bytes + MIB - 1) / MIB);
    }
    return HW_OK;
}

extern "C" int hw_cuda_check_shared_use(hw_device device) {
    int mode = cudaComputeModeDefault;
    HW_CHECK(cudaDeviceGetAttribute(&mode, cudaDevAttrComputeMode, device.index));
    if (mode == cudaComputeModeDefault) return HW_OK;
    const char *name = mode == cudaComputeModeExclusiveProcess ? "EXCLUSIVE_PROCESS"
                       : mode == cudaComputeModeProhibited     ? "PROHIBITED"
                                                               : "EXCLUSIVE_THREAD";
    return hw_fail("cuda:%d is in %s compute mode, which lets only one process (or none) use it, but GPU Hogwild "
                   "runs the parent and every worker on it: use DataParallel there%s, or set the default mode "
                   "(nvidia-smi -i %d -c DEFAULT)",
                   device.index, name, hw_option_hint(HW_OPTION_MODE), device.index);
}

extern "C" int hw_cuda_describe(hw_device device, char *buf, size_t cap) {
    if (hw_cuda_select(device) != HW_OK) return HW_ERR;
    cudaDeviceProp prop;
    HW_CHECK(cudaGetDeviceProperties(&prop, device.index));
    snprintf(buf, cap, "%s (cuda:%d, %.1f GiB, sm_%d%d)", prop.name, device.index,
             (double)prop.totalGlobalMem / (1024.0 * MIB), prop.major, prop.minor);
    return HW_OK;
}

// ---- memory ----

extern "C" int hw_cuda_malloc(void **ptr, size_t bytes) {
    *ptr = NULL;
    if (bytes == 0) return HW_OK;
    cudaError_t status = cudaMalloc(ptr, bytes);
    if (status != cudaSuccess) {
        cudaGetLastError();
        *ptr = NULL;
        int device = -1;
        size_t free_bytes = 0, total_bytes = 0;
        cudaGetDevice(&device);
        cudaMemGetInfo(&free_bytes, &total_bytes);
        return hw_fail("cudaMalloc of %zu MiB on cuda:%d failed at %s:%d: %s (%zu MiB free)", (bytes + MIB - 1) / MIB,
                       device, __FILE__, __LINE__, cudaGetErrorString(status), free_bytes / MIB);
    }
    return HW_OK;
}

extern "C" void hw_cuda_free(void *ptr) {
    if (ptr) cudaFree(ptr);
    cudaGetLastError();  // a failure on a cleanup path must not surface in a later check
}

extern "C" int hw_cuda_memset(void *ptr, int value, size_t bytes, hw_cuda_stream stream) {
    if (bytes == 0) return HW_OK;
    HW_CHECK(cudaMemsetAsync(ptr, value, bytes, stream));
    return HW_OK;
}

extern "C" int hw_cuda_host_alloc(void **ptr, size_t bytes) {
    *ptr = NULL;
    if (bytes == 0) return HW_OK;
    // Portable: pinned for every device, so a DataParallel process can stage for all of them.
    HW_CHECK(cudaHostAlloc(ptr, bytes, cudaHostAllocPortable));
    return HW_OK;
}

extern "C" void hw_cuda_host_free(void *ptr) {
    if (ptr) cudaFreeHost(ptr);
    cudaGetLastError();
}

// ---- streams and events ----

extern "C" int hw_cuda_stream_create(hw_cuda_stream *stream) {
    HW_CHECK(cudaStreamCreateWithFlags(stream, cudaStreamNonBlocking));
    return HW_OK;
}

extern "C" void hw_cuda_stream_destroy(hw_cuda_stream stream) {
    if (stream) cudaStreamDestroy(stream);
    cudaGetLastError();
}

extern "C" int hw_cuda_stream_sync(hw_cuda_stream stream) {
    HW_CHECK(cudaStreamSynchronize(stream));
    return HW_OK;
}

extern "C" int hw_cuda_event_create(hw_cuda_event *event, int timing) {
    HW_CHECK(cudaEventCreateWithFlags(event, timing ? cudaEventDefault : cudaEventDisableTiming));
    return HW_OK;
}

extern "C" void hw_cuda_event_destroy(hw_cuda_event event) {
    if (event) cudaEventDestroy(event);
    cudaGetLastError();
}

extern "C" int hw_cuda_event_record(hw_cuda_event event, hw_cuda_stream stream) {
    HW_CHECK(cudaEventRecord(event, stream));
    return HW_OK;
}

extern "C" int hw_cuda_stream_wait_event(hw_cuda_stream stream, hw_cuda_event event) {
    HW_CHECK(cudaStreamWaitEvent(stream, event, 0));
    return HW_OK;
}

extern "C" int hw_cuda_event_sync(hw_cuda_event event) {
    HW_CHECK(cudaEventSynchronize(event));
    return HW_OK;
}

extern "C" int hw_cuda_event_elapsed_ms(hw_cuda_event start, hw_cuda_event end, float *ms) {
    HW_CHECK(cudaEventElapsedTime(ms, start, end));
    return HW_OK;
}

// ---- copies ----

extern "C" int hw_cuda_memcpy_h2d(void *dst_dev, const void *src_host, size_t bytes, hw_cuda_stream stream) {
    if (bytes == 0) return HW_OK;
    HW_CHECK(cudaMemcpyAsync(dst_dev, src_host, bytes, cudaMemcpyHostToDevice, stream));
    return HW_OK;
}

extern "C" int hw_cuda_memcpy_d2h(void *dst_host, const void *src_dev, size_t bytes, hw_cuda_stream stream) {
    if (bytes == 0) return HW_OK;
    HW_CHECK(cudaMemcpyAsync(dst_host, src_dev, bytes, cudaMemcpyDeviceToHost, stream));
    return HW_OK;
}

extern "C" int hw_cuda_memcpy_d2d(void *dst_dev, const void *src_dev, size_t bytes, hw_cuda_stream stream) {
    if (bytes == 0) return HW_OK;
    HW_CHECK(cudaMemcpyAsync(dst_dev, src_dev, bytes, cudaMemcpyDeviceToDevice, stream));
    return HW_OK;
}

// ---- IPC ----

static_assert(sizeof(cudaIpcMemHandle_t) == sizeof(hw_cuda_ipc_handle),
              "hw_cuda_ipc_handle holds a cudaIpcMemHandle_t");

extern "C" int hw_cuda_ipc_export(const void *dev_ptr, hw_cuda_ipc_handle *handle) {
    cudaIpcMemHandle_t h;
    HW_CHECK(cudaIpcGetMemHandle(&h, const_cast<void *>(dev_ptr)));
    memcpy(handle->bytes, &h, sizeof h);
    return HW_OK;
}

extern "C" int hw_cuda_ipc_open(const hw_cuda_ipc_handle *handle, void **dev_ptr) {
    cudaIpcMemHandle_t h;
    memcpy(&h, handle->bytes, sizeof h);
    *dev_ptr = NULL;
    HW_CHECK(cudaIpcOpenMemHandle(dev_ptr, h, cudaIpcMemLazyEnablePeerAccess));
    return HW_OK;
}

extern "C" int hw_cuda_ipc_close(void *dev_ptr) {
    HW_CHECK(cudaIpcCloseMemHandle(dev_ptr));
    return HW_OK;
}
