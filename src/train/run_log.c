// outputs: what a training run writes, the same for both trainers: evaluate snapshots of the weights, write the
// metrics rows, save checkpoints, print epoch results, the progress line and the summary.
#include "hw/run_log.h"

#include "hw/ckpt.h"
#include "hw/comm.h"
#include "hw/err.h"
#include "hw/option.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void hw_train_metrics_run(const hw_train_config *config, char *device, size_t cap, hw_metrics_run *run) {
    int hogwild = config->mode == HW_MODE_HOGWILD;
    device[0] = '\0';
    if (config->device.type == HW_DEVICE_CUDA && config->n_gpus > 0) {
        size_t used = 0;
        for (int i = 0; i < config->n_gpus && used < cap; i++) {
            used += (size_t)snprintf(device + used, cap - used, "%scuda:%d", i ? "+" : "", config->gpus[i]);
        }
    } else {
        hw_device_format(config->device, device, cap);
    }
    *run = (hw_metrics_run){.mode = hogwild ? "hogwild" : "dataparallel",
                            .workers = (hogwild ? config->workers : config->replicas) * config->world.size,
                            .device = device,
                            .with_measure = config->measure};
}

static int open_metrics(hw_metrics *metrics, const hw_train_config *config) {
    char device[HW_METRICS_DEVICE_CAP];
    hw_metrics_run run;
    hw_train_metrics_run(config, device, sizeof device, &run);
    return hw_metrics_open(metrics, config->metrics_path, &run);
}

int hw_train_outputs_open(hw_train_outputs *log, const hw_train_config *config, const hw_train_inputs *in,
                          int first_epoch, int64_t samples_base) {
    memset(log, 0, sizeof *log);
    log->config = config;
    log->in = in;
    log->samples_base = samples_base;
    log->last_finite_loss = NAN;
    log->eval_model = in->model;
    log->eval_model.owns_weights = 0;
    log->snapshot = malloc(sizeof(float) * in->model.n_weights);
    if (!log->snapshot) return hw_fail("out of memory for a copy of %zu weights", in->model.n_weights);
    log->eval_model.weights = log->snapshot;
    if (hw_workspace_alloc(&log->eval_ws, &log->eval_model, config->test_batch_size, config->seed) != HW_OK ||
        hw_workspace_keep_from_children(&log->eval_ws) != HW_OK) {
        return HW_ERR;
    }
    if (config->metrics_path && open_metrics(&log->metrics, config) != HW_OK) return HW_ERR;
    int64_t total = (int64_t)(config->epochs - first_epoch) * in->train.n;
    hw_progress_start(&log->progress, config->quiet, total);
    log->progress.silent = config->world.rank != 0;
    log->started = hw_now();
    return HW_OK;
}

void hw_train_outputs_commit(hw_train_outputs *log) { hw_metrics_commit(&log->metrics); }

void hw_train_outputs_snapshot(hw_train_outputs *log, const float *weights) {
    memcpy(log->snapshot, weights, sizeof(float) * log->in->model.n_weights);
    log->snapshot_time = hw_now();
}

int hw_train_outputs_first_point(hw_train_outputs *log, const float *weights, int first_epoch) {
    // Ranks that evaluate together all take this point when rank 0 writes metrics.
    if (!log->config->metrics_path && !(log->distributed && log->config->job_metrics)) return HW_OK;
    hw_train_outputs_snapshot(log, weights);
    log->snapshot_time = log->started;  // the row's wall time: 0
    return hw_train_outputs_evaluate(log, first_epoch, 0, 0, 0);
}

int hw_weights_finite(const float *weights, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(weights[i])) return 0;
    }
    return 1;
}

// What to try after a divergence. A momentum of 1 or more diverges at any learning rate: the
// momentum buffer sums every gradient with a weight that never decays (buf = momentum * buf + g),
// and past 1 it grows geometrically; a lower learning rate alone only delays it.
static void divergence_hint(const hw_train_config *config, char *text, size_t cap) {
    if (config->momentum >= 1) {
        snprintf(text, cap,
                 "Use a momentum below 1%s, e.g. 0.9: this run's is %g, and at 1 or more SGD's momentum grows "
                 "without bound at any learning rate",
                 hw_option_hint(HW_OPTION_MOMENTUM), (double)config->momentum);
    } else {
        snprintf(text, cap, "Try a lower learning rate than this run's %g%s", (double)config->lr,
                 hw_option_hint(HW_OPTION_LR));
    }
}

int hw_train_outputs_save(hw_train_outputs *log, const float *weights, int epochs_done, int64_t samples) {
    if (!log->config->save_path) return HW_OK;
    // Never a checkpoint of diverged weights: the file keeps the last good one.
    if (!hw_weights_finite(weights, log->in->model.n_weights)) {
        char hint[224];
        divergence_hint(log->config, hint, sizeof hint);
        return hw_fail("training diverged: the weights after %lld samples seen are not finite (NaN or inf); not "
                       "saved, %s is left as it was. %s",
                       (long long)(log->samples_base + samples), log->config->save_path, hint);
    }
    hw_ckpt_meta meta = {.epoch = epochs_done, .samples_seen = log->samples_base + samples, .seed = log->config->seed};
    if (hw_ckpt_save(log->config->save_path, &log->in->model, weights, &meta) != HW_OK) return HW_ERR;
    return HW_OK;
}

