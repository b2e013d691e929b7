// hogwild_watch: what a Hogwild run does on any device (private to src/train/): the slots in
// which workers report to the parent, the epoch barrier, fault injection for the tests, and the
// parent's watch loop. hogwild.c (CPU) and hogwild_gpu.c (GPU) differ only in where the weights
// live and how the workers compute; the parent's side is this one loop.
#ifndef HW_HOGWILD_WATCH_H
#define HW_HOGWILD_WATCH_H

#include "hw/spawn.h"
#include "hw/train.h"
#include "hw/run_log.h"
#include "run_loop.h"

#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

// What one worker tells the parent; a cache line each, so that workers do not slow each other.
typedef struct {
    alignas(64) atomic_llong samples;  // training samples this worker has processed in this run
    _Atomic double loss_sum;           // the sum of their training losses
    atomic_int epochs_done;            // epochs finished in this run (their steps in the weights)
    atomic_llong peak_rss_kb;          // its memory when it finished (see hw_memory)
    atomic_llong private_kb;
    // A non-finite training loss (hw_hogwild_report_diverged): set once, `diverged` last.
    _Atomic double bad_loss;          // the loss it saw (nan, inf)
    _Atomic double last_finite_loss;  // the last finite loss before it, or NAN
    atomic_int diverged_epoch;        // the epoch it was training (0-based)
    atomic_int diverged;
} worker_slot;

// In shared memory, mapped before fork.
typedef struct {
    atomic_int released_epoch;  // workers may start epoch e once released_epoch >= e
    atomic_int stop;            // the parent asks the workers to finish now
    worker_slot slots[];        // one per worker
} hogwild_control;

// Bytes of the control block for `workers`, rounded up to a cache line.
size_t hw_hogwild_control_bytes(int workers);

// ---- the worker's side ----
// Waits at the epoch barrier until the parent has copied the end weights of epoch-1. Returns 1
// when the worker may train `epoch`, 0 when the parent asked it to stop.
int hw_hogwild_wait_for_epoch(hogwild_control *control, int epoch);
static inline void hogwild_report(worker_slot *slot, int64_t samples, double loss_sum) {
    atomic_store_explicit(&slot->samples, samples, memory_order_relaxed);
    atomic_store_explicit(&slot->loss_sum, loss_sum, memory_order_relaxed);
}
void hw_hogwild_report_memory(worker_slot *slot);
// The worker saw a non-finite training loss `loss` in `epoch` (0-based); `last_finite` is the last
// finite one it saw (NAN: none). Its step was not applied; the worker stops training and the
// parent ends the run (hw_hogwild_watch_run), naming the worker.
void hw_hogwild_report_diverged(worker_slot *slot, int epoch, double loss, double last_finite);

// HOGWILD_FAIL_WORKER=RANK:BATCHES[:abort|:nan] makes worker RANK fail (or abort) after BATCHES
// batches, or (nan) see a NaN training loss at batch BATCHES: the tests use it to check that a
// failing worker ends the run with its message, and that a divergence found at a known point
// keeps everything before it (a real one, from a large --lr, comes when the workers' race says).
typedef struct {
    int rank;  // -1: off
    int after_batches;
    int by_abort;
    int by_nan;
} fault_plan;
void hw_fault_read(fault_plan *fault);
// HW_ERR (or abort()) when worker `rank` has just done its injected batch.
int hw_fault_check(const fault_plan *fault, int rank, int batches);
// Whether worker `rank`'s loss at its batch number `batch` (from 1) is to read as NaN (:nan).
int hw_fault_poisons_loss(const fault_plan *fault, int rank, int batch);

// ---- the parent's side ----
typedef struct {
    const hw_train_config *config;
    hogwild_control *control;
    int64_t n_train;          // samples in one epoch
    int first_epoch;          // from --resume
    hw_snapshot_fn snapshot;  // copies the shared weights (host memory, or the GPU's)
    void *snapshot_ctx;
    struct hw_measure *measure;  // --measure: read at every evaluation point; NULL otherwise
    struct hw_couple *couple;    // across ranks: this node's coupling to the others; NULL on one node
    // Several copies of the weights on one node (Hogwild on several GPUs, src/cuda/train/gpu_copies.c):
    // the trainer's rounds, called on every pass; `settle` = 1 when every worker waits at the epoch
    // barrier (or has been stopped): then a round, and every copy set to the agreed weights, before
    // the snapshot. `wait`: how long the loop may wait for its next pass. NULL: one copy.
    int (*copies_poll)(void *ctx, int settle, int64_t samples);
    double (*copies_wait)(void *ctx);
    void *copies_ctx;
    const int *worker_gpu;  // the GPU each worker trains on, named with its failure; NULL: not named
    // Across ranks with the weights in device memory (GPU ranks): the coupling reads and writes a
    // host mirror of them. `pull` refreshes the mirror before each poll of the coupling; `push`
    // writes back what the coupling changed in it (`settled`: the epoch's agreed weights, taken
    // whole while the workers wait). NULL: the live weights are host memory.
    int (*mirror_pull)(void *ctx);
    int (*mirror_push)(void *ctx, int settled);
    void *mirror_ctx;
} hogwild_watch;

// Hogwild across ranks, after the fork and MPI_Init (hw_comm_init): the ranks' settings and
// starting weights (model->weights, host) checked equal, then this node's coupling of `live`, the
// weights its workers write or a host mirror of them (src/comm/mpi/hogwild_coupling.c).
// `applied`: --measure's count of the coupling's changes, or NULL.
int hw_hogwild_couple_open(const hw_train_config *config, const hw_train_inputs *in, int first_epoch,
                           int64_t samples_before, float *live, double *applied, struct hw_couple **couple);

// Watches the spawned workers until they are done, one fails or diverges (a non-finite training
// loss: hw_train_outputs_diverged, within one pass of its loop), or the parent is interrupted:
// progress, the epoch barrier (copy, release, evaluate the copy), --eval-every points. On a
// failure or an interrupt it stops and reaps every worker; on an interrupt it saves the current
// weights (--save). It prints the summary of a finished run. The caller frees `spawn`.
int hw_hogwild_watch_run(const hogwild_watch *watch, hw_spawn_ctx *spawn, hw_train_outputs *log,
                         hw_train_result *result);

#endif
