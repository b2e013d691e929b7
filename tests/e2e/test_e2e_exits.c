// End-to-end tests of how a run ends (issue 21, cases 10 and 11): every temporary file and
// shared-memory name of a run goes on every exit that can run code, whatever the signal, and what
// a SIGKILL leaves (a checkpoint's temporary file) is found by --clean-shm and by the next run
// that saves there.
#include "e2e_util.h"

#include <sched.h>
#include <sys/mount.h>

TestSuite(e2e_exits, .init = e2e_setup, .fini = e2e_teardown, .timeout = 180);

// After a parent that died without stopping its workers (a signal, _exit): they die with it
// (PR_SET_PDEATHSIG) and, the test process being a subreaper, come here to be reaped. Waits for
// that, then checks that nothing of the run is left.
static void assert_left_nothing_after_death(const e2e_run_result *r) {
    double deadline = hw_now() + 5;
    pid_t kids[16];
    while (e2e_children_of(getpid(), kids, 16) > 0 && hw_now() < deadline) {
        while (waitpid(-1, NULL, WNOHANG) > 0) {
        }
        e2e_sleep_ms(10);
    }
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
    e2e_assert_left_nothing(r);
}

// Starts a long file_system run and waits until its shared-memory names exist (it trains).
static pid_t start_file_system_run(e2e_run_result *r, const char *data) {
    e2e_start_argv(r, NULL,
                   (const char *const[]){"--data", data, "--model", e2e.mlp, "--epochs", "1000", "--quiet",
                                         "--sharing-strategy", "file_system", NULL});
    double deadline = hw_now() + 30;
    while (e2e_count_shm_names(r->pid) == 0 && hw_now() < deadline) e2e_sleep_ms(5);
    cr_assert_gt(e2e_count_shm_names(r->pid), 0, "the run made no /dev/shm name within 30 s");
    e2e_sleep_ms(200);  // training
    return r->pid;
}

// Issue 21, case 11: with the file_system strategy, SIGQUIT (Ctrl-\), SIGUSR1, SIGALRM, SIGSEGV or
// SIGABRT to the parent left /dev/shm/hogwild-<pid>-0 behind. Each now removes it and the
// process still dies of the signal, as its default action says.
Test(e2e_exits, every_deadly_signal_removes_the_shared_memory_names) {
    char *data = e2e_synth(88);
#ifdef __SANITIZE_ADDRESS__
    // ASan keeps SIGSEGV and SIGBUS for its own reports (a handler of its own, not the default).
    const int deadly[] = {SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGABRT, SIGPROF, SIGRTMIN + 3};
#else
    const int deadly[] = {SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGSEGV, SIGABRT, SIGBUS, SIGPROF, SIGRTMIN + 3};
#endif
    for (size_t i = 0; i < sizeof deadly / sizeof deadly[0]; i++) {
        e2e_run_result r;
        pid_t pid = start_file_system_run(&r, data);
        kill(pid, deadly[i]);
        e2e_wait(&r);
        char how[128];
        cr_expect(WIFSIGNALED(r.status) && WTERMSIG(r.status) == deadly[i], "signal %d (%s): %s", deadly[i],
                  strsignal(deadly[i]), e2e_describe_status(r.status, how, sizeof how));
        assert_left_nothing_after_death(&r);
    }
}

// ---- a stop during a long evaluation (case 2) ----

// A model whose evaluation of a few thousand samples takes seconds (two wide convolutions).
static char *slow_model(void) {
    char *path = e2e_path("slow.model");
    static const char text[] = "input 1 28 28\nconv2d 32 5 padding=2\nrelu\nconv2d 64 5 padding=2\nrelu\nflatten\n"
                               "linear 10\nlog_softmax\n";
    write_bytes(path, text, sizeof text - 1);
    return path;
}

// What a checkpoint says it has trained, read here: an --eval-only of the slow model would take
// seconds, and minutes on a busy machine.
static hw_ckpt_meta checkpoint_meta(const char *model_path, const char *ckpt) {
    hw_model model;
    cr_assert_eq(hw_model_load(&model, model_path), HW_OK, "%s", hw_error());
    float *weights = e2e_own(malloc(sizeof(float) * model.n_weights));
    hw_ckpt_meta meta;
    cr_assert_eq(hw_ckpt_load(ckpt, &model, weights, &meta), HW_OK, "%s", hw_error());
    hw_model_free(&model);
    return meta;
}

