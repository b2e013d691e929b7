// Tests of the blas module: hw_sgemm against a direct triple loop in double, every transpose
// combination, leading dimensions wider than the matrices, alpha and beta.
#include "hw/blas.h"
#include "hw/rng.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

Test(blas, sgemm_matches_direct_products) {
    hw_rng rng;
    hw_rng_seed(&rng, 4, 0);
    for (int trial = 0; trial < 64; trial++) {
        hw_blas_trans ta = trial & 1 ? HW_TRANS : HW_NO_TRANS, tb = trial & 2 ? HW_TRANS : HW_NO_TRANS;
        int m = 1 + (int)hw_rng_below(&rng, 40), n = 1 + (int)hw_rng_below(&rng, 40), k = 1 + (int)hw_rng_below(&rng, 300);
        int pad = (int)hw_rng_below(&rng, 3);  // row strides wider than the rows
        int a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
        int lda = a_cols + pad, ldb = b_cols + pad, ldc = n + pad;
        float alpha = trial % 8 < 4 ? 1.0f : -0.5f, beta = (trial / 4) % 3 == 0 ? 0.0f : 0.75f;
        float *a = malloc(sizeof(float) * a_rows * lda), *b = malloc(sizeof(float) * b_rows * ldb);
        float *c = malloc(sizeof(float) * m * ldc), *c0 = malloc(sizeof(float) * m * ldc);
        for (int i = 0; i < a_rows * lda; i++) a[i] = hw_rng_normal(&rng);
        for (int i = 0; i < b_rows * ldb; i++) b[i] = hw_rng_normal(&rng);
        for (int i = 0; i < m * ldc; i++) c0[i] = c[i] = beta == 0.0f ? NAN : hw_rng_normal(&rng);
        hw_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        for (int i = 0; i < m; i++) {
            for (int j = 0; j < n; j++) {
                double sum = 0, mag = 0;
                for (int p = 0; p < k; p++) {
                    double av = ta ? a[p * lda + i] : a[i * lda + p], bv = tb ? b[j * ldb + p] : b[p * ldb + j];
                    sum += av * bv;
                    mag += fabs(av * bv);
                }
                double want = alpha * sum + (beta == 0.0f ? 0.0 : beta * c0[i * ldc + j]);
                cr_assert(fabs(c[i * ldc + j] - want) <= 1e-5 * (mag + 1), "trial %d (ta %d tb %d, %dx%dx%d): c[%d][%d] = %g, want %g",
                          trial, ta, tb, m, n, k, i, j, c[i * ldc + j], want);
            }
            for (int j = n; j < ldc; j++) {  // the padding of C is not touched
                float got = c[i * ldc + j], was = c0[i * ldc + j];
                cr_assert(got == was || (isnan(got) && isnan(was)), "c[%d][%d] outside the matrix written", i, j);
            }
        }
        free(a), free(b), free(c), free(c0);
    }
}

Test(blas, empty_inner_dimension_scales_c) {
    float c[4] = {NAN, NAN, NAN, NAN}, d[4] = {1, 2, 3, 4};
    hw_sgemm(HW_NO_TRANS, HW_NO_TRANS, 2, 2, 0, 1.0f, NULL, 1, NULL, 2, 0.0f, c, 2);
    for (int i = 0; i < 4; i++) cr_expect_eq(c[i], 0.0f, "beta = 0 clears C");
    hw_sgemm(HW_NO_TRANS, HW_NO_TRANS, 2, 2, 0, 1.0f, NULL, 1, NULL, 2, 2.0f, d, 2);
    for (int i = 0; i < 4; i++) cr_expect_eq(d[i], 2.0f * (float)(i + 1));
}

Test(blas, info_names_the_library) { cr_expect(strstr(hw_blas_info(), "OpenBLAS") != NULL, "%s", hw_blas_info()); }
