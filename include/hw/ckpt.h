// ckpt: checkpoints as safetensors files, named and shaped as the PyTorch state_dict of the
// same network, written atomically (temporary file, fsync, rename).
//
// File layout (https://github.com/huggingface/safetensors):
//   8 bytes    N, the header length, unsigned little-endian
//   N bytes    JSON: {"__metadata__": {"format": "pt", "hogwild_model": <model file text>,
//              "epoch": "3", "samples_seen": "180000", "seed": "1", "lr": "0.0500000007",
//              "lr_schedule": "cosine", "lr_warmup": "0", "update": "lockfree", for a run under a
//              staleness bound "max_staleness": "2", and for a simulated run "simulate": "8",
//              "delay": "uniform:8"},
//              "conv1.weight": {"dtype": "F32", "shape": [10, 1, 5, 5], "data_offsets": [0, 1000]}, ...}
//              padded with spaces so that the data starts at a multiple of 8
//   the data   every tensor as contiguous little-endian float32 (dtype F32), or bfloat16 (BF16: a
//              run with bf16 shared weights), in the model's parameter order; data_offsets are
//              byte offsets relative to the start of the data. Either dtype loads, into floats.
//              After them, a trainer's state (HW_CKPT_STATE_PREFIX tensors, F32; hw/resume_optim.h).
#ifndef HW_CKPT_H
#define HW_CKPT_H

#include "hw/nn.h"

#include <stdint.h>

// The lr schedule's longest text and its NUL ("step:1000000:0.123456" is 21 characters).
enum { HW_CKPT_SCHEDULE_CAP = 32 };
// A simulation's delay model's longest text and its NUL (hw/simulate.h's HW_DELAY_SPEC_CAP).
enum { HW_CKPT_DELAY_CAP = 256 };
// The update mode's longest text and its NUL.
enum { HW_CKPT_UPDATE_CAP = 16 };

typedef struct {
    int epoch;             // epochs completed
    int64_t samples_seen;  // training samples processed, all workers together
    uint64_t seed;
    int has_seed;  // read: the file records its seed (one without hogwild's metadata does not)
    // The learning-rate schedule the run trained with, as the command line reads it ("cosine",
    // "step:2:0.5"), and its warm-up in samples; "" when none is recorded (written: none is
    // written; read: a file from before schedules, which trained at a constant rate, or from
    // another program).
    char lr_schedule[HW_CKPT_SCHEDULE_CAP];
    int64_t lr_warmup;
    // The base learning rate (--lr) the schedule scales; lr 0 when none is recorded (written: none
    // is written; read: a file from before it was recorded, or another program's).
    float lr;
    // A simulated run's virtual workers and delay model ("uniform:8"), hw/simulate.h; 0 and "" for
    // a real run (written: nothing is written; read: a real run's file, one from before
    // simulations, or another program's).
    int simulate;
    char delay[HW_CKPT_DELAY_CAP];
    // How the run's Hogwild workers wrote their steps (--update: "lockfree", "locked", "atomic");
    // "" when none is recorded (written: none is written; read: a file from before the mode was
    // recorded, whose run was lock-free, or another program's).
    char update[HW_CKPT_UPDATE_CAP];
    // The staleness bound the run's Hogwild workers trained under (--max-staleness S, S >= 0), where
    // has_max_staleness is 1; 0 when none (written: the key only when 1; read: a file without it,
    // from an unbounded run, one from before the bound, or another program's).
    int has_max_staleness;
    int max_staleness;
    // The weights' dtype (--weights): 1 for bfloat16, 0 for float32. Written: the tensors are
    // written as BF16 (the weights rounded to the nearest bfloat16, exact for a bf16 run's) or F32.
    // Read: 1 when a tensor of the file is BF16 (each loads into floats either way).
    int bf16;
} hw_ckpt_meta;

