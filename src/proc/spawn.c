// spawn: fork N workers, join them all at once, stop them all when one fails or on a signal.
//
// The parent never calls waitpid(-1): it waits on its own workers' pids only (through pidfds when
// the kernel has them, by polling waitpid(pid, WNOHANG) every 10 ms when not), so it never reaps
// a child that some other part of the program owns.
#include "hw/spawn.h"

#include "hw/err.h"
#include "hw/shm.h"
#include "hw/signals.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

// Status stored for a worker that someone else reaped (waitpid said ECHILD).
enum { STATUS_UNKNOWN = -1 };

// ---- small helpers ----

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);  // close-on-exec by definition
#else
    (void)pid;
    return -1;
#endif
}

static int count_alive(const hw_spawn_ctx *ctx) {
    int n = 0;
    for (int i = 0; i < ctx->nprocs; i++) n += ctx->alive[i];
    return n;
}

// Reaps every worker that has ended, without blocking.
static void reap_exited(hw_spawn_ctx *ctx) {
    for (int i = 0; i < ctx->nprocs; i++) {
        if (!ctx->alive[i]) continue;
        int status = 0;
        pid_t r = waitpid(ctx->pids[i], &status, WNOHANG);
        if (r == ctx->pids[i]) {
            ctx->alive[i] = 0;
            ctx->exit_status[i] = status;
        } else if (r < 0 && errno == ECHILD) {
            ctx->alive[i] = 0;
            ctx->exit_status[i] = STATUS_UNKNOWN;
        }
    }
}

// The lowest rank among reaped workers that did not exit 0, or -1.
static int first_failure(const hw_spawn_ctx *ctx) {
    for (int i = 0; i < ctx->nprocs; i++) {
        if (!ctx->alive[i] && ctx->exit_status[i] != 0) return i;
    }
    return -1;
}

// Sleeps until a live worker ends, `seconds` pass (< 0: no limit) or a signal arrives. `mask` is
// the signal mask during the wait (NULL: the current one).
static void wait_for_change(hw_spawn_ctx *ctx, double seconds, const sigset_t *mask) {
    if (!ctx->use_pidfds && (seconds < 0 || seconds > 0.01)) seconds = 0.01;
    struct timespec ts, *timeout = NULL;
    if (seconds >= 0) {
        ts.tv_sec = (time_t)seconds;
        ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
        timeout = &ts;
    }
    nfds_t n = 0;
    if (ctx->use_pidfds) {
        for (int i = 0; i < ctx->nprocs; i++) {
            if (!ctx->alive[i]) continue;
            ctx->poll_set[n].fd = ctx->pidfds[i];
            ctx->poll_set[n].events = POLLIN;
            ctx->poll_set[n].revents = 0;
            n++;
        }
    }
    ppoll(ctx->poll_set, n, timeout, mask);  // EINTR or a timeout: the caller looks again
}

// Reads what the failed worker wrote into its pipe (it has exited, so all of it is there).
static void read_message(hw_spawn_ctx *ctx, int rank) {
    size_t len = 0, cap = sizeof ctx->failed_message - 1;
    int fd = ctx->message_fds[rank];
    while (fd >= 0 && len < cap) {
        ssize_t got = read(fd, ctx->failed_message + len, cap - len);
        if (got > 0) {
            len += (size_t)got;
        } else if (got < 0 && errno == EINTR) {
            continue;
        } else {
            break;  // end of file, or EAGAIN when something the worker started still holds the pipe
        }
    }
    while (len > 0 && (ctx->failed_message[len - 1] == '\n' || ctx->failed_message[len - 1] == ' ')) len--;
    ctx->failed_message[len] = '\0';
}

