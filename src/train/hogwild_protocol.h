// hogwild_protocol: what a Hogwild worker and its parent share, on any device (private to
// src/train/ and the GPU trainers): the control block in shared memory (one report slot per
// worker, the epoch barrier, the stop flag), the calls each side makes on it, and a worker's place
// in the world (its shard and its seed). The CPU (hogwild.c) and GPU (hogwild_gpu.c) workers speak
// it alike; the parent's loop (hogwild_watch.c) reads it.
//
// The barrier: a worker that finishes epoch e reports it (hw_hogwild_report_epoch) and waits until
// the parent releases epoch e + 1 (hw_hogwild_release), so that the parent copies the exact
// end-of-epoch weights while every worker waits. A waiting worker sleeps on a futex (the control
// block's `wake` word), which the parent bumps and wakes on every release and on a stop: hundreds
// of workers waiting at an epoch end take no CPU from the few still training, nor from the parent
// that must stop them. Everything here is a C11 atomic: no lock.
#ifndef HW_HOGWILD_PROTOCOL_H
#define HW_HOGWILD_PROTOCOL_H

#include "hw/train.h"

#include <pthread.h>
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
    // A diverged training loss (hw_hogwild_report_diverged): set once, `diverged` last.
    _Atomic double bad_loss;          // the loss it saw (nan, inf, above the bound)
    _Atomic double last_finite_loss;  // the last finite loss before it, or NAN
    atomic_int diverged_epoch;        // the epoch it was training (0-based)
    atomic_int diverged;
    // --max-staleness: the steps this worker has finished in the current epoch, or
    // HW_STALENESS_DONE once it has no step left to take in it (src/train/hogwild_staleness.h).
    atomic_ullong epoch_steps;
} worker_slot;

// In shared memory, mapped before fork.
typedef struct {
    atomic_int released_epoch;  // workers may start epoch e once released_epoch >= e
    atomic_int stop;            // the parent asks the workers to finish now
    atomic_int wake;            // the barrier's futex word: bumped on every release and stop
    // --lr-schedule: the run's samples as the schedule counts them, word2vec's word_count_actual.
    // Every worker adds its batch as it starts a step and takes the rate at the count before it
    // (hw_hogwild_step_lr); the count starts at the samples of the checkpoint resumed from. On a
    // cache line of its own: it is written every step by every worker, the flags above only read.
    // Untouched by a constant schedule.
    alignas(64) atomic_llong schedule_samples;
    atomic_llong other_ranks_samples;  // across ranks: the other ranks' samples as they last reported them
    // --update locked: the one lock around every worker's step (src/train/hogwild_update.h); on a
    // cache line of its own. Untouched (zeroed, never initialised) in the other modes.
    alignas(64) pthread_mutex_t update_lock;
    // --max-staleness: the futex word a worker held back by the bound sleeps on, bumped after every
    // step of a bounded run and on a stop, and how many sleep on it (the waker makes the wake call
    // only when one does). On a cache line of its own; untouched by an unbounded run.
    alignas(64) atomic_uint staleness_wake;
    atomic_int staleness_sleepers;
    worker_slot slots[];  // one per worker
} hogwild_control;

// Bytes of the control block for `workers`, rounded up to a cache line.
size_t hw_hogwild_control_bytes(int workers);

// ---- a worker's place in the world ----

// Across ranks the world is R x N workers (R ranks of --workers N each): worker `rank` of this
// node is worker world.rank * N + rank of the world, with a shard of the training set and a seed
// of its own. On one node it is worker `rank` of N.
static inline int hw_hogwild_world_workers(const hw_train_config *config) {
    return config->workers * config->world.size;
}
static inline int hw_hogwild_world_rank(const hw_train_config *config, int rank) {
    return config->world.rank * config->workers + rank;
}
// The seed of worker `rank`'s dropout masks: its place in the world's.
static inline uint64_t hw_hogwild_worker_seed(const hw_train_config *config, int rank) {
    return hw_worker_seed(config->seed, hw_hogwild_world_rank(config, rank));
}
// Room for the largest shard of the n training samples that any worker of the world gets, or NULL.
int64_t *hw_hogwild_shard_alloc(const hw_train_config *config, int64_t n);
// Worker `rank`'s shard of epoch `epoch` (the sampler over the world's workers) into `shard`: its
// *count sample indices.
int hw_hogwild_shard(const hw_train_config *config, int64_t n, int rank, int epoch, int64_t *shard, int64_t *count);

