// clock: seconds on the monotonic clock (include/hw/clock.h).
#include "hw/clock.h"

#include <time.h>

double hw_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