static void record_failure(hw_spawn_ctx *ctx, int rank) {
    int status = ctx->exit_status[rank];
    ctx->failed_rank = rank;
    ctx->failed_exit_code = -1;
    ctx->failed_signal = 0;
    if (status == STATUS_UNKNOWN) {
        snprintf(ctx->failed_message, sizeof ctx->failed_message,
                 "its exit status is unknown: another part of the program reaped it (waitpid(-1)? SIGCHLD ignored?)");
        return;
    }
    if (WIFSIGNALED(status)) {
        ctx->failed_signal = WTERMSIG(status);
    } else if (WIFEXITED(status)) {
        ctx->failed_exit_code = WEXITSTATUS(status);
    }
    read_message(ctx, rank);
}

// ---- the worker side ----

static void write_all(int fd, const char *text, size_t len) {
    while (len > 0) {
        ssize_t put = write(fd, text, len);
        if (put < 0 && errno == EINTR) continue;
        if (put <= 0) return;
        text += put;
        len -= (size_t)put;
    }
}

__attribute__((noreturn)) static void run_worker(const hw_spawn_ctx *ctx, int rank, int message_fd, pid_t parent,
                                                 hw_worker_fn fn, void *arg, const sigset_t *mask) {
    // Die with the parent; if it died before this line, the signal will never come: leave now.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);

    hw_signals_worker();
    for (int r = 0; r < rank; r++) {  // the parent's ends for the workers forked before this one
        close(ctx->message_fds[r]);
        if (ctx->pidfds[r] >= 0) close(ctx->pidfds[r]);
    }
    pthread_sigmask(SIG_SETMASK, mask, NULL);

    hw_error_clear();
    int rc = fn(rank, arg);
    if (rc != 0) {
        char text[1100];
        const char *message = hw_error();
        if (message[0] == '\0') {
            snprintf(text, sizeof text, "the worker function returned %d without an error message", rc);
            message = text;
        }
        write_all(message_fd, message, strlen(message));
    }
    fflush(NULL);
    // _exit, never exit: the parent's atexit handlers (which unlink shared memory) must not run here.
    _exit(rc == 0 ? 0 : 1);
}

// ---- the parent side ----

int hw_spawn(hw_spawn_ctx *ctx, hw_worker_fn fn, void *arg, int nprocs) {
    memset(ctx, 0, sizeof *ctx);
    ctx->failed_rank = -1;
    ctx->failed_exit_code = -1;
    if (nprocs < 1 || nprocs > HW_SPAWN_MAX_WORKERS) {
        return hw_fail("cannot start %d workers: the number of workers must be in 1..%d", nprocs, HW_SPAWN_MAX_WORKERS);
    }
    if (fn == NULL) return hw_fail("hw_spawn: no worker function");
    size_t n = (size_t)nprocs;
    ctx->pids = calloc(n, sizeof *ctx->pids);
    ctx->alive = calloc(n, sizeof *ctx->alive);
    ctx->exit_status = calloc(n, sizeof *ctx->exit_status);
    ctx->message_fds = calloc(n, sizeof *ctx->message_fds);
    ctx->pidfds = calloc(n, sizeof *ctx->pidfds);
    ctx->poll_set = calloc(n, sizeof *ctx->poll_set);
    if (!ctx->pids || !ctx->alive || !ctx->exit_status || !ctx->message_fds || !ctx->pidfds || !ctx->poll_set) {
        hw_spawn_free(ctx);
        return hw_fail("cannot start %d workers: out of memory", nprocs);
    }
    for (int i = 0; i < nprocs; i++) ctx->message_fds[i] = ctx->pidfds[i] = -1;

    hw_stop_signals_catch();
    ctx->owns_handlers = 1;

    // Hold SIGINT/SIGTERM back while forking: a child must not run the parent's handler before it
    // has set its own dispositions. Pending signals are not inherited; the parent gets them after.
    sigset_t stop_signals, old_mask, worker_mask;
    hw_stop_signal_set(&stop_signals);
    pthread_sigmask(SIG_BLOCK, &stop_signals, &old_mask);
    worker_mask = old_mask;
    sigdelset(&worker_mask, SIGTERM);
    sigaddset(&worker_mask, SIGHUP);  // a hangup reaches the whole session: the parent decides

    fflush(NULL);  // or each child would write the parent's buffered output again
    pid_t parent = getpid();
    ctx->use_pidfds = 1;
    int err = 0;
    const char *what = NULL;
    for (int rank = 0; rank < nprocs; rank++) {
        int fds[2];
        if (pipe2(fds, O_CLOEXEC) != 0) {
            err = errno;
            what = "pipe";
            break;
        }
        pid_t pid = fork();
        if (pid < 0) {
            err = errno;
            what = "fork";
            close(fds[0]);
            close(fds[1]);
            break;
        }
        if (pid == 0) {
            close(fds[0]);
            run_worker(ctx, rank, fds[1], parent, fn, arg, &worker_mask);
        }
        close(fds[1]);
        fcntl(fds[0], F_SETFL, O_NONBLOCK);
        ctx->pids[rank] = pid;
        ctx->alive[rank] = 1;
        ctx->message_fds[rank] = fds[0];
        ctx->nprocs = rank + 1;
        ctx->pidfds[rank] = open_pidfd(pid);
        if (ctx->pidfds[rank] < 0) ctx->use_pidfds = 0;
    }
    pthread_sigmask(SIG_SETMASK, &old_mask, NULL);

    if (what) {
        int started = ctx->nprocs;
        hw_spawn_free(ctx);  // stops and reaps the workers already started
        return hw_fail_errno(err, "cannot start worker %d of %d (%s)%s", started, nprocs, what,
                             err == EAGAIN   ? "; the process limit (ulimit -u) or memory may be exhausted"
                             : err == EMFILE ? "; the open file limit (ulimit -n) is too low for this many workers"
                                             : "");
    }
    return HW_OK;
}

