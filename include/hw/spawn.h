// spawn: the semantics of torch.multiprocessing.spawn, in C.
//
// hw_spawn forks nprocs workers, each running fn(rank, arg) and exiting with its status. A worker
// that fails returns non-zero after hw_fail(); its message travels to the parent through a pipe.
// hw_join waits on all workers at once: the first failure (non-zero exit or a signal) stops the
// others (SIGTERM, then SIGKILL after a grace period), reaps them all and reports which worker
// failed, how, and with what message. Workers get PR_SET_PDEATHSIG, so none outlives the parent.
//
// Signals: while a context is alive the parent's SIGINT, SIGTERM and SIGHUP only record the signal (and
// unlink the shared memory names, hw_shm_unlink_all); hw_join then stops and reaps the workers
// and answers HW_JOIN_INTERRUPTED, and the caller exits 128 + signal. Workers ignore SIGINT (a
// terminal Ctrl-C reaches the whole process group; the parent stops them itself) and die of
// SIGTERM. Workers always leave with _exit: the parent's atexit handlers never run in them.
//
// Call hw_spawn from the thread that outlives the run (the main thread): PR_SET_PDEATHSIG fires
// when the forking *thread* ends. No thread may be running a pool (BLAS, CUDA) before the fork.
#ifndef HW_SPAWN_H
#define HW_SPAWN_H

#include <poll.h>
#include <signal.h>
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
    int *alive;               // 1 until reaped
    int *exit_status;         // wait status of each reaped worker
    int *message_fds;         // read ends of each worker's error pipe
    int *pidfds;              // pidfd_open of each worker (-1 where unavailable): join polls them
    struct pollfd *poll_set;  // scratch for the poll over the live workers' pidfds
    int use_pidfds;           // 1 when every worker has a pidfd; else join polls waitpid every 10 ms
    int owns_handlers;        // this context installed (a reference to) the SIGINT/SIGTERM handlers
    int failed_rank;          // -1 when none
    int failed_exit_code;     // when it exited non-zero, else -1
    int failed_signal;        // when it died by a signal, else 0
    int interrupt_signal;     // SIGINT, SIGTERM or SIGHUP received by the parent, else 0
    char failed_message[1024];
} hw_spawn_ctx;

// Grace period between SIGTERM and SIGKILL when stopping workers, in seconds.
#define HW_SPAWN_GRACE_SECONDS 1.0
// The most workers one hw_spawn starts (each holds two descriptors in the parent).
#define HW_SPAWN_MAX_WORKERS 1024

// Installs the parent's SIGINT/SIGTERM handlers (they record the signal and release shared memory)
// and forks the workers. Fails (nothing left running, ctx freed) if a fork fails or nprocs is out
// of [1, HW_SPAWN_MAX_WORKERS]. A worker fn that fails returns non-zero after hw_fail(); its
// hw_error() becomes failed_message. Its stdio buffers are flushed before it exits.
int hw_spawn(hw_spawn_ctx *ctx, hw_worker_fn fn, void *arg, int nprocs);
// Waits up to timeout_s seconds (< 0: forever) for all workers at once. HW_JOIN_FAILED comes as
// soon as any worker fails, whatever its rank; HW_JOIN_INTERRUPTED as soon as the parent gets
// SIGINT/SIGTERM. Both return with every worker stopped and reaped. Called again after that (or
// after hw_spawn_stop), it answers at once from the recorded statuses.
hw_join_status hw_join(hw_spawn_ctx *ctx, double timeout_s);
// Stops every live worker (SIGTERM, grace period, SIGKILL) and reaps it.
void hw_spawn_stop(hw_spawn_ctx *ctx);
// One line describing the failure: "worker 3 failed (exit code 1): <its message>" or
// "worker 2 was killed by signal SIGSEGV (Segmentation fault)".
const char *hw_spawn_describe_failure(const hw_spawn_ctx *ctx, char *buf, size_t cap);
// Stops any worker still alive, closes the descriptors, frees the arrays and restores the signal
// handlers hw_spawn replaced. Keeps the failed_* fields. Safe to call twice.
void hw_spawn_free(hw_spawn_ctx *ctx);
// (The parent's stop signals are caught through hw_stop_signals_catch, include/hw/signals.h,
// from hw_spawn to hw_spawn_free; hw_stop_signal() says which one came.)

#endif
