// eval_only: a checkpoint evaluated on the test set, nothing trained (src/train/eval_only.c):
// what `hogwild --eval-only` runs once the command line has loaded and checked its inputs.
#ifndef HW_EVAL_ONLY_H
#define HW_EVAL_ONLY_H

#include "hw/train.h"

#include <stdint.h>

// The evaluation of a checkpoint, and where the checkpoint's training had got to.
typedef struct {
    int epoch;             // epochs the checkpoint had trained
    int64_t samples_seen;  // training samples it had seen, all workers together
    int64_t n_test;        // test samples evaluated
    double loss;           // mean test loss
    double accuracy;       // test accuracy, percent
    int interrupted_by;    // a stop signal (hw_stop_signal) ended the evaluation early: no result
} hw_eval_only_result;

// Allocates in->model's weights, loads the checkpoint config->resume_path into them and evaluates
// them on in->test in batches of config->test_batch_size, on the CPU, with in->norm. HW_OK with
// *result, or HW_ERR (hw_fail) for a checkpoint that does not load or whose weights are not finite
// (hw_train_load_checkpoint), and for one whose test loss diverged (hw_loss_diverged): finite
// weights can still have blown up (1e30 everywhere gives NaN logits), and their accuracy would be
// chance's printed as a result. A stop signal caught by the caller (hw_stop_signals_catch) ends
// the evaluation between two batches: HW_OK with only result->interrupted_by set. in->model is then bound to the weights; hw_train_inputs_free frees them.
int hw_eval_only_run(const hw_train_config *config, hw_train_inputs *in, hw_eval_only_result *result);

#endif
