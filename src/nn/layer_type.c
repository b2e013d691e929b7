// layer_type: the helpers of the layer type files (layer_type.h).
#include "layer_type.h"

#include "hw/err.h"

#include <math.h>
#include <stdio.h>

int nn_arg_int(const hw_layer *layer, int index, const char *what, int64_t min, int64_t fallback, int64_t *out) {
    double v = layer->args[index];
    if (isnan(v)) {
        if (fallback >= min) {
            *out = fallback;
            return HW_OK;
        }
        return hw_fail("%s: missing %s: expected %s %s", layer->type->name, what, layer->type->name,
                       layer->type->usage);
    }
    if (v != floor(v) || v < (double)min || v > 1e6) {
        return hw_fail("%s: %s must be an integer from %lld to 1000000, got %g", layer->type->name, what,
                       (long long)min, v);
    }
    *out = (int64_t)v;
    return HW_OK;
}

int nn_expect_ndim(const hw_layer *layer, int ndim, const char *expected) {
    if (layer->in_shape.ndim == ndim) return HW_OK;
    char shape[64];
    hw_shape_format(layer->in_shape, shape, sizeof shape);
    return hw_fail("%s needs %s, got an input of shape %s", layer->type->name, expected, shape);
}

int nn_rand_int(hw_rng *rng, int lo, int hi) { return lo + (int)hw_rng_below(rng, (uint32_t)(hi - lo + 1)); }
