// hogwild_watch: the workers' report slots, the epoch barrier and the parent's watch loop of a
// Hogwild run, shared by the CPU (hogwild.c) and GPU (hogwild_gpu.c) trainers.
#include "hogwild_watch.h"

#include "hw/comm.h"
#include "hw/err.h"
#include "hw/procfs.h"
#include "hw/signals.h"
#include "hogwild_measure.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

size_t hw_hogwild_control_bytes(int workers) {
    size_t bytes = sizeof(hogwild_control) + sizeof(worker_slot) * (size_t)workers;
    return (bytes + 63) & ~(size_t)63;
}

int hw_hogwild_wait_for_epoch(hogwild_control *control, int epoch) {
    while (atomic_load(&control->released_epoch) < epoch) {
        if (atomic_load(&control->stop)) return 0;
        struct timespec pause = {0, 100 * 1000L};
        nanosleep(&pause, NULL);
    }
    return !atomic_load(&control->stop);
}

void hw_hogwild_report_memory(worker_slot *slot) {
    hw_memory memory;
    hw_memory_read(&memory);
    atomic_store(&slot->peak_rss_kb, memory.peak_rss_kb);
    atomic_store(&slot->private_kb, memory.private_kb);
}

void hw_hogwild_report_diverged(worker_slot *slot, int epoch, double loss, double last_finite) {
    atomic_store(&slot->bad_loss, loss);
    atomic_store(&slot->last_finite_loss, last_finite);
    atomic_store(&slot->diverged_epoch, epoch);
    atomic_store(&slot->diverged, 1);
}

void hw_fault_read(fault_plan *fault) {
    memset(fault, 0, sizeof *fault);
    fault->rank = -1;
    const char *text = getenv("HOGWILD_FAIL_WORKER");
    if (!text) return;
    char mode[16] = "";
    if (sscanf(text, "%d:%d:%15s", &fault->rank, &fault->after_batches, mode) < 2) fault->rank = -1;
    fault->by_abort = strcmp(mode, "abort") == 0;
    fault->by_nan = strcmp(mode, "nan") == 0;
}

int hw_fault_check(const fault_plan *fault, int rank, int batches) {
    if (rank != fault->rank || batches != fault->after_batches || fault->by_nan) return HW_OK;
    if (fault->by_abort) abort();
    return hw_fail("injected failure after %d batches (HOGWILD_FAIL_WORKER)", batches);
}

int hw_fault_poisons_loss(const fault_plan *fault, int rank, int batch) {
    return fault->by_nan && rank == fault->rank && batch == fault->after_batches;
}

// ---- the parent ----

static void sum_slots(const hogwild_control *control, int workers, int64_t *samples, double *loss_sum,
                      int *min_epochs_done) {
    *samples = 0;
    *loss_sum = 0;
    *min_epochs_done = 1 << 30;
    for (int r = 0; r < workers; r++) {
        *samples += atomic_load_explicit(&control->slots[r].samples, memory_order_relaxed);
        *loss_sum += atomic_load_explicit(&control->slots[r].loss_sum, memory_order_relaxed);
        int done = atomic_load(&control->slots[r].epochs_done);
        if (done < *min_epochs_done) *min_epochs_done = done;
    }
}

// The memory line of the summary: the parent's peak, and the largest worker's peak and private part.
static void report_memory(hw_train_outputs *log, const hogwild_control *control, int workers) {
    hw_memory parent;
    hw_memory_read(&parent);
    int64_t worker_peak = 0, worker_private = 0;
    for (int r = 0; r < workers; r++) {
        int64_t peak = atomic_load(&control->slots[r].peak_rss_kb);
        int64_t private_kb = atomic_load(&control->slots[r].private_kb);
        if (peak > worker_peak) worker_peak = peak;
        if (private_kb > worker_private) worker_private = private_kb;
    }
    hw_progress_message(&log->progress,
                        "memory: parent peak RSS %.1f MiB; worker peak RSS %.1f MiB, of which %.1f MiB private "
                        "(the rest, the dataset and code, is shared with the parent)\n",
                        parent.peak_rss_kb / 1024.0, worker_peak / 1024.0, worker_private / 1024.0);
}

