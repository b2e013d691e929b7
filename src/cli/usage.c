// usage: the usage lines, bad usage and failures, as every command prints them (src/cli/usage.h).
#include "cli/usage.h"

#include "cli/train_options.h"
#include "hw/err.h"

#include <stdarg.h>

static const char *usage_text =
    "usage: hogwild [options]                      train (Hogwild by default)\n"
    "       hogwild --simulate N --delay MODEL     N virtual workers in one process, each gradient\n"
    "                                              on stale weights (README, \"Simulated staleness\")\n"
    "       hogwild --model FILE --summary         print a model's layers and parameter counts\n"
    "       hogwild download NAME [--dir DIR]      get mnist or fashion-mnist (md5-checked)\n"
    "       hogwild synth [--kind digits|sparse|ratings] [--preset rcv1|netflix] [--dir DIR] ...\n"
    "                                              write a synthetic dataset (hogwild synth --help)\n"
    "       hogwild stats DIR [--sample N] [--seed S]\n"
    "                                              a sparse dataset's sparsity (Omega, Delta, rho)\n"
    "       hogwild compare RUN.csv|DIR... [--target PCT] [--plot FILE.svg [--overwrite] | --no-plot]\n"
    "                       [--summary-csv F]\n"
    "                                              compare runs from --metrics files; groups over seeds\n"
    "       hogwild sweep --dir DIR [--workers 1,2] [--mode hogwild,dataparallel] [--seeds 1-3]\n"
    "                     [--lr 0.01,0.05] -- [training options]\n"
    "                                              a grid of runs, each into DIR, then compare DIR\n";

static const char *exit_text =
    "\nExit status: 0 done, 1 failed, 2 bad usage, 130/143/129 stopped by SIGINT/SIGTERM/SIGHUP.\n";

void cli_usage_print(FILE *out, int with_options) {
    fputs(usage_text, out);
    if (with_options) {
        cli_print_options(&cli_train_command, out);
        fputs(exit_text, out);
    }
}

int cli_usage_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "hogwild: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n\n");
    va_end(ap);
    cli_usage_print(stderr, 0);
    fprintf(stderr, "Run 'hogwild --help' for every option.\n");
    return HW_EXIT_USAGE;
}

int cli_failure(const char *who) {
    fprintf(stderr, "%s: %s\n", who, hw_error());
    return HW_EXIT_FAILURE;
}

int cli_one_operand(const cli_parsed *parsed, const char *command, const char *what, const char *hint,
                    const char **operand) {
    *operand = parsed->n_operands > 0 ? parsed->operands[0] : NULL;
    if (parsed->n_operands > 1) {
        return cli_usage_error("%s: one %s at a time, got also '%s'", command, what, parsed->operands[1]);
    }
    if (!*operand) return cli_usage_error("%s: which %s? %s", command, what, hint);
    return HW_EXIT_OK;
}
