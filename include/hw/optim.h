// optim: SGD with momentum, nesterov and weight decay, as torch.optim.SGD defines it, over a
// model's flat buffer on the CPU. The rule for one weight and the check of the settings are
// include/hw/sgd_update.h's (the GPU's kernel runs the same rule). The update is the last part of
// the CPU's training step, so it sits with the rest of the step in src/nn/exec.c.
//
// The momentum buffer belongs to one worker (it is never shared); the weights it updates may be
// shared memory written by other workers at the same time: that is the Hogwild algorithm.
#ifndef HW_OPTIM_H
#define HW_OPTIM_H

#include "hw/nn.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    float lr;
    float momentum;
    float weight_decay;
    int nesterov;
    float *velocity;  // momentum buffer, flat layout, n_weights floats; NULL when momentum == 0.
                      // torch starts the buffer as a copy of the first d; the buffer here starts
                      // zeroed, and momentum * 0 + d is d (hw_sgd_update says why a zero's sign
                      // does not matter)
} hw_sgd;

// Fails on the settings hw_sgd_check refuses (lr, momentum or weight_decay below 0 or NaN,
// nesterov without momentum), and when the momentum buffer cannot be allocated.
int hw_sgd_init(hw_sgd *opt, size_t n, float lr, float momentum, float weight_decay, int nesterov);
// One step over every trainable parameter of `model`: weights -= lr * direction. Frozen
// parameters are skipped. `weights` may be shared with other processes; no lock is taken: each
// weight is read once and written once. `weights` and `grads` have model->n_weights floats and
// the optimizer was made for n = model->n_weights (the ranges come from the model, not checked).
void hw_sgd_step(hw_sgd *opt, const hw_model *model, float *weights, const float *grads);
// The same step, which also writes every updated weight into `copy` (a private buffer of the
// same layout): a Hogwild worker computes its next gradient on that copy, so that each step
// passes over the shared weights once (read, update, write) instead of twice (a read for the
// forward, then the update). Frozen parameters are not written: the copy keeps what it had.
void hw_sgd_step_and_copy(hw_sgd *opt, const hw_model *model, float *weights, const float *grads, float *copy);
// The same step as hw_sgd_step_and_copy (bit for bit), which also adds to applied[i] the
// increment it wrote into weight i, (double)written - (double)read: what `--measure` sums to find
// the updates that concurrent writers overwrote. Only --measure uses it.
void hw_sgd_step_measured(hw_sgd *opt, const hw_model *model, float *weights, const float *grads, float *copy,
                          double *applied);
// The same step with every write of a shared weight an atomic add (--update atomic): the weight's
// increment, hw_sgd_update(w) - w for the w it read, is added by a compare-and-swap loop
// (hw_atomic_add_float), so that a concurrent worker's write is never overwritten: no update is
// lost, though the increment was computed on a value others may have moved since. `copy` gets the
// value the swap wrote; with `applied` (NULL: none), applied[i] gets (double)written - (double)read
// of the value it finally swapped, which is what the add really applied (--measure). A scalar
// loop: the lock-free steps above keep their vectorised loops.
void hw_sgd_step_atomic(hw_sgd *opt, const hw_model *model, float *weights, const float *grads, float *copy,
                        double *applied);
// The same step onto shared weights stored in bfloat16 (--weights bf16, include/hw/bf16.h): each
// weight read once and widened to float, the rule applied in float (the velocity stays float), the
// result rounded stochastically without bias and written once (2 bytes a weight), with no lock, so
// a concurrent write between the read and the write is lost as in hw_sgd_step_and_copy. The random
// bits of weight i's rounding are hw_bf16_random_bits(key, i): a caller that draws `key` from a
// seeded generator rounds reproducibly. `copy` gets the float of the bfloat16 written; with
// `applied` (NULL: none; --measure), applied[i] gets (double)written - (double)read.
void hw_sgd_step_bf16(hw_sgd *opt, const hw_model *model, uint16_t *weights, const float *grads, float *copy,
                      double *applied, uint64_t key);
void hw_sgd_free(hw_sgd *opt);

// Adds `delta` to *target atomically: reads it, and swaps in old + delta (float arithmetic) with a
// compare-and-swap on its 32 bits until no other writer has changed it in between. Returns the
// value written; *read (NULL: not wanted) gets the value it replaced. Relaxed ordering: each
// weight's adds are atomic, and nothing else is ordered by them.
static inline float hw_atomic_add_float(float *target, float delta, float *read) {
    float old, updated;
    __atomic_load(target, &old, __ATOMIC_RELAXED);
    do {
        updated = old + delta;
        // On failure `old` receives the value another writer left: the loop adds to that.
    } while (!__atomic_compare_exchange(target, &old, &updated, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    if (read) *read = old;
    return updated;
}

// How a Hogwild worker writes its step onto the shared weights (--update; CPU Hogwild):
//   lockfree  each weight read once and written once, no lock: a concurrent write between the
//             two is lost (the HOGWILD! algorithm; the default)
//   locked    the whole step under one lock in the shared region: the steps are serialised and
//             nothing is lost (the HOGWILD! paper's round-robin baseline)
//   atomic    each write an atomic add (hw_sgd_step_atomic): steps still overlap, nothing is lost
typedef enum { HW_UPDATE_LOCKFREE = 0, HW_UPDATE_LOCKED = 1, HW_UPDATE_ATOMIC = 2 } hw_update_mode;
enum { HW_UPDATE_MODES = 3 };
// "lockfree", "locked", "atomic" (src/nn/update_mode.c).
const char *hw_update_mode_name(hw_update_mode mode);
// The mode named `text`; HW_ERR for any other text, naming the three.
int hw_update_mode_parse(const char *text, hw_update_mode *mode);

#endif
