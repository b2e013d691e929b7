// sparse_run: a sparse model's run around its epochs (hw_train_sparse, include/hw/sparse_train.h):
// the weights in one shared mapping, where they start from, and after each epoch the evaluation,
// the --metrics row, the checkpoint and the epoch's line; --measure's counts (hogwild_measure.h);
// a diverged run's end and the save on a stop, by the same rules as the dense trainers'
// (src/train/run_outputs.c).
//
// The shared mapping: the weights, then the schedule's count on a cache line of its own, then one
// sparse_tally per worker, each on its own line (the workers write them at every step), then the
// update lock of --update locked, then from a line of its own the velocities (sparse_epoch.h), one
// buffer per Hogwild worker or DataParallel's one, none at momentum 0.
//
// The optimizer state (include/hw/resume_optim.h): with --save or --resume the run keeps a
// hw_optim_state, a dense run's, whose velocities are copied from the mapping at each save of an
// epoch's end and, from --resume's checkpoint when it matches the run, into the mapping before the
// first epoch; so a sparse run resumed goes on with the momentum it stopped with, as a dense one.
#include "sparse_epoch.h"

#include "hw/ckpt.h"
#include "hw/clock.h"
#include "hw/err.h"
#include "hw/metrics.h"
#include "hw/progress.h"
#include "hw/resume_optim.h"
#include "hw/run_outputs.h"
#include "hw/shm.h"
#include "hw/signals.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// One run's state between its epochs.
typedef struct {
    const hw_train_config *config;
    const hw_sparse_model *model;
    const hw_sparse_set *test;
    int64_t train_n;  // the training set's examples: an epoch
    hw_model view;    // the model as the checkpoints name its tensors
    float *weights;
    float *velocities;      // the job's (sparse_epoch.h), NULL at momentum 0
    hw_optim_state *optim;  // the state checkpoints keep, with --save or --resume; else NULL
    hw_metrics metrics;
    hw_measure *measure;  // --measure, else NULL
    double started;
    int64_t samples;  // training samples seen, earlier runs' (--resume) included
} sparse_run;

static void epoch_print(const sparse_run *run, int epoch, double loss, int64_t correct, double seconds,
                        int64_t examples) {
    if (run->config->quiet) return;
    const int epochs = run->config->epochs;
    if (run->model->loss == HW_LOSS_SQUARED) {
        printf("epoch %d/%d: test MSE %.5f, RMSE %.5f (%.2f s, %.0f examples/s)\n", epoch, epochs, loss, sqrt(loss),
               seconds, (double)examples / seconds);
    } else {
        printf("epoch %d/%d: test loss %.5f, accuracy %.2f%% (%.2f s, %.0f examples/s)\n", epoch, epochs, loss,
               100.0 * (double)correct / (double)run->test->n, seconds, (double)examples / seconds);
    }
    fflush(stdout);
}

// The weights a run starts from: the seeded initialisation, or --resume's checkpoint, whose epoch
// count and samples the run continues, by the dense runs' rules (hw_train_resume_weights): finite
// weights, and fewer epochs than --epochs.
static int start_weights(sparse_run *run, int *first_epoch) {
    const hw_train_config *config = run->config;
    hw_sparse_model_ckpt_view(run->model, &run->view);
    hw_fm_init(run->weights, &run->model->dims, 0.1f, config->seed);
    if (!config->resume_path) return HW_OK;
    hw_ckpt_meta meta;
    run->view.weights = run->weights;
    if (hw_train_resume_weights(config, &run->view, &meta) != HW_OK) return HW_ERR;
    *first_epoch = meta.epoch;
    run->samples = meta.samples_seen;
    return HW_OK;
}

// A sparse model has no dropout: the generators a kept state records, one per worker (replica),
// are seeded as a dense trainer's workers' and never drawn.
static uint64_t generator_seed(const hw_train_config *config, int k) { return hw_worker_seed(config->seed, k); }

