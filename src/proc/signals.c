// signals: every signal handler of the program (see include/hw/signals.h for the two regimes).
#include "hw/signals.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

// ---- while a run trains: SIGINT, SIGTERM and SIGHUP are requests to stop ----

// SIGHUP is a closed terminal: save and stop, as on Ctrl-C.
static const int stop_signals[] = {SIGINT, SIGTERM, SIGHUP};
enum { N_STOP_SIGNALS = sizeof stop_signals / sizeof stop_signals[0] };

static volatile sig_atomic_t received_signal;

// What the handlers release (hw_signals_set_cleanup; src/proc/shm.c sets them): nothing until set.
static void nothing(void) {}
static void (*volatile cleanup_on_stop)(void) = nothing;
static void (*volatile cleanup_on_death)(void) = nothing;

void hw_signals_set_cleanup(void (*on_stop)(void), void (*on_death)(void)) {
    cleanup_on_stop = on_stop ? on_stop : nothing;
    cleanup_on_death = on_death ? on_death : nothing;
}
static int catch_depth;  // nested hw_stop_signals_catch calls that hold the handlers
static struct sigaction saved[N_STOP_SIGNALS], saved_alarm;

// A run asked to stop saves its checkpoint and exits within seconds. If it does not (stuck in a
// library call that never returns, such as OpenBLAS retrying an mmap that a memory limit refuses),
// a second signal, or SIGALRM after this many seconds, ends the process at once.
enum { STOP_GRACE_SECONDS = 20 };

// write(2) of a constant or a signal-safe buffer: the handlers' only output.
static void say(const char *text) {
    ssize_t written = write(STDERR_FILENO, text, strlen(text));
    (void)written;
}

static void on_stop_signal(int sig) {
    if (received_signal) {
        // The second signal: stop now, whatever was under way; a checkpoint half written goes.
        cleanup_on_death();
        _exit(128 + sig);
    }
    cleanup_on_stop();  // not the temporary file: the save it belongs to may be the one that stops the run
    received_signal = sig;
    alarm(STOP_GRACE_SECONDS);  // on_grace_over ends a process that is stuck
}

// SIGALRM while catching: the grace after a stop signal is over (or someone sent SIGALRM).
static void on_grace_over(int sig) {
    if (!received_signal) {
        // Not ours: die of it, as its default action would, leaving nothing behind.
        cleanup_on_death();
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    say(received_signal == SIGINT   ? "hogwild: did not stop within 20 s of SIGINT; ended without saving\n"
        : received_signal == SIGHUP ? "hogwild: did not stop within 20 s of SIGHUP; ended without saving\n"
                                    : "hogwild: did not stop within 20 s of SIGTERM; ended without saving\n");
    cleanup_on_death();
    _exit(128 + received_signal);
}

void hw_stop_signal_set(sigset_t *set) {
    sigemptyset(set);
    for (int k = 0; k < N_STOP_SIGNALS; k++) sigaddset(set, stop_signals[k]);
}

void hw_stop_signals_catch(void) {
    if (catch_depth++ > 0) return;
    received_signal = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    hw_stop_signal_set(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;  // the waits that must wake (ppoll in hw_join) return EINTR regardless
    for (int k = 0; k < N_STOP_SIGNALS; k++) {
        sigaction(stop_signals[k], NULL, &saved[k]);
        // A signal ignored by whoever started us (a background job, nohup) stays ignored.
        if (!(saved[k].sa_flags & SA_SIGINFO) && saved[k].sa_handler == SIG_IGN) continue;
        sa.sa_handler = on_stop_signal;
        sigaction(stop_signals[k], &sa, NULL);
    }
    sa.sa_handler = on_grace_over;
    sigaction(SIGALRM, &sa, &saved_alarm);
}

void hw_stop_signals_release(void) {
    if (--catch_depth > 0) return;
    alarm(0);
    for (int k = 0; k < N_STOP_SIGNALS; k++) sigaction(stop_signals[k], &saved[k], NULL);
    sigaction(SIGALRM, &saved_alarm, NULL);
}

int hw_stop_signal(void) { return received_signal; }

void hw_stop_signal_request(int sig) {
    if (catch_depth == 0 || received_signal) return;
    cleanup_on_stop();
    received_signal = sig;
    alarm(STOP_GRACE_SECONDS);
}

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
    sigaction(SIGALRM, &sa, NULL);
}

// ---- otherwise: remove the shared-memory names and temporary files, then die as the default
// action would ----

static atomic_flag death_handlers_installed = ATOMIC_FLAG_INIT;

static void remove_and_die(int sig) {
    cleanup_on_death();
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    // Pending until this handler returns, then the default action ends the process (a fault such
    // as SIGSEGV also comes back when its instruction runs again).
    raise(sig);
}

// Every signal whose default action ends the process (signal(7)), the real-time ones included.
static int is_deadly(int sig) {
    static const int deadly[] = {
        SIGHUP,    SIGINT,  SIGQUIT, SIGILL,  SIGTRAP, SIGABRT,   SIGBUS,  SIGFPE, SIGUSR1, SIGSEGV, SIGUSR2,
        SIGPIPE,   SIGALRM, SIGTERM, SIGXCPU, SIGXFSZ, SIGVTALRM, SIGPROF, SIGIO,  SIGSYS,  SIGPWR,
#ifdef SIGSTKFLT
        SIGSTKFLT,
#endif
    };
    for (size_t k = 0; k < sizeof deadly / sizeof deadly[0]; k++) {
        if (deadly[k] == sig) return 1;
    }
    return sig >= SIGRTMIN && sig <= SIGRTMAX;
}

// Under AddressSanitizer the alternate stack is its own: it unmaps a thread's alternate stack when
// the thread ends, and one of ours would make it fail ("unable to unmap").
#if defined(__SANITIZE_ADDRESS__)
#define HW_OWN_ALT_STACK 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HW_OWN_ALT_STACK 0
#endif
#endif
#ifndef HW_OWN_ALT_STACK
#define HW_OWN_ALT_STACK 1
#endif

void hw_signals_cleanup_on_death(void) {
    if (atomic_flag_test_and_set(&death_handlers_installed)) return;
    // A stack of its own for the handler of the thread that installs them (the parent's main
    // thread): a SIGSEGV from a stack overflow then still runs it.
    int on_stack = 0;
#if HW_OWN_ALT_STACK
    static char alt_stack[64 * 1024];
    stack_t ss = {.ss_sp = alt_stack, .ss_size = sizeof alt_stack, .ss_flags = 0};
    on_stack = sigaltstack(&ss, NULL) == 0;
#endif
    for (int sig = 1; sig < NSIG; sig++) {
        if (!is_deadly(sig)) continue;
        struct sigaction old;
        if (sigaction(sig, NULL, &old) != 0) continue;
        // Only where the action is still the default: a handler or an ignore set by someone else
        // (main ignores SIGPIPE and SIGXFSZ, MPI keeps its own) stays.
        if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) continue;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = remove_and_die;
        sa.sa_flags = on_stack ? SA_ONSTACK : 0;
        sigemptyset(&sa.sa_mask);
        sigaction(sig, &sa, NULL);
    }
}
