// resume_optim: the optimizer state that CPU Hogwild and CPU DataParallel keep in their
// checkpoints, and --resume's choice to restore it or restart it (include/hw/resume_optim.h).
// Restored only when the checkpoint's trainer, worker (replica) count and momentum are the run's:
// a velocity or a generator belongs to one worker of one trainer, and another momentum gives the
// buffer another scale. Anything else resumes the weights alone, and says so in one line.
#include "hw/resume_optim.h"

#include "hw/err.h"
#include "hw/option.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The metadata keys and the tensors' prefixes (the header's comment describes them).
#define KEY_TRAINER     "optim_trainer"
#define KEY_WORKERS     "optim_workers"
#define KEY_MOMENTUM    "optim_momentum"
#define KEY_DROPOUT     "dropout_rng"
#define VELOCITY_PREFIX HW_CKPT_STATE_PREFIX "velocity."
// One generator's text: 16 + 1 + 16 hex digits, and the comma before the next.
enum { RNG_TEXT = 34, PREFIX_CAP = 64 };

int hw_optim_kept(const hw_train_config *config) {
    return config->device.type != HW_DEVICE_CUDA && config->world.size == 1 && !config->simulate;
}

static const char *trainer_name(hw_mode trainer) { return trainer == HW_MODE_HOGWILD ? "hogwild" : "dataparallel"; }

// Whether the run has state that a restart loses: a momentum buffer, or a dropout generator in use.
static int run_has_state(const hw_train_config *config, const hw_model *model) {
    if (config->momentum > 0) return 1;
    for (int i = 0; i < model->n_layers; i++) {
        if (model->layers[i].kind == HW_DROPOUT || model->layers[i].kind == HW_DROPOUT2D) return 1;
    }
    return 0;
}

// The one line of a restart, on rank 0's stderr.
static void say_restart(const hw_train_config *config, const char *why) {
    if (config->world.rank != 0) return;
    fprintf(stderr, "hogwild: the optimizer state restarts (momentum buffers, dropout generators): %s\n", why);
}

void hw_optim_note_not_kept(const hw_train_config *config, const hw_model *model) {
    if (!config->resume_path || !run_has_state(config, model)) return;
    char why[128];
    snprintf(why, sizeof why, "%s keep none in their checkpoints",
             config->simulate                        ? "simulated runs"
             : config->device.type == HW_DEVICE_CUDA ? "the GPU trainers"
                                                     : "runs across ranks");
    say_restart(config, why);
}

int hw_optim_state_open(hw_optim_state *state, const hw_train_config *config, size_t n_weights,
                        uint64_t (*seed_of)(const hw_train_config *config, int k)) {
    memset(state, 0, sizeof *state);
    state->trainer = config->mode;
    state->workers = config->mode == HW_MODE_HOGWILD ? config->workers : config->replicas;
    state->momentum = config->momentum;
    state->n_weights = n_weights;
    state->n_velocities = config->momentum > 0 ? (config->mode == HW_MODE_HOGWILD ? state->workers : 1) : 0;
    size_t floats = (size_t)state->n_velocities * n_weights;
    state->velocities = calloc(floats ? floats : 1, sizeof(float));
    state->dropout = calloc((size_t)state->workers, sizeof(hw_rng));
    if (!state->velocities || !state->dropout) {
        hw_optim_state_close(state);
        return hw_fail("out of memory for the optimizer state to save (%zu bytes)", sizeof(float) * floats);
    }
    for (int k = 0; k < state->workers; k++) {
        hw_workspace seeded = {0};
        hw_workspace_seed(&seeded, seed_of(config, k));
        state->dropout[k] = seeded.rng;
    }
    state->valid = 1;
    return HW_OK;
}

void hw_optim_state_close(hw_optim_state *state) {
    free(state->velocities);
    free(state->dropout);
    memset(state, 0, sizeof *state);
}

// The generators as dropout_rng's text (malloc'ed), or NULL when out of memory.
static char *rngs_format(const hw_optim_state *state) {
    char *text = malloc((size_t)state->workers * RNG_TEXT + 1);
    if (!text) return NULL;
    size_t used = 0;
    text[0] = '\0';
    for (int k = 0; k < state->workers; k++) {
        used += (size_t)sprintf(text + used, "%s%016" PRIx64 ":%016" PRIx64, k ? "," : "", state->dropout[k].state,
                                state->dropout[k].increment);
    }
    return text;
}

