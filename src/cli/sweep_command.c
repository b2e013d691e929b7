// sweep_command: the command line of `hogwild sweep` (src/cli/sweep_command.h): its table of
// options, and every check of the grid and of the runs' flags before the first run.
#include "cli/sweep_command.h"

#include "cli/options.h"
#include "cli/sweep_run.h"
#include "cli/train_options.h"
#include "cli/train_rules.h"
#include "cli/usage.h"
#include "hw/err.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct {
    const char *dir;
    sweep_grid grid;
    double target;
} sweep_args;

// The most runs one sweep makes: a grid past it is a typo ("--seeds 1-100000"), not a study.
enum { SWEEP_MAX_RUNS = 10000 };

static const cli_option sweep_options[] = {
    {.name = "dir",
     .metavar = "DIR",
     .kind = CLI_TEXT,
     .field = offsetof(sweep_args, dir),
     .help = "the folder of the runs' CSV files (made if missing; required)"},
    {.name = "workers",
     .metavar = "LIST",
     .kind = CLI_CUSTOM,
     .field = offsetof(sweep_args, grid),
     .parse = sweep_grid_parse_workers,
     .fallback = "1,2",
     .help = "Hogwild workers, DataParallel replicas (default %s)"},
    {.name = "mode",
     .metavar = "LIST",
     .kind = CLI_CUSTOM,
     .field = offsetof(sweep_args, grid),
     .parse = sweep_grid_parse_modes,
     .fallback = "hogwild,dataparallel",
     .help = "modes (default %s)"},
    {.name = "seeds",
     .metavar = "LIST",
     .kind = CLI_CUSTOM,
     .field = offsetof(sweep_args, grid),
     .parse = sweep_grid_parse_seeds,
     .fallback = "1-3",
     .help = "seeds, e.g. 1-5 or 1,4,9 (default %s)"},
    {.name = "lr",
     .metavar = "LIST",
     .kind = CLI_CUSTOM,
     .field = offsetof(sweep_args, grid),
     .parse = sweep_grid_parse_lrs,
     .help = "learning rates, e.g. 0.01,0.05 (default: the training flags' --lr)"},
    {.name = "target",
     .metavar = "PERCENT",
     .kind = CLI_DOUBLE,
     .field = offsetof(sweep_args, target),
     .least = 0.001,
     .help = "compare's target test accuracy (default compare's)"},
    {.name = "help", .short_name = 'h', .kind = CLI_SWITCH, .field = CLI_NO_FIELD, .stops = 1, .help = "this text"},
};

static const cli_command sweep_command = {
    .options = sweep_options,
    .n_options = sizeof sweep_options / sizeof sweep_options[0],
    .missing = "option '%s' needs a value",
    .empty = "option '%s' needs a value, got an empty one",
    .help_column = 23,
};

static void print_usage(FILE *out) {
    fputs("usage: hogwild sweep --dir DIR [--workers LIST] [--mode LIST] [--seeds LIST] [--lr LIST]\n"
          "                     [--target PERCENT] -- [TRAINING FLAGS]\n"
          "\n"
          "Runs ./hogwild once per point of the grid (workers x modes x seeds x learning rates), one after\n"
          "another, each with the training flags after '--', into DIR/NAME.csv (NAME from the point, as\n"
          "hogwild-w2-lr0.05-s3; its output in DIR/NAME.log); one line per run with the time left. A run's\n"
          "CSV gets its name only once the run has ended (or diverged), so the same command again skips the\n"
          "runs done and goes on. Ctrl-C stops the current run as a run stops and then the sweep (exit\n"
          "130). At the end: hogwild compare DIR, its group table also in DIR/summary.csv.\n"
          "\n",
          out);
    cli_print_options(&sweep_command, out);
}

__attribute__((format(printf, 1, 2))) static int sweep_usage_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("hogwild sweep: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\n\n", stderr);
    print_usage(stderr);
    return HW_EXIT_USAGE;
}

// The training flags a sweep sets itself, or that make no run of a grid, refused in its flags.
static int flags_leave_the_grid_alone(const cli_parsed *given, const sweep_grid *grid) {
    static const hw_option own[] = {HW_OPTION_MODE, HW_OPTION_WORKERS, HW_OPTION_REPLICAS, HW_OPTION_SEED,
                                    HW_OPTION_METRICS};
    static const hw_option no_run[] = {
        HW_OPTION_SAVE,    HW_OPTION_RESUME,  HW_OPTION_EVAL_ONLY, HW_OPTION_HELP,
        HW_OPTION_VERSION, HW_OPTION_SUMMARY, HW_OPTION_CLEAN_SHM, HW_OPTION_LIST_SHARING_STRATEGIES};
    for (int i = 0; i < given->n_given; i++) {
        const cli_option *o = given->given[i];
        for (size_t k = 0; k < sizeof own / sizeof own[0]; k++) {
            if (o->id == own[k]) {
                return sweep_usage_error("--%s after '--' is the sweep's to set (--workers, --mode, --seeds; the "
                                         "metrics go to DIR): drop it",
                                         o->name);
            }
        }
        if (o->id == HW_OPTION_LR && grid->n_lrs > 0) {
            return sweep_usage_error("--lr is given both to the sweep and after '--': give the learning rates once");
        }
        for (size_t k = 0; k < sizeof no_run / sizeof no_run[0]; k++) {
            if (o->id == no_run[k]) {
                return sweep_usage_error("--%s after '--' makes no run of a sweep (each run is a fresh training run "
                                         "into its own CSV): drop it",
                                         o->name);
            }
        }
    }
    return HW_EXIT_OK;
}

