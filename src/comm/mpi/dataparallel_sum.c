// reduce: DataParallel across ranks (include/hw/comm.h): the sum of the gradients over the
// ranks, and the check that every rank holds the same weights.
#include <mpi.h>  // before mpi_side.h, for comm_mpi_wait

#include "hw/comm.h"

#include "mpi_side.h"
#include "hw/err.h"
#include "hw/option.h"
#include "hw/signals.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

// A step's sum is bounded by the watchdog (world.c). A blocking MPI_Allreduce waits for ever on a
// rank that is stuck or gone; Open MPI's non-blocking all-reduce, polled, would be bounded but
// measured 13% fewer DataParallel samples/s across 2 ranks (another algorithm, libnbc's). So the
// blocking call stays, and the watchdog armed around it ends this rank when the sum has not
// completed in --sync-timeout seconds; mpirun then ends the job, as for any rank that exits
// without MPI_Finalize.
static char sum_timeout_message[256];

static void sum_message_make(double timeout_s) {
    int rank = -1, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    snprintf(sum_timeout_message, sizeof sum_timeout_message,
             "hogwild (rank %d of %d): a step's gradient sum has not completed within the ranks' timeout of %g s%s: "
             "another rank is stuck or gone\n",
             rank, size, timeout_s, hw_option_hint(HW_OPTION_SYNC_TIMEOUT));
}

int comm_mpi_sum(float *buf, size_t n, double timeout_s) {
    if (timeout_s > 0 && !sum_timeout_message[0]) sum_message_make(timeout_s);
    // MPI counts are ints: a model beyond 2^31 floats goes in pieces.
    for (size_t done = 0; done < n;) {
        int count = n - done > INT_MAX ? INT_MAX : (int)(n - done);
        if (timeout_s > 0 && comm_mpi_watchdog(timeout_s, sum_timeout_message) != HW_OK) return HW_ERR;
        int code = MPI_Allreduce(MPI_IN_PLACE, buf + done, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        if (timeout_s > 0 && comm_mpi_watchdog(0, NULL) != HW_OK) return HW_ERR;
        if (code != MPI_SUCCESS) return comm_mpi_failed(code, "the gradient sum (MPI_Allreduce)");
        done += (size_t)count;
    }
    return HW_OK;
}

int comm_mpi_sum_polled(float *buf, size_t n, double timeout_s, const char *what) {
    if (n > INT_MAX) return hw_fail("%s: %zu floats are more than one MPI message holds", what, n);
    MPI_Request request;
    int code = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &request);
    if (code != MPI_SUCCESS) return comm_mpi_failed(code, what);
    return comm_mpi_wait(&request, 1, timeout_s, 0, what);
}

// The broadcast and the MIN reduce are non-blocking and polled, so that a rank stuck or gone
// cannot hold the others: every wait across ranks ends within the job's --sync-timeout.
int comm_mpi_bcast(void *buf, size_t bytes, int root) {
    if (bytes > INT_MAX) return hw_fail("a broadcast of %zu bytes is more than one MPI message holds", bytes);
    MPI_Request request;
    int code = MPI_Ibcast(buf, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD, &request);
    if (code != MPI_SUCCESS) return comm_mpi_failed(code, "MPI_Ibcast");
    return comm_mpi_wait(&request, 1, comm_mpi_timeout(), 0, "a broadcast from rank 0");
}

int comm_mpi_min_int(int *value) {
    MPI_Request request;
    int code = MPI_Iallreduce(MPI_IN_PLACE, value, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &request);
    if (code != MPI_SUCCESS) return comm_mpi_failed(code, "MPI_Iallreduce (MIN)");
    return comm_mpi_wait(&request, 1, comm_mpi_timeout(), 0, "the MIN over the ranks");
}

// FNV-1a over the weights' bytes: equal weights, equal hashes; any differing bit, almost surely not.
static uint64_t weights_hash(const float *weights, size_t n) {
    const unsigned char *bytes = (const unsigned char *)weights;
    uint64_t hash = 14695981039346656037ull;
    for (size_t i = 0; i < n * sizeof(float); i++) hash = (hash ^ bytes[i]) * 1099511628211ull;
    return hash;
}

// comm_mpi_wait: Hogwild's coupling leaves on a stop signal (Ctrl-C on mpirun reaches every rank
// as SIGTERM, not at once: another rank may already have left, and this one must get on to
// saving); DataParallel does not, since its ranks agree on the stop in a step's sum and leave
// together after it.
int comm_mpi_wait(MPI_Request *requests, int n, double timeout_s, int leave_on_stop, const char *what) {
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        int done = 0;
        int code = MPI_Testall(n, requests, &done, MPI_STATUSES_IGNORE);
        if (code != MPI_SUCCESS) return comm_mpi_failed(code, what);
        if (done) return HW_OK;
        if (leave_on_stop && hw_stop_signal()) {
            return hw_fail("%s: interrupted by %s", what, hw_stop_signal_name(hw_stop_signal()));
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        double waited = (double)(now.tv_sec - start.tv_sec) + (double)(now.tv_nsec - start.tv_nsec) * 1e-9;
        if (timeout_s > 0 && waited > timeout_s) {
            int rank = -1;
            MPI_Comm_rank(MPI_COMM_WORLD, &rank);
            return hw_fail("rank %d: %s has not completed within the ranks' timeout of %g s%s: another rank is stuck "
                           "or gone",
                           rank, what, timeout_s, hw_option_hint(HW_OPTION_SYNC_TIMEOUT));
        }
        struct timespec pause = {0, 200 * 1000L};
        nanosleep(&pause, NULL);
    }
}

static int weights_agree(const float *weights, size_t n, const char *when, double timeout_s, int leave_on_stop) {
    uint64_t mine = weights_hash(weights, n), low = mine, high = mine;
    MPI_Request requests[2];
    int code = MPI_Iallreduce(MPI_IN_PLACE, &low, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD, &requests[0]);
    if (code == MPI_SUCCESS) {
        code = MPI_Iallreduce(MPI_IN_PLACE, &high, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD, &requests[1]);
    }
    if (code != MPI_SUCCESS) return comm_mpi_failed(code, "the weights check (MPI_Iallreduce)");
    char what[160];
    snprintf(what, sizeof what, "the weights check at %s", when);
    if (comm_mpi_wait(requests, 2, timeout_s, leave_on_stop, what) != HW_OK) return HW_ERR;
    if (low != high) {
        int rank = -1;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        return hw_fail("rank %d: the ranks' weights differ at %s (hash %016llx here; they range from %016llx to "
                       "%016llx): the ranks no longer train one model",
                       rank, when, (unsigned long long)mine, (unsigned long long)low, (unsigned long long)high);
    }
    return HW_OK;
}

int comm_mpi_weights_agree_within(const float *weights, size_t n, const char *when, double timeout_s) {
    return weights_agree(weights, n, when, timeout_s, 1);
}

int comm_mpi_weights_agree(const float *weights, size_t n, const char *when) {
    return weights_agree(weights, n, when, comm_mpi_timeout(), 0);
}