// dropout_rng's text into `workers` generators; HW_ERR naming the file when it is not that.
static int rngs_parse(const char *path, const char *text, hw_rng *out, int workers) {
    const char *at = text;
    for (int k = 0; k < workers; k++) {
        char *end = NULL;
        int ok = (k == 0 || *at++ == ',') && strlen(at) >= RNG_TEXT - 1 && at[16] == ':';
        if (ok) out[k].state = strtoull(at, &end, 16), ok = end == at + 16;
        if (ok) out[k].increment = strtoull(at + 17, &end, 16), ok = end == at + 33 && (out[k].increment & 1);
        if (!ok) {
            return hw_fail("checkpoint '%s': __metadata__ '" KEY_DROPOUT "' is not %d generators (state:increment)",
                           path, workers);
        }
        at = end;
    }
    if (*at)
        return hw_fail("checkpoint '%s': __metadata__ '" KEY_DROPOUT "' holds more than %d generators", path, workers);
    return HW_OK;
}

// The velocities' prefixes: optim.velocity.worker<K>. (Hogwild) or optim.velocity. (DataParallel),
// into prefixes[k] (PREFIX_CAP bytes each).
static void velocity_prefix(const hw_optim_state *state, int k, char *prefix) {
    if (state->trainer == HW_MODE_HOGWILD) snprintf(prefix, PREFIX_CAP, VELOCITY_PREFIX "worker%d.", k);
    else snprintf(prefix, PREFIX_CAP, VELOCITY_PREFIX);
}

int hw_optim_checkpoint_save(const char *path, const hw_model *model, const float *weights, const hw_ckpt_meta *meta,
                             const hw_optim_state *state) {
    if (!state || !state->valid) return hw_ckpt_save(path, model, weights, meta);
    char workers[16], momentum[32];
    snprintf(workers, sizeof workers, "%d", state->workers);
    snprintf(momentum, sizeof momentum, "%.9g", (double)state->momentum);  // reads back as the same float
    char *rngs = rngs_format(state);
    char(*prefixes)[PREFIX_CAP] = calloc((size_t)state->n_velocities + 1, PREFIX_CAP);
    hw_ckpt_state *states = calloc((size_t)state->n_velocities + 1, sizeof *states);
    int status = HW_ERR;
    if (!rngs || !prefixes || !states) {
        hw_fail("checkpoint '%s': out of memory for the optimizer state", path);
    } else {
        for (int k = 0; k < state->n_velocities; k++) {
            velocity_prefix(state, k, prefixes[k]);
            states[k] = (hw_ckpt_state){prefixes[k], state->velocities + (size_t)k * state->n_weights};
        }
        hw_ckpt_text texts[] = {{KEY_TRAINER, trainer_name(state->trainer)},
                                {KEY_WORKERS, workers},
                                {KEY_MOMENTUM, momentum},
                                {KEY_DROPOUT, rngs}};
        hw_ckpt_extra extra = {states, state->n_velocities, texts, 4};
        status = hw_ckpt_save_extra(path, model, weights, meta, &extra);
    }
    free(rngs);
    free(prefixes);
    free(states);
    return status;
}