// Ctrl-C: every worker is stopped and reaped, so the weights are still; keep them. Workers that
// had all finished an epoch were waiting at the barrier with its end weights before the loop
// handled it: that epoch is done, and the checkpoint says so.
// This node's counts made the world's, across ranks: the other ranks' samples and loss as they
// last reported them (with their rounds).
static void add_other_ranks(const hogwild_watch *watch, int64_t *samples, double *loss_sum) {
    hw_couple_view others;
    hw_couple_view_read(watch->couple, &others);
    *samples += others.others_samples;
    *loss_sum += others.others_loss_sum;
}

static int save_interrupted(const hogwild_watch *watch, hw_run_loop *run, int signal_number, int epochs_handled) {
    int64_t samples;
    double loss_sum;
    int min_done;
    sum_slots(watch->control, watch->config->workers, &samples, &loss_sum, &min_done);
    // On one node, an epoch that every worker has finished is in the weights saved. Across ranks
    // the weights saved are what the ranks agree on (watch_snapshot), which hold only the epochs
    // they agreed on, not one that this rank's workers finished while another rank is behind; and
    // the samples are the world's, as the other ranks last reported theirs.
    int epochs_done = min_done > epochs_handled ? min_done : epochs_handled;
    if (watch->couple) {
        add_other_ranks(watch, &samples, &loss_sum);
        epochs_done = epochs_handled;
    }
    return hw_run_loop_save_stopped(run, signal_number, watch->first_epoch + epochs_done, samples);
}

// The first worker that reported a diverged training loss (hw_loss_diverged) ends the run: the row
// that marks it diverged, and its message. HW_OK when none has.
static int check_diverged(const hogwild_watch *watch, hw_run_loop *run, int epochs_handled, int64_t samples) {
    for (int r = 0; r < watch->config->workers; r++) {
        worker_slot *slot = &watch->control->slots[r];
        if (!atomic_load(&slot->diverged)) continue;
        char who[48];
        if (watch->worker_gpu) snprintf(who, sizeof who, "worker %d on cuda:%d", r, watch->worker_gpu[r]);
        else snprintf(who, sizeof who, "worker %d", r);
        hw_train_outputs_loss(run->log, atomic_load(&slot->last_finite_loss));
        return hw_run_loop_diverged(run, who, atomic_load(&slot->bad_loss), atomic_load(&slot->diverged_epoch) + 1,
                                    watch->first_epoch + epochs_handled, samples);
    }
    return HW_OK;
}

// A join that says a worker failed or the parent was interrupted ends the run: 1, with *status
// and result->interrupted_by set; 0 for DONE and RUNNING.
static int run_ended(const hogwild_watch *watch, hw_join_status joined, const hw_spawn_ctx *spawn,
                     hw_train_result *result, int *status) {
    if (joined == HW_JOIN_FAILED) {
        char text[1200];
        hw_spawn_describe_failure(spawn, text, sizeof text);
        // "worker 3 failed ..." becomes "worker 3 on cuda:1 failed ...".
        char who[32];
        int at = snprintf(who, sizeof who, "worker %d", spawn->failed_rank);
        if (watch->worker_gpu && spawn->failed_rank >= 0 && strncmp(text, who, (size_t)at) == 0) {
            *status = hw_fail("%s on cuda:%d%s", who, watch->worker_gpu[spawn->failed_rank], text + at);
        } else {
            *status = hw_fail("%s", text);
        }
        return 1;
    }
    if (joined == HW_JOIN_INTERRUPTED) {
        result->interrupted_by = spawn->interrupt_signal;
        return 1;
    }
    return 0;
}

// A stop signal cut the evaluation short (it can take minutes; the stop's grace is 20 s): the run
// stops now and saves the current weights, as for a signal between evaluations.
static int stopped_in_evaluation(const hw_train_outputs *log, hw_train_result *result) {
    if (!log->interrupted) return 0;
    result->interrupted_by = hw_stop_signal() ? hw_stop_signal() : SIGTERM;
    return 1;
}

// ---- the coupling between ranks ----

