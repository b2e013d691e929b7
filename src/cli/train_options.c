// train_options: ./hogwild's options for training, one table (src/cli/options.h): each option's
// name, kind of value, default, help and the field of hw_train_config it sets. The help text, the
// parser and the defaults all come from it.
#include "cli/train_options.h"

#include "hw/comm.h"
#include "hw/data.h"
#include "hw/err.h"
#include "hw/file.h"
#include "hw/shm.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- the values that are more than a number ----

static int parse_mode(const cli_option *o, const char *text, void *target, char *error, size_t cap) {
    (void)o;
    hw_train_config *config = target;
    if (strcmp(text, "hogwild") == 0) {
        config->mode = HW_MODE_HOGWILD;
    } else if (strcmp(text, "dataparallel") == 0) {
        config->mode = HW_MODE_DATAPARALLEL;
    } else {
        return cli_refuse(error, cap, "--mode expects hogwild or dataparallel, got '%s'", text);
    }
    return HW_EXIT_OK;
}

static int parse_gpus(const cli_option *o, const char *text, void *target, char *error, size_t cap) {
    (void)o;
    hw_train_config *config = target;
    config->n_gpus = 0;
    const char *p = text;
    while (*p) {
        char *end = NULL;
        long index = strtol(p, &end, 10);
        if (end == p || index < 0 || (*end != ',' && *end != '\0')) {
            return cli_refuse(error, cap, "--gpus expects a comma-separated list of GPU indices like 0,1, got '%s'",
                              text);
        }
        // A well-formed list past the limits is told so, not called malformed.
        if (index > 1023) return cli_refuse(error, cap, "--gpus: GPU indices go from 0 to 1023, got %ld", index);
        if (config->n_gpus >= HW_MAX_GPUS) {
            return cli_refuse(error, cap, "--gpus lists at most %d GPUs (an entry may repeat one), got '%s'",
                              HW_MAX_GPUS, text);
        }
        config->gpus[config->n_gpus++] = (int)index;
        p = *end == ',' ? end + 1 : end;
        // "0,": a comma promises another index.
        if (*end == ',' && *p == '\0') {
            return cli_refuse(error, cap, "--gpus expects a comma-separated list of GPU indices like 0,1, got '%s'",
                              text);
        }
    }
    if (config->n_gpus == 0) return cli_refuse(error, cap, "--gpus expects at least one GPU index, got '%s'", text);
    return HW_EXIT_OK;
}

static int parse_device(const cli_option *o, const char *text, void *target, char *error, size_t cap) {
    (void)o;
    hw_train_config *config = target;
    if (hw_device_parse(text, &config->device) != HW_OK) return cli_refuse(error, cap, "--device: %s", hw_error());
    return HW_EXIT_OK;
}

// --resize HxW: two sizes from 1 to HW_IMAGE_MAX_SIDE, "28x28".
static int parse_resize(const cli_option *o, const char *text, void *target, char *error, size_t cap) {
    (void)o;
    hw_train_config *config = target;
    int h = 0, w = 0, used = 0;
    const char *x = strchr(text, 'x');
    if (!x || !isdigit((unsigned char)text[0]) || !isdigit((unsigned char)x[1]) ||
        sscanf(text, "%5d%*1[x]%5d%n", &h, &w, &used) != 2 || text[used] != '\0' || h < 1 || w < 1 ||
        h > HW_IMAGE_MAX_SIDE || w > HW_IMAGE_MAX_SIDE) {
        return cli_refuse(error, cap, "--resize expects HEIGHTxWIDTH, each from 1 to %d (e.g. 28x28), got '%s'",
                          HW_IMAGE_MAX_SIDE, text);
    }
    config->resize_height = h;
    config->resize_width = w;
    return HW_EXIT_OK;
}