hw_join_status hw_join(hw_spawn_ctx *ctx, double timeout_s) {
    if (ctx->interrupt_signal) return HW_JOIN_INTERRUPTED;
    if (ctx->failed_rank >= 0) return HW_JOIN_FAILED;
    if (ctx->pids == NULL) return HW_JOIN_DONE;  // freed after it ended

    // SIGINT/SIGTERM stay blocked except inside ppoll, so a signal cannot slip in between the
    // check of hw_stop_signal() and the wait (it would then sleep through it).
    sigset_t stop_signals, old_mask, wait_mask;
    hw_stop_signal_set(&stop_signals);
    pthread_sigmask(SIG_BLOCK, &stop_signals, &old_mask);
    wait_mask = old_mask;
    sigdelset(&wait_mask, SIGINT);
    sigdelset(&wait_mask, SIGTERM);
    sigdelset(&wait_mask, SIGHUP);

    double deadline = timeout_s >= 0 ? now_seconds() + timeout_s : 0;
    hw_join_status result;
    for (;;) {
        if (hw_stop_signal()) {
            ctx->interrupt_signal = hw_stop_signal();
            hw_spawn_stop(ctx);
            result = HW_JOIN_INTERRUPTED;
            break;
        }
        reap_exited(ctx);
        int failed = first_failure(ctx);
        if (failed >= 0) {
            // `kill -TERM -<group>` kills the workers and the parent together: let a pending
            // signal in first, so that this reads as an interruption, not as a worker's failure.
            pthread_sigmask(SIG_SETMASK, &wait_mask, NULL);
            pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
            if (hw_stop_signal()) continue;
            record_failure(ctx, failed);
            hw_spawn_stop(ctx);
            result = HW_JOIN_FAILED;
            break;
        }
        if (count_alive(ctx) == 0) {
            result = HW_JOIN_DONE;
            break;
        }
        double left = -1;
        if (timeout_s >= 0) {
            left = deadline - now_seconds();
            if (left <= 0) {
                result = HW_JOIN_RUNNING;
                break;
            }
        }
        wait_for_change(ctx, left, &wait_mask);
    }
    pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
    return result;
}

