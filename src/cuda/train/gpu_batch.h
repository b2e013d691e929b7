// train_cuda: what the two GPU trainers share (private to src/train/).
#ifndef HW_TRAIN_CUDA_PRIVATE_H
#define HW_TRAIN_CUDA_PRIVATE_H

#include "hw/data.h"
#include "hw/err.h"

#include <stdint.h>
#include <string.h>

// The raw uint8 samples and labels at `indices`: the GPU runner uploads the bytes (a quarter of
// the floats) and normalises them on the device, as hw_batch_fill does on the host.
static inline void batch_gather_u8(const hw_dataset *ds, const int64_t *indices, int count, uint8_t *x, uint8_t *y) {
    const size_t sample = (size_t)ds->channels * (size_t)ds->height * (size_t)ds->width;
    for (int i = 0; i < count; i++) {
        memcpy(x + (size_t)i * sample, ds->images + (size_t)indices[i] * sample, sample);
        y[i] = ds->labels[indices[i]];
    }
}

#endif
