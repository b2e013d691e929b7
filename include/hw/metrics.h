// metrics: the run log as a CSV file (--metrics FILE.csv), the input of `hogwild compare`. One
// table of columns (hw_metrics_columns, src/report/metrics_format.c) gives the names, their order
// and how each value is written: the writer (src/report/metrics_write.c) and the reader
// (src/report/metrics_read.c) both go by it.
//
// A file is one header line, then one row per evaluation, in increasing wall_seconds:
//
//   mode,workers,device,wall_seconds,epoch,samples_seen,train_loss,test_loss,test_accuracy,skipped_eval_points,lr,model,seed,setup
//   hogwild,4,cpu,0.000,0,0,nan,2.305100,9.82,0,0.00999999978,lenet,1,5c2f0e9a41d7b388
//
// and, with --measure, the measurement's columns after them (updates, ..., staleness_histogram).
// A reader finds the columns by name (their order is free, extra columns are ignored); the losses
// may be "nan"; test_accuracy is in percent; epoch is the number of epochs completed at that row.
//
// A diverged run: a row whose test_loss is not finite (nan, inf) marks the run diverged. The
// trainer ends a diverged run with such a row (train_loss the non-finite loss seen, or nan;
// test_loss nan; test_accuracy nan: nothing was evaluated); files from before it may go on with
// NaN rows. (A nan train_loss alone marks nothing: the first row has one, as no training came
// before it.) That row and any after it are not points of the run: compare shows the run as
// "diverged" and does not rank it.
#ifndef HW_METRICS_H
#define HW_METRICS_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

// ---- the columns ----

typedef enum {
    HW_COL_MODE,          // hogwild or dataparallel
    HW_COL_WORKERS,       // Hogwild workers or DataParallel replicas, the world's
    HW_COL_DEVICE,        // cpu, cuda:0, cuda:0+cuda:1
    HW_COL_WALL_SECONDS,  // since training started
    HW_COL_EPOCH,         // epochs completed
    HW_COL_SAMPLES_SEEN,  // training samples, all workers together
    HW_COL_TRAIN_LOSS,    // mean training loss since the row before (nan: none)
    HW_COL_TEST_LOSS,
    HW_COL_TEST_ACCURACY,        // percent
    HW_COL_SKIPPED_EVAL_POINTS,  // --eval-every points passed while an evaluation ran
    HW_COL_LR,                   // the learning rate at the row's samples (the schedule's)
    // The run's identity, the same on every row, by which compare groups the runs that differ by
    // seed alone (files written before them load without them, and are in no group):
    HW_COL_MODEL,     // the model file's name without its folder and extension: "lenet"
    HW_COL_SEED,      // the seed of initialisation, shuffling and dropout
    HW_COL_SETUP,     // 16 hex digits: a hash of every training setting but the seed, the mode and the
                      // workers or replicas (hw_train_config.setup_hash)
    HW_COL_SETTINGS,  // the same settings as text, what compare names a group by: "epochs=10
                      // lr-schedule=cosine" (a comma, blank or '%' in a value as %XX; "" at the
                      // defaults; files from before it have no such column and are named by setup)
    // --measure's (CPU Hogwild), all workers together, at the row:
    HW_COL_UPDATES,         // updates made
    HW_COL_STALENESS_MEAN,  // other workers' updates between a read of the weights and the write
    HW_COL_STALENESS_MEDIAN,
    HW_COL_STALENESS_P99,
    HW_COL_STALENESS_MAX,
    HW_COL_STALENESS_US_MEAN,  // the same interval in microseconds
    HW_COL_STALENESS_US_MAX,
    HW_COL_OVERLAP_FRACTION,     // of updates that overlapped another's in time
    HW_COL_COMPUTE_US_PER_STEP,  // forward and backward
    HW_COL_UPDATE_US_PER_STEP,   // the SGD pass over the shared weights
    HW_COL_LOST_FRACTION,        // of the update norm, at an epoch end (nan elsewhere)
    HW_COL_STALENESS_HISTOGRAM,  // HW_METRICS_STALE_BINS counts joined by ';'
    HW_METRICS_N_COLUMNS
} hw_metrics_column;

// The first of --measure's columns: the rest of the table is theirs.
enum { HW_METRICS_FIRST_MEASURE = HW_COL_UPDATES };

typedef struct {
    const char *name;    // in the header
    const char *format;  // printf format of its value (the histogram: of each count)
    int required;        // a reader refuses a file without it (skipped_eval_points came later; the
                         // --measure columns come all together or not at all)
} hw_metrics_column_info;

// In hw_metrics_column's order.
extern const hw_metrics_column_info hw_metrics_columns[HW_METRICS_N_COLUMNS];

// ---- the values of a row ----

// One evaluation row of a run.
typedef struct {
    double wall_seconds;
    int64_t epoch;
    int64_t samples_seen;
    double train_loss;     // NAN when not measured (the row at samples_seen 0)
    double test_loss;      // may be NAN
    double test_accuracy;  // percent, in [0, 100]
} hw_metrics_point;

// The --measure columns' values. Staleness bins: [0], [1], [2,4), [4,8), ..., [512,1024), [1024, inf).
enum { HW_METRICS_STALE_BINS = 12 };
typedef struct {
    int present;  // read: the file has the columns
    int64_t updates;
    double staleness_mean;
    int64_t staleness_median, staleness_p99, staleness_max;
    double staleness_us_mean, staleness_us_max;
    double overlap_fraction;
    double compute_us_per_step, update_us_per_step;
    double lost_fraction;  // read: of the last row that has one (an epoch end); NAN if none
    int64_t staleness_hist[HW_METRICS_STALE_BINS];
} hw_metrics_measure;

// ---- writing (src/report/metrics_write.c) ----

