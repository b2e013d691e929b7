// dataparallel_loop: the epoch driver of a DataParallel run on any device (private to src/train/
// and the GPU trainers). The CPU trainer (dataparallel.c) and the GPU trainer (dataparallel_gpu.c)
// differ in how a step runs, which each gives the driver in a table (hw_dp_trainer); epochs,
// evaluations, metrics, checkpoints and Ctrl-C are this one loop, on the bookkeeping it shares
// with Hogwild (hw/run_outputs.h). Across ranks, the outcome of a step that the ranks agree on.
#ifndef HW_DP_LOOP_H
#define HW_DP_LOOP_H

#include "hw/train.h"
#include "hw/dataparallel.h"
#include "hw/run_outputs.h"

#include <stdint.h>

// ---- across ranks: a step's outcome, agreed ----

// What every rank must agree on after a step travels in a sum over the ranks, as
// HW_DP_OUTCOME_FLOATS floats (on the CPU after the gradient, in the same sum): this rank's loss sum, whether one of its
// replicas diverged, and its stop signal (Ctrl-C on mpirun reaches every rank as SIGTERM, not all
// at the same step). Summed, they say what the world saw.
enum { HW_DP_OUTCOME_LOSS_SUM, HW_DP_OUTCOME_DIVERGED, HW_DP_OUTCOME_STOP, HW_DP_OUTCOME_FLOATS };
// Writes this rank's outcome: its loss sum and `local_diverged`, its first diverged replica or -1.
void hw_dp_outcome_write(float outcome[HW_DP_OUTCOME_FLOATS], float loss_sum, int local_diverged);
// Reads the world's outcome from the summed floats. *stop_agreed gets a signal when any rank saw
// one, so that every rank leaves after this same step and none waits alone in the next sum.
// *diverged gets the world's first diverged replica (rank r's replica k is r * replicas + k), or
// -1; then *diverged_loss, this rank's first diverged replica's loss on entry, becomes that
// replica's, sent from its rank: the message names one replica and its own loss (the batch's mean
// can sit below the bound that one replica's loss is above, and a sum over the ranks would add the
// other diverged ranks' losses). The collectives (MPI's MIN, a broadcast) run only when a replica
// diverged, on every rank alike.
int hw_dp_outcome_agree(const float outcome[HW_DP_OUTCOME_FLOATS], int local_diverged, const hw_world *world,
                        int replicas, int *stop_agreed, int *diverged, float *diverged_loss);

// ---- the epoch driver ----

// A DataParallel trainer's steps, as the epoch driver calls them: one table, filled once by each
// trainer (dataparallel.c: replica threads on the CPU; dataparallel_gpu.c: replicas on GPUs).
typedef struct {
    void *ctx;  // the trainer's state: the first argument of every function below
    // Readies the epoch's batches, the n samples of `order` in that order. HW_ERR ends the run.
    int (*begin_epoch)(void *ctx, const int64_t *order, int64_t n);
    // One synchronous step over the epoch's next batch, the SGD step included, at the rate `lr`
    // (the schedule's at the run's samples before the step): its number of samples, 0 when the
    // epoch is used up, -1 on error. *loss gets the batch's mean loss; when a
    // replica's loss diverged (hw_loss_diverged), *diverged gets that replica (the first) and
    // *loss its loss, and no step is taken.
    int (*step)(void *ctx, float lr, float *loss, int *diverged);
    // After the epoch's last step, a stop or an error: the epoch's batches let go.
    void (*end_epoch)(void *ctx);
    // The stop signal the run obeys, 0 for none: hw_stop_signal() or, across ranks, the one agreed
    // at the last step (hw_dp_outcome_agree), so that every rank leaves after the same step.
    int (*stop)(void *ctx);
    // Copies the trainer's current weights into outputs->snapshot (an hw_snapshot_fn).
    int (*snapshot)(void *ctx, hw_run_outputs *outputs);
    // What the index a step reports as diverged counts, for the message ("virtual worker"); NULL:
    // "replica".
    const char *unit;
} hw_dp_trainer;

// The epochs of a DataParallel run, first_epoch .. config->epochs - 1, each trainer's steps taken
// through `trainer`: the sampler with one replica (DataParallel splits each batch, not the
// dataset), --eval-every points, an evaluation and a checkpoint at every epoch end; a replica's
// diverged loss ends the run (exit 1, the replica named, nothing saved); on SIGINT/SIGTERM the
// step under way finishes, the current weights are saved (--save) and result->interrupted_by is
// set. The summary of a finished run is printed. The stop signals are caught meanwhile.
int hw_dp_loop_run(const hw_dp_trainer *trainer, const hw_train_inputs *in, int first_epoch, hw_run_outputs *outputs,
                   hw_train_result *result);

#endif
