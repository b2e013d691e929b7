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
void hw_sgd_free(hw_sgd *opt);

#endif
