// Tests of src/signals.c, the one place that handles signals (the end-to-end tests of Ctrl-C in
// both trainers are in test_e2e_train.c and test_spawn.c).
#include "hw/signals.h"

#include <criterion/criterion.h>
#include <string.h>

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
    hw_signals_unlink_shm_on_death();
    cr_expect_eq(action_of(SIGINT), SIG_IGN);
    void (*installed)(int) = action_of(SIGTERM);
    cr_expect(installed != SIG_DFL && installed != SIG_IGN);
    cr_expect_eq(action_of(SIGHUP), installed);
    set_action(SIGHUP, SIG_DFL);
    hw_signals_unlink_shm_on_death();
    cr_expect_eq(action_of(SIGHUP), SIG_DFL, "installed once");
}

// The death handler ends the process by the same signal, as the default action would.
Test(signals, death_handler_dies_of_the_signal, .signal = SIGTERM) {
    set_action(SIGTERM, SIG_DFL);
    hw_signals_unlink_shm_on_death();
    raise(SIGTERM);
}
