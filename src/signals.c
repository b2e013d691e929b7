// signals: every signal handler of the program (see include/hw/signals.h for the two regimes).
#include "hw/signals.h"

#include "hw/shm.h"

#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

// ---- while a run trains: SIGINT, SIGTERM and SIGHUP are requests to stop ----

// SIGHUP is a closed terminal: save and stop, as on Ctrl-C.
static const int stop_signals[] = {SIGINT, SIGTERM, SIGHUP};
enum { N_STOP_SIGNALS = sizeof stop_signals / sizeof stop_signals[0] };

static volatile sig_atomic_t received_signal;
static int catch_depth;  // nested hw_stop_signals_catch calls that hold the handlers
static struct sigaction saved[N_STOP_SIGNALS];

// A run asked to stop saves its checkpoint and exits within seconds. If it does not (stuck in a
// library call that never returns, such as OpenBLAS retrying an mmap that a memory limit refuses),
// a second signal, or SIGALRM after this many seconds, ends the process at once.
enum { STOP_GRACE_SECONDS = 20 };

static void on_stop_signal(int sig) {
    hw_shm_unlink_all();
    if (received_signal) _exit(128 + sig);  // the second signal: stop now, whatever was under way
    received_signal = sig;
    alarm(STOP_GRACE_SECONDS);  // SIGALRM's default action ends a process that is stuck
}

void hw_stop_signal_set(sigset_t *set) {
    sigemptyset(set);
    for (int k = 0; k < N_STOP_SIGNALS; k++) sigaddset(set, stop_signals[k]);
}

void hw_stop_signals_catch(void) {
    if (catch_depth++ > 0) return;
    received_signal = 0;
    for (int k = 0; k < N_STOP_SIGNALS; k++) {
        sigaction(stop_signals[k], NULL, &saved[k]);
        // A signal ignored by whoever started us (a background job, nohup) stays ignored.
        if (!(saved[k].sa_flags & SA_SIGINFO) && saved[k].sa_handler == SIG_IGN) continue;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_stop_signal;
        hw_stop_signal_set(&sa.sa_mask);
        sa.sa_flags = SA_RESTART;  // the waits that must wake (ppoll in hw_join) return EINTR regardless
        sigaction(stop_signals[k], &sa, NULL);
    }
}

void hw_stop_signals_release(void) {
    if (--catch_depth > 0) return;
    for (int k = 0; k < N_STOP_SIGNALS; k++) sigaction(stop_signals[k], &saved[k], NULL);
    alarm(0);
}

int hw_stop_signal(void) { return received_signal; }

const char *hw_stop_signal_name(int sig) { return sig == SIGINT ? "SIGINT" : sig == SIGHUP ? "SIGHUP" : "SIGTERM"; }

// ---- in a worker ----

void hw_signals_worker(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = SIG_IGN;  // Ctrl-C reaches the whole group; the parent stops us with SIGTERM
    sigaction(SIGINT, &sa, NULL);
    sa.sa_handler = SIG_DFL;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);  // the parent stops its workers itself
}

// ---- otherwise: unlink the shared-memory names, then die as the default action would ----

static atomic_flag death_handlers_installed = ATOMIC_FLAG_INIT;

static void unlink_shm_and_die(int sig) {
    hw_shm_unlink_all();
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    raise(sig);  // pending until this handler returns, then the default action ends the process
}

void hw_signals_unlink_shm_on_death(void) {
    if (atomic_flag_test_and_set(&death_handlers_installed)) return;
    const int fatal[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t k = 0; k < sizeof fatal / sizeof fatal[0]; k++) {
        struct sigaction old;
        if (sigaction(fatal[k], NULL, &old) != 0) continue;
        if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL) {
            struct sigaction sa;
            memset(&sa, 0, sizeof sa);
            sa.sa_handler = unlink_shm_and_die;
            sigemptyset(&sa.sa_mask);
            sigaction(fatal[k], &sa, NULL);
        }
    }
}
