// info_commands: the options of ./hogwild that do one thing and train nothing (src/cli/info_commands.c):
// --version, --summary, --list-sharing-strategies, --clean-shm. Each calls the room that knows the
// answer and prints it; the exit status is HW_EXIT_OK, or HW_EXIT_FAILURE with the message printed.
#ifndef HW_CLI_INFO_COMMANDS_H
#define HW_CLI_INFO_COMMANDS_H

#include "cli/options.h"
#include "hw/train.h"

// --version: the version, the BLAS in use and the CPU kernels HOGWILD_CPU_PATH chooses.
int cli_version_print(void);

// --summary: the layers and parameter counts of config->model_path, with --freeze applied. Any
// other flag `given` beside them is refused as bad usage (HW_EXIT_USAGE), naming it.
int cli_summary_print(const hw_train_config *config, const cli_parsed *given);

// --list-sharing-strategies: one line each, the current one marked.
int cli_strategies_print(void);

// --clean-shm: removes what runs killed with SIGKILL left in shared memory and beside checkpoints
// (hw_shm_clean), and says what it removed and kept.
int cli_shm_clean_run(void);

#endif