int hw_loss_diverged(double loss) { return !isfinite(loss) || loss > HW_LOSS_DIVERGED; }

void hw_loss_describe(char *out, size_t size, double loss) {
    if (isnan(loss)) snprintf(out, size, "nan");
    else if (isinf(loss)) snprintf(out, size, "infinite");
    else snprintf(out, size, "%.3g (above %.0e)", loss, HW_LOSS_DIVERGED);
}

void hw_train_outputs_loss(hw_train_outputs *log, double loss) {
    if (!hw_loss_diverged(loss)) log->last_finite_loss = loss;
}

int hw_train_outputs_diverged(hw_train_outputs *log, const char *who, const char *what, int epoch, int epochs_done,
                              int64_t samples, double loss) {
    const hw_train_config *config = log->config;
    hw_train_outputs_commit(log);  // a divergence is a result of training: its row is written
    double wall = hw_now() - log->started;
    // The row that marks the run as diverged (README, "Metrics"): nothing was evaluated.
    log->metrics.skipped_eval_points = log->skipped_points;
    int wrote =
        hw_metrics_row(&log->metrics, wall > 0 ? wall : 0, epochs_done, log->samples_base + samples, loss, NAN, NAN);
    char metrics_error[600] = "";
    if (wrote != HW_OK) snprintf(metrics_error, sizeof metrics_error, " (and %s)", hw_error());
    char last[64] = "no training loss before it";
    if (isfinite(log->last_finite_loss)) {
        snprintf(last, sizeof last, "the last training loss before it was %.6g", log->last_finite_loss);
    }
    char kept[1100] = "", hint[224];
    if (config->save_path) snprintf(kept, sizeof kept, "; nothing was saved to %s", config->save_path);
    divergence_hint(config, hint, sizeof hint);
    return hw_fail("%s: training diverged in epoch %d/%d after %lld samples seen: %s; %s. %s%s%s", who, epoch,
                   config->epochs, (long long)(log->samples_base + samples), what, last, hint, kept, metrics_error);
}

void hw_train_outputs_pass_points(hw_train_outputs *log, int64_t *next_eval, int64_t samples, int epoch_end) {
    const int64_t every = log->config->eval_every;
    if (every <= 0) return;
    if (!epoch_end && *next_eval <= samples) *next_eval += every;  // the point this row stands for
    for (; *next_eval <= samples; *next_eval += every) log->skipped_points += !epoch_end || *next_eval < samples;
}

// The snapshot's test loss and accuracy: the whole test set here, or (log->distributed) this
// rank's share of it, summed over the ranks with the others' (a collective every rank makes, the
// same number of times, whatever its share; a stop signal on any rank ends the evaluation on all).
static int evaluate_snapshot(hw_train_outputs *log, hw_eval_result *out) {
    const hw_train_config *config = log->config;
    const hw_dataset *test = &log->in->test;
    if (!log->distributed) {
        *out = hw_evaluate(&log->eval_model, &log->eval_ws, test, log->in->norm, config->test_batch_size);
        return HW_OK;
    }
    const hw_world *world = &config->world;
    int64_t begin = test->n * world->rank / world->size, end = test->n * (world->rank + 1) / world->size;
    size_t sample_bytes = (size_t)test->channels * (size_t)test->height * (size_t)test->width;
    hw_dataset share = *test;
    share.images = test->images + (size_t)begin * sample_bytes;
    share.labels = test->labels + begin;
    share.n = end - begin;
    hw_eval_result mine = {0};
    double started = hw_now();
    if (share.n > 0) {
        mine = hw_evaluate(&log->eval_model, &log->eval_ws, &share, log->in->norm, config->test_batch_size);
    }
    // The others' shares are as large as this one: waiting for them longer than this one took,
    // plus --sync-timeout, means a rank is stuck or gone.
    double took = hw_now() - started;
    float sums[3] = {(float)mine.loss_sum, (float)mine.correct, (float)mine.interrupted};
    char what[128];
    snprintf(what, sizeof what, "the evaluation split over the ranks (this rank's share took %.1f s)", took);
    if (hw_comm_sum_polled(sums, 3, took + config->sync_timeout, what) != HW_OK) return HW_ERR;
    memset(out, 0, sizeof *out);
    out->interrupted = sums[2] > 0;
    out->loss_sum = sums[0];
    out->correct = (int64_t)sums[1];
    out->loss = test->n > 0 ? (double)sums[0] / (double)test->n : 0;
    out->accuracy = test->n > 0 ? 100.0 * (double)sums[1] / (double)test->n : 0;
    return HW_OK;
}

