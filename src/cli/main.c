// main: the command line of ./hogwild, nothing else.
#include "hw/blas.h"
#include "hw/ckpt.h"
#include "hw/comm.h"
#include "hw/data.h"
#include "hw/err.h"
#include "hw/file.h"
#include "hw/nn.h"
#include "hw/shm.h"
#include "hw/train.h"
#include "hw/run_log.h"
#include "cli/compare_command.h"
#include "cli/preflight.h"
#include "cli/train_options.h"

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
    "       hogwild compare RUN.csv... [--target PCT] [--plot FILE.svg | --no-plot]\n"
    "                                              compare runs from --metrics files\n";

static const char *exit_text =
    "\nExit status: 0 done, 1 failed, 2 bad usage, 130/143/129 stopped by SIGINT/SIGTERM/SIGHUP.\n";

static void print_usage(FILE *out, int with_options) {
    fputs(usage_text, out);
    if (with_options) {
        cli_print_options(&cli_train_command, out);
        fputs(exit_text, out);
    }
}

static int usage_error(const char *fmt, const char *value) {
    fprintf(stderr, "hogwild: ");
    fprintf(stderr, fmt, value);
    fprintf(stderr, "\n\n");
    print_usage(stderr, 0);
    fprintf(stderr, "Run 'hogwild --help' for every option.\n");
    return HW_EXIT_USAGE;
}

// ---- subcommands ----

// The small commands' options, on the same table mechanism as training's (src/cli/options.h).
// Their arguments are argv[1..argc) after the command's word, argv[0].

typedef struct {
    const char *dir;
} download_args;

static const cli_option download_options[] = {
    {.name = "dir",
     .metavar = "DIR",
     .kind = CLI_TEXT,
     .field = offsetof(download_args, dir),
     .help = "where to write the four IDX files (default data/NAME)"},
    {.name = "help", .short_name = 'h', .kind = CLI_SWITCH, .field = CLI_NO_FIELD, .help = "this text"},
};

static const cli_command download_command = {
    .options = download_options,
    .n_options = sizeof download_options / sizeof download_options[0],
    .missing = "option '%s' needs a folder",
    .empty = "option '%s' needs a folder",
    .operands = 1,
    .help_column = 19,
};

// `hogwild download --help`, `hogwild synth --help`: the command's usage line and its options.
static int print_command_help(const cli_command *command, const char *usage) {
    fputs(usage, stdout);
    cli_print_options(command, stdout);
    return HW_EXIT_OK;
}