static int parse_normalize(const cli_option *o, const char *text, void *target, char *error, size_t cap) {
    (void)o;
    hw_normalize *norm = &((hw_train_config *)target)->norm;
    if (strcmp(text, "auto") == 0) {
        *norm = (hw_normalize){0, 0};
        return HW_EXIT_OK;
    }
    float mean = 0, std = 0;
    char *end = NULL;
    // Decimal, as every number of the command line: no hexadecimal ("0x0.2"), no blanks ("  0.1"),
    // each part read whole. nan, inf and numbers beyond a float (1e39, read as inf) would train to
    // NaN: refused.
    const char *comma = strchr(text, ',');
    int decimal = comma && !strpbrk(text, "xX") && strspn(text, "0123456789+-.eE,") == strlen(text);
    if (decimal) {
        mean = strtof(text, &end);
        decimal = end != text && end == comma;
    }
    if (decimal) {
        std = strtof(comma + 1, &end);
        decimal = end != comma + 1 && *end == '\0';
    }
    if (!decimal || !isfinite(mean) || !isfinite(std) || !(std > 0)) {
        return cli_refuse(error, cap,
                          "--normalize expects MEAN,STD, finite numbers with STD > 0 (e.g. 0.1307,0.3081) or auto, "
                          "got '%s'",
                          text);
    }
    // Pixels are in [0, 1]: normalised beyond +-1e6 (a STD of 1e-45 gave 1e45, then inf) the first
    // batch overflows, and the run ended as "diverged" with a hint to lower --lr.
    double lo = (0.0 - mean) / std, hi = (1.0 - mean) / std;
    if (!(fabs(lo) <= 1e6 && fabs(hi) <= 1e6)) {
        return cli_refuse(error, cap,
                          "--normalize %s maps pixels in [0, 1] beyond +-1e6, where the network overflows: give a "
                          "MEAN near the pixels' mean and a STD near their spread (or auto)",
                          text);
    }
    *norm = (hw_normalize){mean, std};
    return HW_EXIT_OK;
}

// --sync-every: "N" training samples of a node, or "Nms" milliseconds.
static int parse_sync_every(const cli_option *o, const char *text, void *target, char *error, size_t cap) {
    (void)o;
    hw_train_config *config = target;
    char *end = NULL;
    errno = 0;
    long long value = strtoll(text, &end, 10);
    int ms = end && strcmp(end, "ms") == 0;
    if (errno || end == text || (*end != '\0' && !ms) || !isdigit((unsigned char)text[0]) || value < 1 ||
        value > 1000000000LL) {
        return cli_refuse(error, cap,
                          "--sync-every expects a number of samples (e.g. 2000) or of milliseconds (e.g. 100ms), "
                          "at least 1, got '%s'",
                          text);
    }
    config->sync_every_ms = ms ? (double)value : 0;
    config->sync_every_samples = ms ? 0 : value;
    return HW_EXIT_OK;
}

static int parse_sync_rule(const cli_option *o, const char *text, void *target, char *error, size_t cap) {
    (void)o;
    hw_train_config *config = target;
    if (hw_couple_rule_parse(text, &config->sync_rule) != HW_OK) {
        return cli_refuse(error, cap, "--sync-rule %s", hw_error());
    }
    return HW_EXIT_OK;
}

// --lr-schedule: the schedule's kind and factors; the warm-up is --warmup's, whichever comes first.
static int parse_lr_schedule(const cli_option *o, const char *text, void *target, char *error, size_t cap) {
    (void)o;
    hw_lr_schedule *schedule = &((hw_train_config *)target)->lr_schedule;
    int64_t warmup = schedule->warmup;
    if (hw_lr_schedule_parse(text, schedule) != HW_OK) return cli_refuse(error, cap, "--lr-schedule: %s", hw_error());
    schedule->warmup = warmup;
    return HW_EXIT_OK;
}

// --delay: the delay model of --simulate's virtual workers (hw_delay_parse; measured:FILE reads FILE now).
static int parse_delay(const cli_option *o, const char *text, void *target, char *error, size_t cap) {
    (void)o;
    if (hw_delay_parse(text, &((hw_train_config *)target)->delay) != HW_OK) {
        return cli_refuse(error, cap, "--delay %s", hw_error());
    }
    return HW_EXIT_OK;
}

// --update: how CPU Hogwild workers write their steps onto the shared weights (hw_update_mode_parse).
static int parse_update(const cli_option *o, const char *text, void *target, char *error, size_t cap) {
    (void)o;
    if (hw_update_mode_parse(text, &((hw_train_config *)target)->update) != HW_OK) {
        return cli_refuse(error, cap, "--update %s", hw_error());
    }
    return HW_EXIT_OK;
}

