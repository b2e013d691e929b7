// run_log: what a training run writes, the same for both trainers (src/train/run_log.c):
// evaluations of snapshots of the weights, the metrics rows, the checkpoints, the progress line,
// the summary, and the rule and message of a diverged run.
#ifndef HW_RUN_LOG_H
#define HW_RUN_LOG_H

#include "hw/evaluate.h"
#include "hw/metrics.h"
#include "hw/progress.h"
#include "hw/train.h"

#include <stddef.h>
#include <stdint.h>

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
