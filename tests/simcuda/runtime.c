// runtime: the simulated CUDA device's devices, memory, copies and IPC (tests only, `make sim`).
//
// Devices: HW_SIM_DEVICES of them (default 1; 0 behaves as a machine without a GPU), each with
// HW_SIM_MEM_MIB MiB (default 16384), named "simulated CUDA device (host)"; HW_SIM_COMPUTE_MODE
// gives the compute mode cudaDeviceGetAttribute reports. Free memory is what
// this process has not allocated on the device. HW_SIM_NO_KERNEL_IMAGE=1 makes the device refuse
// the kernels, as a GPU older than the build's architectures does.
//
// Memory: every device allocation is a memfd of its own, mapped shared and filled with 0xff bytes
// (NaN floats), so that a read of memory nothing wrote shows. A registry records every allocation
// (device, pinned host, opened by IPC): copies whose kind does not match where the pointers lie,
// ranges past an allocation's end, frees of pointers the simulator did not hand out, and kernels
// touching memory their device cannot reach are refused, as a GPU would punish them, and said on
// stderr and in the file $HW_SIM_REFUSALS names; order.c checks the order of the work. An IPC
// handle holds (owner pid, memfd, size, device); another process opens it by mapping
// /proc/<pid>/fd/<fd>, so the processes truly share the memory, as with CUDA IPC.
#include "sim.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

// ---- the process's state, errors, the fork rule ----

static pid_t started_in;  // the process that started the simulated CUDA (0: not started)
static int n_devices = 1;
static size_t device_bytes = (size_t)16384 << 20;
static int no_kernel_image;
static size_t used[SIM_MAX_DEVICES];
static int peer_enabled[SIM_MAX_DEVICES][SIM_MAX_DEVICES];  // [from][to]
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static _Thread_local int current_device;
static _Thread_local cudaError_t last_error;
static _Thread_local cudaError_t detail_error;  // the error the detail below explains
static _Thread_local char detail[400];
static _Thread_local char error_text[600];

static void set_error(cudaError_t error, const char *fmt, va_list args) {
    last_error = error;
    detail_error = error;
    vsnprintf(detail, sizeof detail, fmt, args);
}

cudaError_t sim_error(cudaError_t error, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    set_error(error, fmt, args);
    va_end(args);
    return error;
}

cudaError_t sim_refuse(cudaError_t error, const char *call, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    set_error(error, fmt, args);
    va_end(args);
    char line[600];
    int n = snprintf(line, sizeof line, "hogwild simulated CUDA: refused %s in process %d: %s\n", call, (int)getpid(),
                     detail);
    fputs(line, stderr);
    // Also into $HW_SIM_REFUSALS (make sim sets it): a refusal in a child whose stderr a test
    // keeps, or one the code ignores (a failed free), is seen there.
    const char *log = getenv("HW_SIM_REFUSALS");
    int fd = log && log[0] ? open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644) : -1;
    if (fd >= 0) {
        ssize_t written = write(fd, line, (size_t)(n < (int)sizeof line ? n : (int)sizeof line - 1));
        (void)written;
        close(fd);
    }
    return error;
}

static int env_int(const char *name, int fallback) {
    const char *text = getenv(name);
    return text && text[0] ? atoi(text) : fallback;
}

cudaError_t sim_enter(const char *call) {
    if (started_in == 0) {
        started_in = getpid();
        n_devices = env_int("HW_SIM_DEVICES", 1);
        if (n_devices < 0) n_devices = 0;
        if (n_devices > SIM_MAX_DEVICES) n_devices = SIM_MAX_DEVICES;
        device_bytes = (size_t)env_int("HW_SIM_MEM_MIB", 16384) << 20;
        no_kernel_image = env_int("HW_SIM_NO_KERNEL_IMAGE", 0);
        return cudaSuccess;
    }
    if (started_in != getpid()) {
        return sim_refuse(cudaErrorInitializationError, call,
                          "this process was forked by process %d after that one had started CUDA, which a forked "
                          "child cannot use",
                          (int)started_in);
    }
    return cudaSuccess;
}

int sim_current_device(void) { return current_device; }

