// main: the command line of ./hogwild, nothing else.
#include "hw/blas.h"
#include "hw/ckpt.h"
#include "hw/comm.h"
#include "hw/compare.h"
#include "hw/data.h"
#include "hw/err.h"
#include "hw/file.h"
#include "hw/nn.h"
#include "hw/shm.h"
#include "hw/train.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *usage_text =
    "usage: hogwild [options]                      train (Hogwild by default)\n"
    "       hogwild --model FILE --summary         print a model's layers and parameter counts\n"
    "       hogwild download NAME [--dir DIR]      get mnist or fashion-mnist (md5-checked)\n"
    "       hogwild synth [--dir DIR] [--train N] [--test N] [--seed S] [--overwrite]\n"
    "                                              write the synthetic digits as IDX files\n"
    "       hogwild compare RUN.csv... [--target PCT] [--plot FILE.svg]\n"
    "                                              compare runs from --metrics files\n";

static const char *options_text =
    "\n"
    "Training:\n"
    "  --workers N              Hogwild worker processes (default 2)\n"
    "  --mode MODE              hogwild (default) or dataparallel\n"
    "  --replicas K             DataParallel replicas (default 2): CPU threads, or K on --device cuda:N\n"
    "  --gpus LIST              DataParallel replicas on GPUs, e.g. 0,1 (0,0: two on one GPU)\n"
    "  --device DEV             cpu (default), cuda or cuda:N (Hogwild: every worker on that GPU;\n"
    "                           under mpirun, DataParallel: local rank L of a host on GPU N+L)\n"
    "  --model FILE             model file (default models/lenet.model)\n"
    "  --data DIR               dataset folder (default data/mnist): the four IDX files of\n"
    "                           MNIST/Fashion-MNIST/KMNIST, or train/ and test/ image folders\n"
    "  --resize HxW             resize every image of the image folders to H x W pixels (default:\n"
    "                           the training images' own size, which must then be one)\n"
    "  --epochs N               epochs (default 1)\n"
    "  --batch-size N           training batch per worker; DataParallel: split over replicas (default 64)\n"
    "  --test-batch-size N      evaluation batch (default 1000)\n"
    "  --lr X                   learning rate (default 0.01)\n"
    "  --momentum X             SGD momentum (default 0.5)\n"
    "  --weight-decay X         L2 weight decay (default 0)\n"
    "  --nesterov               Nesterov momentum\n"
    "  --seed N                 seed of initialisation, shuffling and dropout (default 1)\n"
    "  --normalize M,S|auto     input mean and std (default MNIST's 0.1307,0.3081; auto: from the data)\n"
    "  --freeze NAMES           parameters not to train, e.g. conv1.weight,conv1.bias\n"
    "  --prefetch               assemble the next batch in a thread while the current one trains\n"
    "                           (off by default: on the CPU it measured no gain, see bench/RESULTS.md)\n"
    "\n"
    "Evaluation, checkpoints, output:\n"
    "  --eval-every N           also evaluate every N training samples (default: epoch ends only)\n"
    "  --metrics FILE.csv       write one CSV row per evaluation (for hogwild compare)\n"
    "  --save FILE              checkpoint (safetensors) at every epoch end, at the end and on Ctrl-C\n"
    "                           (an existing FILE only if this run resumed from it, or with --overwrite)\n"
    "  --overwrite              let --save replace an existing checkpoint this run did not resume from\n"
    "  --resume FILE            continue from a checkpoint (weights, epoch, samples seen, seed)\n"
    "  --eval-only              with --resume: evaluate the checkpoint on the test set (its own model\n"
    "                           text unless --model is given)\n"
    "  --quiet                  no progress line (results are still printed)\n"
    "  --measure                measure what Hogwild does (CPU workers): staleness, lost updates,\n"
    "                           contention; printed after training and added to --metrics\n"
    "\n"
    "Several machines (under mpirun; README, \"Several machines\"):\n"
    "  --sync-every N|Nms       Hogwild across ranks: couple the nodes every N training samples of a\n"
    "                           node, or every N milliseconds, or as often as the link allows if less\n"
    "                           often (default 20ms)\n"
    "  --sync-rule momentum|sum Hogwild across ranks: what a round does with the nodes' changes:\n"
    "                           block momentum (default) or their sum added at once (the old rule)\n"
    "  --sync-timeout S         a coupling round (Hogwild) or a step's gradient sum (DataParallel) not\n"
    "                           complete in S seconds ends the job: a rank stuck or gone (default 60)\n"
    "\n"
    "Process runtime:\n"
    "  --sharing-strategy NAME  file_descriptor (default) or file_system\n"
    "  --list-sharing-strategies  list them, the current one marked\n"
    "  --clean-shm              remove shared memory left by hogwild runs killed with SIGKILL\n"
    "  -h, --help               this text;  --version  the version\n"
    "\n"
    "Exit status: 0 done, 1 failed, 2 bad usage, 130/143/129 stopped by SIGINT/SIGTERM/SIGHUP.\n";

