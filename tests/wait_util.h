// Helpers of the process tests (shm, spawn): reading from a child's pipe with a deadline. Times
// come from hw_now, the library's monotonic clock.
#ifndef HW_TESTS_WAIT_UTIL_H
#define HW_TESTS_WAIT_UTIL_H

#include "hw/clock.h"  // hw_now

#include <poll.h>
#include <stddef.h>
#include <unistd.h>

// Reads exactly n bytes within `seconds`; 1 on success.
static inline int read_within(int fd, void *buf, size_t n, double seconds) {
    double deadline = hw_now() + seconds;
    size_t got = 0;
    while (got < n) {
        int left_ms = (int)((deadline - hw_now()) * 1000);
        if (left_ms <= 0) return 0;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, left_ms) <= 0) continue;
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r <= 0) return 0;
        got += (size_t)r;
    }
    return 1;
}

#endif
