// hogwild_measure: `--measure`, what Hogwild does (private to src/train/): how stale the weights behind
// each gradient were, how much of the workers' updates the races overwrote, and how often the
// workers' updates overlapped in time. CPU Hogwild only (the command line refuses the rest).
//
// Staleness. One global counter in shared memory counts the updates that have landed. A CPU
// worker computes its gradient on its private copy of the weights, which it read while writing
// its previous update (hw_sgd_step_and_copy), or at the start of the epoch (a memcpy). It notes
// the counter then, and again when its next update lands (atomic_fetch_add): the difference is
// the number of other workers' updates between the read and the write. With one worker it is
// always 0. The same interval is also timed, in microseconds.
//
// A sparse model's worker (src/train/sparse_train.c) reads the shared weights during its forward,
// not into a copy: it notes the counter before each forward (measure_weights_read) and measures
// its sparse step with measure_update_enter/leave; its applied increments are those of the rows
// it touched.
//
// Lost updates. Each worker adds to its own double buffer the increment it actually applied to
// every weight: (double)written - (double)read, where `read` is the shared value its step read
// just before writing (hw_sgd_step_measured). Without races the increments of an element
// telescope to final - initial; a race where A reads w, B writes w + b, then A writes w + a
// leaves final - initial short of the increments by b. So
//   lost = (final - initial) - sum over workers of the applied increments
// and the run reports ||lost|| / ||applied|| (L2), per parameter tensor and in total. With one
// worker every partial sum is the difference of two floats, which a double holds exactly unless
// the weight's magnitudes differ by more than 2^29 within the run (it passes within 1e-9 of zero
// from ~1): lost is then exactly 0. Across ranks the node's parent writes the weights too (the
// other nodes' changes, added by the coupling, src/comm/mpi/hogwild_coupling.c): it sums its increments the same
// way into measure_coupled's buffer, so they count as applied; only a race between it and a
// worker (rare: the coupling passes over the weights every --sync-every) is lost.
//
// Contention. A worker counts the steps whose update overlapped another worker's update in time
// (someone was inside when it entered, or entered before it left), and times its forward and
// backward against its update.
//
// Nothing here takes a lock: the shared counters are C11 atomics, each worker's slot and buffer
// are written by that worker only. Without --measure the workers call none of this.
#ifndef HW_TRAIN_HOGWILD_MEASURE_H
#define HW_TRAIN_HOGWILD_MEASURE_H

#include "hw/nn.h"
#include "hw/optim.h"
#include "hw/shm.h"
#include "hw/metrics.h"
#include "hw/progress.h"
#include "hw/train.h"
#include "hogwild_update.h"

#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

// Staleness counts 0 .. STALE_EXACT - 1 are counted exactly; the last bin holds the rest.
enum { STALE_EXACT = 1024, STALE_BINS = STALE_EXACT + 1 };
// The CSV's histogram: bins [0], [1], [2,4), [4,8), ..., [512,1024), [1024, inf).
enum { STALE_CSV_BINS = HW_METRICS_STALE_BINS };

// One worker's counts, written by that worker only (relaxed atomic stores), read by the parent.
typedef struct {
    alignas(64) atomic_llong steps;  // updates this worker made
    atomic_llong overlapped;         // of which overlapped another worker's update in time
    atomic_llong stale_sum;          // staleness in updates: sum and max
    atomic_llong stale_max;
    _Atomic double stale_us_sum;  // and in microseconds
    _Atomic double stale_us_max;
    _Atomic double compute_seconds;  // forward + backward, all steps
    _Atomic double update_seconds;   // the SGD pass over the shared weights, all steps
    atomic_llong weights_written;    // weights the sparse steps wrote (a dense step writes them all)
    atomic_llong stale_hist[STALE_BINS];
} measure_slot;

// The head of the shared region; the slots and each worker's applied-increment buffer follow.
typedef struct {
    alignas(64) atomic_llong updates;  // updates landed, all workers
    atomic_llong update_entries;       // updates begun, all workers
    atomic_int in_update;              // workers inside their update now
} measure_shared;

