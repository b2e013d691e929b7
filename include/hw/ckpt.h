// ckpt: checkpoints as safetensors files, named and shaped as the PyTorch state_dict of the
// same network, written atomically (temporary file, fsync, rename).
#ifndef HW_CKPT_H
#define HW_CKPT_H

#include "hw/nn.h"

#include <stdint.h>

typedef struct {
    int epoch;              // epochs completed
    int64_t samples_seen;   // training samples processed, all workers together
    uint64_t seed;
} hw_ckpt_meta;

// Writes `weights` (laid out as `model`) with the model text and meta in the __metadata__.
// A failure (full disk, bad path) leaves any existing file at `path` untouched.
int hw_ckpt_save(const char *path, const hw_model *model, const float *weights, const hw_ckpt_meta *meta);
// Reads a checkpoint into `weights`; refuses truncated or corrupted files and tensors that are
// missing or do not fit the model's shapes, naming the file and the tensor. meta may be NULL.
int hw_ckpt_load(const char *path, const hw_model *model, float *weights, hw_ckpt_meta *meta);

#endif
