// Tests of the spawn module: join outcomes, failure reports, stopping, signals of the parent, and
// that neither workers nor shared memory names outlive a run, however it ends.
//
// Where the parent itself must exit or be signalled, the test forks a process that plays the
// hogwild parent ("the run") and watches it from outside.
#include "hw/err.h"
#include "hw/shm.h"
#include "hw/signals.h"
#include "hw/spawn.h"
#include "wait_util.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { MAX_TEST_WORKERS = 64 };

// Shared between the test and its workers (default strategy: memfd).
typedef struct {
    _Atomic int ready;  // workers that reached their main loop
    _Atomic int slot[MAX_TEST_WORKERS];
    _Atomic long long failed_at_ns;  // CLOCK_MONOTONIC when the failing worker gave up
    int nprocs;
    int failing_rank;
} board;

static board *board_open(hw_shm *shm, int nprocs, int failing_rank) {
    cr_assert_eq(hw_shm_open(shm, sizeof(board)), HW_OK, "%s", hw_error());
    board *b = shm->data;
    b->nprocs = nprocs;
    b->failing_rank = failing_rank;
    return b;
}

// Sleeps until stopped; gives up after 20 s so that a broken stop cannot leave it running forever.
static int hang(int rank) {
    for (int i = 0; i < 400; i++) usleep(50000);
    return hw_fail("worker %d was never stopped", rank);
}

static int worker_write_rank(int rank, void *arg) {
    board *b = arg;
    atomic_store(&b->slot[rank], rank + 1);
    return 0;
}

static int worker_hang(int rank, void *arg) {
    board *b = arg;
    atomic_fetch_add(&b->ready, 1);
    return hang(rank);
}

