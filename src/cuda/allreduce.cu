// allreduce: the gradient reduction of DataParallel on GPUs. K buffers, one per replica, each on
// its replica's device and stream, summed in place so that every replica ends with the sum.
//
// Two ways, chosen once in create:
//   nccl    one communicator per GPU (ncclCommInitAll) and one ncclAllReduce(ncclSum) per replica
//           inside ncclGroupStart/End. Needs NCCL compiled in (HW_HAVE_NCCL) and K distinct
//           devices: one communicator cannot hold the same GPU twice.
//   copies  replica 0 gathers: it waits for each replica's buffer (an event), copies it to a
//           staging buffer on its own device (a peer copy; none when both share the GPU) and adds
//           it with a sum kernel; then every replica copies the sum back. The order of the adds is
//           fixed, so the result does not depend on timing.
#include "allreduce.h"
#include "check.cuh"
#include "device.h"
#include "layer_ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct hw_cuda_allreduce {
    int n;         // replicas
    int *devices;  // devices[k]: replica k's CUDA ordinal
    size_t count;  // floats per buffer
    int use_nccl;
#ifdef HW_HAVE_NCCL
    ncclComm_t *comms;  // comms[k] for devices[k] (nccl)
#endif
    // copies
    float *staging;       // on devices[0]; NULL when every replica is on devices[0]
    cudaEvent_t *ready;   // ready[k], on devices[k]: replica k's buffer is complete
    cudaEvent_t *copied;  // copied[k], on devices[k]: replica k has its copy of the sum
    cudaEvent_t summed;   // on devices[0]: the sum is complete in replica 0's buffer
    char method[400];
};

extern "C" void hw_cuda_allreduce_free(hw_cuda_allreduce *ar) {
    if (!ar) return;
#ifdef HW_HAVE_NCCL
    if (ar->comms) {
        for (int k = 0; k < ar->n; k++) {
            if (ar->comms[k]) ncclCommDestroy(ar->comms[k]);
        }
        free(ar->comms);
    }
#endif
    for (int k = 0; ar->devices && k < ar->n; k++) {
        cudaSetDevice(ar->devices[k]);
        if (ar->ready && ar->ready[k]) cudaEventDestroy(ar->ready[k]);
        if (ar->copied && ar->copied[k]) cudaEventDestroy(ar->copied[k]);
    }
    if (ar->devices && ar->n > 0) {
        cudaSetDevice(ar->devices[0]);
        if (ar->summed) cudaEventDestroy(ar->summed);
        if (ar->staging) cudaFree(ar->staging);
    }
    cudaGetLastError();
    free(ar->ready);
    free(ar->copied);
    free(ar->devices);
    free(ar);
}

// Every device distinct: the condition for one NCCL communicator per replica.
static int devices_distinct(const int *devices, int n) {
    for (int a = 0; a < n; a++) {
        for (int b = a + 1; b < n; b++) {
            if (devices[a] == devices[b]) return 0;
        }
    }
    return 1;
}

// Direct peer access between replica 0's GPU and another makes the gather and the copy back one
// transfer over NVLink/PCIe instead of two through host memory. Where the pair cannot, the peer
// copies still work (the runtime stages them), so a refusal is not an error.
static void enable_peer_access(int from, int to) {
    int can = 0;
    if (cudaDeviceCanAccessPeer(&can, from, to) != cudaSuccess || !can) {
        cudaGetLastError();
        return;
    }
    if (cudaSetDevice(from) == cudaSuccess) cudaDeviceEnablePeerAccess(to, 0);
    cudaGetLastError();  // cudaErrorPeerAccessAlreadyEnabled is fine
}

static int init_copies(hw_cuda_allreduce *ar) {
    ar->ready = (cudaEvent_t *)calloc((size_t)ar->n, sizeof(cudaEvent_t));
    ar->copied = (cudaEvent_t *)calloc((size_t)ar->n, sizeof(cudaEvent_t));
    if (!ar->ready || !ar->copied) return hw_fail("all-reduce: out of host memory");
    int needs_staging = 0;
    for (int k = 0; k < ar->n; k++) {
        if (ar->devices[k] != ar->devices[0]) {
            needs_staging = 1;
            enable_peer_access(ar->devices[0], ar->devices[k]);
            enable_peer_access(ar->devices[k], ar->devices[0]);
        }
        HW_CHECK(cudaSetDevice(ar->devices[k]));
        HW_CHECK(cudaEventCreateWithFlags(&ar->ready[k], cudaEventDisableTiming));
        HW_CHECK(cudaEventCreateWithFlags(&ar->copied[k], cudaEventDisableTiming));
    }
    HW_CHECK(cudaSetDevice(ar->devices[0]));
    HW_CHECK(cudaEventCreateWithFlags(&ar->summed, cudaEventDisableTiming));
    if (needs_staging && hw_cuda_malloc((void **)&ar->staging, ar->count * sizeof(float)) != HW_OK) {
        return hw_error_prefix("all-reduce staging buffer on cuda:%d", ar->devices[0]);
    }
    return HW_OK;
}