// --weights: how CPU Hogwild's shared weights are stored (hw_weights_dtype_parse).
static int parse_weights(const cli_option *o, const char *text, void *target, char *error, size_t cap) {
    (void)o;
    if (hw_weights_dtype_parse(text, &((hw_train_config *)target)->weights) != HW_OK) {
        return cli_refuse(error, cap, "--weights %s", hw_error());
    }
    return HW_EXIT_OK;
}

// The largest --max-staleness: far beyond any epoch's steps of a worker (MNIST's 60000 samples in
// batches of 1 make 60000), where a bound no longer holds anyone; still an int after + 1.
enum { MAX_STALENESS_MOST = 1 << 30 };

// --max-staleness: a whole number of steps from 0 (lockstep) to MAX_STALENESS_MOST, or none (no
// bound, the default, which a --resume of a bounded checkpoint needs to say).
static int parse_max_staleness(const cli_option *o, const char *text, void *target, char *error, size_t cap) {
    (void)o;
    int *bound = &((hw_train_config *)target)->max_staleness;
    if (strcmp(text, "none") == 0) {
        *bound = HW_STALENESS_UNBOUNDED;
        return HW_EXIT_OK;
    }
    char *end = NULL;
    errno = 0;
    long long steps = text[0] >= '0' && text[0] <= '9' ? strtoll(text, &end, 10) : -1;
    if (steps < 0 || errno || *end != '\0' || steps > MAX_STALENESS_MOST) {
        return cli_refuse(error, cap,
                          "--max-staleness expects a whole number of steps from 0 (lockstep) to %d, or none, got '%s'",
                          MAX_STALENESS_MOST, text);
    }
    *bound = (int)steps;
    return HW_EXIT_OK;
}

// The process runtime's setting, not the run's: proc/shm.c keeps it. Its default is the table's,
// set like any other (cli_defaults); shm.c starts with the same one for a caller of the library.
static int parse_sharing(const cli_option *o, const char *text, void *target, char *error, size_t cap) {
    (void)o, (void)target;
    if (hw_sharing_strategy_set(text) != HW_OK) return cli_refuse(error, cap, "--sharing-strategy: %s", hw_error());
    return HW_EXIT_OK;
}

// ---- the table ----

#define FIELD(name) offsetof(hw_train_config, name)
#define NONE        CLI_NO_FIELD