static int command_download(int argc, char **argv) {
    download_args args = {0};
    cli_defaults(&download_command, &args);
    cli_parsed parsed;
    static const char *const stop_at[] = {"help", NULL};
    int status = cli_parse(&download_command, argc, argv, &args, stop_at, &parsed);
    const char *name = parsed.n_operands > 0 ? parsed.operands[0] : NULL;
    const char *also = parsed.n_operands > 1 ? parsed.operands[1] : NULL;
    cli_parsed_free(&parsed);
    if (status != HW_EXIT_OK) return usage_error("download: %s", parsed.error);
    if (parsed.stop) {
        return print_command_help(&download_command, "usage: hogwild download NAME [--dir DIR]\n"
                                                     "Gets mnist or fashion-mnist, md5-checked.\n\n");
    }
    if (also) return usage_error("download: one dataset name at a time, got also '%s'", also);
    const char *dir = args.dir;
    if (!name) return usage_error("download: which dataset? %s", "mnist or fashion-mnist");
    // A name it does not know is bad usage (exit 2), as a missing one is; KMNIST's files load with
    // --data once fetched by hand.
    if (!hw_download_known(name)) {
        return usage_error("download: unknown dataset '%s': known are mnist and fashion-mnist (KMNIST and other "
                           "IDX datasets load with --data DIR once their four files are there)",
                           name);
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

typedef struct {
    const char *dir;
    int64_t n_train, n_test;
    uint64_t seed;
    int overwrite;
} synth_args;

static const cli_option synth_options[] = {
    {.name = "dir",
     .metavar = "DIR",
     .kind = CLI_TEXT,
     .field = offsetof(synth_args, dir),
     .fallback = "data/synthetic",
     .help = "where to write the four IDX files (default %s)"},
    {.name = "train",
     .metavar = "N",
     .kind = CLI_INT64,
     .field = offsetof(synth_args, n_train),
     .min = 1,
     .max = 10000000,
     .fallback = "60000",
     .help = "training images (default %s)"},
    {.name = "test",
     .metavar = "N",
     .kind = CLI_INT64,
     .field = offsetof(synth_args, n_test),
     .min = 1,
     .max = 10000000,
     .fallback = "10000",
     .help = "test images (default %s)"},
    {.name = "seed",
     .metavar = "S",
     .kind = CLI_UINT64,
     .field = offsetof(synth_args, seed),
     .min = 0,
     .max = LLONG_MAX,
     .fallback = "1",
     .help = "seed of the digits drawn (default %s)"},
    {.name = "overwrite",
     .kind = CLI_SWITCH,
     .field = offsetof(synth_args, overwrite),
     .help = "replace a dataset already in DIR"},
    {.name = "help", .short_name = 'h', .kind = CLI_SWITCH, .field = CLI_NO_FIELD, .help = "this text"},
};

static const cli_command synth_command = {
    .options = synth_options,
    .n_options = sizeof synth_options / sizeof synth_options[0],
    .missing = "option '%s' needs a value",
    .empty = "option '%s' needs a value",
    .operands = 1,  // refused below: synth takes no name
    .help_column = 19,
};

static int command_synth(int argc, char **argv) {
    synth_args args = {0};
    cli_defaults(&synth_command, &args);
    cli_parsed parsed;
    static const char *const stop_at[] = {"help", NULL};
    int status = cli_parse(&synth_command, argc, argv, &args, stop_at, &parsed);
    const char *stray = parsed.n_operands > 0 ? parsed.operands[0] : NULL;
    cli_parsed_free(&parsed);
    // A number out of range names its flag; anything else is the command's.
    if (status != HW_EXIT_OK && strncmp(parsed.error, "--", 2) == 0) return usage_error("%s", parsed.error);
    if (status != HW_EXIT_OK) return usage_error("synth: %s", parsed.error);
    if (stray) return usage_error("synth: unexpected argument '%s' (it takes no name: --dir DIR)", stray);
    if (parsed.stop) {
        return print_command_help(&synth_command,
                                  "usage: hogwild synth [--dir DIR] [--train N] [--test N] [--seed S] [--overwrite]\n"
                                  "Writes the synthetic digits as IDX files, a stand-in for MNIST offline.\n\n");
    }
    const char *dir = args.dir;
    long n_train = (long)args.n_train, n_test = (long)args.n_test, seed = (long)args.seed;
    int overwrite = args.overwrite;
    // `synth --dir data/mnist` replaced the real MNIST without a word.
    const char *existing = overwrite ? NULL : preflight_dataset_file_in(dir);
    if (existing) {
        fprintf(stderr,
                "hogwild synth: %s already holds a dataset (%s): give --overwrite to replace it, or another "
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
    if (preflight_stack() != HW_OK || hw_blas_open() != HW_OK ||
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
            fprintf(stderr,
                    "hogwild: the checkpoint %s holds no model text (it was not written by hogwild): give the "
                    "network it was trained as with --model FILE\n",
                    config->resume_path);
            return HW_EXIT_FAILURE;
        }
        config->model_text = model_text;
        config->model_path = config->resume_path;
    }
    if (preflight_data(config) != HW_OK) {
        fprintf(stderr, "hogwild: %s\n", hw_error());
        free(model_text);
        return HW_EXIT_FAILURE;
    }
    hw_train_inputs in;
    char capped[512] = "";
    int loaded = hw_train_inputs_load(&in, config);
    if (loaded == HW_OK) preflight_fit_batches(config, &in, capped, sizeof capped);  // only the test batch applies
    if (loaded != HW_OK || preflight_memory(config, &in, 1) != HW_OK || hw_model_alloc_weights(&in.model) != HW_OK) {
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
        fprintf(stderr,
                "hogwild: the checkpoint %s gives a test loss of %s on %s: its weights (largest magnitude "
                "%.3g) have blown up, as a diverged run's do; use an earlier checkpoint\n",
                config->resume_path, loss_text, config->data_dir,
                largest_magnitude(in.model.weights, in.model.n_weights));
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
    if (preflight_stack() != HW_OK || preflight_data(config) != HW_OK) {
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
    if (loaded == HW_OK) preflight_fit_batches(config, &in, capped, sizeof capped);
    if (loaded != HW_OK || preflight_outputs(config) != HW_OK ||
        (config->save_path && hw_ckpt_keep_descriptor() != HW_OK) || preflight_memory(config, &in, 0) != HW_OK) {
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

// --eval-only evaluates a checkpoint on the CPU and trains nothing: a flag that would change
// training, the workers or where they run has no effect there, and is refused rather than ignored.
static int check_eval_only_flags(const cli_parsed *given, const hw_train_config *config) {
    static const char *const apply[] = {"eval-only",       "resume",    "model", "data",  "resize",
                                        "test-batch-size", "normalize", "quiet", "device"};
    for (int i = 0; i < given->n_given; i++) {
        const char *name = given->given[i]->name;
        int applies = 0;
        for (size_t k = 0; k < sizeof apply / sizeof apply[0]; k++) applies |= strcmp(name, apply[k]) == 0;
        if (strcmp(name, "save") == 0 || strcmp(name, "metrics") == 0) continue;  // below
        if (!applies) {
            char flag[80];
            snprintf(flag, sizeof flag, "--%s", name);
            return usage_error("%s does not apply to --eval-only, which evaluates the checkpoint on the CPU and trains "
                               "nothing: drop it",
                               flag);
        }
    }
    if (config->device.type == HW_DEVICE_CUDA) {
        return usage_error("--eval-only evaluates on the CPU; --device %s is not supported there (drop it)", "cuda");
    }
    return HW_EXIT_OK;
}

// Hogwild on several GPUs (--gpus LIST): a copy of the weights per entry, its workers round-robin.
static int check_hogwild_gpus(hw_train_config *config, const cli_parsed *given) {
    if (cli_given(given, "device")) {
        return usage_error("give --device or --gpus, not both (--gpus %s puts Hogwild's copies on those GPUs)", "LIST");
    }
    if (config->n_gpus > config->workers) {
        char text[160];
        snprintf(text, sizeof text,
                 "--gpus lists %d GPUs but --workers is %d: every GPU's copy of the weights needs "
                 "at least one worker",
                 config->n_gpus, config->workers);
        return usage_error("%s", text);
    }
    config->device = (hw_device){HW_DEVICE_CUDA, config->gpus[0]};
    return HW_EXIT_OK;
}

// A run started by mpirun with several ranks (config->world): what each rank does and does not.
static int check_world(hw_train_config *config, const cli_parsed *given) {
    int sync_every = cli_given(given, "sync-every"), sync_rule = cli_given(given, "sync-rule");
    // Hogwild on several GPUs couples its copies of the weights by the ranks' rule.
    const int copies = config->mode == HW_MODE_HOGWILD && config->n_gpus > 1;
    if (copies && !sync_every) config->sync_most_samples = HW_COPIES_ROUND_SAMPLES;  // the default's other half
    if (config->world.size == 1) {
        if (((sync_every || sync_rule) && !copies) || cli_given(given, "sync-timeout")) {
            return usage_error(
                "--sync-every, --sync-rule and --sync-timeout couple the ranks of an mpirun job (and "
                "--sync-every and --sync-rule Hogwild's copies on several --gpus); this run is neither%s",
                "");
        }
        return HW_EXIT_OK;
    }
    if (!hw_comm_built()) {
        fprintf(stderr,
                "hogwild: started by mpirun as rank %d of %d, but this hogwild was built without MPI (make "
                "MPI=0, or Open MPI was not found when it was built)\n",
                config->world.rank, config->world.size);
        return HW_EXIT_FAILURE;
    }
    if (config->n_gpus > 0) {
        // Across ranks each rank drives the GPU of its local rank (src/cuda/train/dataparallel_gpu.c,
        // src/cuda/train/hogwild_gpu.c).
        return usage_error("--gpus lists the GPUs of one process; across ranks each rank drives one GPU, local rank L "
                           "of a host GPU B+L (--device cuda:B), with --replicas K (DataParallel) or --workers N "
                           "(Hogwild) on it%s",
                           "");
    }
    if (config->eval_only) return usage_error("--eval-only evaluates in one process: run it without mpirun%s", "");
    if (config->mode == HW_MODE_DATAPARALLEL && (sync_every || sync_rule)) {
        return usage_error("%s is for Hogwild across ranks; DataParallel sums the gradients every step",
                           sync_every ? "--sync-every" : "--sync-rule");
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
    // The flags of the options the other modules' messages are about (hw/option.h).
    cli_name_options(&cli_train_command);
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
    if (argc > 1 && strcmp(argv[1], "download") == 0) return command_download(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "synth") == 0) return command_synth(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "compare") == 0) return cli_compare_run(argc - 2, argv + 2, stdout, stderr);

    hw_train_config config;
    cli_train_defaults(&config);
    cli_parsed given;
    static const char *const stop_at[] = {"help", "version", NULL};
    int parsed = cli_parse(&cli_train_command, argc, argv, &config, stop_at, &given);
    cli_parsed_free(&given);  // no operands: the options given are all that is used
    if (parsed != HW_EXIT_OK) return usage_error("%s", given.error);
    if (given.stop && strcmp(given.stop->name, "help") == 0) {
        print_usage(stdout, 1);
        return HW_EXIT_OK;
    }
    if (given.stop) {
        // The CPU kernels first: a HOGWILD_CPU_PATH that is refused ends --version with only the
        // message, not a version and BLAS line that read as a working set-up.
        if (hw_nn_kernels_select(getenv("HOGWILD_CPU_PATH")) != HW_OK) {
            fprintf(stderr, "hogwild: %s\n", hw_error());
            return HW_EXIT_FAILURE;
        }
        printf("hogwild 0.1.0\nBLAS: %s\n", hw_blas_info());
        printf("CPU kernels: %s\n", hw_nn_kernels_info());
        return HW_EXIT_OK;
    }
    int replicas_given = cli_given(&given, "replicas"), workers_given = cli_given(&given, "workers");
    int model_given = cli_given(&given, "model");
    int list_strategies = cli_given(&given, "list-sharing-strategies"), clean_shm = cli_given(&given, "clean-shm");
    int summary = cli_given(&given, "summary");

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
        int hogwild_gpus_status = check_hogwild_gpus(&config, &given);
        if (hogwild_gpus_status != HW_EXIT_OK) return hogwild_gpus_status;
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
    int world_status = check_world(&config, &given);
    if (world_status != HW_EXIT_OK) return world_status;
    // Before anything starts a thread (the GPU libraries, MPI, the loaders): the janitor is a fork.
    if (config.world.size > 1 && hw_comm_built() && hw_mpirun_cleanup_start(&config.world) != HW_OK) {
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
