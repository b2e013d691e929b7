// sim: what the simulated CUDA device's files share (runtime.c: devices, memory, copies, IPC;
// streams.c: streams, events, cuBLAS; order.c: when the host may know work is done). Private to
// tests/simcuda/.
//
// Everything runs synchronously on the calling host thread: a copy or a kernel is done when its
// call returns, which is one valid order of CUDA's asynchronous work, so streams and events are
// bookkeeping (which device they belong to, whether they are alive, when an event was recorded),
// except for copies between the device and pinned host memory, which order.c holds until the host
// has waited for them.
#ifndef HW_SIMCUDA_SIM_H
#define HW_SIMCUDA_SIM_H

#include "cublas_v2.h"
#include "cuda_runtime.h"

#include <stddef.h>

#include <stdint.h>

enum { SIM_MAX_DEVICES = 8, SIM_MAX_STREAMS = 128 };

// Every call starts with sim_enter: it starts the simulated CUDA in this process on first use and
// refuses any call in a process forked after its parent had started it (real CUDA fails there).
cudaError_t sim_enter(const char *call);
// A failure a correct program can meet (a device that does not exist, too little memory): set as
// the last error and returned.
cudaError_t sim_error(cudaError_t error, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// A misuse a real GPU would punish: also printed to stderr as "hogwild simulated CUDA: refused
// <call>: <why>", which `make sim` looks for in the test log.
cudaError_t sim_refuse(cudaError_t error, const char *call, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

int sim_current_device(void);

// Where a pointer range lies. HOST: not the simulator's (pageable host memory).
typedef enum { SIM_HOST, SIM_DEVICE, SIM_PINNED, SIM_OPENED } sim_kind;
typedef struct {
    sim_kind kind;
    int device;  // SIM_DEVICE, SIM_OPENED
    char *base;
    size_t size;
    uint32_t
        *accesses;  // device memory: [id] the last write, [SIM_MAX_STREAMS + id] the last read by stream id (order.c)
} sim_region;
// The region holding [ptr, ptr + bytes); cudaSuccess, or a refusal when the range starts inside a
// region and runs past its end.
cudaError_t sim_locate(const char *call, const void *ptr, size_t bytes, sim_region *out);
// Whether a kernel running on `device` may touch memory of region r.
int sim_reachable(int device, const sim_region *r);

// A live stream's device (the current device for the legacy stream, NULL); a refusal when the
// stream was never created or is destroyed.
cudaError_t sim_stream_device(const char *call, cudaStream_t stream, int *device);

// The order.c id of a live stream (the current device's legacy stream for NULL); -1 when it is not
// tracked (more than SIM_MAX_STREAMS streams: its copies then land at once).
int sim_stream_id(cudaStream_t stream);

// ---- nccl.c ----
// Completes the simulated NCCL's collectives in flight on `stream` once every rank has posted its
// input: with `wait`, waits for them (work queued behind one needs its result; streams.c calls it
// for every use of a stream); without, tries once. Returns whether one is still in flight.
int sim_nccl_settle(cudaStream_t stream, int wait);

// ---- order.c ----
// A vector clock: how much of each stream's work (by order.c id) comes before a point.
typedef struct {
    uint32_t at[SIM_MAX_STREAMS];
} sim_clock;
int sim_order_new_stream(void);  // an id for a new stream, -1 when out of ids
int sim_order_legacy(int device);
void sim_order_event_record(int id, sim_clock *event);
void sim_order_stream_wait(int id, const sim_clock *event);
// The host waited for a stream, for an event, or for everything (device synchronisation, frees).
void sim_order_learn_stream(int id);
void sim_order_learn(const sim_clock *event);
void sim_order_learn_all(void);
// An asynchronous copy on stream id from the device into pinned host memory (held), or from pinned
// host memory to the device (done by the caller; its source is checked when the host knows it done).
void sim_order_copy_to_host(int id, uint32_t seq, void *host, const void *device, size_t bytes);
void sim_order_copy_from_host(int id, uint32_t seq, const void *host, size_t bytes);
// A new operation on stream id (after everything the host knows is done): its place on the stream.
uint32_t sim_order_op(int id);
// Operation seq on stream id reads (writes = 0) or writes device memory r: refused when another
// stream's conflicting access to it is not ordered before (no event wait, no host wait between).
cudaError_t sim_order_access(const char *call, int id, uint32_t seq, const sim_region *r, int writes);
// Around the simulator's own access to pinned memory: the held destinations' pages open, and closed.
void sim_order_unprotect(void);
void sim_order_protect(void);

#endif