// Issue 21, case 2: SIGINT during the epoch-end evaluation waited for it; past 20 s the alarm
// killed the run (142, no message) and the epoch's checkpoint was never saved. The evaluation now
// stops between two test batches: the run saves and exits 130 at once, in both modes. (Bound by
// what the run guarantees: no epoch line, so the evaluation did not finish, and a stop within the
// 20 s grace, past which it would end without saving. Issue 44: a bound of 3 s and an --eval-only
// of the checkpoint timed out on a busy machine.)
static void check_stop_during_evaluation(int dataparallel) {
    char *data = e2e_synth_n("data", 93, 64, 6000);  // one short step, then about 10 s of evaluation
    char *model = slow_model();
    char *ckpt = e2e_path("stopped.safetensors");
    e2e_run_result r;
    if (dataparallel) {
        e2e_start_argv(&r, NULL,
                       (const char *const[]){"--data", data, "--model", model, "--mode", "dataparallel", "--replicas",
                                             "1", "--test-batch-size", "50", "--save", ckpt, NULL});
    } else {
        e2e_start_argv(&r, NULL,
                       (const char *const[]){"--data", data, "--model", model, "--workers", "1", "--test-batch-size",
                                             "50", "--save", ckpt, NULL});
    }
    double deadline = hw_now() + 60;
    pid_t kids[4];
    if (dataparallel) {
        // One step of 64 samples (well under a second), then the evaluation.
        while (e2e_count_lines(r.out_path) < 2 && hw_now() < deadline) e2e_sleep_ms(10);
        e2e_sleep_ms(2500);
    } else {
        // The worker has trained its epoch and exited: the parent evaluates.
        while (e2e_children_of(r.pid, kids, 4) == 0 && hw_now() < deadline) e2e_sleep_ms(5);
        while (e2e_children_of(r.pid, kids, 4) > 0 && hw_now() < deadline) e2e_sleep_ms(5);
        e2e_sleep_ms(500);
    }
    kill(r.pid, SIGINT);
    double sent = hw_now();
    e2e_wait_within(&r, 60);
    double took = hw_now() - sent;
    e2e_assert_exit(&r, 130);
    cr_expect_lt(took, 20.0, "the run took %.1f s to stop after SIGINT", took);
    cr_expect_null(strstr(r.err, "did not stop within"), "stderr: %s", r.err);
    e2e_assert_contains(r.out, "saved the current weights to", "stdout");
    cr_expect_null(strstr(r.out, "done:"), "a summary of an evaluation cut short: %s", r.out);
    cr_expect_null(strstr(r.out, "epoch 1/1"), "the evaluation ran to its end: %s", r.out);
    hw_ckpt_meta info = checkpoint_meta(model, ckpt);
    if (!dataparallel) cr_expect_eq(info.epoch, 1, "the epoch was trained before the signal");
    cr_expect_leq(info.samples_seen, 64);
    e2e_assert_left_nothing(&r);
}

Test(e2e_exits, a_stop_during_a_long_evaluation_saves_at_once) { check_stop_during_evaluation(0); }
Test(e2e_exits, dataparallel_a_stop_during_a_long_evaluation_saves_at_once) { check_stop_during_evaluation(1); }