int hw_train_outputs_evaluate(hw_train_outputs *log, int epochs_done, int64_t samples, double loss_sum, int epoch_end) {
    const hw_train_config *config = log->config;
    int64_t new_samples = samples - log->last_samples;
    double train_loss = new_samples > 0 ? (loss_sum - log->last_loss_sum) / (double)new_samples : NAN;
    if (config->world.rank != 0 && !log->distributed) {
        // Rank 0 evaluates, writes the metrics and saves for the whole job: the weights are the same.
        log->last_samples = samples;
        log->last_loss_sum = loss_sum;
        return HW_OK;
    }
    // Diverged weights are not evaluated: their numbers are no result. (The training epoch, for
    // the message: the one that just ended, or the one under way.)
    int epoch = epoch_end ? epochs_done : epochs_done + 1;
    if (!hw_weights_finite(log->snapshot, log->in->model.n_weights)) {
        if (config->world.rank != 0) return HW_OK;  // the same weights on every rank: rank 0 ends the job
        if (samples == 0) {
            if (!config->resume_path) return hw_fail("the weights this run starts from are not finite (NaN or inf)");
            return hw_fail("the weights this run starts from, the checkpoint %s%s, are not finite (NaN or inf)",
                           config->resume_path, hw_option_hint(HW_OPTION_RESUME));
        }
        return hw_train_outputs_diverged(log, "the weights", "they are no longer finite numbers (NaN or inf)", epoch,
                                         epochs_done, samples, NAN);
    }
    hw_eval_result evaluated = {0};
    if (evaluate_snapshot(log, &evaluated) != HW_OK) return HW_ERR;
    if (evaluated.interrupted) {
        log->interrupted = 1;  // the trainer stops and saves the current weights
        return HW_OK;
    }
    log->last_eval = evaluated;
    if (config->world.rank != 0) {  // a share of an evaluation split over the ranks: rank 0 reports
        log->last_samples = samples;
        log->last_loss_sum = loss_sum;
        return HW_OK;
    }
    if (hw_loss_diverged(log->last_eval.loss) || (new_samples > 0 && hw_loss_diverged(train_loss))) {
        int test_bad = hw_loss_diverged(log->last_eval.loss);
        double bad = test_bad ? log->last_eval.loss : train_loss;
        char bad_text[48], what[80];
        hw_loss_describe(bad_text, sizeof bad_text, bad);
        snprintf(what, sizeof what, "the %s loss is %s", test_bad ? "test" : "training", bad_text);
        return hw_train_outputs_diverged(log, "the evaluation", what, epoch, epochs_done, samples,
                                         test_bad ? NAN : train_loss);
    }
    // The row's time is when the weights were copied, not when their evaluation ended.
    double wall = log->snapshot_time > log->started ? log->snapshot_time - log->started : 0;
    log->last_samples = samples;
    log->last_loss_sum = loss_sum;
    if (new_samples > 0) hw_train_outputs_loss(log, train_loss);  // for a later divergence's message
    log->metrics.skipped_eval_points = log->skipped_points;
    if (hw_metrics_row(&log->metrics, wall, epochs_done, log->samples_base + samples, train_loss, log->last_eval.loss,
                       log->last_eval.accuracy) != HW_OK) {
        return HW_ERR;
    }
    if (epoch_end) {
        // Every number here is finite (checked above); no training since the last row shows "-".
        char train_text[32] = "-";
        if (new_samples > 0) snprintf(train_text, sizeof train_text, "%.4f", train_loss);
        hw_progress_message(&log->progress, "epoch %d/%d  train loss %s  test loss %.4f  accuracy %.2f%%  (%.1f s)\n",
                            epochs_done, config->epochs, train_text, log->last_eval.loss, log->last_eval.accuracy,
                            wall);
        if (hw_train_outputs_save(log, log->snapshot, epochs_done, samples) != HW_OK) return HW_ERR;
    }
    return HW_OK;
}

void hw_train_outputs_finish(hw_train_outputs *log, int64_t samples, hw_train_result *result) {
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
                        (long long)samples, result->train_seconds, result->samples_per_second, result->wall_seconds,
                        result->test_loss, result->test_accuracy);
    if (log->skipped_points > 0) {
        hw_progress_message(&log->progress,
                            "note: %lld evaluation point(s)%s were not evaluated: training passed them "
                            "before they could be (an evaluation under way, or, across ranks, the other ranks' "
                            "samples counted only when a round brings them; each metrics row records the "
                            "samples it was taken at)\n",
                            (long long)log->skipped_points, hw_option_hint(HW_OPTION_EVAL_EVERY));
    }
    if (log->metrics.failed) hw_progress_message(&log->progress, "warning: %s\n", log->metrics.failure);
}

void hw_train_outputs_close(hw_train_outputs *log) {
    hw_metrics_close(&log->metrics);
    hw_workspace_free(&log->eval_ws);
    free(log->snapshot);
    log->snapshot = NULL;
}
