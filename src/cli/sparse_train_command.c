// sparse_train_command: a training run of a sparse model (src/cli/sparse_train_command.h): the
// checks of what such a run does not do yet, the model and the data loaded and fitted together,
// the trainer (hw_train_sparse), and the lines printed.
#include "cli/sparse_train_command.h"

#include "cli/options.h"
#include "cli/preflight.h"
#include "cli/train_options.h"
#include "cli/usage.h"
#include "hw/ckpt.h"
#include "hw/err.h"
#include "hw/signals.h"
#include "hw/file.h"
#include "hw/option.h"
#include "hw/run_outputs.h"
#include "hw/shm.h"
#include "hw/sparse_train.h"
#include "hw/train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_sparse_model_is(const char *model_path) {
    static char text[HW_MODEL_FILE_MAX_BYTES + 1];
    if (!model_path || hw_sparse_model_read(model_path, text, sizeof text) != HW_OK) return 0;
    return hw_sparse_model_text_is(text);
}

int cli_sparse_model_given(const hw_train_config *config) {
    if (config->model_text) return hw_sparse_model_text_is(config->model_text);
    return cli_sparse_model_is(config->model_path);
}

// The run's model: a checkpoint's text (--eval-only without --model), else the model file.
static int model_load(hw_sparse_model *model, const hw_train_config *config) {
    static char text[HW_MODEL_FILE_MAX_BYTES + 1];
    if (config->model_text) return hw_sparse_model_parse(model, config->model_text, config->model_path);
    if (hw_sparse_model_read(config->model_path, text, sizeof text) != HW_OK) return HW_ERR;
    return hw_sparse_model_parse(model, text, config->model_path);
}

// The settings a sparse model file may give: those of how it is trained, not of where or how much
// it writes or which hardware runs it.
static const hw_option default_options[] = {HW_OPTION_LR, HW_OPTION_MOMENTUM, HW_OPTION_WEIGHT_DECAY,
                                            HW_OPTION_BATCH_SIZE, HW_OPTION_EPOCHS};

static int default_option_allowed(const cli_option *o) {
    for (size_t i = 0; o && i < sizeof default_options / sizeof default_options[0]; i++) {
        if (o->id == default_options[i]) return 1;
    }
    return 0;
}

// The names of default_options, ", " between them, into names[0 .. cap).
static void default_names(char *names, size_t cap) {
    names[0] = '\0';
    for (size_t k = 0; k < sizeof default_options / sizeof default_options[0]; k++) {
        const cli_option *o = cli_option_of(&cli_train_command, default_options[k]);
        size_t used = strlen(names);
        if (o) snprintf(names + used, cap - used, "%s%s", k ? ", " : "", o->name);
    }
}

// The text of the run's model as cli_sparse_defaults_apply chooses it: config->model_text itself,
// else (--resume without --model) the checkpoint's or the model file's, read into buf[0 .. cap);
// "" when there is none (a checkpoint without one) or it cannot be read (the run reports that).
// *name gets the name messages give it: the file's path or the checkpoint's.
static const char *defaults_model_text(const hw_train_config *config, const cli_parsed *given, char *buf, size_t cap,
                                       const char **name) {
    buf[0] = '\0';
    *name = config->model_path;
    if (config->model_text) return config->model_text;
    if (config->resume_path && !cli_given(given, HW_OPTION_MODEL)) {
        char *stored = NULL;
        if (hw_ckpt_load_model_text(config->resume_path, &stored) == HW_OK && stored) snprintf(buf, cap, "%s", stored);
        free(stored);
        hw_error_clear();
        *name = config->resume_path;
        return buf;
    }
    if (config->model_path && hw_sparse_model_read(config->model_path, buf, cap) != HW_OK) {
        buf[0] = '\0';
        hw_error_clear();
    }
    return buf;
}