// Issue 44, case 1: a signal during the first evaluation (the weights before training, a --metrics
// row) died of the signal's default action: no message, no save, and a metrics file it had created
// left empty. Now, as at any other moment of a run, the evaluation stops between two batches, the
// run says so and saves the weights it starts from (0 samples), exits 130, and the metrics file
// that was there is left as it was (no training, no row).
static void check_stop_during_first_evaluation(int dataparallel) {
    char *data = e2e_synth_n("data", 94, 64, 6000);
    char *model = slow_model();
    char *ckpt = e2e_path("first.safetensors"), *csv = e2e_path("first.csv");
    static const char previous[] = "a previous run's rows\n";
    write_bytes(csv, previous, sizeof previous - 1);
    const char *mode[4] = {"--workers", "1", "--batch-size", "64"};
    if (dataparallel) mode[0] = "--mode", mode[1] = "dataparallel", mode[2] = "--replicas", mode[3] = "1";
    e2e_run_result r;
    e2e_start_argv(&r, NULL,
                   (const char *const[]){"--data", data, "--model", model, mode[0], mode[1], mode[2], mode[3],
                                         "--test-batch-size", "50", "--metrics", csv, "--save", ckpt, NULL});
    // The header is printed just before the trainer starts; the first evaluation takes seconds.
    double deadline = hw_now() + 60;
    while (!(e2e_file_exists(r.out_path) && strstr(e2e_read_text(r.out_path), "CPU kernels")) && hw_now() < deadline)
        e2e_sleep_ms(10);
    e2e_sleep_ms(300);
    kill(r.pid, SIGINT);
    e2e_wait(&r);
    e2e_assert_exit(&r, 130);
    cr_expect_null(strstr(r.err, "did not stop within"), "stderr: %s", r.err);
    e2e_assert_contains(r.out, "interrupted by SIGINT after 0 samples", "stdout");
    e2e_assert_contains(r.out, "saved the current weights to", "stdout");
    hw_ckpt_meta info = checkpoint_meta(model, ckpt);
    cr_expect_eq(info.epoch, 0);
    cr_expect_eq(info.samples_seen, 0);
    cr_expect_str_eq(e2e_read_text(csv), previous, "the metrics file was changed");
    e2e_assert_left_nothing(&r);
}

Test(e2e_exits, a_stop_during_the_first_evaluation_saves_and_exits_130) { check_stop_during_first_evaluation(0); }
Test(e2e_exits, dataparallel_a_stop_during_the_first_evaluation_saves_and_exits_130) {
    check_stop_during_first_evaluation(1);
}

// ---- a checkpoint's temporary file (case 10) ----

// A model whose checkpoint takes a while to write (67 MB, synced): its temporary file can be caught.
static char *large_model(void) {
    char *path = e2e_path("large.model");
    static const char text[] = "input 1 28 28\nflatten\nlinear 6000\nrelu\nlinear 2000\nrelu\nlinear 10\nlog_softmax\n";
    write_bytes(path, text, sizeof text - 1);
    return path;
}

// Starts a long run of the large model saving to `ckpt` every epoch; returns the path its
// temporary file has while a save is under way.
static char *start_saving_run(e2e_run_result *r, const char *data, const char *model, const char *ckpt) {
    e2e_start_argv(r, NULL,
                   (const char *const[]){"--data", data, "--model", model, "--workers", "1", "--epochs", "1000",
                                         "--quiet", "--save", ckpt, NULL});
    size_t cap = strlen(ckpt) + 32;
    char *tmp = e2e_own(malloc(cap));
    snprintf(tmp, cap, "%s.tmp.%d", ckpt, (int)r->pid);
    return tmp;
}

// Waits (1 ms polls) until `path` exists, at most `seconds`.
static int wait_for_file(const char *path, double seconds) {
    double deadline = hw_now() + seconds;
    while (!e2e_file_exists(path)) {
        if (hw_now() > deadline) return 0;
        struct timespec ms = {0, 1000000L};
        nanosleep(&ms, NULL);
    }
    return 1;
}

// A second stop signal while the checkpoint is being written ends the run at once: the temporary
// file goes with it, and the checkpoint of the epoch before is untouched. (SIGINT then SIGTERM: a
// second SIGINT sent while the save sits in fsync, where no signal is delivered, would be merged
// with the first.)
Test(e2e_exits, a_second_stop_signal_during_a_save_removes_its_temporary_file) {
    char *data = e2e_synth_n("data", 90, 200, 100);
    char *model = large_model();
    char *ckpt = e2e_path("large.safetensors");
    e2e_run_result r;
    char *tmp = start_saving_run(&r, data, model, ckpt);
    cr_assert(wait_for_file(ckpt, 60), "no checkpoint after 60 s");
    int caught = 0;
    for (int attempt = 0; attempt < 20 && !caught; attempt++) {
        cr_assert(wait_for_file(tmp, 60), "no save under way within 60 s");
        kill(r.pid, SIGINT);
        caught = e2e_file_exists(tmp);
        kill(r.pid, SIGTERM);
    }
    e2e_wait(&r);
    cr_assert(caught, "never caught a save under way");
    e2e_assert_exit(&r, 143);
    cr_expect(!e2e_file_exists(tmp), "%s was left", tmp);
    cr_expect_geq(e2e_eval_checkpoint(data, model, ckpt).epoch, 1, "the previous checkpoint is damaged");
    assert_left_nothing_after_death(&r);
}

