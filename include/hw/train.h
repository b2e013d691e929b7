// train: the Hogwild trainer, the DataParallel trainer, evaluation, progress and metrics.
#ifndef HW_TRAIN_H
#define HW_TRAIN_H

#include "hw/ckpt.h"
#include "hw/comm.h"
#include "hw/data.h"
#include "hw/nn.h"
#include "hw/tensor.h"

#include <stdint.h>
#include <stdio.h>

typedef enum { HW_MODE_HOGWILD = 0, HW_MODE_DATAPARALLEL = 1 } hw_mode;

typedef struct {
    hw_mode mode;
    const char *model_path;      // --model, default models/lenet.model
    const char *model_text;      // the model's text when it comes from a checkpoint (then model_path
                                 // names the checkpoint), else NULL: read model_path
    const char *data_dir;        // --data, default data/mnist
    int workers;                 // --workers: Hogwild processes, default 2
    int replicas;                // --replicas, or one per --gpus entry: DataParallel replicas, default 2
    int epochs;                  // --epochs, default 1
    int batch_size;              // --batch-size, default 64 (DataParallel: the whole batch, split)
    int test_batch_size;         // --test-batch-size, default 1000
    float lr;                    // --lr, default 0.01
    float momentum;              // --momentum, default 0.5
    float weight_decay;          // --weight-decay, default 0
    int nesterov;                // --nesterov
    uint64_t seed;               // --seed, default 1
    const char *save_path;       // --save FILE: checkpoint at every epoch end and at the end
    int overwrite;               // --overwrite: --save may replace a checkpoint the run did not resume from
    const char *resume_path;     // --resume FILE
    const char *metrics_path;    // --metrics FILE.csv
    const char *freeze;          // --freeze NAME,...
    int eval_only;               // --eval-only (with --resume)
    int64_t eval_every;          // --eval-every N training samples (0: only at epoch ends)
    int quiet;                   // --quiet
    int prefetch;                // --prefetch: a loader thread per worker (off by default)
    int measure;                 // --measure: staleness, lost updates, contention (CPU Hogwild)
    hw_device device;            // --device cpu|cuda|cuda:N
    int gpus[16];                // --gpus 0,1,... (DataParallel on GPUs)
    int n_gpus;
    hw_normalize norm;           // --normalize mean,std or "auto"
    int resize_height, resize_width;  // --resize HxW: image folders' images to this size (0: their own)
    // Across ranks of an mpirun job (include/hw/comm.h; rank 0 of 1 otherwise). Rank 0 evaluates,
    // writes the metrics and checkpoints, and prints; the other ranks train in silence.
    hw_world world;
    double sync_every_ms;        // --sync-every Nms: Hogwild across ranks, a coupling round every N ms
    int64_t sync_every_samples;  // --sync-every N: every N training samples of the node instead (0: by time)
    double sync_timeout;         // --sync-timeout S: a coupling round or a DataParallel step's sum not complete in S s is an error
    int job_metrics;             // the job writes --metrics (rank 0 does; the others, which drop the
                                 // path, take part in its evaluations all the same)
    hw_couple_rule sync_rule;    // --sync-rule: what a Hogwild round does with the nodes' changes (src/comm/rule.c)
} hw_train_config;

// The defaults of PyTorch's mnist_hogwild example: 2 workers, batch 64, test batch 1000,
// lr 0.01, momentum 0.5, seed 1; one epoch; MNIST's mean and std; no prefetch thread; the CPU.
void hw_train_config_default(hw_train_config *config);

typedef struct {
    double wall_seconds;         // the whole run, final evaluation included
    double train_seconds;        // first fork to last join: training alone
    int64_t samples_seen;        // training samples, all workers together, this run
    double samples_per_second;   // samples_seen / train_seconds
    double test_loss;            // after the last epoch
    double test_accuracy;        // percent
    int interrupted_by;          // SIGINT / SIGTERM / SIGHUP that ended the run, else 0
} hw_train_result;

// The seed of worker (or replica) `rank`'s own generator, which draws its dropout masks: every
// worker its own masks, and worker 0 of Hogwild and replica 0 of DataParallel the same ones.
static inline uint64_t hw_worker_seed(uint64_t seed, int rank) { return seed * 1000003u + (uint64_t)rank; }

// Exit statuses of the command line: 0 ok, 1 failure, 2 bad usage, 128 + signal when interrupted.
enum { HW_EXIT_OK = 0, HW_EXIT_FAILURE = 1, HW_EXIT_USAGE = 2 };

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
// Caps --batch-size at what a batch can hold (a Hogwild worker's share of the training data, or
// all of it in DataParallel) and --test-batch-size at the test set: larger values train and
// evaluate the same, but allocated their whole size ("out of memory" for --batch-size 1048576).
// `note` says what was capped ("" when nothing was).
void hw_train_fit_batches(hw_train_config *config, const hw_train_inputs *in, char *note, size_t cap);

