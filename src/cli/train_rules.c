// train_rules: the rules between the training flags, one function each (src/cli/train_rules.h).
// Each rule takes the configuration as parsed and the options given, and returns HW_EXIT_OK when
// the flags keep it, else the exit status of its refusal, printed.
#include "cli/train_rules.h"

#include "cli/resume_settings.h"
#include "cli/sparse_train_command.h"
#include "cli/usage.h"
#include "hw/comm.h"
#include "hw/err.h"

#include <stdio.h>

// --eval-only evaluates a checkpoint on the CPU and trains nothing: a flag that would change
// training, the workers or where they run has no effect there, and is refused rather than
// ignored. (--save and --metrics are refused by eval_only_writes_nothing, naming their files.)
static int eval_only_flags_apply(hw_train_config *config, const cli_parsed *given) {
    static const hw_option apply[] = {HW_OPTION_EVAL_ONLY, HW_OPTION_RESUME, HW_OPTION_MODEL,
                                      HW_OPTION_DATA,      HW_OPTION_RESIZE, HW_OPTION_TEST_BATCH_SIZE,
                                      HW_OPTION_NORMALIZE, HW_OPTION_QUIET,  HW_OPTION_DEVICE,
                                      HW_OPTION_SAVE,      HW_OPTION_METRICS};
    if (!config->eval_only) return HW_EXIT_OK;
    for (int i = 0; i < given->n_given; i++) {
        int applies = 0;
        for (size_t k = 0; k < sizeof apply / sizeof apply[0]; k++) applies |= given->given[i]->id == apply[k];
        if (!applies) {
            return cli_usage_error("--%s does not apply to --eval-only, which evaluates the checkpoint on the CPU "
                                   "and trains nothing: drop it",
                                   given->given[i]->name);
        }
    }
    if (config->device.type == HW_DEVICE_CUDA) {
        return cli_usage_error("--eval-only evaluates on the CPU; --device cuda is not supported there (drop it)");
    }
    return HW_EXIT_OK;
}

// Nesterov momentum is a form of momentum: without any it would be plain SGD, said to be Nesterov.
static int nesterov_has_momentum(hw_train_config *config, const cli_parsed *given) {
    (void)given;
    if (config->momentum == 0 && config->nesterov) return cli_usage_error("--nesterov needs --momentum > 0");
    return HW_EXIT_OK;
}

// Each mode counts its processes with its own flag: --workers for Hogwild, --replicas (or --gpus)
// for DataParallel. The other mode's flag is refused, not ignored.
static int mode_counts_its_own(hw_train_config *config, const cli_parsed *given) {
    if (config->mode == HW_MODE_HOGWILD && cli_given(given, HW_OPTION_REPLICAS)) {
        return cli_usage_error("--replicas is for --mode dataparallel; Hogwild uses --workers");
    }
    if (config->mode == HW_MODE_DATAPARALLEL && cli_given(given, HW_OPTION_WORKERS)) {
        return cli_usage_error("--workers is for Hogwild; DataParallel uses --replicas or --gpus");
    }
    return HW_EXIT_OK;
}

// --simulate N trains N virtual Hogwild workers in this process, on the CPU (src/train/simulate.c):
// --delay is its own, and what would change the workers' count, mode, device or what they do
// beside training is refused, not ignored. The metrics' workers column is then N.
static int simulate_alone(hw_train_config *config, const cli_parsed *given) {
    if (!config->simulate) {
        if (cli_given(given, HW_OPTION_DELAY)) {
            return cli_usage_error("--delay sets the staleness of --simulate's virtual workers: give --simulate N");
        }
        return HW_EXIT_OK;
    }
    if (config->mode == HW_MODE_DATAPARALLEL) {
        return cli_usage_error("--simulate runs virtual Hogwild workers; it does not run with --mode dataparallel");
    }
    if (cli_given(given, HW_OPTION_WORKERS) && config->workers > 1) {
        return cli_usage_error("--simulate %d runs %d virtual workers in one process: drop --workers %d",
                               config->simulate, config->simulate, config->workers);
    }
    if (config->device.type == HW_DEVICE_CUDA || config->n_gpus > 0) {
        return cli_usage_error("--simulate runs on the CPU, in one process: drop %s",
                               config->n_gpus > 0 ? "--gpus" : "--device cuda");
    }
    if (config->measure) {
        return cli_usage_error("--measure measures the races of real workers; --simulate's staleness is its --delay");
    }
    if (config->prefetch)
        return cli_usage_error("--prefetch starts a loader thread per real worker, not for --simulate");
    if (config->update != HW_UPDATE_LOCKFREE) {
        return cli_usage_error("--update %s orders real workers' writes; --simulate's virtual workers write one at a "
                               "time (their staleness is its --delay)",
                               hw_update_mode_name(config->update));
    }
    config->workers = config->simulate;
    return HW_EXIT_OK;
}

