// nccl: the simulated device's NCCL (tests only, `make sim`): communicators across the processes
// of one host, as the ranks of an mpirun job on the simulated device use them (src/cuda/ranks.cu).
//
// Nothing here uses MPI: as with the real NCCL, the ranks find each other only through the unique
// id, which the program must send to every rank itself. The id names a memfd of the process that
// made it (pid, fd, a nonce), the communicator's rendezvous: each rank opens it through
// /proc/<pid>/fd/<fd> (as the simulated CUDA IPC does), takes its slot, and publishes two memfds
// of its own for its inputs. A rank whose id was not the others' meets nobody, and its
// ncclCommInitRank fails after JOIN_SECONDS, saying so.
//
// ncclAllReduce, like the real one, only queues: it writes the rank's input into its memfd for
// that collective (the simulated device's memory is host memory, and all earlier work on the
// stream is done) and marks the collective in flight on the stream. It completes when every rank
// has posted its input: each rank then sums the inputs in rank order, so that every rank gets the
// same bits. cudaStreamQuery tries to complete it (cudaErrorNotReady until then); any other use of
// the stream waits for it (work queued behind it needs its result). A rank that posts collective
// s has completed s - 1, so every rank has read everyone's s - 2: two memfds per rank, used in
// turn, are never overwritten while read. A peer whose process is gone makes the collective fail
// with ncclRemoteError (ncclCommGetAsyncError); it then stays in flight until ncclCommAbort, as a
// real NCCL kernel would spin.
#include "nccl.h"
#include "sim.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { MAX_RANKS = 64, MAX_COMMS = 16, JOIN_SECONDS = 60 };
static const char ID_MAGIC[16] = "hw-simnccl-id";

typedef struct {
    char magic[16];
    int32_t pid;  // the process holding the rendezvous memfd
    int32_t fd;
    uint64_t nonce;
} id_body;

typedef struct {
    _Atomic int32_t pid;  // 0: the slot is free
    int32_t data_fd[2];   // in pid: the inputs of odd and even collectives
    int32_t device;
    char host[64];
    _Atomic uint64_t posted;    // the last collective whose input is written (0: none)
    _Atomic uint64_t count[2];  // the floats of the last odd and even ones (a rank may post s + 1
                                // before another has read its s)
} rank_slot;

typedef struct {
    uint64_t nonce;
    _Atomic int32_t nranks;  // set by the first rank to join
    _Atomic int32_t joined;
    rank_slot slot[MAX_RANKS];
} rendezvous;

struct ncclComm {
    rendezvous *rv;
    int rank, nranks;
    int own_fd[2];
    size_t own_bytes[2];
    int peer_fd[MAX_RANKS][2];  // this process's descriptors of every rank's memfds
    uint64_t seq;               // collectives posted
    // The collective in flight, if any.
    int pending, failed;
    cudaStream_t stream;
    float *recv;
    size_t count;
    ncclResult_t async;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static ncclComm_t comms[MAX_COMMS];
static char last_error[512];

static ncclResult_t fail(ncclResult_t result, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static ncclResult_t fail(ncclResult_t result, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, args);
    va_end(args);
    return result;
}

const char *ncclGetErrorString(ncclResult_t result) {
    switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    }
    return "unknown result code";
}

const char *ncclGetLastError(ncclComm_t comm) {
    (void)comm;
    return last_error;
}

ncclResult_t ncclGetVersion(int *version) {
    *version = 22800;
    return ncclSuccess;
}

ncclResult_t ncclGroupStart(void) { return ncclSuccess; }
ncclResult_t ncclGroupEnd(void) { return ncclSuccess; }

ncclResult_t ncclCommInitAll(ncclComm_t *comms_out, int ndev, const int *devlist) {
    (void)devlist;
    for (int i = 0; i < ndev; i++) comms_out[i] = NULL;
    return fail(ncclInvalidUsage, "the simulated NCCL has communicators across processes only (ncclCommInitRank), "
                                  "not one process driving several GPUs (ncclCommInitAll)");
}