// Checks the files the run will write before it trains (src/train/output_paths.c): --save is
// writable, is not an input (model, dataset files, image folders) nor the --metrics file, and
// replaces an existing file only when the run resumed from it or --overwrite was given; --metrics
// is not an input nor the --resume checkpoint.
int hw_run_check_outputs(const hw_train_config *config);

// Under mpirun (after hw_comm_init): every rank must have been given the same settings, those that
// make the ranks one run (--mode, --workers or --replicas, the device kind, the dataset's and the
// network's contents, --epochs, --batch-size, the SGD flags, --seed, --normalize, --eval-every,
// --sync-every, --sync-timeout, where --resume starts): a collective that fails on every rank at
// the first that differs, naming the flag and each rank's value (src/train/ranks_agree.c).
int hw_run_check_ranks(const hw_train_config *config, const hw_train_inputs *in, int first_epoch,
                       int64_t samples_before);

// The address space a run needs per process, estimated (src/train/limits.c), and its check
// against RLIMIT_AS (ulimit -v): a run that cannot fit is refused before it starts, naming both.
double hw_run_memory_estimate(const hw_train_config *config, const hw_train_inputs *in, int eval_only);
// The stack size limit (ulimit -s), which also sizes every thread's stack: below
// HW_MIN_STACK_BYTES the parent or a worker died of SIGSEGV (at 64 KiB), without a word.
enum { HW_MIN_STACK_BYTES = 512 << 10 };
int hw_run_check_stack(void);
int hw_run_check_memory(const hw_train_config *config, const hw_train_inputs *in, int eval_only);

// The weights a run starts from, in model->weights: PyTorch's default initialisation from
// --seed, or the --resume checkpoint. *first_epoch and *samples_before say where a resumed run
// continues; a checkpoint that has already trained --epochs epochs is refused, and so is one whose
// weights are not finite (hw_train_load_checkpoint).
int hw_train_start_weights(const hw_train_config *config, hw_model *model, int *first_epoch,
                           int64_t *samples_before);
// Loads the checkpoint at `path` into model->weights (hw_ckpt_load) and refuses weights that are
// not finite: such a file comes from a diverged run (hogwild itself never writes one).
int hw_train_load_checkpoint(const char *path, hw_model *model, hw_ckpt_meta *meta);

// Trains with N Hogwild worker processes on shared weights (src/train/hogwild.c).
int hw_train_hogwild(const hw_train_config *config, hw_train_inputs *in, hw_train_result *result);
// Trains with K synchronous replicas (src/train/dataparallel.c).
int hw_train_dataparallel(const hw_train_config *config, hw_train_inputs *in, hw_train_result *result);
// The same on GPUs (config->device is cuda:N); hw_train_hogwild and hw_train_dataparallel hand
// over to these. Hogwild: N worker processes on weights shared in one GPU's memory through CUDA IPC
// (src/train/hogwild_cuda.c). DataParallel: a replica per entry of config->gpus, or
// config->replicas replicas on config->device when no --gpus (src/train/dataparallel_cuda.c).
int hw_train_hogwild_cuda(const hw_train_config *config, hw_train_inputs *in, hw_train_result *result);
int hw_train_dataparallel_cuda(const hw_train_config *config, hw_train_inputs *in, hw_train_result *result);
// The doors the core goes through to them (src/train/gpu_door.c): a direct call where the binary
// links the GPU code, else the trainer of libhogwild-cuda.so beside the binary, loaded on first use.
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

// Mean loss and accuracy (percent) of `weights` on a dataset (src/train/eval.c). `ws` is a
// workspace of at least `batch_size`; `x`, `y` buffers of batch_size samples. A stop signal
// (hw_stop_signal, while a run catches them) ends the evaluation between two batches: then
// `interrupted` is set and the numbers are no result. So a test set that takes minutes does not
// hold a stopping run (and its checkpoint) past the stop's grace.
typedef struct {
    double loss;
    double accuracy;
    int interrupted;
    double loss_sum;             // the sums behind them, for an evaluation split over ranks
    int64_t correct;
} hw_eval_result;
hw_eval_result hw_evaluate(const hw_model *model, hw_workspace *ws, const hw_dataset *ds, hw_normalize norm,
                           int batch_size);

