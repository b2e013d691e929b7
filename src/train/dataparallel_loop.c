// dataparallel_loop: the epoch driver of a DataParallel run, shared by the CPU and GPU trainers
// (src/train/dataparallel_loop.h).
#include "dataparallel_loop.h"

#include "hw/comm.h"
#include "hw/err.h"
#include "hw/signals.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

void hw_dp_chunk(int batch, int replicas, int k, int *offset, int *count) {
    int base = batch / replicas, extra = batch % replicas;
    *count = base + (k < extra ? 1 : 0);
    *offset = k * base + (k < extra ? k : extra);
}

void hw_dp_outcome_write(float outcome[HW_DP_OUTCOME_FLOATS], float loss_sum, int local_diverged) {
    outcome[HW_DP_OUTCOME_LOSS_SUM] = loss_sum;
    outcome[HW_DP_OUTCOME_DIVERGED] = local_diverged >= 0 ? 1.0f : 0.0f;
    // The signals' numbers, summed: any nonzero sum is a stop.
    outcome[HW_DP_OUTCOME_STOP] = (float)hw_stop_signal();
}

int hw_dp_outcome_agree(const float outcome[HW_DP_OUTCOME_FLOATS], int local_diverged, const hw_world *world,
                        int replicas, int *stop_agreed, int *diverged, float *diverged_loss) {
    if (outcome[HW_DP_OUTCOME_STOP] > 0) *stop_agreed = hw_stop_signal() ? hw_stop_signal() : SIGTERM;
    *diverged = -1;
    if (outcome[HW_DP_OUTCOME_DIVERGED] > 0) {
        int first = local_diverged >= 0 ? world->rank * replicas + local_diverged : INT_MAX;
        if (hw_comm_min_int(&first) != HW_OK) return HW_ERR;
        *diverged = first;
        // The loss of the replica the message names, from its rank (a sum over the ranks would add
        // the other diverged ranks' losses to it).
        if (hw_comm_bcast(diverged_loss, sizeof *diverged_loss, first / replicas) != HW_OK) return HW_ERR;
    }
    return HW_OK;
}

// One run of the driver: where it is in the epochs.
typedef struct {
    hw_run_outputs *outputs;
    const hw_train_inputs *in;
    int first_epoch;
    int epoch;                  // the epoch under way (0-based)
    int64_t *order;             // its samples in order, in->train.n of them
    int64_t epoch_end_samples;  // this run's samples at its end
    int64_t samples;            // this run's samples so far
    double loss_sum;
    int epochs_done;   // counted from 0, as a checkpoint counts them
    int stopped;       // a stop signal ended an epoch
    const char *unit;  // what a diverged index names (hw_dp_trainer.unit)
} dp_loop;

// Training starts (hw_run_outputs_start, with the stop signals caught). HW_ERR when out of
// memory: then loop_close all the same.
static int loop_open(dp_loop *loop, const hw_train_inputs *in, int first_epoch, hw_run_outputs *outputs,
                     hw_snapshot_fn snapshot, void *ctx) {
    *loop = (dp_loop){
        .outputs = outputs, .in = in, .first_epoch = first_epoch, .epoch = first_epoch - 1, .epochs_done = first_epoch};
    hw_stop_signals_catch();
    hw_run_outputs_start(outputs, snapshot, ctx);  // the replicas (GPUs, ranks) are set up: training starts
    outputs->started = hw_now();
    loop->order = malloc(sizeof(int64_t) * (size_t)in->train.n);
    if (!loop->order) return hw_fail("out of memory for the sample order");
    return HW_OK;
}

// 1 when the next epoch is to be trained (loop->epoch, over loop->order); 0 when the run is over:
// every epoch trained, a stop, or an error in *status.
static int loop_next_epoch(dp_loop *loop, int *status, int stop) {
    const hw_train_config *config = loop->outputs->config;
    if (*status != HW_OK || loop->stopped || stop || loop->epoch + 1 >= config->epochs) return 0;
    loop->epoch++;
    const int64_t n = loop->in->train.n;
    *status = hw_sampler_shard(loop->order, n, 1, 0, loop->epoch, config->seed);
    loop->epoch_end_samples = (int64_t)(loop->epoch - loop->first_epoch + 1) * n;
    return *status == HW_OK;
}

// The rate of the next step: the schedule at the run's samples so far, a resumed run's included.
static float loop_lr(const dp_loop *loop) {
    return hw_train_lr(loop->outputs->config, loop->outputs->samples_base + loop->samples, loop->in->train.n);
}

