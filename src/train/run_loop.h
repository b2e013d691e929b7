// run_loop: the core of a run's loop that Hogwild (hogwild_watch.c) and DataParallel
// (dataparallel_loop.c) share, private to src/train/ and the GPU trainers: when an --eval-every
// point is due, the evaluation of a snapshot, the end of a diverged run, and the save on a stop
// signal. Each mode drives it from its own loop: Hogwild's parent watches workers that train on
// their own, DataParallel's trainer takes every step itself.
#ifndef HW_TRAIN_RUN_LOOP_H
#define HW_TRAIN_RUN_LOOP_H

#include "hw/train.h"
#include "hw/run_log.h"

#include <stdint.h>

// Copies the current weights into log->snapshot (hw_train_outputs_snapshot): a trainer's own way
// to read its weights (shared memory, a GPU, a replica).
typedef int (*hw_snapshot_fn)(void *ctx, hw_train_outputs *log);

typedef struct {
    const hw_train_config *config;
    hw_train_outputs *log;
    hw_snapshot_fn snapshot;
    void *snapshot_ctx;
    int64_t next_eval;  // the next --eval-every point, in this run's samples (0: none)
} hw_run_loop;

// Training starts: the workers, replicas, GPUs and ranks are set up, and the run writes its
// outputs from now on (hw_train_outputs_commit).
void hw_run_loop_start(hw_run_loop *run, hw_train_outputs *log, hw_snapshot_fn snapshot, void *snapshot_ctx);

// Whether a mid-epoch point of the curve is due at `samples`. Not once the epoch's last samples
// are in (`epoch_end_samples`): the epoch-end row comes next, and stands for a point on it.
static inline int hw_run_loop_point_due(const hw_run_loop *run, int64_t samples, int64_t epoch_end_samples) {
    return run->next_eval > 0 && samples >= run->next_eval && samples < epoch_end_samples;
}

// An evaluation point at `samples` (mid-epoch, or an epoch end): every --eval-every point passed
// since the last is passed (one row stands for them), and the weights are copied into the
// snapshot, which the caller then evaluates (hw_train_outputs_evaluate).
int hw_run_loop_point(hw_run_loop *run, int64_t samples, int epoch_end);

// `who` ("worker 1", "replica 0") saw the training loss `loss`, which diverged (hw_loss_diverged)
// in the 1-based training epoch `epoch`: ends the run (hw_train_outputs_diverged) with HW_ERR.
int hw_run_loop_diverged(hw_run_loop *run, const char *who, double loss, int epoch, int epochs_done, int64_t samples);

// A stop signal (`signal_number`) ended training after `samples` of this run, with `epochs_done`
// epochs complete (counted from 0, as a checkpoint counts them): says so and, with --save, saves
// the current weights (the snapshot).
int hw_run_loop_save_stopped(hw_run_loop *run, int signal_number, int epochs_done, int64_t samples);

#endif
