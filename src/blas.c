// blas: hw_sgemm over CBLAS (OpenBLAS, serial build).
#include "hw/blas.h"

#include <cblas.h>
#include <stdio.h>

// OpenBLAS extensions (declared in its cblas.h, repeated here so that another CBLAS still builds).
char *openblas_get_config(void);
char *openblas_get_corename(void);

void hw_sgemm(hw_blas_trans trans_a, hw_blas_trans trans_b, int m, int n, int k, float alpha, const float *a,
              int lda, const float *b, int ldb, float beta, float *c, int ldc) {
    if (m <= 0 || n <= 0) return;
    if (k <= 0) {
        // CBLAS scales C by beta here; with beta = 0 make sure no old NaN survives.
        for (int i = 0; i < m; i++) {
            for (int j = 0; j < n; j++) c[(long)i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[(long)i * ldc + j];
        }
        return;
    }
    cblas_sgemm(CblasRowMajor, trans_a == HW_TRANS ? CblasTrans : CblasNoTrans,
                trans_b == HW_TRANS ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

const char *hw_blas_info(void) {
    static char info[256];
    snprintf(info, sizeof info, "%s | %s", openblas_get_config(), openblas_get_corename());
    return info;
}