// The defaults are those of PyTorch's mnist_hogwild example: 2 workers, batch 64, test batch 1000,
// lr 0.01, momentum 0.5, seed 1; one epoch; MNIST's mean and std; no prefetch thread; the CPU.
// (An option per entry: its value, default and help read together.)
// clang-format off
static const cli_option train_options[] = {
    {.section = "Training", .name = "workers", .id = HW_OPTION_WORKERS, .metavar = "N", .kind = CLI_INT, .field = FIELD(workers), .min = 1,
     .max = 1024, .fallback = "2", .help = "Hogwild worker processes (default %s)"},
    {.name = "mode", .id = HW_OPTION_MODE, .metavar = "MODE", .kind = CLI_CUSTOM, .field = FIELD(mode), .parse = parse_mode,
     .fallback = "hogwild", .help = "%s (default) or dataparallel"},
    {.name = "replicas", .id = HW_OPTION_REPLICAS, .metavar = "K", .kind = CLI_INT, .field = FIELD(replicas), .min = 1, .max = 1024,
     .fallback = "2", .help = "DataParallel replicas (default %s): CPU threads, or K on --device cuda:N"},
    {.name = "gpus", .id = HW_OPTION_GPUS, .metavar = "LIST", .kind = CLI_CUSTOM, .field = FIELD(gpus), .parse = parse_gpus,
     .help = "GPUs, e.g. 0,1 (0,0: two on one GPU): DataParallel, a replica on each;\n"
             "Hogwild, a copy of the weights on each, the workers round-robin"},
    {.name = "device", .id = HW_OPTION_DEVICE, .metavar = "DEV", .kind = CLI_CUSTOM, .field = FIELD(device), .parse = parse_device,
     .fallback = "cpu",
     .help = "%s (default), cuda or cuda:N (Hogwild: every worker on that GPU;\n"
             "under mpirun: local rank L of a host on GPU N+L)"},
    {.name = "model", .id = HW_OPTION_MODEL, .metavar = "FILE", .kind = CLI_TEXT, .field = FIELD(model_path),
     .fallback = "models/lenet.model", .help = "model file (default %s); a sparse model's `default` lines\n"
                                               "replace the defaults below of the settings they name"},
    {.name = "data", .id = HW_OPTION_DATA, .metavar = "DIR", .kind = CLI_TEXT, .field = FIELD(data_dir), .fallback = "data/mnist",
     .help = "dataset folder (default %s): the four IDX files of\n"
             "MNIST/Fashion-MNIST/KMNIST, or train/ and test/ image folders"},
    {.name = "resize", .id = HW_OPTION_RESIZE, .metavar = "HxW", .kind = CLI_CUSTOM, .field = FIELD(resize_height), .parse = parse_resize,
     .help = "resize every image of the image folders to H x W pixels (default:\n"
             "the training images' own size, which must then be one)"},
    {.name = "epochs", .id = HW_OPTION_EPOCHS, .metavar = "N", .kind = CLI_INT, .field = FIELD(epochs), .min = 1, .max = 100000,
     .fallback = "1", .help = "epochs (default %s)"},
    {.name = "batch-size", .id = HW_OPTION_BATCH_SIZE, .metavar = "N", .kind = CLI_INT, .field = FIELD(batch_size), .min = 1, .max = 1 << 20,
     .fallback = "64", .help = "training batch per worker; DataParallel: split over replicas (default %s)"},
    {.name = "test-batch-size", .id = HW_OPTION_TEST_BATCH_SIZE, .metavar = "N", .kind = CLI_INT, .field = FIELD(test_batch_size), .min = 1,
     .max = 1 << 20, .fallback = "1000", .help = "evaluation batch (default %s)"},
    {.name = "lr", .id = HW_OPTION_LR, .metavar = "X", .kind = CLI_FLOAT, .field = FIELD(lr), .least = 0, .fallback = "0.01",
     .help = "learning rate (default %s)"},
    {.name = "lr-schedule", .id = HW_OPTION_LR_SCHEDULE, .metavar = "SPEC", .kind = CLI_CUSTOM, .field = FIELD(lr_schedule),
     .parse = parse_lr_schedule, .fallback = "constant",
     .help = "the rate over the run's samples (torch.optim.lr_scheduler's):\n"
             "%s (default), step:EVERY:GAMMA (x GAMMA every EVERY epochs),\n"
             "exponential:GAMMA (x GAMMA every epoch), linear (to 0 at the\n"
             "run's end) or cosine (to 0)"},
    {.name = "warmup", .id = HW_OPTION_WARMUP, .metavar = "N", .kind = CLI_INT64, .field = FIELD(lr_schedule.warmup), .min = 0,
     .max = LLONG_MAX, .fallback = "0", .help = "the rate rises linearly from 0 over the first N samples (default %s)"},
    {.name = "momentum", .id = HW_OPTION_MOMENTUM, .metavar = "X", .kind = CLI_FLOAT, .field = FIELD(momentum), .least = 0, .fallback = "0.5",
     .help = "SGD momentum (default %s)"},
    {.name = "weight-decay", .id = HW_OPTION_WEIGHT_DECAY, .metavar = "X", .kind = CLI_FLOAT, .field = FIELD(weight_decay), .least = 0,
     .fallback = "0", .help = "L2 weight decay (default %s)"},
    {.name = "nesterov", .id = HW_OPTION_NESTEROV, .kind = CLI_SWITCH, .field = FIELD(nesterov), .help = "Nesterov momentum"},
    {.name = "seed", .id = HW_OPTION_SEED, .metavar = "N", .kind = CLI_UINT64, .field = FIELD(seed), .min = 0, .max = LLONG_MAX,
     .fallback = "1", .help = "seed of initialisation, shuffling and dropout (default %s)"},
    {.name = "normalize", .id = HW_OPTION_NORMALIZE, .metavar = "M,S|auto", .kind = CLI_CUSTOM, .field = FIELD(norm), .parse = parse_normalize,
     .fallback = "0.1307,0.3081", .help = "input mean and std (default MNIST's %s; auto: from the data)"},
    {.name = "freeze", .id = HW_OPTION_FREEZE, .metavar = "NAMES", .kind = CLI_TEXT, .field = FIELD(freeze),
     .help = "parameters not to train, e.g. conv1.weight,conv1.bias"},
    {.name = "update", .id = HW_OPTION_UPDATE, .metavar = "MODE", .kind = CLI_CUSTOM, .field = FIELD(update), .parse = parse_update,
     .fallback = "lockfree",
     .help = "how CPU Hogwild workers write their steps: %s (default: no lock,\n"
             "races lose updates), locked (one lock around each step) or atomic\n"
             "(each weight a compare-and-swap add): both lose nothing (--measure)"},
    {.name = "weights", .id = HW_OPTION_WEIGHTS, .metavar = "DTYPE", .kind = CLI_CUSTOM, .field = FIELD(weights), .parse = parse_weights,
     .fallback = "f32",
     .help = "how CPU Hogwild's shared weights are stored: %s (default) or bf16\n"
             "(bfloat16, half the bytes; workers compute in float and round\n"
             "each write stochastically, seeded)"},
    {.name = "max-staleness", .id = HW_OPTION_MAX_STALENESS, .metavar = "S", .kind = CLI_CUSTOM, .field = FIELD(max_staleness),
     .parse = parse_max_staleness, .fallback = "none",
     .help = "CPU Hogwild: no worker starts a step more than S steps ahead of\n"
             "the slowest (stale synchronous parallel; 0: lockstep; default %s:\n"
             "no bound); a worker held --sync-timeout seconds ends the run"},
    {.name = "prefetch", .id = HW_OPTION_PREFETCH, .kind = CLI_SWITCH, .field = FIELD(prefetch),
     .help = "assemble the next batch in a thread while the current one trains\n"
             "(off by default: on the CPU it measured no gain, see bench/RESULTS.md)"},
    {.name = "simulate", .id = HW_OPTION_SIMULATE, .metavar = "N", .kind = CLI_INT, .field = FIELD(simulate), .min = 1, .max = 65536,
     .help = "N virtual Hogwild workers in one process, in a seeded interleaving,\n"
             "each gradient on the weights of --delay updates earlier"},
    {.name = "delay", .id = HW_OPTION_DELAY, .metavar = "MODEL", .kind = CLI_CUSTOM, .field = FIELD(delay), .parse = parse_delay,
     .fallback = "fixed:0",
     .help = "--simulate's delay: %s (default), uniform:K (0..K), geometric:P\n"
             "(P(D=d) = (1-P)^d P) or measured:FILE (the staleness histogram of\n"
             "a --measure run's metrics); K at most 1024"},

    {.section = "Evaluation, checkpoints, output", .name = "eval-every", .id = HW_OPTION_EVAL_EVERY, .metavar = "N", .kind = CLI_INT64,
     .field = FIELD(eval_every), .min = 1, .max = LLONG_MAX,
     .help = "also evaluate every N training samples (default: epoch ends only)"},
    {.name = "metrics", .id = HW_OPTION_METRICS, .metavar = "FILE.csv", .kind = CLI_TEXT, .field = FIELD(metrics_path),
     .help = "write one CSV row per evaluation (for hogwild compare)"},
    {.name = "save", .id = HW_OPTION_SAVE, .metavar = "FILE", .kind = CLI_TEXT, .field = FIELD(save_path),
     .help = "checkpoint (safetensors) at every epoch end, at the end and on Ctrl-C\n"
             "(an existing FILE only if this run resumed from it, or with --overwrite)"},
    {.name = "overwrite", .id = HW_OPTION_OVERWRITE, .kind = CLI_SWITCH, .field = FIELD(overwrite),
     .help = "let --save replace an existing checkpoint this run did not resume from"},
    {.name = "resume", .id = HW_OPTION_RESUME, .metavar = "FILE", .kind = CLI_TEXT, .field = FIELD(resume_path),
     .help = "continue from a checkpoint (weights, epoch, samples seen; its seed,\n"
             "--lr and schedule unless given)"},
    {.name = "eval-only", .id = HW_OPTION_EVAL_ONLY, .kind = CLI_SWITCH, .field = FIELD(eval_only),
     .help = "with --resume: evaluate the checkpoint on the test set (its own model\n"
             "text unless --model is given)"},
    {.name = "quiet", .id = HW_OPTION_QUIET, .kind = CLI_SWITCH, .field = FIELD(quiet), .help = "no progress line (results are still printed)"},
    {.name = "measure", .id = HW_OPTION_MEASURE, .kind = CLI_SWITCH, .field = FIELD(measure),
     .help = "measure what Hogwild does (CPU workers): staleness, lost updates,\n"
             "contention; printed after training and added to --metrics"},

    {.section = "Several machines (under mpirun; README, \"Several machines\")", .name = "sync-every", .id = HW_OPTION_SYNC_EVERY,
     .metavar = "N|Nms", .kind = CLI_CUSTOM, .field = FIELD(sync_every_ms), .parse = parse_sync_every,
     .fallback = "20ms",
     .help = "Hogwild across ranks: couple the nodes every N training samples of a\n"
             "node, or every N milliseconds, or as often as the link allows if less\n"
             "often (default %s); with --gpus, the copies on the GPUs likewise\n"
             "(default: 20 ms or 1024 samples of all the workers, whichever first)"},
    {.name = "sync-rule", .id = HW_OPTION_SYNC_RULE, .metavar = "momentum|sum", .kind = CLI_CUSTOM, .field = FIELD(sync_rule),
     .parse = parse_sync_rule, .fallback = "momentum",
     .help = "Hogwild across ranks (and --gpus' copies): what a round does with the\n"
             "changes: block momentum (%s, the default) or their sum added at once\n"
             "(sum, the old rule)"},
    {.name = "sync-timeout", .id = HW_OPTION_SYNC_TIMEOUT, .metavar = "S", .kind = CLI_DOUBLE, .field = FIELD(sync_timeout), .least = 0.001,
     .fallback = "60",
     .help = "a coupling round (Hogwild) or a step's gradient sum (DataParallel) not\n"
             "complete in S seconds ends the job: a rank stuck or gone (default %s);\n"
             "so does a worker that --max-staleness holds S seconds"},

    {.section = "Process runtime", .name = "sharing-strategy", .id = HW_OPTION_SHARING_STRATEGY, .metavar = "NAME", .kind = CLI_CUSTOM, .field = NONE,
     .parse = parse_sharing, .fallback = "file_descriptor", .help = "%s (default) or file_system"},
    {.name = "list-sharing-strategies", .id = HW_OPTION_LIST_SHARING_STRATEGIES, .kind = CLI_SWITCH, .field = NONE,
     .help = "list them, the current one marked"},
    {.name = "clean-shm", .id = HW_OPTION_CLEAN_SHM, .kind = CLI_SWITCH, .field = NONE,
     .help = "remove shared memory left by hogwild runs killed with SIGKILL"},
    {.name = "help", .id = HW_OPTION_HELP, .short_name = 'h', .kind = CLI_SWITCH, .field = NONE, .stops = 1,
     .help = "this text;  --version  the version"},
    {.name = "version", .id = HW_OPTION_VERSION, .kind = CLI_SWITCH, .field = NONE, .stops = 1},
    {.name = "summary", .id = HW_OPTION_SUMMARY, .kind = CLI_SWITCH, .field = NONE},  // in the usage lines, not among the options
};
// clang-format on

const cli_command cli_train_command = {
    .options = train_options,
    .n_options = sizeof train_options / sizeof train_options[0],
    .missing = "option '%s' needs a value",
    // An empty value is refused at once: --save '' would pass every check of a file name and fail at
    // the first save, an epoch later.
    .empty = "option '%s' needs a value, got an empty one",
    .help_column = 27,
};

void cli_train_defaults(hw_train_config *config) {
    hw_train_config_init(config);
    cli_defaults(&cli_train_command, config);
}
