// Tests of src/proc/signals.c, the one place that handles signals (the end-to-end tests of Ctrl-C in
// both trainers are in test_e2e_train.c and test_spawn.c).
#include "hw/err.h"
#include "hw/shm.h"
#include "hw/signals.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void set_action(int sig, void (*handler)(int)) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    cr_assert_eq(sigaction(sig, &sa, NULL), 0);
}

static void (*action_of(int sig))(int) {
    struct sigaction sa;
    cr_assert_eq(sigaction(sig, NULL, &sa), 0);
    return sa.sa_handler;
}

// While caught, a stop signal is recorded, not fatal; nested catches share one record; an ignored
// signal stays ignored; the release puts every previous action back and keeps the record.
Test(signals, stop_signals_are_recorded_nest_and_are_restored) {
    set_action(SIGINT, SIG_IGN);
    set_action(SIGTERM, SIG_DFL);
    hw_stop_signals_catch();
    cr_expect_eq(hw_stop_signal(), 0);
    cr_expect_eq(action_of(SIGINT), SIG_IGN, "an ignored SIGINT (background job, nohup) stays ignored");
    raise(SIGTERM);
    cr_expect_eq(hw_stop_signal(), SIGTERM, "recorded, and this process is still alive");
    hw_stop_signals_catch();
    cr_expect_eq(hw_stop_signal(), SIGTERM, "a nested catch keeps the record");
    hw_stop_signals_release();
    raise(SIGINT);
    cr_expect_eq(hw_stop_signal(), SIGTERM);
    hw_stop_signals_release();
    cr_expect_eq(action_of(SIGTERM), SIG_DFL, "the previous action is back");
    cr_expect_eq(action_of(SIGINT), SIG_IGN);
    cr_expect_eq(hw_stop_signal(), SIGTERM, "still readable after the release, for the exit status");
    hw_stop_signals_catch();
    cr_expect_eq(hw_stop_signal(), 0, "a new outermost catch starts afresh");
    hw_stop_signals_release();
    sigset_t set;
    hw_stop_signal_set(&set);
    cr_expect(sigismember(&set, SIGINT) && sigismember(&set, SIGTERM) && sigismember(&set, SIGHUP),
              "SIGHUP (a closed terminal) stops a run as Ctrl-C does");
}

// The death handler goes only where the action is the default, and only once.
Test(signals, death_handlers_only_replace_the_default) {
    set_action(SIGINT, SIG_IGN);
    set_action(SIGTERM, SIG_DFL);
    set_action(SIGHUP, SIG_DFL);
    hw_signals_cleanup_on_death();
    cr_expect_eq(action_of(SIGINT), SIG_IGN);
    void (*installed)(int) = action_of(SIGTERM);
    cr_expect(installed != SIG_DFL && installed != SIG_IGN);
    cr_expect_eq(action_of(SIGHUP), installed);
    set_action(SIGHUP, SIG_DFL);
    hw_signals_cleanup_on_death();
    cr_expect_eq(action_of(SIGHUP), SIG_DFL, "installed once");
}

// The death handler ends the process by the same signal, as the default action would.
Test(signals, death_handler_dies_of_the_signal, .signal = SIGTERM) {
    set_action(SIGTERM, SIG_DFL);
    hw_signals_cleanup_on_death();
    raise(SIGTERM);
}

// Issue 21, case 11: SIGQUIT, SIGUSR1, SIGALRM, SIGSEGV, SIGABRT (every signal whose default is
// death) left the file_system names; the handler now covers them all, the real-time ones too.
Test(signals, death_handlers_cover_every_deadly_signal) {
    const int deadly[] = {SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGSEGV, SIGABRT,  SIGBUS,
                          SIGFPE,  SIGILL,  SIGSYS,  SIGXCPU, SIGPROF, SIGRTMIN, SIGRTMAX};
    for (size_t i = 0; i < sizeof deadly / sizeof deadly[0]; i++) set_action(deadly[i], SIG_DFL);
    set_action(SIGCHLD, SIG_DFL);
    hw_signals_cleanup_on_death();
    for (size_t i = 0; i < sizeof deadly / sizeof deadly[0]; i++) {
        void (*handler)(int) = action_of(deadly[i]);
        cr_expect(handler != SIG_DFL && handler != SIG_IGN, "signal %d (%s) has no handler", deadly[i],
                  strsignal(deadly[i]));
    }
    cr_expect_eq(action_of(SIGCHLD), SIG_DFL, "a signal whose default is not death is left alone");
}

// In a child: the stop signal, then the end of the grace (SIGALRM, from alarm(20) when the run is
// stuck): the child ends at once with 128 + the stop signal, says so, and its names are gone.
Test(signals, the_end_of_the_stop_grace_ends_the_run_saying_so) {
    cr_assert_eq(hw_sharing_strategy_set("file_system"), HW_OK);
    int err_pipe[2];
    cr_assert_eq(pipe(err_pipe), 0);
    char name[128] = "";
    int name_pipe[2];
    cr_assert_eq(pipe(name_pipe), 0);
    fflush(NULL);
    pid_t child = fork();
    cr_assert_neq(child, -1);
    if (child == 0) {
        dup2(err_pipe[1], STDERR_FILENO);
        hw_shm shm;
        if (hw_shm_open(&shm, 4096) != HW_OK) _exit(3);
        if (write(name_pipe[1], shm.name, sizeof shm.name) != (ssize_t)sizeof shm.name) _exit(4);
        signal(SIGINT, SIG_DFL);  // as from a terminal; a background job of a script inherits it ignored
        hw_stop_signals_catch();
        raise(SIGINT);
        raise(SIGALRM);  // as alarm(20) would, with the run stuck
        _exit(5);        // not reached
    }
    close(err_pipe[1]);
    close(name_pipe[1]);
    char names[64] = "";
    cr_assert_eq(read(name_pipe[0], names, sizeof names), (ssize_t)sizeof names);
    snprintf(name, sizeof name, "/dev/shm%s", names);
    int status;
    cr_assert_eq(waitpid(child, &status, 0), child);
    char text[512] = "";
    ssize_t n = read(err_pipe[0], text, sizeof text - 1);
    text[n > 0 ? n : 0] = '\0';
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 130, "status %#x", status);
    cr_expect(strstr(text, "did not stop within 20 s of SIGINT") != NULL, "stderr: %s", text);
    cr_expect_neq(access(name, F_OK), 0, "%s is left", name);
}