// The device column's longest name and its NUL: every GPU of the longest GPU list, 16 entries of
// "cuda:1023" joined by '+' (159 characters), is written and read back whole.
enum { HW_METRICS_DEVICE_CAP = 192 };

// The model column's longest name and its NUL.
enum { HW_METRICS_MODEL_CAP = 64 };

// The settings column's longest text and its NUL (src/cli/run_identity.c cuts a longer one).
enum { HW_METRICS_SETTINGS_CAP = 256 };

// What the first three columns and the identity columns say of the run, and whether it has the
// --measure columns.
typedef struct {
    const char *mode;
    int workers;
    const char *device;
    const char *model;  // HW_COL_MODEL's text (cut at HW_METRICS_MODEL_CAP - 1); NULL: "unknown"
    uint64_t seed;
    uint64_t setup;        // HW_COL_SETUP's hash
    const char *settings;  // HW_COL_SETTINGS's text (NULL: ""), as escaped by the command line
    int with_measure;
} hw_metrics_run;

// Rows are written whole (one write each); a failed write is undone and ends the metrics, not the
// run: hw_metrics_row then warns on stderr, keeps the reason in `failure` and returns HW_OK.
// The file is opened at hw_metrics_open (created if missing) but an existing one is replaced only
// at hw_metrics_commit, once training has started: the header and the rows before it wait in
// memory, and a run that never commits leaves the previous file untouched (and removes one it
// created).
typedef struct {
    int fd;
    int open;
    int created;    // hw_metrics_open made the file (it did not exist)
    int committed;  // hw_metrics_commit: the file is being written
    char *pending;  // before the commit: the header and rows to write
    size_t pending_len;
    int failed;       // a write failed: no more rows
    int rows;         // rows written
    long long bytes;  // the file's length: whole rows only
    char failure[640];
    const char *path;
    char mode[16];
    int workers;
    char device[HW_METRICS_DEVICE_CAP];
    char model[HW_METRICS_MODEL_CAP];
    uint64_t seed, setup;
    char settings[HW_METRICS_SETTINGS_CAP];
    int with_measure;             // the header has --measure's columns
    hw_metrics_measure measure;   // their values at the next row (set by the trainer)
    int64_t skipped_eval_points;  // --eval-every points not evaluated so far (set by the trainer)
    double lr;                    // the learning rate at the next row's samples (set by the trainer)
} hw_metrics;
int hw_metrics_open(hw_metrics *m, const char *path, const hw_metrics_run *run);
int hw_metrics_row(hw_metrics *m, double wall_seconds, int epoch, int64_t samples_seen, double train_loss,
                   double test_loss, double test_accuracy);
// Training has started: the file is cut to nothing and gets the header and the rows so far.
void hw_metrics_commit(hw_metrics *m);
int hw_metrics_close(hw_metrics *m);
// --measure's values before anything was measured: nan means, zero counts.
void hw_metrics_measure_none(hw_metrics_measure *measure);

// ---- reading (src/report/metrics_read.c) ----

// One metrics CSV file, read whole.
typedef struct {
    char path[512];                      // as given, for messages
    char mode[32];                       // "hogwild", "dataparallel"
    int workers;                         // workers (hogwild) or replicas (dataparallel)
    char device[HW_METRICS_DEVICE_CAP];  // "cpu", "cuda:0", "cuda:0+cuda:1"
    int identified;                      // the file has the identity columns (model, seed, setup)
    char model[HW_METRICS_MODEL_CAP];    // identified: the run's identity, else "" and 0
    uint64_t seed, setup;
    int has_settings;                        // the file has the settings column
    char settings[HW_METRICS_SETTINGS_CAP];  // its text, "" without it
    hw_metrics_point *points;                // the rows before any divergence
    int n_points;                            // >= 1 after a successful read
    int diverged;                            // the run diverged (see above), at the row diverged_at
    hw_metrics_point diverged_at;
    hw_metrics_measure measure;
    long ignored_line;  // a last line cut short (no newline: a run still writing, or killed) that
                        // could not be read and was left out: its line number; 0 when none
} hw_metrics_table;

// The largest wall_seconds a row may hold (about 32 years): beyond it a row is corrupt.
#define HW_CSV_MAX_WALL_SECONDS 1e9

// Reads a metrics CSV. Fails naming the file (and line) on: a missing or empty file, a header
// lacking a column (named), a row with the wrong number of fields or a value that is not a number,
// a mode other than hogwild or dataparallel, wall_seconds above HW_CSV_MAX_WALL_SECONDS, wall_seconds
// or samples_seen going backwards, mode/workers/device or the identity changing between rows, some
// of the identity columns without the others, a seed that is no integer or a setup that is not 16
// hex digits, or no data rows. On
// failure `log` holds nothing to free.
int hw_metrics_table_read(hw_metrics_table *log, const char *path);
void hw_metrics_table_free(hw_metrics_table *log);

// The samples per second a run trained: the samples from its first row to its last (a resumed run's
// first row holds the checkpoint's samples, trained before this run's clock started) over the
// last row's wall seconds; NAN (unknown) below HW_METRICS_MIN_TIMED_SECONDS: wall_seconds is
// written to 1 ms, so a shorter run's time, and any speed divided by it, is off by 5% or more
// (a run of 0.001 s may have taken 0.5 ms or 1.5 ms). The diverged row counts as the last.
#define HW_METRICS_MIN_TIMED_SECONDS 0.010
double hw_metrics_samples_per_second(const hw_metrics_table *run);

// "hogwild, 4 workers, cpu" or "dataparallel, 2 replicas, cuda:0+cuda:1".
void hw_metrics_label(const hw_metrics_table *log, char *buf, size_t cap);

#endif