static void sleep_us(long us) {
    struct timespec pause = {0, us * 1000L};
    nanosleep(&pause, NULL);
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// Descriptor `fd` of process `pid`, opened in this one (a dup when it is this process's own).
static int open_remote_fd(int pid, int fd) {
    if (pid == (int)getpid()) return fcntl(fd, F_DUPFD_CLOEXEC, 0);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", pid, fd);
    return open(path, O_RDWR | O_CLOEXEC);
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    memset(id, 0, sizeof *id);
    int fd = memfd_create("hw-simnccl-rendezvous", MFD_CLOEXEC);
    if (fd < 0) return fail(ncclSystemError, "memfd_create: %s", strerror(errno));
    if (ftruncate(fd, sizeof(rendezvous)) != 0) {
        close(fd);
        return fail(ncclSystemError, "ftruncate: %s", strerror(errno));
    }
    rendezvous *rv = mmap(NULL, sizeof *rv, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (rv == MAP_FAILED) {
        close(fd);
        return fail(ncclSystemError, "mmap: %s", strerror(errno));
    }
    id_body body = {.pid = (int32_t)getpid(), .fd = fd};
    memcpy(body.magic, ID_MAGIC, sizeof body.magic);
    body.nonce = ((uint64_t)getpid() << 32) ^ (uint64_t)(now_seconds() * 1e9) ^ (uint64_t)(uintptr_t)rv;
    rv->nonce = body.nonce;
    munmap(rv, sizeof *rv);
    // The memfd stays open in this process for the ranks to find: it is the id.
    memcpy(id->internal, &body, sizeof body);
    return ncclSuccess;
}

static void comm_free(ncclComm_t c) {
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_COMMS; i++) {
        if (comms[i] == c) comms[i] = NULL;
    }
    pthread_mutex_unlock(&lock);
    for (int r = 0; r < MAX_RANKS; r++) {
        for (int p = 0; p < 2; p++) {
            if (c->peer_fd[r][p] >= 0) close(c->peer_fd[r][p]);
        }
    }
    for (int p = 0; p < 2; p++) {
        if (c->own_fd[p] >= 0) close(c->own_fd[p]);
    }
    if (c->rv) munmap(c->rv, sizeof *c->rv);
    free(c);
}

static int comm_live(ncclComm_t c) {
    pthread_mutex_lock(&lock);
    int live = 0;
    for (int i = 0; i < MAX_COMMS && c; i++) live |= comms[i] == c;
    pthread_mutex_unlock(&lock);
    return live;
}

// Every rank has joined: the peers' memfds, and NCCL's refusal of two ranks on one GPU of a host.
static ncclResult_t join_peers(ncclComm_t c) {
    const rendezvous *rv = c->rv;
    for (int r = 0; r < c->nranks; r++) {
        for (int q = 0; q < r; q++) {
            if (rv->slot[r].device == rv->slot[q].device && strcmp(rv->slot[r].host, rv->slot[q].host) == 0) {
                return fail(ncclInvalidUsage, "Duplicate GPU detected: rank %d and rank %d both on cuda:%d of host %s",
                            q, r, rv->slot[r].device, rv->slot[r].host);
            }
        }
        for (int p = 0; p < 2; p++) {
            c->peer_fd[r][p] = open_remote_fd(rv->slot[r].pid, rv->slot[r].data_fd[p]);
            if (c->peer_fd[r][p] < 0) {
                return fail(ncclSystemError, "rank %d cannot open rank %d's memory (process %d): %s", c->rank, r,
                            (int)rv->slot[r].pid, strerror(errno));
            }
        }
    }
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *out, int nranks, ncclUniqueId id, int rank) {
    *out = NULL;
    if (sim_enter("ncclCommInitRank") != cudaSuccess) return ncclUnhandledCudaError;
    if (nranks < 1 || nranks > MAX_RANKS || rank < 0 || rank >= nranks) {
        return fail(ncclInvalidArgument, "rank %d of %d ranks (the simulator holds 1 to %d)", rank, nranks, MAX_RANKS);
    }
    id_body body;
    memcpy(&body, id.internal, sizeof body);
    if (memcmp(body.magic, ID_MAGIC, sizeof body.magic) != 0) {
        return fail(ncclInvalidArgument, "the unique id was not made by ncclGetUniqueId");
    }
    ncclComm_t c = calloc(1, sizeof *c);
    if (!c) abort();
    c->rank = rank;
    c->nranks = nranks;
    c->own_fd[0] = c->own_fd[1] = -1;
    for (int r = 0; r < MAX_RANKS; r++) c->peer_fd[r][0] = c->peer_fd[r][1] = -1;
    int fd = open_remote_fd(body.pid, body.fd);
    if (fd < 0) {
        comm_free(c);
        return fail(ncclSystemError, "cannot reach the unique id's process %d: %s", (int)body.pid, strerror(errno));
    }
    c->rv = mmap(NULL, sizeof *c->rv, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (c->rv == MAP_FAILED) {
        c->rv = NULL;
        comm_free(c);
        return fail(ncclSystemError, "mmap: %s", strerror(errno));
    }
    rendezvous *rv = c->rv;
    if (rv->nonce != body.nonce) {
        comm_free(c);
        return fail(ncclInvalidArgument, "the unique id's communicator is gone (process %d)", (int)body.pid);
    }
    int32_t expected = 0;
    if (!atomic_compare_exchange_strong(&rv->nranks, &expected, nranks) && expected != nranks) {
        comm_free(c);
        return fail(ncclInvalidUsage, "rank %d joined with %d ranks, another rank with %d", rank, nranks, expected);
    }
    rank_slot *mine = &rv->slot[rank];
    for (int p = 0; p < 2; p++) {
        c->own_fd[p] = memfd_create("hw-simnccl-input", MFD_CLOEXEC);
        if (c->own_fd[p] < 0) {
            comm_free(c);
            return fail(ncclSystemError, "memfd_create: %s", strerror(errno));
        }
        mine->data_fd[p] = c->own_fd[p];
    }
    mine->device = sim_current_device();
    gethostname(mine->host, sizeof mine->host - 1);
    expected = 0;
    if (!atomic_compare_exchange_strong(&mine->pid, &expected, (int32_t)getpid())) {
        comm_free(c);
        return fail(ncclInvalidUsage, "rank %d joined twice (processes %d and %d)", rank, (int)expected, (int)getpid());
    }
    atomic_fetch_add(&rv->joined, 1);
    double deadline = now_seconds() + JOIN_SECONDS;
    while (atomic_load(&rv->joined) < nranks) {
        if (now_seconds() > deadline) {
            int joined = atomic_load(&rv->joined);
            comm_free(c);
            return fail(ncclSystemError, "only %d of %d ranks joined in %d s: did every rank get the same unique id?",
                        joined, nranks, JOIN_SECONDS);
        }
        sleep_us(1000);
    }
    ncclResult_t status = join_peers(c);
    if (status != ncclSuccess) {
        comm_free(c);
        return status;
    }
    pthread_mutex_lock(&lock);
    int placed = 0;
    for (int i = 0; i < MAX_COMMS && !placed; i++) {
        if (!comms[i]) comms[i] = c, placed = 1;
    }
    pthread_mutex_unlock(&lock);
    if (!placed) {
        comm_free(c);
        return fail(ncclInternalError, "more than %d communicators in one process", MAX_COMMS);
    }
    *out = c;
    return ncclSuccess;
}

// Completes c's collective in flight when every rank has posted its input; 1 when none is left
// in flight (done or none), 0 when it still waits (or failed: it then stays until the abort).
static int try_complete(ncclComm_t c) {
    if (!c->pending) return 1;
    if (c->failed) return 0;
    rendezvous *rv = c->rv;
    for (int r = 0; r < c->nranks; r++) {
        if (atomic_load(&rv->slot[r].posted) >= c->seq) continue;
        int pid = atomic_load(&rv->slot[r].pid);
        if (kill(pid, 0) != 0 && errno == ESRCH) {
            c->failed = 1;
            c->async = fail(ncclRemoteError, "rank %d (process %d) exited before collective %llu", r, pid,
                            (unsigned long long)c->seq);
        }
        return 0;
    }
    const int p = (int)(c->seq & 1);
    const size_t bytes = c->count * sizeof(float);
    for (int r = 0; r < c->nranks; r++) {
        if (atomic_load(&rv->slot[r].count[p]) != c->count) {
            c->failed = 1;
            c->async = fail(ncclInvalidUsage, "collective %llu: rank %d sums %llu floats, rank %d %zu",
                            (unsigned long long)c->seq, r, (unsigned long long)atomic_load(&rv->slot[r].count[p]),
                            c->rank, c->count);
            return 0;
        }
    }
    if (bytes == 0) {
        c->pending = 0;
        return 1;
    }
    const float *inputs[MAX_RANKS];
    for (int r = 0; r < c->nranks; r++) {
        void *at = mmap(NULL, bytes, PROT_READ, MAP_SHARED, c->peer_fd[r][p], 0);
        if (at == MAP_FAILED) abort();  // the rank grew it to `bytes` before posting
        inputs[r] = at;
    }
    for (size_t i = 0; i < c->count; i++) {
        float sum = inputs[0][i];
        for (int r = 1; r < c->nranks; r++) sum += inputs[r][i];
        c->recv[i] = sum;
    }
    for (int r = 0; r < c->nranks; r++) munmap((void *)inputs[r], bytes);
    c->pending = 0;
    return 1;
}

int sim_nccl_settle(cudaStream_t stream, int wait) {
    ncclComm_t mine[MAX_COMMS];
    int n = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_COMMS; i++) {
        if (comms[i] && comms[i]->pending && comms[i]->stream == stream) mine[n++] = comms[i];
    }
    pthread_mutex_unlock(&lock);
    int left = 0;
    for (int i = 0; i < n; i++) {
        while (!try_complete(mine[i])) {
            if (!wait) break;
            if (mine[i]->failed) {
                // A GPU would queue the work and hang behind the collective; the simulator says so.
                sim_refuse(cudaErrorLaunchFailure, "work on a stream",
                           "queued behind a collective that cannot "
                           "complete (%s): a GPU would wait for ever; call ncclCommAbort first",
                           last_error);
                mine[i]->pending = 0;
                break;
            }
            sleep_us(100);
        }
        left |= mine[i]->pending;
    }
    return left;
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t c, cudaStream_t stream) {
    if (!comm_live(c)) return fail(ncclInvalidArgument, "ncclAllReduce on a communicator that is not open");
    if (datatype != ncclFloat || op != ncclSum) {
        return fail(ncclInvalidArgument, "the simulated NCCL sums floats only (datatype %d, op %d)", (int)datatype,
                    (int)op);
    }
    if (c->failed) return c->async;
    const size_t bytes = count * sizeof(float);
    // Where the buffers lie and whether the stream may touch them, as for a kernel; this also
    // completes the collective before on this stream (a stream's work is in order).
    hw_sim_span spans[2] = {{sendbuff, bytes, 0}, {recvbuff, bytes, 1}};
    cudaError_t e = hw_sim_launch_check(stream, spans, 2);
    if (e != cudaSuccess) return fail(ncclUnhandledCudaError, "ncclAllReduce: %s", cudaGetErrorString(e));
    // The same communicator on another stream: its collectives are in order too.
    while (c->pending && !c->failed) {
        if (!try_complete(c)) sleep_us(100);
    }
    if (c->failed) return c->async;
    c->seq++;
    const int p = (int)(c->seq & 1);
    if (bytes > c->own_bytes[p]) {
        if (ftruncate(c->own_fd[p], (off_t)bytes) != 0) {
            return fail(ncclSystemError, "ftruncate of %zu bytes: %s", bytes, strerror(errno));
        }
        c->own_bytes[p] = bytes;
    }
    if (bytes > 0) {
        void *at = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, c->own_fd[p], 0);
        if (at == MAP_FAILED) return fail(ncclSystemError, "mmap: %s", strerror(errno));
        memcpy(at, sendbuff, bytes);
        munmap(at, bytes);
    }
    rank_slot *mine = &c->rv->slot[c->rank];
    atomic_store(&mine->count[p], (uint64_t)count);
    atomic_store(&mine->posted, c->seq);
    c->pending = 1;
    c->stream = stream;
    c->recv = recvbuff;
    c->count = count;
    return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *async_error) {
    *async_error = ncclSuccess;
    if (!comm_live(c)) return fail(ncclInvalidArgument, "ncclCommGetAsyncError on a communicator that is not open");
    *async_error = c->async;
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t c) {
    if (!comm_live(c)) return fail(ncclInvalidArgument, "ncclCommAbort on a communicator that is not open");
    comm_free(c);
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t c) {
    if (!comm_live(c)) return fail(ncclInvalidArgument, "ncclCommDestroy on a communicator that is not open");
    if (c->pending) {
        if (c->failed) {
            sim_refuse(cudaErrorLaunchFailure, "ncclCommDestroy",
                       "with a collective that cannot complete (%s): "
                       "a GPU would wait for ever; call ncclCommAbort instead",
                       last_error);
        } else {
            while (!try_complete(c)) sleep_us(100);
        }
    }
    comm_free(c);
    return ncclSuccess;
}
