// couple_step: THE rule of Hogwild's rounds for one weight, written once for the host (the ranks'
// rounds, src/comm/couple_rule.c, which also says what the rule is and why) and for the device
// (the rounds of the copies on several GPUs, src/cuda/kernels.cuh). Plain C11 outside nvcc.
#ifndef HW_COUPLE_STEP_H
#define HW_COUPLE_STEP_H

#include "hw/host_device.h"

typedef enum {
    HW_COUPLE_MOMENTUM,  // --sync-rule momentum (the default): block momentum, Nesterov's look-ahead
    HW_COUPLE_SUM,       // --sync-rule sum: the summed changes added at once (the baseline)
} hw_couple_rule;

// The rule's constants for `copies` copies: the momentum of the rounds, beta = 1 - 1/R, and the
// mean's factor 1/R.
static inline HW_HOST_DEVICE float hw_couple_beta(int copies) { return 1.0f - 1.0f / (float)copies; }
static inline HW_HOST_DEVICE float hw_couple_mean(int copies) { return 1.0f / (float)copies; }

// The step of one agreed weight for the copies' summed change `sum`, with the rule's state
// `*velocity` moved on; `ahead` is 1 where the agreed weights hold the last round's look-ahead
// beta v, 0 after a settle took it out (the step then leaves out the - beta v that would withdraw
// it). The one place the rule's arithmetic is written.
static inline HW_HOST_DEVICE float hw_couple_step(hw_couple_rule rule, float beta, float mean, float *velocity,
                                                  float sum, float ahead) {
    if (rule == HW_COUPLE_SUM) return sum;
    float v = beta * *velocity + mean * sum;
    float step = (1.0f + beta) * v - ahead * beta * *velocity;
    *velocity = v;
    return step;
}

#endif
