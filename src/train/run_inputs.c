// inputs: the model and the data of a run, loaded in the parent before any fork, and checked
// against each other (input shape, number of classes).
#include "hw/train.h"
#include "hw/run_outputs.h"

#include "hw/ckpt.h"
#include "hw/err.h"
#include "hw/option.h"
#include "hw/resume_optim.h"

#include <stdio.h>
#include <string.h>

void hw_train_config_init(hw_train_config *config) {
    memset(config, 0, sizeof *config);
    config->world = (hw_world){0, 1, 0};
    config->max_staleness = HW_STALENESS_UNBOUNDED;
}

int hw_train_inputs_load(hw_train_inputs *in, const hw_train_config *config) {
    memset(in, 0, sizeof *in);
    // The model is a file, or the text stored in the checkpoint (--eval-only): messages say which.
    char model[1100], text_name[1100];
    if (config->model_text) {
        snprintf(model, sizeof model, "the model stored in the checkpoint %s", config->model_path);
        snprintf(text_name, sizeof text_name, "%s (its model text)", config->model_path);
    } else {
        snprintf(model, sizeof model, "model %s", config->model_path);
    }
    int loaded = config->model_text ? hw_model_parse(&in->model, config->model_text, text_name)
                                    : hw_model_load(&in->model, config->model_path);
    if (loaded != HW_OK) return HW_ERR;
    if (config->freeze && hw_model_freeze(&in->model, config->freeze) != HW_OK) {
        return hw_error_prefix("the parameters to freeze%s", hw_option_hint(HW_OPTION_FREEZE));
    }
    int trainable = 0;
    for (int p = 0; p < in->model.n_params; p++) trainable += !in->model.params[p].frozen;
    if (!config->eval_only && in->model.n_params == 0) {  // the same: nothing would train
        return hw_fail("%s has no parameters (no linear or conv2d layer): nothing would train", model);
    }
    if (!config->eval_only && trainable == 0) {
        // It would "train" an epoch, change nothing and print a result as if it had.
        return hw_fail("every parameter of %s is frozen, by the parameters to freeze%s or by 'frozen' in the model "
                       "file: nothing would train",
                       model, hw_option_hint(HW_OPTION_FREEZE));
    }
    if (hw_dataset_open_resized(config->data_dir, config->resize_height, config->resize_width, &in->train, &in->test) !=
        HW_OK) {
        return HW_ERR;
    }

    // The model's input must be the data's sample shape: [channels, height, width].
    const hw_shape input = in->model.input;
    int64_t data_dims[3] = {in->train.channels, in->train.height, in->train.width};
    hw_shape data_shape = hw_shape_make(3, data_dims);
    int64_t model_numel = hw_shape_numel(input);
    int fits = hw_shape_equal(input, data_shape) || (input.ndim == 1 && model_numel == hw_shape_numel(data_shape));
    if (!fits) {
        char model_text[64], data_text[64];
        hw_shape_format(input, model_text, sizeof model_text);
        hw_shape_format(data_shape, data_text, sizeof data_text);
        return hw_fail("%s expects input %s but the data in %s has samples of %s", model, model_text, config->data_dir,
                       data_text);
    }
    if (in->model.n_classes < in->train.n_classes) {
        return hw_fail("%s has %d outputs but the data in %s has %d classes", model, in->model.n_classes,
                       config->data_dir, in->train.n_classes);
    }
    in->norm = config->norm;
    if (in->norm.std <= 0) in->norm = hw_dataset_stats(&in->train);  // --normalize auto
    return HW_OK;
}

void hw_train_inputs_free(hw_train_inputs *in) {
    hw_model_free(&in->model);
    hw_dataset_free(&in->train);
    hw_dataset_free(&in->test);
}

int hw_train_load_checkpoint(const char *path, hw_model *model, hw_ckpt_meta *meta) {
    if (hw_ckpt_load(path, model, model->weights, meta) != HW_OK) return HW_ERR;
    if (!hw_weights_finite(model->weights, model->n_weights)) {
        return hw_fail("the checkpoint %s holds weights that are not finite (NaN or inf): it was saved by a run "
                       "that diverged; use an earlier checkpoint",
                       path);
    }
    return HW_OK;
}

int hw_train_resume_weights(const hw_train_config *config, hw_model *model, hw_ckpt_meta *meta) {
    if (hw_train_load_checkpoint(config->resume_path, model, meta) != HW_OK) return HW_ERR;
    if (meta->epoch >= config->epochs) {
        return hw_fail("the checkpoint %s has already trained %d epoch(s); ask for more epochs%s", config->resume_path,
                       meta->epoch, hw_option_hint(HW_OPTION_EPOCHS));
    }
    return HW_OK;
}

int hw_train_start_weights(const hw_train_config *config, hw_model *model, int *first_epoch, int64_t *samples_before) {
    *first_epoch = 0;
    *samples_before = 0;
    if (!config->resume_path) {
        hw_model_init_weights(model, config->seed);
        return HW_OK;
    }
    hw_ckpt_meta meta;
    if (hw_train_resume_weights(config, model, &meta) != HW_OK) return HW_ERR;
    // The trainers that keep their optimizer state restore it themselves (hw_optim_state_resume).
    if (!hw_optim_kept(config)) hw_optim_note_not_kept(config, model);
    *first_epoch = meta.epoch;
    *samples_before = meta.samples_seen;
    return HW_OK;
}
