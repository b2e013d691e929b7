// streams: the simulated CUDA device's streams, events, kernel launch checks and cuBLAS (tests
// only, `make sim`). Work runs at once on the host, so a stream is a device and a liveness flag,
// an event the time it was recorded; what is checked is what a GPU refuses: handles that were
// never created or are destroyed, an event recorded on another device's stream, the elapsed time
// of events that were not recorded or do not time, kernels on another device's stream or touching
// memory their device cannot reach, a cuBLAS handle used on another device than its own.
#include "sim.h"
#include "hw/clock.h"  // hw_now

#include "hw/blas.h"
#include <pthread.h>
#include <stdlib.h>

// ---- live handles: the streams, events and cuBLAS handles this process created ----

typedef struct {
    void **items;
    int n, cap;
} handle_set;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static handle_set streams, events, blas_handles;

static void set_add(handle_set *set, void *item) {
    pthread_mutex_lock(&lock);
    if (set->n == set->cap) {
        set->cap = set->cap ? 2 * set->cap : 32;
        void **grown = realloc(set->items, sizeof *set->items * (size_t)set->cap);
        if (!grown) abort();
        set->items = grown;
    }
    set->items[set->n++] = item;
    pthread_mutex_unlock(&lock);
}

static int set_find(handle_set *set, const void *item, int remove) {
    pthread_mutex_lock(&lock);
    int found = 0;
    for (int i = 0; i < set->n && !found; i++) {
        if (set->items[i] == item) {
            found = 1;
            if (remove) set->items[i] = set->items[--set->n];
        }
    }
    pthread_mutex_unlock(&lock);
    return found;
}

// ---- streams ----

struct CUstream_st {
    int device;
    int id;  // order.c
};

int sim_stream_id(cudaStream_t stream) { return stream ? stream->id : sim_order_legacy(sim_current_device()); }

cudaError_t sim_stream_device(const char *call, cudaStream_t stream, int *device) {
    *device = sim_current_device();
    if (!stream) return cudaSuccess;
    if (!set_find(&streams, stream, 0)) {
        return sim_refuse(cudaErrorInvalidResourceHandle, call, "stream %p was not created or is destroyed",
                          (void *)stream);
    }
    *device = stream->device;
    // A collective of the simulated NCCL in flight on the stream: what comes after it needs its result.
    sim_nccl_settle(stream, 1);
    return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags) {
    (void)flags;
    *stream = NULL;
    cudaError_t e = sim_enter("cudaStreamCreateWithFlags");
    if (e != cudaSuccess) return e;
    cudaStream_t s = malloc(sizeof *s);
    if (!s) abort();
    s->device = sim_current_device();
    s->id = sim_order_new_stream();
    set_add(&streams, s);
    *stream = s;
    return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    cudaError_t e = sim_enter("cudaStreamDestroy");
    if (e != cudaSuccess) return e;
    if (!stream || !set_find(&streams, stream, 1)) {
        return sim_refuse(cudaErrorInvalidResourceHandle, "cudaStreamDestroy",
                          "stream %p was not created or is "
                          "destroyed already",
                          (void *)stream);
    }
    free(stream);
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
    cudaError_t e = sim_enter("cudaStreamSynchronize");
    int device;
    if (e == cudaSuccess) e = sim_stream_device("cudaStreamSynchronize", stream, &device);
    if (e == cudaSuccess) sim_order_learn_stream(sim_stream_id(stream));
    return e;
}

// Not ready while a collective of the simulated NCCL waits for its other ranks (nccl.c); all
// other work is done when its call returns.
cudaError_t cudaStreamQuery(cudaStream_t stream) {
    cudaError_t e = sim_enter("cudaStreamQuery");
    if (e != cudaSuccess) return e;
    if (stream && !set_find(&streams, stream, 0)) {
        return sim_refuse(cudaErrorInvalidResourceHandle, "cudaStreamQuery",
                          "stream %p was not created or is "
                          "destroyed",
                          (void *)stream);
    }
    if (sim_nccl_settle(stream, 0)) return cudaErrorNotReady;
    sim_order_learn_stream(sim_stream_id(stream));
    return cudaSuccess;
}