// After a step that trained `batch` samples with the mean loss `loss`; `diverged`: the first
// replica whose loss diverged, or -1. HW_ERR ends the run (a divergence, an evaluation that
// failed); an --eval-every point due is evaluated here.
static int loop_step(dp_loop *loop, int batch, float loss, int diverged) {
    const hw_train_config *config = loop->outputs->config;
    hw_run_outputs *outputs = loop->outputs;
    if (diverged >= 0 || hw_loss_diverged(loss)) {
        char who[48];
        int replica = diverged >= 0 ? diverged : 0;
        if (config->world.size > 1) {
            // Across ranks the replica is counted over the world: rank r holds r*K .. r*K+K-1.
            snprintf(who, sizeof who, "rank %d replica %d", replica / config->replicas, replica % config->replicas);
        } else {
            snprintf(who, sizeof who, "%s %d", loop->unit ? loop->unit : "replica", replica);
        }
        return hw_run_outputs_loss_diverged(loop->outputs, who, loss, loop->epoch + 1, loop->epochs_done,
                                            loop->samples);
    }
    hw_run_outputs_loss(outputs, loss);
    loop->samples += batch;
    loop->loss_sum += (double)loss * batch;
    hw_progress_update(&outputs->progress, loop->epoch + 1, config->epochs, loop->samples, loss);
    if (!hw_run_outputs_point_due(loop->outputs, loop->samples, loop->epoch_end_samples)) return HW_OK;
    // A batch larger than --eval-every passes several points: one row for them all.
    int status = hw_run_outputs_point(loop->outputs, loop->samples, 0);
    if (status == HW_OK) status = hw_run_outputs_evaluate(outputs, loop->epoch, loop->samples, loop->loss_sum, 0);
    return status;
}

// After the epoch's last step (or a stop, or an error in `status`): the epoch-end evaluation and
// checkpoint.
static int loop_end_epoch(dp_loop *loop, int status, int stop) {
    if (status != HW_OK) return status;
    // A signal after the epoch's last step: the epoch is done all the same.
    if (loop->samples == loop->epoch_end_samples) loop->epochs_done = loop->epoch + 1;
    if (stop) {
        loop->stopped = 1;
        return HW_OK;
    }
    hw_run_outputs *outputs = loop->outputs;
    if (loop->epochs_done == loop->outputs->config->epochs) outputs->trained = hw_now();
    status = hw_run_outputs_point(loop->outputs, loop->samples, 1);
    if (status == HW_OK) status = hw_run_outputs_evaluate(outputs, loop->epochs_done, loop->samples, loop->loss_sum, 1);
    return status;
}

// The end of the run: the save on a stop signal, or the summary of a finished run.
static int loop_close(dp_loop *loop, int status, int stop, hw_train_result *result) {
    free(loop->order);
    loop->order = NULL;
    hw_stop_signals_release();
    hw_run_outputs *outputs = loop->outputs;
    int stopped_by = stop;
    // A stop signal that cut an evaluation short stops this process even before the ranks have
    // agreed on it (rank 0 alone evaluates: the others stop at the next step's sum, or have ended).
    if (!stopped_by && outputs->interrupted) stopped_by = hw_stop_signal() ? hw_stop_signal() : SIGTERM;
    if (status == HW_OK && stopped_by) {
        result->interrupted_by = stopped_by;
        status = hw_run_outputs_save_stopped(loop->outputs, stopped_by, loop->epochs_done, loop->samples);
    } else if (status == HW_OK) {
        hw_run_outputs_finish(outputs, loop->samples, result);
    }
    return status;
}

int hw_dp_loop_run(const hw_dp_trainer *trainer, const hw_train_inputs *in, int first_epoch, hw_run_outputs *outputs,
                   hw_train_result *result) {
    void *ctx = trainer->ctx;
    if (outputs->config->world.size == 1) {
        // A stop in the set-up or the first evaluation: no epoch is begun (across ranks the first
        // step's sum agrees on the stop).
        int status = hw_run_outputs_stop_before_training(outputs, in->model.weights, first_epoch, result);
        if (status != HW_OK || result->interrupted_by) return status;
    }
    dp_loop loop;
    int status = loop_open(&loop, in, first_epoch, outputs, trainer->snapshot, ctx);
    loop.unit = trainer->unit;
    while (loop_next_epoch(&loop, &status, trainer->stop(ctx))) {
        status = trainer->begin_epoch(ctx, loop.order, in->train.n);
        if (status != HW_OK) break;
        float loss = 0;
        int batch = 0, diverged = -1;
        while (status == HW_OK && !trainer->stop(ctx) &&
               (batch = trainer->step(ctx, loop_lr(&loop), &loss, &diverged)) > 0) {
            status = loop_step(&loop, batch, loss, diverged);
        }
        trainer->end_epoch(ctx);
        status = loop_end_epoch(&loop, batch < 0 ? HW_ERR : status, trainer->stop(ctx));
    }
    return loop_close(&loop, status, trainer->stop(ctx), result);
}
