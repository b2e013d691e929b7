// run_outputs: the bookkeeping between a run's steps, the same for every trainer
// (include/hw/run_outputs.h): evaluation points and their snapshots, metrics rows, checkpoints,
// the progress line, epoch results and the summary, a diverged run's end, the save on a stop.
#include "hw/run_outputs.h"

#include "hw/bf16.h"
#include "hw/ckpt.h"
#include "hw/comm.h"
#include "hw/err.h"
#include "hw/option.h"
#include "hw/resume_optim.h"
#include "hw/signals.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert((int)HW_DELAY_SPEC_CAP <= (int)HW_CKPT_DELAY_CAP, "a checkpoint holds any delay model's text");

void hw_run_outputs_metrics_run(const hw_train_config *config, char *device, size_t cap, hw_metrics_run *run) {
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
                            .seed = config->seed,
                            .setup = config->setup_hash,
                            .settings = config->settings,
                            .with_measure = config->measure};
}

// The model column: the model file's name without its folder and extension ("models/lenet.model":
// "lenet"), into buf.
static void model_name(const hw_train_config *config, char *buf, size_t cap) {
    const char *path = config->model_path ? config->model_path : "";
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    const char *dot = strrchr(base, '.');
    size_t len = dot && dot != base ? (size_t)(dot - base) : strlen(base);
    snprintf(buf, cap, "%.*s", (int)len, base);
}

int hw_run_outputs_metrics_open(hw_metrics *metrics, const hw_train_config *config) {
    char device[HW_METRICS_DEVICE_CAP];
    hw_metrics_run run;
    hw_run_outputs_metrics_run(config, device, sizeof device, &run);
    char model[HW_METRICS_MODEL_CAP];
    model_name(config, model, sizeof model);
    run.model = model;
    return hw_metrics_open(metrics, config->metrics_path, &run);
}

int hw_run_outputs_open(hw_run_outputs *outputs, const hw_train_config *config, const hw_train_inputs *in,
                        int first_epoch, int64_t samples_base) {
    memset(outputs, 0, sizeof *outputs);
    outputs->config = config;
    outputs->in = in;
    outputs->samples_base = samples_base;
    outputs->last_finite_loss = NAN;
    outputs->eval_model = in->model;
    outputs->eval_model.owns_weights = 0;
    outputs->snapshot = malloc(sizeof(float) * in->model.n_weights);
    if (!outputs->snapshot) return hw_fail("out of memory for a copy of %zu weights", in->model.n_weights);
    outputs->eval_model.weights = outputs->snapshot;
    if (hw_workspace_alloc(&outputs->eval_ws, &outputs->eval_model, config->test_batch_size, config->seed) != HW_OK ||
        hw_workspace_keep_from_children(&outputs->eval_ws) != HW_OK) {
        return HW_ERR;
    }
    if (config->metrics_path && hw_run_outputs_metrics_open(&outputs->metrics, config) != HW_OK) return HW_ERR;
    int64_t total = (int64_t)(config->epochs - first_epoch) * in->train.n;
    hw_progress_start(&outputs->progress, config->quiet, total);
    outputs->progress.silent = config->world.rank != 0;
    outputs->started = hw_now();
    return HW_OK;
}

void hw_run_outputs_start(hw_run_outputs *outputs, hw_snapshot_fn snapshot, void *ctx) {
    outputs->take_snapshot = snapshot;
    outputs->snapshot_ctx = ctx;
    outputs->next_eval = outputs->config->eval_every;
    hw_metrics_commit(&outputs->metrics);
}

void hw_run_outputs_snapshot(hw_run_outputs *outputs, const float *weights) {
    memcpy(outputs->snapshot, weights, sizeof(float) * outputs->in->model.n_weights);
    outputs->snapshot_time = hw_now();
}

void hw_run_outputs_snapshot_bf16(hw_run_outputs *outputs, const uint16_t *weights) {
    hw_bf16_to_floats(outputs->snapshot, weights, outputs->in->model.n_weights);
    outputs->snapshot_time = hw_now();
}

