// compare: the `hogwild compare` command: time-to-target statistics of several runs, the table,
// and the command line that reads the CSV files and writes the plot (svg_plot.c draws it).
#include "hw/compare.h"
#include "hw/err.h"
#include "hw/file.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void hw_run_label(const hw_metrics_table *log, char *buf, size_t cap) {
    const char *unit = strcmp(log->mode, "dataparallel") == 0 ? "replica" : "worker";
    snprintf(buf, cap, "%s, %d %s%s, %s", log->mode, log->workers, unit, log->workers == 1 ? "" : "s", log->device);
}

int hw_run_time_to_target(const hw_metrics_table *log, double target, double *wall_seconds, double *samples) {
    for (int i = 0; i < log->n_points; i++) {
        const hw_run_point *p = &log->points[i];
        if (p->test_accuracy < target) continue;
        double wall = p->wall_seconds, seen = (double)p->samples_seen;
        if (i > 0) {
            // The row before is below the target, so the accuracy rose and the division is safe.
            const hw_run_point *q = &log->points[i - 1];
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

double hw_run_best_accuracy(const hw_metrics_table *log) {
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
    const char *header[N_TABLE_COLS] = {"file",    "mode",   "workers", "device",  "epochs",  "wall s",
                                        "samples/s", "final %", "best %", to_target, samples_to_target};
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
    int fastest = -1;
    double fastest_wall = 0, fastest_samples = 0;
    for (int r = 0; r < n_runs; r++) {
        const hw_metrics_table *run = &runs[r];
        // A diverged run's speed and length are measured up to where it stopped.
        const hw_run_point *last = run->diverged ? &run->diverged_at : &run->points[run->n_points - 1];
        char(*row)[CELL_CAP] = cells[r];
        // A cell is cut at CELL_CAP - 1 characters (a very long path), on purpose.
        snprintf(row[0], CELL_CAP, "%.*s", CELL_CAP - 1, unique ? base_name(run->path) : run->path);
        snprintf(row[1], CELL_CAP, "%.*s", CELL_CAP - 1, run->mode);
        snprintf(row[2], CELL_CAP, "%d", run->workers);
        snprintf(row[3], CELL_CAP, "%.*s", CELL_CAP - 1, run->device);
        snprintf(row[4], CELL_CAP, "%lld", (long long)last->epoch);
        snprintf(row[5], CELL_CAP, "%.1f", last->wall_seconds);
        if (last->wall_seconds > 0) {
            snprintf(row[6], CELL_CAP, "%.0f", (double)last->samples_seen / last->wall_seconds);
        } else {
            snprintf(row[6], CELL_CAP, "-");
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
        snprintf(row[8], CELL_CAP, "%.2f", hw_run_best_accuracy(run));
        if (hw_run_time_to_target(run, target, &wall, &samples)) {
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
        hw_run_label(&runs[r], label, sizeof label);
        fprintf(out, "diverged: %s (%s): its loss became NaN or infinite after %lld samples, in epoch %lld; "
                     "not ranked\n",
                cells[r][0], label, (long long)runs[r].diverged_at.samples_seen,
                (long long)runs[r].diverged_at.epoch + 1);
    }
    if (fastest < 0) {
        fprintf(out, "no run reached %g%% test accuracy\n", target);
    } else {
        char label[256];
        hw_run_label(&runs[fastest], label, sizeof label);
        fprintf(out, "fastest to %g%%: %s (%s) in %.1f s, %.0f samples\n", target, cells[fastest][0], label,
                fastest_wall, fastest_samples);
    }
    free(cells);
}

// ---- the command line ----

// The --measure plot beside `plot`: out.svg -> out-measure.svg.
static void measure_plot_path(const char *plot, char *buf, size_t cap) {
    size_t len = strlen(plot);
    if (len >= 4 && strcmp(plot + len - 4, ".svg") == 0) len -= 4;
    snprintf(buf, cap, "%.*s-measure.svg", (int)len, plot);
}

static void print_usage(FILE *out) {
    fprintf(out,
            "usage: hogwild compare RUN.csv [RUN.csv ...] [--target PERCENT] [--plot FILE.svg | --no-plot]\n"
            "\n"
            "Compares training runs from their metrics files (./hogwild ... --metrics RUN.csv): prints a table\n"
            "of each run's speed and accuracy and the wall time to reach the target test accuracy, and draws\n"
            "test accuracy against wall time and against samples seen as an SVG plot. Runs trained with\n"
            "--measure also get a table of their staleness and lost updates, and a second plot (the plot's\n"
            "name with -measure.svg): their staleness histograms and the lost-update fraction against workers.\n"
            "\n"
            "  --target PERCENT   the test accuracy to reach, in (0, 100] (default 98)\n"
            "  --plot FILE.svg    where to write the plot (default compare.svg next to the first file)\n"
            "  --no-plot          print the table only\n"
            "  -h, --help         this text\n");
}

__attribute__((format(printf, 2, 3))) static int usage_error(FILE *err, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("hogwild compare: ", err);
    vfprintf(err, fmt, ap);
    va_end(ap);
    fputs("\n\n", err);
    print_usage(err);
    return 2;
}

// Matches "--name VALUE" and "--name=VALUE"; advances *i past the value.
static int option_value(int argc, char **argv, int *i, const char *name, const char **value) {
    size_t len = strlen(name);
    if (strncmp(argv[*i], name, len) != 0) return 0;
    if (argv[*i][len] == '=') {
        *value = argv[*i] + len + 1;
        return 1;
    }
    if (argv[*i][len] != '\0') return 0;
    *value = *i + 1 < argc ? argv[++*i] : NULL;
    return 1;
}

// compare.svg in the folder of `first_csv`.
static void default_plot_path(const char *first_csv, char *buf, size_t cap) {
    const char *slash = strrchr(first_csv, '/');
    if (!slash) {
        snprintf(buf, cap, "compare.svg");
    } else {
        snprintf(buf, cap, "%.*scompare.svg", (int)(slash - first_csv + 1), first_csv);
    }
}

// A plot may be none of the metrics files read (a --plot naming one, an input called compare.svg,
// the -measure.svg plot, any of them through another spelling or a link): writing it would destroy
// the input. And it must be writable, checked before anything is printed or written.
static int check_plot(const char *what, const char *path, char *const *files, int n_files) {
    for (int i = 0; i < n_files; i++) {
        if (strcmp(path, files[i]) == 0 || hw_same_file(path, files[i])) {
            return hw_fail("%s %s is the metrics file %s given to compare: writing the plot would destroy it; give "
                           "another --plot FILE.svg, or --no-plot",
                           what, path, files[i]);
        }
    }
    return hw_output_check(what, path, 0);
}

int hw_compare_run(int argc, char **argv, FILE *out, FILE *err) {
    double target = 98.0;
    const char *plot_path = NULL;
    int no_plot = 0, n_files = 0, only_files = 0;
    char **files = calloc((size_t)(argc > 0 ? argc : 1), sizeof *files);
    if (!files) {
        fprintf(err, "hogwild compare: out of memory\n");
        return 1;
    }
    int status = 0;
    for (int i = 0; i < argc && status == 0; i++) {
        const char *arg = argv[i], *value;
        if (only_files || arg[0] != '-') {
            files[n_files++] = argv[i];
        } else if (strcmp(arg, "--") == 0) {
            only_files = 1;
        } else if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            print_usage(out);
            free(files);
            return 0;
        } else if (option_value(argc, argv, &i, "--target", &value)) {
            char *end;
            if (!value) {
                status = usage_error(err, "%s needs a value (a percentage in (0, 100])", arg);
                break;
            }
            target = strtod(value, &end);
            if (*value == '\0' || *end != '\0' || !(target > 0 && target <= 100)) {
                status = usage_error(err, "--target must be a percentage in (0, 100], not '%s'", value);
            }
        } else if (option_value(argc, argv, &i, "--plot", &value)) {
            if (!value || *value == '\0') status = usage_error(err, "%s needs a file name", arg);
            plot_path = value;
        } else if (strcmp(arg, "--no-plot") == 0) {
            no_plot = 1;
        } else {
            status = usage_error(err, "unknown option '%s'", arg);
        }
    }
    if (status == 0 && n_files == 0) status = usage_error(err, "no metrics files given");
    if (status == 0 && no_plot && plot_path) status = usage_error(err, "--plot and --no-plot together");
    if (status != 0) {
        free(files);
        return status;
    }

    hw_metrics_table *runs = calloc((size_t)n_files, sizeof *runs);
    int n_read = 0;
    if (!runs) {
        fprintf(err, "hogwild compare: out of memory\n");
        status = 1;
    }
    for (; status == 0 && n_read < n_files; n_read++) {
        if (hw_metrics_table_read(&runs[n_read], files[n_read]) != HW_OK) {
            fprintf(err, "hogwild compare: %s\n", hw_error());
            status = 1;
            break;
        }
    }
    char default_path[1024], measure_path[1100];
    int measured = status == 0 && hw_compare_any_measured(runs, n_files);
    if (status == 0 && !plot_path && !no_plot) {
        default_plot_path(files[0], default_path, sizeof default_path);
        plot_path = default_path;
    }
    if (status == 0 && plot_path) {
        measure_plot_path(plot_path, measure_path, sizeof measure_path);
        int checked = check_plot(plot_path == default_path ? "the plot (compare.svg by default)" : "--plot", plot_path,
                                 files, n_files);
        if (checked == HW_OK && measured) checked = check_plot("the --measure plot", measure_path, files, n_files);
        if (checked != HW_OK) {
            fprintf(err, "hogwild compare: %s\n", hw_error());
            status = 1;
        }
    }
    if (status == 0) {
        hw_compare_print_table(out, runs, n_files, target);
        if (plot_path) {
            if (hw_compare_write_plot(plot_path, runs, n_files, target) != HW_OK) {
                fprintf(err, "hogwild compare: %s\n", hw_error());
                status = 1;
            } else {
                fprintf(out, "plot: %s\n", plot_path);
            }
        }
        if (status == 0 && measured) {
            hw_compare_print_measure_table(out, runs, n_files);
            if (plot_path) {
                if (hw_compare_write_measure_plot(measure_path, runs, n_files) != HW_OK) {
                    fprintf(err, "hogwild compare: %s\n", hw_error());
                    status = 1;
                } else {
                    fprintf(out, "plot: %s\n", measure_path);
                }
            }
        }
    }
    for (int r = 0; r < n_read; r++) hw_metrics_table_free(&runs[r]);
    free(runs);
    free(files);
    return status;
}

int hw_compare_main(int argc, char **argv) { return hw_compare_run(argc, argv, stdout, stderr); }
