// dp_loop: the epoch loop of a DataParallel run on any device (private to src/train/). The CPU
// trainer (dataparallel.c) and the GPU trainer (dataparallel_gpu.c) differ in how a step runs;
// epochs, evaluations, metrics, checkpoints and Ctrl-C are this one loop.
#ifndef HW_DP_LOOP_H
#define HW_DP_LOOP_H

#include "hw/train.h"

#include <stdint.h>

// How one kind of replicas trains. `team` is the trainer's own state.
typedef struct {
    // Prepares an epoch over `order` (n sample indices, the whole training set shuffled).
    int (*begin_epoch)(void *team, const int64_t *order, int64_t n);
    // One synchronous step over the epoch's next batch, SGD step included. Returns the batch
    // size, 0 when the epoch is used up, -1 on error; *loss gets the batch's mean loss. When a
    // replica's loss is not finite, *diverged gets that replica (the first), else -1; the loop
    // then ends the run (hw_train_outputs_diverged).
    int (*step)(void *team, float *loss, int *diverged);
    // Ends the epoch; called after an interruption or an error too.
    void (*end_epoch)(void *team);
    // Copies the current weights into log->snapshot.
    int (*snapshot)(void *team, hw_train_outputs *log);
    // The stop signal the loop obeys (SIGINT, SIGTERM, SIGHUP, or 0), when the trainer decides it
    // itself; NULL: hw_stop_signal(). Across ranks every rank must leave after the same step, so
    // the stop is agreed in the step's sum rather than read from each rank's own signal.
    int (*stop)(void *team);
} dp_ops;

// Across ranks, what every rank must agree on after a step travels with the step's sum over the
// ranks as 3 floats, the tail: this rank's loss sum, whether one of its replicas diverged, and
// its stop signal (Ctrl-C on mpirun reaches every rank as SIGTERM, not all at the same step).
// hw_dp_ranks_tail writes this rank's; once the tails are summed, hw_dp_ranks_settle reads the world's:
// *stop_agreed gets a signal when any rank saw one, so that every rank leaves after this same
// step and none waits alone in the next sum; *diverged gets the world's first diverged replica
// (rank r's replica k being r*replicas+k; a collective, MPI's MIN, when any diverged) or -1.
// `local_diverged`: this rank's first diverged replica, or -1.
void hw_dp_ranks_tail(float tail[3], float loss_sum, int local_diverged);
int hw_dp_ranks_settle(const float tail[3], int local_diverged, const hw_world *world, int replicas, int *stop_agreed,
                    int *diverged);

// Trains epochs first_epoch .. config->epochs - 1: the sampler with one replica (DataParallel
// splits each batch, not the dataset), --eval-every points, an evaluation and a checkpoint at
// every epoch end; a replica's non-finite loss ends the run (exit 1, the replica named, nothing
// saved); on SIGINT/SIGTERM it finishes the step, saves the current weights (--save) and
// sets result->interrupted_by. Prints the summary of a finished run.
int hw_dp_run(const hw_train_config *config, const hw_train_inputs *in, int first_epoch, hw_train_outputs *log,
              const dp_ops *ops, void *team, hw_train_result *result);

#endif
