// compare_command: the command line of `hogwild compare` (src/cli/compare_command.h): its table of
// options (src/cli/options.h), the metrics files read, the plots checked and written.
#include "cli/compare_command.h"

#include "cli/compare_inputs.h"
#include "cli/options.h"
#include "hw/compare.h"
#include "hw/compare_groups.h"
#include "hw/svg.h"
#include "hw/err.h"
#include "hw/file.h"

#include <ctype.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    double target;     // the test accuracy to reach, percent
    const char *plot;  // the plot's path, NULL: compare.svg next to the first file
    int no_plot;
    const char *summary_csv;  // the group table as CSV, or NULL
    int overwrite;            // replace an existing file that is not a plot compare wrote
} compare_args;

static int parse_target(const cli_option *o, const char *text, void *target, char *error, size_t cap) {
    (void)o;
    char *end;
    double value = strtod(text, &end);
    // Decimal and whole, as every number of the command line: " 90" and "0x5A" are refused, not
    // read as 90.
    if (*text == '\0' || *end != '\0' || isspace((unsigned char)text[0]) || strpbrk(text, "xX") ||
        !(value > 0 && value <= 100)) {
        return cli_refuse(error, cap, "--target must be a percentage in (0, 100], not '%s'", text);
    }
    ((compare_args *)target)->target = value;
    return HW_EXIT_OK;
}

static int parse_plot(const cli_option *o, const char *text, void *target, char *error, size_t cap) {
    if (*text == '\0') return cli_refuse(error, cap, o->missing, "--plot");
    ((compare_args *)target)->plot = text;
    return HW_EXIT_OK;
}

static int parse_summary_csv(const cli_option *o, const char *text, void *target, char *error, size_t cap) {
    if (*text == '\0') return cli_refuse(error, cap, o->missing, "--summary-csv");
    ((compare_args *)target)->summary_csv = text;
    return HW_EXIT_OK;
}

static const cli_option compare_options[] = {
    {.name = "target",
     .metavar = "PERCENT",
     .kind = CLI_CUSTOM,
     .field = offsetof(compare_args, target),
     .parse = parse_target,
     .fallback = "98",
     .missing = "%s needs a value (a percentage in (0, 100])",
     .help = "the test accuracy to reach, in (0, 100] (default %s)"},
    {.name = "plot",
     .metavar = "FILE.svg",
     .kind = CLI_CUSTOM,
     .field = offsetof(compare_args, plot),
     .parse = parse_plot,
     .missing = "%s needs a file name",
     .help = "where to write the plot (default compare.svg next to the first file)"},
    {.name = "no-plot", .kind = CLI_SWITCH, .field = offsetof(compare_args, no_plot), .help = "print the tables only"},
    {.name = "summary-csv",
     .metavar = "FILE",
     .kind = CLI_CUSTOM,
     .field = offsetof(compare_args, summary_csv),
     .parse = parse_summary_csv,
     .missing = "%s needs a file name",
     .help = "also write the table of groups as CSV (one row per group)"},
    {.name = "overwrite",
     .kind = CLI_SWITCH,
     .field = offsetof(compare_args, overwrite),
     .help = "replace an existing file at a plot's path that is not a plot compare wrote"},
    {.name = "help", .short_name = 'h', .kind = CLI_SWITCH, .field = CLI_NO_FIELD, .stops = 1, .help = "this text"},
};

static const cli_command compare_command = {
    .options = compare_options,
    .n_options = sizeof compare_options / sizeof compare_options[0],
    .missing = "%s needs a value",
    .operands = 1,
    .help_column = 25,
};