// The optimizer state, with --save or --resume (run->optim; else NULL): fresh, and --resume's
// velocities copied into the mapping when the checkpoint's trainer, worker (replica) count and
// momentum are the run's (hw_optim_state_resume; else one line on stderr says why it restarts).
// After start_weights, whose view names the tensors.
static int optim_open(sparse_run *run, hw_optim_state *optim) {
    const hw_train_config *config = run->config;
    if (!hw_optim_kept(config) || (!config->resume_path && !config->save_path)) return HW_OK;
    if (hw_optim_state_open(optim, config, run->view.n_weights, generator_seed) != HW_OK) return HW_ERR;
    run->optim = optim;
    if (hw_optim_state_resume(optim, config, &run->view) != HW_OK) return HW_ERR;
    if (optim->restored && optim->n_velocities) {
        memcpy(run->velocities, optim->velocities, sizeof(float) * optim->n_weights * (size_t)optim->n_velocities);
    }
    return HW_OK;
}

// A checkpoint of the weights as they are, `epochs_done` epochs and run->samples into the run, as
// a dense run's (hw_run_checkpoint_save), with the velocities beside them when they are the ones
// at these weights (`current`: an epoch's end, or a stop before the epoch began). After a stop
// mid-epoch they are not (the resumed run redoes the epoch from weights its steps moved), so that
// checkpoint keeps no state, as a dense run's.
static int save(const sparse_run *run, int epochs_done, int current) {
    hw_optim_state *optim = run->optim;
    if (optim && run->config->save_path) {
        optim->valid = current;
        if (current && optim->n_velocities) {
            memcpy(optim->velocities, run->velocities, sizeof(float) * optim->n_weights * (size_t)optim->n_velocities);
        }
    }
    return hw_run_checkpoint_save(run->config, &run->view, run->weights, epochs_done, run->samples, optim);
}

// A --metrics row at `wall` seconds, `epochs_done` epochs into the run, of the test set's loss and
// the examples predicted right; the lr column is the schedule's at the row's samples.
static int metrics_row(sparse_run *run, double wall, int epochs_done, double train_loss, double test_loss,
                       int64_t correct) {
    run->metrics.lr = hw_train_lr(run->config, run->samples, run->train_n);
    if (run->measure) measure_metrics_values(run->measure, &run->metrics.measure);
    return hw_metrics_row(&run->metrics, wall, epochs_done, run->samples, train_loss, test_loss,
                          100.0 * (double)correct / (double)run->test->n);
}

// The end of a diverged run: the row that marks it (nothing evaluated), nothing saved, the
// message with what to try.
static int diverged(sparse_run *run, const char *what, double loss, int epoch) {
    const hw_train_config *config = run->config;
    run->metrics.lr = hw_train_lr(config, run->samples, run->train_n);
    if (run->measure) measure_metrics_values(run->measure, &run->metrics.measure);
    hw_metrics_row(&run->metrics, hw_now() - run->started, epoch - 1, run->samples, loss, NAN, NAN);
    char hint[224], kept[600] = "";
    hw_divergence_hint(config, hint, sizeof hint);
    if (config->save_path) snprintf(kept, sizeof kept, "; nothing was saved to %s", config->save_path);
    return hw_fail("training diverged in epoch %d/%d after %lld samples seen: %s. %s%s", epoch, config->epochs,
                   (long long)run->samples, what, hint, kept);
}

// After a stop signal: says so on stdout, as the dense trainers do, and saves the weights as they
// are (--save); the epoch is not done, the samples trained in it are counted. `mid_epoch`: the
// stop ended an epoch's training (its velocities are not saved, save()).
static int stopped(sparse_run *run, int signal_number, int epochs_done, int mid_epoch) {
    printf("interrupted by %s after %lld samples\n", hw_stop_signal_name(signal_number), (long long)run->samples);
    fflush(stdout);
    if (!run->config->save_path) return HW_OK;
    if (save(run, epochs_done, !mid_epoch) != HW_OK) return HW_ERR;
    printf("saved the current weights to %s\n", run->config->save_path);
    fflush(stdout);
    return HW_OK;
}

