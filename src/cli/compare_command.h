// compare_command: `hogwild compare RUN.csv|DIR ... [--target 98] [--plot FILE.svg | --no-plot] [--summary-csv F]`
// (src/cli/compare_command.c): the command line of src/report/'s comparison.
#ifndef HW_CLI_COMPARE_COMMAND_H
#define HW_CLI_COMPARE_COMMAND_H

#include <stdio.h>

// Given the arguments after the word "compare" (argv[0] is the first of them). The table goes to
// `out`, messages to `err`. Returns the exit status: 0, 1 on a bad file, 2 on bad usage (with the
// usage text).
int cli_compare_run(int argc, char **argv, FILE *out, FILE *err);

// `hogwild compare DIR --summary-csv SUMMARY --target TARGET` (target 0: the default), as a sweep
// ends. The same exit statuses.
int cli_compare_folder(const char *dir, const char *summary_csv, double target, FILE *out, FILE *err);

#endif
