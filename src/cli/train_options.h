// train_options: ./hogwild's training options (src/cli/train_options.c), the one table from which
// the help, the parser and the defaults of a run's hw_train_config come.
#ifndef HW_CLI_TRAIN_OPTIONS_H
#define HW_CLI_TRAIN_OPTIONS_H

#include "cli/options.h"
#include "hw/train.h"

extern const cli_command cli_train_command;

// A configuration with every option at its default (hw_train_config_init, then the table's).
void cli_train_defaults(hw_train_config *config);

#endif
