// fault: failures injected into Hogwild workers for the tests (private to src/train/ and the GPU
// trainers). HOGWILD_FAIL_WORKER=RANK:BATCHES[:abort|:nan|:stop] makes worker RANK fail (or abort,
// or stop itself with SIGSTOP, as a hung worker that the parent still sees alive) after BATCHES
// batches, or (nan, CPU workers) read its training loss at batch BATCHES as NaN: the tests
// check with it that a failing worker ends the run with its message, and that a divergence at a
// known point keeps everything before it (a real one, from a large --lr, comes when the workers'
// race says, sometimes not at all).
#ifndef HW_TRAIN_FAULT_H
#define HW_TRAIN_FAULT_H

typedef struct {
    int rank;  // -1: off
    int after_batches;
    int by_abort;
    int by_nan;
    int by_stop;
} fault_plan;

// Reads HOGWILD_FAIL_WORKER (unset or unreadable: off). Before the fork: every worker reads the
// same plan.
void hw_fault_read(fault_plan *fault);
// HW_ERR (or abort(), or SIGSTOP and then HW_OK once continued) when worker `rank` has just done
// its injected batch.
int hw_fault_check(const fault_plan *fault, int rank, int batches);
// Whether worker `rank`'s loss at its batch number `batch` (from 1) is to read as NaN (:nan).
int hw_fault_poisons_loss(const fault_plan *fault, int rank, int batch);

#endif
