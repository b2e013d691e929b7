// fm: the factorization machine over sparse features, forward and exact backward on the CPU
// (include/hw/sparse_nn.h). Rank 0 is the linear model; on ratings' two features, matrix
// factorisation with user and item biases.
#include "hw/rng.h"
#include "hw/sparse_nn.h"

#include <string.h>

size_t hw_fm_n_weights(const hw_fm_dims *d) { return (size_t)d->dim * (size_t)(1 + d->rank) + 1; }

size_t hw_fm_scratch_floats(const hw_fm_dims *d, int batch) { return (size_t)batch * (size_t)d->rank; }

void hw_fm_init(float *weights, const hw_fm_dims *d, float sigma, uint64_t seed) {
    hw_rng rng;
    hw_rng_seed(&rng, seed, 0);
    size_t row = (size_t)(1 + d->rank);
    for (int64_t j = 0; j < d->dim; j++) {
        float *r = weights + (size_t)j * row;
        r[0] = 0.0f;
        for (int f = 0; f < d->rank; f++) r[1 + f] = sigma * hw_rng_normal(&rng);
    }
    weights[(size_t)d->dim * row] = 0.0f;
}

// One example's prediction; s[0 .. rank) gets its sums of factors.
static float example_forward(float *s, const float *weights, const int32_t *index, const float *value, int64_t nnz,
                             const hw_fm_dims *d) {
    size_t row = (size_t)(1 + d->rank);
    float linear = weights[(size_t)d->dim * row], squares = 0.0f;
    for (int f = 0; f < d->rank; f++) s[f] = 0.0f;
    for (int64_t k = 0; k < nnz; k++) {
        const float *r = weights + (size_t)index[k] * row;
        float x = value[k];
        linear += r[0] * x;
        for (int f = 0; f < d->rank; f++) {
            float vx = r[1 + f] * x;
            s[f] += vx;
            squares += vx * vx;
        }
    }
    float pairs = 0.0f;
    for (int f = 0; f < d->rank; f++) pairs += s[f] * s[f];
    return linear + 0.5f * (pairs - squares);
}

void hw_fm_forward(float *z, float *s, const float *weights, const hw_sparse_batch *x, const hw_fm_dims *d) {
    for (int e = 0; e < x->batch; e++) {
        int64_t begin = x->row_start[x->rows[e]], end = x->row_start[x->rows[e] + 1];
        z[e] = example_forward(s + (size_t)e * (size_t)d->rank, weights, x->index + begin, x->value + begin,
                               end - begin, d);
    }
}

void hw_fm_backward(hw_sparse_grad *g, const float *dz, const float *s, const float *weights,
                    const hw_sparse_batch *x) {
    const int rank = g->dims.rank;
    size_t row = (size_t)(1 + rank);
    for (int e = 0; e < x->batch; e++) {
        int64_t begin = x->row_start[x->rows[e]], end = x->row_start[x->rows[e] + 1];
        const float *se = s + (size_t)e * (size_t)rank;
        g->dbias += dz[e];
        for (int64_t k = begin; k < end; k++) {
            int32_t j = x->index[k];
            if (!g->mark[j]) {
                g->mark[j] = 1;
                g->touched[g->n_touched++] = j;
            }
            const float *r = weights + (size_t)j * row;
            float *gr = g->rows + (size_t)j * row;
            float dx = dz[e] * x->value[k];
            gr[0] += dx;
            for (int f = 0; f < rank; f++) gr[1 + f] += dx * (se[f] - r[1 + f] * x->value[k]);
        }
    }
}