// Whether `flag` is an option with a value: options_text lists each one as "  FLAG VALUE".
static int takes_value(const char *flag) {
    char line_start[128];
    snprintf(line_start, sizeof line_start, "\n  %s ", flag);
    const char *at = strstr(options_text, line_start);
    return at && at[strlen(line_start)] != ' ';
}

static void print_usage(FILE *out, int with_options) {
    fputs(usage_text, out);
    if (with_options) fputs(options_text, out);
}

static int usage_error(const char *fmt, const char *value) {
    fprintf(stderr, "hogwild: ");
    fprintf(stderr, fmt, value);
    fprintf(stderr, "\n\n");
    print_usage(stderr, 0);
    fprintf(stderr, "Run 'hogwild --help' for every option.\n");
    return HW_EXIT_USAGE;
}

// ---- strict number parsing: the whole text must be the number ----

static int parse_int(const char *flag, const char *text, long min, long max, long *out) {
    char *end = NULL;
    errno = 0;
    long value = strtol(text, &end, 10);
    // strtol skips leading blanks; the whole text must be the number, so " 3" is refused as "3 " is.
    if (errno || end == text || *end != '\0' || isspace((unsigned char)text[0]) || value < min || value > max) {
        char message[256];
        snprintf(message, sizeof message, "%s expects an integer from %ld to %ld, got '%%s'", flag, min, max);
        return usage_error(message, text);
    }
    *out = value;
    return HW_EXIT_OK;
}

static int parse_float(const char *flag, const char *text, double min, double *out) {
    char *end = NULL;
    errno = 0;
    double value = strtod(text, &end);
    if (errno || end == text || *end != '\0' || isspace((unsigned char)text[0]) || !(value >= min) || value > 1e9) {
        char message[256];
        snprintf(message, sizeof message, "%s expects a number >= %g, got '%%s'", flag, min);
        return usage_error(message, text);
    }
    *out = value;
    return HW_EXIT_OK;
}

static int parse_gpus(const char *text, hw_train_config *config) {
    config->n_gpus = 0;
    const char *p = text;
    while (*p) {
        char *end = NULL;
        long index = strtol(p, &end, 10);
        if (end == p || index < 0 || index > 1023 || (*end != ',' && *end != '\0') || config->n_gpus >= 16) {
            return usage_error("--gpus expects a comma-separated list of GPU indices like 0,1, got '%s'", text);
        }
        config->gpus[config->n_gpus++] = (int)index;
        p = *end == ',' ? end + 1 : end;
    }
    if (config->n_gpus == 0) return usage_error("--gpus expects at least one GPU index, got '%s'", text);
    return HW_EXIT_OK;
}

// --sync-every: "N" training samples of a node, or "Nms" milliseconds.
static int parse_sync_every(const char *text, hw_train_config *config) {
    char *end = NULL;
    errno = 0;
    long long value = strtoll(text, &end, 10);
    int ms = end && strcmp(end, "ms") == 0;
    if (errno || end == text || (*end != '\0' && !ms) || !isdigit((unsigned char)text[0]) || value < 1 ||
        value > 1000000000LL) {
        return usage_error("--sync-every expects a number of samples (e.g. 2000) or of milliseconds (e.g. 100ms), "
                           "at least 1, got '%s'",
                           text);
    }
    config->sync_every_ms = ms ? (double)value : 0;
    config->sync_every_samples = ms ? 0 : value;
    return HW_EXIT_OK;
}

// --resize HxW: two sizes from 1 to HW_IMAGE_MAX_SIDE, "28x28".
static int parse_resize(const char *text, hw_train_config *config) {
    int h = 0, w = 0, used = 0;
    const char *x = strchr(text, 'x');
    if (!x || !isdigit((unsigned char)text[0]) || !isdigit((unsigned char)x[1]) ||
        sscanf(text, "%5d%*1[x]%5d%n", &h, &w, &used) != 2 || text[used] != '\0' || h < 1 || w < 1 ||
        h > HW_IMAGE_MAX_SIDE || w > HW_IMAGE_MAX_SIDE) {
        return usage_error("--resize expects HEIGHTxWIDTH, each from 1 to 4096 (e.g. 28x28), got '%s'", text);
    }
    config->resize_height = h;
    config->resize_width = w;
    return HW_EXIT_OK;
}

