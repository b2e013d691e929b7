// The report of a suite's skipped tests, printed after all tests. Criterion's summary counts a
// skipped test among the passing ones, so every suite that can skip says, after the run, how many
// of its tests did not run and why: a skip can never pass for a check.
//
// Use: ReportHook(POST_ALL)(struct criterion_global_stats *stats) { skip_report(stats, "suite"); }
#ifndef HW_TESTS_SKIP_REPORT_H
#define HW_TESTS_SKIP_REPORT_H

#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <stdio.h>
#include <string.h>

// Prints "[SKIP] suite: S of N tests skipped: <the first skip's reason>" when any was skipped.
// Returns how many of the suite's tests ran (were not filtered out); *skipped gets the skips.
static inline size_t skip_report(const struct criterion_global_stats *stats, const char *name, size_t *skipped_out) {
    size_t skipped = 0, ran = 0;
    const char *why = NULL;
    for (struct criterion_suite_stats *suite = stats->suites; suite; suite = suite->next) {
        if (strcmp(suite->suite->name, name) != 0) continue;
        for (struct criterion_test_stats *t = suite->tests; t; t = t->next) {
            // Tests left out by --filter are disabled, and some come back only with that message.
            if (t->test->data->disabled || (t->message && strcmp(t->message, "Test is disabled") == 0)) continue;
            ran++;
            if (t->test_status == CR_STATUS_SKIPPED) {
                skipped++;
                if (!why) why = t->message;
            }
        }
    }
    if (skipped) fprintf(stderr, "[SKIP] %s: %zu of %zu tests skipped: %s\n", name, skipped, ran, why ? why : "");
    if (skipped_out) *skipped_out = skipped;
    return ran;
}

#endif
