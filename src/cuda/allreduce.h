// allreduce: the sum of the replicas' gradients within one process, DataParallel on GPUs
// (allreduce.cu). Private to src/cuda/ (the GPU trainers) and the tests.
#ifndef HW_CUDA_ALLREDUCE_H
#define HW_CUDA_ALLREDUCE_H

#include "device.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// Sums K buffers of `count` floats in place, so that every one ends with the element-wise sum:
// buffer k lives on cuda:devices[k] and is ordered on streams[k] (the call only queues work on
// those streams; work queued later on any of them sees the sum, and replica 0's buffer may be
// overwritten by later work on streams[0]). With NCCL compiled in (HW_HAVE_NCCL), allow_nccl and
// every device distinct: ncclAllReduce(ncclSum), one per replica in one ncclGroupStart/End, over
// communicators from ncclCommInitAll. Otherwise (replicas sharing a GPU, which one NCCL
// communicator refuses; no NCCL; NCCL failing to start or to run the first all-reduce of `count`
// floats that create tries on scratch buffers): replica 0 gathers each buffer (a peer copy, or
// none on the same GPU), adds them in replica order with a sum kernel, and every replica copies
// the sum back. Create fails on a device that does not exist.
typedef struct hw_cuda_allreduce hw_cuda_allreduce;
int hw_cuda_allreduce_create(hw_cuda_allreduce **ar, const int *devices, int n, size_t count, int allow_nccl);
void hw_cuda_allreduce_free(hw_cuda_allreduce *ar);
int hw_cuda_allreduce_sum(hw_cuda_allreduce *ar, float *const *buffers, const hw_cuda_stream *streams);
// How it reduces: "nccl (...)", "copies to cuda:0 and a sum kernel (<why not NCCL>)" or "none (one replica)".
const char *hw_cuda_allreduce_method(const hw_cuda_allreduce *ar);

#ifdef __cplusplus
}
#endif

#endif