// The checkpoint's record of trainer, workers and momentum, against the run's: "" when they are
// the same, else why the state restarts, into why[0 .. cap) (*none: the file keeps no state).
// HW_ERR for a malformed record.
static int record_matches(const hw_optim_state *state, const char *path, char *why, size_t cap, int *none) {
    char *trainer = NULL, *workers = NULL, *momentum = NULL;
    int status = hw_ckpt_load_text(path, KEY_TRAINER, &trainer);
    if (status == HW_OK) status = hw_ckpt_load_text(path, KEY_WORKERS, &workers);
    if (status == HW_OK) status = hw_ckpt_load_text(path, KEY_MOMENTUM, &momentum);
    why[0] = '\0';
    *none = status == HW_OK && !trainer;
    if (*none) {
        snprintf(why, cap,
                 "the checkpoint %s keeps none (saved by an older hogwild, at a stop mid-epoch, or by a "
                 "trainer that keeps none)",
                 path);
    } else if (status == HW_OK && (!workers || !momentum)) {
        status = hw_fail("checkpoint '%s': '" KEY_TRAINER "' without '" KEY_WORKERS "' and '" KEY_MOMENTUM "'", path);
    } else if (status == HW_OK) {
        char *end_workers, *end_momentum;
        long was_workers = strtol(workers, &end_workers, 10);
        float was_momentum = strtof(momentum, &end_momentum);
        const char *unit = state->trainer == HW_MODE_HOGWILD ? "workers" : "replicas";
        const char *unit_one = state->trainer == HW_MODE_HOGWILD ? "worker" : "replica";
        hw_option flag = state->trainer == HW_MODE_HOGWILD ? HW_OPTION_WORKERS : HW_OPTION_REPLICAS;
        // A hand-edited record is refused, not echoed back in the restart's reason.
        if (end_workers == workers || *end_workers || was_workers < 1 || was_workers > INT32_MAX) {
            status = hw_fail("checkpoint '%s': '" KEY_WORKERS "' is '%s', not a count of 1 or more", path, workers);
        } else if (end_momentum == momentum || *end_momentum || !isfinite(was_momentum) || was_momentum < 0) {
            status =
                hw_fail("checkpoint '%s': '" KEY_MOMENTUM "' is '%s', not a momentum of 0 or more", path, momentum);
        } else if (strcmp(trainer, trainer_name(state->trainer)) != 0) {
            snprintf(why, cap, "the checkpoint %s was saved by %s, this run is %s%s", path, trainer,
                     trainer_name(state->trainer), hw_option_hint(HW_OPTION_MODE));
        } else if (was_workers != state->workers) {
            snprintf(why, cap, "the checkpoint %s was saved by %ld %s, this run has %d%s", path, was_workers,
                     was_workers == 1 ? unit_one : unit, state->workers, hw_option_hint(flag));
        } else if (was_momentum != state->momentum) {
            snprintf(why, cap, "the checkpoint %s was trained with momentum %g, this run with %g%s", path,
                     (double)was_momentum, (double)state->momentum, hw_option_hint(HW_OPTION_MOMENTUM));
        }
    }
    free(trainer);
    free(workers);
    free(momentum);
    return status;
}

static int all_finite(const float *values, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(values[i])) return 0;
    }
    return 1;
}

// The checkpoint's generators and velocities into `state` (its record matches the run's).
static int state_read(hw_optim_state *state, const hw_model *model, const char *path) {
    char *rngs = NULL;
    if (hw_ckpt_load_text(path, KEY_DROPOUT, &rngs) != HW_OK) return HW_ERR;
    int status = rngs ? rngs_parse(path, rngs, state->dropout, state->workers)
                      : hw_fail("checkpoint '%s': '" KEY_TRAINER "' without '" KEY_DROPOUT "'", path);
    free(rngs);
    if (status != HW_OK || state->n_velocities == 0) return status;
    char(*prefixes)[PREFIX_CAP] = calloc((size_t)state->n_velocities, PREFIX_CAP);
    const char **names = calloc((size_t)state->n_velocities, sizeof *names);
    float **buffers = calloc((size_t)state->n_velocities, sizeof *buffers);
    int found = 0;
    status = prefixes && names && buffers ? HW_OK : hw_fail("out of memory for the optimizer state's names");
    for (int k = 0; status == HW_OK && k < state->n_velocities; k++) {
        velocity_prefix(state, k, prefixes[k]);
        names[k] = prefixes[k];
        buffers[k] = state->velocities + (size_t)k * state->n_weights;
    }
    if (status == HW_OK) status = hw_ckpt_load_states(path, model, names, buffers, state->n_velocities, &found);
    if (status == HW_OK && !found) {
        status = hw_fail("checkpoint '%s': momentum %g recorded, but no velocities (" VELOCITY_PREFIX "*)", path,
                         (double)state->momentum);
    }
    // A velocity that is not finite would make the first step's weights so: refused, as weights are.
    for (int k = 0; status == HW_OK && k < state->n_velocities; k++) {
        if (!all_finite(buffers[k], state->n_weights)) {
            status = hw_fail("checkpoint '%s': the velocities %s* hold values that are not finite (NaN or inf)", path,
                             names[k]);
        }
    }
    free(prefixes);
    free(names);
    free(buffers);
    return status;
}

int hw_optim_state_resume(hw_optim_state *state, const hw_train_config *config, const hw_model *model) {
    if (!config->resume_path) return HW_OK;
    char why[1400];
    int none;
    if (record_matches(state, config->resume_path, why, sizeof why, &none) != HW_OK) return HW_ERR;
    if (why[0]) {
        // A file that keeps none loses nothing when the run has none either (no momentum, no dropout).
        if (!none || run_has_state(config, model)) say_restart(config, why);
        return HW_OK;
    }
    if (state_read(state, model, config->resume_path) != HW_OK) {
        return hw_error_prefix("the optimizer state of the checkpoint resumed from%s",
                               hw_option_hint(HW_OPTION_RESUME));
    }
    state->restored = 1;
    return HW_OK;
}
