// hogwild_watch: the parent's loop of a Hogwild run, shared by the CPU (hogwild.c) and GPU
// (hogwild_gpu.c) trainers (src/train/hogwild_watch.h).
//
// hw_hogwild_watch_run repeats one pass until the run is over, in four named steps:
//   collect:         wait for the workers (hw_join), sum their reports, a round between the copies,
//                    a step of the coupling between ranks; then the live line, and a diverged,
//                    failed or interrupted worker ends the run;
//   epoch_end:       every worker waits at the barrier: snapshot, release, evaluate the snapshot;
//   mid_epoch_point: an --eval-every point: snapshot and evaluate while the workers train;
//   finish:          stop the workers if need be; the save on a stop, or the summary.
#include "hogwild_watch.h"

#include "hw/comm.h"
#include "hw/err.h"
#include "hw/procfs.h"
#include "hw/signals.h"
#include "hogwild_measure.h"
#include "hogwild_stall.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// One run of the loop: what a pass hands the next.
typedef struct {
    const hogwild_watch *watch;
    hw_spawn_ctx *spawn;
    hw_run_outputs *outputs;
    hw_train_result *result;
    int epochs_to_run;       // this run's epochs, from first_epoch
    int epochs_handled;      // epoch ends already evaluated, counted from first_epoch
    hw_join_status joined;   // this pass's join
    int epoch_end;           // this pass: every worker has finished epoch epochs_handled (agreed across ranks)
    int64_t samples;         // this run's samples, the world's across ranks
    double loss_sum;         // and their training losses summed
    double running_loss;     // the live line's: the mean loss of the last window of samples
    int64_t window_samples;  // where that window starts
    double window_loss_sum;
    int status;           // HW_ERR ends the run with the message
    hogwild_stall stall;  // the workers that make no progress, named
} watch_run;

// This node's workers' reports summed (hw_hogwild_slots_sum): their samples and loss sum; returns
// the fewest epochs any of them has done.
static int read_slots(const hogwild_watch *watch, int64_t *samples, double *loss_sum) {
    int min_done;
    hw_hogwild_slots_sum(watch->control, watch->config->workers, samples, loss_sum, &min_done);
    return min_done;
}

// ---- the coupling between ranks ----

// This node's counts made the world's, across ranks: the other ranks' samples and loss as they
// last reported them (with their rounds).
static void add_other_ranks(const hogwild_watch *watch, int64_t *samples, double *loss_sum) {
    hw_couple_view others;
    hw_couple_view_read(watch->couple, &others);
    *samples += others.others_samples;
    *loss_sum += others.others_loss_sum;
    // The workers' schedule counts the world's samples (hw_hogwild_step_lr).
    atomic_store_explicit(&watch->control->other_ranks_samples, others.others_samples, memory_order_relaxed);
}

// hw_couple_poll on the live weights, through the host mirror where they are in device memory.
// The mirror is read only when a round may start (none in flight): a round in flight only adds
// its step when it lands, which the push carries to the device whatever the mirror held. A stop
// signal of this rank travels with its rounds (HW_COUPLE_STOP); one of another rank's, once a
// round brings it, stops this rank as its own would (hw_stop_signal_request): SIGTERM to one rank
// stops the job at once, not at --sync-timeout.
static int couple_poll(const hogwild_watch *watch, int state, int64_t samples, double loss_sum) {
    const hogwild_weights *weights = &watch->weights;
    hw_couple_view view;
    hw_couple_view_read(watch->couple, &view);
    if (weights->mirror_pull && !view.in_flight && weights->mirror_pull(weights->ctx) != HW_OK) return HW_ERR;
    int status = hw_couple_poll(watch->couple, state + HW_COUPLE_STOP * hw_stop_signal(), samples, loss_sum);
    if (status == HW_OK && weights->mirror_push) status = weights->mirror_push(weights->ctx, 0);
    hw_couple_view_read(watch->couple, &view);
    if (view.stop_signal) hw_stop_signal_request(view.stop_signal);
    return status;
}

