// ranks: the sum across the ranks of an mpirun job, DataParallel on GPU ranks (ranks.cu). Private
// to src/cuda/ (the GPU trainers) and the tests.
//
// One NCCL communicator per rank, on its replica 0's GPU: rank 0 makes the unique id
// (hw_cuda_ranks_id, ncclGetUniqueId), every rank gets it from rank 0 (hw_comm_bcast), then opens
// its place in the communicator (hw_cuda_ranks_open, ncclCommInitRank, which waits for all
// ranks). Every failure names the rank, the host, the GPU and NCCL's own words. Without NCCL
// compiled in (HW_HAVE_NCCL), every call fails saying so.
#ifndef HW_CUDA_RANKS_H
#define HW_CUDA_RANKS_H

#include "device.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { HW_NCCL_ID_BYTES = 128 };
typedef struct hw_cuda_ranks hw_cuda_ranks;
// The unique id of a new communicator (rank 0 calls it, then sends the id to the others).
int hw_cuda_ranks_id(unsigned char id[HW_NCCL_ID_BYTES]);
// `replicas` buffers of `count` floats, buffer k on cuda:devices[k] (replica 0's GPU is the rank's
// in the communicator), will be summed; `world_rank` of `world_size`.
int hw_cuda_ranks_open(hw_cuda_ranks **ranks, const unsigned char id[HW_NCCL_ID_BYTES], int world_rank, int world_size,
                       const int *devices, int replicas, size_t count);
void hw_cuda_ranks_free(hw_cuda_ranks *ranks);
// Sums buffers[0] over the ranks, in place (ncclAllReduce, ncclSum, on streams[0]), WAITS for it,
// polling the stream and NCCL's asynchronous error, at most timeout_s seconds (0: no limit; past
// it the communicator is aborted and the error names --sync-timeout), then queues a copy of the sum
// into buffers[1..replicas) on their streams (later work on any stream sees it). Every rank gets
// the same bits. The buffers must hold this rank's sum already (hw_cuda_allreduce_sum).
int hw_cuda_ranks_sum(hw_cuda_ranks *ranks, float *const *buffers, const hw_cuda_stream *streams, double timeout_s);
// "ncclAllReduce across R ranks (NCCL version)".
const char *hw_cuda_ranks_method(const hw_cuda_ranks *ranks);

#ifdef __cplusplus
}
#endif

#endif