static void print_usage(FILE *out) {
    fprintf(out,
            "usage: hogwild compare RUN.csv|DIR ... [--target PERCENT] [--plot FILE.svg [--overwrite] | --no-plot]\n"
            "                       [--summary-csv FILE]\n"
            "\n"
            "Compares training runs from their metrics files (./hogwild ... --metrics RUN.csv), or every *.csv\n"
            "of a folder (a file there that cannot be read is named and skipped): prints a table of each\n"
            "run's speed and accuracy and the wall time to reach the target test accuracy, and draws test\n"
            "accuracy against wall time and against samples seen as an SVG plot. Runs that differ by seed\n"
            "alone (same mode, workers, model and setup) form a group: per group the mean, standard deviation\n"
            "and 95%% confidence interval (Student's t) of the final and best accuracy, samples/s and the\n"
            "time and samples to the target, the speed-up over the group of 1 worker, Welch's t-test between\n"
            "Hogwild and DataParallel at the same workers; a plot of each group's mean and band (-groups.svg)\n"
            "and, with several worker counts, a scaling plot (-scaling.svg). Diverged runs, copies and runs\n"
            "stopped early are named and left out of the statistics. Runs trained with --measure also get a\n"
            "table of their staleness and lost updates, and a plot (-measure.svg): their staleness histograms\n"
            "and the lost-update fraction against workers.\n"
            "\n");
    cli_print_options(&compare_command, out);
}

__attribute__((format(printf, 2, 3))) static int usage_error(FILE *err, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("hogwild compare: ", err);
    vfprintf(err, fmt, ap);
    va_end(ap);
    fputs("\n\n", err);
    print_usage(err);
    return HW_EXIT_USAGE;
}