// A stop on this rank, by its own signal or another rank's: one last round that carries it, unless
// one already has, so that every rank stops after the same round and reaches MPI_Finalize (which
// waits for every rank: a rank stopped alone waited there until the others' --sync-timeout). A rank
// stopped by another's round has that rank's last changes in what it saved. Bounded: a rank that has
// left already (its last epoch agreed, or stopped) never joins it; after STOP_ROUND_SECONDS the
// rank goes on to its end.
enum { STOP_ROUND_SECONDS = 5 };
static void couple_stop_round(const watch_run *run) {
    const hogwild_watch *watch = run->watch;
    if (!watch->couple || run->epochs_handled >= run->epochs_to_run) return;
    int64_t samples;
    double loss_sum;
    read_slots(watch, &samples, &loss_sum);  // the workers are stopped: the node's last counts
    double deadline = hw_now() + STOP_ROUND_SECONDS;
    for (;;) {
        hw_couple_view view;
        hw_couple_view_read(watch->couple, &view);
        if ((view.stop_signal && !view.in_flight) || hw_now() > deadline) return;
        if (couple_poll(watch, HW_COUPLE_TRAINING, samples, loss_sum) != HW_OK) return;
        struct timespec pause = {0, (long)(hw_couple_wait(watch->couple) * 1e9)};
        nanosleep(&pause, NULL);
    }
}

// hw_couple_epoch_agreed, the agreed weights written whole into the device where they are there.
static int couple_epoch_agreed(const hogwild_watch *watch, const char *when, int *agreed) {
    const hogwild_weights *weights = &watch->weights;
    int status = hw_couple_epoch_agreed(watch->couple, when, agreed);
    if (status == HW_OK && *agreed && weights->mirror_push) status = weights->mirror_push(weights->ctx, 1);
    return status;
}

int hw_hogwild_couple_open(const hw_train_config *config, const hw_train_inputs *in, hogwild_control *control,
                           int first_epoch, int64_t samples_before, float *live, double *applied,
                           struct hw_couple **couple) {
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
    hw_hogwild_release(control, first_epoch, config->workers);
    return HW_OK;
}

// Across ranks, one pass's step of the coupling (src/comm/mpi/hogwild_coupling.c), which never
// waits. The epoch ends only when every rank's end-of-epoch changes are in, the same on every
// rank; the counters become the world's, as the others last reported them. Rounds go on until the
// last epoch is agreed, and none after: every rank must make the same rounds, and none may be left
// in flight at MPI_Finalize. A stop signal (Ctrl-C on mpirun reaches every rank) ends the
// coupling: another rank may already have left, and this one goes on to save (run_ended). 0 when
// the coupling failed (run->status).
static int couple_pass(watch_run *run) {
    const hogwild_watch *watch = run->watch;
    if (run->epochs_handled < run->epochs_to_run && !hw_stop_signal()) {
        int status =
            couple_poll(watch, run->epoch_end ? HW_COUPLE_AT_BARRIER : HW_COUPLE_TRAINING, run->samples, run->loss_sum);
        if (status == HW_OK && run->epoch_end) {
            char when[64];
            snprintf(when, sizeof when, "the end of epoch %d", watch->first_epoch + run->epochs_handled + 1);
            status = couple_epoch_agreed(watch, when, &run->epoch_end);
        }
        if (status != HW_OK && !hw_stop_signal()) {
            run->status = status;
            return 0;
        }
        if (status != HW_OK) run->epoch_end = 0;  // interrupted in the coupling: not an error, a stop
    } else if (hw_stop_signal()) {
        run->epoch_end = 0;
    }
    add_other_ranks(watch, &run->samples, &run->loss_sum);
    return 1;
}

// ---- evaluations that do not stall the rounds ----

typedef struct {
    hw_run_outputs *outputs;
    int epochs_done, epoch_end;
    int64_t samples;
    double loss_sum;
    int status;
    char error[1024];  // hw_error() is per thread: the message comes back in here
    atomic_int done;
} evaluation;

static void *evaluation_thread(void *arg) {
    evaluation *e = arg;
    e->status = hw_run_outputs_evaluate(e->outputs, e->epochs_done, e->samples, e->loss_sum, e->epoch_end);
    if (e->status != HW_OK) snprintf(e->error, sizeof e->error, "%s", hw_error());
    atomic_store(&e->done, 1);
    return NULL;
}