// hw_couple_poll on the live weights, through the host mirror where they are in device memory.
// The mirror is read only when a round may start (none in flight): a round in flight only adds
// its step when it lands, which the push carries to the device whatever the mirror held.
static int couple_poll(const hogwild_watch *watch, int state, int64_t samples, double loss_sum) {
    hw_couple_view view;
    hw_couple_view_read(watch->couple, &view);
    if (watch->mirror_pull && !view.in_flight && watch->mirror_pull(watch->mirror_ctx) != HW_OK) return HW_ERR;
    int status = hw_couple_poll(watch->couple, state, samples, loss_sum);
    if (status == HW_OK && watch->mirror_push) status = watch->mirror_push(watch->mirror_ctx, 0);
    return status;
}

// hw_couple_epoch_agreed, the agreed weights written whole into the device where they are there.
static int couple_epoch_agreed(const hogwild_watch *watch, const char *when, int *agreed) {
    int status = hw_couple_epoch_agreed(watch->couple, when, agreed);
    if (status == HW_OK && *agreed && watch->mirror_push) status = watch->mirror_push(watch->mirror_ctx, 1);
    return status;
}

int hw_hogwild_couple_open(const hw_train_config *config, const hw_train_inputs *in, int first_epoch,
                           int64_t samples_before, float *live, double *applied, struct hw_couple **couple) {
    const hw_model *model = &in->model;
    hw_couple_plan plan = {.every_ms = config->sync_every_ms,
                           .every_samples = config->sync_every_samples,
                           .timeout_s = config->sync_timeout,
                           .rule = config->sync_rule,
                           .applied = applied};
    if (hw_run_check_ranks(config, in, first_epoch, samples_before) != HW_OK ||
        hw_comm_weights_agree(model->weights, model->n_weights, "the start") != HW_OK ||
        hw_couple_open(couple, live, model->n_weights, &plan, &config->world) != HW_OK) {
        return HW_ERR;
    }
    return HW_OK;
}

// ---- evaluations that do not stall the coupling between ranks ----

typedef struct {
    hw_train_outputs *log;
    int epochs_done, epoch_end;
    int64_t samples;
    double loss_sum;
    int status;
    char error[1024];  // hw_error() is per thread: the message comes back in here
    atomic_int done;
} evaluation;

static void *evaluation_thread(void *arg) {
    evaluation *e = arg;
    e->status = hw_train_outputs_evaluate(e->log, e->epochs_done, e->samples, e->loss_sum, e->epoch_end);
    if (e->status != HW_OK) snprintf(e->error, sizeof e->error, "%s", hw_error());
    atomic_store(&e->done, 1);
    return NULL;
}

// hw_train_outputs_evaluate. Across ranks rank 0 evaluates in a thread while this thread keeps
// polling the coupling (MPI progresses only inside MPI calls, and only this thread makes them):
// a test-set evaluation takes seconds, and every rank's round in flight would wait that long. The
// copies on several GPUs likewise: their workers train on meanwhile, and without rounds the copies
// would drift apart for the whole evaluation. The evaluation reads the snapshot only, which no
// round touches.
static int evaluate(const hogwild_watch *watch, hw_train_outputs *log, int epochs_done, int64_t samples,
                    double loss_sum, int epoch_end, int coupling) {
    int ranks = watch->couple && watch->config->world.rank == 0, copies = !watch->couple && watch->copies_poll;
    if (!coupling || !(ranks || copies)) {
        return hw_train_outputs_evaluate(log, epochs_done, samples, loss_sum, epoch_end);
    }
    evaluation e = {
        .log = log, .epochs_done = epochs_done, .epoch_end = epoch_end, .samples = samples, .loss_sum = loss_sum};
    atomic_init(&e.done, 0);
    pthread_t thread;
    int err = pthread_create(&thread, NULL, evaluation_thread, &e);
    if (err) return hw_train_outputs_evaluate(log, epochs_done, samples, loss_sum, epoch_end);
    int status = HW_OK;
    while (!atomic_load(&e.done)) {
        // Not "at the barrier" while evaluating: the main loop flags that once the evaluation ends.
        int64_t node_samples;
        double node_loss;
        int min_done;
        sum_slots(watch->control, watch->config->workers, &node_samples, &node_loss, &min_done);
        double wait;
        if (copies) {
            if (status == HW_OK) status = watch->copies_poll(watch->copies_ctx, 0, node_samples);
            wait = watch->copies_wait(watch->copies_ctx);
        } else {
            if (status == HW_OK) status = couple_poll(watch, HW_COUPLE_EVALUATING, node_samples, node_loss);
            wait = hw_couple_wait(watch->couple);
        }
        struct timespec pause = {0, (long)(wait * 1e9)};
        nanosleep(&pause, NULL);
    }
    pthread_join(thread, NULL);
    if (e.status != HW_OK) return hw_fail("%s", e.error);
    return status;
}

