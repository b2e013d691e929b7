// train_command: a training run and --eval-only, from the pre-flight checks to the lines printed
// (src/cli/train_command.h).
#include "cli/train_command.h"

#include "cli/options.h"
#include "cli/preflight.h"
#include "cli/sparse_train_command.h"
#include "cli/usage.h"
#include "hw/blas.h"
#include "hw/ckpt.h"
#include "hw/comm.h"
#include "hw/err.h"
#include "hw/eval_only.h"
#include "hw/nn.h"
#include "hw/shm.h"
#include "hw/signals.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

// The libraries a run computes with, before it loads anything: the BLAS, loaded while this is the
// only thread and before any fork (hw_blas_open), so that the memory check counts it; and the CPU
// kernels HOGWILD_CPU_PATH chooses. HW_OK, or HW_ERR (hw_error).
static int libraries_open(void) {
    if (hw_blas_open() != HW_OK) return HW_ERR;
    return hw_nn_kernels_select(getenv("HOGWILD_CPU_PATH"));
}

// --save through a symbolic link writes the file the link points to: `--resume X --save X` with X
// a link then updates the checkpoint X names, and the link stays a link.
static void save_through_link(hw_train_config *config) {
    static char save_target[PATH_MAX];
    struct stat link;
    if (config->save_path && lstat(config->save_path, &link) == 0 && S_ISLNK(link.st_mode) &&
        realpath(config->save_path, save_target)) {
        config->save_path = save_target;
    }
}

// The run's first lines, unless --quiet: what trains on what, and the BLAS and CPU kernels in use.
static void print_run_header(const hw_train_config *config, const hw_train_inputs *in, const char *capped) {
    if (config->quiet) return;
    if (capped[0]) printf("hogwild: %s\n", capped);
    char ranks[32] = "";
    if (config->world.size > 1) snprintf(ranks, sizeof ranks, "%d ranks x ", config->world.size);
    int hogwild = config->mode == HW_MODE_HOGWILD;
    // A schedule other than the constant one is named after the rate it starts from.
    char schedule[128] = "";
    if (!hw_lr_is_constant(&config->lr_schedule)) {
        char spec[64];
        hw_lr_schedule_format(&config->lr_schedule, spec, sizeof spec);
        snprintf(schedule, sizeof schedule, " (%s, warm-up %lld samples)", spec, (long long)config->lr_schedule.warmup);
    }
    // A simulation names its workers and their delay model.
    char simulated[HW_DELAY_SPEC_CAP + 64] = "";
    if (config->simulate) {
        snprintf(simulated, sizeof simulated, " (delay %s: mean %.3g, at most %d updates)", config->delay.spec,
                 hw_delay_mean(&config->delay), config->delay.max);
    }
    // A lock or atomic adds (--update), bf16 weights (--weights: the shared weights in bfloat16, 2
    // bytes each) and a staleness bound named beside the workers: the defaults, lock-free, f32 and
    // no bound, are not.
    char parts[96] = "", update[104] = "";
    size_t used = 0;
    if (config->update != HW_UPDATE_LOCKFREE) {
        used +=
            (size_t)snprintf(parts + used, sizeof parts - used, ", %s updates", hw_update_mode_name(config->update));
    }
    if (config->weights == HW_WEIGHTS_BF16 && used < sizeof parts) {
        used += (size_t)snprintf(parts + used, sizeof parts - used, ", bf16 weights");
    }
    if (config->max_staleness != HW_STALENESS_UNBOUNDED && used < sizeof parts) {
        snprintf(parts + used, sizeof parts - used, ", max staleness %d", config->max_staleness);
    }
    if (parts[0]) snprintf(update, sizeof update, " (%s)", parts + 2);
    printf("hogwild: %s%s, %s%s %d%s, %s on %s (%lld train / %lld test samples), %d epoch(s), batch %d, lr %g%s, "
           "momentum %g, %zu parameters, sharing %s\n",
           config->simulate ? "simulated Hogwild"
           : hogwild        ? "Hogwild"
                            : "DataParallel",
           update, ranks,
           config->simulate ? "virtual workers"
           : hogwild        ? "workers"
                            : "replicas",
           hogwild ? config->workers : config->replicas, simulated, config->model_path, config->data_dir,
           (long long)in->train.n, (long long)in->test.n, config->epochs, config->batch_size, (double)config->lr,
           schedule, (double)config->momentum, in->model.n_weights, hw_sharing_strategy_get());
    printf("hogwild: BLAS %s; CPU kernels %s\n", hw_blas_info(), hw_nn_kernels_info());
    fflush(stdout);
}

// A trainer's failure, printed. A rank of an mpirun job ends the whole job at once: the other
// ranks may be waiting for this one in a collective.
static int run_failure(const hw_train_config *config) {
    if (config->world.size == 1) return cli_failure("hogwild");
    fprintf(stderr, "hogwild (rank %d of %d): %s\n", config->world.rank, config->world.size, hw_error());
    fflush(stderr);
    hw_comm_abort(HW_EXIT_FAILURE);
    return HW_EXIT_FAILURE;
}

