// train: what a run is asked to do (hw_train_config) and what it needs before it forks (its
// inputs and starting weights, src/train/run_inputs.c; the settings ranks agree on,
// src/train/ranks_settings.c), and the two trainers, Hogwild (src/train/hogwild.c) and
// DataParallel (src/train/dataparallel.c). What else src/train/ holds has headers of its own:
// hw/evaluate.h, hw/run_outputs.h (the bookkeeping between steps: what a run writes),
// hw/dataparallel.h (the CPU replicas' step), hw/gpu_train.h (the GPU trainers and the way to
// them), hw/eval_only.h (a checkpoint evaluated alone).
#ifndef HW_TRAIN_H
#define HW_TRAIN_H

#include "hw/ckpt.h"
#include "hw/comm.h"
#include "hw/bf16.h"
#include "hw/data.h"
#include "hw/lr_schedule.h"
#include "hw/nn.h"
#include "hw/optim.h"
#include "hw/shape.h"
#include "hw/simulate.h"

#include <stdint.h>

typedef enum { HW_MODE_HOGWILD = 0, HW_MODE_DATAPARALLEL = 1 } hw_mode;

// The most GPUs one process drives: the entries of its GPU list (an entry may repeat a GPU).
enum { HW_MAX_GPUS = 16 };

// What a run is asked to do. The command line fills it (src/cli/train_options.c, whose table
// names the option that sets each field and its default); a library caller sets the fields itself.
// Hogwild's copies on several --gpus without --sync-every: a round every 20 ms, or every this many
// samples of all the workers if that comes first. A round of copies on one machine costs the parent
// a fraction of a millisecond, and by time alone the rounds an epoch follow the device's speed: the
// simulated device on a Zen 5 ran MNIST's epoch in 0.16 s, 8 rounds, and 4 copies ended 1.2 points
// behind one copy (with a round every 512 samples, level with it). 1024: some 50 rounds an epoch.
enum { HW_COPIES_ROUND_SAMPLES = 1024 };

// --max-staleness unset: no bound on how far a CPU Hogwild worker may run ahead of the others.
enum { HW_STALENESS_UNBOUNDED = -1 };

typedef struct {
    hw_mode mode;
    const char *model_path;    // the model file
    const char *model_text;    // the model's text when it comes from a checkpoint (then model_path
                               // names the checkpoint), else NULL: read model_path
    const char *data_dir;      // the dataset folder
    int workers;               // Hogwild: worker processes
    int replicas;              // DataParallel: replicas (one per entry of gpus, when given)
    int epochs;                // epochs to train, counted from 0 (a resumed run continues its count)
    int batch_size;            // training batch of a worker (DataParallel: the whole batch, split)
    int test_batch_size;       // evaluation batch
    float lr;                  // SGD: learning rate (the schedule's base: lr_schedule)
    float momentum;            // SGD: momentum
    float weight_decay;        // SGD: L2 weight decay
    int nesterov;              // SGD: Nesterov momentum
    uint64_t seed;             // initialisation, shuffling and dropout
    const char *save_path;     // checkpoint at every epoch end, at the end and on a stop signal; NULL: none
    int overwrite;             // save_path may replace a checkpoint the run did not resume from
    const char *resume_path;   // the checkpoint to continue from, or NULL
    const char *metrics_path;  // the metrics CSV to write, or NULL
    const char *freeze;        // parameters not to train, "NAME,..." or NULL
    int eval_only;             // evaluate resume_path's checkpoint, train nothing
    int64_t eval_every;        // also evaluate every N training samples (0: only at epoch ends)
    int quiet;                 // no progress line
    int prefetch;              // a loader thread per worker
    int measure;               // measure staleness, lost updates, contention (CPU Hogwild)
    int simulate;              // N > 0: N virtual Hogwild workers in one process (src/train/simulate.c)
    hw_delay delay;            // simulate: the delay each step's gradient is computed at (hw/simulate.h)
    hw_update_mode update;     // how CPU Hogwild workers write their steps (include/hw/optim.h)
    hw_weights_dtype weights;  // how CPU Hogwild's shared weights are stored: f32 or bf16 (include/hw/bf16.h)
    int max_staleness;         // CPU Hogwild: no worker starts a step more than this many steps ahead of the
                               // slowest (0: lockstep; HW_STALENESS_UNBOUNDED: no bound), a worker held past
                               // sync_timeout fails (src/train/hogwild_staleness.h)
    hw_device device;          // where the workers or replicas compute
    int gpus[HW_MAX_GPUS];     // these GPUs (n_gpus of them): DataParallel, a replica each; Hogwild, a
                               // copy of the weights each (src/cuda/train/gpu_copies.c)
    int n_gpus;
    hw_normalize norm;                // input mean and std; {0, 0}: from the data
    int resize_height, resize_width;  // image folders' images resized to this size (0: their own)
    // Across ranks of an mpirun job (include/hw/comm.h; rank 0 of 1 otherwise). Rank 0 evaluates,
    // writes the metrics and checkpoints, and prints; the other ranks train in silence.
    hw_world world;
    double sync_every_ms;        // Hogwild across ranks: a coupling round every N ms
    int64_t sync_every_samples;  // ... or every N training samples of the node instead (0: by time)
    int64_t sync_most_samples;   // Hogwild's copies on --gpus, by time: a round at the latest every N
                                 // samples of all the workers too (0: none; the default's, below)
    double sync_timeout;         // a coupling round or a DataParallel step's sum not complete in S s is an error;
                                 // so is a worker held by max_staleness for S s (<= 0 there: no limit)
    hw_couple_rule sync_rule;    // what a Hogwild round does with the nodes' changes (src/comm/couple_rule.c)
    // The rate as a function of the run's samples, its warm-up included (zeros: constant; the
    // command line's default, --lr-schedule constant, is the same schedule).
    hw_lr_schedule lr_schedule;
    uint64_t setup_hash;   // the metrics' setup column: a hash of every setting but the seed, the
                           // mode and the workers or replicas (the command line's, src/cli/run_identity.c)
    const char *settings;  // the metrics' settings column: the same settings as text (NULL: "")
} hw_train_config;

