// bf16: the whole-buffer conversions between float and bfloat16 and the names of --weights'
// dtypes (include/hw/bf16.h has the per-value rules and why).
#include "hw/bf16.h"

#include "hw/err.h"

static const char *const names[HW_WEIGHTS_DTYPES] = {"f32", "bf16"};

const char *hw_weights_dtype_name(hw_weights_dtype dtype) {
    return (int)dtype >= 0 && (int)dtype < HW_WEIGHTS_DTYPES ? names[dtype] : "unknown";
}

int hw_weights_dtype_parse(const char *text, hw_weights_dtype *dtype) {
    for (int i = 0; i < HW_WEIGHTS_DTYPES; i++) {
        if (strcmp(text, names[i]) == 0) {
            *dtype = (hw_weights_dtype)i;
            return HW_OK;
        }
    }
    return hw_fail("expects f32 or bf16, got '%s'", text);
}

// Plain loops that the compiler vectorises with the build's instruction set (Makefile's ARCH):
// they run at the start of a run and at its snapshots and checkpoints, never in a worker's step.
void hw_bf16_from_floats(uint16_t *out, const float *in, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = hw_bf16_from_float(in[i]);
}

void hw_bf16_to_floats(float *out, const uint16_t *in, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = hw_bf16_to_float(in[i]);
}