// While the evaluation thread runs: the workers' counts, a round between the copies or a poll of
// the coupling (until one fails, into *status), and how long to wait for the next. Not "at the
// barrier" while evaluating: the loop's next pass flags that once the evaluation ends.
static double poll_while_evaluating(const hogwild_watch *watch, int copies, int *status) {
    const hogwild_weights *weights = &watch->weights;
    int64_t node_samples;
    double node_loss;
    read_slots(watch, &node_samples, &node_loss);
    if (copies) {
        if (*status == HW_OK) *status = weights->copies_round(weights->ctx, 0, node_samples);
        return weights->copies_wait(weights->ctx);
    }
    if (*status == HW_OK) *status = couple_poll(watch, HW_COUPLE_EVALUATING, node_samples, node_loss);
    return hw_couple_wait(watch->couple);
}

// hw_run_outputs_evaluate of the snapshot at this pass's counts. Across ranks rank 0 evaluates in
// a thread while this thread keeps polling the coupling (MPI progresses only inside MPI calls, and
// only this thread makes them): a test-set evaluation takes seconds, and every rank's round in
// flight would wait that long. The copies on several GPUs likewise: their workers train on
// meanwhile, and without rounds the copies would drift apart for the whole evaluation. The
// evaluation reads the snapshot only, which no round touches. `coupling` = 0: no rounds are due
// any more (the last epoch's end).
static int evaluate(const watch_run *run, int epoch_end, int coupling) {
    const hogwild_watch *watch = run->watch;
    int epochs_done = watch->first_epoch + run->epochs_handled;
    int ranks = watch->couple && watch->config->world.rank == 0;
    int copies = !watch->couple && watch->weights.copies_round;
    if (!coupling || !(ranks || copies)) {
        return hw_run_outputs_evaluate(run->outputs, epochs_done, run->samples, run->loss_sum, epoch_end);
    }
    evaluation e = {.outputs = run->outputs,
                    .epochs_done = epochs_done,
                    .epoch_end = epoch_end,
                    .samples = run->samples,
                    .loss_sum = run->loss_sum};
    atomic_init(&e.done, 0);
    pthread_t thread;
    int err = pthread_create(&thread, NULL, evaluation_thread, &e);
    if (err) return hw_run_outputs_evaluate(run->outputs, epochs_done, run->samples, run->loss_sum, epoch_end);
    int status = HW_OK;
    while (!atomic_load(&e.done)) {
        double wait = poll_while_evaluating(watch, copies, &status);
        struct timespec pause = {0, (long)(wait * 1e9)};
        nanosleep(&pause, NULL);
    }
    pthread_join(thread, NULL);
    if (e.status != HW_OK) return hw_fail("%s", e.error);
    return status;
}

// A stop signal cut the evaluation short (it can take minutes; the stop's grace is 20 s): the run
// stops now and saves the current weights, as for a signal between evaluations. 1 then.
static int stopped_in_evaluation(watch_run *run) {
    if (!run->outputs->interrupted) return 0;
    run->result->interrupted_by = hw_stop_signal() ? hw_stop_signal() : SIGTERM;
    return 1;
}

// The snapshot of every evaluation point and of the save on a stop. Across ranks: the rounds'
// weights W that the ranks agree on, the rule's look-ahead taken out (hw_couple_weights), at every
// point alike: mid-epoch, at an epoch end (where the settle has made every rank's live weights W)
// and on a stop, whose checkpoint is then what the ranks agree on, not rank 0's live weights with
// the look-ahead and its own steps since the last round (nor, on GPU ranks, a copy of the device's
// weights only to be overwritten). Otherwise the trainer's (hogwild_weights.snapshot).
static int watch_snapshot(void *ctx, hw_run_outputs *outputs) {
    const hogwild_watch *watch = ctx;
    if (!watch->couple) return watch->weights.snapshot(watch->weights.ctx, outputs);
    hw_couple_weights(watch->couple, outputs->snapshot);
    outputs->snapshot_time = hw_now();
    return HW_OK;
}

// ---- collect ----

// How long this pass may wait for the workers: across ranks the coupling says when it next needs a
// pass (every 1 ms while a round is in flight, since MPI moves it only inside the poll's MPI
// call); several copies, until their next round is due; else 10 ms.
static double pass_wait(const hogwild_watch *watch) {
    if (watch->couple) return hw_couple_wait(watch->couple);
    if (watch->weights.copies_round) return watch->weights.copies_wait(watch->weights.ctx);
    return 0.01;
}

