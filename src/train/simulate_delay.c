// simulate_delay: the delay models of a simulated run, read from their text and drawn from
// (include/hw/simulate.h).
#include "hw/simulate.h"

#include "hw/err.h"
#include "hw/metrics.h"
#include "hw/option.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert((int)HW_DELAY_BINS == (int)HW_METRICS_STALE_BINS, "a measured histogram has the metrics' bins");

// The delays bin b holds: 0, 1, then [2^(b-1), 2^b), and the open last bin as HW_DELAY_MAX alone.
static void bin_range(int b, int *lo, int *hi) {
    if (b == HW_DELAY_BINS - 1) {
        *lo = *hi = HW_DELAY_MAX;
    } else if (b < 2) {
        *lo = *hi = b;
    } else {
        *lo = 1 << (b - 1);
        *hi = (1 << b) - 1;
    }
}

// K: decimal digits only, 0 to HW_DELAY_MAX.
static int parse_count(const char *text, const char *model, int *out) {
    char *end = NULL;
    errno = 0;
    long k = isdigit((unsigned char)text[0]) ? strtol(text, &end, 10) : -1;
    if (k < 0 || errno || *end != '\0') {
        return hw_fail("%s:K expects a whole number of updates K from 0 to %d, got '%s'", model, HW_DELAY_MAX, text);
    }
    if (k > HW_DELAY_MAX) {
        return hw_fail("%s:%ld: the delay is bounded by %d updates (the simulator keeps that many old copies of the "
                       "weights)",
                       model, k, HW_DELAY_MAX);
    }
    *out = (int)k;
    return HW_OK;
}

// P: a decimal in (0, 1] whose geometric tail falls below HW_DELAY_TAIL by HW_DELAY_MAX.
static int parse_geometric(const char *text, hw_delay *delay) {
    char *end = NULL;
    errno = 0;
    int decimal = text[0] != '\0' && strspn(text, "0123456789.eE-+") == strlen(text);
    double p = decimal ? strtod(text, &end) : NAN;
    if (!decimal || errno || *end != '\0' || !(p > 0 && p <= 1)) {
        return hw_fail("geometric:P expects the chance P of no delay, a decimal number in (0, 1], got '%s'", text);
    }
    // The cut: the smallest K with P(D > K) = (1 - P)^(K + 1) below the tail.
    int k = 0;
    double tail = 1 - p;
    while (tail >= HW_DELAY_TAIL && k <= HW_DELAY_MAX) {
        tail *= 1 - p;
        k++;
    }
    if (k > HW_DELAY_MAX) {
        // The least P whose tail is cut by HW_DELAY_MAX, rounded up to the 4 decimals printed.
        double least = ceil(1e4 * (1 - pow(HW_DELAY_TAIL, 1.0 / (HW_DELAY_MAX + 1)))) / 1e4;
        return hw_fail("geometric:%s draws delays past %d updates more often than %g of the time, and the delay is "
                       "bounded by %d: give P of at least %.4f",
                       text, HW_DELAY_MAX, HW_DELAY_TAIL, HW_DELAY_MAX, least);
    }
    delay->p = p;
    delay->max = k;
    return HW_OK;
}

// The staleness histogram of a metrics CSV written with the measurement of a real run.
static int parse_measured(const char *path, hw_delay *delay) {
    if (path[0] == '\0') return hw_fail("measured:FILE expects the metrics CSV of a measured run, got no file");
    hw_metrics_table table;
    if (hw_metrics_table_read(&table, path) != HW_OK) return hw_fail("measured:%s: %s", path, hw_error());
    hw_metrics_measure m = table.measure;
    hw_metrics_table_free(&table);
    if (!m.present) {
        return hw_fail("measured:%s has no staleness histogram: it is the metrics of a run without the measurement "
                       "of Hogwild's races%s",
                       path, hw_option_hint(HW_OPTION_MEASURE));
    }
    delay->total = 0;
    delay->max = 0;
    for (int b = 0; b < HW_DELAY_BINS; b++) {
        delay->hist[b] = m.staleness_hist[b];
        delay->total += m.staleness_hist[b];
        int lo, hi;
        bin_range(b, &lo, &hi);
        if (m.staleness_hist[b] > 0) delay->max = hi;
    }
    if (delay->total <= 0) return hw_fail("measured:%s has a staleness histogram of no updates (all zero)", path);
    return HW_OK;
}