static int parse_normalize(const char *text, hw_normalize *norm) {
    if (strcmp(text, "auto") == 0) {
        *norm = (hw_normalize){0, 0};
        return HW_EXIT_OK;
    }
    float mean, std;
    char rest;
    // nan, inf and numbers beyond a float (1e39, read as inf) would train to NaN: refused.
    if (sscanf(text, "%f,%f%c", &mean, &std, &rest) != 2 || !isfinite(mean) || !isfinite(std) || !(std > 0)) {
        return usage_error("--normalize expects MEAN,STD, finite numbers with STD > 0 (e.g. 0.1307,0.3081) or auto, "
                           "got '%s'",
                           text);
    }
    // Pixels are in [0, 1]: normalised beyond +-1e6 (a STD of 1e-45 gave 1e45, then inf) the first
    // batch overflows, and the run ended as "diverged" with a hint to lower --lr.
    double lo = (0.0 - mean) / std, hi = (1.0 - mean) / std;
    if (!(fabs(lo) <= 1e6 && fabs(hi) <= 1e6)) {
        return usage_error("--normalize %s maps pixels in [0, 1] beyond +-1e6, where the network overflows: give a "
                           "MEAN near the pixels' mean and a STD near their spread (or auto)",
                           text);
    }
    *norm = (hw_normalize){mean, std};
    return HW_EXIT_OK;
}

// ---- subcommands ----

static int command_download(int argc, char **argv) {
    const char *name = NULL, *dir = NULL;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--dir") == 0) {
            if (i + 1 >= argc || !argv[i + 1][0]) return usage_error("download: option '%s' needs a folder", argv[i]);
            dir = argv[++i];
        } else if (argv[i][0] == '-') {
            return usage_error("download: unknown option '%s'", argv[i]);
        } else if (!name) {
            name = argv[i];
        } else {
            return usage_error("download: one dataset name at a time, got also '%s'", argv[i]);
        }
    }
    if (!name) return usage_error("download: which dataset? %s", "mnist or fashion-mnist");
    // A name it does not know is bad usage (exit 2), as a missing one is; KMNIST's files load with
    // --data once fetched by hand.
    if (!hw_download_known(name)) {
        return usage_error("download: unknown dataset '%s': known are mnist and fashion-mnist (KMNIST and other "
                           "IDX datasets load with --data DIR once their four files are there)", name);
    }
    char default_dir[512];
    if (!dir) {
        snprintf(default_dir, sizeof default_dir, "data/%s", name);
        dir = default_dir;
    }
    if (hw_download(name, dir) != HW_OK) {
        fprintf(stderr, "hogwild download: %s\n", hw_error());
        return HW_EXIT_FAILURE;
    }
    return HW_EXIT_OK;
}