// The first worker that reported a diverged training loss (hw_loss_diverged) ends the run: the row
// that marks it diverged, and its message. HW_OK when none has.
static int check_diverged(const watch_run *run) {
    const hogwild_watch *watch = run->watch;
    for (int r = 0; r < watch->config->workers; r++) {
        worker_slot *slot = &watch->control->slots[r];
        if (!atomic_load(&slot->diverged)) continue;
        char who[48];
        if (watch->worker_gpu) snprintf(who, sizeof who, "worker %d on cuda:%d", r, watch->worker_gpu[r]);
        else snprintf(who, sizeof who, "worker %d", r);
        hw_run_outputs_loss(run->outputs, atomic_load(&slot->last_finite_loss));
        return hw_run_outputs_loss_diverged(run->outputs, who, atomic_load(&slot->bad_loss),
                                            atomic_load(&slot->diverged_epoch) + 1,
                                            watch->first_epoch + run->epochs_handled, run->samples);
    }
    return HW_OK;
}

// A join that says a worker failed or the parent was interrupted ends the run: 1, with run->status
// or run->result->interrupted_by set; 0 for DONE and RUNNING.
static int run_ended(watch_run *run) {
    const hw_spawn_ctx *spawn = run->spawn;
    const int *worker_gpu = run->watch->worker_gpu;
    if (run->joined == HW_JOIN_FAILED) {
        char text[1200];
        hw_spawn_describe_failure(spawn, text, sizeof text);
        // "worker 3 failed ..." becomes "worker 3 on cuda:1 failed ...".
        char who[32];
        int at = snprintf(who, sizeof who, "worker %d", spawn->failed_rank);
        if (worker_gpu && spawn->failed_rank >= 0 && strncmp(text, who, (size_t)at) == 0) {
            run->status = hw_fail("%s on cuda:%d%s", who, worker_gpu[spawn->failed_rank], text + at);
        } else {
            run->status = hw_fail("%s", text);
        }
        return 1;
    }
    if (run->joined == HW_JOIN_INTERRUPTED) {
        run->result->interrupted_by = run->spawn->interrupt_signal;
        return 1;
    }
    return 0;
}

// The workers' news of this pass: wait for them, sum their reports, a round between the copies
// when one is due, a step of the coupling between ranks; then a diverged worker ends the run, the
// live line is drawn, and a failed or interrupted join ends it. 1 to go on with the pass.
static int collect(watch_run *run) {
    const hogwild_watch *watch = run->watch;
    const hw_train_config *config = watch->config;
    run->joined = hw_join(run->spawn, pass_wait(watch));
    run->epoch_end = read_slots(watch, &run->samples, &run->loss_sum) > run->epochs_handled;
    if (run->joined == HW_JOIN_RUNNING) {
        hw_hogwild_stall_check(&run->stall, watch->control, run->epochs_handled, run->spawn->pids, watch->worker_gpu,
                               &run->outputs->progress, hw_now());
    }
    if (watch->weights.copies_round && run->epochs_handled < run->epochs_to_run &&
        (run->joined == HW_JOIN_RUNNING || run->joined == HW_JOIN_DONE)) {
        // Several copies on this node: a round when due, so that a snapshot of this pass has it; at
        // an epoch end, every copy made the agreed weights before the snapshot reads them.
        run->status = watch->weights.copies_round(watch->weights.ctx, run->epoch_end, run->samples);
        if (run->status != HW_OK) return 0;
    }
    if (watch->couple && !couple_pass(run)) return 0;
    if (run->samples - run->window_samples >= 2000) {
        run->running_loss = (run->loss_sum - run->window_loss_sum) / (double)(run->samples - run->window_samples);
        run->window_samples = run->samples;
        run->window_loss_sum = run->loss_sum;
    }
    if ((run->status = check_diverged(run)) != HW_OK) return 0;
    int epoch_now = watch->first_epoch + run->epochs_handled + 1;
    hw_progress_update(&run->outputs->progress, epoch_now > config->epochs ? config->epochs : epoch_now, config->epochs,
                       run->samples, run->running_loss);
    return !run_ended(run);
}