static const char *error_name(cudaError_t error) {
    switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorInsufficientDriver: return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorNoKernelImageForDevice: return "no kernel image is available for execution on the device";
    case cudaErrorMapBufferObjectFailed: return "mapping of buffer object failed";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorAssert: return "device-side assert triggered";
    case cudaErrorIllegalInstruction: return "an illegal instruction was encountered";
    case cudaErrorMisalignedAddress: return "misaligned address";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorPeerAccessAlreadyEnabled: return "peer access is already enabled";
    case cudaErrorPeerAccessNotEnabled: return "peer access has not been enabled";
    case cudaErrorNotSupported: return "operation not supported";
    }
    return "unknown error";
}

// The runtime's words, followed by what the simulator found when this error is the last it set.
const char *cudaGetErrorString(cudaError_t error) {
    if (error != detail_error || !detail[0]) return error_name(error);
    snprintf(error_text, sizeof error_text, "%s (simulated CUDA: %s)", error_name(error), detail);
    return error_text;
}

cudaError_t cudaGetLastError(void) {
    cudaError_t error = last_error;
    last_error = cudaSuccess;
    return error;
}

cudaError_t cudaDriverGetVersion(int *version) {
    *version = 12040;
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *version) {
    *version = 12040;
    return cudaSuccess;
}

// ---- devices ----

static cudaError_t check_device(const char *call, int device) {
    if (device < 0 || device >= n_devices) {
        return sim_error(cudaErrorInvalidDevice, "%s: device %d, the simulator has %d", call, device, n_devices);
    }
    return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int *count) {
    *count = 0;
    cudaError_t e = sim_enter("cudaGetDeviceCount");
    if (e != cudaSuccess) return e;
    if (n_devices == 0) return sim_error(cudaErrorNoDevice, "HW_SIM_DEVICES=0");
    *count = n_devices;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
    cudaError_t e = sim_enter("cudaSetDevice");
    if (e == cudaSuccess) e = check_device("cudaSetDevice", device);
    if (e == cudaSuccess) current_device = device;
    return e;
}

cudaError_t cudaGetDevice(int *device) {
    *device = current_device;
    return sim_enter("cudaGetDevice");
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device) {
    cudaError_t e = sim_enter("cudaGetDeviceProperties");
    if (e == cudaSuccess) e = check_device("cudaGetDeviceProperties", device);
    if (e != cudaSuccess) return e;
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "simulated CUDA device (host)");
    prop->totalGlobalMem = device_bytes;
    prop->major = 9;
    prop->minor = 0;
    prop->multiProcessorCount = 1;
    return cudaSuccess;
}

// Only the compute mode: HW_SIM_COMPUTE_MODE (default 0, cudaComputeModeDefault) plays a GPU that
// nvidia-smi -c set otherwise. The simulator does not enforce the mode itself.
cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device) {
    cudaError_t e = sim_enter("cudaDeviceGetAttribute");
    if (e == cudaSuccess) e = check_device("cudaDeviceGetAttribute", device);
    if (e != cudaSuccess) return e;
    if (attr != cudaDevAttrComputeMode) {
        return sim_error(cudaErrorInvalidValue, "attribute %d is not simulated", (int)attr);
    }
    *value = env_int("HW_SIM_COMPUTE_MODE", cudaComputeModeDefault);
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
    cudaError_t e = sim_enter("cudaMemGetInfo");
    if (e != cudaSuccess) return e;
    pthread_mutex_lock(&lock);
    *total_bytes = device_bytes;
    *free_bytes = device_bytes - used[current_device];
    pthread_mutex_unlock(&lock);
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
    cudaError_t e = sim_enter("cudaDeviceSynchronize");
    if (e == cudaSuccess) sim_order_learn_all();
    return e;
}

cudaError_t cudaDeviceCanAccessPeer(int *can, int device, int peer) {
    *can = 0;
    cudaError_t e = sim_enter("cudaDeviceCanAccessPeer");
    if (e == cudaSuccess) e = check_device("cudaDeviceCanAccessPeer", device);
    if (e == cudaSuccess) e = check_device("cudaDeviceCanAccessPeer", peer);
    if (e == cudaSuccess) *can = device != peer;
    return e;
}

cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned flags) {
    cudaError_t e = sim_enter("cudaDeviceEnablePeerAccess");
    if (e == cudaSuccess) e = check_device("cudaDeviceEnablePeerAccess", peer);
    if (e != cudaSuccess) return e;
    if (flags != 0) return sim_refuse(cudaErrorInvalidValue, "cudaDeviceEnablePeerAccess", "flags must be 0");
    if (peer == current_device) return sim_error(cudaErrorInvalidDevice, "peer access to the device itself");
    if (peer_enabled[current_device][peer]) return sim_error(cudaErrorPeerAccessAlreadyEnabled, "already enabled");
    peer_enabled[current_device][peer] = 1;
    return cudaSuccess;
}

cudaError_t cudaFuncGetAttributes(cudaFuncAttributes *attributes, const void *kernel) {
    (void)kernel;
    cudaError_t e = sim_enter("cudaFuncGetAttributes");
    if (e != cudaSuccess) return e;
    if (no_kernel_image) return sim_error(cudaErrorNoKernelImageForDevice, "HW_SIM_NO_KERNEL_IMAGE=1");
    attributes->maxThreadsPerBlock = 1024;
    attributes->numRegs = 32;
    return cudaSuccess;
}

// ---- the registry of allocations ----

typedef struct {
    sim_region region;
    int fd;  // SIM_DEVICE: the memfd an IPC handle names; -1 otherwise
} allocation;

static allocation *table;
static int n_table, table_cap;

static void registry_add(allocation a) {
    pthread_mutex_lock(&lock);
    if (n_table == table_cap) {
        table_cap = table_cap ? 2 * table_cap : 64;
        allocation *grown = realloc(table, sizeof *table * (size_t)table_cap);
        if (!grown) abort();
        table = grown;
    }
    table[n_table++] = a;
    if (a.region.kind == SIM_DEVICE) used[a.region.device] += a.region.size;
    pthread_mutex_unlock(&lock);
}

// Removes the allocation starting at base with one of `kinds` (a bit per sim_kind) into *out.
static int registry_take(const void *base, unsigned kinds, allocation *out) {
    pthread_mutex_lock(&lock);
    int found = 0;
    for (int i = 0; i < n_table; i++) {
        if (table[i].region.base == base && (kinds & (1u << table[i].region.kind))) {
            *out = table[i];
            table[i] = table[--n_table];
            if (out->region.kind == SIM_DEVICE) used[out->region.device] -= out->region.size;
            found = 1;
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    return found;
}

static int registry_find(const void *ptr, allocation *out) {
    pthread_mutex_lock(&lock);
    int found = 0;
    for (int i = 0; i < n_table && !found; i++) {
        const sim_region *r = &table[i].region;
        if ((const char *)ptr >= r->base && (const char *)ptr < r->base + (r->size ? r->size : 1)) {
            *out = table[i];
            found = 1;
        }
    }
    pthread_mutex_unlock(&lock);
    return found;
}

static const char *kind_name(sim_kind kind) {
    switch (kind) {
    case SIM_HOST: return "pageable host memory";
    case SIM_DEVICE: return "device memory";
    case SIM_PINNED: return "pinned host memory";
    case SIM_OPENED: return "device memory opened by IPC";
    }
    return "?";
}

cudaError_t sim_locate(const char *call, const void *ptr, size_t bytes, sim_region *out) {
    allocation a;
    if (!registry_find(ptr, &a)) {
        memset(out, 0, sizeof *out);
        out->kind = SIM_HOST;
        out->device = -1;
        if (!ptr && bytes) return sim_refuse(cudaErrorInvalidValue, call, "a NULL pointer for %zu bytes", bytes);
        return cudaSuccess;
    }
    *out = a.region;
    size_t offset = (size_t)((const char *)ptr - a.region.base);
    if (bytes > a.region.size - offset) {
        return sim_refuse(cudaErrorInvalidValue, call,
                          "%zu bytes at offset %zu of a %zu-byte allocation (%s of cuda:%d) run past its end", bytes,
                          offset, a.region.size, kind_name(a.region.kind), a.region.device);
    }
    return cudaSuccess;
}

int sim_reachable(int device, const sim_region *r) {
    switch (r->kind) {
    case SIM_PINNED:
    case SIM_OPENED:  // opened with cudaIpcMemLazyEnablePeerAccess
        return 1;
    case SIM_DEVICE: return r->device == device || peer_enabled[device][r->device];
    case SIM_HOST: return 0;
    }
    return 0;
}

// ---- device and pinned memory ----

// The last access of every stream to a device allocation (order.c).
static uint32_t *new_accesses(void) {
    uint32_t *accesses = calloc(2 * SIM_MAX_STREAMS, sizeof *accesses);
    if (!accesses) abort();
    return accesses;
}

static size_t page_round(size_t bytes) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (bytes + page - 1) / page * page;
}

cudaError_t cudaMalloc(void **ptr, size_t bytes) {
    *ptr = NULL;
    cudaError_t e = sim_enter("cudaMalloc");
    if (e != cudaSuccess) return e;
    size_t free_bytes = device_bytes - used[current_device];
    if (bytes > free_bytes) {
        return sim_error(cudaErrorMemoryAllocation, "%zu bytes asked, %zu free on cuda:%d (HW_SIM_MEM_MIB)", bytes,
                         free_bytes, current_device);
    }
    size_t size = bytes ? bytes : 1;
    int fd = memfd_create("hogwild-simcuda", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)page_round(size)) != 0) {
        if (fd >= 0) close(fd);
        return sim_error(cudaErrorMemoryAllocation, "memfd of %zu bytes: %s", size, strerror(errno));
    }
    void *p = mmap(NULL, page_round(size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        close(fd);
        return sim_error(cudaErrorMemoryAllocation, "mmap of %zu bytes: %s", size, strerror(errno));
    }
    memset(p, 0xff, size);  // not zero: what nothing wrote reads as NaN
    allocation a = {{SIM_DEVICE, current_device, p, size, new_accesses()}, fd};
    registry_add(a);
    *ptr = p;
    return cudaSuccess;
}