// Writes `weights` (laid out as `model`, host memory) with the model text and meta (NULL: zeros)
// in the __metadata__. The file is written as "<path>.tmp.<pid>" in the same directory, synced,
// and renamed over `path`; a failure (full disk, file too large, bad path) removes the temporary
// file and leaves any existing file at `path` untouched, with a message naming the path and the
// cause. The one failure reported after the rename is a failed fsync of the directory: the new
// file is then in place but may not survive a power loss.
int hw_ckpt_save(const char *path, const hw_model *model, const float *weights, const hw_ckpt_meta *meta);

// Tensors whose names begin with this are a trainer's state beside the weights (the optimizer's
// momentum buffers): hw_ckpt_load skips them (checked as every tensor is, never matched to the
// model), so eval, the sparse readers and old hogwilds' files all read the weights alone.
#define HW_CKPT_STATE_PREFIX "optim."

// A buffer laid out as the model's weights (model->n_weights floats), saved beside them as one F32
// tensor per parameter, named prefix + the parameter's name ("optim.velocity.worker0.fc1.weight")
// with the parameter's shape. `prefix` begins with HW_CKPT_STATE_PREFIX.
typedef struct {
    const char *prefix;
    const float *buffer;
} hw_ckpt_state;

// A text metadata entry saved beside hogwild's own (a key hogwild's metadata does not use).
typedef struct {
    const char *key;
    const char *value;
} hw_ckpt_text;

// What a trainer saves beside the weights: n_states buffers and n_texts metadata entries.
typedef struct {
    const hw_ckpt_state *states;
    int n_states;
    const hw_ckpt_text *texts;
    int n_texts;
} hw_ckpt_extra;

// hw_ckpt_save with `extra` (NULL: none) after the weights: its buffers' tensors after the model's,
// its texts in the __metadata__.
int hw_ckpt_save_extra(const char *path, const hw_model *model, const float *weights, const hw_ckpt_meta *meta,
                       const hw_ckpt_extra *extra);
// Reads the n buffers saved with prefixes[i] (hw_ckpt_state) into buffers[i] (model->n_weights floats
// each), from one read of the header. *found = 0 when the file holds no tensor of any of the
// prefixes (an older file, one saved without that state): the buffers are untouched. Refuses (the
// buffers untouched) a file that holds some of them but not all, or one of another shape or dtype.
int hw_ckpt_load_states(const char *path, const hw_model *model, const char *const *prefixes, float *const *buffers,
                        int n, int *found);
// The text metadata entry `key` (malloc'ed into *value, the caller frees it), or NULL in *value
// when the file has none. Reads only the header.
int hw_ckpt_load_text(const char *path, const char *key, char **value);
// Keeps one file descriptor for the saves to come: each hw_ckpt_save gives it up while it opens
// its files, and takes it back after. A run that will save calls it before training, so that a low
// `ulimit -n` fails at the start (here, or where the run opens what it needs) and not at the first
// save, an epoch later. HW_ERR when no descriptor is left, naming the limit.
int hw_ckpt_keep_descriptor(void);
// Reads a checkpoint into `weights` (host memory, model->n_weights floats; BF16 tensors widened
// exactly); refuses truncated or
// corrupted files and tensors that are missing, unknown to the model, or do not fit the model's
// shapes, naming the file and the tensors. Files without hogwild's metadata (e.g. written by
// safetensors.torch.save_file) load with meta zeroed. meta may be NULL. Tensors may be in any
// order in the file. On failure `weights` and `meta` are left untouched.
int hw_ckpt_load(const char *path, const hw_model *model, float *weights, hw_ckpt_meta *meta);

// The metadata of the checkpoint at `path` into *meta, from its header alone (the weights are
// neither read nor checked: hw_ckpt_load does that). Refuses a file that is no safetensors file,
// or whose metadata values are malformed, naming the key. A file without hogwild's metadata
// reads as zeros (has_seed 0, no schedule).
int hw_ckpt_load_meta(const char *path, hw_ckpt_meta *meta);

// The model file text stored in a checkpoint's metadata (malloc'ed, the caller frees it), or
// NULL in *text when the file has none. Reads and checks only the header. (--eval-only without
// --model runs the checkpoint's own model, on main since i12.)
int hw_ckpt_load_model_text(const char *path, char **text);

#endif
