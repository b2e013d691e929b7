// cpu_layers: the CPU's forward and backward of each layer kind, defined in src/nn/<kind>.c
// beside the kind's hw_layer_type. Private to src/nn/.
#ifndef HW_NN_CPU_LAYERS_H
#define HW_NN_CPU_LAYERS_H

#include "hw/nn.h"

#include <stddef.h>
#include <stdint.h>

// The math only, outputs first, sizes last. The CPU backend (src/nn/exec.c) calls them with the executor's buffers. Backward
// overwrites the gradients it is given and skips any that are NULL (din, dweight, dbias).
void linear_forward(float *out, const float *in, const float *weight, const float *bias, const hw_linear_dims *d,
                    int batch);
void linear_backward(float *din, float *dweight, float *dbias, const float *dout, const float *in, const float *weight,
                     const hw_linear_dims *d, int batch);
// keep: NULL, or a byte per (sample, output channel), 0 where the channel is not needed (the
// dropout2d after it drops it): its plane is set to zero and, on the kernels, not computed.
void conv2d_forward(float *out, float *cols, float *scratch, const float *in, const float *weight, const float *bias,
                    const uint8_t *keep, const hw_conv2d_dims *d, int batch);
void conv2d_backward(float *din, float *dweight, float *dbias, float *scratch, const float *dout, const float *in,
                     const float *weight, const float *cols, const hw_conv2d_dims *d, int batch);
void maxpool2d_forward(float *out, int32_t *argmax, const float *in, const hw_maxpool2d_dims *d, int batch);
void maxpool2d_backward(float *din, const float *dout, const int32_t *argmax, const hw_maxpool2d_dims *d, int batch);
void relu_forward(float *restrict out, const float *restrict in, size_t n);
void relu_backward(float *restrict din, const float *restrict dout, const float *restrict out, size_t n);
void dropout_forward(float *out, uint8_t *mask, hw_rng *rng, const float *in, const hw_dropout_dims *d, int batch,
                     int training);
void dropout_backward(float *din, const float *dout, const uint8_t *mask, const hw_dropout_dims *d, int batch,
                      int training);
void dropout2d_forward(float *out, uint8_t *mask, hw_rng *rng, const float *in, const hw_dropout_dims *d, int batch,
                       int training);
void dropout2d_draw(uint8_t *mask, hw_rng *rng, const hw_dropout_dims *d, int batch);
void dropout2d_apply(float *out, const uint8_t *mask, const float *in, const hw_dropout_dims *d, int batch);
void dropout2d_backward(float *din, const float *dout, const uint8_t *mask, const hw_dropout_dims *d, int batch,
                        int training);
void flatten_forward(float *out, const float *in, size_t n);
void flatten_backward(float *din, const float *dout, size_t n);
void log_softmax_forward(float *out, const float *in, int batch, int n);
void log_softmax_backward(float *din, const float *dout, const float *out, int batch, int n);

#endif