cudaError_t cudaFree(void *ptr) {
    cudaError_t e = sim_enter("cudaFree");
    if (e != cudaSuccess || !ptr) return e;
    sim_order_learn_all();  // cudaFree waits for the device
    allocation a;
    if (!registry_take(ptr, 1u << SIM_DEVICE, &a)) {
        sim_region r;
        sim_locate("cudaFree", ptr, 0, &r);
        return sim_refuse(cudaErrorInvalidValue, "cudaFree", "%p is not the start of a device allocation (%s)", ptr,
                          kind_name(r.kind));
    }
    munmap(a.region.base, page_round(a.region.size));
    close(a.fd);
    free(a.region.accesses);
    return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **ptr, size_t bytes, unsigned flags) {
    (void)flags;
    *ptr = NULL;
    cudaError_t e = sim_enter("cudaHostAlloc");
    if (e != cudaSuccess) return e;
    size_t size = bytes ? bytes : 1;  // pages of its own: order.c may close them while a copy is held
    void *p = mmap(NULL, page_round(size), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return sim_error(cudaErrorMemoryAllocation, "%zu bytes of pinned host memory", size);
    memset(p, 0xff, size);
    allocation a = {{SIM_PINNED, -1, p, size, NULL}, -1};
    registry_add(a);
    *ptr = p;
    return cudaSuccess;
}

cudaError_t cudaFreeHost(void *ptr) {
    cudaError_t e = sim_enter("cudaFreeHost");
    if (e != cudaSuccess || !ptr) return e;
    sim_order_learn_all();  // cudaFreeHost waits for the device
    allocation a;
    if (!registry_take(ptr, 1u << SIM_PINNED, &a)) {
        return sim_refuse(cudaErrorInvalidValue, "cudaFreeHost", "%p is not the start of a pinned host allocation",
                          ptr);
    }
    munmap(a.region.base, page_round(a.region.size));
    return cudaSuccess;
}

// ---- copies: done at once ----

static int on_device(sim_kind kind) { return kind == SIM_DEVICE || kind == SIM_OPENED; }

static const char *direction_name(cudaMemcpyKind kind) {
    switch (kind) {
    case cudaMemcpyHostToHost: return "HostToHost";
    case cudaMemcpyHostToDevice: return "HostToDevice";
    case cudaMemcpyDeviceToHost: return "DeviceToHost";
    case cudaMemcpyDeviceToDevice: return "DeviceToDevice";
    case cudaMemcpyDefault: return "Default";
    }
    return "?";
}

static cudaError_t copy(const char *call, void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                        cudaStream_t stream, int has_stream) {
    cudaError_t e = sim_enter(call);
    if (e != cudaSuccess) return e;
    int stream_device = 0;
    if (has_stream && (e = sim_stream_device(call, stream, &stream_device)) != cudaSuccess) return e;
    if (bytes == 0) return cudaSuccess;
    sim_region d, s;
    if ((e = sim_locate(call, dst, bytes, &d)) != cudaSuccess ||
        (e = sim_locate(call, src, bytes, &s)) != cudaSuccess) {
        return e;
    }
    int want_dst = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    int want_src = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if (kind != cudaMemcpyDefault && (on_device(d.kind) != want_dst || on_device(s.kind) != want_src)) {
        return sim_refuse(cudaErrorInvalidValue, call, "a %s copy of %zu bytes from %s to %s", direction_name(kind),
                          bytes, kind_name(s.kind), kind_name(d.kind));
    }
    int id = has_stream ? sim_stream_id(stream) : sim_order_legacy(sim_current_device());
    uint32_t seq = sim_order_op(id);
    if ((on_device(s.kind) && (e = sim_order_access(call, id, seq, &s, 0)) != cudaSuccess) ||
        (on_device(d.kind) && (e = sim_order_access(call, id, seq, &d, 1)) != cudaSuccess)) {
        return e;
    }
    if (!has_stream) {  // cudaMemcpy: done when it returns, after the legacy stream's earlier work
        sim_order_unprotect();
        memmove(dst, src, bytes);
        sim_order_protect();
        sim_order_learn_stream(id);
    } else if (d.kind == SIM_PINNED && on_device(s.kind)) {
        sim_order_copy_to_host(id, seq, dst, src, bytes);
    } else {
        sim_order_unprotect();
        memmove(dst, src, bytes);
        sim_order_protect();
        if (s.kind == SIM_PINNED && on_device(d.kind)) sim_order_copy_from_host(id, seq, src, bytes);
    }
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
    return copy("cudaMemcpy", dst, src, bytes, kind, NULL, 0);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
    return copy("cudaMemcpyAsync", dst, src, bytes, kind, stream, 1);
}

static cudaError_t peer_copy(const char *call, void *dst, int dst_device, const void *src, int src_device, size_t bytes,
                             cudaStream_t stream, int has_stream) {
    cudaError_t e = sim_enter(call);
    if (e == cudaSuccess) e = check_device(call, dst_device);
    if (e == cudaSuccess) e = check_device(call, src_device);
    if (e != cudaSuccess) return e;
    sim_region d, s;
    if ((e = sim_locate(call, dst, bytes, &d)) != cudaSuccess ||
        (e = sim_locate(call, src, bytes, &s)) != cudaSuccess) {
        return e;
    }
    if (bytes && (!on_device(d.kind) || d.device != dst_device || !on_device(s.kind) || s.device != src_device)) {
        return sim_refuse(cudaErrorInvalidValue, call,
                          "a peer copy to cuda:%d from cuda:%d, but the destination is %s of cuda:%d and the source "
                          "%s of cuda:%d",
                          dst_device, src_device, kind_name(d.kind), d.device, kind_name(s.kind), s.device);
    }
    return copy(call, dst, src, bytes, cudaMemcpyDeviceToDevice, stream, has_stream);
}

cudaError_t cudaMemcpyPeer(void *dst, int dst_device, const void *src, int src_device, size_t bytes) {
    return peer_copy("cudaMemcpyPeer", dst, dst_device, src, src_device, bytes, NULL, 0);
}

cudaError_t cudaMemcpyPeerAsync(void *dst, int dst_device, const void *src, int src_device, size_t bytes,
                                cudaStream_t stream) {
    return peer_copy("cudaMemcpyPeerAsync", dst, dst_device, src, src_device, bytes, stream, 1);
}

cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes, cudaStream_t stream) {
    cudaError_t e = sim_enter("cudaMemsetAsync");
    int stream_device = 0;
    if (e == cudaSuccess) e = sim_stream_device("cudaMemsetAsync", stream, &stream_device);
    if (e != cudaSuccess || bytes == 0) return e;
    sim_region r;
    if ((e = sim_locate("cudaMemsetAsync", ptr, bytes, &r)) != cudaSuccess) return e;
    if (!on_device(r.kind)) {
        return sim_refuse(cudaErrorInvalidValue, "cudaMemsetAsync", "%zu bytes of %s", bytes, kind_name(r.kind));
    }
    int id = sim_stream_id(stream);
    if ((e = sim_order_access("cudaMemsetAsync", id, sim_order_op(id), &r, 1)) != cudaSuccess) return e;
    memset(ptr, value, bytes);
    return cudaSuccess;
}