// The failing rank waits until every other worker is hanging, then fails in the way `how` says.
static void wait_for_the_others(board *b) {
    double deadline = hw_now() + 20;
    while (atomic_load(&b->ready) < b->nprocs - 1 && hw_now() < deadline) usleep(1000);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    atomic_store(&b->failed_at_ns, (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
}

static int worker_one_returns_error(int rank, void *arg) {
    board *b = arg;
    if (rank != b->failing_rank) return worker_hang(rank, arg);
    wait_for_the_others(b);
    return hw_fail("bad shard %d of the data", rank);
}

static int worker_one_aborts(int rank, void *arg) {
    board *b = arg;
    if (rank != b->failing_rank) return worker_hang(rank, arg);
    wait_for_the_others(b);
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    abort();
}

static volatile uintptr_t null_address = 0;

// A crash on purpose: UBSan (make asan) is told not to report the null store as a bug.
__attribute__((no_sanitize("undefined"))) static int worker_one_segfaults(int rank, void *arg) {
    board *b = arg;
    if (rank != b->failing_rank) return worker_hang(rank, arg);
    wait_for_the_others(b);
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    signal(SIGSEGV, SIG_DFL);  // not a sanitizer's handler: the kernel's default, as in a real crash
    *(volatile int *)null_address = 1;
    return hw_fail("worker %d survived a write to address 0", rank);
}

// Rank 0 ignores SIGTERM (stoppable only by SIGKILL); the failing rank fails once it is ready.
static int worker_stubborn_or_failing(int rank, void *arg) {
    board *b = arg;
    if (rank == b->failing_rank) {
        wait_for_the_others(b);
        return hw_fail("failing on purpose");
    }
    if (rank == 0) signal(SIGTERM, SIG_IGN);
    return worker_hang(rank, arg);
}

static void wait_until_ready(board *b, int n) {
    double deadline = hw_now() + 20;
    while (atomic_load(&b->ready) < n && hw_now() < deadline) usleep(1000);
    cr_assert_geq(atomic_load(&b->ready), n, "workers did not start");
}

static double seconds_since_failure(const board *b) {
    long long at = atomic_load(&b->failed_at_ns);
    cr_assert_gt(at, 0, "the failing worker recorded when it failed");
    return hw_now() - (double)at * 1e-9;
}

static void expect_all_reaped(const hw_spawn_ctx *ctx) {
    for (int i = 0; i < ctx->nprocs; i++) cr_expect_eq(ctx->alive[i], 0, "worker %d is reaped", i);
}

// ---- join outcomes ----

Test(spawn, bad_worker_counts_fail) {
    hw_spawn_ctx ctx;
    cr_expect_eq(hw_spawn(&ctx, worker_write_rank, NULL, 0), HW_ERR);
    cr_expect(strstr(hw_error(), "0 workers") != NULL, "message: %s", hw_error());
    cr_expect_eq(hw_spawn(&ctx, worker_write_rank, NULL, HW_SPAWN_MAX_WORKERS + 1), HW_ERR);
    hw_spawn_free(&ctx);  // safe after a failed spawn
}

Test(spawn, all_workers_exit_zero_join_done, .timeout = 60) {
    hw_shm shm;
    board *b = board_open(&shm, 4, -1);
    hw_spawn_ctx ctx;
    cr_assert_eq(hw_spawn(&ctx, worker_write_rank, b, 4), HW_OK, "%s", hw_error());
    cr_expect_eq(hw_join(&ctx, 30), HW_JOIN_DONE);
    expect_all_reaped(&ctx);
    for (int r = 0; r < 4; r++) {
        cr_expect_eq(ctx.exit_status[r], 0);
        cr_expect_eq(atomic_load(&b->slot[r]), r + 1);
    }
    cr_expect_eq(ctx.failed_rank, -1);
    cr_expect_eq(hw_join(&ctx, 0), HW_JOIN_DONE, "join again answers from the recorded statuses");
    hw_spawn_free(&ctx);
    hw_spawn_free(&ctx);  // twice: nothing happens
    hw_shm_close(&shm);
}

Test(spawn, sixty_four_workers, .timeout = 60) {
    hw_shm shm;
    board *b = board_open(&shm, MAX_TEST_WORKERS, -1);
    hw_spawn_ctx ctx;
    cr_assert_eq(hw_spawn(&ctx, worker_write_rank, b, MAX_TEST_WORKERS), HW_OK, "%s", hw_error());
    char why[1200];
    cr_expect_eq(hw_join(&ctx, 30), HW_JOIN_DONE, "%s", hw_spawn_describe_failure(&ctx, why, sizeof why));
    expect_all_reaped(&ctx);
    for (int r = 0; r < MAX_TEST_WORKERS; r++) cr_expect_eq(atomic_load(&b->slot[r]), r + 1, "worker %d", r);
    hw_spawn_free(&ctx);
    hw_shm_close(&shm);
}

Test(spawn, worker_error_message_reaches_the_parent, .timeout = 60) {
    hw_shm shm;
    board *b = board_open(&shm, 4, 2);
    hw_spawn_ctx ctx;
    cr_assert_eq(hw_spawn(&ctx, worker_one_returns_error, b, 4), HW_OK, "%s", hw_error());
    cr_assert_eq(hw_join(&ctx, 30), HW_JOIN_FAILED);
    cr_expect_lt(seconds_since_failure(b), 2.0, "the hanging workers are stopped within 2 s");
    cr_expect_eq(ctx.failed_rank, 2);
    cr_expect_eq(ctx.failed_exit_code, 1);
    cr_expect_eq(ctx.failed_signal, 0);
    cr_expect_str_eq(ctx.failed_message, "bad shard 2 of the data");
    char why[1200];
    cr_expect_str_eq(hw_spawn_describe_failure(&ctx, why, sizeof why),
                     "worker 2 failed (exit code 1): bad shard 2 of the data");
    expect_all_reaped(&ctx);
    for (int r = 0; r < 4; r++) {
        if (r == 2) continue;
        cr_expect(WIFSIGNALED(ctx.exit_status[r]) && WTERMSIG(ctx.exit_status[r]) == SIGTERM,
                  "worker %d was stopped with SIGTERM (status 0x%x)", r, ctx.exit_status[r]);
    }
    cr_expect_eq(hw_join(&ctx, 0), HW_JOIN_FAILED, "join again answers from the recorded failure");
    hw_spawn_free(&ctx);
    hw_shm_close(&shm);
}

Test(spawn, worker_abort_is_reported_as_sigabrt, .timeout = 60) {
    hw_shm shm;
    board *b = board_open(&shm, 3, 1);
    hw_spawn_ctx ctx;
    cr_assert_eq(hw_spawn(&ctx, worker_one_aborts, b, 3), HW_OK, "%s", hw_error());
    cr_assert_eq(hw_join(&ctx, 30), HW_JOIN_FAILED);
    cr_expect_lt(seconds_since_failure(b), 2.0, "the hanging workers are stopped within 2 s");
    cr_expect_eq(ctx.failed_rank, 1);
    cr_expect_eq(ctx.failed_signal, SIGABRT);
    cr_expect_eq(ctx.failed_exit_code, -1);
    char why[1200];
    cr_expect_str_eq(hw_spawn_describe_failure(&ctx, why, sizeof why),
                     "worker 1 was killed by signal SIGABRT (Aborted)");
    expect_all_reaped(&ctx);
    hw_spawn_free(&ctx);
    hw_shm_close(&shm);
}

// Rank 3 crashes while rank 0 still runs: the run ends at once, not when rank 0 would finish.
Test(spawn, worker_segfault_is_reported_whatever_its_rank, .timeout = 60) {
    hw_shm shm;
    board *b = board_open(&shm, 4, 3);
    hw_spawn_ctx ctx;
    cr_assert_eq(hw_spawn(&ctx, worker_one_segfaults, b, 4), HW_OK, "%s", hw_error());
    cr_assert_eq(hw_join(&ctx, 30), HW_JOIN_FAILED);
    cr_expect_lt(seconds_since_failure(b), 2.0, "the hanging workers are stopped within 2 s");
    cr_expect_eq(ctx.failed_rank, 3);
    cr_expect_eq(ctx.failed_signal, SIGSEGV);
    char why[1200];
    cr_expect_str_eq(hw_spawn_describe_failure(&ctx, why, sizeof why),
                     "worker 3 was killed by signal SIGSEGV (Segmentation fault)");
    expect_all_reaped(&ctx);
    hw_spawn_free(&ctx);
    hw_shm_close(&shm);
}

Test(spawn, a_worker_ignoring_sigterm_is_killed_after_the_grace_period, .timeout = 60) {
    hw_shm shm;
    board *b = board_open(&shm, 3, 2);
    hw_spawn_ctx ctx;
    cr_assert_eq(hw_spawn(&ctx, worker_stubborn_or_failing, b, 3), HW_OK, "%s", hw_error());
    cr_assert_eq(hw_join(&ctx, 30), HW_JOIN_FAILED);
    double took = seconds_since_failure(b);
    cr_expect_eq(ctx.failed_rank, 2);
    cr_expect(WIFSIGNALED(ctx.exit_status[0]) && WTERMSIG(ctx.exit_status[0]) == SIGKILL,
              "the stubborn worker got SIGKILL (status 0x%x)", ctx.exit_status[0]);
    cr_expect(WIFSIGNALED(ctx.exit_status[1]) && WTERMSIG(ctx.exit_status[1]) == SIGTERM,
              "the other got SIGTERM (status 0x%x)", ctx.exit_status[1]);
    cr_expect_geq(took, HW_SPAWN_GRACE_SECONDS * 0.9, "SIGKILL came after the grace period (%.2f s)", took);
    cr_expect_lt(took, HW_SPAWN_GRACE_SECONDS + 3.0, "and not much later (%.2f s)", took);
    expect_all_reaped(&ctx);
    hw_spawn_free(&ctx);
    hw_shm_close(&shm);
}

Test(spawn, join_timeout_answers_running_and_stop_ends_the_workers, .timeout = 60) {
    hw_shm shm;
    board *b = board_open(&shm, 2, -1);
    hw_spawn_ctx ctx;
    cr_assert_eq(hw_spawn(&ctx, worker_hang, b, 2), HW_OK, "%s", hw_error());
    wait_until_ready(b, 2);
    double t0 = hw_now();
    cr_expect_eq(hw_join(&ctx, 0.3), HW_JOIN_RUNNING);
    double waited = hw_now() - t0;
    cr_expect_geq(waited, 0.25, "join waited its timeout (%.3f s)", waited);
    cr_expect_lt(waited, 5.0, "and returned after it (%.3f s)", waited);
    cr_expect_eq(hw_join(&ctx, 0), HW_JOIN_RUNNING, "a zero timeout answers at once");
    for (int r = 0; r < 2; r++) {
        cr_expect_eq(ctx.alive[r], 1);
        cr_expect_eq(kill(ctx.pids[r], 0), 0, "worker %d still runs", r);
    }
    hw_spawn_stop(&ctx);
    expect_all_reaped(&ctx);
    for (int r = 0; r < 2; r++) {
        cr_expect(WIFSIGNALED(ctx.exit_status[r]) && WTERMSIG(ctx.exit_status[r]) == SIGTERM, "status 0x%x",
                  ctx.exit_status[r]);
    }
    // Stopped workers did not finish their work: join does not call that DONE.
    cr_expect_eq(hw_join(&ctx, 0), HW_JOIN_FAILED);
    char why[1200];
    cr_expect(strstr(hw_spawn_describe_failure(&ctx, why, sizeof why), "SIGTERM") != NULL, "%s", why);
    hw_spawn_free(&ctx);
    hw_shm_close(&shm);
}

// A terminal's Ctrl-C reaches the whole process group: workers must not die of it.
Test(spawn, workers_ignore_sigint, .timeout = 60) {
    hw_shm shm;
    board *b = board_open(&shm, 2, -1);
    hw_spawn_ctx ctx;
    cr_assert_eq(hw_spawn(&ctx, worker_hang, b, 2), HW_OK, "%s", hw_error());
    wait_until_ready(b, 2);
    cr_assert_eq(kill(ctx.pids[0], SIGINT), 0);
    cr_expect_eq(hw_join(&ctx, 0.3), HW_JOIN_RUNNING, "worker 0 survived SIGINT");
    cr_expect_eq(ctx.alive[0], 1);
    hw_spawn_free(&ctx);  // stops them
    hw_shm_close(&shm);
}

Test(spawn, parent_sigint_interrupts_join, .timeout = 60) {
    signal(SIGINT, SIG_DFL);  // as from a terminal; a background job of a script inherits it ignored
    struct sigaction before, after;
    sigaction(SIGINT, NULL, &before);
    hw_shm shm;
    board *b = board_open(&shm, 3, -1);
    hw_spawn_ctx ctx;
    cr_assert_eq(hw_spawn(&ctx, worker_hang, b, 3), HW_OK, "%s", hw_error());
    wait_until_ready(b, 3);
    cr_expect_eq(hw_stop_signal(), 0);
    cr_assert_eq(kill(getpid(), SIGINT), 0);  // hw_spawn's handler records it: this process lives
    double t0 = hw_now();
    cr_expect_eq(hw_join(&ctx, 30), HW_JOIN_INTERRUPTED);
    cr_expect_lt(hw_now() - t0, 2.0, "join answered at once and stopped the workers");
    cr_expect_eq(hw_stop_signal(), SIGINT);
    cr_expect_eq(ctx.interrupt_signal, SIGINT);
    cr_expect_eq(ctx.failed_rank, -1, "an interruption is not a worker failure");
    expect_all_reaped(&ctx);
    char why[1200];
    cr_expect(strstr(hw_spawn_describe_failure(&ctx, why, sizeof why), "SIGINT") != NULL, "%s", why);
    hw_spawn_free(&ctx);
    sigaction(SIGINT, NULL, &after);
    cr_expect(after.sa_handler == before.sa_handler, "hw_spawn_free restores the old SIGINT handler");
    cr_expect_eq(hw_stop_signal(), SIGINT, "still readable after free, for the exit code");
    hw_shm_close(&shm);
}

// A parent stuck after the first signal (in a library call that never returns, as OpenBLAS under
// ulimit -v) still ends at the second: exit 128 + signal at once, its workers gone with it.
Test(spawn, a_second_signal_ends_a_stuck_parent_at_once, .timeout = 60) {
    hw_shm shm;
    board *b = board_open(&shm, 2, -1);
    fflush(NULL);
    pid_t parent = fork();
    cr_assert_neq(parent, -1);
    if (parent == 0) {
        signal(SIGINT, SIG_DFL);
        hw_spawn_ctx ctx;
        if (hw_spawn(&ctx, worker_hang, b, 2) != HW_OK) _exit(90);
        while (atomic_load(&b->ready) < 2) usleep(1000);
        kill(getpid(), SIGINT);                      // recorded: the parent goes on, to save and stop
        for (int i = 0; i < 100; i++) usleep(1000);  // ... but it is stuck and never joins
        kill(getpid(), SIGTERM);
        for (int i = 0; i < 10; i++) sleep(1);
        _exit(91);  // the second signal did not end it
    }
    double t0 = hw_now();
    int status = 0;
    cr_assert_eq(waitpid(parent, &status, 0), parent);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGTERM, "status %#x", status);
    cr_expect_lt(hw_now() - t0, 5.0, "it ended at the second signal");
    hw_shm_close(&shm);
}

// `cmd &` in a script starts the job with SIGINT ignored, so that a Ctrl-C meant for the script
// spares it: hw_spawn keeps it that way, as every well-behaved program does.
Test(spawn, an_ignored_sigint_stays_ignored, .timeout = 60) {
    signal(SIGINT, SIG_IGN);
    hw_shm shm;
    board *b = board_open(&shm, 1, -1);
    hw_spawn_ctx ctx;
    cr_assert_eq(hw_spawn(&ctx, worker_hang, b, 1), HW_OK, "%s", hw_error());
    struct sigaction during;
    sigaction(SIGINT, NULL, &during);
    cr_expect(during.sa_handler == SIG_IGN);
    kill(getpid(), SIGINT);
    cr_expect_eq(hw_join(&ctx, 0.2), HW_JOIN_RUNNING);
    cr_expect_eq(hw_stop_signal(), 0);
    sigaction(SIGTERM, NULL, &during);
    cr_expect(during.sa_handler != SIG_IGN && during.sa_handler != SIG_DFL, "SIGTERM is still handled");
    hw_spawn_free(&ctx);
    hw_shm_close(&shm);
}

// ---- whole runs, watched from outside ----

enum { RUN_WORKERS = 3 };

typedef struct {
    pid_t pid;
    int from_run;  // what the run reports: its shm name, then its workers' pids
    int to_run;    // one byte: go on
} run_proc;

typedef void (*run_body)(int report_fd, int go_fd);

static run_proc start_run(run_body body) {
    int up[2], down[2];
    cr_assert_eq(pipe(up), 0);
    cr_assert_eq(pipe(down), 0);
    run_proc run = {.pid = fork()};
    cr_assert_neq(run.pid, -1);
    if (run.pid == 0) {
        close(up[0]);
        close(down[1]);
        body(up[1], down[0]);
        _exit(97);
    }
    close(up[1]);
    close(down[0]);
    run.from_run = up[0];
    run.to_run = down[1];
    return run;
}

// Waits for the run to end within `seconds`; SIGKILLs it and fails the test when it does not.
static int wait_run(run_proc *run, double seconds) {
    double deadline = hw_now() + seconds;
    int status = 0;
    while (waitpid(run->pid, &status, WNOHANG) == 0) {
        if (hw_now() > deadline) {
            kill(run->pid, SIGKILL);
            waitpid(run->pid, &status, 0);
            cr_assert_fail("the run did not end within %.0f s", seconds);
        }
        usleep(5000);
    }
    close(run->from_run);
    close(run->to_run);
    return status;
}

static int count_shm_names_of(pid_t pid) {
    char prefix[64];
    snprintf(prefix, sizeof prefix, "hogwild-%d-", (int)pid);
    DIR *dir = opendir("/dev/shm");
    cr_assert_not_null(dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(dir);
    return n;
}

static int shm_name_exists(const char *name) {
    char path[600];
    snprintf(path, sizeof path, "/dev/shm%s", name);
    return access(path, F_OK) == 0;
}

// The run's side: opens file_system storage, reports its name and waits for the go.
static board *run_open(hw_shm *shm, int report_fd, int go_fd, int failing_rank) {
    if (hw_sharing_strategy_set("file_system") != HW_OK || hw_shm_open(shm, sizeof(board)) != HW_OK) _exit(90);
    board *b = shm->data;
    b->nprocs = RUN_WORKERS;
    b->failing_rank = failing_rank;
    if (write(report_fd, shm->name, sizeof shm->name) != (ssize_t)sizeof shm->name) _exit(91);
    if (go_fd >= 0) {
        char go;
        if (read(go_fd, &go, 1) != 1) _exit(92);
    }
    return b;
}

// Exits normally without closing the storage: the atexit handler must unlink it.
static void run_normal_exit(int report_fd, int go_fd) {
    hw_shm shm;
    board *b = run_open(&shm, report_fd, go_fd, -1);
    hw_spawn_ctx ctx;
    if (hw_spawn(&ctx, worker_write_rank, b, RUN_WORKERS) != HW_OK) _exit(93);
    hw_join_status st = hw_join(&ctx, 30);
    hw_spawn_free(&ctx);
    exit(st == HW_JOIN_DONE ? 0 : 94);
}

// A worker fails; the run exits 1 the way the CLI does, without closing the storage.
static void run_worker_failure(int report_fd, int go_fd) {
    hw_shm shm;
    board *b = run_open(&shm, report_fd, go_fd, 1);
    hw_spawn_ctx ctx;
    if (hw_spawn(&ctx, worker_one_segfaults, b, RUN_WORKERS) != HW_OK) _exit(93);
    hw_join_status st = hw_join(&ctx, 30);
    int right = st == HW_JOIN_FAILED && ctx.failed_rank == 1 && ctx.failed_signal == SIGSEGV;
    hw_spawn_free(&ctx);
    exit(right ? 1 : 94);
}

// Reports the workers' pids and joins until a signal comes. It leaves with _exit, so that only
// the signal handler can have unlinked the storage.
static void run_until_signalled(int report_fd, int go_fd) {
    (void)go_fd;
    signal(SIGINT, SIG_DFL);  // as from a terminal; a background job of a script inherits it ignored
    hw_shm shm;
    board *b = run_open(&shm, report_fd, -1, -1);
    hw_spawn_ctx ctx;
    if (hw_spawn(&ctx, worker_hang, b, RUN_WORKERS) != HW_OK) _exit(93);
    // Report once every worker is past its start-up (PR_SET_PDEATHSIG set, SIGINT ignored).
    double deadline = hw_now() + 20;
    while (atomic_load(&b->ready) < RUN_WORKERS && hw_now() < deadline) usleep(1000);
    if (write(report_fd, ctx.pids, sizeof(pid_t) * RUN_WORKERS) != (ssize_t)(sizeof(pid_t) * RUN_WORKERS)) _exit(91);
    hw_join_status st = hw_join(&ctx, -1);
    if (st != HW_JOIN_INTERRUPTED) _exit(95);
    _exit(128 + ctx.interrupt_signal);
}

Test(spawn, normal_exit_leaves_no_shm_name, .timeout = 60) {
    run_proc run = start_run(run_normal_exit);
    char name[64];
    cr_assert(read_within(run.from_run, name, sizeof name, 10), "the run reported its shm name");
    cr_expect(shm_name_exists(name), "%s exists during the run", name);
    cr_assert_eq(write(run.to_run, "g", 1), 1);
    int status = wait_run(&run, 30);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status 0x%x", status);
    cr_expect_eq(count_shm_names_of(run.pid), 0);
}

Test(spawn, worker_failure_exit_leaves_no_shm_name, .timeout = 60) {
    run_proc run = start_run(run_worker_failure);
    char name[64];
    cr_assert(read_within(run.from_run, name, sizeof name, 10), "the run reported its shm name");
    cr_expect(shm_name_exists(name), "%s exists during the run", name);
    cr_assert_eq(write(run.to_run, "g", 1), 1);
    int status = wait_run(&run, 30);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 1, "the run saw the crash and exited 1 (status 0x%x)",
              status);
    cr_expect_eq(count_shm_names_of(run.pid), 0);
}

// The same in a process group of its own, as `kill -TERM -<pgid>` or a service manager sees it.
static void run_until_signalled_in_own_group(int report_fd, int go_fd) {
    setpgid(0, 0);
    run_until_signalled(report_fd, go_fd);
}

// Signals the run (whole_group: its process group, the workers with it) and checks the outcome.
static void check_parent_signal(int sig, int whole_group) {
    run_proc run = start_run(whole_group ? run_until_signalled_in_own_group : run_until_signalled);
    char name[64];
    pid_t workers[RUN_WORKERS];
    int got =
        read_within(run.from_run, name, sizeof name, 10) && read_within(run.from_run, workers, sizeof workers, 10);
    if (!got) kill(run.pid, SIGKILL);
    cr_assert(got, "the run reported its shm name and workers");
    cr_expect(shm_name_exists(name), "%s exists before the signal", name);
    for (int r = 0; r < RUN_WORKERS; r++) cr_expect_eq(kill(workers[r], 0), 0, "worker %d runs before the signal", r);
    kill(whole_group ? -run.pid : run.pid, sig);
    int status = wait_run(&run, 30);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 128 + sig, "exit code %d (status 0x%x), want %d",
              WIFEXITED(status) ? WEXITSTATUS(status) : -1, status, 128 + sig);
    for (int r = 0; r < RUN_WORKERS; r++) {
        errno = 0;
        cr_expect(kill(workers[r], 0) == -1 && errno == ESRCH, "worker %d (pid %d) is gone", r, (int)workers[r]);
    }
    cr_expect_eq(count_shm_names_of(run.pid), 0, "no /dev/shm/hogwild-%d-* remains", (int)run.pid);
    shm_unlink(name);  // when the check above failed: leave no litter
}

