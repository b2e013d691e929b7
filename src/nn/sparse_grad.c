// sparse_grad: the gradient of the features a batch touched and the SGD step that writes only
// them (include/hw/sparse_nn.h).
#include "hw/err.h"
#include "hw/sgd_update.h"
#include "hw/sparse_nn.h"

#include <stdlib.h>
#include <string.h>

int hw_sparse_grad_alloc(hw_sparse_grad *g, const hw_fm_dims *d) {
    memset(g, 0, sizeof *g);
    g->dims = *d;
    g->cap = d->dim;
    g->rows = calloc(hw_fm_n_weights(d), sizeof *g->rows);
    g->touched = malloc((size_t)d->dim * sizeof *g->touched);
    g->mark = calloc((size_t)d->dim, 1);
    if (!g->rows || !g->touched || !g->mark) {
        hw_sparse_grad_free(g);
        return hw_fail("cannot allocate the sparse gradient of %lld features of rank %d", (long long)d->dim, d->rank);
    }
    return HW_OK;
}

void hw_sparse_grad_free(hw_sparse_grad *g) {
    free(g->rows);
    free(g->touched);
    free(g->mark);
    memset(g, 0, sizeof *g);
}

// The rule on one weight i: read once, written once, as the dense step's loops do; `atomic`: the
// write is an atomic add of the increment (hw_atomic_add_float), as hw_sgd_step_atomic's.
static inline void weight_step(const hw_sgd *opt, hw_sgd_variant variant, int atomic, float *weights, float *copy,
                               double *applied, size_t i, float grad) {
    float w = weights[i];
    float *v = variant == HW_SGD_PLAIN ? NULL : &opt->velocity[i];
    float updated = hw_sgd_update(variant, w, grad, v, opt->lr, opt->momentum, opt->weight_decay, 0);
    float replaced = w;
    if (atomic) {
        updated = hw_atomic_add_float(&weights[i], updated - w, &replaced);
    } else {
        weights[i] = updated;
    }
    if (copy) copy[i] = updated;
    if (applied) applied[i] += (double)updated - (double)replaced;
}

static void grad_step(hw_sparse_grad *g, const hw_sgd *opt, int atomic, float *weights, float *copy, double *applied) {
    hw_sgd_variant variant = opt->velocity ? hw_sgd_variant_of(opt->momentum, opt->nesterov) : HW_SGD_PLAIN;
    size_t row = (size_t)(1 + g->dims.rank);
    for (int64_t t = 0; t < g->n_touched; t++) {
        int32_t j = g->touched[t];
        float *gr = g->rows + (size_t)j * row;
        for (size_t k = 0; k < row; k++) {
            weight_step(opt, variant, atomic, weights, copy, applied, (size_t)j * row + k, gr[k]);
        }
        memset(gr, 0, row * sizeof *gr);
        g->mark[j] = 0;
    }
    weight_step(opt, variant, atomic, weights, copy, applied, (size_t)g->dims.dim * row, (float)g->dbias);
    g->n_touched = 0;
    g->dbias = 0.0;
}

void hw_sparse_grad_step(hw_sparse_grad *g, const hw_sgd *opt, float *weights, float *copy, double *applied) {
    grad_step(g, opt, 0, weights, copy, applied);
}

void hw_sparse_grad_step_atomic(hw_sparse_grad *g, const hw_sgd *opt, float *weights, double *applied) {
    grad_step(g, opt, 1, weights, NULL, applied);
}

void hw_sparse_grad_add(hw_sparse_grad *dst, hw_sparse_grad *src) {
    size_t row = (size_t)(1 + src->dims.rank);
    for (int64_t t = 0; t < src->n_touched; t++) {
        int32_t j = src->touched[t];
        if (!dst->mark[j]) {
            dst->mark[j] = 1;
            dst->touched[dst->n_touched++] = j;
        }
        float *from = src->rows + (size_t)j * row, *to = dst->rows + (size_t)j * row;
        for (size_t k = 0; k < row; k++) to[k] += from[k];
        memset(from, 0, row * sizeof *from);
        src->mark[j] = 0;
    }
    dst->dbias += src->dbias;
    src->n_touched = 0;
    src->dbias = 0.0;
}
