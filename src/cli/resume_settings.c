// resume_settings: the settings --resume restores from a checkpoint's metadata
// (src/cli/resume_settings.h). The weights, the epoch and the samples seen are restored where the
// trainer loads the weights (hw_train_start_weights); the seed, the rate and the schedule must be known
// before that, since the initialisation, the shuffling, the workers' seeds and every step's rate
// come from them.
#include "cli/resume_settings.h"
#include "cli/sparse_train_command.h"

#include "cli/usage.h"
#include "hw/bf16.h"
#include "hw/ckpt.h"
#include "hw/err.h"
#include "hw/optim.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The model text restored from the checkpoint: config->model_text points at it for the rest of
// the process.
static char *restored_model_text;

// The model: the text the checkpoint records unless --model is given, as --eval-only reads it: the
// default model file would be a network the checkpoint was perhaps never trained as, and one of
// the same shapes (another activation) would load without a word. A checkpoint that records none
// (another program's) keeps --model's file, to whose shapes its tensors must fit.
static int restore_model(hw_train_config *config, const cli_parsed *given) {
    if (cli_given(given, HW_OPTION_MODEL)) return HW_EXIT_OK;
    char *text = NULL;
    if (hw_ckpt_load_model_text(config->resume_path, &text) != HW_OK) return cli_failure("hogwild");
    if (!text) return HW_EXIT_OK;
    free(restored_model_text);
    restored_model_text = text;
    config->model_text = text;
    config->model_path = config->resume_path;
    return HW_EXIT_OK;
}

// The seed: the checkpoint's unless --seed is given. A checkpoint that records none (written by
// another program) leaves the run's, which stderr names: nothing restores it.
static void restore_seed(hw_train_config *config, const cli_parsed *given, const hw_ckpt_meta *meta, int say) {
    int seed_given = cli_given(given, HW_OPTION_SEED);
    if (!meta->has_seed) {
        if (say) {
            fprintf(stderr, "hogwild: the checkpoint %s records no seed: this run uses seed %" PRIu64 "%s\n",
                    config->resume_path, config->seed, seed_given ? " as given" : " (--seed's default)");
        }
        return;
    }
    if (!seed_given) {
        config->seed = meta->seed;
        return;
    }
    if (config->seed != meta->seed && say) {
        fprintf(stderr,
                "hogwild: the checkpoint %s was trained with seed %" PRIu64 "; this run uses --seed %" PRIu64
                " as given (its shuffling and dropout are not those of the run that saved it)\n",
                config->resume_path, meta->seed, config->seed);
    }
}

// The base learning rate: the checkpoint's unless --lr is given. One that records none (from
// before it was recorded, or another program's) leaves the run's, which stderr names.
static void restore_lr(hw_train_config *config, const cli_parsed *given, const hw_ckpt_meta *meta, int say) {
    int lr_given = cli_given(given, HW_OPTION_LR);
    if (!(meta->lr > 0)) {
        if (say) {
            fprintf(stderr, "hogwild: the checkpoint %s records no learning rate: this run uses --lr %g%s\n",
                    config->resume_path, (double)config->lr, lr_given ? " as given" : " (its default)");
        }
        return;
    }
    if (!lr_given) {
        config->lr = meta->lr;
        return;
    }
    if (config->lr != meta->lr && say) {
        fprintf(stderr, "hogwild: the checkpoint %s was trained with --lr %g; this run uses --lr %g as given\n",
                config->resume_path, (double)meta->lr, (double)config->lr);
    }
}

// The schedule and its warm-up: each the checkpoint's unless given. A checkpoint from before
// schedules records none, and trained at a constant rate: the run's own (the default, constant)
// stands.
static int restore_schedule(hw_train_config *config, const cli_parsed *given, const hw_ckpt_meta *meta, int say) {
    if (!meta->lr_schedule[0]) return HW_EXIT_OK;
    hw_lr_schedule recorded;
    if (hw_lr_schedule_parse(meta->lr_schedule, &recorded) != HW_OK) {
        fprintf(stderr, "hogwild: the checkpoint %s records a learning-rate schedule this hogwild cannot read: %s\n",
                config->resume_path, hw_error());
        return HW_EXIT_FAILURE;
    }
    recorded.warmup = meta->lr_warmup;
    hw_lr_schedule *schedule = &config->lr_schedule;
    int64_t warmup = cli_given(given, HW_OPTION_WARMUP) ? schedule->warmup : recorded.warmup;
    if (!cli_given(given, HW_OPTION_LR_SCHEDULE)) *schedule = recorded;
    schedule->warmup = warmup;
    char was[64], now[64];
    hw_lr_schedule_format(&recorded, was, sizeof was);
    hw_lr_schedule_format(schedule, now, sizeof now);
    if (say && (strcmp(was, now) != 0 || recorded.warmup != schedule->warmup)) {
        fprintf(stderr,
                "hogwild: the checkpoint %s was trained with the learning-rate schedule %s (warm-up %" PRId64
                " samples); this run uses %s (warm-up %" PRId64 " samples) as given\n",
                config->resume_path, was, recorded.warmup, now, schedule->warmup);
    }
    return HW_EXIT_OK;
}