int cli_sparse_defaults_apply(hw_train_config *config, const cli_parsed *given) {
    static char buf[HW_MODEL_FILE_MAX_BYTES + 1];
    const char *name;
    const char *text = defaults_model_text(config, given, buf, sizeof buf, &name);
    hw_sparse_model model;
    if (!hw_sparse_model_text_is(text)) return HW_EXIT_OK;
    if (hw_sparse_model_parse(&model, text, name) != HW_OK) {
        hw_error_clear();  // the run reads the file again and says what is wrong with it
        return HW_EXIT_OK;
    }
    for (int i = 0; i < model.n_defaults; i++) {
        const hw_sparse_default *d = &model.defaults[i];
        const cli_option *o = cli_option_named(&cli_train_command, d->name);
        if (!default_option_allowed(o)) {
            char names[160];
            default_names(names, sizeof names);
            hw_fail("%s:%d: `default %s` is no setting a model file may give (those: %s)", name, d->line, d->name,
                    names);
            return cli_failure("hogwild");
        }
        if (cli_given(given, o->id)) continue;
        char error[512];
        if (cli_option_apply(o, d->value, config, error, sizeof error) != HW_EXIT_OK) {
            hw_fail("%s:%d: `default %s %s`: %s", name, d->line, d->name, d->value, error);
            return cli_failure("hogwild");
        }
        if (o->id == HW_OPTION_MOMENTUM && config->momentum == 0 && config->nesterov) {
            const char *nesterov = cli_option_of(&cli_train_command, HW_OPTION_NESTEROV)->name;
            return cli_usage_error("--%s needs --%s > 0, and the model file %s:%d sets it to 0 (`default %s %s`): give "
                                   "--%s",
                                   nesterov, o->name, name, d->line, d->name, d->value, o->name);
        }
    }
    return HW_EXIT_OK;
}

// What a sparse run refuses, naming why, before it loads anything: the GPU (its sparse kernels
// are later work) and the outputs and modes the sparse trainer does not have yet.
static int sparse_unsupported(const hw_train_config *c) {
    const char *what = c->device.type == HW_DEVICE_CUDA           ? "--device cuda (the GPU has no sparse kernels yet)"
                       : c->n_gpus                                ? "--gpus (the GPU has no sparse kernels yet)"
                       : c->world.size > 1                        ? "mpirun ranks"
                       : c->measure && c->mode != HW_MODE_HOGWILD ? "--measure with DataParallel"
                       : c->simulate                              ? "--simulate"
                       : c->weights != HW_WEIGHTS_F32             ? "--weights bf16"
                       : c->max_staleness != HW_STALENESS_UNBOUNDED ? "--max-staleness"
                       : c->freeze                                  ? "--freeze"
                       : c->eval_every                              ? "--eval-every"
                                                                    : NULL;
    if (!what) return HW_OK;
    return hw_fail("the sparse model %s cannot run with %s: the sparse trainer has no such part yet", c->model_path,
                   what);
}

// A metrics file's rows need a test accuracy (compare ranks runs by it), which a squared loss has
// none of: its test loss is the MSE. Checked once the model is read.
static int sparse_metrics_fit(const hw_train_config *c, const hw_sparse_model *m) {
    if (!c->metrics_path || m->loss != HW_LOSS_SQUARED) return HW_OK;
    return hw_fail("the sparse model %s has the squared loss, and a metrics file%s needs a test accuracy, which it "
                   "has none of (it prints the MSE and the RMSE): its runs are not rows compare can rank",
                   c->model_path, hw_option_hint(HW_OPTION_METRICS));
}

int cli_sparse_summary_print(const hw_train_config *config) {
    hw_sparse_model model;
    if (model_load(&model, config) != HW_OK) return cli_failure("hogwild");
    // With a sparse --data folder the dimension is known: the data's, or the file's checked against it.
    if (config->data_dir && hw_sparse_dataset_kind(config->data_dir) != HW_SPARSE_NONE) {
        hw_sparse_set train = {0}, test = {0};
        int fits = hw_sparse_dataset_open_dim(config->data_dir, model.input_dim, &train, &test) == HW_OK &&
                   hw_sparse_model_fit(&model, &train) == HW_OK;
        hw_sparse_set_free(&train);
        hw_sparse_set_free(&test);
        if (!fits) return cli_failure("hogwild");
    }
    hw_sparse_model_summary(&model, stdout);
    return HW_EXIT_OK;
}

