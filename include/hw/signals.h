// signals: every signal handler of the program, in one place (src/proc/signals.c).
//
// Two regimes in the parent, and the workers' dispositions (hw_signals_worker):
//   while a run trains (between hw_stop_signals_catch and hw_stop_signals_release, which nest)
//       SIGINT, SIGTERM and SIGHUP are requests to stop: the handler records the signal and runs the
//       clean-up set for a stop (src/proc/shm.c sets hw_shm_unlink_all: the shared-memory names); the trainers poll
//       hw_stop_signal(), stop, save (--save) and ./hogwild exits 128 + signal. A second signal,
//       or 20 s without stopping (SIGALRM, which then says so on stderr), ends the process at once
//       with 128 + the stop signal, after the clean-up set for a death (hw_shm_remove_all: also a
//       checkpoint's temporary file half written). A signal the shell set to be ignored (a background job, nohup) stays
//       ignored.
//   otherwise, once a process holds shared-memory names or a temporary file
//       (hw_signals_cleanup_on_death) every signal whose default action is death (SIGQUIT,
//       SIGUSR1, SIGALRM, SIGSEGV, SIGABRT, the real-time ones, ...), where its action is still the
//       default, runs the clean-up set for a death first and then ends the process by the same
//       signal. Only SIGKILL leaves them (hogwild --clean-shm).
#ifndef HW_SIGNALS_H
#define HW_SIGNALS_H

#include <signal.h>

// Installs the recording handler for the stop signals (the first of nested calls also forgets a
// signal recorded before); hw_stop_signals_release puts the previous handlers back.
void hw_stop_signals_catch(void);
void hw_stop_signals_release(void);
// The stop signal received since the outermost hw_stop_signals_catch, or 0. Still readable after
// the release (the command line exits 128 + signal).
int hw_stop_signal(void);
// A stop asked for by the program itself, as if `sig` had come (while the stop signals are caught,
// and none has come yet): across ranks, another rank's stop signal, which a coupling round brought.
// The run then stops by the same paths as for its own signal, the 20 s grace included.
void hw_stop_signal_request(int sig);
// The stop signals (SIGINT, SIGTERM, SIGHUP) as a set: to block them around fork and around the start of
// a library's threads (threads inherit the mask of the thread that starts them).
void hw_stop_signal_set(sigset_t *set);
// "SIGINT", "SIGTERM" or "SIGHUP": the stop signal's name, for "interrupted by ..." messages.
const char *hw_stop_signal_name(int sig);

// In a worker hw_spawn forked: SIGINT ignored (a terminal's Ctrl-C reaches the whole process
// group; the parent stops its workers itself, with SIGTERM), SIGTERM and SIGHUP back to the default.
void hw_signals_worker(void);

// What the handlers release, set by the module that owns what must not outlive the process
// (src/proc/shm.c: its names and temporary file), so that this file calls no other: `on_stop` at a
// stop signal while a run trains, `on_death` on every way to a death that runs code. Both must be
// async-signal-safe. Unset, the handlers release nothing.
void hw_signals_set_cleanup(void (*on_stop)(void), void (*on_death)(void));

// Installs, once, the handler that runs the clean-up set for a death (hw_signals_set_cleanup) before
// the default death, for every deadly signal whose action is the default, on an alternate stack of
// the calling thread (a stack overflow's SIGSEGV too).
void hw_signals_cleanup_on_death(void);

#endif
