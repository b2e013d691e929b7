// run_log: what both trainers do around training: evaluate snapshots of the weights, write the
// metrics rows, save checkpoints, print epoch results, the progress line and the summary.
#include "hw/train.h"

#include "hw/ckpt.h"
#include "hw/err.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int hw_train_log_open(hw_train_log *log, const hw_train_config *config, const hw_run_inputs *in, int first_epoch,
                    int64_t samples_base) {
    memset(log, 0, sizeof *log);
    log->config = config;
    log->in = in;
    log->samples_base = samples_base;
    log->eval_model = in->model;
    log->eval_model.owns_weights = 0;
    log->snapshot = malloc(sizeof(float) * in->model.n_weights);
    if (!log->snapshot) return hw_fail("out of memory for a copy of %zu weights", in->model.n_weights);
    log->eval_model.weights = log->snapshot;
    if (hw_workspace_alloc(&log->eval_ws, &log->eval_model, config->test_batch_size, config->seed) != HW_OK ||
        hw_workspace_keep_from_children(&log->eval_ws) != HW_OK) {
        return HW_ERR;
    }
    if (config->metrics_path && hw_metrics_open(&log->metrics, config->metrics_path, config) != HW_OK) {
        return HW_ERR;
    }
    int64_t total = (int64_t)(config->epochs - first_epoch) * in->train.n;
    hw_progress_start(&log->progress, config->quiet, total);
    log->started = hw_now();
    return HW_OK;
}

void hw_train_log_snapshot(hw_train_log *log, const float *weights) {
    memcpy(log->snapshot, weights, sizeof(float) * log->in->model.n_weights);
    log->snapshot_time = hw_now();
}

int hw_train_log_save(hw_train_log *log, const float *weights, int epochs_done, int64_t samples) {
    if (!log->config->save_path) return HW_OK;
    hw_ckpt_meta meta = {.epoch = epochs_done, .samples_seen = log->samples_base + samples, .seed = log->config->seed};
    if (hw_ckpt_save(log->config->save_path, &log->in->model, weights, &meta) != HW_OK) return HW_ERR;
    return HW_OK;
}

int hw_train_log_evaluate(hw_train_log *log, int epochs_done, int64_t samples, double loss_sum, int epoch_end) {
    const hw_train_config *config = log->config;
    log->last_eval = hw_evaluate(&log->eval_model, &log->eval_ws, &log->in->test, log->in->norm,
                                 config->test_batch_size);
    // The row's time is when the weights were copied, not when their evaluation ended.
    double wall = log->snapshot_time > log->started ? log->snapshot_time - log->started : 0;
    int64_t new_samples = samples - log->last_samples;
    double train_loss = new_samples > 0 ? (loss_sum - log->last_loss_sum) / (double)new_samples : NAN;
    log->last_samples = samples;
    log->last_loss_sum = loss_sum;
    if (hw_metrics_row(&log->metrics, wall, epochs_done, log->samples_base + samples, train_loss,
                       log->last_eval.loss, log->last_eval.accuracy) != HW_OK) {
        return HW_ERR;
    }
    if (epoch_end) {
        hw_progress_message(&log->progress, "epoch %d/%d  train loss %.4f  test loss %.4f  accuracy %.2f%%  (%.1f s)\n",
                            epochs_done, config->epochs, train_loss, log->last_eval.loss, log->last_eval.accuracy,
                            wall);
        if (hw_train_log_save(log, log->snapshot, epochs_done, samples) != HW_OK) return HW_ERR;
    }
    return HW_OK;
}

void hw_train_log_finish(hw_train_log *log, int64_t samples, hw_train_result *result) {
    double now = hw_now();
    result->wall_seconds = now - log->started;
    result->train_seconds = (log->trained > 0 ? log->trained : now) - log->started;
    result->samples_seen = samples;
    result->samples_per_second = result->train_seconds > 0 ? (double)samples / result->train_seconds : 0;
    result->test_loss = log->last_eval.loss;
    result->test_accuracy = log->last_eval.accuracy;
    hw_progress_message(&log->progress,
                        "done: %lld samples, training %.3f s (%.0f samples/s), wall %.2f s; "
                        "test loss %.4f, accuracy %.2f%%\n",
                        (long long)samples, result->train_seconds, result->samples_per_second,
                        result->wall_seconds, result->test_loss, result->test_accuracy);
}

void hw_train_log_close(hw_train_log *log) {
    hw_metrics_close(&log->metrics);
    hw_workspace_free(&log->eval_ws);
    free(log->snapshot);
    log->snapshot = NULL;
}
