// ranks_settings: the settings every rank of an mpirun job must share, checked at start-up
// (hw_run_check_ranks; the gathering and the message are hw_comm_settings_agree's).
//
// The ranks train one model: they split the world's data by --workers (or --replicas) and rank,
// take the same steps (DataParallel) or add each other's changes (Hogwild), and meet at the same
// epoch ends and evaluation points. A rank started with another value of any of these would train
// something else under a header that describes rank 0, or wait for a round that never comes. The
// dataset and the model are compared by content (a hash), not by path: the hosts of a job may keep
// them in other places.
#include "hw/train.h"

#include "hw/comm.h"
#include "hw/option.h"

#include <stdio.h>
#include <string.h>

// A 64-bit hash of n bytes, 8 at a time, continuing from h.
static uint64_t hash_bytes(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        h = (h ^ word) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    for (; n > 0; n--, p++) h = (h ^ *p) * 0x100000001b3ull;
    return h;
}

static uint64_t hash_dataset(uint64_t h, const hw_dataset *ds) {
    int64_t sizes[5] = {ds->n, ds->channels, ds->height, ds->width, ds->n_classes};
    h = hash_bytes(h, sizes, sizeof sizes);
    size_t pixels = (size_t)ds->n * (size_t)ds->channels * (size_t)ds->height * (size_t)ds->width;
    h = hash_bytes(h, ds->images, pixels);
    return hash_bytes(h, ds->labels, (size_t)ds->n);
}

// The network as it trains: its input, and each layer's kind, name, numbers and frozen flag (not
// the model file's comments or spacing).
static uint64_t hash_model(const hw_model *model) {
    uint64_t h = hash_bytes(14695981039346656037ull, model->input.dims, sizeof(int64_t) * (size_t)model->input.ndim);
    for (int l = 0; l < model->n_layers; l++) {
        const hw_layer *layer = &model->layers[l];
        h = hash_bytes(h, layer->type->name, strlen(layer->type->name));
        h = hash_bytes(h, layer->name, strlen(layer->name));
        h = hash_bytes(h, layer->args, sizeof layer->args);
    }
    for (int p = 0; p < model->n_params; p++) h = hash_bytes(h, &model->params[p].frozen, sizeof(int));
    return h;
}

// `what` in the code's terms ("the learning rate"), followed by the flag of `option` (hw/option.h).
static void add(hw_comm_setting *list, int *n, const char *what, hw_option option, const char *key, const char *shown) {
    hw_comm_setting *s = &list[(*n)++];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s%s", what, hw_option_hint(option));
    snprintf(s->key, sizeof s->key, "%s", key);
    snprintf(s->shown, sizeof s->shown, "%s", shown ? shown : key);
}

// Compared to 9 digits (every float bit), shown as given (0.01, not 0.00999999978).
static void add_number(hw_comm_setting *list, int *n, const char *what, hw_option option, double value) {
    char key[HW_SETTING_KEY_CAP], shown[HW_SETTING_KEY_CAP];
    snprintf(key, sizeof key, "%.9g", value);
    snprintf(shown, sizeof shown, "%.7g", value);
    add(list, n, what, option, key, shown);
}

// A path in a message, cut from the left when long: its end says more.
static void shown_path(char *out, size_t cap, const char *path, const char *suffix) {
    size_t suffix_len = strlen(suffix), len = strlen(path);
    size_t room = cap > suffix_len + 4 ? cap - suffix_len - 4 : 0;  // for "..." and the end
    const char *from = len > room ? path + len - room : path;
    size_t used = 0;
    if (from != path) {
        memcpy(out, "...", 3);
        used = 3;
    }
    memcpy(out + used, from, strlen(from));
    used += strlen(from);
    memcpy(out + used, suffix, suffix_len + 1);  // used + suffix_len < cap by the room kept
}

enum { MAX_SETTINGS = 24 };