// How a run trained, for the message of same_simulation: "--simulate 8 --delay uniform:8" or
// "real workers".
static void simulation_describe(int simulate, const char *delay, char *out, size_t cap) {
    if (simulate) snprintf(out, cap, "--simulate %d --delay %s", simulate, delay);
    else snprintf(out, cap, "real workers (no --simulate)");
}

// A simulation's checkpoint goes on as the same simulation, and a real run's as a real run: the
// weights of one are not where the other would have been, and a resumed run's metrics would mix
// the two. Refused when they differ (a checkpoint that records no seed is another program's, and
// says nothing of how it trained).
static int same_simulation(const hw_train_config *config, const hw_ckpt_meta *meta) {
    if (!meta->has_seed) return HW_EXIT_OK;
    const char *delay = config->simulate ? config->delay.spec : "";
    if (meta->simulate == config->simulate && strcmp(meta->delay, delay) == 0) return HW_EXIT_OK;
    char was[HW_CKPT_DELAY_CAP + 64], now[HW_CKPT_DELAY_CAP + 64];
    simulation_describe(meta->simulate, meta->delay, was, sizeof was);
    simulation_describe(config->simulate, delay, now, sizeof now);
    return cli_usage_error("the checkpoint %s was trained by %s; this run asks for %s: resume it as it trained",
                           config->resume_path, was, now);
}

// The update mode: the checkpoint's unless --update is given. One that records none (from before
// it was recorded, or another program's) leaves the run's own (the default, lockfree, which every
// run before it was).
static int restore_update(hw_train_config *config, const cli_parsed *given, const hw_ckpt_meta *meta, int say) {
    // Only CPU Hogwild in one process has the modes (the rules refuse --update elsewhere).
    int applies = config->mode == HW_MODE_HOGWILD && config->device.type != HW_DEVICE_CUDA && config->world.size == 1;
    if (!meta->update[0] || !applies) return HW_EXIT_OK;
    hw_update_mode recorded;
    if (hw_update_mode_parse(meta->update, &recorded) != HW_OK) {
        fprintf(stderr, "hogwild: the checkpoint %s records an update mode this hogwild cannot read: %s\n",
                config->resume_path, hw_error());
        return HW_EXIT_FAILURE;
    }
    if (!cli_given(given, HW_OPTION_UPDATE)) {
        config->update = recorded;
    } else if (config->update != recorded && say) {
        fprintf(stderr, "hogwild: the checkpoint %s was trained with --update %s; this run uses --update %s as given\n",
                config->resume_path, meta->update, hw_update_mode_name(config->update));
    }
    return HW_EXIT_OK;
}

// The weights' dtype: the checkpoint's (its tensors' dtype, BF16 or F32) unless --weights is
// given, where it applies: CPU Hogwild in one process, real workers, not --update atomic (the
// rules refuse bf16 elsewhere), a dense model (the sparse trainer keeps float weights: a BF16 file
// widens into them). Either dtype loads into either run: a BF16 file widens to floats exactly, and
// a bf16 run rounds float weights to the nearest bfloat16 at its start. Call after restore_model.
static void restore_weights(hw_train_config *config, const cli_parsed *given, const hw_ckpt_meta *meta, int say) {
    int applies = config->mode == HW_MODE_HOGWILD && config->device.type != HW_DEVICE_CUDA && config->n_gpus == 0 &&
                  config->world.size == 1 && !config->simulate && config->update != HW_UPDATE_ATOMIC &&
                  !cli_sparse_model_given(config);
    hw_weights_dtype recorded = meta->bf16 ? HW_WEIGHTS_BF16 : HW_WEIGHTS_F32;
    if (!applies) return;
    if (!cli_given(given, HW_OPTION_WEIGHTS)) {
        config->weights = recorded;
    } else if (config->weights != recorded && say) {
        fprintf(stderr, "hogwild: the checkpoint %s holds %s weights; this run uses --weights %s as given\n",
                config->resume_path, hw_weights_dtype_name(recorded), hw_weights_dtype_name(config->weights));
    }
}

