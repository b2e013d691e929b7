// train_command: ./hogwild's run once its flags are checked (src/cli/train_command.c): the pre-flight
// checks (src/cli/preflight_*.c), then the library's trainer or evaluation, then what it prints.
#ifndef HW_CLI_TRAIN_COMMAND_H
#define HW_CLI_TRAIN_COMMAND_H

#include "hw/train.h"

// Trains as config asks (Hogwild or DataParallel, hw_train_hogwild, hw_train_dataparallel). The
// exit status: HW_EXIT_OK, HW_EXIT_FAILURE with the message printed (a rank of an mpirun job ends
// the whole job, hw_comm_abort), or 128 + the signal that stopped the run.
int cli_train_run(hw_train_config *config);

// --eval-only: evaluates the checkpoint config->resume_path on the test set (hw_eval_only_run) and
// prints the result line. Without --model (model_given 0) the network is the one the checkpoint
// was trained as, from its own metadata. HW_EXIT_OK, or HW_EXIT_FAILURE with the message printed.
int cli_eval_only_run(hw_train_config *config, int model_given);

#endif