// A simulation is one process: mpirun's ranks would each run the whole of it.
static int simulate_in_one_process(hw_train_config *config, const cli_parsed *given) {
    (void)given;
    if (config->simulate && config->world.size > 1) {
        return cli_usage_error("--simulate runs in one process: run it without mpirun (rank %d of %d here)",
                               config->world.rank, config->world.size);
    }
    return HW_EXIT_OK;
}

// DataParallel on --gpus LIST: a replica on each entry, so --replicas would say the count twice.
static int dataparallel_gpus(hw_train_config *config, const cli_parsed *given) {
    if (config->mode != HW_MODE_DATAPARALLEL || config->n_gpus == 0) return HW_EXIT_OK;
    if (cli_given(given, HW_OPTION_REPLICAS)) return cli_usage_error("give --replicas or --gpus, not both");
    config->device = (hw_device){HW_DEVICE_CUDA, config->gpus[0]};
    config->replicas = config->n_gpus;
    return HW_EXIT_OK;
}

// Hogwild on --gpus LIST: a copy of the weights on each entry, the workers round-robin over them,
// so that every copy needs a worker, and --device would name the GPUs twice.
static int hogwild_gpus(hw_train_config *config, const cli_parsed *given) {
    if (config->mode != HW_MODE_HOGWILD || config->n_gpus == 0) return HW_EXIT_OK;
    if (cli_given(given, HW_OPTION_DEVICE)) {
        return cli_usage_error("give --device or --gpus, not both (--gpus LIST puts Hogwild's copies on those GPUs)");
    }
    if (config->n_gpus > config->workers) {
        return cli_usage_error("--gpus lists %d GPUs but --workers is %d: every GPU's copy of the weights needs at "
                               "least one worker",
                               config->n_gpus, config->workers);
    }
    config->device = (hw_device){HW_DEVICE_CUDA, config->gpus[0]};
    return HW_EXIT_OK;
}

// What --measure counts (updates onto one shared copy of the weights, read through a worker's
// private copy) exists only in CPU Hogwild: DataParallel has no races, GPU workers' kernels give
// the host no per-step hook, and --eval-only trains nothing to measure.
static int measure_in_cpu_hogwild(hw_train_config *config, const cli_parsed *given) {
    (void)given;
    if (!config->measure) return HW_EXIT_OK;
    if (config->mode == HW_MODE_DATAPARALLEL) {
        return cli_usage_error("--measure measures Hogwild's races; DataParallel has none (use --mode hogwild)");
    }
    if (config->device.type == HW_DEVICE_CUDA) {
        return cli_usage_error("--measure is for Hogwild workers on the CPU, not --device cuda");
    }
    if (config->eval_only) return cli_usage_error("--measure measures training, not --eval-only");
    return HW_EXIT_OK;
}

// Which rank of an mpirun job this is, from the environment mpirun sets (no MPI call yet).
static int world_detected(hw_train_config *config, const cli_parsed *given) {
    (void)given;
    if (hw_world_detect(&config->world) != HW_OK) return cli_failure("hogwild");
    return HW_EXIT_OK;
}

// Hogwild's copies on several --gpus are coupled by the ranks' rule; without --sync-every a round
// comes every 20 ms or, whichever first, every HW_COPIES_ROUND_SAMPLES samples of all the workers.
static int copies_round(hw_train_config *config, const cli_parsed *given) {
    const int copies = config->mode == HW_MODE_HOGWILD && config->n_gpus > 1;
    if (copies && !cli_given(given, HW_OPTION_SYNC_EVERY)) config->sync_most_samples = HW_COPIES_ROUND_SAMPLES;
    return HW_EXIT_OK;
}

// The refusal of a sync flag that couples nothing in this run, the same for each of them.
static int sync_flag_refused(void) {
    return cli_usage_error("--sync-every, --sync-rule and --sync-timeout couple the ranks of an mpirun job (and "
                           "--sync-every and --sync-rule Hogwild's copies on several --gpus; --sync-timeout bounds "
                           "the wait of --max-staleness); this run is none of them");
}

// In one process, --sync-every and --sync-rule couple only Hogwild's copies on several --gpus:
// given without them, they are refused rather than ignored.
static int sync_flags_couple_something(hw_train_config *config, const cli_parsed *given) {
    if (config->world.size > 1) return HW_EXIT_OK;
    const int copies = config->mode == HW_MODE_HOGWILD && config->n_gpus > 1;
    const int sync = cli_given(given, HW_OPTION_SYNC_EVERY) || cli_given(given, HW_OPTION_SYNC_RULE);
    return sync && !copies ? sync_flag_refused() : HW_EXIT_OK;
}

