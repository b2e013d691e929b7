// preflight: what the command line checks before a run starts its work (src/cli/preflight_*.c),
// so that a run that cannot finish fails at once, not an epoch later.
#ifndef HW_CLI_PREFLIGHT_H
#define HW_CLI_PREFLIGHT_H

#include "cli/options.h"
#include "hw/train.h"

#include <stddef.h>

// Caps --batch-size at what a batch can hold (a Hogwild worker's share of the training data, or
// all of it in DataParallel) and --test-batch-size at the test set: larger values train and
// evaluate the same, but would allocate their whole size ("out of memory" for --batch-size 1048576).
// `note` says what was capped ("" when nothing was).
void preflight_fit_batches(hw_train_config *config, const hw_train_inputs *in, char *note, size_t cap);

// The dataset folder --data: refused, naming the commands that write a dataset, when it does not
// exist or holds no dataset file at all (preflight_inputs.c); what it holds is the loader's to check.
int preflight_data(const hw_train_config *config);
// The path of one of the four IDX files (gzipped or not) in `dir`, or NULL: a dataset is there.
const char *preflight_dataset_file_in(const char *dir);

// Checks the files the run will write before it trains (preflight_outputs.c): --save is
// writable, is not an input (model, dataset files, image folders) nor the --metrics file, and
// replaces an existing file only when the run resumed from it or --overwrite was given; --metrics
// is not an input nor the --resume checkpoint.
int preflight_outputs(const hw_train_config *config);

// The address space a run needs per process, estimated (preflight_limits.c), and its check
// against RLIMIT_AS (ulimit -v): a run that cannot fit is refused before it starts, naming both.
double preflight_memory_estimate(const hw_train_config *config, const hw_train_inputs *in, int eval_only);
// The stack size limit (ulimit -s), which also sizes every thread's stack: below
// HW_MIN_STACK_BYTES the parent or a worker can die of SIGSEGV with no message (64 KiB does), so
// such a limit is refused, naming it, before the run starts.
enum { HW_MIN_STACK_BYTES = 512 << 10 };
int preflight_stack(void);
int preflight_memory(const hw_train_config *config, const hw_train_inputs *in, int eval_only);
// A warm-up (--warmup) as long as the whole run or longer is refused, naming both: the rate would
// never reach --lr, and the run would end at a fraction of it without a word. The run's samples
// are its epochs over the training data, every rank's (a resumed run's earlier epochs included:
// the schedule counts them too). `train_n`: the training set's samples, a dense or a sparse one's.
int preflight_warmup(const hw_train_config *config, int64_t train_n);

#endif
