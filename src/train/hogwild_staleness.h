// hogwild_staleness: --max-staleness S, the bound of stale synchronous parallel (Ho et al. 2013)
// on CPU Hogwild's workers (private to src/train/; src/train/hogwild_staleness.c). No worker starts
// a step more than S steps ahead of the slowest worker still training the epoch; S = 0 is lockstep.
//
// Each worker counts the steps it has finished in the epoch in its slot of the control block
// (worker_slot.epoch_steps). Before a step it waits while its count exceeds the least count of the
// other workers plus S, asleep on a futex (hogwild_control.staleness_wake) that every step of every
// worker bumps: hundreds of held workers spin on nothing. A worker with no step left in the epoch
// (its shard done, or it leaves: a failure, a divergence, a stop) marks its count
// HW_STALENESS_DONE and no longer holds anyone. The counts start again at 0 when the parent
// releases the next epoch (hw_hogwild_release), while every worker waits at the barrier: the
// shards of an epoch may differ by a batch, and a count across epochs would drift by that.
//
// What it bounds: --measure's staleness of a step (the others' updates between the read of the
// weights behind a gradient and the write of its step) is at most (W - 1)(2S + 2) with W workers.
// Worker i's gradient for its step c is on the weights it read while writing step c - 1. Worker j
// started step m only when m <= i's count + S, and i's count is at most c until step c lands: m <=
// c + S. And i started step c - 1 only once j had finished step c - 2 - S, which had then landed
// before the read. So j's steps between the two are c - 1 - S .. c + S: 2S + 2 of them.
//
// A worker that stops (SIGSTOP) or hangs holds the others: a worker held longer than
// config->sync_timeout seconds gives up, and fails naming itself and the worker it waited for;
// the parent then ends the run as for any failed worker.
#ifndef HW_HOGWILD_STALENESS_H
#define HW_HOGWILD_STALENESS_H

#include "hogwild_protocol.h"

#include <stdint.h>

// A count that no longer holds anyone back: the worker has no step left in the epoch.
#define HW_STALENESS_DONE UINT64_MAX

typedef struct {
    hogwild_control *control;
    int workers;     // this node's workers
    int rank;        // this worker
    int bound;       // S; HW_STALENESS_UNBOUNDED: every call below returns at once
    double timeout;  // seconds a worker may be held before it fails; <= 0: without limit
} staleness_gate;

// Worker `rank`'s gate under config->max_staleness and config->sync_timeout.
void staleness_gate_open(staleness_gate *gate, hogwild_control *control, const hw_train_config *config, int rank);

// The least count among the workers other than `rank` of `workers`, and in *slowest the first
// worker that has it (-1, and HW_STALENESS_DONE, when none has a step left).
uint64_t staleness_slowest(const hogwild_control *control, int workers, int rank, int *slowest);

// Whether a worker that has finished `steps` steps may start the next under bound `bound` while
// the slowest other worker has finished `least` (HW_STALENESS_DONE: none holds it).
static inline int staleness_may_step(uint64_t steps, uint64_t least, int bound) {
    return least == HW_STALENESS_DONE || steps <= least + (uint64_t)bound;
}

// Before a step: returns HW_OK once the bound lets this worker start it, or at once when the
// parent asks the workers to stop (the caller's next hw_hogwild_stopping says so). HW_ERR, with
// a message naming this worker and the one it waited for, when it was held past the timeout.
int staleness_wait(const staleness_gate *gate);
// After a step has landed on the shared weights: the worker's count goes up and the held workers
// are woken.
void staleness_step_done(const staleness_gate *gate);
// The worker has no step left in the epoch: it holds nobody back until the next epoch's release.
void staleness_leave(const staleness_gate *gate);

#endif