// In one process, --sync-timeout bounds only how long --max-staleness holds a worker: without a
// bound it is refused rather than ignored. The bound may be a resumed checkpoint's, so this is
// checked once cli_resume_settings has restored it.
static int sync_timeout_has_a_bound(hw_train_config *config, const cli_parsed *given) {
    if (config->world.size > 1 || !cli_given(given, HW_OPTION_SYNC_TIMEOUT)) return HW_EXIT_OK;
    return config->max_staleness == HW_STALENESS_UNBOUNDED ? sync_flag_refused() : HW_EXIT_OK;
}

// A job of several ranks needs a hogwild built with MPI, which couples them: without it, refused
// (exit 1, a fault of the build, not of the flags).
static int job_has_mpi(hw_train_config *config, const cli_parsed *given) {
    (void)given;
    if (config->world.size == 1 || hw_comm_built()) return HW_EXIT_OK;
    fprintf(stderr,
            "hogwild: started by mpirun as rank %d of %d, but this hogwild was built without MPI (make "
            "MPI=0, or Open MPI was not found when it was built)\n",
            config->world.rank, config->world.size);
    return HW_EXIT_FAILURE;
}

// What a job of several ranks runs: each rank one GPU, that of its local rank (--gpus is one
// process's list; src/cuda/train/dataparallel_gpu.c, hogwild_gpu.c), and training, not
// --eval-only; --sync-every and --sync-rule couple Hogwild's ranks, where DataParallel sums its
// gradients every step.
static int job_trains_on_one_gpu_a_rank(hw_train_config *config, const cli_parsed *given) {
    if (config->world.size == 1) return HW_EXIT_OK;
    if (config->n_gpus > 0) {
        return cli_usage_error("--gpus lists the GPUs of one process; across ranks each rank drives one GPU, local "
                               "rank L of a host GPU B+L (--device cuda:B), with --replicas K (DataParallel) or "
                               "--workers N (Hogwild) on it");
    }
    if (config->eval_only) return cli_usage_error("--eval-only evaluates in one process: run it without mpirun");
    const int sync_every = cli_given(given, HW_OPTION_SYNC_EVERY), sync_rule = cli_given(given, HW_OPTION_SYNC_RULE);
    if (config->mode == HW_MODE_DATAPARALLEL && (sync_every || sync_rule)) {
        return cli_usage_error("%s is for Hogwild across ranks; DataParallel sums the gradients every step",
                               sync_every ? "--sync-every" : "--sync-rule");
    }
    return HW_EXIT_OK;
}

// Rank 0 prints, evaluates, writes the metrics and saves the checkpoints for the job; the other
// ranks train in silence, their --metrics and --save dropped (given or not, as the README says:
// rank 0's decide; DataParallel's ranks learn from rank 0 whether it writes metrics).
static int job_outputs_on_rank_0(hw_train_config *config, const cli_parsed *given) {
    (void)given;
    if (config->world.rank == 0) return HW_EXIT_OK;
    config->quiet = 1;
    config->metrics_path = NULL;
    config->save_path = NULL;
    return HW_EXIT_OK;
}

// --eval-only evaluates the --resume checkpoint, and since it trains nothing it writes no
// checkpoint and no metrics: --save and --metrics are refused, not ignored.
static int eval_only_writes_nothing(hw_train_config *config, const cli_parsed *given) {
    (void)given;
    if (!config->eval_only) return HW_EXIT_OK;
    if (!config->resume_path) return cli_usage_error("--eval-only needs --resume FILE");
    if (config->save_path)
        return cli_usage_error("--eval-only writes no checkpoint: drop --save %s", config->save_path);
    if (config->metrics_path) {
        return cli_usage_error("--eval-only writes no metrics: drop --metrics %s", config->metrics_path);
    }
    return HW_EXIT_OK;
}

// --update changes how CPU Hogwild workers write onto one shared copy of the weights: DataParallel
// sums its replicas' gradients (no race to lock), GPU workers write with their own kernels, and
// across mpirun ranks the coupling writes the weights too, outside any lock. There it is refused,
// not ignored.
static int update_in_cpu_hogwild(hw_train_config *config, const cli_parsed *given) {
    (void)given;
    if (config->update == HW_UPDATE_LOCKFREE) return HW_EXIT_OK;
    const char *mode = hw_update_mode_name(config->update);
    if (config->mode == HW_MODE_DATAPARALLEL) {
        return cli_usage_error("--update %s is for Hogwild's shared weights; DataParallel has no race (use --mode "
                               "hogwild)",
                               mode);
    }
    if (config->device.type == HW_DEVICE_CUDA) {
        return cli_usage_error("--update %s is for Hogwild workers on the CPU, not --device cuda or --gpus", mode);
    }
    if (config->world.size > 1) {
        return cli_usage_error("--update %s is for one process's workers; across mpirun ranks the coupling writes "
                               "the weights too (run it without mpirun)",
                               mode);
    }
    return HW_EXIT_OK;
}

