// clock: the one clock of hogwild's timings (training time, progress, measurements).
#ifndef HW_CLOCK_H
#define HW_CLOCK_H

// Seconds on CLOCK_MONOTONIC: differences of two calls are durations, unaffected by changes of the
// wall-clock time.
double hw_now(void);

#endif