// Staleness and contention of several workers together, or one.
typedef struct {
    int64_t steps;
    int64_t overlapped;
    double stale_mean, stale_us_mean, stale_us_max;
    int64_t stale_median, stale_p99, stale_max;  // STALE_EXACT means "STALE_EXACT or more"
    double compute_us_per_step, update_us_per_step;
    double written_per_update;  // weights a sparse update wrote, on average; 0 for dense updates (all)
    int64_t csv_hist[STALE_CSV_BINS];
} measure_stats;

// The parent's view, made before fork.
typedef struct hw_measure {
    hw_shm shm;
    measure_shared *shared;
    int workers;
    const hw_model *model;
    hw_weights_dtype dtype;  // how the shared weights are stored: the bytes an update writes
    float *initial;          // the weights this run started from (private)
    double *coupled;         // across ranks: the coupling's applied increments (private)
    // At the last evaluation point (measure_capture), for the metrics row and the summary:
    measure_stats total;
    double lost_total;       // NAN until an epoch end
    double *lost_per_param;  // model->n_params fractions; NAN for frozen parameters
} hw_measure;

// ---- the parent ----
// Maps the shared counters, slots and buffers for `workers` and keeps a copy of the initial
// weights (call after they are set, before fork: model->weights, as floats, are the weights the
// workers start from, stored in `dtype`).
int measure_open(hw_measure *m, const hw_model *model, int workers, hw_weights_dtype dtype);
void measure_close(hw_measure *m);
// Across ranks: a buffer of increments (zeroed) that the coupling fills with its changes to the
// live weights (hw_couple_plan.applied), counted as applied, not lost; NULL after hw_fail.
double *measure_coupled(hw_measure *m);
// Reads every worker's counts into m->total. With `end_weights` (the weights at an epoch end,
// while every worker waits at the barrier or has exited) also the lost-update fractions.
void measure_capture(hw_measure *m, const float *end_weights);
// The block printed after training: per worker and in total, the lost fraction per tensor, and
// the bytes each update writes onto the shared weights.
void measure_report(const hw_measure *m, hw_progress *progress);
// The values of the --measure columns of the metrics CSV (include/hw/metrics.h) at the last
// measure_capture: all workers together.
void measure_metrics_values(const hw_measure *m, hw_metrics_measure *values);

// Staleness, contention and times of `n_slots` slots (for a worker: 1).
void measure_stats_of(const measure_slot *slots, int n_slots, measure_stats *stats);
// ||lost|| / ||applied|| over weights [begin, end): 0 when nothing was lost, NAN when something
// was lost but nothing applied. `applied` holds `writers` buffers: the workers', and across ranks
// the coupling's.
double measure_lost_fraction(const float *initial, const float *final, const double *const *applied, int writers,
                             size_t begin, size_t end);

// ---- a worker (after fork) ----
typedef struct {
    measure_shared *shared;
    measure_slot *slot;
    double *applied;      // this worker's sums of applied increments
    int64_t read_update;  // the counter when the weights behind the next gradient were read
    double read_time;     // and the time (monotonic seconds)
    double step_start;    // when this step's forward began
} measure_worker;

void measure_worker_open(measure_worker *w, hw_measure *m, int rank);
// The worker has just read the shared weights (the memcpy at an epoch's start).
void measure_weights_read(measure_worker *w);
// Before the forward of a step.
static inline void measure_step_begin(measure_worker *w) { w->step_start = hw_now(); }
// A measured update by hand, for a step measure_update does not make (the sparse models'): enter
// once the update may begin (`begin`: when the worker started waiting for it, the wait counted
// in its time), write, set `written` to the weights the step wrote, then leave.
typedef struct {
    double begin;
    long long entered;  // updates begun before this one
    int others_inside;  // workers inside their update when this one entered
    int64_t written;    // weights this update wrote (0: every trainable weight, a dense step)
} measure_mark;
void measure_update_enter(measure_worker *w, measure_mark *mark, double begin);
void measure_update_leave(measure_worker *w, const measure_mark *mark);
// The measured update: the step in the run's --update mode (hogwild_update_write) with the applied
// increments summed, timed and counted. The time includes the wait for the lock (--update locked),
// which is what locking costs; the overlap is counted inside the lock, where locked steps never
// overlap. HW_ERR when the lock cannot be taken.
int measure_update(measure_worker *w, hogwild_update *update, hw_sgd *opt, const hw_model *model, float *weights,
                   const float *grads, float *copy);

#endif
