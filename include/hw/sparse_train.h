// sparse_train: a sparse model read from its model file (src/nn/sparse_model.c) and its two
// trainers, Hogwild and DataParallel (src/train/sparse_train.c), over a sparse dataset
// (hw/sparse_data.h) with the math of hw/sparse_nn.h.
#ifndef HW_SPARSE_TRAIN_H
#define HW_SPARSE_TRAIN_H

#include "hw/nn.h"
#include "hw/sparse_data.h"
#include "hw/sparse_nn.h"
#include "hw/train.h"

// One `default NAME VALUE` line of a sparse model file: a training setting the model trains well
// with, taken where the command line does not give it (the command line knows the names).
enum { HW_SPARSE_MAX_DEFAULTS = 8 };
typedef struct {
    char name[32];
    char value[32];
    int line;  // in the model file, for messages
} hw_sparse_default;

// A model file of a sparse model, three lines (comments after '#'):
//     input sparse [DIM]     the features; without DIM, the data's dimension
//     fm RANK                the factorization machine; 0: the linear model
//     loss logistic|hinge|squared
// then up to HW_SPARSE_MAX_DEFAULTS lines `default NAME VALUE` (e.g. `default lr 0.5`).
typedef struct {
    char path[256];
    int64_t input_dim;  // 0: from the data
    hw_fm_dims dims;    // dims.dim set once the data is known (hw_sparse_model_fit)
    hw_sparse_loss loss;
    const char *text;  // the model file's text (stored in checkpoints), the caller's
    hw_sparse_default defaults[HW_SPARSE_MAX_DEFAULTS];
    int n_defaults;
} hw_sparse_model;

// Reads the model file at `path` into text[0 .. cap) (its first cap - 1 bytes; a model file is
// at most HW_MODEL_FILE_MAX_BYTES), NUL-terminated.
int hw_sparse_model_read(const char *path, char *text, size_t cap);
// Whether `text` is a sparse model's (its first line that is not blank or a comment is `input
// sparse ...`): the way to tell one from a dense model's file without parsing it.
int hw_sparse_model_text_is(const char *text);
// Parses a sparse model file; errors name "file:line" and what was expected.
int hw_sparse_model_parse(hw_sparse_model *model, const char *text, const char *name);
// Sets the model's dimension from the data's, and checks the two fit: the loss against the
// labels (logistic and hinge need binary ones; squared real ones).
int hw_sparse_model_fit(hw_sparse_model *model, const hw_sparse_set *train);
// The model's layers, parameter count and loss, one line each (--summary).
void hw_sparse_model_summary(const hw_sparse_model *model, FILE *out);

// The model as a checkpoint names its flat parameters (hw/ckpt.h works on an hw_model): two
// tensors, "fm.rows" [dim, 1 + rank] (per feature its weight, then its factors) and "fm.bias" [1].
// Only the fields the checkpoints read are set (path, text, params, n_weights).
void hw_sparse_model_ckpt_view(const hw_sparse_model *model, hw_model *view);

// Trains `model` on `train` (config: mode, workers or replicas, epochs, batch size, lr, momentum,
// weight decay, seed), evaluating on `test` after every epoch and printing a line per epoch
// unless config->quiet; with config->save_path, a checkpoint (safetensors) at every epoch end;
// with config->resume_path, it starts from that checkpoint's weights and epoch count; result gets the last test loss (the MSE for the squared loss), accuracy
// (binary losses) and speed. `weights` (hw_fm_n_weights floats) are initialised here.
int hw_train_sparse(const hw_train_config *config, const hw_sparse_model *model, const hw_sparse_set *train,
                    const hw_sparse_set *test, hw_train_result *result);

// The mean loss and the examples predicted right (binary losses) of `weights` over `set`.
void hw_sparse_evaluate(const hw_sparse_model *model, const float *weights, const hw_sparse_set *set, double *loss,
                        int64_t *correct);

#endif