// --measure's block after training, and beside it the sparsity the HOGWILD! paper states its
// theory in (hogwild stats DIR prints the same).
static void measure_print(const sparse_run *run, const hw_sparse_set *train) {
    hw_progress progress = {0};  // printed with --quiet too, as a dense run's: it is what was asked for
    measure_report(run->measure, &progress);
    hw_sparse_stats stats;
    if (hw_sparse_stats_compute(&stats, train, 2000, run->config->seed) != HW_OK) return;
    printf("  the training data's sparsity: Omega %lld, Delta %.4f, rho %s%.4f (as hogwild stats prints it)\n",
           (long long)stats.omega, stats.delta, stats.rho_exact ? "" : "~", stats.rho);
    fflush(stdout);
}

// The epochs from first_epoch on, each then evaluated, written and saved; a stop, a divergence or
// a failure ends them. `order` is job->order, the run's to draw.
static int epochs_run(sparse_run *run, sparse_job *job, int64_t *order, int first_epoch, hw_train_result *result) {
    const hw_train_config *config = run->config;
    const int tallies = config->mode == HW_MODE_HOGWILD ? config->workers : 1;
    for (int epoch = first_epoch; epoch < config->epochs; epoch++) {
        // A stop that came while the last epoch was evaluated, written or saved: this one not begun.
        int signal_number = hw_stop_signal();
        if (signal_number) {
            result->interrupted_by = signal_number;
            return stopped(run, signal_number, epoch, 0);
        }
        sparse_order_draw(order, job->train->n, config->seed, epoch);
        double t0 = hw_now();
        if (sparse_epoch_train(job, &signal_number) != HW_OK) return HW_ERR;
        double seconds = hw_now() - t0;
        int64_t trained = 0;
        double loss_sum = 0;
        for (int w = 0; w < tallies; w++) {
            trained += job->tally[w].samples;
            loss_sum += job->tally[w].loss_sum;
        }
        run->samples += trained;
        result->samples_seen += trained;
        result->train_seconds += seconds;
        // Every worker has exited: the weights are the epoch's end, for the lost updates too.
        if (run->measure) measure_capture(run->measure, run->weights);
        if (signal_number) {
            // Every example trained: the stop came after the epoch's last step, and the epoch is whole.
            int whole = trained == job->train->n;
            result->interrupted_by = signal_number;
            return stopped(run, signal_number, whole ? epoch + 1 : epoch, !whole);
        }
        double train_loss = trained > 0 ? loss_sum / (double)trained : NAN;
        int64_t correct;
        hw_sparse_evaluate(run->model, run->weights, run->test, &result->test_loss, &correct);
        result->test_accuracy = 100.0 * (double)correct / (double)run->test->n;
        char bad[48], what[96];
        if (hw_loss_diverged(train_loss) || hw_loss_diverged(result->test_loss)) {
            int test_bad = hw_loss_diverged(result->test_loss);
            hw_loss_describe(bad, sizeof bad, test_bad ? result->test_loss : train_loss);
            snprintf(what, sizeof what, "its %s loss is %s", test_bad ? "test" : "training", bad);
            return diverged(run, what, train_loss, epoch + 1);
        }
        if (!hw_weights_finite(run->weights, run->view.n_weights)) {
            return diverged(run, "the weights are no longer finite numbers (NaN or inf)", train_loss, epoch + 1);
        }
        double wall = hw_now() - run->started;
        if (metrics_row(run, wall, epoch + 1, train_loss, result->test_loss, correct) != HW_OK) return HW_ERR;
        if (save(run, epoch + 1, 1) != HW_OK) return HW_ERR;
        epoch_print(run, epoch + 1, result->test_loss, correct, seconds, trained);
    }
    return HW_OK;
}

