// reduce: DataParallel across ranks (include/hw/comm.h): the sum of the gradients over the
// ranks, and the check that every rank holds the same weights.
#include <mpi.h>  // before comm_mpi.h, for comm_mpi_wait

#include "hw/comm.h"

#include "comm_mpi.h"
#include "hw/err.h"
#include "hw/signals.h"

#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

// The watchdog of a step's sum. A blocking MPI_Allreduce waits for ever on a rank that is stuck
// or gone; Open MPI's non-blocking all-reduce, polled, would be bounded but measured 13% fewer
// DataParallel samples/s across 2 ranks (another algorithm, libnbc's). So the blocking call stays,
// and a timer armed around it ends this rank when the sum has not completed in --sync-timeout
// seconds: its handler writes the message and _exit()s (both async-signal-safe), and mpirun then
// ends the job, as for any rank that exits without MPI_Finalize.
static timer_t sum_timer;
static int sum_timer_made;
static char sum_timeout_message[256];
static size_t sum_timeout_length;

static void sum_timed_out(int sig) {
    (void)sig;
    ssize_t written = write(STDERR_FILENO, sum_timeout_message, sum_timeout_length);
    (void)written;
    _exit(1);
}

static int sum_timer_set(double seconds) {
    struct itimerspec when = {0};
    when.it_value.tv_sec = (time_t)seconds;
    when.it_value.tv_nsec = (long)((seconds - (double)(time_t)seconds) * 1e9);
    if (timer_settime(sum_timer, 0, &when, NULL) != 0) return hw_fail("the --sync-timeout timer: %s", strerror(errno));
    return HW_OK;
}

static int sum_timer_make(double timeout_s) {
    int rank = -1, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int length = snprintf(sum_timeout_message, sizeof sum_timeout_message,
                          "hogwild (rank %d of %d): a step's gradient sum has not completed in %g s (--sync-timeout): "
                          "another rank is stuck or gone\n",
                          rank, size, timeout_s);
    sum_timeout_length = length > 0 && (size_t)length < sizeof sum_timeout_message ? (size_t)length : 0;
    struct sigaction action = {0};
    action.sa_handler = sum_timed_out;
    sigemptyset(&action.sa_mask);
    struct sigevent event = {0};
    event.sigev_notify = SIGEV_SIGNAL;
    event.sigev_signo = SIGRTMIN + 1;  // not SIGALRM: src/signals.c's alarm bounds a stopping run
    if (sigaction(SIGRTMIN + 1, &action, NULL) != 0 || timer_create(CLOCK_MONOTONIC, &event, &sum_timer) != 0) {
        return hw_fail("the --sync-timeout timer: %s", strerror(errno));
    }
    sum_timer_made = 1;
    return HW_OK;
}

int comm_mpi_sum(float *buf, size_t n, double timeout_s) {
    if (timeout_s > 0 && !sum_timer_made && sum_timer_make(timeout_s) != HW_OK) return HW_ERR;
    // MPI counts are ints: a model beyond 2^31 floats goes in pieces.
    for (size_t done = 0; done < n;) {
        int count = n - done > INT_MAX ? INT_MAX : (int)(n - done);
        if (timeout_s > 0 && sum_timer_set(timeout_s) != HW_OK) return HW_ERR;
        int code = MPI_Allreduce(MPI_IN_PLACE, buf + done, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        if (timeout_s > 0 && sum_timer_set(0) != HW_OK) return HW_ERR;
        if (code != MPI_SUCCESS) return comm_mpi_failed(code, "the gradient sum (MPI_Allreduce)");
        done += (size_t)count;
    }
    return HW_OK;
}

int comm_mpi_bcast(void *buf, size_t bytes, int root) {
    if (bytes > INT_MAX) return hw_fail("a broadcast of %zu bytes is more than one MPI message holds", bytes);
    int code = MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD);
    return code == MPI_SUCCESS ? HW_OK : comm_mpi_failed(code, "MPI_Bcast");
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
        if (leave_on_stop && hw_stop_signal()) return hw_fail("%s: interrupted by %s", what, hw_stop_signal_name(hw_stop_signal()));
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
    return weights_agree(weights, n, when, 0, 0);
}
