// compare: `hogwild compare`'s statistics and tables over the metrics CSV files of several runs
// (include/hw/metrics.h reads them): how fast each reached a target test accuracy and its table
// (src/report/compare.c); for runs trained with --measure, their staleness and lost updates as a
// second table (src/report/compare_measure.c). The plots are hw/svg.h's.
#ifndef HW_COMPARE_H
#define HW_COMPARE_H

#include "hw/metrics.h"

#include <stdio.h>

// When and after how many samples the run first reached `target` percent test accuracy: the first
// row with accuracy >= target, linearly interpolated by accuracy between it and the row before.
// Returns 1 and fills *wall_seconds and *samples (either may be NULL) when reached, 0 otherwise.
int hw_metrics_time_to_target(const hw_metrics_table *log, double target, double *wall_seconds, double *samples);
// The highest test accuracy of the run.
double hw_metrics_best_accuracy(const hw_metrics_table *log);

// The aligned table, one row per run, then a line naming the fastest run to the target. A
// diverged run shows "diverged" instead of its accuracies, is never the fastest, and gets a line
// of its own saying where it diverged.
void hw_compare_print_table(FILE *out, const hw_metrics_table *runs, int n_runs, double target);

// ---- --measure: staleness and lost updates (src/report/compare_measure.c) ----
// Whether any run has the --measure columns.
int hw_compare_any_measured(const hw_metrics_table *runs, int n_runs);
// A second table: staleness, overlap, update time and lost-update fraction of each measured run.
void hw_compare_print_measure_table(FILE *out, const hw_metrics_table *runs, int n_runs);

#endif