int hw_train_sparse(const hw_train_config *config, const hw_sparse_model *model, const hw_sparse_set *train,
                    const hw_sparse_set *test, hw_train_result *result) {
    memset(result, 0, sizeof *result);
    const int tallies = config->mode == HW_MODE_HOGWILD ? config->workers : 1;
    const size_t n_weights = hw_fm_n_weights(&model->dims);
    const size_t count_offset = (n_weights * sizeof(float) + 63) & ~(size_t)63, tally_offset = count_offset + 64;
    const size_t lock_offset = tally_offset + (size_t)tallies * sizeof(sparse_tally);
    const size_t velocity_offset = (lock_offset + sizeof(pthread_mutex_t) + 63) & ~(size_t)63;
    const size_t velocity_floats = config->momentum > 0 ? (size_t)tallies * n_weights : 0;
    hw_shm shm;
    if (hw_shm_open(&shm, velocity_offset + velocity_floats * sizeof(float)) != HW_OK) return HW_ERR;
    float *velocities = velocity_floats ? (float *)((char *)shm.data + velocity_offset) : NULL;
    int64_t *order = malloc((size_t)train->n * sizeof *order);
    sparse_run *run = calloc(1, sizeof *run);
    int first_epoch = 0, rc = HW_OK;
    if (!order || !run) rc = hw_fail("cannot allocate the order of %lld training examples", (long long)train->n);
    sparse_job job = {.config = config,
                      .model = model,
                      .train = train,
                      .order = order,
                      .weights = shm.data,
                      .velocities = velocities,
                      .samples = (atomic_llong *)((char *)shm.data + count_offset),
                      .tally = (sparse_tally *)((char *)shm.data + tally_offset),
                      .update = {.mode = config->update, .lock = (pthread_mutex_t *)((char *)shm.data + lock_offset)}};
    int locked = rc == HW_OK && config->update == HW_UPDATE_LOCKED;
    if (locked && hogwild_update_lock_init(job.update.lock) != HW_OK) rc = HW_ERR, locked = 0;
    if (rc == HW_OK) {
        *run = (sparse_run){.config = config,
                            .model = model,
                            .test = test,
                            .train_n = train->n,
                            .weights = shm.data,
                            .velocities = velocities};
        rc = start_weights(run, &first_epoch);
    }
    hw_optim_state optim = {0};
    if (rc == HW_OK) rc = optim_open(run, &optim);
    hw_measure measure;
    if (rc == HW_OK && config->measure) {
        run->view.weights = run->weights;  // the weights the run starts from, copied
        rc = measure_open(&measure, &run->view, config->workers, HW_WEIGHTS_F32);
        run->measure = job.measure = &measure;
    }
    if (rc == HW_OK && config->metrics_path) rc = hw_run_outputs_metrics_open(&run->metrics, config);
    if (rc == HW_OK) {
        atomic_store(job.samples, run->samples);
        run->started = hw_now();
        // The first row: the weights the run starts from, at 0 s.
        if (run->metrics.open) {
            double loss;
            int64_t correct;
            hw_sparse_evaluate(model, run->weights, test, &loss, &correct);
            if (run->measure) measure_capture(run->measure, NULL);
            rc = metrics_row(run, 0, first_epoch, NAN, loss, correct);
        }
        hw_metrics_commit(&run->metrics);  // training starts: the file is replaced now
    }
    if (rc == HW_OK) rc = epochs_run(run, &job, order, first_epoch, result);
    // Only a finished run's, as a dense run's: a stopped one may have made no update (nothing but NaN).
    if (rc == HW_OK && run->measure && !result->interrupted_by) measure_print(run, train);
    if (run && run->measure) measure_close(run->measure);
    if (locked) hogwild_update_lock_destroy(job.update.lock);
    if (run && run->optim) hw_optim_state_close(run->optim);
    if (run) {
        result->wall_seconds = hw_now() - run->started;
        // A metrics file that failed warned and ended its rows, not the run (hw/metrics.h).
        if (hw_metrics_close(&run->metrics) != HW_OK) fprintf(stderr, "hogwild: warning: %s\n", hw_error());
    }
    result->samples_per_second = result->train_seconds > 0 ? (double)result->samples_seen / result->train_seconds : 0;
    free(order);
    free(run);
    hw_shm_close(&shm);
    return rc;
}
