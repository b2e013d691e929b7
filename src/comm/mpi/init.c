// world: MPI_Init, MPI_Finalize and MPI_Abort of a rank of an mpirun job (include/hw/comm.h).
#include "hw/comm.h"

#include "mpi_side.h"
#include "hw/err.h"
#include "hw/option.h"
#include "hw/shm.h"

#include <errno.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

// ---- the watchdog: a wait inside a blocking MPI call, bounded ----
//
// MPI_Init waits for every rank to arrive (its modex), a step's MPI_Allreduce for every rank's
// part: a rank stuck or gone held the others there for ever. A timer armed around the call ends
// this rank when it fires: its handler writes the message, removes this process's shared memory
// and temporary file (hw_shm_remove_all; the rank leaves by _exit, without atexit) and _exit()s,
// all async-signal-safe; mpirun then ends the job. A real-time signal, not SIGALRM, which
// src/proc/signals.c uses to bound a stopping run.
static timer_t watchdog_timer;
static int watchdog_made;
static const char *volatile watchdog_message;

static void watchdog_fired(int sig) {
    (void)sig;
    const char *message = watchdog_message;
    if (message) {
        ssize_t written = write(STDERR_FILENO, message, strlen(message));
        (void)written;
    }
    hw_shm_remove_all();
    _exit(1);
}

int comm_mpi_watchdog(double seconds, const char *message) {
    if (!watchdog_made) {
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_handler = watchdog_fired;
        sigemptyset(&action.sa_mask);
        struct sigevent event;
        memset(&event, 0, sizeof event);
        event.sigev_notify = SIGEV_SIGNAL;
        event.sigev_signo = SIGRTMIN + 1;
        if (sigaction(SIGRTMIN + 1, &action, NULL) != 0 ||
            timer_create(CLOCK_MONOTONIC, &event, &watchdog_timer) != 0) {
            return hw_fail("the timer of the ranks' timeout: %s", strerror(errno));
        }
        watchdog_made = 1;
    }
    if (seconds > 0) watchdog_message = message;
    struct itimerspec when;
    memset(&when, 0, sizeof when);
    when.it_value.tv_sec = (time_t)seconds;
    when.it_value.tv_nsec = (long)((seconds - (double)(time_t)seconds) * 1e9);
    if (timer_settime(watchdog_timer, 0, &when, NULL) != 0) {
        return hw_fail("the timer of the ranks' timeout: %s", strerror(errno));
    }
    return HW_OK;
}

int comm_mpi_failed(int code, const char *what) {
    char text[MPI_MAX_ERROR_STRING] = "";
    int length = 0;
    MPI_Error_string(code, text, &length);
    int rank = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return hw_fail("rank %d: %s failed: %s", rank, what, text);
}

static double job_timeout_s;

enum { HW_MPI_INIT_MIN_SECONDS = 60 };  // the default --sync-timeout; measured: 6 s under ASan, 20+ s under load

double comm_mpi_timeout(void) { return job_timeout_s; }

int comm_mpi_init(const hw_world *world, double timeout_s) {
    job_timeout_s = timeout_s;
    // A rank that never comes (stopped, or stuck loading its data) held the others in MPI_Init. It
    // also starts Open MPI itself, which takes seconds on a loaded machine: at least
    // HW_MPI_INIT_MIN_SECONDS, so that a small --sync-timeout (1 s) is no false alarm there.
    static char init_message[256];
    double bound = timeout_s > HW_MPI_INIT_MIN_SECONDS ? timeout_s : HW_MPI_INIT_MIN_SECONDS;
    snprintf(init_message, sizeof init_message,
             "hogwild (rank %d of %d): MPI_Init has not completed within the ranks' timeout of %g s%s: another rank "
             "is stuck or gone before it (MPI_Init is given at least %d s)\n",
             world->rank, world->size, bound, hw_option_hint(HW_OPTION_SYNC_TIMEOUT), HW_MPI_INIT_MIN_SECONDS);
    if (timeout_s > 0 && comm_mpi_watchdog(bound, init_message) != HW_OK) return HW_ERR;
    int provided = 0;
    // FUNNELED: DataParallel's replica threads and the Hogwild workers never call MPI; only the
    // thread that initialised it does.
    int code = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    if (timeout_s > 0 && comm_mpi_watchdog(0, NULL) != HW_OK) return HW_ERR;
    if (code != MPI_SUCCESS) {
        return hw_fail("MPI_Init failed on rank %d of %d", world->rank, world->size);
    }
    // Errors come back as codes (then hw_fail names them) rather than ending the process inside MPI.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rank = -1, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank != world->rank || size != world->size) {
        return hw_fail("MPI says rank %d of %d, but the environment said rank %d of %d", rank, size, world->rank,
                       world->size);
    }
    return HW_OK;
}

static int initialised(void) {
    int init = 0, final = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&final);
    return init && !final;
}

void comm_mpi_finalize(void) {
    if (initialised()) MPI_Finalize();
}

void comm_mpi_abort(int code) {
    if (initialised()) MPI_Abort(MPI_COMM_WORLD, code);
}
