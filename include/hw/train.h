// train: the Hogwild trainer, the DataParallel trainer (and their GPU versions, src/cuda/train/),
// a run's inputs and settings, evaluation and the run log (src/train/). The progress line and the
// metrics CSV are src/report/'s (hw/progress.h, hw/metrics.h).
#ifndef HW_TRAIN_H
#define HW_TRAIN_H

#include "hw/ckpt.h"
#include "hw/comm.h"
#include "hw/data.h"
#include "hw/nn.h"
#include "hw/metrics.h"
#include "hw/progress.h"
#include "hw/shape.h"

#include <stdint.h>
#include <stdio.h>

typedef enum { HW_MODE_HOGWILD = 0, HW_MODE_DATAPARALLEL = 1 } hw_mode;

// The most GPUs one process drives: the entries of its GPU list (an entry may repeat a GPU).
enum { HW_MAX_GPUS = 16 };

// What a run is asked to do. The command line fills it (src/cli/train_options.c, whose table
// names the option that sets each field and its default); a library caller sets the fields itself.
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
    float lr;                  // SGD: learning rate
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
    double sync_timeout;         // a coupling round or a DataParallel step's sum not complete in S s is an error
    int job_metrics;             // the job writes metrics (rank 0 does; the others, which drop the
                                 // path, take part in its evaluations all the same)
    hw_couple_rule sync_rule;    // what a Hogwild round does with the nodes' changes (src/comm/couple_rule.c)
} hw_train_config;

// Every field zero (nothing asked for), in one process (rank 0 of 1). The command line's defaults
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

// Trains with N Hogwild worker processes on shared weights (src/train/hogwild.c).
int hw_train_hogwild(const hw_train_config *config, hw_train_inputs *in, hw_train_result *result);
// Trains with K synchronous replicas (src/train/dataparallel.c).
int hw_train_dataparallel(const hw_train_config *config, hw_train_inputs *in, hw_train_result *result);
// The same on GPUs (config->device is cuda:N); hw_train_hogwild and hw_train_dataparallel hand
// over to these. Hogwild: N worker processes on weights shared in one GPU's memory through CUDA IPC,
// or a copy per GPU of config->gpus, coupled (src/cuda/train/hogwild_gpu.c, gpu_copies.c). DataParallel: a replica per entry of config->gpus, or
// config->replicas replicas on config->device when no --gpus (src/cuda/train/dataparallel_gpu.c).
int hw_train_hogwild_cuda(const hw_train_config *config, hw_train_inputs *in, hw_train_result *result);
int hw_train_dataparallel_cuda(const hw_train_config *config, hw_train_inputs *in, hw_train_result *result);
// The GPU part's entry table (src/cuda/train/entry.c): the one symbol libhogwild-cuda.so exports,
// hw_cuda_plugin, which hw_plugin_entry finds (include/hw/plugin.h).
typedef struct {
    int (*train_hogwild)(const hw_train_config *config, hw_train_inputs *in, hw_train_result *result);
    int (*train_dataparallel)(const hw_train_config *config, hw_train_inputs *in, hw_train_result *result);
} hw_gpu_plugin;
// How the core reaches them (src/train/gpu_plugin.c): through the entry table of
// libhogwild-cuda.so beside the binary, loaded on first use, or of the GPU part the binary links
// itself; a build without CUDA refuses, naming the build.
int hw_gpu_train_hogwild(const hw_train_config *config, hw_train_inputs *in, hw_train_result *result);
int hw_gpu_train_dataparallel(const hw_train_config *config, hw_train_inputs *in, hw_train_result *result);