#ifdef HW_HAVE_NCCL
static int sum_by_nccl(hw_cuda_allreduce *ar, float *const *buffers, const hw_cuda_stream *streams) {
    // One thread drives every GPU: the calls must be one group, or the first would wait forever
    // for its peers. The group is closed even when a call in it failed.
    HW_CHECK(ncclGroupStart());
    ncclResult_t failed = ncclSuccess;
    int failed_at = -1;
    for (int k = 0; k < ar->n && failed == ncclSuccess; k++) {
        failed = ncclAllReduce(buffers[k], buffers[k], ar->count, ncclFloat, ncclSum, ar->comms[k], streams[k]);
        if (failed != ncclSuccess) failed_at = k;
    }
    ncclResult_t ended = ncclGroupEnd();
    if (failed != ncclSuccess) {
        return hw_fail("ncclAllReduce of replica %d (cuda:%d) failed at %s:%d: %s", failed_at, ar->devices[failed_at],
                       __FILE__, __LINE__, ncclGetErrorString(failed));
    }
    HW_CHECK(ended);
    return HW_OK;
}

// One all-reduce of the real size on zeroed scratch buffers (legacy streams), waited for.
static int nccl_try_sum(hw_cuda_allreduce *ar, float **scratch, hw_cuda_stream *streams) {
    const size_t bytes = ar->count * sizeof(float);
    for (int k = 0; k < ar->n; k++) {
        HW_CHECK(cudaSetDevice(ar->devices[k]));
        if (hw_cuda_malloc((void **)&scratch[k], bytes) != HW_OK) return HW_ERR;
        HW_CHECK(cudaMemsetAsync(scratch[k], 0, bytes, streams[k]));
    }
    if (sum_by_nccl(ar, scratch, streams) != HW_OK) return HW_ERR;
    for (int k = 0; k < ar->n; k++) {
        HW_CHECK(cudaSetDevice(ar->devices[k]));
        HW_CHECK(cudaStreamSynchronize(streams[k]));
    }
    return HW_OK;
}

// NCCL 2.22 and later connect their transports (peer-to-peer, shared memory, NVLS) at the first
// collective that needs them, not in ncclCommInitAll. A transport that cannot start here (a small
// /dev/shm in docker, peer access refused) would fail the first training step instead of sending
// the run to the copies: this first all-reduce, before training, finds out. On failure the
// communicators are aborted and freed, and hw_error() says why.
static int nccl_warm_up(hw_cuda_allreduce *ar) {
    if (ar->count == 0) return HW_OK;
    float **scratch = (float **)calloc((size_t)ar->n, sizeof(float *));
    hw_cuda_stream *streams = (hw_cuda_stream *)calloc((size_t)ar->n, sizeof(hw_cuda_stream));
    int status = scratch && streams ? nccl_try_sum(ar, scratch, streams) : hw_fail("all-reduce: out of host memory");
    if (status != HW_OK) {
        // Abort first: it stops any NCCL kernel still waiting for its peers, which cudaFree would wait for.
        for (int k = 0; k < ar->n; k++) {
            if (ar->comms[k]) ncclCommAbort(ar->comms[k]);
        }
        free(ar->comms);
        ar->comms = NULL;
    }
    for (int k = 0; scratch && k < ar->n; k++) {
        cudaSetDevice(ar->devices[k]);
        hw_cuda_free(scratch[k]);
    }
    cudaGetLastError();
    free(scratch);
    free(streams);
    return status;
}
#endif

