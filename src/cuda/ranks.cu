// ranks: DataParallel's gradient sum across the GPU ranks of an mpirun job (ranks.h,
// hw_cuda_ranks_*). One NCCL communicator holds one GPU per rank, replica 0's; the rank's other
// replicas (on its GPU) get copies of the sum. The unique id travels by MPI (the caller's
// hw_comm_bcast): this file calls NCCL and CUDA only.
//
// The wait. ncclAllReduce only queues a kernel; a rank stuck or gone leaves it spinning on the
// GPU for ever, and a blocking cudaStreamSynchronize with it. So the host polls: cudaStreamQuery
// (done?), ncclCommGetAsyncError (a transport failed?) and the clock (--sync-timeout). Past the
// timeout, ncclCommAbort stops the kernel and frees the communicator, and the error names
// --sync-timeout; the caller then ends the job (MPI_Abort). The host waits for every sum before
// queuing the SGD step, which costs a kernel launch's latency per step against queuing it behind
// the sum; in exchange no rank ever hangs.
#include "check.cuh"
#include "ranks.h"

extern "C" {
#include "hw/option.h"  // hw_option_hint: option.h has no C++ guards of its own
}

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct hw_cuda_ranks {
    int rank, size, replicas;
    int *devices;  // devices[k]: replica k's GPU; devices[0] is the rank's in NCCL
    size_t count;
#ifdef HW_HAVE_NCCL
    ncclComm_t comm;  // NULL once aborted
#endif
    cudaEvent_t *copied;  // copied[k], on devices[k]: replica k has its copy of the sum
    char host[64];
    char method[160];
};

#ifdef HW_HAVE_NCCL

static_assert(sizeof(ncclUniqueId) == HW_NCCL_ID_BYTES, "NCCL's unique id is not 128 bytes");

// "rank R (host H, cuda:D)": who failed, in every message.
static void who(const hw_cuda_ranks *r, char *text, size_t cap) {
    snprintf(text, cap, "rank %d of %d (host %s, cuda:%d)", r->rank, r->size, r->host, r->devices[0]);
}

// NCCL's error string, and its last message when it has one (why, in NCCL's words).
static int nccl_failed(const hw_cuda_ranks *r, ncclResult_t status, const char *what) {
    char name[160];
    who(r, name, sizeof name);
    const char *last = r->comm ? ncclGetLastError(r->comm) : ncclGetLastError(NULL);
    return hw_fail("%s: %s failed: %s%s%s", name, what, ncclGetErrorString(status), last && last[0] ? ": " : "",
                   last ? last : "");
}

extern "C" int hw_cuda_ranks_id(unsigned char id[HW_NCCL_ID_BYTES]) {
    ncclUniqueId unique;
    ncclResult_t status = ncclGetUniqueId(&unique);
    if (status != ncclSuccess) {
        char host[64] = "?";
        gethostname(host, sizeof host - 1);
        return hw_fail("rank 0 (host %s): ncclGetUniqueId failed: %s", host, ncclGetErrorString(status));
    }
    memcpy(id, unique.internal, HW_NCCL_ID_BYTES);
    return HW_OK;
}

extern "C" void hw_cuda_ranks_free(hw_cuda_ranks *r) {
    if (!r) return;
    if (r->comm) {
        // Abort, not Destroy: Destroy finalizes first, which waits for this rank's operations to be
        // flushed with its peers, and a failing rank gets here while the others may be gone or
        // stuck. Every sum was waited for, so nothing is in flight to lose; the job ends after.
        cudaSetDevice(r->devices[0]);
        ncclCommAbort(r->comm);
    }
    for (int k = 0; r->copied && k < r->replicas; k++) {
        cudaSetDevice(r->devices[k]);
        if (r->copied[k]) cudaEventDestroy(r->copied[k]);
    }
    cudaGetLastError();
    free(r->copied);
    free(r->devices);
    free(r);
}