// Whether `dir` holds one of the four IDX files (gzipped or not): a dataset that synth would replace.
static const char *dataset_file_in(const char *dir) {
    static const char *const names[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                        "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
    static char found[1100];
    for (int i = 0; i < 4; i++) {
        for (int gz = 0; gz < 2; gz++) {
            snprintf(found, sizeof found, "%s/%s%s", dir, names[i], gz ? ".gz" : "");
            if (access(found, F_OK) == 0) return found;
        }
    }
    return NULL;
}

static int command_synth(int argc, char **argv) {
    const char *dir = "data/synthetic";
    long n_train = 60000, n_test = 10000, seed = 1;
    int overwrite = 0;
    for (int i = 0; i < argc; i++) {
        int status = HW_EXIT_OK;
        if (strcmp(argv[i], "--overwrite") == 0) {
            overwrite = 1;
            continue;
        }
        const char *const known[] = {"--dir", "--train", "--test", "--seed"};
        int is_known = 0;
        for (size_t k = 0; k < sizeof known / sizeof known[0]; k++) is_known |= strcmp(argv[i], known[k]) == 0;
        if (!is_known) return usage_error("synth: unknown option '%s'", argv[i]);
        if (i + 1 >= argc || !argv[i + 1][0]) return usage_error("synth: option '%s' needs a value", argv[i]);
        if (strcmp(argv[i], "--dir") == 0) {
            dir = argv[++i];
        } else if (strcmp(argv[i], "--train") == 0) {
            status = parse_int("--train", argv[++i], 1, 10000000, &n_train);
        } else if (strcmp(argv[i], "--test") == 0) {
            status = parse_int("--test", argv[++i], 1, 10000000, &n_test);
        } else if (strcmp(argv[i], "--seed") == 0) {
            status = parse_int("--seed", argv[++i], 0, LONG_MAX, &seed);
        } else {
            return usage_error("synth: unknown option '%s'", argv[i]);
        }
        if (status != HW_EXIT_OK) return status;
    }
    // `synth --dir data/mnist` replaced the real MNIST without a word.
    const char *existing = overwrite ? NULL : dataset_file_in(dir);
    if (existing) {
        fprintf(stderr, "hogwild synth: %s already holds a dataset (%s): give --overwrite to replace it, or another "
                        "--dir\n",
                dir, existing);
        return HW_EXIT_FAILURE;
    }
    if (hw_synth_write(dir, n_train, n_test, (uint64_t)seed) != HW_OK) {
        fprintf(stderr, "hogwild synth: %s\n", hw_error());
        return HW_EXIT_FAILURE;
    }
    printf("wrote synthetic digits (%ld train, %ld test, seed %ld) to %s\n", n_train, n_test, seed, dir);
    return HW_EXIT_OK;
}

static int command_summary(const hw_train_config *config) {
    hw_model model;
    if (hw_model_load(&model, config->model_path) != HW_OK ||
        (config->freeze && hw_model_freeze(&model, config->freeze) != HW_OK)) {
        fprintf(stderr, "hogwild: %s\n", hw_error());
        return HW_EXIT_FAILURE;
    }
    hw_model_summary(&model, stdout);
    hw_model_free(&model);
    return HW_EXIT_OK;
}

static int command_list_strategies(void) {
    int count;
    const char *const *names = hw_sharing_strategies(&count);
    const char *current = hw_sharing_strategy_get();
    for (int i = 0; i < count; i++) printf("%s%s\n", names[i], strcmp(names[i], current) == 0 ? " (current)" : "");
    return HW_EXIT_OK;
}

static int command_clean_shm(void) {
    // The count first, then a line per name removed or kept, with the reason.
    int removed = 0;
    char *report = NULL;
    size_t report_size = 0;
    FILE *lines = open_memstream(&report, &report_size);
    int status = hw_shm_clean(lines, &removed);
    if (lines) fclose(lines);
    // Also when a removal failed: what was removed and kept is said all the same.
    printf("removed %d stale shared-memory segment(s) and checkpoint temporary file(s)\n%s", removed,
           report ? report : "");
    free(report);
    if (status != HW_OK) {
        fflush(stdout);
        fprintf(stderr, "hogwild --clean-shm: %s\n", hw_error());
        return HW_EXIT_FAILURE;
    }
    return HW_EXIT_OK;
}

static double largest_magnitude(const float *w, size_t n) {
    double most = 0;
    for (size_t i = 0; i < n; i++) {
        if (fabs((double)w[i]) > most) most = fabs((double)w[i]);
    }
    return most;
}

static int command_eval_only(hw_train_config *config, int model_given) {
    if (hw_run_check_stack() != HW_OK || hw_blas_open() != HW_OK ||
        hw_nn_kernels_select(getenv("HOGWILD_CPU_PATH")) != HW_OK) {
        fprintf(stderr, "hogwild: %s\n", hw_error());
        return HW_EXIT_FAILURE;
    }
    // Without --model, the model is the one the checkpoint was trained with (its metadata keeps the
    // model file's text), so that --eval-only works from any folder.
    char *model_text = NULL;
    if (!model_given) {
        if (hw_ckpt_load_model_text(config->resume_path, &model_text) != HW_OK) {
            fprintf(stderr, "hogwild: %s\n", hw_error());
            return HW_EXIT_FAILURE;
        }
        if (!model_text) {
            // Not models/lenet.model by default: that would evaluate a network the checkpoint was
            // perhaps never trained as, and any mismatch would read as a fault of the checkpoint.
            fprintf(stderr, "hogwild: the checkpoint %s holds no model text (it was not written by hogwild): give the "
                            "network it was trained as with --model FILE\n",
                    config->resume_path);
            return HW_EXIT_FAILURE;
        }
        config->model_text = model_text;
        config->model_path = config->resume_path;
    }
    hw_train_inputs in;
    char capped[512] = "";
    int loaded = hw_train_inputs_load(&in, config);
    if (loaded == HW_OK) hw_train_fit_batches(config, &in, capped, sizeof capped);  // only the test batch applies
    if (loaded != HW_OK || hw_run_check_memory(config, &in, 1) != HW_OK || hw_model_alloc_weights(&in.model) != HW_OK) {
        fprintf(stderr, "hogwild: %s\n", hw_error());
        hw_train_inputs_free(&in);
        free(model_text);
        return HW_EXIT_FAILURE;
    }
    free(model_text);
    config->model_text = NULL;
    // A checkpoint with non-finite weights (from a run that diverged) is refused here, by name: its
    // evaluation would be chance accuracy printed as a result.
    hw_ckpt_meta meta;
    hw_workspace ws;
    if (hw_train_load_checkpoint(config->resume_path, &in.model, &meta) != HW_OK ||
        hw_workspace_alloc(&ws, &in.model, config->test_batch_size, config->seed) != HW_OK) {
        fprintf(stderr, "hogwild: %s\n", hw_error());
        hw_train_inputs_free(&in);
        return HW_EXIT_FAILURE;
    }
    hw_eval_result r = hw_evaluate(&in.model, &ws, &in.test, in.norm, config->test_batch_size);
    if (hw_loss_diverged(r.loss)) {
        // Finite weights can still be no model: 1e30 everywhere gives NaN logits. As in training,
        // a diverged loss is no result (hw_loss_diverged), and its accuracy is chance.
        char loss_text[48];
        hw_loss_describe(loss_text, sizeof loss_text, r.loss);
        fprintf(stderr, "hogwild: the checkpoint %s gives a test loss of %s on %s: its weights (largest magnitude "
                        "%.3g) have blown up, as a diverged run's do; use an earlier checkpoint\n",
                config->resume_path, loss_text, config->data_dir, largest_magnitude(in.model.weights,
                                                                                   in.model.n_weights));
        hw_workspace_free(&ws);
        hw_train_inputs_free(&in);
        return HW_EXIT_FAILURE;
    }
    printf("%s (epoch %d, %lld samples seen): test loss %.4f, accuracy %.2f%% on %lld samples of %s\n",
           config->resume_path, meta.epoch, (long long)meta.samples_seen, r.loss, r.accuracy, (long long)in.test.n,
           config->data_dir);
    hw_workspace_free(&ws);
    hw_train_inputs_free(&in);
    return HW_EXIT_OK;
}

static int command_train(hw_train_config *config) {
    if (hw_run_check_stack() != HW_OK) {
        fprintf(stderr, "hogwild: %s\n", hw_error());
        return HW_EXIT_FAILURE;
    }
    hw_train_inputs in;
    // The BLAS is loaded first, while this is the only thread and before any fork (hw_blas_open), so
    // that the memory check counts it; the CPU kernels are chosen then too (HOGWILD_CPU_PATH).
    if (hw_blas_open() != HW_OK || hw_nn_kernels_select(getenv("HOGWILD_CPU_PATH")) != HW_OK) {
        fprintf(stderr, "hogwild: %s\n", hw_error());
        return HW_EXIT_FAILURE;
    }
    // --save through a symbolic link writes the file it points to (`--resume X --save X` with X a
    // link updated a new file in the link's place and left the checkpoint it named behind).
    static char save_target[PATH_MAX];
    struct stat link;
    if (config->save_path && lstat(config->save_path, &link) == 0 && S_ISLNK(link.st_mode) &&
        realpath(config->save_path, save_target)) {
        config->save_path = save_target;
    }
    char capped[512] = "";
    int loaded = hw_train_inputs_load(&in, config);
    if (loaded == HW_OK) hw_train_fit_batches(config, &in, capped, sizeof capped);
    if (loaded != HW_OK || hw_run_check_outputs(config) != HW_OK ||
        (config->save_path && hw_ckpt_keep_descriptor() != HW_OK) || hw_run_check_memory(config, &in, 0) != HW_OK) {
        fprintf(stderr, "hogwild: %s\n", hw_error());
        hw_train_inputs_free(&in);
        return HW_EXIT_FAILURE;
    }
    if (capped[0] && !config->quiet) printf("hogwild: %s\n", capped);
    char device[32], ranks[32] = "";
    hw_device_format(config->device, device, sizeof device);
    if (config->world.size > 1) snprintf(ranks, sizeof ranks, "%d ranks x ", config->world.size);
    if (!config->quiet) {
        printf("hogwild: %s, %s%s %d, %s on %s (%lld train / %lld test samples), %d epoch(s), batch %d, lr %g, "
               "momentum %g, %zu parameters, sharing %s\n",
               config->mode == HW_MODE_HOGWILD ? "Hogwild" : "DataParallel", ranks,
               config->mode == HW_MODE_HOGWILD ? "workers" : "replicas",
               config->mode == HW_MODE_HOGWILD ? config->workers : config->replicas, config->model_path,
               config->data_dir, (long long)in.train.n, (long long)in.test.n, config->epochs, config->batch_size,
               (double)config->lr, (double)config->momentum, in.model.n_weights, hw_sharing_strategy_get());
        printf("hogwild: BLAS %s; CPU kernels %s\n", hw_blas_info(), hw_nn_kernels_info());
        fflush(stdout);
    }
    hw_train_result result;
    int status = config->mode == HW_MODE_HOGWILD ? hw_train_hogwild(config, &in, &result)
                                                 : hw_train_dataparallel(config, &in, &result);
    hw_train_inputs_free(&in);
    if (status != HW_OK) {
        if (config->world.size > 1) {
            // The other ranks may be waiting for this one in a collective: the whole job ends, now.
            fprintf(stderr, "hogwild (rank %d of %d): %s\n", config->world.rank, config->world.size, hw_error());
            fflush(stderr);
            hw_comm_abort(HW_EXIT_FAILURE);
        } else {
            fprintf(stderr, "hogwild: %s\n", hw_error());
        }
        return HW_EXIT_FAILURE;
    }
    hw_comm_finalize();
    if (result.interrupted_by) return 128 + result.interrupted_by;
    return HW_EXIT_OK;
}

// The flags given on the command line, in order (a flag given twice is listed twice).
enum { MAX_GIVEN = 128 };
typedef struct {
    const char *flag[MAX_GIVEN];
    int n;
} given_flags;

// --eval-only evaluates a checkpoint on the CPU and trains nothing: a flag that would change
// training, the workers or where they run has no effect there, and is refused rather than ignored.
static int check_eval_only_flags(const given_flags *given, const hw_train_config *config) {
    static const char *const apply[] = {"--eval-only", "--resume", "--model", "--data", "--resize",
                                        "--test-batch-size", "--normalize", "--quiet", "--device"};
    for (int i = 0; i < given->n; i++) {
        int applies = 0;
        for (size_t k = 0; k < sizeof apply / sizeof apply[0]; k++) applies |= strcmp(given->flag[i], apply[k]) == 0;
        if (strcmp(given->flag[i], "--save") == 0 || strcmp(given->flag[i], "--metrics") == 0) continue;  // below
        if (!applies) {
            return usage_error("%s does not apply to --eval-only, which evaluates the checkpoint on the CPU and trains "
                               "nothing: drop it", given->flag[i]);
        }
    }
    if (config->device.type == HW_DEVICE_CUDA) {
        return usage_error("--eval-only evaluates on the CPU; --device %s is not supported there (drop it)", "cuda");
    }
    return HW_EXIT_OK;
}

// Which of --sync-every, --sync-timeout and --sync-rule were given (bits of check_world's sync_given).
enum { SYNC_EVERY_GIVEN = 1, SYNC_TIMEOUT_GIVEN = 2, SYNC_RULE_GIVEN = 4 };

// A run started by mpirun with several ranks (config->world): what each rank does and does not.
static int check_world(hw_train_config *config, int sync_given) {
    if (config->world.size == 1) {
        if (sync_given) {
            return usage_error("--sync-every, --sync-rule and --sync-timeout couple the ranks of an mpirun job; this "
                               "run is not one%s", "");
        }
        return HW_EXIT_OK;
    }
    if (!hw_comm_built()) {
        fprintf(stderr, "hogwild: started by mpirun as rank %d of %d, but this hogwild was built without MPI (make "
                        "MPI=0, or Open MPI was not found when it was built)\n",
                config->world.rank, config->world.size);
        return HW_EXIT_FAILURE;
    }
    if (config->device.type == HW_DEVICE_CUDA && config->mode == HW_MODE_HOGWILD) {
        return usage_error("Hogwild across ranks trains on the CPU; GPU ranks run DataParallel (--mode dataparallel "
                           "--device %s, NCCL between the ranks)", "cuda");
    }
    if (config->n_gpus > 0) {
        // Across ranks each rank drives the GPU of its local rank (src/train/dataparallel_cuda.c).
        return usage_error("--gpus lists the GPUs of one process; across ranks each rank drives one GPU, local rank L "
                           "of a host GPU B+L (--device cuda:B), with --replicas K on it%s", "");
    }
    if (config->eval_only) return usage_error("--eval-only evaluates in one process: run it without mpirun%s", "");
    if (config->mode == HW_MODE_DATAPARALLEL && (sync_given & (SYNC_EVERY_GIVEN | SYNC_RULE_GIVEN))) {
        return usage_error("%s is for Hogwild across ranks; DataParallel sums the gradients every step",
                           sync_given & SYNC_EVERY_GIVEN ? "--sync-every" : "--sync-rule");
    }
    if (config->world.rank != 0) {
        // Rank 0 prints, evaluates, writes the metrics and saves the checkpoints for the job.
        config->quiet = 1;
        config->metrics_path = NULL;  // (config->job_metrics still says rank 0 writes them)
        config->save_path = NULL;
    }
    return HW_EXIT_OK;
}

// ---- the main options ----

int main(int argc, char **argv) {
    // A closed stdout (`hogwild ... | head -1`) must not kill a run: writes then fail with EPIPE,
    // hw_progress_message stops printing, and training goes on to its checkpoint.
    signal(SIGPIPE, SIG_IGN);
    // A write beyond the file size limit (ulimit -f) then fails with EFBIG, which the checkpoint and
    // metrics writers report, instead of killing the run.
    signal(SIGXFSZ, SIG_IGN);
    const char *const subcommands[] = {"download", "synth", "compare"};
    for (int k = 0; argc > 1 && k < 3; k++) {
        if (strcmp(argv[1], subcommands[k]) != 0) continue;
        // Under mpirun every rank would run it: two downloads, two syntheses, two comparisons
        // writing the same plot at once.
        hw_world world;
        if (hw_world_detect(&world) == HW_OK && world.size > 1) {
            return usage_error("hogwild %s runs in one process: start it without mpirun", subcommands[k]);
        }
    }
    if (argc > 1 && strcmp(argv[1], "download") == 0) return command_download(argc - 2, argv + 2);
    if (argc > 1 && strcmp(argv[1], "synth") == 0) return command_synth(argc - 2, argv + 2);
    if (argc > 1 && strcmp(argv[1], "compare") == 0) return hw_compare_main(argc - 2, argv + 2);

    hw_train_config config;
    hw_train_config_default(&config);
    int summary = 0, replicas_given = 0, workers_given = 0, model_given = 0, list_strategies = 0, clean_shm = 0;
    int sync_given = 0;
    given_flags given = {0};
    for (int i = 1; i < argc; i++) {
        const char *flag = argv[i];
        long n = 0;
        double x = 0;
        int status = HW_EXIT_OK;
        if (given.n < MAX_GIVEN && strncmp(flag, "--", 2) == 0) given.flag[given.n++] = flag;
        // Flags without a value.
        if (strcmp(flag, "-h") == 0 || strcmp(flag, "--help") == 0) {
            print_usage(stdout, 1);
            return HW_EXIT_OK;
        } else if (strcmp(flag, "--version") == 0) {
            printf("hogwild 0.1.0\nBLAS: %s\n", hw_blas_info());
            if (hw_nn_kernels_select(getenv("HOGWILD_CPU_PATH")) != HW_OK) {
                fprintf(stderr, "hogwild: %s\n", hw_error());
                return HW_EXIT_FAILURE;
            }
            printf("CPU kernels: %s\n", hw_nn_kernels_info());
            return HW_EXIT_OK;
        } else if (strcmp(flag, "--summary") == 0) {
            summary = 1;
            continue;
        } else if (strcmp(flag, "--list-sharing-strategies") == 0) {
            list_strategies = 1;  // after every flag: --sharing-strategy may come later
            continue;
        } else if (strcmp(flag, "--clean-shm") == 0) {
            clean_shm = 1;
            continue;
        } else if (strcmp(flag, "--overwrite") == 0) {
            config.overwrite = 1;
            continue;
        } else if (strcmp(flag, "--nesterov") == 0) {
            config.nesterov = 1;
            continue;
        } else if (strcmp(flag, "--eval-only") == 0) {
            config.eval_only = 1;
            continue;
        } else if (strcmp(flag, "--quiet") == 0) {
            config.quiet = 1;
            continue;
        } else if (strcmp(flag, "--prefetch") == 0) {
            config.prefetch = 1;
            continue;
        } else if (strcmp(flag, "--measure") == 0) {
            config.measure = 1;
            continue;
        }
        // Flags with a value.
        if (strncmp(flag, "--", 2) != 0) return usage_error("unexpected argument '%s'", flag);
        if (i + 1 >= argc) {
            return takes_value(flag) ? usage_error("option '%s' needs a value", flag)
                                     : usage_error("unknown option '%s'", flag);
        }
        const char *value = argv[++i];
        // --save '' passed every check of a file name and failed at the first save, an epoch later.
        if (!value[0]) return usage_error("option '%s' needs a value, got an empty one", flag);
        if (strcmp(flag, "--workers") == 0) {
            status = parse_int(flag, value, 1, 1024, &n);
            config.workers = (int)n;
            workers_given = 1;
        } else if (strcmp(flag, "--replicas") == 0) {
            status = parse_int(flag, value, 1, 1024, &n);
            config.replicas = (int)n;
            replicas_given = 1;
        } else if (strcmp(flag, "--mode") == 0) {
            if (strcmp(value, "hogwild") == 0) {
                config.mode = HW_MODE_HOGWILD;
            } else if (strcmp(value, "dataparallel") == 0) {
                config.mode = HW_MODE_DATAPARALLEL;
            } else {
                return usage_error("--mode expects hogwild or dataparallel, got '%s'", value);
            }
        } else if (strcmp(flag, "--gpus") == 0) {
            status = parse_gpus(value, &config);
        } else if (strcmp(flag, "--device") == 0) {
            if (hw_device_parse(value, &config.device) != HW_OK) return usage_error("--device: %s", hw_error());
        } else if (strcmp(flag, "--model") == 0) {
            config.model_path = value;
            model_given = 1;
        } else if (strcmp(flag, "--data") == 0) {
            config.data_dir = value;
        } else if (strcmp(flag, "--resize") == 0) {
            status = parse_resize(value, &config);
        } else if (strcmp(flag, "--epochs") == 0) {
            status = parse_int(flag, value, 1, 100000, &n);
            config.epochs = (int)n;
        } else if (strcmp(flag, "--batch-size") == 0) {
            status = parse_int(flag, value, 1, 1 << 20, &n);
            config.batch_size = (int)n;
        } else if (strcmp(flag, "--test-batch-size") == 0) {
            status = parse_int(flag, value, 1, 1 << 20, &n);
            config.test_batch_size = (int)n;
        } else if (strcmp(flag, "--lr") == 0) {
            status = parse_float(flag, value, 0, &x);
            config.lr = (float)x;
        } else if (strcmp(flag, "--momentum") == 0) {
            status = parse_float(flag, value, 0, &x);
            config.momentum = (float)x;
        } else if (strcmp(flag, "--weight-decay") == 0) {
            status = parse_float(flag, value, 0, &x);
            config.weight_decay = (float)x;
        } else if (strcmp(flag, "--seed") == 0) {
            status = parse_int(flag, value, 0, LONG_MAX, &n);
            config.seed = (uint64_t)n;
        } else if (strcmp(flag, "--normalize") == 0) {
            status = parse_normalize(value, &config.norm);
        } else if (strcmp(flag, "--freeze") == 0) {
            config.freeze = value;
        } else if (strcmp(flag, "--eval-every") == 0) {
            status = parse_int(flag, value, 1, LONG_MAX, &n);
            config.eval_every = n;
        } else if (strcmp(flag, "--metrics") == 0) {
            config.metrics_path = value;
        } else if (strcmp(flag, "--save") == 0) {
            config.save_path = value;
        } else if (strcmp(flag, "--resume") == 0) {
            config.resume_path = value;
        } else if (strcmp(flag, "--sync-every") == 0) {
            status = parse_sync_every(value, &config);
            sync_given |= SYNC_EVERY_GIVEN;
        } else if (strcmp(flag, "--sync-rule") == 0) {
            if (hw_couple_rule_parse(value, &config.sync_rule) != HW_OK) return usage_error("--sync-rule %s", hw_error());
            sync_given |= SYNC_RULE_GIVEN;
        } else if (strcmp(flag, "--sync-timeout") == 0) {
            status = parse_float(flag, value, 0.001, &x);
            config.sync_timeout = x;
            sync_given |= SYNC_TIMEOUT_GIVEN;
        } else if (strcmp(flag, "--sharing-strategy") == 0) {
            if (hw_sharing_strategy_set(value) != HW_OK) return usage_error("--sharing-strategy: %s", hw_error());
        } else {
            return usage_error("unknown option '%s'", flag);
        }
        if (status != HW_EXIT_OK) return status;
    }

    if (list_strategies) return command_list_strategies();
    if (clean_shm) return command_clean_shm();
    if (summary) return command_summary(&config);
    if (config.eval_only) {
        int flags_status = check_eval_only_flags(&given, &config);
        if (flags_status != HW_EXIT_OK) return flags_status;
    }
    if (config.momentum == 0 && config.nesterov) return usage_error("--nesterov needs --momentum > 0%s", "");
    if (config.mode == HW_MODE_HOGWILD && replicas_given) {
        return usage_error("--replicas is for --mode dataparallel; Hogwild uses --workers%s", "");
    }
    if (config.mode == HW_MODE_DATAPARALLEL) {
        if (workers_given) return usage_error("--workers is for Hogwild; DataParallel uses --replicas or --gpus%s", "");
        if (config.n_gpus > 0) {
            if (replicas_given) return usage_error("give --replicas or --gpus, not both%s", "");
            config.device = (hw_device){HW_DEVICE_CUDA, config.gpus[0]};
            config.replicas = config.n_gpus;
        }
    } else if (config.n_gpus > 0) {
        return usage_error("--gpus is for --mode dataparallel; Hogwild uses --device cuda:N%s", "");
    }
    // What --measure counts (updates onto one shared copy of the weights, read through a worker's
    // private copy) exists only in CPU Hogwild: DataParallel has no races, and GPU workers'
    // kernels give the host no per-step hook.
    if (config.measure && config.mode == HW_MODE_DATAPARALLEL) {
        return usage_error("--measure measures Hogwild's races; DataParallel has none (use --mode hogwild)%s", "");
    }
    if (config.measure && config.device.type == HW_DEVICE_CUDA) {
        return usage_error("--measure is for Hogwild workers on the CPU, not --device %s", "cuda");
    }
    if (config.measure && config.eval_only) return usage_error("--measure measures training, not --eval-only%s", "");
    // Which rank of an mpirun job this is, from the environment mpirun sets: no MPI call yet.
    if (hw_world_detect(&config.world) != HW_OK) {
        fprintf(stderr, "hogwild: %s\n", hw_error());
        return HW_EXIT_FAILURE;
    }
    config.job_metrics = config.metrics_path != NULL;
    int world_status = check_world(&config, sync_given);
    if (world_status != HW_EXIT_OK) return world_status;
    // Before anything starts a thread (the GPU libraries, MPI, the loaders): the janitor is a fork.
    if (config.world.size > 1 && hw_comm_built() && hw_comm_janitor_start(&config.world) != HW_OK) {
        fprintf(stderr, "hogwild: %s\n", hw_error());
        return HW_EXIT_FAILURE;
    }
    if (config.eval_only) {
        if (!config.resume_path) return usage_error("--eval-only needs --resume FILE%s", "");
        // It trains nothing, so it writes no checkpoint and no metrics: refused, not ignored.
        if (config.save_path) return usage_error("--eval-only writes no checkpoint: drop --save %s", config.save_path);
        if (config.metrics_path) {
            return usage_error("--eval-only writes no metrics: drop --metrics %s", config.metrics_path);
        }
        return command_eval_only(&config, model_given);
    }
    return command_train(&config);
}
