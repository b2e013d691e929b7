// reduce: DataParallel across ranks (include/hw/comm.h): the sum of the gradients over the
// ranks, and the check that every rank holds the same weights.
#include "hw/comm.h"

#include "comm_mpi.h"
#include "hw/err.h"

#include <limits.h>
#include <mpi.h>
#include <string.h>

int comm_mpi_sum(float *buf, size_t n) {
    // MPI counts are ints: a model beyond 2^31 floats goes in pieces.
    for (size_t done = 0; done < n;) {
        int count = n - done > INT_MAX ? INT_MAX : (int)(n - done);
        int code = MPI_Allreduce(MPI_IN_PLACE, buf + done, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        if (code != MPI_SUCCESS) return comm_mpi_failed(code, "the gradient sum (MPI_Allreduce)");
        done += (size_t)count;
    }
    return HW_OK;
}

int comm_mpi_min_int(int *value) {
    int code = MPI_Allreduce(MPI_IN_PLACE, value, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return code == MPI_SUCCESS ? HW_OK : comm_mpi_failed(code, "MPI_Allreduce (MIN)");
}

// FNV-1a over the weights' bytes: equal weights, equal hashes; any differing bit, almost surely not.
static uint64_t weights_hash(const float *weights, size_t n) {
    const unsigned char *bytes = (const unsigned char *)weights;
    uint64_t hash = 14695981039346656037ull;
    for (size_t i = 0; i < n * sizeof(float); i++) hash = (hash ^ bytes[i]) * 1099511628211ull;
    return hash;
}

int comm_mpi_weights_agree(const float *weights, size_t n, const char *when) {
    uint64_t mine = weights_hash(weights, n), low = mine, high = mine;
    int code = MPI_Allreduce(MPI_IN_PLACE, &low, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    if (code == MPI_SUCCESS) code = MPI_Allreduce(MPI_IN_PLACE, &high, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    if (code != MPI_SUCCESS) return comm_mpi_failed(code, "the weights check (MPI_Allreduce)");
    if (low != high) {
        int rank = -1;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        return hw_fail("rank %d: the ranks' weights differ at %s (hash %016llx here; they range from %016llx to "
                       "%016llx): the ranks no longer train one model",
                       rank, when, (unsigned long long)mine, (unsigned long long)low, (unsigned long long)high);
    }
    return HW_OK;
}
