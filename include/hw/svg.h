// svg: the SVG plots of `hogwild compare` (src/report/svg*.c): the axes on nice numbers that they
// share (svg.c), the accuracy curves (svg_accuracy.c) and, for runs trained with --measure, the
// staleness and lost updates (svg_measure.c). What else the plots share is private to src/report/
// (svg_internal.h).
#ifndef HW_SVG_H
#define HW_SVG_H

#include "hw/metrics.h"

#include <stdio.h>

// The second line of every plot `hogwild compare` writes, after the <svg> element's start: an
// existing file without it is no plot of compare's, and is replaced only with --overwrite.
#define HW_SVG_MARKER "<desc>a plot written by hogwild compare</desc>"
// Whether the file at `path` is a plot of compare's: an <svg> line, then HW_SVG_MARKER (0 when it
// cannot be read).
int hw_svg_is_compare_plot(const char *path);

// ---- axes (svg.c) ----
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

// ---- the accuracy plot (svg_accuracy.c) ----
// Two panels, test accuracy against wall time and against samples seen, one polyline per run, a
// legend, and the target accuracy as a dashed line. Writes a standalone SVG document.
int hw_compare_plot_svg(FILE *out, const hw_metrics_table *runs, int n_runs, double target);
// The same into a file; fails naming the path.
int hw_compare_write_plot(const char *path, const hw_metrics_table *runs, int n_runs, double target);

// ---- the --measure plot (svg_measure.c) ----
// Two panels: the staleness histogram of each measured run (share of its updates per bin), and the
// lost-update fraction against workers. Runs without the columns are left out.
int hw_compare_plot_measure_svg(FILE *out, const hw_metrics_table *runs, int n_runs);
int hw_compare_write_measure_plot(const char *path, const hw_metrics_table *runs, int n_runs);

#endif