// ---- the evaluation points ----

// Every worker has finished this epoch and waits at the barrier (or has exited after the last
// epoch): the weights are the end-of-epoch weights. Copy them, let the workers go on, and evaluate
// the copy while they train. Points before this epoch end that no mid-epoch evaluation took are
// skipped. After the last epoch, training's time ends at the last join, before the evaluation.
// 1 to go on.
static int epoch_end(watch_run *run) {
    const hogwild_watch *watch = run->watch;
    hw_run_outputs *outputs = run->outputs;
    if (hw_run_outputs_point(outputs, run->samples, 1) != HW_OK) {
        run->status = HW_ERR;
        return 0;
    }
    if (watch->optim_capture) watch->optim_capture(watch->optim_ctx);  // the workers wait
    if (watch->measure) {
        measure_capture(watch->measure, outputs->snapshot);  // the workers wait
        measure_metrics_values(watch->measure, &outputs->metrics.measure);
    }
    run->epochs_handled++;
    if (run->epochs_handled == run->epochs_to_run) {
        run->joined = hw_join(run->spawn, -1);
        if (run_ended(run)) return 0;
        outputs->trained = hw_now();
    }
    hw_hogwild_release(watch->control, watch->first_epoch + run->epochs_handled, watch->config->workers);
    if (evaluate(run, 1, run->epochs_handled < run->epochs_to_run) != HW_OK) {
        run->status = HW_ERR;
        return 0;
    }
    return !stopped_in_evaluation(run);
}

// Whether a mid-epoch point of the curve is due: not once the epoch's last samples are in (the
// epoch-end row comes next).
static int mid_epoch_point_due(const watch_run *run) {
    int64_t epoch_end_samples = (int64_t)(run->epochs_handled + 1) * run->watch->n_train;
    return hw_run_outputs_point_due(run->outputs, run->samples, epoch_end_samples);
}

// A mid-epoch point of the curve: a snapshot taken while the workers write (Hogwild); with several
// copies or across ranks, the rounds' weights they agree on (the GPU trainer's snapshot;
// watch_snapshot). One evaluation for every point passed since the last: the others are skipped.
// 1 to go on.
static int mid_epoch_point(watch_run *run) {
    const hogwild_watch *watch = run->watch;
    if (watch->measure) {
        measure_capture(watch->measure, NULL);  // lost updates: epoch ends only
        measure_metrics_values(watch->measure, &run->outputs->metrics.measure);
    }
    if (hw_run_outputs_point(run->outputs, run->samples, 0) != HW_OK || evaluate(run, 0, 1) != HW_OK) {
        run->status = HW_ERR;
        return 0;
    }
    return !stopped_in_evaluation(run);
}

// One pass of the loop, its steps in order. 1: another pass; 0: the run is over (run->status, or
// run->result->interrupted_by, says how), or every epoch is handled and every worker has exited.
static int watch_pass(watch_run *run) {
    if (!collect(run)) return 0;
    if (run->epoch_end) {
        if (!epoch_end(run)) return 0;
    } else if (mid_epoch_point_due(run) && !mid_epoch_point(run)) {
        return 0;
    }
    return !(run->joined == HW_JOIN_DONE && run->epochs_handled >= run->epochs_to_run);
}

// ---- finish ----

// The memory line of the summary: the parent's peak, and the largest worker's peak and private part.
static void report_memory(const watch_run *run) {
    hw_memory parent;
    hw_memory_read(&parent);
    int64_t worker_peak, worker_private;
    hw_hogwild_slots_memory(run->watch->control, run->watch->config->workers, &worker_peak, &worker_private);
    hw_progress_message(&run->outputs->progress,
                        "memory: parent peak RSS %.1f MiB; worker peak RSS %.1f MiB, of which %.1f MiB private "
                        "(the rest, the dataset and code, is shared with the parent)\n",
                        parent.peak_rss_kb / 1024.0, worker_peak / 1024.0, worker_private / 1024.0);
}

