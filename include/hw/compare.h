// compare: `hogwild compare`'s statistics, tables and plots over the metrics CSV files of several
// runs (include/hw/metrics.h reads them): how fast each reached a target test accuracy, the table,
// and the accuracy curves as an SVG plot; for runs trained with --measure, their staleness and
// lost updates, as a second table and plot.
#ifndef HW_COMPARE_H
#define HW_COMPARE_H

#include "hw/metrics.h"

#include <stdint.h>
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

// ---- SVG plots (src/report/svg.c: what they share; svg_accuracy.c, svg_measure.c) ----
// An axis range on "nice" numbers: lo and hi are multiples of step, step is 1, 2 or 5 times a
// power of ten, and the ticks are lo, lo + step, ..., hi (n_ticks of them, 2 <= n_ticks <= max_ticks).
typedef struct {
    double lo, hi, step;
    int n_ticks;
} hw_axis;

// The smallest such range around [lo, hi] with at most max_ticks ticks (max_ticks >= 2). An empty
// or reversed range is widened to one unit.
hw_axis hw_nice_axis(double lo, double hi, int max_ticks);
// Tick i (0 <= i < n_ticks), computed without accumulating rounding error.
double hw_axis_tick(const hw_axis *axis, int i);

// Two panels, test accuracy against wall time and against samples seen, one polyline per run, a
// legend, and the target accuracy as a dashed line. Writes a standalone SVG document.
int hw_compare_plot_svg(FILE *out, const hw_metrics_table *runs, int n_runs, double target);
// The same into a file; fails naming the path.
int hw_compare_write_plot(const char *path, const hw_metrics_table *runs, int n_runs, double target);

// ---- --measure: staleness and lost updates (measure_table.c, svg_measure.c) ----
// Whether any run has the --measure columns.
int hw_compare_any_measured(const hw_metrics_table *runs, int n_runs);
// A second table: staleness, overlap, update time and lost-update fraction of each measured run.
void hw_compare_print_measure_table(FILE *out, const hw_metrics_table *runs, int n_runs);
// Two panels: the staleness histogram of each measured run (share of its updates per bin), and the
// lost-update fraction against workers. Runs without the columns are left out.
int hw_compare_plot_measure_svg(FILE *out, const hw_metrics_table *runs, int n_runs);
int hw_compare_write_measure_plot(const char *path, const hw_metrics_table *runs, int n_runs);

#endif
