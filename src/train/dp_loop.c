// dp_loop: the epoch loop of a DataParallel run, shared by the CPU and GPU trainers.
#include "dp_loop.h"

#include "hw/comm.h"
#include "hw/err.h"
#include "hw/signals.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

// Ctrl-C (a stop signal, src/signals.c): the step under way finishes, then the loop saves and leaves.

void hw_dp_chunk(int batch, int replicas, int k, int *offset, int *count) {
    int base = batch / replicas, extra = batch % replicas;
    *count = base + (k < extra ? 1 : 0);
    *offset = k * base + (k < extra ? k : extra);
}

void dp_ranks_tail(float tail[3], float loss_sum, int local_diverged) {
    tail[0] = loss_sum;
    tail[1] = local_diverged >= 0 ? 1.0f : 0.0f;
    tail[2] = (float)hw_stop_signal();  // the signals' numbers, summed: any nonzero sum is a stop
}

int dp_ranks_settle(const float tail[3], int local_diverged, const hw_world *world, int replicas, int *stop_agreed,
                    int *diverged) {
    if (tail[2] > 0) *stop_agreed = hw_stop_signal() ? hw_stop_signal() : SIGTERM;
    *diverged = -1;
    if (tail[1] > 0) {
        int first = local_diverged >= 0 ? world->rank * replicas + local_diverged : INT_MAX;
        if (hw_comm_min_int(&first) != HW_OK) return HW_ERR;
        *diverged = first;
    }
    return HW_OK;
}

static int stop_signal(const dp_ops *ops, void *team) { return ops->stop ? ops->stop(team) : hw_stop_signal(); }

// The epochs; returns the status, with the samples trained and the epochs completed.
static int train_epochs(const hw_train_config *config, const hw_train_inputs *in, int first_epoch, hw_train_outputs *log,
                        const dp_ops *ops, void *team, int64_t *samples_out, int *epochs_done_out) {
    *samples_out = 0;
    *epochs_done_out = first_epoch;
    int64_t *order = malloc(sizeof(int64_t) * (size_t)in->train.n);
    if (!order) return hw_fail("out of memory for the sample order");
    int64_t samples = 0, next_eval = config->eval_every;
    double loss_sum = 0;
    int epochs_done = first_epoch;
    int status = HW_OK;
    for (int epoch = first_epoch; status == HW_OK && epoch < config->epochs && !stop_signal(ops, team); epoch++) {
        status = hw_sampler_shard(order, in->train.n, 1, 0, epoch, config->seed);
        if (status == HW_OK) status = ops->begin_epoch(team, order, in->train.n);
        if (status != HW_OK) break;
        const int64_t epoch_end_samples = (int64_t)(epoch - first_epoch + 1) * in->train.n;
        float loss = 0;
        int batch = 0, diverged = -1;
        while (!stop_signal(ops, team) && (batch = ops->step(team, &loss, &diverged)) > 0) {
            if (diverged >= 0 || hw_loss_diverged(loss)) {
                char who[48], bad[48], what[80];
                int replica = diverged >= 0 ? diverged : 0;
                if (config->world.size > 1) {
                    // Across ranks the replica is counted over the world: rank r holds r*K .. r*K+K-1.
                    snprintf(who, sizeof who, "rank %d replica %d", replica / config->replicas,
                             replica % config->replicas);
                } else {
                    snprintf(who, sizeof who, "replica %d", replica);
                }
                hw_loss_describe(bad, sizeof bad, loss);
                snprintf(what, sizeof what, "its training loss is %s", bad);
                status = hw_train_outputs_diverged(log, who, what, epoch + 1, epochs_done, samples, loss);
                break;
            }
            hw_train_outputs_loss(log, loss);
            samples += batch;
            loss_sum += (double)loss * batch;
            hw_progress_update(&log->progress, epoch + 1, config->epochs, samples, loss);
            // A mid-epoch point of the curve; one that falls on the epoch's end is the epoch-end
            // row, written once below.
            if (next_eval > 0 && samples >= next_eval && samples < epoch_end_samples) {
                // A batch larger than --eval-every passes several points: one row for them all.
                hw_train_outputs_pass_points(log, &next_eval, samples, 0);
                status = ops->snapshot(team, log);
                if (status == HW_OK) status = hw_train_outputs_evaluate(log, epoch, samples, loss_sum, 0);
                if (status != HW_OK) break;
            }
        }
        if (batch < 0) status = HW_ERR;
        ops->end_epoch(team);
        if (status != HW_OK) break;
        // A signal after the epoch's last step: the epoch is done all the same.
        if (samples == epoch_end_samples) epochs_done = epoch + 1;
        if (stop_signal(ops, team)) break;
        if (epochs_done == config->epochs) log->trained = hw_now();
        hw_train_outputs_pass_points(log, &next_eval, samples, 1);
        status = ops->snapshot(team, log);
        if (status == HW_OK) status = hw_train_outputs_evaluate(log, epochs_done, samples, loss_sum, 1);
    }
    free(order);
    *samples_out = samples;
    *epochs_done_out = epochs_done;
    return status;
}

int dp_run(const hw_train_config *config, const hw_train_inputs *in, int first_epoch, hw_train_outputs *log,
              const dp_ops *ops, void *team, hw_train_result *result) {
    hw_stop_signals_catch();
    hw_train_outputs_commit(log);  // the replicas (and the GPUs, the ranks) are set up: training starts

    log->started = hw_now();
    int64_t samples;
    int epochs_done;
    int status = train_epochs(config, in, first_epoch, log, ops, team, &samples, &epochs_done);
    hw_stop_signals_release();

    int stopped_by = stop_signal(ops, team);
    // A stop signal that cut an evaluation short stops this process even before the ranks have
    // agreed on it (rank 0 alone evaluates: the others stop at the next step's sum, or have ended).
    if (!stopped_by && log->interrupted) stopped_by = hw_stop_signal() ? hw_stop_signal() : SIGTERM;
    if (status == HW_OK && stopped_by) {
        result->interrupted_by = stopped_by;
        hw_progress_message(&log->progress, "interrupted by %s after %lld samples\n",
                            hw_stop_signal_name(stopped_by), (long long)samples);
        if (config->save_path) {
            status = ops->snapshot(team, log);
            if (status == HW_OK) status = hw_train_outputs_save(log, log->snapshot, epochs_done, samples);
            if (status == HW_OK) {
                hw_progress_message(&log->progress, "saved the current weights to %s\n", config->save_path);
            }
        }
    } else if (status == HW_OK) {
        hw_train_outputs_finish(log, samples, result);
    }
    return status;
}