// ---- IPC: a handle names the owner's memfd ----

enum { HANDLE_MAGIC = 0x48575349 };

typedef struct {
    uint32_t magic;
    int32_t pid, fd, device;
    uint64_t size;
} sim_handle;

_Static_assert(sizeof(sim_handle) <= sizeof(cudaIpcMemHandle_t), "a simulated IPC handle fits a real one");

cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *ptr) {
    cudaError_t e = sim_enter("cudaIpcGetMemHandle");
    if (e != cudaSuccess) return e;
    allocation a;
    if (!registry_find(ptr, &a) || a.region.kind != SIM_DEVICE || a.region.base != ptr) {
        return sim_refuse(cudaErrorInvalidValue, "cudaIpcGetMemHandle",
                          "%p is not the start of a device allocation of this process", ptr);
    }
    sim_handle h = {HANDLE_MAGIC, (int32_t)getpid(), a.fd, a.region.device, a.region.size};
    memset(handle, 0, sizeof *handle);
    memcpy(handle->reserved, &h, sizeof h);
    return cudaSuccess;
}

cudaError_t cudaIpcOpenMemHandle(void **ptr, cudaIpcMemHandle_t handle, unsigned flags) {
    (void)flags;
    *ptr = NULL;
    cudaError_t e = sim_enter("cudaIpcOpenMemHandle");
    if (e != cudaSuccess) return e;
    sim_handle h;
    memcpy(&h, handle.reserved, sizeof h);
    if (h.magic != HANDLE_MAGIC) return sim_refuse(cudaErrorInvalidValue, "cudaIpcOpenMemHandle", "not a handle");
    if (h.pid == (int32_t)getpid()) {
        return sim_refuse(cudaErrorInvalidValue, "cudaIpcOpenMemHandle",
                          "a process cannot open its own IPC handle (it has the pointer already)");
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)h.pid, (int)h.fd);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || (uint64_t)st.st_size < h.size) {
        if (fd >= 0) close(fd);
        return sim_error(cudaErrorMapBufferObjectFailed, "cannot open %s (has process %d freed the memory or ended?)",
                         path, (int)h.pid);
    }
    void *p = mmap(NULL, page_round(h.size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return sim_error(cudaErrorMapBufferObjectFailed, "mmap of %s: %s", path, strerror(errno));
    allocation a = {{SIM_OPENED, h.device, p, h.size, new_accesses()}, -1};
    registry_add(a);
    *ptr = p;
    return cudaSuccess;
}

cudaError_t cudaIpcCloseMemHandle(void *ptr) {
    cudaError_t e = sim_enter("cudaIpcCloseMemHandle");
    if (e != cudaSuccess) return e;
    allocation a;
    if (!registry_take(ptr, 1u << SIM_OPENED, &a)) {
        return sim_refuse(cudaErrorInvalidValue, "cudaIpcCloseMemHandle", "%p was not opened by cudaIpcOpenMemHandle",
                          ptr);
    }
    munmap(a.region.base, page_round(a.region.size));
    free(a.region.accesses);
    return cudaSuccess;
}