// --weights bf16 stores the weights that CPU Hogwild's workers share in bfloat16. DataParallel has
// no shared weights (its replicas sum float gradients), GPU workers run float kernels, the coupling
// across mpirun ranks reads and writes float weights, --simulate's virtual workers keep float
// copies, and an atomic add needs the float's 32 bits (no bfloat16 compare-and-swap add here). There
// it is refused, not ignored. Sparse models are refused by their own command (sparse_unsupported).
static int weights_in_cpu_hogwild(hw_train_config *config, const cli_parsed *given) {
    (void)given;
    if (config->weights == HW_WEIGHTS_F32) return HW_EXIT_OK;
    if (config->mode == HW_MODE_DATAPARALLEL) {
        return cli_usage_error("--weights bf16 is for Hogwild's shared weights; DataParallel has none (use --mode "
                               "hogwild)");
    }
    if (config->device.type == HW_DEVICE_CUDA || config->n_gpus > 0) {
        return cli_usage_error("--weights bf16 is for Hogwild workers on the CPU, not %s",
                               config->n_gpus > 0 ? "--gpus" : "--device cuda");
    }
    if (config->simulate) {
        return cli_usage_error("--weights bf16 stores real workers' shared weights; --simulate's virtual workers "
                               "keep float copies (drop one of them)");
    }
    if (config->world.size > 1) {
        return cli_usage_error("--weights bf16 is for one process's workers; across mpirun ranks the coupling reads "
                               "and writes float weights (run it without mpirun)");
    }
    if (config->update == HW_UPDATE_ATOMIC) {
        return cli_usage_error("--weights bf16 cannot run with --update atomic: the atomic add is a compare-and-swap "
                               "on a float's 32 bits (use --update lockfree or locked with bf16)");
    }
    return HW_EXIT_OK;
}

// --max-staleness bounds how far one process's CPU Hogwild workers run ahead of each other, by
// counts in their shared control block: DataParallel's replicas step together already, GPU
// workers and other ranks' workers have no count there, and --simulate's virtual workers have
// their staleness from --delay. There it is refused, not ignored. Sparse models are refused by
// their own command (sparse_unsupported).
static int staleness_in_cpu_hogwild(hw_train_config *config, const cli_parsed *given) {
    (void)given;
    if (config->max_staleness == HW_STALENESS_UNBOUNDED) return HW_EXIT_OK;
    if (config->mode == HW_MODE_DATAPARALLEL) {
        return cli_usage_error("--max-staleness bounds Hogwild's workers; DataParallel's replicas step together (use "
                               "--mode hogwild)");
    }
    if (config->device.type == HW_DEVICE_CUDA || config->n_gpus > 0) {
        return cli_usage_error("--max-staleness is for Hogwild workers on the CPU, not %s",
                               config->n_gpus > 0 ? "--gpus" : "--device cuda");
    }
    if (config->simulate) {
        return cli_usage_error("--max-staleness bounds real workers; --simulate's virtual workers are as stale as "
                               "their --delay says (drop one of them)");
    }
    if (config->world.size > 1) {
        return cli_usage_error("--max-staleness is for one process's workers; across mpirun ranks the workers of "
                               "other ranks are not counted (run it without mpirun)");
    }
    return HW_EXIT_OK;
}

typedef int (*train_rule)(hw_train_config *config, const cli_parsed *given);

// The rules in the order they are checked: the flags among themselves first, then the run's place
// in an mpirun job, which the later rules read. A rule that settles a field (the device from
// --gpus; a sparse model file's defaults, the rate and momentum; a resumed checkpoint's settings,
// the staleness bound) comes before those that read it (--measure on a GPU; --nesterov without
// momentum; --sync-timeout without a bound).
static const train_rule rules[] = {
    eval_only_flags_apply,
    cli_sparse_defaults_apply,
    nesterov_has_momentum,
    mode_counts_its_own,
    simulate_alone,
    dataparallel_gpus,
    hogwild_gpus,
    measure_in_cpu_hogwild,
    world_detected,
    update_in_cpu_hogwild,
    weights_in_cpu_hogwild,
    staleness_in_cpu_hogwild,
    simulate_in_one_process,
    copies_round,
    sync_flags_couple_something,
    job_has_mpi,
    job_trains_on_one_gpu_a_rank,
    job_outputs_on_rank_0,
    eval_only_writes_nothing,
    cli_resume_settings,
    sync_timeout_has_a_bound,
};

int cli_train_rules_check(hw_train_config *config, const cli_parsed *given) {
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
        int status = rules[i](config, given);
        if (status != HW_EXIT_OK) return status;
    }
    return HW_EXIT_OK;
}
