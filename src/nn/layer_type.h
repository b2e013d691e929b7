// layer_type: what the layer type files of src/nn/ (<kind>.c) share to fill their hw_layer_type:
// the checks of a layer line's arguments and of its input's shape (configure), and the draws of a
// random example (example). Defined in layer_type.c. Private to src/nn/.
#ifndef HW_NN_LAYER_TYPE_H
#define HW_NN_LAYER_TYPE_H

#include "hw/err.h"  // HW_OK, HW_ERR
#include "hw/nn.h"

#include <stdint.h>

// args[index] as an integer >= min; fails naming the type, `what` and the value. When the
// argument is absent (NAN) *out gets `fallback` if fallback >= min, else it is an error.
int nn_arg_int(const hw_layer *layer, int index, const char *what, int64_t min, int64_t fallback, int64_t *out);
// Fails unless layer->in_shape has `ndim` dimensions, naming the type, `expected` and the shape.
int nn_expect_ndim(const hw_layer *layer, int ndim, const char *expected);
// A uniform integer in [lo, hi].
int nn_rand_int(hw_rng *rng, int lo, int hi);

#endif
