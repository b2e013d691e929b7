// replay: the GPU layer functions of src/cuda/ (layers.cu, pointwise.cu, loss.cu) run on the host,
// built from the kernels' own per-index code in src/cuda/kernels.cuh. ONE host implementation,
// used twice: tests/test_cuda_replay.c compares it with the CPU layers of src/nn in every build,
// and the simulated CUDA device (kernels.c, `make sim`) runs it as its kernels.
//
// Each replay_* function is one hw_cuda_* function with each kernel launch replaced by a loop over
// every index calling that kernel's element function, in the same order, on the same scratch
// layout; each cuBLAS call goes through a replay_blas: OpenBLAS's column-major cblas_sgemm given
// exactly the arguments hw_cuda_sgemm gives cuBLAS (col_major_gemm_of), or, on the simulated
// device, hw_cuda_sgemm itself. The sequence of launches (and the combine step of the block
// reductions) is a copy of the hw_cuda_* function it names, kept in step by hand. Like the
// kernels, a NULL gradient pointer skips that gradient.
#ifndef HW_SIMCUDA_REPLAY_H
#define HW_SIMCUDA_REPLAY_H

#include "hw/cuda.h"

#include <stdint.h>

// Row-major C = alpha op(A) op(B) + beta C, as hw_cuda_sgemm; HW_OK or HW_ERR (hw_error()).
typedef struct {
    int (*sgemm)(void *ctx, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                 const float *b, float beta, float *c);
    void *ctx;
} replay_blas;

// The GEMMs by OpenBLAS, through the column-major call hw_cuda_sgemm makes.
extern const replay_blas REPLAY_OPENBLAS;
int replay_sgemm(void *unused, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                 const float *b, float beta, float *c);

// The block reductions: sum_cols (layers.cu) and sum_rows / mean_rows (layers.cu, loss.cu).
void replay_sum_cols(float *out, const float *m, int64_t rows, int64_t cols);
float replay_block_sum(const float *v, int64_t count);

// layers.cu
int replay_linear_forward(replay_blas blas, float *y, const float *x, const float *w, const float *bias, int batch,
                          int in, int out);
int replay_linear_backward(replay_blas blas, float *dx, float *dw, float *dbias, const float *dy, const float *x,
                           const float *w, int batch, int in, int out);
int replay_conv2d_forward(replay_blas blas, float *y, const float *x, const float *w, const float *bias,
                          hw_conv_dims d, float *scratch);
int replay_conv2d_backward(replay_blas blas, float *dx, float *dw, float *dbias, const float *dy, const float *x,
                           const float *w, hw_conv_dims d, float *scratch);
void replay_maxpool2d_forward(float *y, int32_t *argmax, const float *x, int planes, int height, int width, int kernel,
                              int stride);
void replay_maxpool2d_backward(float *dx, const float *dy, const int32_t *argmax, int planes, int height, int width,
                               int kernel, int stride);

// pointwise.cu
void replay_relu_forward(float *y, const float *x, int64_t n);
void replay_relu_backward(float *dx, const float *dy, const float *y, int64_t n);
// dropout_launch, behind hw_cuda_dropout{,2d}_{forward,backward}: plane = 1 for dropout.
void replay_dropout(float *out, const float *in, int64_t n, int64_t plane, float p, uint64_t seed, uint64_t step);
void replay_normalize_u8(float *x, const uint8_t *bytes, int64_t n, float mean, float std);
void replay_sgd_step(float *w, const float *g, float *velocity, int64_t n, float lr, float momentum,
                     float weight_decay, int nesterov, int started);
void replay_scale(float *x, int64_t n, float alpha);
void replay_add(float *y, const float *x, int64_t n);

// loss.cu: log_softmax of every row into logp; with labels, the rows' losses into row_loss and
// their mean into *loss.
void replay_log_softmax_nll_forward(float *logp, float *loss, const float *x, const uint8_t *labels, int batch,
                                    int classes, float *row_loss);
void replay_nll_backward(float *dx, const float *logp, const uint8_t *labels, int batch, int classes);
void replay_accumulate_loss(double *total, const float *loss, int batch);
void replay_count_correct(int32_t *count, const float *logp, const uint8_t *labels, int batch, int classes);

#endif
