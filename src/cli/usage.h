// usage: how ./hogwild tells its user what went wrong and how it is called (src/cli/usage.c), for
// every command of the command line.
#ifndef HW_CLI_USAGE_H
#define HW_CLI_USAGE_H

#include "cli/options.h"

#include <stdio.h>

// The usage lines of every command; with_options: then the training options and the exit statuses
// too, which is `hogwild --help`.
void cli_usage_print(FILE *out, int with_options);

// Bad usage: "hogwild: <message>", then the usage lines and where to find every option, on
// stderr. Returns HW_EXIT_USAGE, so that `return cli_usage_error(...)` reads as the refusal.
__attribute__((format(printf, 1, 2))) int cli_usage_error(const char *fmt, ...);

// A failure of the work itself: "<who>: <hw_error()>" on stderr ("hogwild", "hogwild download").
// Returns HW_EXIT_FAILURE.
int cli_failure(const char *who);

// The operand of a command that takes exactly one (a dataset's name, a folder), read before
// cli_parsed_free: HW_EXIT_OK with *operand set, or the usage error (exit 2) "COMMAND: one WHAT at a
// time, got also 'X'" for a second one, "COMMAND: which WHAT? HINT" for none.
int cli_one_operand(const cli_parsed *parsed, const char *command, const char *what, const char *hint,
                    const char **operand);

#endif