// The run once its janitor is started: the checks, the inputs, the trainer; the exit status.
static int train_run(hw_train_config *config) {
    if (preflight_stack() != HW_OK || preflight_data(config) != HW_OK || libraries_open() != HW_OK) {
        return cli_failure("hogwild");
    }
    save_through_link(config);
    hw_train_inputs in;
    char capped[512] = "";
    int loaded = hw_train_inputs_load(&in, config);
    if (loaded == HW_OK) preflight_fit_batches(config, &in, capped, sizeof capped);
    if (loaded != HW_OK || preflight_warmup(config, in.train.n) != HW_OK || preflight_outputs(config) != HW_OK ||
        (config->save_path && hw_ckpt_keep_descriptor() != HW_OK) || preflight_memory(config, &in, 0) != HW_OK) {
        int status = cli_failure("hogwild");
        hw_train_inputs_free(&in);
        return status;
    }
    print_run_header(config, &in, capped);
    hw_train_result result;
    int status = config->simulate                  ? hw_train_simulate(config, &in, &result)
                 : config->mode == HW_MODE_HOGWILD ? hw_train_hogwild(config, &in, &result)
                                                   : hw_train_dataparallel(config, &in, &result);
    hw_train_inputs_free(&in);
    if (status != HW_OK) return run_failure(config);
    hw_comm_finalize();
    if (result.interrupted_by) return 128 + result.interrupted_by;
    return HW_EXIT_OK;
}

int cli_train_run(hw_train_config *config) {
    // A job of several ranks starts its janitor before anything starts a thread (the GPU
    // libraries, MPI, the loaders): the janitor is a fork.
    if (config->world.size > 1 && hw_comm_built() && hw_mpirun_cleanup_start(&config->world) != HW_OK) {
        return cli_failure("hogwild");
    }
    // The sparse models (a model file, or the model text a --resume checkpoint records) have a
    // trainer of their own (src/train/sparse_train.c), whose workers' join handles a stop signal
    // as the dense trainers' do.
    if (cli_sparse_model_given(config)) return cli_sparse_train_run(config);
    // A stop signal is a request to stop at every phase of the run, the set-up (the checks, loading
    // the data) and the first evaluation included: the trainer then stops before it trains, says
    // so and saves (--save), as it does for a signal while training.
    hw_stop_signals_catch();
    int status = train_run(config);
    hw_stop_signals_release();
    return status;
}

// The network --eval-only evaluates without --model: the one the checkpoint was trained as, whose
// text its metadata keeps, so that --eval-only works from any folder. It points config at that
// text; *text is the caller's to free once the inputs are loaded (NULL with --model).
static int eval_only_model(hw_train_config *config, int model_given, char **text) {
    *text = NULL;
    if (model_given) return HW_EXIT_OK;
    if (hw_ckpt_load_model_text(config->resume_path, text) != HW_OK) return cli_failure("hogwild");
    if (!*text) {
        // Not models/lenet.model by default: that would evaluate a network the checkpoint was
        // perhaps never trained as, and any mismatch would read as a fault of the checkpoint.
        fprintf(stderr,
                "hogwild: the checkpoint %s holds no model text (it was not written by hogwild): give the "
                "network it was trained as with --model FILE\n",
                config->resume_path);
        return HW_EXIT_FAILURE;
    }
    config->model_text = *text;
    config->model_path = config->resume_path;
    return HW_EXIT_OK;
}

static int eval_only_run(hw_train_config *config, int model_given) {
    char *model_text = NULL;
    int status = preflight_stack() != HW_OK || libraries_open() != HW_OK ? cli_failure("hogwild") : HW_EXIT_OK;
    if (status == HW_EXIT_OK) status = eval_only_model(config, model_given, &model_text);
    if (status == HW_EXIT_OK && cli_sparse_model_given(config)) {
        status = cli_sparse_eval_only_run(config);
        free(model_text);
        config->model_text = NULL;
        return status;
    }
    if (status == HW_EXIT_OK && preflight_data(config) != HW_OK) status = cli_failure("hogwild");
    if (status != HW_EXIT_OK) {
        free(model_text);
        return status;
    }
    hw_train_inputs in;
    hw_eval_only_result r;
    char capped[512] = "";  // only the test batch applies, and it is capped in silence
    int loaded = hw_train_inputs_load(&in, config);
    if (loaded == HW_OK) preflight_fit_batches(config, &in, capped, sizeof capped);
    if (loaded != HW_OK || preflight_memory(config, &in, 1) != HW_OK || hw_eval_only_run(config, &in, &r) != HW_OK) {
        status = cli_failure("hogwild");
    } else if (r.interrupted_by) {
        fprintf(stderr, "hogwild: interrupted by %s: the evaluation of %s stopped before its end; no result\n",
                hw_stop_signal_name(r.interrupted_by), config->resume_path);
        status = 128 + r.interrupted_by;
    } else {
        printf("%s (epoch %d, %lld samples seen): test loss %.4f, accuracy %.2f%% on %lld samples of %s\n",
               config->resume_path, r.epoch, (long long)r.samples_seen, r.loss, r.accuracy, (long long)r.n_test,
               config->data_dir);
    }
    hw_train_inputs_free(&in);
    free(model_text);
    config->model_text = NULL;
    return status;
}

int cli_eval_only_run(hw_train_config *config, int model_given) {
    // A stop signal is a request to stop here as in a training run, at every phase: the evaluation
    // stops between two batches, and the command says so and exits 128 + the signal.
    hw_stop_signals_catch();
    int status = eval_only_run(config, model_given);
    hw_stop_signals_release();
    return status;
}
