// dataparallel_loop: the epoch loop of a DataParallel run, shared by the CPU and GPU trainers.
#include "dataparallel_loop.h"

#include "hw/comm.h"
#include "hw/err.h"
#include "hw/signals.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

// Ctrl-C (a stop signal, src/proc/signals.c): the step under way finishes, then the loop saves and leaves.

void hw_dp_chunk(int batch, int replicas, int k, int *offset, int *count) {
    int base = batch / replicas, extra = batch % replicas;
    *count = base + (k < extra ? 1 : 0);
    *offset = k * base + (k < extra ? k : extra);
}

void hw_dp_ranks_tail(float tail[HW_DP_TAIL], float loss_sum, int local_diverged) {
    tail[0] = loss_sum;
    tail[1] = local_diverged >= 0 ? 1.0f : 0.0f;
    tail[2] = (float)hw_stop_signal();  // the signals' numbers, summed: any nonzero sum is a stop
}

int hw_dp_ranks_settle(const float tail[HW_DP_TAIL], int local_diverged, const hw_world *world, int replicas,
                       int *stop_agreed, int *diverged, float *diverged_loss) {
    if (tail[2] > 0) *stop_agreed = hw_stop_signal() ? hw_stop_signal() : SIGTERM;
    *diverged = -1;
    if (tail[1] > 0) {
        int first = local_diverged >= 0 ? world->rank * replicas + local_diverged : INT_MAX;
        if (hw_comm_min_int(&first) != HW_OK) return HW_ERR;
        *diverged = first;
        // The loss of the replica the message names, from its rank (a sum over the ranks would add
        // the other diverged ranks' losses to it).
        if (hw_comm_bcast(diverged_loss, sizeof *diverged_loss, first / replicas) != HW_OK) return HW_ERR;
    }
    return HW_OK;
}

int hw_dp_loop_open(hw_dp_loop *loop, const hw_train_inputs *in, int first_epoch, hw_train_outputs *log,
                    hw_snapshot_fn snapshot, void *ctx) {
    *loop = (hw_dp_loop){.in = in, .first_epoch = first_epoch, .epoch = first_epoch - 1, .epochs_done = first_epoch};
    hw_stop_signals_catch();
    hw_run_loop_start(&loop->run, log, snapshot, ctx);  // the replicas (GPUs, ranks) are set up: training starts
    log->started = hw_now();
    loop->order = malloc(sizeof(int64_t) * (size_t)in->train.n);
    if (!loop->order) return hw_fail("out of memory for the sample order");
    return HW_OK;
}

int hw_dp_loop_next_epoch(hw_dp_loop *loop, int *status, int stop) {
    const hw_train_config *config = loop->run.config;
    if (*status != HW_OK || loop->stopped || stop || loop->epoch + 1 >= config->epochs) return 0;
    loop->epoch++;
    const int64_t n = loop->in->train.n;
    *status = hw_sampler_shard(loop->order, n, 1, 0, loop->epoch, config->seed);
    loop->epoch_end_samples = (int64_t)(loop->epoch - loop->first_epoch + 1) * n;
    return *status == HW_OK;
}

int hw_dp_loop_step(hw_dp_loop *loop, int batch, float loss, int diverged) {
    const hw_train_config *config = loop->run.config;
    hw_train_outputs *log = loop->run.log;
    if (diverged >= 0 || hw_loss_diverged(loss)) {
        char who[48];
        int replica = diverged >= 0 ? diverged : 0;
        if (config->world.size > 1) {
            // Across ranks the replica is counted over the world: rank r holds r*K .. r*K+K-1.
            snprintf(who, sizeof who, "rank %d replica %d", replica / config->replicas, replica % config->replicas);
        } else {
            snprintf(who, sizeof who, "replica %d", replica);
        }
        return hw_run_loop_diverged(&loop->run, who, loss, loop->epoch + 1, loop->epochs_done, loop->samples);
    }
    hw_train_outputs_loss(log, loss);
    loop->samples += batch;
    loop->loss_sum += (double)loss * batch;
    hw_progress_update(&log->progress, loop->epoch + 1, config->epochs, loop->samples, loss);
    if (!hw_run_loop_point_due(&loop->run, loop->samples, loop->epoch_end_samples)) return HW_OK;
    // A batch larger than --eval-every passes several points: one row for them all.
    int status = hw_run_loop_point(&loop->run, loop->samples, 0);
    if (status == HW_OK) status = hw_train_outputs_evaluate(log, loop->epoch, loop->samples, loop->loss_sum, 0);
    return status;
}

int hw_dp_loop_end_epoch(hw_dp_loop *loop, int status, int stop) {
    if (status != HW_OK) return status;
    // A signal after the epoch's last step: the epoch is done all the same.
    if (loop->samples == loop->epoch_end_samples) loop->epochs_done = loop->epoch + 1;
    if (stop) {
        loop->stopped = 1;
        return HW_OK;
    }
    hw_train_outputs *log = loop->run.log;
    if (loop->epochs_done == loop->run.config->epochs) log->trained = hw_now();
    status = hw_run_loop_point(&loop->run, loop->samples, 1);
    if (status == HW_OK) status = hw_train_outputs_evaluate(log, loop->epochs_done, loop->samples, loop->loss_sum, 1);
    return status;
}

int hw_dp_loop_close(hw_dp_loop *loop, int status, int stop, hw_train_result *result) {
    free(loop->order);
    loop->order = NULL;
    hw_stop_signals_release();
    hw_train_outputs *log = loop->run.log;
    int stopped_by = stop;
    // A stop signal that cut an evaluation short stops this process even before the ranks have
    // agreed on it (rank 0 alone evaluates: the others stop at the next step's sum, or have ended).
    if (!stopped_by && log->interrupted) stopped_by = hw_stop_signal() ? hw_stop_signal() : SIGTERM;
    if (status == HW_OK && stopped_by) {
        result->interrupted_by = stopped_by;
        status = hw_run_loop_save_stopped(&loop->run, stopped_by, loop->epochs_done, loop->samples);
    } else if (status == HW_OK) {
        hw_train_outputs_finish(log, loop->samples, result);
    }
    return status;
}