// The training flags alone, parsed: none that the sweep sets or that makes no run.
static int flags_check(const sweep_plan *plan, char **words) {
    words[0] = "hogwild";
    for (int i = 0; i < plan->n_flags; i++) words[i + 1] = plan->flags[i];
    hw_train_config config;
    cli_train_defaults(&config);
    cli_parsed given;
    int status = cli_parse(&cli_train_command, plan->n_flags + 1, words, &config, &given);
    cli_parsed_free(&given);
    if (status != HW_EXIT_OK) return sweep_usage_error("the training flags after '--': %s", given.error);
    return flags_leave_the_grid_alone(&given, plan->grid);
}

// Each run's full command line, parsed and checked by the training rules as ./hogwild will check
// it, so that a sweep never stops at its tenth run on a flag the first could have refused.
static int runs_check(const sweep_plan *plan) {
    char **words = calloc((size_t)plan->n_flags + 16, sizeof *words);
    if (!words) return fprintf(stderr, "hogwild sweep: out of memory\n"), HW_EXIT_FAILURE;
    int status = flags_check(plan, words);
    for (int i = 0; i < sweep_grid_size(plan->grid) && status == HW_EXIT_OK; i++) {
        sweep_point pt = sweep_grid_point(plan->grid, i);
        char texts[8][64];
        int n;
        sweep_run_words(plan, &pt, "hogwild", "metrics.csv", words, &n, texts);
        hw_train_config config;
        cli_train_defaults(&config);
        cli_parsed given;
        status = cli_parse(&cli_train_command, n, words, &config, &given);
        cli_parsed_free(&given);
        if (status != HW_EXIT_OK) status = sweep_usage_error("the run %s: %s", pt.name, given.error);
        else status = cli_train_rules_check(&config, &given);
        if (status != HW_EXIT_OK) fprintf(stderr, "hogwild sweep: (in the run %s)\n", pt.name);
    }
    free(words);
    return status;
}

// The folder: made when missing (its parent must exist), else a folder.
static int dir_ready(const char *dir) {
    struct stat st;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "hogwild sweep: cannot make the folder %s: %s\n", dir, strerror(errno));
        return HW_EXIT_FAILURE;
    }
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "hogwild sweep: --dir %s is not a folder\n", dir);
        return HW_EXIT_FAILURE;
    }
    return HW_EXIT_OK;
}

int cli_sweep_run(int argc, char **argv) {
    // The sweep's options end at "--"; the training flags follow it.
    int split = 0;
    while (split < argc && strcmp(argv[split], "--") != 0) split++;
    char **words = calloc((size_t)split + 2, sizeof *words);
    if (!words) return fprintf(stderr, "hogwild sweep: out of memory\n"), HW_EXIT_FAILURE;
    words[0] = "sweep";
    for (int i = 0; i < split; i++) words[i + 1] = argv[i];
    sweep_args *args = calloc(1, sizeof *args);
    if (!args) return free(words), fprintf(stderr, "hogwild sweep: out of memory\n"), HW_EXIT_FAILURE;
    cli_defaults(&sweep_command, args);
    cli_parsed parsed;
    int status = cli_parse(&sweep_command, split + 1, words, args, &parsed);
    cli_parsed_free(&parsed);
    if (status != HW_EXIT_OK) status = sweep_usage_error("%s", parsed.error);
    else if (parsed.stop) print_usage(stdout);
    else if (!args->dir) status = sweep_usage_error("--dir DIR is required: the folder of the runs' CSV files");
    else if (sweep_grid_size(&args->grid) > SWEEP_MAX_RUNS) {
        status =
            sweep_usage_error("the grid makes %d runs, more than %d", sweep_grid_size(&args->grid), SWEEP_MAX_RUNS);
    }
    sweep_plan plan = {.dir = args->dir,
                       .grid = &args->grid,
                       .flags = argv + (split < argc ? split + 1 : argc),
                       .n_flags = split < argc ? argc - split - 1 : 0,
                       .target = args->target};
    if (status == HW_EXIT_OK && !parsed.stop) status = runs_check(&plan);
    if (status == HW_EXIT_OK && !parsed.stop) status = dir_ready(args->dir);
    if (status == HW_EXIT_OK && !parsed.stop) status = sweep_execute(&plan);
    free(args);
    free(words);
    return status;
}