static void use_a_private_dev_shm(void) {
    if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=1m") != 0) {
        cr_skip_test("cannot mount a private /dev/shm here (it needs root): %s", strerror(errno));
    }
}

// SIGKILL during the write runs nothing: the temporary file stays. --clean-shm finds it through the
// record the save left in /dev/shm, once the process is gone, and removes both. (In a /dev/shm of
// this test's own, so that --clean-shm touches no other test's names.)
Test(e2e_exits, clean_shm_removes_the_temporary_file_of_a_save_killed_by_sigkill) {
    use_a_private_dev_shm();
    char *data = e2e_synth_n("data", 91, 200, 100);
    char *model = large_model();
    char *ckpt = e2e_path("large.safetensors");
    e2e_run_result r;
    char *tmp = start_saving_run(&r, data, model, ckpt);
    int left = 0;
    for (int attempt = 0; attempt < 20 && !left; attempt++) {
        cr_assert(wait_for_file(tmp, 60), "no save under way within 60 s");
        kill(r.pid, SIGKILL);
        e2e_wait(&r);
        left = e2e_file_exists(tmp);
        if (!left) tmp = start_saving_run(&r, data, model, ckpt);  // the save ended first: again
    }
    cr_assert(left, "never killed a save under way");
    double deadline = hw_now() + 5;
    pid_t kids[4];
    while (e2e_children_of(getpid(), kids, 4) > 0 && hw_now() < deadline) {
        while (waitpid(-1, NULL, WNOHANG) > 0) {
        }
        e2e_sleep_ms(10);
    }
    e2e_assert_no_leftover_processes();
    e2e_run_result clean;
    e2e_run(&clean, NULL, "--clean-shm");
    e2e_assert_exit(&clean, 0);
    char expected[1200];
    snprintf(expected, sizeof expected, "removed %s: a checkpoint's temporary file that process %d", tmp, (int)r.pid);
    e2e_assert_contains(clean.out, expected, "stdout");
    cr_expect(!e2e_file_exists(tmp), "%s is still there", tmp);
    cr_expect_eq(e2e_count_shm_names(r.pid), 0, "the record is still in /dev/shm");
}

// Without /dev/shm's record (another /dev/shm, or one cleaned), the next run that saves to the same
// path removes a temporary file of it whose process is gone, and says so; never one of a live
// process.
Test(e2e_exits, the_next_run_removes_a_dead_saves_temporary_file) {
    char *data = e2e_synth(92);
    char *ckpt = e2e_path("m.safetensors");
    pid_t dead = fork();
    cr_assert_neq(dead, -1);
    if (dead == 0) _exit(0);
    cr_assert_eq(waitpid(dead, NULL, 0), dead);
    char stale[1200], live[1200];
    snprintf(stale, sizeof stale, "%s.tmp.%d", ckpt, (int)dead);
    snprintf(live, sizeof live, "%s.tmp.%d", ckpt, (int)getpid());
    write_bytes(stale, "half a checkpoint", 17);
    write_bytes(live, "being written", 13);
    e2e_run_result r;
    e2e_run(&r, NULL, "--data", data, "--model", e2e.mlp, "--quiet", "--save", ckpt);
    e2e_assert_exit(&r, 0);
    cr_expect(!e2e_file_exists(stale), "%s was left", stale);
    e2e_assert_contains(r.err, stale, "stderr");
    cr_expect(e2e_file_exists(live), "the file of a live process was removed");
}