// ---- CUDA graphs: not simulated ----
// Every call here runs at once on the host, so there is nothing to capture: a capture is refused
// as a driver without graph support would refuse it, and the runner then launches step by step
// (hw_cuda_runner_graph_off says so). Nothing can hold a graph, so the other calls only answer.

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
    (void)stream;
    (void)mode;
    return sim_error(cudaErrorNotSupported, "the simulated device captures no CUDA graphs");
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph) {
    (void)stream;
    *graph = NULL;
    return sim_error(cudaErrorInvalidValue, "cudaStreamEndCapture: the stream is not capturing");
}

static cudaError_t no_graph(const char *call) {
    return sim_error(cudaErrorInvalidResourceHandle, "%s: the simulated device holds no graphs", call);
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags) {
    (void)graph;
    (void)flags;
    *exec = NULL;
    return no_graph("cudaGraphInstantiate");
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
    (void)exec;
    (void)stream;
    return no_graph("cudaGraphLaunch");
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) { return exec ? no_graph("cudaGraphExecDestroy") : cudaSuccess; }

cudaError_t cudaGraphDestroy(cudaGraph_t graph) { return graph ? no_graph("cudaGraphDestroy") : cudaSuccess; }

cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *count) {
    (void)graph;
    (void)nodes;
    *count = 0;
    return no_graph("cudaGraphGetNodes");
}

cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, cudaGraphNodeType *type) {
    (void)node;
    (void)type;
    return no_graph("cudaGraphNodeGetType");
}

cudaError_t cudaGraphKernelNodeGetParams(cudaGraphNode_t node, cudaKernelNodeParams *params) {
    (void)node;
    (void)params;
    return no_graph("cudaGraphKernelNodeGetParams");
}

cudaError_t cudaGraphExecKernelNodeSetParams(cudaGraphExec_t exec, cudaGraphNode_t node,
                                             const cudaKernelNodeParams *params) {
    (void)exec;
    (void)node;
    (void)params;
    return no_graph("cudaGraphExecKernelNodeSetParams");
}

// ---- events ----

struct CUevent_st {
    int device;
    int timing;
    int recorded;
    double ms;        // when it was recorded: all work before it on its stream is done by then
    sim_clock after;  // the work it comes after (order.c)
};