int hw_run_outputs_first_point(hw_run_outputs *outputs, const float *weights, int first_epoch) {
    // Ranks that evaluate together all take this point when rank 0 writes metrics: rank 0's
    // --metrics decides (the others drop theirs, and need not have been given one).
    int metrics = outputs->config->metrics_path != NULL;
    if (outputs->distributed && hw_comm_bcast(&metrics, sizeof metrics, 0) != HW_OK) return HW_ERR;
    if (!metrics) return HW_OK;
    hw_run_outputs_snapshot(outputs, weights);
    outputs->snapshot_time = outputs->started;  // the row's wall time: 0
    return hw_run_outputs_evaluate(outputs, first_epoch, 0, 0, 0);
}

int hw_weights_finite(const float *weights, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(weights[i])) return 0;
    }
    return 1;
}

// A momentum of 1 or more diverges at any learning rate: the momentum buffer sums every gradient
// with a weight that never decays (buf = momentum * buf + g), and past 1 it grows geometrically; a
// lower learning rate alone only delays it.
void hw_divergence_hint(const hw_train_config *config, char *text, size_t cap) {
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

// hw_run_checkpoint_save with the optimizer state beside the weights, when `optim` holds the
// state at them (NULL: none).
static int checkpoint_save(const hw_train_config *config, const hw_model *model, const float *weights, int epochs_done,
                           int64_t samples_seen, const hw_optim_state *optim) {
    if (!config->save_path) return HW_OK;
    // Never a checkpoint of diverged weights: the file keeps the last good one.
    if (!hw_weights_finite(weights, model->n_weights)) {
        char hint[224];
        hw_divergence_hint(config, hint, sizeof hint);
        return hw_fail("training diverged: the weights after %lld samples seen are not finite (NaN or inf); not "
                       "saved, %s is left as it was. %s",
                       (long long)samples_seen, config->save_path, hint);
    }
    // What --resume restores: where the run stopped, its seed, its rate, its schedule, its --update
    // and its --max-staleness.
    hw_ckpt_meta meta = {.epoch = epochs_done,
                         .samples_seen = samples_seen,
                         .seed = config->seed,
                         .lr = config->lr,
                         .lr_warmup = config->lr_schedule.warmup};
    hw_lr_schedule_format(&config->lr_schedule, meta.lr_schedule, sizeof meta.lr_schedule);
    // A simulation's weights are no real run's: --resume goes on only as the same simulation.
    if (config->simulate) {
        meta.simulate = config->simulate;
        snprintf(meta.delay, sizeof meta.delay, "%s", config->delay.spec);
    }
    snprintf(meta.update, sizeof meta.update, "%s", hw_update_mode_name(config->update));
    meta.bf16 = config->weights == HW_WEIGHTS_BF16;
    meta.has_max_staleness = config->max_staleness != HW_STALENESS_UNBOUNDED;
    meta.max_staleness = meta.has_max_staleness ? config->max_staleness : 0;
    return hw_optim_checkpoint_save(config->save_path, model, weights, &meta, optim);
}

int hw_run_checkpoint_save(const hw_train_config *config, const hw_model *model, const float *weights, int epochs_done,
                           int64_t samples_seen, const struct hw_optim_state *optim) {
    return checkpoint_save(config, model, weights, epochs_done, samples_seen, optim);
}

int hw_run_outputs_save(hw_run_outputs *outputs, const float *weights, int epochs_done, int64_t samples) {
    return checkpoint_save(outputs->config, &outputs->in->model, weights, epochs_done, outputs->samples_base + samples,
                           outputs->optim);
}

// The save comes before the messages: a stdout nobody reads blocks the write (mpirun forwards no
// output from a Ctrl-C on, and SIGKILLs the ranks a second later), and the file must not wait on it.
int hw_run_outputs_save_stopped(hw_run_outputs *outputs, int signal_number, int epochs_done, int64_t samples) {
    const char *path = outputs->config->save_path;
    int status = HW_OK;
    if (path) {
        // Stopped mid-epoch: the optimizer state of the last epoch end is not the weights' (and a
        // resumed run redoes the epoch); stopped before this run trained, it is the state the run
        // started from.
        if (outputs->optim && samples > 0) outputs->optim->valid = 0;
        status = outputs->take_snapshot(outputs->snapshot_ctx, outputs);
        if (status == HW_OK) status = hw_run_outputs_save(outputs, outputs->snapshot, epochs_done, samples);
    }
    hw_progress_message(&outputs->progress, "interrupted by %s after %lld samples\n",
                        hw_stop_signal_name(signal_number), (long long)samples);
    if (status != HW_OK) return HW_ERR;
    if (path) hw_progress_message(&outputs->progress, "saved the current weights to %s\n", path);
    return HW_OK;
}

// hw_run_outputs_stop_before_training's snapshot: taken already, of the weights the run starts from.
static int snapshot_taken(void *ctx, hw_run_outputs *outputs) {
    (void)ctx;
    (void)outputs;
    return HW_OK;
}

int hw_run_outputs_stop_before_training(hw_run_outputs *outputs, const float *weights, int first_epoch,
                                        hw_train_result *result) {
    int sig = hw_stop_signal();
    if (!sig && !outputs->interrupted) return HW_OK;
    result->interrupted_by = sig ? sig : SIGTERM;
    hw_run_outputs_snapshot(outputs, weights);
    outputs->take_snapshot = snapshot_taken;
    return hw_run_outputs_save_stopped(outputs, result->interrupted_by, first_epoch, 0);
}

int hw_loss_diverged(double loss) { return !isfinite(loss) || loss > HW_LOSS_DIVERGED; }

void hw_loss_describe(char *out, size_t size, double loss) {
    if (isnan(loss)) snprintf(out, size, "nan");
    else if (isinf(loss)) snprintf(out, size, "infinite");
    else snprintf(out, size, "%.3g (above %.0e)", loss, HW_LOSS_DIVERGED);
}

void hw_run_outputs_loss(hw_run_outputs *outputs, double loss) {
    if (!hw_loss_diverged(loss)) outputs->last_finite_loss = loss;
}

// The metrics row's lr column: the rate a step would take at the row's `samples` of this run.
static void row_lr(hw_run_outputs *outputs, int64_t samples) {
    outputs->metrics.lr = hw_train_lr(outputs->config, outputs->samples_base + samples, outputs->in->train.n);
}

int hw_run_outputs_diverged(hw_run_outputs *outputs, const char *who, const char *what, int epoch, int epochs_done,
                            int64_t samples, double loss) {
    const hw_train_config *config = outputs->config;
    hw_metrics_commit(&outputs->metrics);  // a divergence is a result of training: its row is written
    double wall = hw_now() - outputs->started;
    // The row that marks the run as diverged (README, "Metrics"): nothing was evaluated.
    outputs->metrics.skipped_eval_points = outputs->skipped_points;
    row_lr(outputs, samples);
    int wrote = hw_metrics_row(&outputs->metrics, wall > 0 ? wall : 0, epochs_done, outputs->samples_base + samples,
                               loss, NAN, NAN);
    char metrics_error[600] = "";
    if (wrote != HW_OK) snprintf(metrics_error, sizeof metrics_error, " (and %s)", hw_error());
    char last[64] = "no training loss before it";
    if (isfinite(outputs->last_finite_loss)) {
        snprintf(last, sizeof last, "the last training loss before it was %.6g", outputs->last_finite_loss);
    }
    char kept[1100] = "", hint[224];
    if (config->save_path) snprintf(kept, sizeof kept, "; nothing was saved to %s", config->save_path);
    hw_divergence_hint(config, hint, sizeof hint);
    return hw_fail("%s: training diverged in epoch %d/%d after %lld samples seen: %s; %s. %s%s%s", who, epoch,
                   config->epochs, (long long)(outputs->samples_base + samples), what, last, hint, kept, metrics_error);
}

int hw_run_outputs_loss_diverged(hw_run_outputs *outputs, const char *who, double loss, int epoch, int epochs_done,
                                 int64_t samples) {
    char bad[48], what[80];
    hw_loss_describe(bad, sizeof bad, loss);
    snprintf(what, sizeof what, "its training loss is %s", bad);
    return hw_run_outputs_diverged(outputs, who, what, epoch, epochs_done, samples, loss);
}

int hw_run_outputs_point_due(const hw_run_outputs *outputs, int64_t samples, int64_t epoch_end_samples) {
    return outputs->next_eval > 0 && samples >= outputs->next_eval && samples < epoch_end_samples;
}

// Moves next_eval (the next --eval-every point) past `samples`, before the row about to be written
// at `samples`, and counts as skipped every point passed that the row does not stand for: mid-epoch
// the row stands for the first point passed; at an epoch end, for a point on the end itself only.
static void pass_points(hw_run_outputs *outputs, int64_t samples, int epoch_end) {
    const int64_t every = outputs->config->eval_every;
    int64_t *next_eval = &outputs->next_eval;
    if (every <= 0) return;
    if (!epoch_end && *next_eval <= samples) *next_eval += every;  // the point this row stands for
    for (; *next_eval <= samples; *next_eval += every) outputs->skipped_points += !epoch_end || *next_eval < samples;
}

int hw_run_outputs_point(hw_run_outputs *outputs, int64_t samples, int epoch_end) {
    pass_points(outputs, samples, epoch_end);
    return outputs->take_snapshot(outputs->snapshot_ctx, outputs);
}

// The snapshot's test loss and accuracy: the whole test set here, or (outputs->distributed) this
// rank's share of it, summed over the ranks with the others' (a collective every rank makes, the
// same number of times, whatever its share; a stop signal on any rank ends the evaluation on all).
static int evaluate_snapshot(hw_run_outputs *outputs, hw_eval_result *out) {
    const hw_train_config *config = outputs->config;
    const hw_dataset *test = &outputs->in->test;
    if (!outputs->distributed) {
        *out = hw_evaluate(&outputs->eval_model, &outputs->eval_ws, test, outputs->in->norm, config->test_batch_size);
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
        mine = hw_evaluate(&outputs->eval_model, &outputs->eval_ws, &share, outputs->in->norm, config->test_batch_size);
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

int hw_run_outputs_evaluate(hw_run_outputs *outputs, int epochs_done, int64_t samples, double loss_sum, int epoch_end) {
    const hw_train_config *config = outputs->config;
    int64_t new_samples = samples - outputs->last_samples;
    double train_loss = new_samples > 0 ? (loss_sum - outputs->last_loss_sum) / (double)new_samples : NAN;
    if (config->world.rank != 0 && !outputs->distributed) {
        // Rank 0 evaluates, writes the metrics and saves for the whole job: the weights are the same.
        outputs->last_samples = samples;
        outputs->last_loss_sum = loss_sum;
        return HW_OK;
    }
    // Diverged weights are not evaluated: their numbers are no result. (The training epoch, for
    // the message: the one that just ended, or the one under way.)
    int epoch = epoch_end ? epochs_done : epochs_done + 1;
    if (!hw_weights_finite(outputs->snapshot, outputs->in->model.n_weights)) {
        if (config->world.rank != 0) return HW_OK;  // the same weights on every rank: rank 0 ends the job
        if (samples == 0) {
            if (!config->resume_path) return hw_fail("the weights this run starts from are not finite (NaN or inf)");
            return hw_fail("the weights this run starts from, the checkpoint %s%s, are not finite (NaN or inf)",
                           config->resume_path, hw_option_hint(HW_OPTION_RESUME));
        }
        return hw_run_outputs_diverged(outputs, "the weights", "they are no longer finite numbers (NaN or inf)", epoch,
                                       epochs_done, samples, NAN);
    }
    hw_eval_result evaluated = {0};
    if (evaluate_snapshot(outputs, &evaluated) != HW_OK) return HW_ERR;
    if (evaluated.interrupted) {
        outputs->interrupted = 1;  // the trainer stops and saves the current weights
        return HW_OK;
    }
    outputs->last_eval = evaluated;
    if (config->world.rank != 0) {  // a share of an evaluation split over the ranks: rank 0 reports
        outputs->last_samples = samples;
        outputs->last_loss_sum = loss_sum;
        return HW_OK;
    }
    if (hw_loss_diverged(outputs->last_eval.loss) || (new_samples > 0 && hw_loss_diverged(train_loss))) {
        int test_bad = hw_loss_diverged(outputs->last_eval.loss);
        double bad = test_bad ? outputs->last_eval.loss : train_loss;
        char bad_text[48], what[80];
        hw_loss_describe(bad_text, sizeof bad_text, bad);
        snprintf(what, sizeof what, "the %s loss is %s", test_bad ? "test" : "training", bad_text);
        return hw_run_outputs_diverged(outputs, "the evaluation", what, epoch, epochs_done, samples,
                                       test_bad ? NAN : train_loss);
    }
    // The row's time is when the weights were copied, not when their evaluation ended.
    double wall = outputs->snapshot_time > outputs->started ? outputs->snapshot_time - outputs->started : 0;
    outputs->last_samples = samples;
    outputs->last_loss_sum = loss_sum;
    if (new_samples > 0) hw_run_outputs_loss(outputs, train_loss);  // for a later divergence's message
    outputs->metrics.skipped_eval_points = outputs->skipped_points;
    row_lr(outputs, samples);
    if (hw_metrics_row(&outputs->metrics, wall, epochs_done, outputs->samples_base + samples, train_loss,
                       outputs->last_eval.loss, outputs->last_eval.accuracy) != HW_OK) {
        return HW_ERR;
    }
    if (epoch_end) {
        // Every number here is finite (checked above); no training since the last row shows "-".
        char train_text[32] = "-";
        if (new_samples > 0) snprintf(train_text, sizeof train_text, "%.4f", train_loss);
        hw_progress_message(&outputs->progress,
                            "epoch %d/%d  train loss %s  test loss %.4f  accuracy %.2f%%  (%.1f s)\n", epochs_done,
                            config->epochs, train_text, outputs->last_eval.loss, outputs->last_eval.accuracy, wall);
        if (hw_run_outputs_save(outputs, outputs->snapshot, epochs_done, samples) != HW_OK) return HW_ERR;
    }
    return HW_OK;
}

void hw_run_outputs_finish(hw_run_outputs *outputs, int64_t samples, hw_train_result *result) {
    double now = hw_now();
    result->wall_seconds = now - outputs->started;
    result->train_seconds = (outputs->trained > 0 ? outputs->trained : now) - outputs->started;
    result->samples_seen = samples;
    result->samples_per_second = result->train_seconds > 0 ? (double)samples / result->train_seconds : 0;
    result->test_loss = outputs->last_eval.loss;
    result->test_accuracy = outputs->last_eval.accuracy;
    hw_progress_message(&outputs->progress,
                        "done: %lld samples, training %.3f s (%.0f samples/s), wall %.2f s; "
                        "test loss %.4f, accuracy %.2f%%\n",
                        (long long)samples, result->train_seconds, result->samples_per_second, result->wall_seconds,
                        result->test_loss, result->test_accuracy);
    if (outputs->skipped_points > 0) {
        hw_progress_message(&outputs->progress,
                            "note: %lld evaluation point(s)%s were not evaluated: training passed them "
                            "before they could be (an evaluation under way, or, across ranks, the other ranks' "
                            "samples counted only when a round brings them; each metrics row records the "
                            "samples it was taken at)\n",
                            (long long)outputs->skipped_points, hw_option_hint(HW_OPTION_EVAL_EVERY));
    }
    if (outputs->metrics.failed) hw_progress_message(&outputs->progress, "warning: %s\n", outputs->metrics.failure);
}

void hw_run_outputs_close(hw_run_outputs *outputs) {
    hw_metrics_close(&outputs->metrics);
    hw_workspace_free(&outputs->eval_ws);
    free(outputs->snapshot);
    outputs->snapshot = NULL;
}
