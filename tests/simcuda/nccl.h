// The simulated device's nccl.h: the part of NCCL that hogwild's host code uses (src/cuda/ranks.cu,
// allreduce.cu), implemented on the host by nccl.c for `make sim`. Names, types and values follow
// the real header where the code relies on them.
//
// What is simulated: communicators across PROCESSES on one host (ncclGetUniqueId,
// ncclCommInitRank, ncclAllReduce with ncclSum on floats, the asynchronous error, abort). Not
// ncclCommInitAll (one process driving several GPUs): it fails, saying so, and allreduce.cu then
// takes its copies path, as it does where NCCL cannot start.
#ifndef HW_SIMCUDA_NCCL_H
#define HW_SIMCUDA_NCCL_H

#include "cuda_runtime.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
    char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef struct ncclComm *ncclComm_t;

typedef enum {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
    ncclInProgress = 7,
} ncclResult_t;

typedef enum { ncclFloat = 7 } ncclDataType_t;
typedef enum { ncclSum = 0 } ncclRedOp_t;

const char *ncclGetErrorString(ncclResult_t result);
// The last failure's details (this process's, for any communicator).
const char *ncclGetLastError(ncclComm_t comm);
ncclResult_t ncclGetVersion(int *version);
ncclResult_t ncclGetUniqueId(ncclUniqueId *id);
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank);
ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *async_error);
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