static void header_print(const hw_train_config *c, const hw_sparse_model *m, const hw_sparse_set *train,
                         const hw_sparse_set *test) {
    if (c->quiet) return;
    int hogwild = c->mode == HW_MODE_HOGWILD;
    char schedule[96] = "";
    if (!hw_lr_is_constant(&c->lr_schedule)) {
        char text[64];
        hw_lr_schedule_format(&c->lr_schedule, text, sizeof text);
        snprintf(schedule, sizeof schedule, " (%s, warm-up %lld samples)", text, (long long)c->lr_schedule.warmup);
    }
    char update[48] = "";  // a lock or atomic adds named beside the workers, as for a dense run
    if (c->update != HW_UPDATE_LOCKFREE)
        snprintf(update, sizeof update, " (%s updates)", hw_update_mode_name(c->update));
    printf("hogwild: %s%s, %s %d, %s on %s (%lld train / %lld test examples, %lld features), %d epoch(s), batch %d, "
           "lr %g%s, momentum %g, weight decay %g, %zu parameters, sharing %s\n",
           hogwild ? "Hogwild" : "DataParallel", update, hogwild ? "workers" : "replicas",
           hogwild ? c->workers : c->replicas, c->model_path, c->data_dir, (long long)train->n, (long long)test->n,
           (long long)m->dims.dim, c->epochs, c->batch_size, (double)c->lr, schedule, (double)c->momentum,
           (double)c->weight_decay, hw_fm_n_weights(&m->dims), hw_sharing_strategy_get());
    fflush(stdout);
}

static void result_print(const hw_train_config *c, const hw_sparse_model *m, const hw_train_result *r) {
    if (m->loss == HW_LOSS_SQUARED) {
        printf("done: test MSE %.5f, RMSE %.5f, %.0f examples/s over %.2f s of training\n", r->test_loss,
               sqrt(r->test_loss), r->samples_per_second, r->train_seconds);
    } else {
        printf("done: test loss %.5f, accuracy %.2f%%, %.0f examples/s over %.2f s of training\n", r->test_loss,
               r->test_accuracy, r->samples_per_second, r->train_seconds);
    }
    (void)c;
}

// The model and the data, fitted together. HW_EXIT_OK, or HW_EXIT_FAILURE with the message
// printed and nothing to free.
static int inputs_load(hw_train_config *config, hw_sparse_model *model, hw_sparse_set *train, hw_sparse_set *test) {
    if (sparse_unsupported(config) != HW_OK || model_load(model, config) != HW_OK ||
        sparse_metrics_fit(config, model) != HW_OK) {
        return cli_failure("hogwild");
    }
    if (hw_sparse_dataset_kind(config->data_dir) == HW_SPARSE_NONE) {
        fprintf(stderr,
                "hogwild: the sparse model %s needs a sparse dataset folder (train.libsvm and test.libsvm, or "
                "ratings as train.tsv and test.tsv), and %s holds none: write one with `hogwild synth --kind sparse "
                "--dir %s`\n",
                config->model_path, config->data_dir, config->data_dir);
        return HW_EXIT_FAILURE;
    }
    if (hw_sparse_dataset_open_dim(config->data_dir, model->input_dim, train, test) != HW_OK ||
        hw_sparse_model_fit(model, train) != HW_OK) {
        hw_sparse_set_free(train);
        hw_sparse_set_free(test);
        return cli_failure("hogwild");
    }
    return HW_EXIT_OK;
}

