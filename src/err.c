// err: the per-thread error message behind hw_fail() and hw_error().
#include "hw/err.h"

#include <stdio.h>
#include <string.h>

// Room for the longest message a run gives: two paths of PATH_MAX (a checkpoint and a dataset, say)
// with the words around them; a message longer than that is cut, never overflows.
enum { HW_ERROR_CAP = 3 * 4096 };

// Thread-local so that DataParallel replica threads and prefetch threads keep their own messages.
static _Thread_local char error_message[HW_ERROR_CAP];

// Appends as much of `text` as fits. (Truncation is intended: a message is cut, never overflows.)
static void append(const char *text) {
    size_t used = strlen(error_message);
    while (used + 1 < sizeof error_message && *text) error_message[used++] = *text++;
    error_message[used] = '\0';
}

int hw_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error_message, sizeof error_message, fmt, ap);
    va_end(ap);
    return HW_ERR;
}

int hw_fail_errno(int errno_value, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error_message, sizeof error_message, fmt, ap);
    va_end(ap);
    append(": ");
    append(strerror(errno_value));
    return HW_ERR;
}

int hw_error_prefix(const char *fmt, ...) {
    char old[HW_ERROR_CAP];
    memcpy(old, error_message, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error_message, sizeof error_message, fmt, ap);
    va_end(ap);
    append(": ");
    append(old);
    return HW_ERR;
}

const char *hw_error(void) { return error_message; }

void hw_error_clear(void) { error_message[0] = '\0'; }