// The DataParallel step on CPU replicas (threads), exposed for the equivalence tests: the batch
// is split into `replicas` chunks (sizes differ by at most one; empty when replicas > batch),
// each replica runs forward and backward on its chunk, and the chunk gradients, weighted by
// chunk size, are summed onto the primary's buffer (*grads): the gradient of the whole batch's
// mean loss, as one replica would compute it, up to float rounding. Returns the batch's mean loss.
typedef struct hw_dp_team hw_dp_team;
// Chunk k of a batch of `batch` samples split over `replicas`: sizes differ by at most one; with
// replicas > batch some are empty. The one rule of both the CPU and the GPU replicas.
void hw_dp_chunk(int batch, int replicas, int k, int *offset, int *count);
// Opens `replicas` replicas (replica 0 is the caller's thread, 1.. are threads) with workspaces for
// chunks of max_batch / replicas. On failure it names the step and the replica, undoes what it did
// (no thread left behind) and sets *team to NULL. HOGWILD_FAIL_DP_SETUP (tests only, see
// dataparallel.c) makes one step of it fail.
int hw_dp_team_open(hw_dp_team **team, const hw_model *model, int replicas, int max_batch, uint64_t seed);
float hw_dp_team_step(hw_dp_team *team, const float *x, const uint8_t *y, int batch, const float **grads);
// After a step: the first replica whose chunk loss was not finite (NaN, inf), or -1.
int hw_dp_team_diverged(const hw_dp_team *team);
void hw_dp_team_close(hw_dp_team *team);  // NULL: nothing

// Mean loss and accuracy (percent) of `weights` on a dataset (src/train/evaluate.c). `ws` is a
// workspace of at least `batch_size`; `x`, `y` buffers of batch_size samples. A stop signal
// (hw_stop_signal, while a run catches them) ends the evaluation between two batches: then
// `interrupted` is set and the numbers are no result. So a test set that takes minutes does not
// hold a stopping run (and its checkpoint) past the stop's grace.
typedef struct {
    double loss;
    double accuracy;
    int interrupted;
    double loss_sum;  // the sums behind them, for an evaluation split over ranks
    int64_t correct;
} hw_eval_result;
hw_eval_result hw_evaluate(const hw_model *model, hw_workspace *ws, const hw_dataset *ds, hw_normalize norm,
                           int batch_size);

// ---- what a training run writes, the same for both trainers (src/train/run_log.c) ----
// Evaluations of snapshots of the weights, the metrics rows, the checkpoints, the progress line.
typedef struct {
    const hw_train_config *config;
    const hw_train_inputs *in;
    hw_model eval_model;   // the model pointed at `snapshot`
    hw_workspace eval_ws;  // for test batches
    float *snapshot;       // a copy of the weights taken at an evaluation point
    double snapshot_time;  // when it was taken (monotonic seconds)
    hw_progress progress;
    hw_metrics metrics;
    double started;        // monotonic seconds at the start of training (the first fork)
    double trained;        // when the last training step ended (the last join); 0 until then
    int64_t samples_base;  // samples seen before this run (from --resume)
    int64_t last_samples;  // at the previous metrics row, for the train-loss column
    double last_loss_sum;
    hw_eval_result last_eval;
    double last_finite_loss;  // the last finite training loss seen (hw_train_outputs_loss, rows), or NAN
    int64_t skipped_points;   // --eval-every points passed while an evaluation ran, not evaluated
    int interrupted;          // a stop signal cut an evaluation short (no row, nothing saved)
    // DataParallel across ranks: every rank evaluates its share of the test set and the sums are
    // added up (hw_comm_sum), so that no rank waits for rank 0 to evaluate alone (a wait that ran
    // past --sync-timeout when an evaluation took longer). Rank 0 still writes and saves alone.
    int distributed;
} hw_train_outputs;

// What the --metrics file's first columns say of a run (include/hw/metrics.h): its mode; the
// world's workers or replicas, every rank's together; its device, every GPU of --gpus (into
// device[0..cap), which run->device points at).
void hw_train_metrics_run(const hw_train_config *config, char *device, size_t cap, hw_metrics_run *run);

int hw_train_outputs_open(hw_train_outputs *log, const hw_train_config *config, const hw_train_inputs *in,
                          int first_epoch, int64_t samples_base);