// The run under the stop signals' handler, as a dense run: a stop at any phase ends it saying so,
// with 128 + the signal, and saves the weights trained so far (--save).
static int sparse_train_run(hw_train_config *config) {
    hw_sparse_model model;
    hw_sparse_set train = {0}, test = {0};
    int status = inputs_load(config, &model, &train, &test);
    if (status != HW_EXIT_OK) return status;
    if (preflight_warmup(config, train.n) != HW_OK || preflight_outputs(config) != HW_OK ||
        (config->save_path && hw_ckpt_keep_descriptor() != HW_OK)) {
        hw_sparse_set_free(&train);
        hw_sparse_set_free(&test);
        return cli_failure("hogwild");
    }
    header_print(config, &model, &train, &test);
    hw_train_result result;
    status = hw_train_sparse(config, &model, &train, &test, &result);
    hw_sparse_set_free(&train);
    hw_sparse_set_free(&test);
    if (status != HW_OK) return cli_failure("hogwild");
    if (result.interrupted_by) return 128 + result.interrupted_by;
    result_print(config, &model, &result);
    return HW_EXIT_OK;
}

int cli_sparse_train_run(hw_train_config *config) {
    hw_stop_signals_catch();
    int status = sparse_train_run(config);
    hw_stop_signals_release();
    if (status == HW_EXIT_OK && hw_stop_signal()) {
        // A stop that came after the last epoch: the run is whole, saved and written.
        status = 128 + hw_stop_signal();
    }
    return status;
}

// A checkpoint whose test loss has diverged: refused naming it, as hw_eval_only_run does.
static int diverged_refusal(const hw_train_config *config, double loss) {
    char text[48];
    hw_loss_describe(text, sizeof text, loss);
    fprintf(stderr,
            "hogwild: the checkpoint %s gives a test loss of %s on %s: its weights have blown up, as a diverged "
            "run's do; use an earlier checkpoint\n",
            config->resume_path, text, config->data_dir);
    return HW_EXIT_FAILURE;
}

int cli_sparse_eval_only_run(hw_train_config *config) {
    hw_sparse_model model;
    hw_sparse_set train = {0}, test = {0};
    int status = inputs_load(config, &model, &train, &test);
    if (status != HW_EXIT_OK) return status;
    hw_model view;
    hw_sparse_model_ckpt_view(&model, &view);
    float *weights = malloc(view.n_weights * sizeof *weights);
    hw_ckpt_meta meta;
    double loss = NAN;
    int64_t correct = 0;
    view.weights = weights;
    // The dense evaluation's rules (hw_eval_only_run): weights that are not finite are refused, and
    // so are finite ones whose test loss has blown up; neither is a result.
    if (!weights || hw_train_load_checkpoint(config->resume_path, &view, &meta) != HW_OK) {
        status = cli_failure("hogwild");
    } else {
        hw_sparse_evaluate(&model, weights, &test, &loss, &correct);
        if (!hw_stop_signal() && hw_loss_diverged(loss)) status = diverged_refusal(config, loss);
    }
    if (status == HW_EXIT_OK && hw_stop_signal()) {
        // A stop signal (caught by cli_eval_only_run) came while loading or evaluating: no result.
        fprintf(stderr, "hogwild: interrupted by %s: the evaluation of %s stopped before its end; no result\n",
                hw_stop_signal_name(hw_stop_signal()), config->resume_path);
        status = 128 + hw_stop_signal();
    } else if (status == HW_EXIT_OK) {
        printf("%s (epoch %d, %lld samples seen): test %s %.5f", config->resume_path, meta.epoch,
               (long long)meta.samples_seen, model.loss == HW_LOSS_SQUARED ? "MSE" : "loss", loss);
        if (model.loss == HW_LOSS_SQUARED) printf(", RMSE %.5f", sqrt(loss));
        if (model.loss != HW_LOSS_SQUARED) printf(", accuracy %.2f%%", 100.0 * (double)correct / (double)test.n);
        printf(" on %lld examples of %s\n", (long long)test.n, config->data_dir);
    }
    free(weights);
    hw_sparse_set_free(&train);
    hw_sparse_set_free(&test);
    return status;
}