// "--max-staleness 2" or "no --max-staleness" (no bound), for restore_staleness's message.
static void staleness_describe(int bound, char *out, size_t cap) {
    if (bound == HW_STALENESS_UNBOUNDED) snprintf(out, cap, "no --max-staleness");
    else snprintf(out, cap, "--max-staleness %d", bound);
}

// The staleness bound: the checkpoint's unless --max-staleness is given (none included), as
// --update's mode. A checkpoint that records none trained without a bound, the run's own default.
static void restore_staleness(hw_train_config *config, const cli_parsed *given, const hw_ckpt_meta *meta, int say) {
    // Only CPU Hogwild in one process has the bound (the rules refuse --max-staleness elsewhere).
    int applies = config->mode == HW_MODE_HOGWILD && config->device.type != HW_DEVICE_CUDA && config->n_gpus == 0 &&
                  config->world.size == 1 && !config->simulate;
    if (!applies) return;
    int recorded = meta->has_max_staleness ? meta->max_staleness : HW_STALENESS_UNBOUNDED;
    if (!cli_given(given, HW_OPTION_MAX_STALENESS)) {
        config->max_staleness = recorded;
    } else if (config->max_staleness != recorded && say) {
        char was[48], now[48];
        staleness_describe(recorded, was, sizeof was);
        staleness_describe(config->max_staleness, now, sizeof now);
        fprintf(stderr, "hogwild: the checkpoint %s was trained with %s; this run uses %s as given\n",
                config->resume_path, was, now);
    }
}

int cli_resume_settings(hw_train_config *config, const cli_parsed *given) {
    if (!config->resume_path || config->eval_only) return HW_EXIT_OK;
    hw_ckpt_meta meta;
    if (hw_ckpt_load_meta(config->resume_path, &meta) != HW_OK) return cli_failure("hogwild");
    int say = config->world.rank == 0;
    int status = same_simulation(config, &meta);
    if (status != HW_EXIT_OK) return status;
    restore_seed(config, given, &meta, say);
    restore_lr(config, given, &meta, say);
    status = restore_schedule(config, given, &meta, say);
    if (status == HW_EXIT_OK) status = restore_update(config, given, &meta, say);
    if (status == HW_EXIT_OK) status = restore_model(config, given);
    if (status == HW_EXIT_OK) restore_weights(config, given, &meta, say);
    if (status == HW_EXIT_OK) restore_staleness(config, given, &meta, say);
    return status;
}

// Appends option `id` of `command` to `as_run` with `text`, unless it was given.
static void add_restored(const cli_command *command, cli_parsed *as_run, hw_option id, const char *text) {
    const cli_option *o = cli_option_of(command, id);
    if (!o || cli_given(as_run, id) || as_run->n_given >= CLI_MAX_GIVEN) return;
    as_run->given[as_run->n_given] = o;
    as_run->values[as_run->n_given++] = text;
}

void cli_resume_as_given(const hw_train_config *config, const cli_command *command, cli_parsed *as_run) {
    // The texts outlive the call: as_run points at them until the setup is hashed.
    static char lr[32], schedule[64], warmup[32], staleness[16];
    if (!config->resume_path || config->eval_only) return;
    snprintf(lr, sizeof lr, "%.9g", (double)config->lr);
    hw_lr_schedule_format(&config->lr_schedule, schedule, sizeof schedule);
    snprintf(warmup, sizeof warmup, "%" PRId64, config->lr_schedule.warmup);
    add_restored(command, as_run, HW_OPTION_LR, lr);
    add_restored(command, as_run, HW_OPTION_LR_SCHEDULE, schedule);
    add_restored(command, as_run, HW_OPTION_WARMUP, warmup);
    add_restored(command, as_run, HW_OPTION_UPDATE, hw_update_mode_name(config->update));
    // A bound only: a resumed unbounded run's setup stays as it was before --max-staleness existed.
    if (config->max_staleness != HW_STALENESS_UNBOUNDED) {
        snprintf(staleness, sizeof staleness, "%d", config->max_staleness);
        add_restored(command, as_run, HW_OPTION_MAX_STALENESS, staleness);
    }
    // bf16 only: a resumed float run's setup stays as it was before --weights existed.
    if (config->weights == HW_WEIGHTS_BF16) {
        add_restored(command, as_run, HW_OPTION_WEIGHTS, hw_weights_dtype_name(config->weights));
    }
}