static cudaError_t check_event(const char *call, cudaEvent_t event) {
    if (!event || !set_find(&events, event, 0)) {
        return sim_refuse(cudaErrorInvalidResourceHandle, call, "event %p was not created or is destroyed",
                          (void *)event);
    }
    return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned flags) {
    *event = NULL;
    cudaError_t e = sim_enter("cudaEventCreateWithFlags");
    if (e != cudaSuccess) return e;
    cudaEvent_t ev = calloc(1, sizeof *ev);
    if (!ev) abort();
    ev->device = sim_current_device();
    ev->timing = !(flags & cudaEventDisableTiming);
    set_add(&events, ev);
    *event = ev;
    return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
    cudaError_t e = sim_enter("cudaEventDestroy");
    if (e == cudaSuccess) e = check_event("cudaEventDestroy", event);
    if (e != cudaSuccess) return e;
    set_find(&events, event, 1);
    free(event);
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
    cudaError_t e = sim_enter("cudaEventRecord");
    int device = 0;
    if (e == cudaSuccess) e = check_event("cudaEventRecord", event);
    if (e == cudaSuccess) e = sim_stream_device("cudaEventRecord", stream, &device);
    if (e != cudaSuccess) return e;
    if (device != event->device) {
        return sim_refuse(cudaErrorInvalidResourceHandle, "cudaEventRecord",
                          "an event of cuda:%d recorded on a stream of cuda:%d", event->device, device);
    }
    event->recorded = 1;
    event->ms = hw_now() * 1e3;
    sim_order_event_record(sim_stream_id(stream), &event->after);
    return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags) {
    cudaError_t e = sim_enter("cudaStreamWaitEvent");
    int device = 0;
    if (e == cudaSuccess) e = sim_stream_device("cudaStreamWaitEvent", stream, &device);
    if (e == cudaSuccess) e = check_event("cudaStreamWaitEvent", event);
    if (e == cudaSuccess && flags != 0) e = sim_refuse(cudaErrorInvalidValue, "cudaStreamWaitEvent", "flags != 0");
    if (e == cudaSuccess && event->recorded) sim_order_stream_wait(sim_stream_id(stream), &event->after);
    return e;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
    cudaError_t e = sim_enter("cudaEventSynchronize");
    if (e == cudaSuccess) e = check_event("cudaEventSynchronize", event);
    if (e == cudaSuccess && event->recorded) sim_order_learn(&event->after);
    return e;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
    cudaError_t e = sim_enter("cudaEventElapsedTime");
    if (e == cudaSuccess) e = check_event("cudaEventElapsedTime", start);
    if (e == cudaSuccess) e = check_event("cudaEventElapsedTime", end);
    if (e != cudaSuccess) return e;
    if (!start->timing || !end->timing) {
        return sim_refuse(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime",
                          "an event created with cudaEventDisableTiming");
    }
    if (!start->recorded || !end->recorded) {
        return sim_refuse(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime", "an event that was never recorded");
    }
    *ms = (float)(end->ms - start->ms);
    return cudaSuccess;
}

// ---- kernel launches ----

cudaError_t hw_sim_launch_check(cudaStream_t stream, const hw_sim_span *spans, int n_spans) {
    const char *call = "a kernel launch";
    cudaError_t e = sim_enter(call);
    int device = 0;
    if (e == cudaSuccess) e = sim_stream_device(call, stream, &device);
    if (e != cudaSuccess) return e;
    if (device != sim_current_device()) {
        return sim_refuse(cudaErrorInvalidResourceHandle, call, "on a stream of cuda:%d while cuda:%d is current",
                          device, sim_current_device());
    }
    int id = sim_stream_id(stream);
    uint32_t seq = sim_order_op(id);
    for (int i = 0; i < n_spans; i++) {
        if (spans[i].bytes == 0) continue;
        sim_region r;
        if ((e = sim_locate(call, spans[i].ptr, spans[i].bytes, &r)) != cudaSuccess) return e;
        if (!sim_reachable(device, &r)) {
            const char *what = r.kind == SIM_HOST ? "pageable host memory" : "device memory of another device";
            return sim_refuse(cudaErrorIllegalAddress, call, "on cuda:%d touching %zu bytes at %p: %s (cuda:%d)",
                              device, spans[i].bytes, spans[i].ptr, what, r.device);
        }
        if ((e = sim_order_access(call, id, seq, &r, spans[i].writes)) != cudaSuccess) return e;
    }
    return cudaSuccess;
}

// ---- cuBLAS: hw_sgemm_col_major, column-major as cuBLAS ----

struct cublasContext {
    int device;
    cudaStream_t stream;
};

static cublasStatus_t check_handle(const char *call, cublasHandle_t handle) {
    if (!handle || !set_find(&blas_handles, handle, 0)) {
        sim_refuse(cudaErrorInvalidResourceHandle, call, "cuBLAS handle %p was not created or is destroyed",
                   (void *)handle);
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasCreate(cublasHandle_t *handle) {
    *handle = NULL;
    if (sim_enter("cublasCreate") != cudaSuccess) return CUBLAS_STATUS_NOT_INITIALIZED;
    cublasHandle_t h = calloc(1, sizeof *h);
    if (!h) abort();
    h->device = sim_current_device();
    set_add(&blas_handles, h);
    *handle = h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
    cublasStatus_t status = check_handle("cublasDestroy", handle);
    if (status != CUBLAS_STATUS_SUCCESS) return status;
    set_find(&blas_handles, handle, 1);
    free(handle);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
    (void)mode;  // the host computes in plain FP32 whatever the mode
    return check_handle("cublasSetMathMode", handle);
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
    cublasStatus_t status = check_handle("cublasSetStream", handle);
    int device = 0;
    if (status != CUBLAS_STATUS_SUCCESS) return status;
    if (sim_stream_device("cublasSetStream", stream, &device) != cudaSuccess) return CUBLAS_STATUS_INVALID_VALUE;
    if (stream && device != handle->device) {
        sim_refuse(cudaErrorInvalidResourceHandle, "cublasSetStream", "a stream of cuda:%d for a handle of cuda:%d",
                   device, handle->device);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    handle->stream = stream;
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusString(cublasStatus_t status) {
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    }
    return "CUBLAS_STATUS_UNKNOWN";
}

// The bytes a column-major matrix of `rows` x `cols` with leading dimension ld spans.
static size_t matrix_bytes(int rows, int cols, int ld) {
    if (rows == 0 || cols == 0) return 0;
    return ((size_t)(cols - 1) * (size_t)ld + (size_t)rows) * sizeof(float);
}

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t trans_a, cublasOperation_t trans_b, int m, int n,
                           int k, const float *alpha, const float *a, int lda, const float *b, int ldb,
                           const float *beta, float *c, int ldc) {
    cublasStatus_t status = check_handle("cublasSgemm", handle);
    if (status != CUBLAS_STATUS_SUCCESS) return status;
    int a_rows = trans_a == CUBLAS_OP_N ? m : k, a_cols = trans_a == CUBLAS_OP_N ? k : m;
    int b_rows = trans_b == CUBLAS_OP_N ? k : n, b_cols = trans_b == CUBLAS_OP_N ? n : k;
    if (m < 0 || n < 0 || k < 0 || lda < (a_rows > 1 ? a_rows : 1) || ldb < (b_rows > 1 ? b_rows : 1) ||
        ldc < (m > 1 ? m : 1)) {
        sim_refuse(cudaErrorInvalidValue, "cublasSgemm", "m=%d n=%d k=%d lda=%d ldb=%d ldc=%d", m, n, k, lda, ldb, ldc);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (sim_current_device() != handle->device) {
        sim_refuse(cudaErrorInvalidResourceHandle, "cublasSgemm", "a handle of cuda:%d used while cuda:%d is current",
                   handle->device, sim_current_device());
        return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
    hw_sim_span spans[3] = {{a, matrix_bytes(a_rows, a_cols, lda), 0},
                            {b, matrix_bytes(b_rows, b_cols, ldb), 0},
                            {c, matrix_bytes(m, n, ldc), 1}};
    if (hw_sim_launch_check(handle->stream, spans, 3) != cudaSuccess) return CUBLAS_STATUS_EXECUTION_FAILED;
    hw_sgemm_col_major(trans_a == CUBLAS_OP_N ? HW_NO_TRANS : HW_TRANS, trans_b == CUBLAS_OP_N ? HW_NO_TRANS : HW_TRANS,
                       m, n, k, *alpha, a, lda, b, ldb, *beta, c, ldc);
    return CUBLAS_STATUS_SUCCESS;
}

// Batch entry i is cublasSgemm on a + i * stride_a, b + i * stride_b, c + i * stride_c; each is
// checked (and its memory spans) as a GEMM of its own.
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t trans_a, cublasOperation_t trans_b,
                                         int m, int n, int k, const float *alpha, const float *a, int lda,
                                         long long stride_a, const float *b, int ldb, long long stride_b,
                                         const float *beta, float *c, int ldc, long long stride_c, int batch_count) {
    if (batch_count < 0 || stride_a < 0 || stride_b < 0 || stride_c < 0) {
        sim_refuse(cudaErrorInvalidValue, "cublasSgemmStridedBatched", "batch_count=%d strides %lld %lld %lld",
                   batch_count, stride_a, stride_b, stride_c);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    for (int i = 0; i < batch_count; i++) {
        cublasStatus_t status = cublasSgemm(handle, trans_a, trans_b, m, n, k, alpha, a + i * stride_a, lda,
                                            b + i * stride_b, ldb, beta, c + i * stride_c, ldc);
        if (status != CUBLAS_STATUS_SUCCESS) return status;
    }
    return CUBLAS_STATUS_SUCCESS;
}