// A plot beside `plot`: out.svg -> out-measure.svg (suffix "-measure").
static void beside_plot_path(const char *plot, const char *suffix, char *buf, size_t cap) {
    size_t len = strlen(plot);
    if (len >= 4 && strcmp(plot + len - 4, ".svg") == 0) len -= 4;
    snprintf(buf, cap, "%.*s%s.svg", (int)len, plot, suffix);
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
// the input. Nor, without --overwrite, a file that is no plot compare wrote (a checkpoint given as
// --plot, an unrelated x-measure.svg beside x.svg): compare's plots carry a marker (HW_SVG_MARKER).
// And it must be writable, checked before anything is printed or written.
static int check_plot(const char *what, const char *path, char *const *files, int n_files, int overwrite) {
    for (int i = 0; i < n_files; i++) {
        if (strcmp(path, files[i]) == 0 || hw_same_file(path, files[i])) {
            return hw_fail("%s %s is the metrics file %s given to compare: writing the plot would destroy it; give "
                           "another --plot FILE.svg, or --no-plot",
                           what, path, files[i]);
        }
    }
    if (!overwrite && access(path, F_OK) == 0 && !hw_svg_is_compare_plot(path)) {
        return hw_fail("%s %s exists and is not a plot hogwild compare wrote: replacing it would destroy it; give "
                       "another --plot FILE.svg, --no-plot, or --overwrite to replace it",
                       what, path);
    }
    // Replaced by a rename (hw_whole_file), as a checkpoint is; and by one compare at a time.
    if (hw_output_check(what, path, 1) != HW_OK) return HW_ERR;
    return hw_output_claim(what, path);
}

// Parses the command's arguments (`words`: "compare", then argv[0..argc)) into args and parsed,
// whose operands are the metrics files. HW_EXIT_OK (with parsed->stop for --help), or
// HW_EXIT_USAGE with the usage error printed on `err`.
static int compare_parse(int argc, char **argv, char **words, compare_args *args, cli_parsed *parsed, FILE *err) {
    int status = cli_parse(&compare_command, argc + 1, words, args, parsed);
    // getopt takes "-" for a file; before "--" it is no file name hogwild reads.
    for (int i = 0; i < argc && status == HW_EXIT_OK && strcmp(argv[i], "--") != 0; i++) {
        if (strcmp(argv[i], "-") == 0) status = cli_refuse(parsed->error, sizeof parsed->error, "unknown option '-'");
    }
    if (status == HW_EXIT_OK && parsed->stop) return HW_EXIT_OK;
    if (status != HW_EXIT_OK) return usage_error(err, "%s", parsed->error);
    if (parsed->n_operands == 0) return usage_error(err, "no metrics files given");
    if (args->no_plot && args->plot) return usage_error(err, "--plot and --no-plot together");
    if (args->no_plot && args->overwrite) return usage_error(err, "--overwrite with --no-plot: no plot is written");
    return HW_EXIT_OK;
}

// Where the plots go: --plot, or compare.svg beside the first file (none with --no-plot), and the
// --measure plot beside it.
typedef struct {
    const char *plot;         // the plot's path, or NULL: no plot
    char default_path[1024];  // compare.svg beside the first file, when plot is that
    char measure_path[1100];  // the --measure plot beside plot
    char groups_path[1100];   // the groups' plot beside it
    char scaling_path[1100];  // the scaling plot beside it
} plot_paths;

// Sets the plots' paths and checks them (check_plot), the --measure plot only when a run was
// `measured`, the groups' plots only when there are `grouped` runs: HW_OK, or HW_ERR (hw_error).
static int plots_place(plot_paths *paths, const compare_args *args, char *const *files, int n_files, int measured,
                       int grouped) {
    paths->plot = args->plot;
    if (!paths->plot && !args->no_plot) {
        default_plot_path(files[0], paths->default_path, sizeof paths->default_path);
        paths->plot = paths->default_path;
    }
    if (!paths->plot) return HW_OK;
    beside_plot_path(paths->plot, "-measure", paths->measure_path, sizeof paths->measure_path);
    beside_plot_path(paths->plot, "-groups", paths->groups_path, sizeof paths->groups_path);
    beside_plot_path(paths->plot, "-scaling", paths->scaling_path, sizeof paths->scaling_path);
    const char *what = paths->plot == paths->default_path ? "the plot (compare.svg by default)" : "--plot";
    if (check_plot(what, paths->plot, files, n_files, args->overwrite) != HW_OK) return HW_ERR;
    if (measured && check_plot("the --measure plot", paths->measure_path, files, n_files, args->overwrite) != HW_OK)
        return HW_ERR;
    if (grouped && (check_plot("the groups' plot", paths->groups_path, files, n_files, args->overwrite) != HW_OK ||
                    check_plot("the scaling plot", paths->scaling_path, files, n_files, args->overwrite) != HW_OK)) {
        return HW_ERR;
    }
    return HW_OK;
}

// Writes the plot at `path` (write_plot), saying where on `out`: 0, or 1 with the message on `err`.
static int plot_write(int written, const char *path, FILE *out, FILE *err) {
    if (written != HW_OK) {
        fprintf(err, "hogwild compare: %s\n", hw_error());
        return 1;
    }
    fprintf(out, "plot: %s\n", path);
    return 0;
}

// Whether any run has the identity columns (then compare has groups to show).
static int any_identified(const hw_metrics_table *runs, int n_runs) {
    for (int r = 0; r < n_runs; r++) {
        if (runs[r].identified) return 1;
    }
    return 0;
}

// The groups of the runs: their tables, their plots beside `paths` (the scaling plot only with
// two worker counts of a mode) and --summary-csv. 0, or 1 with the message printed on `err`.
static int groups_write(const compare_inputs *in, const plot_paths *paths, const compare_args *args, FILE *out,
                        FILE *err) {
    hw_compare_groups groups;
    if (hw_compare_groups_build(&groups, in->runs, in->n_runs, args->target) != HW_OK) {
        fprintf(err, "hogwild compare: %s\n", hw_error());
        return 1;
    }
    hw_compare_groups_print(out, &groups, in->runs, args->target);
    int status = 0;
    if (paths->plot && groups.n_groups > 0) {
        status = plot_write(hw_compare_write_group_plot(paths->groups_path, &groups, in->runs, args->target),
                            paths->groups_path, out, err);
    }
    if (status == 0 && paths->plot && hw_compare_groups_scale(&groups)) {
        status = plot_write(hw_compare_write_scaling_plot(paths->scaling_path, &groups, args->target),
                            paths->scaling_path, out, err);
    }
    if (status == 0 && args->summary_csv) {
        if (hw_compare_groups_write_csv(args->summary_csv, &groups, args->target) != HW_OK) {
            fprintf(err, "hogwild compare: %s\n", hw_error());
            status = 1;
        } else {
            fprintf(out, "summary: %s\n", args->summary_csv);
        }
    }
    hw_compare_groups_free(&groups);
    return status;
}

// --summary-csv may be none of the metrics files read, and must be writable: checked before anything
// is printed or written. HW_OK, or HW_ERR (hw_error).
static int check_summary(const compare_args *args, char *const *files, int n_files) {
    if (!args->summary_csv) return HW_OK;
    for (int i = 0; i < n_files; i++) {
        if (strcmp(args->summary_csv, files[i]) == 0 || hw_same_file(args->summary_csv, files[i])) {
            return hw_fail("--summary-csv %s is the metrics file %s given to compare: writing it would destroy it",
                           args->summary_csv, files[i]);
        }
    }
    return hw_output_check("--summary-csv", args->summary_csv, 0);
}

// The comparison of the runs read: the table and the plot, then, when a run was measured, the
// --measure table and plot, then the groups. 0, or 1 with the message printed on `err`.
static int compare_write(const compare_inputs *in, const compare_args *args, FILE *out, FILE *err) {
    plot_paths paths;
    const hw_metrics_table *runs = in->runs;
    int n_runs = in->n_runs;
    int measured = hw_compare_any_measured(runs, n_runs), grouped = any_identified(runs, n_runs);
    if (plots_place(&paths, args, in->files, in->n_files, measured, grouped) != HW_OK ||
        check_summary(args, in->files, in->n_files) != HW_OK) {
        fprintf(err, "hogwild compare: %s\n", hw_error());
        return 1;
    }
    hw_compare_print_table(out, runs, n_runs, args->target);
    if (paths.plot &&
        plot_write(hw_compare_write_plot(paths.plot, runs, n_runs, args->target), paths.plot, out, err) != 0) {
        return 1;
    }
    if (measured) {
        hw_compare_print_measure_table(out, runs, n_runs);
        if (paths.plot && plot_write(hw_compare_write_measure_plot(paths.measure_path, runs, n_runs),
                                     paths.measure_path, out, err) != 0) {
            return 1;
        }
    }
    if (!grouped) return 0;
    return groups_write(in, &paths, args, out, err);
}

int cli_compare_run(int argc, char **argv, FILE *out, FILE *err) {
    compare_args args = {0};
    cli_defaults(&compare_command, &args);
    // getopt_long reads argv[1..]: the word "compare" in front, in a copy (it reorders the files
    // after the options).
    char **words = calloc((size_t)argc + 2, sizeof *words);
    if (!words) {
        fprintf(err, "hogwild compare: out of memory\n");
        return HW_EXIT_FAILURE;
    }
    words[0] = "compare";
    for (int i = 0; i < argc; i++) words[i + 1] = argv[i];
    cli_parsed parsed;
    int status = compare_parse(argc, argv, words, &args, &parsed, err);
    if (status == HW_EXIT_OK && parsed.stop) print_usage(out);
    if (status == HW_EXIT_OK && !parsed.stop) {
        compare_inputs in;
        status = compare_inputs_read(&in, parsed.operands, parsed.n_operands, args.summary_csv, err);
        if (status == 0) status = compare_write(&in, &args, out, err);
        compare_inputs_free(&in);
    }
    cli_parsed_free(&parsed);
    free(words);
    return status;
}

int cli_compare_folder(const char *dir, const char *summary_csv, double target, FILE *out, FILE *err) {
    compare_args args = {0};
    cli_defaults(&compare_command, &args);
    if (target > 0) args.target = target;
    args.summary_csv = summary_csv;
    char *operands[1] = {(char *)dir};
    compare_inputs in;
    int status = compare_inputs_read(&in, operands, 1, summary_csv, err);
    if (status == 0) status = compare_write(&in, &args, out, err);
    compare_inputs_free(&in);
    return status;
}
