// lr_schedule: each schedule's formula, once (include/hw/lr_schedule.h).
#include "hw/lr_schedule.h"

#include "hw/err.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// A decimal number and nothing else: strtod alone also takes hexadecimal, "inf", "nan" and
// leading blanks, which no other number of the command line accepts.
static int read_decimal(const char *text, size_t length, double *value) {
    char buffer[64];
    if (length == 0 || length >= sizeof buffer) return 0;
    memcpy(buffer, text, length);
    buffer[length] = '\0';
    for (size_t i = 0; i < length; i++) {
        if (!strchr("0123456789.eE+-", buffer[i])) return 0;
    }
    char *end = NULL;
    errno = 0;
    *value = strtod(buffer, &end);
    return end == buffer + length && errno == 0 && isfinite(*value);
}

static int read_gamma(const char *text, size_t length, const char *whole, double *gamma) {
    if (!read_decimal(text, length, gamma) || !(*gamma > 0) || *gamma > 1) {
        return hw_fail("the schedule '%s': its factor must be a decimal number in (0, 1], got '%.*s'", whole,
                       (int)length, text);
    }
    return HW_OK;
}

int hw_lr_schedule_parse(const char *text, hw_lr_schedule *out) {
    *out = (hw_lr_schedule){.kind = HW_LR_CONSTANT, .every = 1, .gamma = 1};
    const char *colon = strchr(text, ':');
    size_t name_length = colon ? (size_t)(colon - text) : strlen(text);
    const char *rest = colon ? colon + 1 : NULL;
    const char *expected = "expected constant, step:EVERY:GAMMA, exponential:GAMMA, linear or cosine";
    if (name_length == 8 && strncmp(text, "constant", 8) == 0 && !rest) return HW_OK;
    if (name_length == 6 && strncmp(text, "linear", 6) == 0 && !rest) {
        out->kind = HW_LR_LINEAR;
        return HW_OK;
    }
    if (name_length == 6 && strncmp(text, "cosine", 6) == 0 && !rest) {
        out->kind = HW_LR_COSINE;
        return HW_OK;
    }
    if (name_length == 11 && strncmp(text, "exponential", 11) == 0 && rest) {
        out->kind = HW_LR_EXPONENTIAL;
        return read_gamma(rest, strlen(rest), text, &out->gamma);
    }
    if (name_length == 4 && strncmp(text, "step", 4) == 0 && rest) {
        out->kind = HW_LR_STEP;
        const char *second = strchr(rest, ':');
        long every = 0;
        const char *digit = rest;
        while (second && digit < second && *digit >= '0' && *digit <= '9' && every <= 1000000) {
            every = every * 10 + (*digit++ - '0');
        }
        if (!second || digit != second || every < 1 || every > 1000000) {
            return hw_fail("the schedule '%s': step:EVERY:GAMMA takes EVERY, a whole number of epochs from 1 to "
                           "1000000, then ':' and GAMMA",
                           text);
        }
        out->every = (int)every;
        return read_gamma(second + 1, strlen(second + 1), text, &out->gamma);
    }
    return hw_fail("unknown learning-rate schedule '%s': %s", text, expected);
}

void hw_lr_schedule_format(const hw_lr_schedule *schedule, char *out, size_t size) {
    switch (schedule->kind) {
    case HW_LR_STEP: snprintf(out, size, "step:%d:%g", schedule->every, schedule->gamma); break;
    case HW_LR_EXPONENTIAL: snprintf(out, size, "exponential:%g", schedule->gamma); break;
    case HW_LR_LINEAR: snprintf(out, size, "linear"); break;
    case HW_LR_COSINE: snprintf(out, size, "cosine"); break;
    default: snprintf(out, size, "constant"); break;
    }
}

double hw_lr_at(const hw_lr_schedule *schedule, double lr, int64_t samples, int64_t epoch_samples,
                int64_t run_samples) {
    double epoch = (double)(samples / epoch_samples);
    double done = samples >= run_samples ? 1 : (double)samples / (double)run_samples;
    double rate = lr;
    switch (schedule->kind) {
    case HW_LR_STEP: rate = lr * pow(schedule->gamma, floor(epoch / schedule->every)); break;
    case HW_LR_EXPONENTIAL: rate = lr * pow(schedule->gamma, epoch); break;
    case HW_LR_LINEAR: rate = lr * (1 - done); break;
    case HW_LR_COSINE: rate = lr * (1 + cos(M_PI * done)) / 2; break;
    default: break;
    }
    if (schedule->warmup > 0 && samples < schedule->warmup) rate *= (double)samples / (double)schedule->warmup;
    return rate;
}