extern "C" int hw_cuda_ranks_open(hw_cuda_ranks **out, const unsigned char id[HW_NCCL_ID_BYTES], int world_rank,
                                  int world_size, const int *devices, int replicas, size_t count) {
    *out = NULL;
    if (replicas < 1) return hw_fail("the sum across ranks needs at least one replica, got %d", replicas);
    hw_cuda_ranks *r = (hw_cuda_ranks *)calloc(1, sizeof *r);
    if (!r) return hw_fail("the sum across ranks: out of host memory");
    r->rank = world_rank;
    r->size = world_size;
    r->replicas = replicas;
    r->count = count;
    gethostname(r->host, sizeof r->host - 1);
    r->devices = (int *)malloc(sizeof(int) * (size_t)replicas);
    r->copied = (cudaEvent_t *)calloc((size_t)replicas, sizeof(cudaEvent_t));
    if (!r->devices || !r->copied) {
        hw_cuda_ranks_free(r);
        return hw_fail("the sum across ranks: out of host memory");
    }
    memcpy(r->devices, devices, sizeof(int) * (size_t)replicas);
    char name[160];
    who(r, name, sizeof name);
    for (int k = 0; k < replicas; k++) {
        cudaError_t e = cudaSetDevice(devices[k]);
        if (e == cudaSuccess && k > 0) e = cudaEventCreateWithFlags(&r->copied[k], cudaEventDisableTiming);
        if (e != cudaSuccess) {
            cudaGetLastError();
            hw_fail("%s: replica %d on cuda:%d: %s", name, k, devices[k], cudaGetErrorString(e));
            hw_cuda_ranks_free(r);
            return HW_ERR;
        }
    }
    if (cudaSetDevice(devices[0]) != cudaSuccess) {
        hw_cuda_ranks_free(r);
        return hw_fail("%s: cannot select its GPU", name);
    }
    ncclUniqueId unique;
    memcpy(unique.internal, id, HW_NCCL_ID_BYTES);
    // Waits until every rank has joined. NCCL refuses two ranks on one GPU ("Duplicate GPU").
    ncclResult_t status = ncclCommInitRank(&r->comm, world_size, unique, world_rank);
    if (status != ncclSuccess) {
        r->comm = NULL;
        nccl_failed(r, status, "ncclCommInitRank (joining the ranks' NCCL communicator)");
        hw_cuda_ranks_free(r);
        return HW_ERR;
    }
    int version = 0;
    ncclGetVersion(&version);
    snprintf(r->method, sizeof r->method, "ncclAllReduce across %d ranks (NCCL %d)", world_size, version);
    *out = r;
    return HW_OK;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// Ends the communicator after a failure: its kernel may wait for peers for ever.
static void abort_comm(hw_cuda_ranks *r) {
    if (!r->comm) return;
    ncclCommAbort(r->comm);
    r->comm = NULL;
}

// Polls until streams[0] has finished the sum: bounded by timeout_s, and by NCCL's own errors.
static int wait_for_sum(hw_cuda_ranks *r, cudaStream_t stream, double timeout_s) {
    const double started = now_seconds();
    char name[160];
    who(r, name, sizeof name);
    for (long polls = 0;; polls++) {
        cudaError_t e = cudaStreamQuery(stream);
        if (e == cudaSuccess) return HW_OK;
        if (e != cudaErrorNotReady) {
            cudaGetLastError();
            hw_fail("%s: the gradient sum across ranks (ncclAllReduce) failed on the GPU: %s", name,
                    cudaGetErrorString(e));
            abort_comm(r);
            return HW_ERR;
        }
        ncclResult_t async = ncclSuccess;
        ncclResult_t status = ncclCommGetAsyncError(r->comm, &async);
        if (status == ncclSuccess && async != ncclSuccess && async != ncclInProgress) status = async;
        if (status != ncclSuccess) {
            nccl_failed(r, status, "the gradient sum across ranks (ncclAllReduce)");
            abort_comm(r);
            return HW_ERR;
        }
        double waited = now_seconds() - started;
        if (timeout_s > 0 && waited > timeout_s) {
            abort_comm(r);
            return hw_fail("%s: a step's gradient sum (ncclAllReduce) has not completed within the ranks' timeout "
                           "of %g s%s: another rank is stuck or gone",
                           name, timeout_s, hw_option_hint(HW_OPTION_SYNC_TIMEOUT));
        }
        // A sum takes from tens of microseconds to milliseconds: spin briefly, then sleep a little.
        if (polls > 100) {
            struct timespec pause = {0, 50 * 1000L};
            nanosleep(&pause, NULL);
        }
    }
}

extern "C" int hw_cuda_ranks_sum(hw_cuda_ranks *r, float *const *buffers, const hw_cuda_stream *streams,
                                 double timeout_s) {
    char name[160];
    who(r, name, sizeof name);
    if (!r->comm) return hw_fail("%s: the NCCL communicator was aborted after an earlier failure", name);
    if (r->count == 0) return HW_OK;
    HW_CHECK(cudaSetDevice(r->devices[0]));
    ncclResult_t status = ncclAllReduce(buffers[0], buffers[0], r->count, ncclFloat, ncclSum, r->comm, streams[0]);
    if (status != ncclSuccess) {
        nccl_failed(r, status, "ncclAllReduce");
        abort_comm(r);
        return HW_ERR;
    }
    if (wait_for_sum(r, streams[0], timeout_s) != HW_OK) return HW_ERR;
    // The sum is complete (the host saw it): the other replicas copy it on their own streams, and
    // replica 0's next write to its buffer (its next backward) waits for those copies.
    const size_t bytes = r->count * sizeof(float);
    for (int k = 1; k < r->replicas; k++) {
        HW_CHECK(cudaSetDevice(r->devices[k]));
        if (r->devices[k] == r->devices[0]) {
            HW_CHECK(cudaMemcpyAsync(buffers[k], buffers[0], bytes, cudaMemcpyDeviceToDevice, streams[k]));
        } else {
            HW_CHECK(cudaMemcpyPeerAsync(buffers[k], r->devices[k], buffers[0], r->devices[0], bytes, streams[k]));
        }
        HW_CHECK(cudaEventRecord(r->copied[k], streams[k]));
    }
    HW_CHECK(cudaSetDevice(r->devices[0]));
    for (int k = 1; k < r->replicas; k++) HW_CHECK(cudaStreamWaitEvent(streams[0], r->copied[k], 0));
    return HW_OK;
}

extern "C" const char *hw_cuda_ranks_method(const hw_cuda_ranks *r) { return r->method; }

#else

static int without_nccl(void) {
    return hw_fail("DataParallel across GPU ranks sums the gradients with NCCL, and this build has none (NCCL was "
                   "not found when hogwild was built: install libnccl-dev and rebuild)");
}

extern "C" int hw_cuda_ranks_id(unsigned char id[HW_NCCL_ID_BYTES]) {
    (void)id;
    return without_nccl();
}

extern "C" int hw_cuda_ranks_open(hw_cuda_ranks **out, const unsigned char id[HW_NCCL_ID_BYTES], int world_rank,
                                  int world_size, const int *devices, int replicas, size_t count) {
    (void)id, (void)world_rank, (void)world_size, (void)devices, (void)replicas, (void)count;
    *out = NULL;
    return without_nccl();
}

extern "C" void hw_cuda_ranks_free(hw_cuda_ranks *r) { (void)r; }

extern "C" int hw_cuda_ranks_sum(hw_cuda_ranks *r, float *const *buffers, const hw_cuda_stream *streams,
                                 double timeout_s) {
    (void)r, (void)buffers, (void)streams, (void)timeout_s;
    return without_nccl();
}

extern "C" const char *hw_cuda_ranks_method(const hw_cuda_ranks *r) {
    (void)r;
    return "none (no NCCL)";
}

#endif
