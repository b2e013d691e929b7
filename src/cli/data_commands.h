// data_commands: the commands about datasets, each parsing its own options (its table,
// src/cli/options.h) and calling the data room for the work: `hogwild download` (data_commands.c,
// hw_download), `hogwild synth` (synth_command.c: digits, sparse classification or ratings) and
// `hogwild stats` (stats_command.c: the sparsity statistics of a sparse dataset folder).
#ifndef HW_CLI_DATA_COMMANDS_H
#define HW_CLI_DATA_COMMANDS_H

#include "cli/options.h"

// argv[0] is the command's word ("download"), argv[1..argc) its arguments. The exit status:
// HW_EXIT_OK, HW_EXIT_USAGE or HW_EXIT_FAILURE, the message printed.
int cli_download_run(int argc, char **argv);
int cli_synth_run(int argc, char **argv);
int cli_stats_run(int argc, char **argv);

// A small command's --help: its usage text, then its options' table. HW_EXIT_OK.
int cli_command_help_print(const cli_command *command, const char *usage);

#endif
