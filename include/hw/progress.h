// progress: the run's live line on stderr (epoch, samples, samples/s, running loss, ETA) and its
// result lines on stdout (src/report/progress.c).
#ifndef HW_PROGRESS_H
#define HW_PROGRESS_H

#include "hw/clock.h"

#include <stdint.h>

// One live line on a terminal, plain periodic lines otherwise, nothing with --quiet.
typedef struct {
    int quiet;
    int live;        // stderr is a terminal
    double started;  // monotonic seconds
    double last_print;
    int64_t total_samples;  // for the ETA
    int line_open;          // a live line is on screen and not yet ended
    int stdout_closed;      // a write to stdout failed with EPIPE: results are no longer printed
    int silent;             // a rank other than 0 of an mpirun job: no progress, no results
} hw_progress;
void hw_progress_start(hw_progress *p, int quiet, int64_t total_samples);
// Called often; prints at most a few times a second (live) or every few seconds (plain).
void hw_progress_update(hw_progress *p, int epoch, int epochs, int64_t samples_done, double running_loss);
// A result line on stdout (epoch results, the summary), printed even with --quiet; a live
// progress line on the same terminal is cleared first.
void hw_progress_message(hw_progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
