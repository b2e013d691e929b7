// compare: what `hogwild compare` shows of several runs: their time-to-target statistics and the
// table (svg_accuracy.c and svg_measure.c draw the plots; its command line is src/cli/compare_command.c).
#include "hw/compare.h"
#include "hw/err.h"
#include "hw/file.h"
#include "hw/run_outputs.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int hw_metrics_time_to_target(const hw_metrics_table *log, double target, double *wall_seconds, double *samples) {
    for (int i = 0; i < log->n_points; i++) {
        const hw_metrics_point *p = &log->points[i];
        if (p->test_accuracy < target) continue;
        double wall = p->wall_seconds, seen = (double)p->samples_seen;
        if (i > 0) {
            // The row before is below the target, so the accuracy rose and the division is safe.
            const hw_metrics_point *q = &log->points[i - 1];
            double frac = (target - q->test_accuracy) / (p->test_accuracy - q->test_accuracy);
            wall = q->wall_seconds + frac * (p->wall_seconds - q->wall_seconds);
            seen = (double)q->samples_seen + frac * (double)(p->samples_seen - q->samples_seen);
        }
        if (wall_seconds) *wall_seconds = wall;
        if (samples) *samples = seen;
        return 1;
    }
    return 0;
}

double hw_metrics_best_accuracy(const hw_metrics_table *log) {
    double best = log->points[0].test_accuracy;
    for (int i = 1; i < log->n_points; i++) {
        if (log->points[i].test_accuracy > best) best = log->points[i].test_accuracy;
    }
    return best;
}

static const char *base_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

// The file column shows base names, or the paths as given when two base names are the same
// (run1/metrics.csv and run2/metrics.csv).
static int base_names_unique(const hw_metrics_table *runs, int n_runs) {
    for (int i = 0; i < n_runs; i++) {
        for (int j = i + 1; j < n_runs; j++) {
            if (strcmp(base_name(runs[i].path), base_name(runs[j].path)) == 0) return 0;
        }
    }
    return 1;
}

enum { N_TABLE_COLS = 11, CELL_CAP = 160 };

void hw_compare_print_table(FILE *out, const hw_metrics_table *runs, int n_runs, double target) {
    char to_target[32], samples_to_target[48];
    snprintf(to_target, sizeof to_target, "s to %g%%", target);
    snprintf(samples_to_target, sizeof samples_to_target, "samples to %g%%", target);
    const char *header[N_TABLE_COLS] = {"file",      "mode",    "workers", "device",  "epochs",         "wall s",
                                        "samples/s", "final %", "best %",  to_target, samples_to_target};
    // Text columns are left-aligned, numbers right-aligned.
    const int left[N_TABLE_COLS] = {1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0};

    if (n_runs <= 0) {
        fprintf(out, "(no runs)\n");
        return;
    }
    char(*cells)[N_TABLE_COLS][CELL_CAP] = calloc((size_t)n_runs, sizeof *cells);
    if (!cells) {
        fprintf(out, "(out of memory printing the table)\n");
        return;
    }
    int unique = base_names_unique(runs, n_runs);
    int fastest = -1, untimed = 0;
    double fastest_wall = 0, fastest_samples = 0;
    for (int r = 0; r < n_runs; r++) {
        const hw_metrics_table *run = &runs[r];
        // A diverged run's speed and length are measured up to where it stopped.
        const hw_metrics_point *last = run->diverged ? &run->diverged_at : &run->points[run->n_points - 1];
        char(*row)[CELL_CAP] = cells[r];
        // A cell is cut at CELL_CAP - 1 characters (a very long path), on purpose.
        snprintf(row[0], CELL_CAP, "%.*s", CELL_CAP - 1, unique ? base_name(run->path) : run->path);
        snprintf(row[1], CELL_CAP, "%.*s", CELL_CAP - 1, run->mode);
        snprintf(row[2], CELL_CAP, "%d", run->workers);
        snprintf(row[3], CELL_CAP, "%.*s", CELL_CAP - 1, run->device);
        snprintf(row[4], CELL_CAP, "%lld", (long long)last->epoch);
        snprintf(row[5], CELL_CAP, "%.1f", last->wall_seconds);
        double speed = hw_metrics_samples_per_second(run);  // NAN: too short to time
        if (isnan(speed)) {
            snprintf(row[6], CELL_CAP, "unknown");
            untimed++;
        } else {
            snprintf(row[6], CELL_CAP, "%.0f", speed);
        }
        double wall, samples;
        if (run->diverged) {
            // Its numbers are no result: not shown, not ranked.
            snprintf(row[7], CELL_CAP, "diverged");
            snprintf(row[8], CELL_CAP, "-");
            snprintf(row[9], CELL_CAP, "-");
            snprintf(row[10], CELL_CAP, "-");
            continue;
        }
        snprintf(row[7], CELL_CAP, "%.2f", last->test_accuracy);
        snprintf(row[8], CELL_CAP, "%.2f", hw_metrics_best_accuracy(run));
        if (hw_metrics_time_to_target(run, target, &wall, &samples)) {
            snprintf(row[9], CELL_CAP, "%.1f", wall);
            snprintf(row[10], CELL_CAP, "%.0f", samples);
            if (fastest < 0 || wall < fastest_wall) {
                fastest = r;
                fastest_wall = wall;
                fastest_samples = samples;
            }
        } else {
            snprintf(row[9], CELL_CAP, "not reached");
            snprintf(row[10], CELL_CAP, "-");
        }
    }

    int width[N_TABLE_COLS];
    for (int c = 0; c < N_TABLE_COLS; c++) {
        width[c] = (int)strlen(header[c]);
        for (int r = 0; r < n_runs; r++) {
            int w = (int)strlen(cells[r][c]);
            if (w > width[c]) width[c] = w;
        }
    }
    for (int r = -1; r < n_runs; r++) {
        for (int c = 0; c < N_TABLE_COLS; c++) {
            const char *text = r < 0 ? header[c] : cells[r][c];
            int last_col = c == N_TABLE_COLS - 1;
            if (left[c]) {
                fprintf(out, "%-*s", last_col ? 0 : width[c], text);
            } else {
                fprintf(out, "%*s", width[c], text);
            }
            fputs(last_col ? "\n" : "  ", out);
        }
    }

    for (int r = 0; r < n_runs; r++) {
        if (!runs[r].diverged) continue;
        char label[256];
        hw_metrics_label(&runs[r], label, sizeof label);
        fprintf(out,
                "diverged: %s (%s): its loss diverged (NaN, infinite or above %.0e) after %lld samples, in epoch "
                "%lld; not ranked\n",
                cells[r][0], label, HW_LOSS_DIVERGED, (long long)runs[r].diverged_at.samples_seen,
                (long long)runs[r].diverged_at.epoch + 1);
    }
    if (untimed) {
        fprintf(out,
                "samples/s unknown: %d run(s) took under %.0f ms, below what wall_seconds (written to 1 ms) can "
                "time to 5%%\n",
                untimed, HW_METRICS_MIN_TIMED_SECONDS * 1000);
    }
    if (fastest < 0) {
        fprintf(out, "no run reached %g%% test accuracy\n", target);
    } else {
        char label[256];
        hw_metrics_label(&runs[fastest], label, sizeof label);
        fprintf(out, "fastest to %g%%: %s (%s) in %.1f s, %.0f samples\n", target, cells[fastest][0], label,
                fastest_wall, fastest_samples);
    }
    free(cells);
}
