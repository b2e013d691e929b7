// run_outputs: the bookkeeping between a run's steps, the same for every trainer
// (src/train/run_outputs.c): when an --eval-every point is due, the snapshot of the weights it
// evaluates (src/train/evaluate.c), the metrics rows, the checkpoints, the progress line, the
// epoch results and the summary; the end of a diverged run and the save on a stop signal. Hogwild's
// parent (hogwild_watch.c) and DataParallel's loop (dataparallel_loop.c) each drive it from their
// own loop. Also the rule of a diverged loss, which the workers and the command line apply too.
#ifndef HW_RUN_OUTPUTS_H
#define HW_RUN_OUTPUTS_H

#include "hw/evaluate.h"
#include "hw/metrics.h"
#include "hw/progress.h"
#include "hw/train.h"

#include <stddef.h>
#include <stdint.h>

typedef struct hw_run_outputs hw_run_outputs;

// Copies the trainer's current weights into outputs->snapshot (hw_run_outputs_snapshot): its own
// way to read them (shared memory, a GPU, a replica, the weights the ranks agree on).
typedef int (*hw_snapshot_fn)(void *ctx, hw_run_outputs *outputs);

struct hw_run_outputs {
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
    double last_finite_loss;  // the last finite training loss seen (hw_run_outputs_loss, rows), or NAN
    int64_t skipped_points;   // --eval-every points passed while an evaluation ran, not evaluated
    int interrupted;          // a stop signal cut an evaluation short (no row, nothing saved)
    // DataParallel across ranks: every rank evaluates its share of the test set and the sums are
    // added up (hw_comm_sum), so that no rank waits for rank 0 to evaluate alone, longer than
    // --sync-timeout. Rank 0 still writes and saves alone.
    int distributed;
    // Set by hw_run_outputs_start: the trainer's snapshot, and the next --eval-every point in this
    // run's samples (0: none).
    hw_snapshot_fn take_snapshot;
    void *snapshot_ctx;
    int64_t next_eval;
    // The trainer's optimizer state, saved beside the weights while it is valid (the trainer brings
    // it up to date at every epoch end's snapshot; a stop mid-epoch invalidates it); NULL: none.
    struct hw_optim_state *optim;
};

// What the --metrics file's first columns say of a run (include/hw/metrics.h): its mode; the
// world's workers or replicas, every rank's together; its device, every GPU of --gpus (into
// device[0..cap), which run->device points at).
void hw_run_outputs_metrics_run(const hw_train_config *config, char *device, size_t cap, hw_metrics_run *run);
// Opens config->metrics_path with the run's columns (the above, and the model's name: the model
// file's without its folder and extension). The sparse trainer's way to the same file.
int hw_run_outputs_metrics_open(hw_metrics *metrics, const hw_train_config *config);

// Before training: the evaluation's model and workspace, the --metrics file opened (replaced only
// at hw_run_outputs_start), the progress line. `first_epoch` and `samples_base` come from --resume.
int hw_run_outputs_open(hw_run_outputs *outputs, const hw_train_config *config, const hw_train_inputs *in,
                        int first_epoch, int64_t samples_base);
// Training starts: the workers, replicas, GPUs and ranks are set up, and from now on the run writes
// its outputs (hw_metrics_commit): a run that fails before leaves the previous --metrics file as it
// was. `snapshot(ctx, outputs)` is the trainer's way to read its weights at an evaluation point.
void hw_run_outputs_start(hw_run_outputs *outputs, hw_snapshot_fn snapshot, void *ctx);
// Copies `weights` into the snapshot (the caller decides whether workers may still write them).
void hw_run_outputs_snapshot(hw_run_outputs *outputs, const float *weights);
// The same from weights stored in bfloat16 (--weights bf16), widened to floats (exact).
void hw_run_outputs_snapshot_bf16(hw_run_outputs *outputs, const uint16_t *weights);
// With --metrics: the first point of the curve, the weights before this run's training, evaluated
// and written at wall time 0 (a trainer times training from its own start, set after this: a
// time since hw_run_outputs_open here could exceed the next rows' and run backwards).
int hw_run_outputs_first_point(hw_run_outputs *outputs, const float *weights, int first_epoch);

// The checkpoint of any trainer (the sparse one too): `weights` of `model` saved to
// config->save_path with what --resume restores (epochs done, samples seen, seed, rate, schedule,
// --update, the dtype, a simulation's settings); nothing without --save. Never diverged weights:
// non-finite ones fail naming the save path, which keeps the last good checkpoint. `optim`, when
// valid, is saved beside the weights (hw_optim_checkpoint_save); NULL: the weights alone.
int hw_run_checkpoint_save(const hw_train_config *config, const hw_model *model, const float *weights, int epochs_done,
                           int64_t samples_seen, const struct hw_optim_state *optim);
