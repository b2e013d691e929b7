// err: how hogwild reports failure.
//
// A function that can fail on input returns HW_OK (0) or HW_ERR (-1) and leaves a message in a
// per-thread buffer that names what is at fault (the file, the line, the setting, the worker; a
// setting in the module's own terms, its flag added by hw_option_hint, include/hw/option.h).
// The caller either adds context with hw_error_prefix() and passes the failure up, or prints
// hw_error() and exits non-zero. No assert() on user input anywhere.
#ifndef HW_ERR_H
#define HW_ERR_H

#include <stdarg.h>

enum { HW_OK = 0, HW_ERR = -1 };

// Sets the message (printf-style) and returns HW_ERR, so that `return hw_fail(...)` reads well.
int hw_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// Like hw_fail, with ": <strerror(errno_value)>" appended.
int hw_fail_errno(int errno_value, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// Puts "<prefix>: " in front of the current message (context from a caller) and returns HW_ERR.
int hw_error_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// The current message of this thread ("" when none was set).
const char *hw_error(void);

void hw_error_clear(void);

#endif