// The summary of a finished run: the results, the memory, --measure's block, the coupling's line
// across ranks or the copies' rounds on one node.
static void report_finished(const watch_run *run) {
    const hogwild_watch *watch = run->watch;
    hw_run_outputs_finish(run->outputs, run->samples, run->result);
    report_memory(run);
    if (watch->measure) measure_report(watch->measure, &run->outputs->progress);
    char text[1024] = "";
    if (watch->couple) hw_couple_report(watch->couple, text, sizeof text);
    else if (watch->weights.report) watch->weights.report(watch->weights.ctx, text, sizeof text);
    else return;
    hw_progress_message(&run->outputs->progress, "%s", text);
}

// Ctrl-C: every worker is stopped and reaped, so the weights are still; keep them. On one node,
// an epoch that every worker has finished is in the weights saved: they were waiting at the
// barrier with its end weights before the loop handled it, and the checkpoint says it is done.
// Across ranks the weights saved are what the ranks agree on (watch_snapshot), which hold only the
// epochs they agreed on, not one that this rank's workers finished while another rank is behind;
// and the samples are the world's, as the other ranks last reported theirs.
static int save_interrupted(const watch_run *run) {
    const hogwild_watch *watch = run->watch;
    int64_t samples;
    double loss_sum;
    read_slots(watch, &samples, &loss_sum);
    int trained = hw_hogwild_epochs_trained(watch->control, watch->config, watch->n_train, watch->config->workers);
    int epochs_done = trained > run->epochs_handled ? trained : run->epochs_handled;
    if (watch->couple) {
        add_other_ranks(watch, &samples, &loss_sum);
        epochs_done = run->epochs_handled;
        hw_couple_view view;
        hw_couple_view_read(watch->couple, &view);
        if (view.stop_signal && view.stop_rank != watch->config->world.rank) {
            hw_progress_message(&run->outputs->progress, "rank %d was stopped by %s: every rank stops with it\n",
                                view.stop_rank, hw_stop_signal_name(view.stop_signal));
        }
    }
    return hw_run_outputs_save_stopped(run->outputs, run->result->interrupted_by, watch->first_epoch + epochs_done,
                                       samples);
}

// The run is over: a failure or a stop stops and reaps every worker; a stop saves (after one last
// round that brings every copy's changes into the one saved), a finished run prints its summary.
static int finish(watch_run *run) {
    const hogwild_watch *watch = run->watch;
    // A stop signal after the last epoch's end (its evaluation done, in its save): the run ends as
    // every stop does, as DataParallel's loop ends it.
    if (run->status == HW_OK && !run->result->interrupted_by && hw_stop_signal()) {
        run->result->interrupted_by = hw_stop_signal();
    }
    const int interrupted = run->result->interrupted_by != 0;
    if (run->status != HW_OK || interrupted) {
        hw_hogwild_stop(watch->control);
        hw_spawn_stop(run->spawn);
    }
    if (run->status == HW_OK && interrupted && watch->weights.copies_round) {
        // The workers' counts read again: steps taken since the loop's last pass must not look
        // like none (a settle with no step since is skipped, gpu_copies_poll).
        int64_t samples;
        double loss_sum;
        read_slots(watch, &samples, &loss_sum);
        run->status = watch->weights.copies_round(watch->weights.ctx, 1, samples);
    }
    if (run->status != HW_OK) return run->status;
    if (interrupted) {
        // The save first: across ranks it reads the agreed weights, and on Ctrl-C mpirun's SIGKILL
        // follows its SIGTERM within a second (odls_base_sigkill_timeout).
        int status = save_interrupted(run);
        couple_stop_round(run);
        return status;
    }
    report_finished(run);
    return HW_OK;
}

int hw_hogwild_watch_run(const hogwild_watch *watch, hw_spawn_ctx *spawn, hw_run_outputs *outputs,
                         hw_train_result *result) {
    watch_run run = {.watch = watch,
                     .spawn = spawn,
                     .outputs = outputs,
                     .result = result,
                     .epochs_to_run = watch->config->epochs - watch->first_epoch,
                     .running_loss = NAN,
                     .status = HW_OK};
    hw_run_outputs_start(outputs, watch_snapshot, (void *)watch);  // the workers (GPU, ranks) are set up
    run.status = hw_hogwild_stall_open(&run.stall, watch->config->workers, watch->config->world.rank, hw_now());
    while (run.status == HW_OK && watch_pass(&run)) continue;
    int status = finish(&run);
    hw_hogwild_stall_close(&run.stall);
    return status;
}
