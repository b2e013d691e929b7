// hogwild_watch: the parent's loop of a Hogwild run on any device (private to src/train/ and the
// GPU trainers). hogwild.c (CPU) and hogwild_gpu.c (GPU) differ only in where the weights live and
// how the workers compute; the parent's side is this one loop, over the workers' reports
// (hogwild_protocol.h) and one table of what the weights' home does (hogwild_weights).
#ifndef HW_HOGWILD_WATCH_H
#define HW_HOGWILD_WATCH_H

#include "hw/spawn.h"
#include "hw/train.h"
#include "hw/run_outputs.h"
#include "hogwild_protocol.h"

#include <stddef.h>
#include <stdint.h>

// Where the weights that the workers write live, as the parent's loop sees them: one table of
// functions, filled once by each trainer. hogwild.c: shared host memory, a snapshot and nothing
// else. hogwild_gpu.c: a copy of the weights per GPU (src/cuda/train/gpu_copies.c), with rounds
// between the copies where there are several, and on GPU ranks a host mirror of the device weights
// for the coupling between ranks. A function that does not apply is NULL.
typedef struct {
    void *ctx;  // the trainer's state: the first argument of every function below
    // Copies the weights the workers write into outputs->snapshot (hw_run_outputs_snapshot): a
    // copy of the shared host weights, or a copy from the device (on several GPUs, the rounds'
    // weights the copies agree on). Never NULL; across ranks the loop reads the coupling's
    // agreed weights instead.
    int (*snapshot)(void *ctx, hw_run_outputs *outputs);
    // Several copies of the weights on one node: a round between them when one is due, on every
    // pass of the loop, given the workers' `samples` so far. `settle` = 1 when every worker waits
    // at the epoch barrier (or has been stopped): then a round, and every copy made the agreed
    // weights, before the snapshot reads them. NULL: one copy.
    int (*copies_round)(void *ctx, int settle, int64_t samples);
    // With copies_round: how long the loop may wait for its next pass, in seconds (until the next
    // round is due).
    double (*copies_wait)(void *ctx);
    // Across ranks with the weights in device memory: the coupling reads and writes a host mirror
    // of them. Refreshes the mirror from the device, before a poll of the coupling that may start a
    // round. NULL: the coupling works on the live host weights.
    int (*mirror_pull)(void *ctx);
    // Writes into the device what the coupling changed in the mirror since the pull; `settled`:
    // the epoch's agreed weights, written whole while the workers wait at the barrier.
    int (*mirror_push)(void *ctx, int settled);
    // The summary's line on the copies' rounds ("coupling of 2 copies ..."), printed after a
    // finished run on one node. NULL: none.
    void (*report)(void *ctx, char *text, size_t cap);
} hogwild_weights;

typedef struct {
    const hw_train_config *config;
    hogwild_control *control;
    int64_t n_train;             // samples in one epoch
    int first_epoch;             // from --resume
    hogwild_weights weights;     // where the weights live
    struct hw_measure *measure;  // --measure: read at every evaluation point; NULL otherwise
    struct hw_couple *couple;    // across ranks: this node's coupling to the others; NULL on one node
    const int *worker_gpu;       // the GPU each worker trains on, named with its failure; NULL: not named
    // At every epoch end, while the workers wait at the barrier: the trainer copies their optimizer
    // state for the epoch's checkpoint (hw_run_outputs.optim). NULL: none kept.
    void (*optim_capture)(void *ctx);
    void *optim_ctx;
} hogwild_watch;

// Hogwild across ranks, after the fork and MPI_Init (hw_comm_init): the ranks' settings and
// starting weights (model->weights, host) checked equal, then this node's coupling of `live`, the
// weights its workers write or a host mirror of them (src/comm/mpi/hogwild_coupling.c), and then
// the workers, kept before the first epoch until now (hw_hogwild_release_first), released.
// `applied`: --measure's count of the coupling's changes, or NULL.
int hw_hogwild_couple_open(const hw_train_config *config, const hw_train_inputs *in, hogwild_control *control,
                           int first_epoch, int64_t samples_before, float *live, double *applied,
                           struct hw_couple **couple);

// Watches the spawned workers until they are done, one fails or diverges (a diverged training
// loss: hw_run_outputs_diverged, within one pass of its loop), or the parent is interrupted:
// progress, the epoch barrier (copy, release, evaluate the copy), --eval-every points. On a
// failure or an interrupt it stops and reaps every worker; on an interrupt it saves the current
// weights (--save). It prints the summary of a finished run: the results, the memory, --measure's
// block, the coupling's or the copies' line. The caller frees `spawn`.
int hw_hogwild_watch_run(const hogwild_watch *watch, hw_spawn_ctx *spawn, hw_run_outputs *outputs,
                         hw_train_result *result);

#endif
