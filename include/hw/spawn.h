// spawn: the semantics of torch.multiprocessing.spawn, in C.
//
// hw_spawn forks nprocs workers, each running fn(rank, arg) and exiting with its status. A worker
// that fails returns non-zero after hw_fail(); its message travels to the parent through a pipe.
// hw_join waits on all workers at once: the first failure (non-zero exit or a signal) stops the
// others (SIGTERM, then SIGKILL after a grace period), reaps them all and reports which worker
// failed, how, and with what message. Workers get PR_SET_PDEATHSIG, so none outlives the parent.
#ifndef HW_SPAWN_H
#define HW_SPAWN_H

#include <sys/types.h>

typedef int (*hw_worker_fn)(int rank, void *arg);

typedef enum {
    HW_JOIN_DONE = 0,        // every worker exited 0
    HW_JOIN_RUNNING = 1,     // the timeout passed first; the workers still run
    HW_JOIN_FAILED = 2,      // a worker failed; all are stopped and reaped; see failed_*
    HW_JOIN_INTERRUPTED = 3  // the parent got SIGINT or SIGTERM; all are stopped and reaped
} hw_join_status;

typedef struct {
    int nprocs;
    pid_t *pids;
    int *alive;              // 1 until reaped
    int *exit_status;        // wait status of each reaped worker
    int *message_fds;        // read ends of each worker's error pipe
    int failed_rank;         // -1 when none
    int failed_exit_code;    // when it exited non-zero, else -1
    int failed_signal;       // when it died by a signal, else 0
    int interrupt_signal;    // SIGINT or SIGTERM received by the parent, else 0
    char failed_message[1024];
} hw_spawn_ctx;

// Grace period between SIGTERM and SIGKILL when stopping workers, in seconds.
#define HW_SPAWN_GRACE_SECONDS 1.0

// Installs the parent's SIGINT/SIGTERM handlers (they record the signal and release shared memory)
// and forks the workers. Fails (nothing left running) if a fork fails.
int hw_spawn(hw_spawn_ctx *ctx, hw_worker_fn fn, void *arg, int nprocs);
// Waits up to timeout_s seconds (< 0: forever).
hw_join_status hw_join(hw_spawn_ctx *ctx, double timeout_s);
// Stops every live worker (SIGTERM, grace period, SIGKILL) and reaps it.
void hw_spawn_stop(hw_spawn_ctx *ctx);
// One line describing the failure: "worker 3 failed (exit code 1): <its message>" or
// "worker 2 was killed by signal SIGSEGV (Segmentation fault)".
const char *hw_spawn_describe_failure(const hw_spawn_ctx *ctx, char *buf, size_t cap);
void hw_spawn_free(hw_spawn_ctx *ctx);
// The signal the parent received (SIGINT, SIGTERM) since hw_spawn, or 0. Safe to poll.
int hw_spawn_interrupted(void);

#endif
