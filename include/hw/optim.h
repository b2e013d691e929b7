// optim: SGD with momentum, nesterov and weight decay, as torch.optim.SGD defines it.
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
    size_t n;            // floats, = model->n_weights
    float *velocity;     // momentum buffer, flat layout; NULL when momentum == 0
    int started;         // 1 after the first step. torch starts the buffer as a copy of the first
                         // d; the buffer here starts zeroed, and momentum * 0 + d == d exactly
} hw_sgd;

// Fails on lr < 0, momentum < 0, weight_decay < 0, or nesterov without momentum.
int hw_sgd_init(hw_sgd *opt, size_t n, float lr, float momentum, float weight_decay, int nesterov);
// One step over every trainable parameter of `model`: weights -= lr * direction. Frozen
// parameters are skipped. `weights` may be shared with other processes; no lock is taken: each
// weight is read once and written once. `weights` and `grads` have model->n_weights floats and
// opt->n == model->n_weights (the parameter ranges come from the model, not checked here).
void hw_sgd_step(hw_sgd *opt, const hw_model *model, float *weights, const float *grads);
// The same step, which also writes every updated weight into `copy` (a private buffer of the
// same layout): a Hogwild worker computes its next gradient on that copy, so that each step
// passes over the shared weights once (read, update, write) instead of twice (a read for the
// forward, then the update). Frozen parameters are not written: the copy keeps what it had.
void hw_sgd_step_and_copy(hw_sgd *opt, const hw_model *model, float *weights, const float *grads, float *copy);
void hw_sgd_free(hw_sgd *opt);

#endif