// The run loop's snapshot. Across ranks: the rounds' weights W that the ranks agree on, the
// rule's look-ahead taken out (hw_couple_weights), at every point alike: mid-epoch, at an epoch end
// (where the settle has made every rank's live weights W) and on a stop, whose checkpoint is then
// what the ranks agree on, not rank 0's live weights with the look-ahead and its own steps since
// the last round (nor, on GPU ranks, a copy of the device's weights only to be overwritten).
// Otherwise the trainer's copy of its workers' weights.
static int watch_snapshot(void *ctx, hw_train_outputs *log) {
    const hogwild_watch *watch = ctx;
    if (!watch->couple) return watch->snapshot(watch->snapshot_ctx, log);
    hw_couple_weights(watch->couple, log->snapshot);
    log->snapshot_time = hw_now();
    return HW_OK;
}

int hw_hogwild_watch_run(const hogwild_watch *watch, hw_spawn_ctx *spawn, hw_train_outputs *log,
                         hw_train_result *result) {
    const hw_train_config *config = watch->config;
    hogwild_control *control = watch->control;
    const int workers = config->workers;
    const int epochs_to_run = config->epochs - watch->first_epoch;
    int epochs_handled = 0;  // epoch ends already evaluated, counted from first_epoch
    int64_t samples = 0;
    double loss_sum = 0, running_loss = NAN;
    int64_t loss_window_samples = 0;
    double loss_window_sum = 0;
    int status = HW_OK;
    hw_run_loop run;
    hw_run_loop_start(&run, log, watch_snapshot, (void *)watch);  // the workers (GPU, ranks) are set up

    for (;;) {
        // Across ranks the coupling says when it next needs a pass: every 1 ms while a round is
        // in flight, since MPI moves it only inside the poll's MPI call.
        double wait = watch->couple        ? hw_couple_wait(watch->couple)
                      : watch->copies_poll ? watch->copies_wait(watch->copies_ctx)
                                           : 0.01;
        hw_join_status joined = hw_join(spawn, wait);
        int min_done;
        sum_slots(control, workers, &samples, &loss_sum, &min_done);
        int epoch_end = min_done > epochs_handled;
        if (watch->copies_poll && epochs_handled < epochs_to_run &&
            (joined == HW_JOIN_RUNNING || joined == HW_JOIN_DONE)) {
            // Several copies on this node: a round when due, so that a snapshot below has it; at an
            // epoch end, every copy made the agreed weights before the snapshot below reads them.
            if ((status = watch->copies_poll(watch->copies_ctx, epoch_end, samples)) != HW_OK) break;
        }
        if (watch->couple) {
            // Across ranks: one step of the coupling (src/comm/mpi/hogwild_coupling.c), which never waits. The
            // epoch ends only when every rank's end-of-epoch changes are in, the same on every
            // rank; the counters are the world's, as the others last reported them. Rounds go on
            // until the last epoch is agreed, and none after: every rank must make the same
            // rounds, and none may be left in flight at MPI_Finalize.
            // A stop signal (Ctrl-C on mpirun reaches every rank) ends the coupling: another rank
            // may already have left, and this one goes on to save (run_ended, below).
            if (epochs_handled < epochs_to_run && !hw_stop_signal()) {
                status = couple_poll(watch, epoch_end ? HW_COUPLE_AT_BARRIER : HW_COUPLE_TRAINING, samples, loss_sum);
                if (status == HW_OK && epoch_end) {
                    char when[64];
                    snprintf(when, sizeof when, "the end of epoch %d", watch->first_epoch + epochs_handled + 1);
                    status = couple_epoch_agreed(watch, when, &epoch_end);
                }
                if (status != HW_OK && !hw_stop_signal()) break;
                if (status != HW_OK) {  // interrupted in the coupling: not an error, a stop
                    status = HW_OK;
                    epoch_end = 0;
                }
            } else if (hw_stop_signal()) {
                epoch_end = 0;
            }
            add_other_ranks(watch, &samples, &loss_sum);
        }
        if (samples - loss_window_samples >= 2000) {
            running_loss = (loss_sum - loss_window_sum) / (double)(samples - loss_window_samples);
            loss_window_samples = samples;
            loss_window_sum = loss_sum;
        }
        int epoch_now = watch->first_epoch + epochs_handled + 1;
        if ((status = check_diverged(watch, &run, epochs_handled, samples)) != HW_OK) break;
        hw_progress_update(&log->progress, epoch_now > config->epochs ? config->epochs : epoch_now, config->epochs,
                           samples, running_loss);

        if (run_ended(watch, joined, spawn, result, &status)) break;

        if (epoch_end) {
            // Every worker has finished this epoch and waits at the barrier (or has exited after
            // the last epoch): the weights are the end-of-epoch weights. Copy them, let the
            // workers go on, and evaluate the copy while they train. Points before this epoch end
            // that no mid-epoch evaluation took are skipped.
            if (hw_run_loop_point(&run, samples, 1) != HW_OK) {
                status = HW_ERR;
                break;
            }
            if (watch->measure) {
                measure_capture(watch->measure, log->snapshot);  // the workers wait
                measure_metrics_values(watch->measure, &log->metrics.measure);
            }
            epochs_handled++;
            if (epochs_handled == epochs_to_run) {
                // Training is over: its time ends at the last join, before the final evaluation.
                joined = hw_join(spawn, -1);
                if (run_ended(watch, joined, spawn, result, &status)) break;
                log->trained = hw_now();
            }
            atomic_store(&control->released_epoch, watch->first_epoch + epochs_handled);
            if (evaluate(watch, log, watch->first_epoch + epochs_handled, samples, loss_sum, 1,
                         epochs_handled < epochs_to_run) != HW_OK) {
                status = HW_ERR;
                break;
            }
            if (stopped_in_evaluation(log, result)) break;
        } else if (hw_run_loop_point_due(&run, samples, (int64_t)(epochs_handled + 1) * watch->n_train)) {
            // A mid-epoch point of the curve: a snapshot taken while the workers write (Hogwild);
            // with several copies or across ranks, the rounds' weights they agree on (the GPU
            // trainer's snapshot; watch_snapshot).
            // Not once the epoch's last samples are in: the epoch-end row comes next.
            if (watch->measure) {
                measure_capture(watch->measure, NULL);  // lost updates: epoch ends only
                measure_metrics_values(watch->measure, &log->metrics.measure);
            }
            // One evaluation for every point passed since the last: the others are skipped.
            int point = hw_run_loop_point(&run, samples, 0);
            if (point != HW_OK ||
                evaluate(watch, log, watch->first_epoch + epochs_handled, samples, loss_sum, 0, 1) != HW_OK) {
                status = HW_ERR;
                break;
            }
            if (stopped_in_evaluation(log, result)) break;
        }
        if (joined == HW_JOIN_DONE && epochs_handled >= epochs_to_run) break;
    }

    if (status != HW_OK || result->interrupted_by) {
        atomic_store(&control->stop, 1);
        hw_spawn_stop(spawn);
    }
    if (status == HW_OK && result->interrupted_by && watch->copies_poll) {
        // The workers are stopped: one last round brings every copy's changes into the one saved.
        // Their counts read again: steps taken since the loop's last pass must not look like none
        // (a settle with no step since is skipped, gpu_copies_poll).
        int min_done;
        sum_slots(control, workers, &samples, &loss_sum, &min_done);
        status = watch->copies_poll(watch->copies_ctx, 1, samples);
    }
    if (status == HW_OK && result->interrupted_by) {
        status = save_interrupted(watch, &run, result->interrupted_by, epochs_handled);
    } else if (status == HW_OK) {
        hw_train_outputs_finish(log, samples, result);
        report_memory(log, control, workers);
    }
    return status;
}