// Training has started (the devices, workers and ranks are set up): from now on the run writes its
// outputs (hw_metrics_commit). A run that fails before leaves the previous --metrics file as it was.
void hw_train_outputs_commit(hw_train_outputs *log);
// Copies `weights` into the snapshot (the caller decides whether workers may still write them).
void hw_train_outputs_snapshot(hw_train_outputs *log, const float *weights);
// With --metrics: the first point of the curve, the weights before this run's training, evaluated
// and written at wall time 0 (a trainer times training from its own start, set after this: a
// time since hw_train_outputs_open here could exceed the next rows' and run backwards).
int hw_train_outputs_first_point(hw_train_outputs *log, const float *weights, int first_epoch);
// Evaluates the snapshot, writes a metrics row and, at an epoch end, prints the epoch result and
// saves the checkpoint (--save). A stop signal during the evaluation cuts it short: HW_OK with
// log->interrupted set, nothing written; the trainer then stops and saves the current weights. samples and loss_sum count this run's training so far. Weights
// that are not finite, or a test or training loss that diverged (hw_loss_diverged), are no result: it ends the run
// with hw_train_outputs_diverged instead (nothing printed as a result, nothing saved).
int hw_train_outputs_evaluate(hw_train_outputs *log, int epochs_done, int64_t samples, double loss_sum, int epoch_end);
// Moves *next_eval (the next --eval-every point) past `samples`, before the row about to be written
// at `samples`, and counts as skipped every point passed that the row does not stand for: mid-epoch
// the row stands for the first point passed; at an epoch end, for a point on the end itself only.
void hw_train_outputs_pass_points(hw_train_outputs *log, int64_t *next_eval, int64_t samples, int epoch_end);
// Whether every one of the n weights is a finite number (a diverged run has NaN or inf in them).
int hw_weights_finite(const float *weights, size_t n);
// Saves `weights` as the checkpoint (--save), if one was asked for; refuses weights that are not
// finite (NaN, inf), so that the file keeps the last good checkpoint.
int hw_train_outputs_save(hw_train_outputs *log, const float *weights, int epochs_done, int64_t samples);
// The rule of a diverged run, in one place: a loss that is NaN, infinite, or above
// HW_LOSS_DIVERGED. The cross-entropy loss starts near ln(classes) (2.3 for ten classes); a mean
// above 1e4 means the weights have blown up (a step far too large), and such a run does not come
// back to a result: with Hogwild's racing workers its loss can stay finite (1e23, then 0 once the
// logits saturate) while the accuracy sits at chance, so waiting for a NaN is not enough.
#define HW_LOSS_DIVERGED 1e4
int hw_loss_diverged(double loss);
// What a diverged loss is, for the message: "nan", "infinite" or "2.5e+23 (above 1e+04)".
void hw_loss_describe(char *out, size_t size, double loss);
// A training loss seen (a batch, a report window): the last one that was not diverged is
// remembered for the message of a diverged run.
void hw_train_outputs_loss(hw_train_outputs *log, double loss);
// Ends a diverged run: writes the metrics row that marks it (train_loss `loss`, the non-finite
// loss seen, or NAN; test_loss and test_accuracy nan: nothing was evaluated) and returns HW_ERR
// with a message naming `who` ("worker 1", "replica 0"), `what` happened, the training epoch
// `epoch` (1-based), the samples seen, the last training loss before it, and a lower --lr to try.
// Nothing is saved. `samples` counts this run's samples, as for hw_train_outputs_evaluate.
int hw_train_outputs_diverged(hw_train_outputs *log, const char *who, const char *what, int epoch, int epochs_done,
                              int64_t samples, double loss);
// Prints the summary and fills result.
void hw_train_outputs_finish(hw_train_outputs *log, int64_t samples, hw_train_result *result);
void hw_train_outputs_close(hw_train_outputs *log);

#endif