int hw_delay_parse(const char *text, hw_delay *out) {
    hw_delay delay;
    memset(&delay, 0, sizeof delay);
    if (strlen(text) >= sizeof delay.spec) {
        return hw_fail("text is longer than %d characters", HW_DELAY_SPEC_CAP - 1);
    }
    memcpy(delay.spec, text, strlen(text) + 1);  // its length is checked above
    const char *colon = strchr(text, ':');
    size_t name_len = colon ? (size_t)(colon - text) : strlen(text);
    const char *arg = colon ? colon + 1 : "";
    int status;
    if (colon && name_len == 5 && strncmp(text, "fixed", 5) == 0) {
        delay.kind = HW_DELAY_FIXED;
        status = parse_count(arg, "fixed", &delay.max);
    } else if (colon && name_len == 7 && strncmp(text, "uniform", 7) == 0) {
        delay.kind = HW_DELAY_UNIFORM;
        status = parse_count(arg, "uniform", &delay.max);
    } else if (colon && name_len == 9 && strncmp(text, "geometric", 9) == 0) {
        delay.kind = HW_DELAY_GEOMETRIC;
        status = parse_geometric(arg, &delay);
    } else if (colon && name_len == 8 && strncmp(text, "measured", 8) == 0) {
        delay.kind = HW_DELAY_MEASURED;
        status = parse_measured(arg, &delay);
    } else {
        return hw_fail("expects fixed:K, uniform:K, geometric:P or measured:FILE, got '%s'", text);
    }
    if (status != HW_OK) return HW_ERR;
    // K in one spelling ("uniform:08" is "uniform:8"), so that a checkpoint's record compares as text.
    if (delay.kind == HW_DELAY_FIXED || delay.kind == HW_DELAY_UNIFORM) {
        snprintf(delay.spec, sizeof delay.spec, "%s:%d", delay.kind == HW_DELAY_FIXED ? "fixed" : "uniform", delay.max);
    }
    *out = delay;
    return HW_OK;
}

int hw_delay_draw(const hw_delay *delay, hw_rng *rng) {
    switch (delay->kind) {
    case HW_DELAY_FIXED: return delay->max;
    case HW_DELAY_UNIFORM: return (int)hw_rng_below(rng, (uint32_t)delay->max + 1);
    case HW_DELAY_GEOMETRIC: {
        if (delay->p >= 1) return 0;
        // Inversion: u uniform in (0, 1], D = floor(log u / log(1 - P)) is geometric; a draw past
        // the cut is drawn again, so that D is the geometric law conditioned on D <= max.
        const double log_q = log1p(-delay->p);
        for (;;) {
            double u = ((double)hw_rng_u32(rng) + 1.0) / 4294967296.0;
            double d = floor(log(u) / log_q);
            if (d <= delay->max) return (int)d;
        }
    }
    case HW_DELAY_MEASURED: {
        int64_t r = (int64_t)hw_rng_below64(rng, (uint64_t)delay->total);
        int b = 0;
        while (r >= delay->hist[b]) r -= delay->hist[b++];
        int lo, hi;
        bin_range(b, &lo, &hi);
        return lo + (int)hw_rng_below(rng, (uint32_t)(hi - lo + 1));
    }
    }
    return 0;
}

double hw_delay_mean(const hw_delay *delay) {
    switch (delay->kind) {
    case HW_DELAY_FIXED: return delay->max;
    case HW_DELAY_UNIFORM: return delay->max / 2.0;
    case HW_DELAY_GEOMETRIC: {
        double q = 1 - delay->p, weight = 1, sum = 0, mass = 0;
        for (int d = 0; d <= delay->max; d++, weight *= q) {
            sum += d * weight;
            mass += weight;
        }
        return sum / mass;
    }
    case HW_DELAY_MEASURED: {
        double sum = 0;
        for (int b = 0; b < HW_DELAY_BINS; b++) {
            int lo, hi;
            bin_range(b, &lo, &hi);
            sum += (double)delay->hist[b] * (lo + hi) / 2.0;
        }
        return sum / (double)delay->total;
    }
    }
    return 0;
}
