// compare: reads the metrics CSV files of several training runs, prints a table of how fast each
// reached a target test accuracy, and draws the accuracy curves as an SVG plot.
//
// The metrics CSV (written by the trainer with --metrics FILE.csv) is one header line, then one
// row per evaluation, in increasing wall_seconds:
//
//   mode,workers,device,wall_seconds,epoch,samples_seen,train_loss,test_loss,test_accuracy
//   hogwild,4,cpu,0.000,0,0,nan,2.3051,9.82
//
// Columns are found by name (their order is free, extra columns are ignored); the losses may be
// "nan"; test_accuracy is in percent; epoch is the number of epochs completed at that row.
//
// A diverged run: a row whose test_loss is not finite (nan, inf) marks the run diverged. The
// trainer ends a diverged run with such a row (train_loss the non-finite loss seen, or nan;
// test_loss nan; test_accuracy nan: nothing was evaluated); files from before it may go on with
// NaN rows. (A nan train_loss alone marks nothing: the first row has one, as no training came
// before it.) That row and any after it are not points of the run: compare shows the run as
// "diverged" and does not rank it.
#ifndef HW_COMPARE_H
#define HW_COMPARE_H

#include <stdint.h>
#include <stdio.h>

// One evaluation row of a run.
typedef struct {
    double wall_seconds;
    int64_t epoch;
    int64_t samples_seen;
    double train_loss;     // NAN when not measured (the row at samples_seen 0)
    double test_loss;      // may be NAN
    double test_accuracy;  // percent, in [0, 100]
} hw_run_point;

// What `--measure` adds to a run's CSV (the columns are optional: files without them load, with
// present = 0): the measurement at the last row, all workers together.
enum { HW_RUN_STALE_BINS = 12 };  // staleness bins [0], [1], [2,4), [4,8), ..., [512,1024), [1024, inf)
typedef struct {
    int present;
    int64_t updates;                        // updates made
    double staleness_mean;                  // other workers' updates between read and write
    int64_t staleness_median, staleness_p99, staleness_max;
    double staleness_us_mean, staleness_us_max;
    double overlap_fraction;                // of updates that overlapped another's in time
    double compute_us_per_step, update_us_per_step;
    double lost_fraction;                   // of the last row that has one (an epoch end); NAN if none
    int64_t staleness_hist[HW_RUN_STALE_BINS];
} hw_run_measure;

// One metrics CSV file, read whole.
typedef struct {
    char path[512];        // as given, for messages
    char mode[32];         // "hogwild", "dataparallel"
    int workers;           // workers (hogwild) or replicas (dataparallel)
    char device[128];      // "cpu", "cuda:0", "cuda:0+cuda:1"
    hw_run_point *points;  // the rows before any divergence
    int n_points;          // >= 1 after a successful read
    int diverged;          // the run diverged (see above), at the row diverged_at
    hw_run_point diverged_at;
    hw_run_measure measure;
} hw_metrics_table;

// The largest wall_seconds a row may hold (about 32 years): beyond it a row is corrupt.
#define HW_CSV_MAX_WALL_SECONDS 1e9

// Reads a metrics CSV. Fails naming the file (and line) on: a missing or empty file, a header
// lacking a column (named), a row with the wrong number of fields or a value that is not a number,
// a mode other than hogwild or dataparallel, wall_seconds above HW_CSV_MAX_WALL_SECONDS, wall_seconds
// or samples_seen going backwards, mode/workers/device changing between rows, or no data rows. On
// failure `log` holds nothing to free.
int hw_metrics_table_read(hw_metrics_table *log, const char *path);
void hw_metrics_table_free(hw_metrics_table *log);

// "hogwild, 4 workers, cpu" or "dataparallel, 2 replicas, cuda:0+cuda:1".
void hw_run_label(const hw_metrics_table *log, char *buf, size_t cap);

// When and after how many samples the run first reached `target` percent test accuracy: the first
// row with accuracy >= target, linearly interpolated by accuracy between it and the row before.
// Returns 1 and fills *wall_seconds and *samples (either may be NULL) when reached, 0 otherwise.
int hw_run_time_to_target(const hw_metrics_table *log, double target, double *wall_seconds, double *samples);
// The highest test accuracy of the run.
double hw_run_best_accuracy(const hw_metrics_table *log);

// The aligned table, one row per run, then a line naming the fastest run to the target. A
// diverged run shows "diverged" instead of its accuracies, is never the fastest, and gets a line
// of its own saying where it diverged.
void hw_compare_print_table(FILE *out, const hw_metrics_table *runs, int n_runs, double target);

// ---- SVG plot ----
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

// ---- --measure: staleness and lost updates (compare_measure.c, svg_measure.c) ----
// Whether any run has the --measure columns.
int hw_compare_any_measured(const hw_metrics_table *runs, int n_runs);
// A second table: staleness, overlap, update time and lost-update fraction of each measured run.
void hw_compare_print_measure_table(FILE *out, const hw_metrics_table *runs, int n_runs);
// Two panels: the staleness histogram of each measured run (share of its updates per bin), and the
// lost-update fraction against workers. Runs without the columns are left out.
int hw_compare_plot_measure_svg(FILE *out, const hw_metrics_table *runs, int n_runs);
int hw_compare_write_measure_plot(const char *path, const hw_metrics_table *runs, int n_runs);

// ---- command line ----
// `hogwild compare RUN.csv ... [--target 98] [--plot FILE.svg | --no-plot]`, given the arguments
// after the word "compare" (argv[0] is the first of them). The table goes to `out`, messages to
// `err`. Returns the exit status: 0, 1 on a bad file, 2 on bad usage (with the usage text).
int hw_compare_run(int argc, char **argv, FILE *out, FILE *err);
// hw_compare_run on stdout and stderr.
int hw_compare_main(int argc, char **argv);

#endif
