// hogwild_update: how a CPU Hogwild worker writes its step onto the shared weights, in the run's
// --update mode (private to src/train/; include/hw/optim.h says what each mode does).
//
// lockfree and atomic take no lock: the loop of the mode is chosen once per step
// (hw_sgd_step_and_copy, or hw_sgd_step_atomic). locked takes the one update lock, a pthread mutex
// in the control block that every worker maps (hogwild_control.update_lock), for the whole step.
// The mutex is process-shared, so that the workers' processes can share it, and robust, so that a
// worker that dies holding it (a crash, SIGKILL) does not leave the others waiting forever: the
// next worker to take it is told so (EOWNERDEAD), marks it consistent and goes on, and the parent
// reports the dead worker as it reports any (hogwild_watch.c). The weights that worker was writing
// keep the part of its step it had written, as a lock-free race would have left them.
//
// --weights bf16: the shared weights are bfloat16 (`bf16`, in the shared region in place of the
// floats), and the step is hw_sgd_step_bf16, whose stochastic rounding takes a fresh key from the
// worker's own generator (`rounding`, seeded from the run's seed and the worker's index) at every
// step: one worker rounds, and so trains, the same way on every run with the same seed.
#ifndef HW_TRAIN_HOGWILD_UPDATE_H
#define HW_TRAIN_HOGWILD_UPDATE_H

#include "hw/bf16.h"
#include "hw/nn.h"
#include "hw/optim.h"
#include "hw/rng.h"

#include <pthread.h>
#include <stdint.h>

typedef struct {
    hw_update_mode mode;
    pthread_mutex_t *lock;   // locked: the shared update lock (hogwild_update_lock_init'ed); else unused
    hw_weights_dtype dtype;  // how the shared weights are stored (--weights)
    uint16_t *bf16;          // bf16: the shared weights; the model's float weights are then not shared
    hw_rng rounding;         // bf16: the worker's generator of rounding keys (hogwild_update_seed)
} hogwild_update;

// The parent, before fork: makes *lock (in the shared region) a process-shared, robust mutex.
// HW_ERR with the cause when the system refuses either attribute.
int hogwild_update_lock_init(pthread_mutex_t *lock);
// The parent, after the last worker has exited.
void hogwild_update_lock_destroy(pthread_mutex_t *lock);

// Before the step's write: takes the lock in mode locked (recovering it from a worker that died
// holding it), nothing in the other modes. HW_ERR naming the cause when the lock cannot be taken.
int hogwild_update_begin(const hogwild_update *update);
// After the write: gives the lock back in mode locked.
void hogwild_update_end(const hogwild_update *update);
// A worker, before its first step: seeds its generator of rounding keys from `seed` (the worker's,
// hw_hogwild_worker_seed) on a stream of its own, apart from dropout's. Nothing to do for f32.
void hogwild_update_seed(hogwild_update *update, uint64_t seed);
// The write itself, between begin and end: the step onto the shared weights in the mode's loop
// (`weights` for f32; update->bf16 for bf16, with a new rounding key drawn), `copy` refreshed,
// and with `applied` (NULL: none; --measure) the increments really applied summed into it
// (hw_sgd_step_measured, hw_sgd_step_atomic's or hw_sgd_step_bf16's).
void hogwild_update_write(hogwild_update *update, hw_sgd *opt, const hw_model *model, float *weights,
                          const float *grads, float *copy, double *applied);
// Reads the shared weights whole into `local` (n floats): a copy of `weights` for f32, update->bf16
// widened for bf16. A worker's read at the start of an epoch.
void hogwild_update_read(const hogwild_update *update, const float *weights, float *local, size_t n);

#endif
