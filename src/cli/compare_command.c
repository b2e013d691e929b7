// compare_command: the command line of `hogwild compare` (src/cli/compare_command.h): its table of
// options (src/cli/options.h), the metrics files read, the plots checked and written.
#include "cli/compare_command.h"

#include "cli/options.h"
#include "hw/compare.h"
#include "hw/svg.h"
#include "hw/err.h"
#include "hw/file.h"

#include <ctype.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    double target;     // the test accuracy to reach, percent
    const char *plot;  // the plot's path, NULL: compare.svg next to the first file
    int no_plot;
} compare_args;

static int parse_target(const cli_option *o, const char *text, void *target, char *error, size_t cap) {
    (void)o;
    char *end;
    double value = strtod(text, &end);
    // Decimal and whole, as every number of the command line (" 90" and "0x5A" were read as 90).
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
    {.name = "no-plot", .kind = CLI_SWITCH, .field = offsetof(compare_args, no_plot), .help = "print the table only"},
    {.name = "help", .short_name = 'h', .kind = CLI_SWITCH, .field = CLI_NO_FIELD, .help = "this text"},
};

static const cli_command compare_command = {
    .options = compare_options,
    .n_options = sizeof compare_options / sizeof compare_options[0],
    .missing = "%s needs a value",
    .operands = 1,
    .help_column = 21,
};

static void print_usage(FILE *out) {
    fprintf(out, "usage: hogwild compare RUN.csv [RUN.csv ...] [--target PERCENT] [--plot FILE.svg | --no-plot]\n"
                 "\n"
                 "Compares training runs from their metrics files (./hogwild ... --metrics RUN.csv): prints a table\n"
                 "of each run's speed and accuracy and the wall time to reach the target test accuracy, and draws\n"
                 "test accuracy against wall time and against samples seen as an SVG plot. Runs trained with\n"
                 "--measure also get a table of their staleness and lost updates, and a second plot (the plot's\n"
                 "name with -measure.svg): their staleness histograms and the lost-update fraction against workers.\n"
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

// The --measure plot beside `plot`: out.svg -> out-measure.svg.
static void measure_plot_path(const char *plot, char *buf, size_t cap) {
    size_t len = strlen(plot);
    if (len >= 4 && strcmp(plot + len - 4, ".svg") == 0) len -= 4;
    snprintf(buf, cap, "%.*s-measure.svg", (int)len, plot);
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
    static const char *const stop_at[] = {"help", NULL};
    int status = cli_parse(&compare_command, argc + 1, words, &args, stop_at, &parsed);
    // getopt takes "-" for a file; before "--" it is no file name hogwild reads.
    for (int i = 0; i < argc && status == HW_EXIT_OK && strcmp(argv[i], "--") != 0; i++) {
        if (strcmp(argv[i], "-") == 0) status = cli_refuse(parsed.error, sizeof parsed.error, "unknown option '-'");
    }
    if (status == HW_EXIT_OK && parsed.stop) {
        print_usage(out);
        cli_parsed_free(&parsed);
        free(words);
        return HW_EXIT_OK;
    }
    if (status != HW_EXIT_OK) status = usage_error(err, "%s", parsed.error);
    char **files = parsed.operands;
    int n_files = parsed.n_operands;
    const char *plot_path = args.plot;
    double target = args.target;
    if (status == 0 && n_files == 0) status = usage_error(err, "no metrics files given");
    if (status == 0 && args.no_plot && plot_path) status = usage_error(err, "--plot and --no-plot together");
    if (status != 0) {
        cli_parsed_free(&parsed);
        free(words);
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
        if (runs[n_read].ignored_line) {
            fprintf(err, "hogwild compare: %s:%ld: ignoring the last line, cut short (no newline)\n", runs[n_read].path,
                    runs[n_read].ignored_line);
        }
    }
    char default_path[1024], measure_path[1100];
    int measured = status == 0 && hw_compare_any_measured(runs, n_files);
    if (status == 0 && !plot_path && !args.no_plot) {
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
    cli_parsed_free(&parsed);
    free(words);
    return status;
}
