// sparse_train_command: ./hogwild's run of a sparse model (src/cli/sparse_train_command.c), which
// a model file beginning `input sparse` asks for (include/hw/sparse_train.h).
#ifndef HW_CLI_SPARSE_TRAIN_COMMAND_H
#define HW_CLI_SPARSE_TRAIN_COMMAND_H

#include "cli/options.h"
#include "hw/train.h"

// Whether the model file at model_path is a sparse model's (a file that cannot be read is not:
// the dense path reports it).
int cli_sparse_model_is(const char *model_path);
// Whether the run's model, config->model_text (a checkpoint's) or else the file at model_path, is
// a sparse model's.
int cli_sparse_model_given(const hw_train_config *config);
// --eval-only of a sparse model: its checkpoint config->resume_path evaluated on the test set of
// the sparse folder config->data_dir. HW_EXIT_OK, or HW_EXIT_FAILURE with the message printed.
int cli_sparse_eval_only_run(hw_train_config *config);
// Trains the sparse model config->model_path on the sparse folder config->data_dir, Hogwild or
// DataParallel. HW_EXIT_OK, or HW_EXIT_FAILURE with the message printed.
int cli_sparse_train_run(hw_train_config *config);
// A sparse model file's `default NAME VALUE` lines (include/hw/sparse_train.h) into `config`, each
// where the command line does not give its option: the run's model is --model's file, else with
// --resume the checkpoint's, else the default model file; a dense model has none. A name that is
// not one of the settings a model may give, or a value its option refuses, fails as the model
// file's other errors do (no usage text), naming the file and line; a momentum of 0 from the file
// with --nesterov is refused as --nesterov without momentum is (exit 2), naming the file and line. HW_EXIT_OK or
// HW_EXIT_FAILURE, the message printed.
int cli_sparse_defaults_apply(hw_train_config *config, const cli_parsed *given);
// --summary of a sparse model.
int cli_sparse_summary_print(const hw_train_config *config);

#endif
