// Helpers of the tests that compare float results computed two ways (the GPU operations, the
// CPU layers): random inputs and convolution shapes, the relative error and its
// bound, a double-precision GEMM reference.
#ifndef HW_TESTS_FLOAT_CHECK_H
#define HW_TESTS_FLOAT_CHECK_H

#include "cuda/layer_ops.h"  // hw_conv_dims
#include "hw/rng.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

// n floats uniform in [-scale, scale] (+ 4 bytes: never a zero-byte allocation).
static inline float *random_floats(hw_rng *rng, size_t n, float scale) {
    float *x = malloc(n * sizeof(float) + 4);
    cr_assert(x);
    for (size_t i = 0; i < n; i++) x[i] = scale * (2.0f * hw_rng_uniform(rng) - 1.0f);
    return x;
}

static inline int rand_in(hw_rng *rng, int lo, int hi) { return lo + (int)hw_rng_below(rng, (uint32_t)(hi - lo + 1)); }

// A convolution of random sizes: any kernel up to 5, stride up to 3, padding up to kernel / 2 + 1.
static inline hw_conv_dims random_conv_dims(hw_rng *rng, int max_batch) {
    hw_conv_dims d;
    d.batch = rand_in(rng, 1, max_batch);
    d.in_channels = rand_in(rng, 1, 4);
    d.out_channels = rand_in(rng, 1, 6);
    d.kernel = rand_in(rng, 1, 5);
    d.stride = rand_in(rng, 1, 3);
    d.padding = rand_in(rng, 0, d.kernel / 2 + 1);
    d.height = rand_in(rng, d.kernel, 14);
    d.width = rand_in(rng, d.kernel, 13);
    return d;
}

// max |got - want| / max |want|: the error relative to the size of the values (a NaN is infinite).
static inline double rel_error(const float *got, const float *want, size_t n) {
    double diff = 0.0, size = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        if (d > diff || isnan(d)) diff = isnan(d) ? INFINITY : d;
        if (fabs((double)want[i]) > size) size = fabs((double)want[i]);
    }
    return size > 0.0 ? diff / size : diff;
}

// Float rounding apart, equal: the relative error is under 1e-4. The rest is printf-style: what
// was compared, for the message.
#define EXPECT_CLOSE(got, want, n, ...)                                 \
    do {                                                                \
        double err_ = rel_error((got), (want), (n));                    \
        char what_[256];                                                \
        snprintf(what_, sizeof what_, __VA_ARGS__);                     \
        cr_expect_lt(err_, 1e-4, "%s: relative error %g", what_, err_); \
    } while (0)

// C = alpha op(A) op(B) + beta C, row-major, summed in double.
static inline void ref_gemm(int ta, int tb, int m, int n, int k, float alpha, const float *a, const float *b,
                            float beta, float *c) {
    for (int i = 0; i < m; i++) {
        for (int j = 0; j < n; j++) {
            double sum = 0.0;
            for (int p = 0; p < k; p++) {
                double av = ta ? a[p * m + i] : a[i * k + p];
                double bv = tb ? b[j * k + p] : b[p * n + j];
                sum += av * bv;
            }
            c[i * n + j] = (float)(alpha * sum + beta * c[i * n + j]);
        }
    }
}

#endif
