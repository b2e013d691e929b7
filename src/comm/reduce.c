// reduce: DataParallel across ranks (include/hw/comm.h): the sum of the gradients over the
// ranks, and the check that every rank holds the same weights.
#include "hw/comm.h"

#include "comm_mpi.h"
#include "hw/err.h"

#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

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

// Waits for `requests`, polling, at most timeout_s seconds (0: for ever): HW_ERR naming `what`
// when they did not complete in time.
static int comm_mpi_wait(MPI_Request *requests, int n, double timeout_s, const char *what) {
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        int done = 0;
        int code = MPI_Testall(n, requests, &done, MPI_STATUSES_IGNORE);
        if (code != MPI_SUCCESS) return comm_mpi_failed(code, what);
        if (done) return HW_OK;
        clock_gettime(CLOCK_MONOTONIC, &now);
        double waited = (double)(now.tv_sec - start.tv_sec) + (double)(now.tv_nsec - start.tv_nsec) * 1e-9;
        if (timeout_s > 0 && waited > timeout_s) {
            int rank = -1;
            MPI_Comm_rank(MPI_COMM_WORLD, &rank);
            return hw_fail("rank %d: %s has not completed in %g s (--sync-timeout): another rank is stuck or gone",
                           rank, what, timeout_s);
        }
        struct timespec pause = {0, 200 * 1000L};
        nanosleep(&pause, NULL);
    }
}

int comm_mpi_weights_agree_within(const float *weights, size_t n, const char *when, double timeout_s) {
    uint64_t mine = weights_hash(weights, n), low = mine, high = mine;
    MPI_Request requests[2];
    int code = MPI_Iallreduce(MPI_IN_PLACE, &low, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD, &requests[0]);
    if (code == MPI_SUCCESS) {
        code = MPI_Iallreduce(MPI_IN_PLACE, &high, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD, &requests[1]);
    }
    if (code != MPI_SUCCESS) return comm_mpi_failed(code, "the weights check (MPI_Iallreduce)");
    char what[160];
    snprintf(what, sizeof what, "the weights check at %s", when);
    if (comm_mpi_wait(requests, 2, timeout_s, what) != HW_OK) return HW_ERR;
    if (low != high) {
        int rank = -1;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        return hw_fail("rank %d: the ranks' weights differ at %s (hash %016llx here; they range from %016llx to "
                       "%016llx): the ranks no longer train one model",
                       rank, when, (unsigned long long)mine, (unsigned long long)low, (unsigned long long)high);
    }
    return HW_OK;
}

int comm_mpi_weights_agree(const float *weights, size_t n, const char *when) {
    return comm_mpi_weights_agree_within(weights, n, when, 0);
}
