// shape: shapes, devices, and named views into one flat float32 buffer.
//
// Every parameter of a model lives in one contiguous array (see docs/ARCHITECTURE.md); a
// parameter is an (offset, shape) view into it. Gradients and momentum use the same layout, so an
// optimizer step, a checkpoint write and a DataParallel reduce are each one pass over one array.
#ifndef HW_SHAPE_H
#define HW_SHAPE_H

#include <stddef.h>
#include <stdint.h>

enum { HW_MAX_DIMS = 4, HW_NAME_CAP = 64 };

typedef struct {
    int ndim;
    int64_t dims[HW_MAX_DIMS];
} hw_shape;

typedef enum { HW_DEVICE_CPU = 0, HW_DEVICE_CUDA = 1 } hw_device_type;

typedef struct {
    hw_device_type type;
    int index;  // the CUDA ordinal; 0 for the CPU
} hw_device;

// One parameter: a named view into the flat buffer, named as the PyTorch state_dict names it.
typedef struct {
    char name[HW_NAME_CAP];  // e.g. "conv1.weight"
    size_t offset;           // in floats from the start of the flat buffer
    hw_shape shape;
    int frozen;  // 1: never updated, no gradient computed (requires_grad=False)
} hw_param;

hw_shape hw_shape_make(int ndim, const int64_t *dims);
int64_t hw_shape_numel(hw_shape shape);
int hw_shape_equal(hw_shape a, hw_shape b);
// Writes "[10, 1, 5, 5]" into buf.
void hw_shape_format(hw_shape shape, char *buf, size_t cap);

// "cpu", "cuda" (= cuda:0) or "cuda:N". Fails with a message naming the text on anything else.
int hw_device_parse(const char *text, hw_device *out);
// Writes "cpu" or "cuda:N" into buf.
void hw_device_format(hw_device device, char *buf, size_t cap);

#endif
