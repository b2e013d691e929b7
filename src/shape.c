// shape: shapes and device names (include/hw/shape.h).
#include "hw/shape.h"

#include "hw/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

hw_shape hw_shape_make(int ndim, const int64_t *dims) {
    hw_shape shape = {.ndim = ndim};
    for (int i = 0; i < ndim && i < HW_MAX_DIMS; i++) shape.dims[i] = dims[i];
    return shape;
}

int64_t hw_shape_numel(hw_shape shape) {
    int64_t n = 1;
    for (int i = 0; i < shape.ndim; i++) n *= shape.dims[i];
    return n;
}

int hw_shape_equal(hw_shape a, hw_shape b) {
    if (a.ndim != b.ndim) return 0;
    for (int i = 0; i < a.ndim; i++) {
        if (a.dims[i] != b.dims[i]) return 0;
    }
    return 1;
}

void hw_shape_format(hw_shape shape, char *buf, size_t cap) {
    size_t used = 0;
    used += (size_t)snprintf(buf + used, cap - used, "[");
    for (int i = 0; i < shape.ndim && used < cap; i++) {
        used += (size_t)snprintf(buf + used, cap - used, "%s%lld", i ? ", " : "", (long long)shape.dims[i]);
    }
    if (used < cap) snprintf(buf + used, cap - used, "]");
}

int hw_device_parse(const char *text, hw_device *out) {
    if (strcmp(text, "cpu") == 0) {
        *out = (hw_device){HW_DEVICE_CPU, 0};
        return HW_OK;
    }
    if (strcmp(text, "cuda") == 0) {
        *out = (hw_device){HW_DEVICE_CUDA, 0};
        return HW_OK;
    }
    if (strncmp(text, "cuda:", 5) == 0 && text[5] != '\0') {
        char *end = NULL;
        long index = strtol(text + 5, &end, 10);
        if (*end == '\0' && index >= 0 && index < 1024) {
            *out = (hw_device){HW_DEVICE_CUDA, (int)index};
            return HW_OK;
        }
    }
    return hw_fail("bad device '%s': expected cpu, cuda or cuda:N", text);
}

void hw_device_format(hw_device device, char *buf, size_t cap) {
    if (device.type == HW_DEVICE_CPU) {
        snprintf(buf, cap, "cpu");
    } else {
        snprintf(buf, cap, "cuda:%d", device.index);
    }
}