int hw_run_check_ranks(const hw_train_config *config, const hw_train_inputs *in, int first_epoch,
                       int64_t samples_before) {
    hw_comm_setting list[MAX_SETTINGS];
    int n = 0;
    char key[HW_SETTING_KEY_CAP], suffix[64], shown[HW_SETTING_SHOWN_CAP];
    int hogwild = config->mode == HW_MODE_HOGWILD;
    snprintf(key, sizeof key, "protocol %d", HW_COMM_PROTOCOL);
    // First: with another build, nothing else is comparable.
    add(list, &n, "the hogwild build", HW_OPTION_NONE, key, NULL);
    add(list, &n, "the mode", HW_OPTION_MODE, hogwild ? "hogwild" : "dataparallel", NULL);  // it names the others
    add_number(list, &n, hogwild ? "the number of workers" : "the number of replicas",
               hogwild ? HW_OPTION_WORKERS : HW_OPTION_REPLICAS, hogwild ? config->workers : config->replicas);
    // The kind of device only, not its number B of --device cuda:B: a rank's GPU is B plus its
    // local rank on its own host, and hosts may differ in which of their GPUs are free (mpirun's
    // `-np 4 --host a:4 ./hogwild --device cuda:0 : -np 4 --host b:4 ./hogwild --device cuda:4`).
    add(list, &n, "the device", HW_OPTION_DEVICE, config->device.type == HW_DEVICE_CUDA ? "cuda" : "cpu", NULL);

    uint64_t data = hash_dataset(hash_dataset(14695981039346656037ull, &in->train), &in->test);
    snprintf(key, sizeof key, "%016llx", (unsigned long long)data);
    snprintf(suffix, sizeof suffix, " (%lld train samples, content %08llx)", (long long)in->train.n,
             (unsigned long long)(data >> 32));
    shown_path(shown, sizeof shown, config->data_dir, suffix);
    add(list, &n, "the dataset", HW_OPTION_DATA, key, shown);

    uint64_t model = hash_model(&in->model);
    snprintf(key, sizeof key, "%016llx", (unsigned long long)model);
    snprintf(suffix, sizeof suffix, " (layers %08llx)", (unsigned long long)(model >> 32));
    shown_path(shown, sizeof shown, config->model_path, suffix);
    char network[HW_SETTING_NAME_CAP];
    snprintf(network, sizeof network, "the model%s or its frozen parameters%s", hw_option_hint(HW_OPTION_MODEL),
             hw_option_hint(HW_OPTION_FREEZE));
    add(list, &n, network, HW_OPTION_NONE, key, shown);

    add_number(list, &n, "the number of epochs", HW_OPTION_EPOCHS, config->epochs);
    add_number(list, &n, "the batch size", HW_OPTION_BATCH_SIZE, config->batch_size);
    add_number(list, &n, "the learning rate", HW_OPTION_LR, config->lr);
    char schedule[32];  // "step:1000000:0.123456" at the longest
    hw_lr_schedule_format(&config->lr_schedule, schedule, sizeof schedule);
    snprintf(key, sizeof key, "%s, warm-up %lld", schedule, (long long)config->lr_schedule.warmup);
    add(list, &n, "the learning-rate schedule", HW_OPTION_LR_SCHEDULE, key, NULL);
    add_number(list, &n, "the momentum", HW_OPTION_MOMENTUM, config->momentum);
    add_number(list, &n, "the weight decay", HW_OPTION_WEIGHT_DECAY, config->weight_decay);
    add_number(list, &n, "Nesterov momentum", HW_OPTION_NESTEROV, config->nesterov);
    add_number(list, &n, "the seed", HW_OPTION_SEED, (double)config->seed);
    snprintf(key, sizeof key, "%.9g,%.9g", (double)in->norm.mean, (double)in->norm.std);
    add(list, &n, "the input normalisation", HW_OPTION_NORMALIZE, key, NULL);
    add_number(list, &n, "the evaluation interval", HW_OPTION_EVAL_EVERY, (double)config->eval_every);
    if (config->sync_every_samples > 0) snprintf(key, sizeof key, "%lld", (long long)config->sync_every_samples);
    else snprintf(key, sizeof key, "%gms", config->sync_every_ms);
    add(list, &n, "the coupling interval", HW_OPTION_SYNC_EVERY, key, NULL);
    add(list, &n, "the coupling rule", HW_OPTION_SYNC_RULE, hw_couple_rule_name(config->sync_rule), NULL);
    add_number(list, &n, "the ranks' timeout", HW_OPTION_SYNC_TIMEOUT, config->sync_timeout);
    if (config->resume_path) {
        snprintf(key, sizeof key, "epoch %d, %lld samples", first_epoch, (long long)samples_before);
    } else {
        snprintf(key, sizeof key, "none");
    }
    add(list, &n, "the checkpoint resumed from", HW_OPTION_RESUME, key, NULL);
    // Every rank's workers count their races or none do: a rank's --measure alone would count its
    // node's only, under a summary that reads as the job's. (--metrics is rank 0's alone: the
    // others drop it, and follow rank 0's in the evaluations they share, hw_run_outputs_first_point.)
    add(list, &n, "whether the races are measured", HW_OPTION_MEASURE, config->measure ? "measured" : "not measured",
        NULL);
    return hw_comm_settings_agree(list, n);
}
