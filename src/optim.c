// optim: torch.optim.SGD (PyTorch 1.13, dampening 0, maximize off) over the flat buffer.
//
// For each trainable element, with g its gradient and w its weight:
//   d   = g + weight_decay * w
//   buf = d                          on the first step (torch clones the first d_p)
//   buf = momentum * buf + d         afterwards
//   d   = d + momentum * buf         with nesterov, else d = buf (when momentum != 0)
//   w   = w - lr * d
//
// The weights may be shared memory that other worker processes update at the same time (that is
// Hogwild). Each kernel below therefore reads every weight once into a register and writes it
// once, and takes no lock: a concurrent update that lands between our read and our write is
// overwritten, which is the lost-update race the algorithm tolerates. Three kernels, one per case,
// keep the inner loops free of branches so that the compiler vectorises them.
//
// torch starts the momentum buffer as a copy of the first d rather than from zero. With dampening
// 0 that is the same thing: the buffer is allocated zeroed, and momentum * 0 + d == d exactly, so
// the first step needs no kernel of its own.
#include "hw/optim.h"

#include "hw/err.h"

#include <stdlib.h>
#include <string.h>

int hw_sgd_init(hw_sgd *opt, size_t n, float lr, float momentum, float weight_decay, int nesterov) {
    memset(opt, 0, sizeof *opt);
    // The negated comparisons also refuse NaN.
    if (!(lr >= 0.0f)) return hw_fail("--lr must be >= 0, got %g", (double)lr);
    if (!(momentum >= 0.0f)) return hw_fail("--momentum must be >= 0, got %g", (double)momentum);
    if (!(weight_decay >= 0.0f)) return hw_fail("--weight-decay must be >= 0, got %g", (double)weight_decay);
    if (nesterov && momentum == 0.0f) {
        return hw_fail("--nesterov needs a momentum > 0 (torch refuses nesterov with momentum 0)");
    }
    opt->lr = lr;
    opt->momentum = momentum;
    opt->weight_decay = weight_decay;
    opt->nesterov = nesterov ? 1 : 0;
    if (momentum != 0.0f && n > 0) {
        opt->velocity = calloc(n, sizeof *opt->velocity);
        if (opt->velocity == NULL) {
            return hw_fail("cannot allocate the SGD momentum buffer (%zu floats, %zu bytes)", n, n * sizeof(float));
        }
    }
    return HW_OK;
}

void hw_sgd_free(hw_sgd *opt) {
    free(opt->velocity);
    opt->velocity = NULL;
}

// The kernels write each new weight into `copy` too when it is not NULL (the worker's private
// copy, see hw_sgd_step_and_copy). The test on `copy` is loop-invariant: the compiler makes two
// loops of each kernel (-funswitch-loops at -O3), both vectorised.
static void sgd_plain(float *restrict w, float *restrict copy, const float *restrict g, size_t n, float lr,
                      float wd) {
    for (size_t i = 0; i < n; i++) {
        float wi = w[i];
        float d = g[i] + wd * wi;
        float updated = wi - lr * d;
        w[i] = updated;
        if (copy) copy[i] = updated;
    }
}

static void sgd_momentum(float *restrict w, float *restrict copy, float *restrict v, const float *restrict g,
                         size_t n, float lr, float wd, float momentum) {
    for (size_t i = 0; i < n; i++) {
        float wi = w[i];
        float d = g[i] + wd * wi;
        float b = momentum * v[i] + d;
        v[i] = b;
        float updated = wi - lr * b;
        w[i] = updated;
        if (copy) copy[i] = updated;
    }
}

static void sgd_nesterov(float *restrict w, float *restrict copy, float *restrict v, const float *restrict g,
                         size_t n, float lr, float wd, float momentum) {
    for (size_t i = 0; i < n; i++) {
        float wi = w[i];
        float d = g[i] + wd * wi;
        float b = momentum * v[i] + d;
        v[i] = b;
        float updated = wi - lr * (d + momentum * b);
        w[i] = updated;
        if (copy) copy[i] = updated;
    }
}

// The three kernels in one, which also adds the increment it wrote into each weight to
// applied[i], in double: (double)written - (double)read, exact. --measure sums them to find what
// concurrent writers overwrote (src/train/measure.h). The float arithmetic is the kernels' own,
// expression for expression, so the weights come out bit-identical. Its branches are loop-invariant:
// the compiler unswitches the loop into one per case and vectorises each.
static void sgd_measured(const hw_sgd *opt, float *restrict w, float *restrict copy, float *restrict v,
                         const float *restrict g, double *restrict applied, size_t n) {
    const float lr = opt->lr, wd = opt->weight_decay, momentum = opt->momentum;
    const int nesterov = opt->nesterov;
    for (size_t i = 0; i < n; i++) {
        float wi = w[i];
        float d = g[i] + wd * wi;
        float updated;
        if (v == NULL) {
            updated = wi - lr * d;
        } else {
            float b = momentum * v[i] + d;
            v[i] = b;
            updated = nesterov ? wi - lr * (d + momentum * b) : wi - lr * b;
        }
        w[i] = updated;
        if (copy) copy[i] = updated;
        applied[i] += (double)updated - (double)wi;
    }
}

static void sgd_range(hw_sgd *opt, float *w, float *copy, const float *g, double *applied, size_t begin,
                      size_t count) {
    float *v = opt->velocity ? opt->velocity + begin : NULL;
    float *c = copy ? copy + begin : NULL;
    if (applied != NULL) {
        sgd_measured(opt, w + begin, c, v, g + begin, applied + begin, count);
    } else if (v == NULL) {
        sgd_plain(w + begin, c, g + begin, count, opt->lr, opt->weight_decay);
    } else if (opt->nesterov) {
        sgd_nesterov(w + begin, c, v, g + begin, count, opt->lr, opt->weight_decay, opt->momentum);
    } else {
        sgd_momentum(w + begin, c, v, g + begin, count, opt->lr, opt->weight_decay, opt->momentum);
    }
}

static void sgd_step(hw_sgd *opt, const hw_model *model, float *weights, const float *grads, float *copy,
                     double *applied) {
    // Consecutive trainable parameters that sit next to each other in the flat buffer (the usual
    // case: all of them) are merged into one range, so a model without frozen parts is one loop.
    size_t run_begin = 0, run_end = 0;
    int have_run = 0;
    for (int p = 0; p < model->n_params; p++) {
        const hw_param *param = &model->params[p];
        if (param->frozen) continue;
        size_t begin = param->offset;
        size_t end = begin + (size_t)hw_shape_numel(param->shape);
        if (have_run && begin == run_end) {
            run_end = end;
            continue;
        }
        if (have_run) sgd_range(opt, weights, copy, grads, applied, run_begin, run_end - run_begin);
        run_begin = begin;
        run_end = end;
        have_run = 1;
    }
    if (have_run) sgd_range(opt, weights, copy, grads, applied, run_begin, run_end - run_begin);
}

void hw_sgd_step_and_copy(hw_sgd *opt, const hw_model *model, float *weights, const float *grads, float *copy) {
    sgd_step(opt, model, weights, grads, copy, NULL);
}

void hw_sgd_step_measured(hw_sgd *opt, const hw_model *model, float *weights, const float *grads, float *copy,
                          double *applied) {
    sgd_step(opt, model, weights, grads, copy, applied);
}

void hw_sgd_step(hw_sgd *opt, const hw_model *model, float *weights, const float *grads) {
    sgd_step(opt, model, weights, grads, NULL, NULL);
}