Test(spawn, parent_sigint_exits_130_and_leaves_nothing, .timeout = 60) { check_parent_signal(SIGINT, 0); }

Test(spawn, parent_sigterm_exits_143_and_leaves_nothing, .timeout = 60) { check_parent_signal(SIGTERM, 0); }

// The workers die of the SIGTERM too: still an interruption (143), not a worker failure (1).
Test(spawn, group_sigterm_exits_143_not_as_a_worker_failure, .timeout = 60) { check_parent_signal(SIGTERM, 1); }

// Ctrl-C in a terminal: the whole foreground group gets SIGINT; the workers ignore it.
Test(spawn, group_sigint_exits_130, .timeout = 60) { check_parent_signal(SIGINT, 1); }

// A SIGKILL cannot be caught: the workers must still die (PR_SET_PDEATHSIG). This test process
// becomes their subreaper, so that it can reap them and see how they died.
Test(spawn, parent_sigkill_takes_the_workers_along, .timeout = 60) {
    cr_assert_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    run_proc run = start_run(run_until_signalled);
    char name[64];
    pid_t workers[RUN_WORKERS];
    int got =
        read_within(run.from_run, name, sizeof name, 10) && read_within(run.from_run, workers, sizeof workers, 10);
    if (!got) kill(run.pid, SIGKILL);
    cr_assert(got, "the run reported its shm name and workers");
    for (int r = 0; r < RUN_WORKERS; r++) cr_expect_eq(kill(workers[r], 0), 0, "worker %d runs before the kill", r);
    kill(run.pid, SIGKILL);
    int status = wait_run(&run, 10);
    cr_expect(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

    double deadline = hw_now() + 5;
    int status_of[RUN_WORKERS], gone[RUN_WORKERS] = {0}, n_gone = 0;
    while (n_gone < RUN_WORKERS && hw_now() < deadline) {
        for (int r = 0; r < RUN_WORKERS; r++) {
            if (gone[r]) continue;
            pid_t w = waitpid(workers[r], &status_of[r], WNOHANG);
            if (w == workers[r]) {
                gone[r] = 1;
            } else if (w < 0 && errno == ECHILD && kill(workers[r], 0) == -1 && errno == ESRCH) {
                gone[r] = 1;  // not handed to us, but gone all the same
                status_of[r] = -1;
            }
            n_gone += gone[r];
        }
        usleep(10000);
    }
    for (int r = 0; r < RUN_WORKERS; r++) {
        cr_expect(gone[r], "worker %d (pid %d) outlived its parent", r, (int)workers[r]);
        if (gone[r] && status_of[r] != -1) {
            cr_expect(WIFSIGNALED(status_of[r]) && WTERMSIG(status_of[r]) == SIGKILL,
                      "worker %d died of PR_SET_PDEATHSIG's SIGKILL (status 0x%x)", r, status_of[r]);
        }
    }
    for (int r = 0; r < RUN_WORKERS; r++) {
        if (!gone[r]) kill(workers[r], SIGKILL);
    }
    // Nothing could unlink the name: this is what `hogwild --clean-shm` is for.
    cr_expect(shm_name_exists(name), "%s is left behind by a SIGKILL", name);
    shm_unlink(name);
}