// ---- the worker's side ----

// Waits at the epoch barrier until the parent has copied the end weights of epoch-1. Returns 1
// when the worker may train `epoch`, 0 when the parent asked it to stop.
int hw_hogwild_wait_for_epoch(hogwild_control *control, int epoch);
// Whether the parent asked the workers to stop (a relaxed read, for every step).
static inline int hw_hogwild_stopping(hogwild_control *control) {
    return atomic_load_explicit(&control->stop, memory_order_relaxed);
}
// The rate of the step a worker is about to take over `batch` samples of the n training samples
// an epoch: config->lr for a constant schedule (no shared count is touched), else the schedule at
// the world's samples before the step, this node's workers' (the shared count, to which the batch
// is added) and the other ranks' as last reported.
static inline float hw_hogwild_step_lr(hogwild_control *control, const hw_train_config *config, int64_t n, int batch) {
    if (hw_lr_is_constant(&config->lr_schedule)) return config->lr;
    int64_t node = atomic_fetch_add_explicit(&control->schedule_samples, batch, memory_order_relaxed);
    int64_t others = atomic_load_explicit(&control->other_ranks_samples, memory_order_relaxed);
    return hw_train_lr(config, node + others, n);
}
// Before the fork: the schedule's count starts at the samples seen before this run (--resume).
static inline void hw_hogwild_schedule_start(hogwild_control *control, int64_t samples_before) {
    atomic_store(&control->schedule_samples, samples_before);
    atomic_store(&control->other_ranks_samples, 0);
}
// The worker's samples and their loss sum so far in this run, for the parent's progress line.
static inline void hw_hogwild_report_progress(worker_slot *slot, int64_t samples, double loss_sum) {
    atomic_store_explicit(&slot->samples, samples, memory_order_relaxed);
    atomic_store_explicit(&slot->loss_sum, loss_sum, memory_order_relaxed);
}
// The worker has finished `epochs_done` epochs of this run, their steps all in the weights: once
// every worker has, the parent handles the epoch's end.
static inline void hw_hogwild_report_epoch(worker_slot *slot, int epochs_done) {
    atomic_store(&slot->epochs_done, epochs_done);
}
// The worker's memory as it ends (hw_memory_read), for the summary's memory line.
void hw_hogwild_report_memory(worker_slot *slot);
// The worker saw a diverged training loss `loss` (hw_loss_diverged) in `epoch` (0-based);
// `last_finite` is the last finite one it saw (NAN: none). Its step was not applied; the worker
// stops training and the parent ends the run (hw_hogwild_watch_run), naming the worker.
void hw_hogwild_report_diverged(worker_slot *slot, int epoch, double loss, double last_finite);

// ---- the parent's side ----

// Lets the workers start `epoch` (or, one below the first, keeps them waiting before it), waking
// those that wait at the barrier. Every worker's epoch_steps starts again at 0 first: they all
// wait at the barrier then, so the bound (hogwild_staleness.h) counts the new epoch's steps alike.
void hw_hogwild_release(hogwild_control *control, int epoch, int workers);
// Before the fork: the workers may start `first_epoch` at once or, across ranks, only once this
// node is coupled to the others (hw_hogwild_couple_open releases them then).
static inline void hw_hogwild_release_first(hogwild_control *control, const hw_train_config *config, int first_epoch) {
    hw_hogwild_release(control, config->world.size > 1 ? first_epoch - 1 : first_epoch, config->workers);
}
// Asks every worker to stop: at the barrier or held back by --max-staleness (woken now), or after
// its step under way.
void hw_hogwild_stop(hogwild_control *control);
// The fewest epochs any of the `workers` has trained whole in this run, out of `n` samples an
// epoch, once they are stopped: a worker's report, or the shards its samples make up where that
// is more. A stop SIGTERMs the workers (hw_spawn_stop), and one killed between the last step of
// its shard and its report has trained the epoch all the same.
int hw_hogwild_epochs_trained(const hogwild_control *control, const hw_train_config *config, int64_t n, int workers);
// The workers' reports summed: their samples and loss sums, and the fewest epochs any has done.
void hw_hogwild_slots_sum(const hogwild_control *control, int workers, int64_t *samples, double *loss_sum,
                          int *min_epochs_done);
// The largest peak and private memory of the workers' reports (hw_hogwild_report_memory), in KiB.
void hw_hogwild_slots_memory(const hogwild_control *control, int workers, int64_t *peak_kb, int64_t *private_kb);

#endif