extern "C" int hw_cuda_allreduce_create(hw_cuda_allreduce **out, const int *devices, int n, size_t count,
                                        int allow_nccl) {
    *out = NULL;
    if (n < 1) return hw_fail("all-reduce: needs at least one replica, got %d", n);
    hw_cuda_allreduce *ar = (hw_cuda_allreduce *)calloc(1, sizeof *ar);
    if (!ar) return hw_fail("all-reduce: out of host memory");
    ar->devices = (int *)malloc(sizeof(int) * (size_t)n);
    if (!ar->devices) {
        free(ar);
        return hw_fail("all-reduce: out of host memory");
    }
    memcpy(ar->devices, devices, sizeof(int) * (size_t)n);
    ar->n = n;
    ar->count = count;
    for (int k = 0; k < n; k++) {
        if (hw_cuda_select(hw_device{HW_DEVICE_CUDA, devices[k]}) != HW_OK) {
            hw_cuda_allreduce_free(ar);
            return hw_error_prefix("all-reduce, replica %d", k);
        }
    }
    if (n == 1) {
        snprintf(ar->method, sizeof ar->method, "none (one replica)");
        *out = ar;
        return HW_OK;
    }

    const char *why_not = NULL;
#ifdef HW_HAVE_NCCL
    char nccl_error[320];
    if (!allow_nccl) {
        why_not = "NCCL turned off (HOGWILD_NO_NCCL)";
    } else if (!devices_distinct(devices, n)) {
        why_not = "replicas share a GPU, which one NCCL communicator cannot hold";
    } else {
        ar->comms = (ncclComm_t *)calloc((size_t)n, sizeof(ncclComm_t));
        if (!ar->comms) {
            hw_cuda_allreduce_free(ar);
            return hw_fail("all-reduce: out of host memory");
        }
        ncclResult_t status = ncclCommInitAll(ar->comms, n, devices);
        if (status == ncclSuccess && nccl_warm_up(ar) == HW_OK) {
            ar->use_nccl = 1;
            int version = 0;
            ncclGetVersion(&version);
            snprintf(ar->method, sizeof ar->method, "nccl (ncclAllReduce over %d GPUs, NCCL %d)", n, version);
            *out = ar;
            return HW_OK;
        }
        // NCCL could not start here (e.g. no shared memory for its transports): the copies work
        // everywhere, so use them and say why.
        if (status == ncclSuccess) {
            snprintf(nccl_error, sizeof nccl_error, "a first ncclAllReduce failed: %s", hw_error());
        } else {
            snprintf(nccl_error, sizeof nccl_error, "ncclCommInitAll failed: %s", ncclGetErrorString(status));
            free(ar->comms);
            ar->comms = NULL;
        }
        cudaGetLastError();
        why_not = nccl_error;
    }
#else
    (void)allow_nccl;
    (void)devices_distinct;
    why_not = "this build has no NCCL";
#endif
    if (init_copies(ar) != HW_OK) {
        hw_cuda_allreduce_free(ar);
        return HW_ERR;
    }
    snprintf(ar->method, sizeof ar->method, "copies to cuda:%d and a sum kernel (%s)", devices[0], why_not);
    *out = ar;
    return HW_OK;
}

extern "C" const char *hw_cuda_allreduce_method(const hw_cuda_allreduce *ar) { return ar->method; }

static int sum_by_copies(hw_cuda_allreduce *ar, float *const *buffers, const hw_cuda_stream *streams) {
    const int n = ar->n, home = ar->devices[0];
    const size_t bytes = ar->count * sizeof(float);
    for (int k = 1; k < n; k++) {
        HW_CHECK(cudaSetDevice(ar->devices[k]));
        HW_CHECK(cudaEventRecord(ar->ready[k], streams[k]));
    }
    HW_CHECK(cudaSetDevice(home));
    for (int k = 1; k < n; k++) {
        HW_CHECK(cudaStreamWaitEvent(streams[0], ar->ready[k], 0));
        const float *term = buffers[k];
        if (ar->devices[k] != home) {
            HW_CHECK(cudaMemcpyPeerAsync(ar->staging, home, buffers[k], ar->devices[k], bytes, streams[0]));
            term = ar->staging;  // reused for the next replica: same stream, so in order
        }
        if (hw_cuda_add(streams[0], buffers[0], term, (int64_t)ar->count) != HW_OK) return HW_ERR;
    }
    HW_CHECK(cudaEventRecord(ar->summed, streams[0]));
    for (int k = 1; k < n; k++) {
        HW_CHECK(cudaSetDevice(ar->devices[k]));
        HW_CHECK(cudaStreamWaitEvent(streams[k], ar->summed, 0));
        if (ar->devices[k] == home) {
            HW_CHECK(cudaMemcpyAsync(buffers[k], buffers[0], bytes, cudaMemcpyDeviceToDevice, streams[k]));
        } else {
            HW_CHECK(cudaMemcpyPeerAsync(buffers[k], ar->devices[k], buffers[0], home, bytes, streams[k]));
        }
        HW_CHECK(cudaEventRecord(ar->copied[k], streams[k]));
    }
    // Replica 0's buffer must not be overwritten (its next backward) before every copy of it is
    // taken: later work on stream 0 waits for them.
    HW_CHECK(cudaSetDevice(home));
    for (int k = 1; k < n; k++) HW_CHECK(cudaStreamWaitEvent(streams[0], ar->copied[k], 0));
    return HW_OK;
}

extern "C" int hw_cuda_allreduce_sum(hw_cuda_allreduce *ar, float *const *buffers, const hw_cuda_stream *streams) {
    if (ar->n == 1 || ar->count == 0) return HW_OK;
#ifdef HW_HAVE_NCCL
    if (ar->use_nccl) return sum_by_nccl(ar, buffers, streams);
#endif
    return sum_by_copies(ar, buffers, streams);
}