// Whether a mid-epoch point of the curve is due at `samples`. Not once the epoch's last samples
// are in (`epoch_end_samples`): the epoch-end row comes next, and stands for a point on it.
int hw_run_outputs_point_due(const hw_run_outputs *outputs, int64_t samples, int64_t epoch_end_samples);
// An evaluation point at `samples` (mid-epoch, or an epoch end): every --eval-every point passed
// since the last is passed (one row stands for them; those it does not stand for count as
// skipped), and the trainer's snapshot is taken, which the caller then evaluates
// (hw_run_outputs_evaluate).
int hw_run_outputs_point(hw_run_outputs *outputs, int64_t samples, int epoch_end);
// Evaluates the snapshot, writes a metrics row and, at an epoch end, prints the epoch result and
// saves the checkpoint (--save). samples and loss_sum count this run's training so far. A stop
// signal during the evaluation cuts it short: HW_OK with outputs->interrupted set, nothing
// written; the trainer then stops and saves the current weights. Weights that are not finite, or a
// test or training loss that diverged (hw_loss_diverged), are no result: the run ends with
// hw_run_outputs_diverged instead (nothing printed as a result, nothing saved).
int hw_run_outputs_evaluate(hw_run_outputs *outputs, int epochs_done, int64_t samples, double loss_sum, int epoch_end);
// Saves `weights` as the checkpoint (--save), if one was asked for; refuses weights that are not
// finite (NaN, inf), so that the file keeps the last good checkpoint.
int hw_run_outputs_save(hw_run_outputs *outputs, const float *weights, int epochs_done, int64_t samples);
// A stop signal (`signal_number`) ended training after `samples` of this run, with `epochs_done`
// epochs complete (counted from 0, as a checkpoint counts them): with --save, saves the current
// weights (the trainer's snapshot), then says so (the file first: a stdout nobody reads blocks).
int hw_run_outputs_save_stopped(hw_run_outputs *outputs, int signal_number, int epochs_done, int64_t samples);

// A stop signal before training started, in the set-up (loading, the checks; the command line
// catches the stop signals from its start) or in the first evaluation, which it cut short
// (outputs->interrupted): the run ends as a stop during training does. It says so and, with
// --save, saves `weights`, those it starts from (`first_epoch` epochs, no sample of this run);
// result->interrupted_by is set. The metrics file is left as it was (no training, no row:
// hw_run_outputs_start never came). HW_OK, with interrupted_by 0, when no signal came; HW_ERR
// when the save failed. For one node: across ranks the stop is agreed in the training loop.
int hw_run_outputs_stop_before_training(hw_run_outputs *outputs, const float *weights, int first_epoch,
                                        hw_train_result *result);

// A training loss seen (a batch, a report window): the last one that was not diverged is
// remembered for the message of a diverged run.
void hw_run_outputs_loss(hw_run_outputs *outputs, double loss);
// Ends a diverged run: writes the metrics row that marks it (train_loss `loss`, the non-finite
// loss seen, or NAN; test_loss and test_accuracy nan: nothing was evaluated) and returns HW_ERR
// with a message naming `who` ("worker 1", "replica 0"), `what` happened, the training epoch
// `epoch` (1-based), the samples seen, the last training loss before it, and a lower --lr to try.
// Nothing is saved. `samples` counts this run's samples, as for hw_run_outputs_evaluate.
int hw_run_outputs_diverged(hw_run_outputs *outputs, const char *who, const char *what, int epoch, int epochs_done,
                            int64_t samples, double loss);
// hw_run_outputs_diverged for `who`, whose training loss `loss` diverged (hw_loss_diverged) in the
// 1-based training epoch `epoch`: "its training loss is nan".
int hw_run_outputs_loss_diverged(hw_run_outputs *outputs, const char *who, double loss, int epoch, int epochs_done,
                                 int64_t samples);

// Prints the summary and fills result.
void hw_run_outputs_finish(hw_run_outputs *outputs, int64_t samples, hw_train_result *result);
void hw_run_outputs_close(hw_run_outputs *outputs);

// ---- the rule of a diverged run ----

// A loss that is NaN, infinite, or above HW_LOSS_DIVERGED. The cross-entropy loss starts near
// ln(classes) (2.3 for ten classes); a mean above 1e4 means the weights have blown up (a step far
// too large), and such a run does not come back to a result: with Hogwild's racing workers its
// loss can stay finite (1e23, then 0 once the logits saturate) while the accuracy sits at chance,
// so waiting for a NaN is not enough.
#define HW_LOSS_DIVERGED 1e4
int hw_loss_diverged(double loss);
// What a diverged loss is, for the message: "nan", "infinite" or "2.5e+23 (above 1e+04)".
void hw_loss_describe(char *out, size_t size, double loss);
// Whether every one of the n weights is a finite number (a diverged run has NaN or inf in them).
int hw_weights_finite(const float *weights, size_t n);
// What to try after a divergence, into text[0 .. cap): a momentum below 1 when the run's is 1 or
// more, else a lower learning rate than the run's.
void hw_divergence_hint(const hw_train_config *config, char *text, size_t cap);

#endif
