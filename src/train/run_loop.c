// run_loop: the core that the Hogwild and DataParallel run loops share (src/train/run_loop.h).
#include "run_loop.h"

#include "hw/err.h"
#include "hw/signals.h"

#include <stdio.h>

void hw_run_loop_start(hw_run_loop *run, hw_train_outputs *log, hw_snapshot_fn snapshot, void *snapshot_ctx) {
    *run = (hw_run_loop){.config = log->config,
                         .log = log,
                         .snapshot = snapshot,
                         .snapshot_ctx = snapshot_ctx,
                         .next_eval = log->config->eval_every};
    hw_train_outputs_commit(log);
}

int hw_run_loop_point(hw_run_loop *run, int64_t samples, int epoch_end) {
    hw_train_outputs_pass_points(run->log, &run->next_eval, samples, epoch_end);
    return run->snapshot(run->snapshot_ctx, run->log);
}

int hw_run_loop_diverged(hw_run_loop *run, const char *who, double loss, int epoch, int epochs_done, int64_t samples) {
    char bad[48], what[80];
    hw_loss_describe(bad, sizeof bad, loss);
    snprintf(what, sizeof what, "its training loss is %s", bad);
    return hw_train_outputs_diverged(run->log, who, what, epoch, epochs_done, samples, loss);
}

int hw_run_loop_save_stopped(hw_run_loop *run, int signal_number, int epochs_done, int64_t samples) {
    hw_train_outputs *log = run->log;
    hw_progress_message(&log->progress, "interrupted by %s after %lld samples\n", hw_stop_signal_name(signal_number),
                        (long long)samples);
    if (!run->config->save_path) return HW_OK;
    if (run->snapshot(run->snapshot_ctx, log) != HW_OK) return HW_ERR;
    if (hw_train_outputs_save(log, log->snapshot, epochs_done, samples) != HW_OK) return HW_ERR;
    hw_progress_message(&log->progress, "saved the current weights to %s\n", run->config->save_path);
    return HW_OK;
}