// ---- metrics CSV (src/train/metrics.c) ----
// Header: mode,workers,device,wall_seconds,epoch,samples_seen,train_loss,test_loss,test_accuracy,
// skipped_eval_points
// and, with --measure, the measurement's columns after them (src/train/measure.c).
struct hw_measure;
// Rows are written whole (one write each); a failed write is undone and ends the metrics, not the
// run: hw_metrics_row then warns on stderr, keeps the reason in `failure` and returns HW_OK.
// The file is opened at hw_metrics_open (created if missing) but an existing one is replaced only
// at hw_metrics_commit, once training has started: the header and the rows before it wait in
// memory, and a run that never commits leaves the previous file untouched (and removes one it
// created).
typedef struct {
    int fd;
    int open;
    int created;                 // hw_metrics_open made the file (it did not exist)
    int committed;               // hw_metrics_commit: the file is being written
    char *pending;               // before the commit: the header and rows to write
    size_t pending_len;
    int failed;                  // a write failed: no more rows
    int rows;                    // rows written
    long long bytes;             // the file's length: whole rows only
    char failure[640];
    const char *path;
    char mode[16];
    int workers;
    char device[64];
    int with_measure;                    // --measure: the header has its columns
    const struct hw_measure *measure;    // their values at the row (set by the trainer; NULL: none yet)
    int64_t skipped_eval_points;         // --eval-every points not evaluated so far (set by the trainer)
} hw_metrics;
int hw_metrics_open(hw_metrics *m, const char *path, const hw_train_config *config);
int hw_metrics_row(hw_metrics *m, double wall_seconds, int epoch, int64_t samples_seen, double train_loss,
                   double test_loss, double test_accuracy);
// Training has started: the file is cut to nothing and gets the header and the rows so far.
void hw_metrics_commit(hw_metrics *m);
int hw_metrics_close(hw_metrics *m);

// ---- memory (src/train/memory.c) ----
// What a process holds: its peak resident set, and how much of its resident memory is private
// to it. A Hogwild worker's private memory excludes the dataset, which it shares with the
// parent copy-on-write: that is how a run shows the data is not copied per worker.
typedef struct {
    int64_t peak_rss_kb;      // getrusage ru_maxrss
    int64_t rss_kb;           // now, from /proc/self/smaps_rollup
    int64_t private_kb;       // Private_Clean + Private_Dirty, now
} hw_memory;
void hw_memory_read(hw_memory *m);

// ---- progress (src/train/progress.c) ----
// One live line on a terminal, plain periodic lines otherwise, nothing with --quiet.
typedef struct {
    int quiet;
    int live;                    // stderr is a terminal
    double started;              // monotonic seconds
    double last_print;
    int64_t total_samples;       // for the ETA
    int line_open;               // a live line is on screen and not yet ended
    int stdout_closed;           // a write to stdout failed with EPIPE: results are no longer printed
    int silent;                  // a rank other than 0 of an mpirun job: no progress, no results
} hw_progress;
void hw_progress_start(hw_progress *p, int quiet, int64_t total_samples);
// Called often; prints at most a few times a second (live) or every few seconds (plain).
void hw_progress_update(hw_progress *p, int epoch, int epochs, int64_t samples_done, double running_loss);
// A result line on stdout (epoch results, the summary), printed even with --quiet; a live
// progress line on the same terminal is cleared first.
void hw_progress_message(hw_progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
double hw_now(void);


// ---- what a training run writes, the same for both trainers (src/train/outputs.c) ----
// Evaluations of snapshots of the weights, the metrics rows, the checkpoints, the progress line.
typedef struct {
    const hw_train_config *config;
    const hw_train_inputs *in;
    hw_model eval_model;         // the model pointed at `snapshot`
    hw_workspace eval_ws;        // for test batches
    float *snapshot;             // a copy of the weights taken at an evaluation point
    double snapshot_time;        // when it was taken (monotonic seconds)
    hw_progress progress;
    hw_metrics metrics;
    double started;              // monotonic seconds at the start of training (the first fork)
    double trained;              // when the last training step ended (the last join); 0 until then
    int64_t samples_base;        // samples seen before this run (from --resume)
    int64_t last_samples;        // at the previous metrics row, for the train-loss column
    double last_loss_sum;
    hw_eval_result last_eval;
    double last_finite_loss;     // the last finite training loss seen (hw_train_outputs_loss, rows), or NAN
    int64_t skipped_points;      // --eval-every points passed while an evaluation ran, not evaluated
    int interrupted;             // a stop signal cut an evaluation short (no row, nothing saved)
    // DataParallel across ranks: every rank evaluates its share of the test set and the sums are
    // added up (hw_comm_sum), so that no rank waits for rank 0 to evaluate alone (a wait that ran
    // past --sync-timeout when an evaluation took longer). Rank 0 still writes and saves alone.
    int distributed;
} hw_train_outputs;

int hw_train_outputs_open(hw_train_outputs *log, const hw_train_config *config, const hw_train_inputs *in, int first_epoch,
                    int64_t samples_base);
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
