// sgd_update: THE rule of torch.optim.SGD (PyTorch 1.13, dampening 0, maximize off) for one
// weight, written once for the host (the CPU's update loops, --measure's among them, in
// src/nn/exec.c) and the device (the GPU's SGD kernel, src/cuda/kernels.cuh), and the one check
// of its settings. Plain C11 outside nvcc.
#ifndef HW_SGD_UPDATE_H
#define HW_SGD_UPDATE_H

#include "hw/host_device.h"

#ifdef __cplusplus
extern "C" {
#endif

// The rule's three forms. A loop takes its form as a constant argument of hw_sgd_update, so that
// the compiler makes it one loop without a branch, which it vectorises.
typedef enum {
    HW_SGD_PLAIN,     // momentum 0: no velocity
    HW_SGD_MOMENTUM,  // the velocity is the direction
    HW_SGD_NESTEROV,  // the velocity's look-ahead added to the gradient
} hw_sgd_variant;

// The form for the settings (checked by hw_sgd_check).
static inline HW_HOST_DEVICE hw_sgd_variant hw_sgd_variant_of(float momentum, int nesterov) {
    return momentum == 0.0f ? HW_SGD_PLAIN : nesterov ? HW_SGD_NESTEROV : HW_SGD_MOMENTUM;
}

// The new value of weight w for its gradient g, with the velocity *velocity moved on (not touched
// by HW_SGD_PLAIN, for which it may be NULL):
//   d = g + weight_decay * w
//   v = d on the first step (first != 0), momentum * v + d after it; *velocity = v
//   d = d + momentum * v with Nesterov, d = v without
//   returns w - lr * d
// - torch adds no decay when weight_decay is 0. g + 0 * w is g but for the sign of a zero d, which
//   no weight keeps (w - lr * (+-0) is w for every w but -0), and for an infinite w, where it is
//   NaN (a weight that has diverged already); one expression for every weight decay keeps the
//   CPU's loops free of a branch.
// - torch's velocity starts as a copy of the first d (first = 1: the GPU's step counts its
//   steps). One that starts zeroed (first = 0 always: the CPU's) gives momentum * 0 + d on the
//   first step, again d but for the sign of a zero.
// - The caller reads w once and writes the result once: on weights shared with other workers
//   (Hogwild) an update that lands between the two is overwritten, the lost update the algorithm
//   tolerates; no lock is taken.
static inline HW_HOST_DEVICE float hw_sgd_update(hw_sgd_variant variant, float w, float g, float *velocity, float lr,
                                                 float momentum, float weight_decay, int first) {
    float d = g + weight_decay * w;
    if (variant == HW_SGD_PLAIN) return w - lr * d;
    float v = first ? d : momentum * *velocity + d;
    *velocity = v;
    d = variant == HW_SGD_NESTEROV ? d + momentum * v : v;
    return w - lr * d;
}

// The one check of the rule's settings (the CPU's hw_sgd_init, the GPU runner's step and
// hw_cuda_sgd_step call it): HW_OK, or HW_ERR naming the setting, for a learning rate, momentum or
// weight decay below 0 or NaN, and for Nesterov without momentum (torch refuses it). In
// src/nn/exec.c.
int hw_sgd_check(float lr, float momentum, float weight_decay, int nesterov);

#ifdef __cplusplus
}
#endif

#endif