void hw_spawn_stop(hw_spawn_ctx *ctx) {
    if (ctx->pids == NULL) return;
    reap_exited(ctx);
    if (count_alive(ctx) == 0) return;
    for (int i = 0; i < ctx->nprocs; i++) {
        if (ctx->alive[i]) kill(ctx->pids[i], SIGTERM);  // not reaped yet, so the pid is still ours
    }
    double deadline = now_seconds() + HW_SPAWN_GRACE_SECONDS;
    for (;;) {
        reap_exited(ctx);
        if (count_alive(ctx) == 0) return;
        double left = deadline - now_seconds();
        if (left <= 0) break;
        wait_for_change(ctx, left, NULL);
    }
    for (int i = 0; i < ctx->nprocs; i++) {
        if (ctx->alive[i]) kill(ctx->pids[i], SIGKILL);
    }
    for (int i = 0; i < ctx->nprocs; i++) {
        if (!ctx->alive[i]) continue;
        int status = 0;
        pid_t r;
        do {
            r = waitpid(ctx->pids[i], &status, 0);
        } while (r < 0 && errno == EINTR);
        ctx->alive[i] = 0;
        ctx->exit_status[i] = r == ctx->pids[i] ? status : STATUS_UNKNOWN;
    }
}

static void format_signal(int sig, char *buf, size_t cap) {
    const char *abbrev = sigabbrev_np(sig);
    if (abbrev) {
        snprintf(buf, cap, "SIG%s", abbrev);
    } else {
        snprintf(buf, cap, "signal %d", sig);
    }
}

const char *hw_spawn_describe_failure(const hw_spawn_ctx *ctx, char *buf, size_t cap) {
    if (cap == 0) return buf;
    char sig_name[32];
    const char *message = ctx->failed_message;
    const char *sep = message[0] ? ": " : "";
    if (ctx->interrupt_signal) {
        format_signal(ctx->interrupt_signal, sig_name, sizeof sig_name);
        snprintf(buf, cap, "interrupted by %s; all workers were stopped", sig_name);
    } else if (ctx->failed_rank < 0) {
        snprintf(buf, cap, "no worker failed");
    } else if (ctx->failed_signal) {
        format_signal(ctx->failed_signal, sig_name, sizeof sig_name);
        const char *description = sigdescr_np(ctx->failed_signal);
        snprintf(buf, cap, "worker %d was killed by signal %s (%s)%s%s%s", ctx->failed_rank, sig_name,
                 description ? description : "unknown signal",
                 ctx->failed_signal == SIGKILL ? "; the out-of-memory killer does this: see dmesg" : "", sep, message);
    } else if (ctx->failed_exit_code >= 0) {
        snprintf(buf, cap, "worker %d failed (exit code %d)%s%s", ctx->failed_rank, ctx->failed_exit_code, sep,
                 message);
    } else {
        snprintf(buf, cap, "worker %d failed%s%s", ctx->failed_rank, sep, message);
    }
    return buf;
}

void hw_spawn_free(hw_spawn_ctx *ctx) {
    if (ctx->pids) hw_spawn_stop(ctx);
    for (int i = 0; i < ctx->nprocs && ctx->message_fds && ctx->pidfds; i++) {
        if (ctx->message_fds[i] >= 0) close(ctx->message_fds[i]);
        if (ctx->pidfds[i] >= 0) close(ctx->pidfds[i]);
    }
    free(ctx->pids);
    free(ctx->alive);
    free(ctx->exit_status);
    free(ctx->message_fds);
    free(ctx->pidfds);
    free(ctx->poll_set);
    ctx->pids = NULL;
    ctx->alive = NULL;
    ctx->exit_status = NULL;
    ctx->message_fds = NULL;
    ctx->pidfds = NULL;
    ctx->poll_set = NULL;
    ctx->nprocs = 0;
    if (ctx->owns_handlers) {
        hw_stop_signals_release();
        ctx->owns_handlers = 0;
    }
}
