// sim: what the simulated CUDA device's files share (runtime.c: devices, memory, copies, IPC;
// streams.c: streams, events, cuBLAS). Private to tests/simcuda/.
//
// Everything runs synchronously on the calling host thread: a copy or a kernel is done when its
// call returns, which is one valid order of CUDA's asynchronous work, so streams and events are
// bookkeeping (which device they belong to, whether they are alive, when an event was recorded).
#ifndef HW_SIMCUDA_SIM_H
#define HW_SIMCUDA_SIM_H

#include "cublas_v2.h"
#include "cuda_runtime.h"

#include <stddef.h>

enum { SIM_MAX_DEVICES = 8 };

// Every call starts with sim_enter: it starts the simulated CUDA in this process on first use and
// refuses any call in a process forked after its parent had started it (real CUDA fails there).
cudaError_t sim_enter(const char *call);
// A failure a correct program can meet (a device that does not exist, too little memory): set as
// the last error and returned.
cudaError_t sim_error(cudaError_t error, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// A misuse a real GPU would punish: also printed to stderr as "hogwild simulated CUDA: refused
// <call>: <why>", which `make sim` looks for in the test log.
cudaError_t sim_refuse(cudaError_t error, const char *call, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

int sim_current_device(void);

// Where a pointer range lies. HOST: not the simulator's (pageable host memory).
typedef enum { SIM_HOST, SIM_DEVICE, SIM_PINNED, SIM_OPENED } sim_kind;
typedef struct {
    sim_kind kind;
    int device;       // SIM_DEVICE, SIM_OPENED
    char *base;
    size_t size;
} sim_region;
// The region holding [ptr, ptr + bytes); cudaSuccess, or a refusal when the range starts inside a
// region and runs past its end.
cudaError_t sim_locate(const char *call, const void *ptr, size_t bytes, sim_region *out);
// Whether a kernel running on `device` may touch memory of region r.
int sim_reachable(int device, const sim_region *r);

// A live stream's device (the current device for the legacy stream, NULL); a refusal when the
// stream was never created or is destroyed.
cudaError_t sim_stream_device(const char *call, cudaStream_t stream, int *device);

// The monotonic clock in milliseconds.
double sim_now_ms(void);

#endif
