// sgd_bf16: --weights bf16's pass of the SGD rule over shared bfloat16 weights (hw_sgd_step_bf16,
// src/nn/exec.c), one copy per instruction set like the other kernels (copy.h; kernels.h's
// sgd_bf16). Written in plain C over the per-value rules of include/hw/bf16.h and
// include/hw/sgd_update.h: the compiler vectorises it with the flags of the including file. Its
// instruction set matters here: the widening, the random bits' two multiplies and the narrowing
// store ran the MLP's 101770 weights in 51 us with AVX2 and 20 us with AVX-512 (Zen 5), against
// the float step's 17 us.
#ifndef HW_NN_CPU_SGD_BF16_H
#define HW_NN_CPU_SGD_BF16_H

#include "hw/bf16.h"
#include "hw/sgd_update.h"

#include <stddef.h>
#include <stdint.h>

// One pass of the rule in form `variant` over n shared bfloat16 weights, the first of them weight
// `first` of the flat buffer: each weight read once and widened (exact), the rule applied in float
// with the worker's float velocity v (NULL for HW_SGD_PLAIN), the result rounded stochastically
// (hw_bf16_round_stochastic, with hw_bf16_random_bits(key, first + i)) and written once. copy[i]
// (when `copy`) gets the float of the bfloat16 written, and applied[i] (when `measured`) the
// increment written, (double)written - (double)read. No lock: a concurrent write between the read
// and the write is lost, the race Hogwild tolerates. `variant` and `measured` are constants at
// every call, so each call inlines into a loop of its own; the random bits are a hash of the
// index, so nothing carries from one weight to the next and the loop vectorises.
static inline void sgd_bf16_pass(hw_sgd_variant variant, int measured, uint16_t *restrict w, float *restrict copy,
                                 float *restrict v, const float *restrict g, double *restrict applied, size_t n,
                                 size_t first, uint64_t key, float lr, float momentum, float wd) {
    for (size_t i = 0; i < n; i++) {
        float wi = hw_bf16_to_float(w[i]);
        float updated = hw_sgd_update(variant, wi, g[i], variant == HW_SGD_PLAIN ? NULL : &v[i], lr, momentum, wd, 0);
        uint16_t rounded = hw_bf16_round_stochastic(updated, hw_bf16_random_bits(key, first + i));
        w[i] = rounded;
        float written = hw_bf16_to_float(rounded);
        if (copy) copy[i] = written;
        if (measured) applied[i] += (double)written - (double)wi;
    }
}

// The table's entry (kernels.h): the pass of the form and of `applied` (NULL: not measured).
static void sgd_bf16(hw_sgd_variant variant, uint16_t *w, float *copy, float *v, const float *g, double *applied,
                     size_t n, size_t first, uint64_t key, float lr, float momentum, float wd) {
    if (applied) {
        switch (variant) {
        case HW_SGD_PLAIN:
            sgd_bf16_pass(HW_SGD_PLAIN, 1, w, copy, NULL, g, applied, n, first, key, lr, 0.0f, wd);
            return;
        case HW_SGD_MOMENTUM:
            sgd_bf16_pass(HW_SGD_MOMENTUM, 1, w, copy, v, g, applied, n, first, key, lr, momentum, wd);
            return;
        case HW_SGD_NESTEROV:
            sgd_bf16_pass(HW_SGD_NESTEROV, 1, w, copy, v, g, applied, n, first, key, lr, momentum, wd);
            return;
        }
    }
    switch (variant) {
    case HW_SGD_PLAIN: sgd_bf16_pass(HW_SGD_PLAIN, 0, w, copy, NULL, g, NULL, n, first, key, lr, 0.0f, wd); return;
    case HW_SGD_MOMENTUM:
        sgd_bf16_pass(HW_SGD_MOMENTUM, 0, w, copy, v, g, NULL, n, first, key, lr, momentum, wd);
        return;
    case HW_SGD_NESTEROV:
        sgd_bf16_pass(HW_SGD_NESTEROV, 0, w, copy, v, g, NULL, n, first, key, lr, momentum, wd);
        return;
    }
}

#endif
