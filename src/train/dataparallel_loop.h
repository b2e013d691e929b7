// dataparallel_loop: the epoch loop of a DataParallel run on any device (private to src/train/ and
// the GPU trainers). The CPU trainer (dataparallel.c) and the GPU trainer (dataparallel_gpu.c)
// differ in how a step runs, which each calls itself; epochs, evaluations, metrics, checkpoints and
// Ctrl-C are this one loop, on the core it shares with Hogwild (run_loop.h).
#ifndef HW_DP_LOOP_H
#define HW_DP_LOOP_H

#include "hw/train.h"
#include "hw/dataparallel.h"
#include "hw/run_log.h"
#include "run_loop.h"

#include <stdint.h>

// Across ranks, what every rank must agree on after a step travels with the step's sum over the
// ranks as HW_DP_TAIL floats, the tail: this rank's loss sum, whether one of its replicas
// diverged, and its stop signal (Ctrl-C on mpirun reaches every rank as SIGTERM, not all at the
// same step).
// hw_dp_ranks_tail writes this rank's; once the tails are summed, hw_dp_ranks_settle reads the world's:
// *stop_agreed gets a signal when any rank saw one, so that every rank leaves after this same
// step and none waits alone in the next sum; *diverged gets the world's first diverged replica
// (rank r's replica k being r*replicas+k; a collective, MPI's MIN, when any diverged) or -1, and
// *diverged_loss (this rank's first diverged replica's loss on entry) the loss to report then: that
// replica's, broadcast from its rank (a second collective). Not the mean over the batch: one
// replica's 1.2e4 among finite ones averaged below the bound, and the run was reported diverged at
// a loss of 9522; nor the diverged losses summed over the ranks, which the message would call the
// named replica's own.
// `local_diverged`: this rank's first diverged replica, or -1.
enum { HW_DP_TAIL = 3 };
void hw_dp_ranks_tail(float tail[HW_DP_TAIL], float loss_sum, int local_diverged);
int hw_dp_ranks_settle(const float tail[HW_DP_TAIL], int local_diverged, const hw_world *world, int replicas,
                       int *stop_agreed, int *diverged, float *diverged_loss);

// The epochs of a DataParallel run, first_epoch .. config->epochs - 1: the sampler with one
// replica (DataParallel splits each batch, not the dataset), --eval-every points, an evaluation and
// a checkpoint at every epoch end; a replica's non-finite loss ends the run (exit 1, the replica
// named, nothing saved); on SIGINT/SIGTERM the step under way finishes, the current weights are
// saved (--save) and result->interrupted_by is set. The summary of a finished run is printed.
// The trainer drives it and takes each step itself, with a direct call (`stop`: the stop signal
// it obeys, hw_stop_signal() or, across ranks, the one agreed in the last step's sum):
//
//     hw_dp_loop loop;
//     int status = hw_dp_loop_open(&loop, in, first_epoch, log, snapshot, team);
//     while (hw_dp_loop_next_epoch(&loop, &status, stop)) {
//         status = begin the epoch over loop.order;
//         ... while status is HW_OK, no stop, and a step trains a batch:
//                 status = hw_dp_loop_step(&loop, batch, loss, diverged);
//         end the epoch;
//         status = hw_dp_loop_end_epoch(&loop, status, stop);
//     }
//     status = hw_dp_loop_close(&loop, status, stop, result);
typedef struct {
    hw_run_loop run;  // the core shared with Hogwild (run_loop.h)
    const hw_train_inputs *in;
    int first_epoch;
    int epoch;                  // the epoch under way (0-based)
    int64_t *order;             // its samples in order, in->train.n of them
    int64_t epoch_end_samples;  // this run's samples at its end
    int64_t samples;            // this run's samples so far
    double loss_sum;
    int epochs_done;  // counted from 0, as a checkpoint counts them
    int stopped;      // a stop signal ended an epoch
} hw_dp_loop;

// Training starts (hw_run_loop_start, with the stop signals caught). `snapshot(ctx, log)` copies
// the trainer's current weights. HW_ERR when out of memory: then hw_dp_loop_close all the same.
int hw_dp_loop_open(hw_dp_loop *loop, const hw_train_inputs *in, int first_epoch, hw_train_outputs *log,
                    hw_snapshot_fn snapshot, void *ctx);
// 1 when the next epoch is to be trained (loop->epoch, over loop->order); 0 when the run is over:
// every epoch trained, a stop, or an error in *status.
int hw_dp_loop_next_epoch(hw_dp_loop *loop, int *status, int stop);
// After a step that trained `batch` samples with the mean loss `loss`; `diverged`: the first
// replica whose loss was not finite, or -1. HW_ERR ends the run (a divergence, an evaluation that
// failed); an --eval-every point due is evaluated here.
int hw_dp_loop_step(hw_dp_loop *loop, int batch, float loss, int diverged);
// After the epoch's last step (or a stop, or an error in `status`): the epoch-end evaluation and
// checkpoint.
int hw_dp_loop_end_epoch(hw_dp_loop *loop, int status, int stop);
// The end of the run: the save on a stop signal, or the summary of a finished run.
int hw_dp_loop_close(hw_dp_loop *loop, int status, int stop, hw_train_result *result);

#endif