// The rate of a step taken when the run has seen `samples` training samples (all workers and
// ranks together, a resumed run's earlier ones included), of `epoch_samples` an epoch: config->lr
// itself while the schedule is constant, so that a constant run computes what it always did, else
// hw_lr_at over the run's config->epochs epochs.
static inline float hw_train_lr(const hw_train_config *config, int64_t samples, int64_t epoch_samples) {
    if (hw_lr_is_constant(&config->lr_schedule)) return config->lr;
    return (float)hw_lr_at(&config->lr_schedule, config->lr, samples, epoch_samples,
                           (int64_t)config->epochs * epoch_samples);
}

// Every field zero (nothing asked for) but max_staleness, HW_STALENESS_UNBOUNDED (0 would be
// lockstep), in one process (rank 0 of 1). The command line's defaults
// come on top of it (src/cli/train_options.c).
void hw_train_config_init(hw_train_config *config);

typedef struct {
    double wall_seconds;        // the whole run, final evaluation included
    double train_seconds;       // first fork to last join: training alone
    int64_t samples_seen;       // training samples, all workers together, this run
    double samples_per_second;  // samples_seen / train_seconds
    double test_loss;           // after the last epoch
    double test_accuracy;       // percent
    int interrupted_by;         // SIGINT / SIGTERM / SIGHUP that ended the run, else 0
} hw_train_result;

// The seed of worker (or replica) `rank`'s own generator, which draws its dropout masks: every
// worker its own masks, and worker 0 of Hogwild and replica 0 of DataParallel the same ones.
static inline uint64_t hw_worker_seed(uint64_t seed, int rank) { return seed * 1000003u + (uint64_t)rank; }

// Everything a run needs before it forks: the model bound to its weights and both datasets.
typedef struct {
    hw_model model;
    hw_dataset train;
    hw_dataset test;
    hw_normalize norm;
} hw_train_inputs;

// Loads the model file and the data, checks that they fit together (input shape, classes),
// applies --freeze. The weights are not allocated yet.
int hw_train_inputs_load(hw_train_inputs *in, const hw_train_config *config);
void hw_train_inputs_free(hw_train_inputs *in);

// Under mpirun (after hw_comm_init): every rank must have been given the same settings, those that
// make the ranks one run (--mode, --workers or --replicas, the device kind, the dataset's and the
// network's contents, --epochs, --batch-size, the SGD flags, --seed, --normalize, --eval-every,
// --sync-every, --sync-timeout, where --resume starts): a collective that fails on every rank at
// the first that differs, naming the flag and each rank's value (src/train/ranks_settings.c).
int hw_run_check_ranks(const hw_train_config *config, const hw_train_inputs *in, int first_epoch,
                       int64_t samples_before);

// The weights a run starts from, in model->weights: PyTorch's default initialisation from
// --seed, or the --resume checkpoint. *first_epoch and *samples_before say where a resumed run
// continues; a checkpoint that has already trained --epochs epochs is refused, and so is one whose
// weights are not finite (hw_train_load_checkpoint).
int hw_train_start_weights(const hw_train_config *config, hw_model *model, int *first_epoch, int64_t *samples_before);
// Loads the checkpoint at `path` into model->weights (hw_ckpt_load) and refuses weights that are
// not finite: such a file comes from a diverged run (hogwild itself never writes one).
int hw_train_load_checkpoint(const char *path, hw_model *model, hw_ckpt_meta *meta);
// The --resume checkpoint config->resume_path loaded into model->weights (hw_train_load_checkpoint),
// refused when it has already trained config->epochs epochs: there would be nothing to train, and
// the run's result would be none. Every trainer's resume, the dense ones' and the sparse one's.
int hw_train_resume_weights(const hw_train_config *config, hw_model *model, hw_ckpt_meta *meta);

// Trains with N Hogwild worker processes on shared weights (src/train/hogwild.c).
int hw_train_hogwild(const hw_train_config *config, hw_train_inputs *in, hw_train_result *result);
// Trains with K synchronous replicas (src/train/dataparallel.c).
int hw_train_dataparallel(const hw_train_config *config, hw_train_inputs *in, hw_train_result *result);
// Trains config->simulate virtual Hogwild workers in this process, each gradient on the weights as
// they were config->delay updates earlier (src/train/simulate.c). CPU, one process only.
int hw_train_simulate(const hw_train_config *config, hw_train_inputs *in, hw_train_result *result);

#endif
