// Helpers the layer type files share (private to src/nn/).
#ifndef HW_NN_LAYER_UTIL_H
#define HW_NN_LAYER_UTIL_H

#include "hw/err.h"
#include "hw/nn.h"

#include <stddef.h>
#include <stdint.h>

// args[index] as an integer >= min; fails naming the type, `what` and the value. When the
// argument is absent (NAN) *out gets `fallback` if fallback >= min, else it is an error.
int nn_arg_int(const hw_layer *layer, int index, const char *what, int64_t min, int64_t fallback,
                  int64_t *out);
// Fails unless layer->in_shape has `ndim` dimensions, naming the type, `expected` and the shape.
int nn_expect_ndim(const hw_layer *layer, int ndim, const char *expected);
// A uniform integer in [lo, hi].
int nn_rand_int(hw_rng *rng, int lo, int hi);

// The CPU's forward and backward of each kind, in src/nn/<kind>.c (rows of hw_cpu_backend).
int nn_linear_forward(const hw_layer *layer, hw_layer_io *io);
int nn_linear_backward(const hw_layer *layer, hw_layer_io *io);
int nn_conv2d_forward(const hw_layer *layer, hw_layer_io *io);
int nn_conv2d_backward(const hw_layer *layer, hw_layer_io *io);
int nn_maxpool2d_forward(const hw_layer *layer, hw_layer_io *io);
int nn_maxpool2d_backward(const hw_layer *layer, hw_layer_io *io);
int nn_relu_forward(const hw_layer *layer, hw_layer_io *io);
int nn_relu_backward(const hw_layer *layer, hw_layer_io *io);
int nn_dropout_forward(const hw_layer *layer, hw_layer_io *io);
int nn_dropout_backward(const hw_layer *layer, hw_layer_io *io);
int nn_dropout2d_forward(const hw_layer *layer, hw_layer_io *io);
int nn_dropout2d_backward(const hw_layer *layer, hw_layer_io *io);
int nn_flatten_forward(const hw_layer *layer, hw_layer_io *io);
int nn_flatten_backward(const hw_layer *layer, hw_layer_io *io);
int nn_log_softmax_forward(const hw_layer *layer, hw_layer_io *io);
int nn_log_softmax_backward(const hw_layer *layer, hw_layer_io *io);

#endif
