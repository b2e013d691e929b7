// hogwild: the asynchronous trainer (Recht et al., 2011) across worker processes.
//
// The parent maps one shared region holding a small control block and the flat weights, forks N
// workers, and then only watches: progress, epoch ends, evaluations, checkpoints. Each worker
// trains on its own shard of the data and writes its SGD step straight onto the shared weights,
// without a lock: the races between workers ARE the algorithm. Everything else that is shared
// (counters, flags) is a C11 atomic.
#include "hw/train.h"

#include "hw/ckpt.h"
#include "hw/err.h"
#include "hw/optim.h"
#include "hw/shm.h"
#include "hw/spawn.h"

#include <math.h>
#include <signal.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// What one worker tells the parent; a cache line each, so that workers do not slow each other.
typedef struct {
    alignas(64) atomic_llong samples;  // training samples this worker has processed in this run
    _Atomic double loss_sum;           // the sum of their training losses
    atomic_int epochs_done;            // epochs finished in this run
    atomic_llong peak_rss_kb;          // its memory at the end (see hw_memory)
    atomic_llong private_kb;
} worker_slot;

// The start of the shared region; the weights follow it.
typedef struct {
    atomic_int released_epoch;  // workers may start epoch e once released_epoch >= e
    atomic_int stop;            // the parent asks the workers to finish now
    worker_slot slots[];        // one per worker
} shared_control;

typedef struct {
    const hw_train_config *config;
    hw_run_inputs *in;
    shared_control *control;
    int first_epoch;
    int fail_rank;              // fault injection for the tests (HOGWILD_FAIL_WORKER), -1 off
    int fail_after_batches;
    int fail_by_signal;         // 1: the worker aborts instead of returning an error
} hogwild_job;

static void sleep_microseconds(long us) {
    struct timespec ts = {0, us * 1000L};
    nanosleep(&ts, NULL);
}

// ---- the worker: one process, one thread, one shard ----

static int hogwild_worker(int rank, void *arg) {
    hogwild_job *job = arg;
    const hw_train_config *config = job->config;
    const hw_dataset *train = &job->in->train;
    hw_model *model = &job->in->model;  // model->weights points into the shared region
    worker_slot *slot = &job->control->slots[rank];

    hw_workspace ws;
    if (hw_workspace_alloc(&ws, model, config->batch_size, config->seed * 1000003u + (uint64_t)rank) != HW_OK) {
        return HW_ERR;
    }
    hw_sgd opt;
    if (hw_sgd_init(&opt, model->n_weights, config->lr, config->momentum, config->weight_decay, config->nesterov) !=
        HW_OK) {
        return HW_ERR;
    }
    int64_t *shard = malloc(sizeof(int64_t) * (size_t)hw_sampler_shard_size(train->n, config->workers, 0));
    if (!shard) return hw_fail("worker %d: out of memory for its shard", rank);

    int64_t samples = 0;
    double loss_sum = 0;
    int batches = 0;
    for (int epoch = job->first_epoch; epoch < config->epochs; epoch++) {
        // Wait until the parent has taken its end-of-epoch snapshot of the weights.
        while (atomic_load(&job->control->released_epoch) < epoch) {
            if (atomic_load(&job->control->stop)) return HW_OK;
            sleep_microseconds(100);
        }
        int64_t count = hw_sampler_shard_size(train->n, config->workers, rank);
        hw_sampler_shard(shard, train->n, config->workers, rank, epoch, config->seed);
        hw_loader *loader;
        if (hw_loader_open(&loader, train, shard, count, config->batch_size, job->in->norm, config->prefetch) != HW_OK) {
            return HW_ERR;
        }
        const float *x;
        const uint8_t *y;
        int batch;
        while ((batch = hw_loader_next(loader, &x, &y)) > 0) {
            float loss = hw_model_forward(model, &ws, x, y, batch, 1);
            hw_model_backward(model, &ws, y, batch);
            // THE Hogwild update: straight onto the shared weights, no lock.
            hw_sgd_step(&opt, model, model->weights, ws.grads);

            samples += batch;
            loss_sum += (double)loss * batch;
            atomic_store_explicit(&slot->samples, samples, memory_order_relaxed);
            atomic_store_explicit(&slot->loss_sum, loss_sum, memory_order_relaxed);
            if (++batches == job->fail_after_batches && rank == job->fail_rank) {
                if (job->fail_by_signal) abort();
                hw_loader_close(loader);
                return hw_fail("injected failure after %d batches (HOGWILD_FAIL_WORKER)", batches);
            }
            if (atomic_load_explicit(&job->control->stop, memory_order_relaxed)) break;
        }
        hw_loader_close(loader);
        if (atomic_load(&job->control->stop)) break;
        atomic_store(&slot->epochs_done, epoch - job->first_epoch + 1);
    }
    hw_memory memory;
    hw_memory_read(&memory);
    atomic_store(&slot->peak_rss_kb, memory.peak_rss_kb);
    atomic_store(&slot->private_kb, memory.private_kb);
    free(shard);
    hw_sgd_free(&opt);
    hw_workspace_free(&ws);
    return HW_OK;
}

// The memory line of the summary: the parent's peak, and the largest worker's peak and private part.
static void report_memory(hw_train_log *log, const shared_control *control, int workers) {
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

// ---- the parent ----

// The shared region: the control block, then the weights on a cache-line boundary.
static size_t control_bytes(int workers) {
    size_t bytes = sizeof(shared_control) + sizeof(worker_slot) * (size_t)workers;
    return (bytes + 63) & ~(size_t)63;
}

static void sum_slots(const shared_control *control, int workers, int64_t *samples, double *loss_sum,
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

// HOGWILD_FAIL_WORKER=RANK:BATCHES[:abort] makes worker RANK fail after BATCHES batches: the
// tests use it to check that a failing worker ends the run with its message.
static void read_fault_injection(hogwild_job *job) {
    job->fail_rank = -1;
    const char *text = getenv("HOGWILD_FAIL_WORKER");
    if (!text) return;
    char mode[16] = "";
    if (sscanf(text, "%d:%d:%15s", &job->fail_rank, &job->fail_after_batches, mode) < 2) job->fail_rank = -1;
    job->fail_by_signal = strcmp(mode, "abort") == 0;
}

static int train_loop(const hw_train_config *config, hw_run_inputs *in, shared_control *control, hogwild_job *job,
                      hw_train_log *log, hw_train_result *result) {
    const int workers = config->workers;
    float *weights = in->model.weights;
    hw_spawn_ctx spawn;
    if (hw_spawn(&spawn, hogwild_worker, job, workers) != HW_OK) return HW_ERR;
    log->started = hw_now();  // timed from the first fork

    int epochs_handled = 0;   // epoch ends already evaluated, counted from first_epoch
    const int epochs_to_run = config->epochs - job->first_epoch;
    int64_t next_eval = config->eval_every;
    int64_t samples = 0;
    double loss_sum = 0, running_loss = NAN;
    int64_t loss_window_samples = 0;
    double loss_window_sum = 0;
    int status = HW_OK;

    for (;;) {
        hw_join_status joined = hw_join(&spawn, 0.01);
        int min_done;
        sum_slots(control, workers, &samples, &loss_sum, &min_done);
        if (samples - loss_window_samples >= 2000) {
            running_loss = (loss_sum - loss_window_sum) / (double)(samples - loss_window_samples);
            loss_window_samples = samples;
            loss_window_sum = loss_sum;
        }
        int epoch_now = job->first_epoch + epochs_handled + 1;
        hw_progress_update(&log->progress, epoch_now > config->epochs ? config->epochs : epoch_now, config->epochs,
                           samples, running_loss);

        if (joined == HW_JOIN_FAILED) {
            char text[1200];
            hw_spawn_describe_failure(&spawn, text, sizeof text);
            status = hw_fail("%s", text);
            break;
        }
        if (joined == HW_JOIN_INTERRUPTED) {
            result->interrupted_by = spawn.interrupt_signal;
            break;
        }

        if (min_done > epochs_handled) {
            // Every worker has finished this epoch and waits at the barrier (or has exited after
            // the last epoch): the weights are the end-of-epoch weights. Copy them, let the
            // workers go on, and evaluate the copy while they train.
            hw_train_log_snapshot(log, weights);
            epochs_handled++;
            if (epochs_handled == epochs_to_run) log->trained = hw_now();  // training is over
            atomic_store(&control->released_epoch, job->first_epoch + epochs_handled);
            if (hw_train_log_evaluate(log, job->first_epoch + epochs_handled, samples, loss_sum, 1) != HW_OK) {
                status = HW_ERR;
                break;
            }
            if (next_eval > 0) {
                while (next_eval <= samples) next_eval += config->eval_every;
            }
        } else if (next_eval > 0 && samples >= next_eval && samples < (int64_t)(epochs_handled + 1) * in->train.n) {
            // A mid-epoch point of the curve: a snapshot taken while the workers write (Hogwild).
            // Not once the epoch's last samples are in: the epoch-end row comes next.
            hw_train_log_snapshot(log, weights);
            if (hw_train_log_evaluate(log, job->first_epoch + epochs_handled, samples, loss_sum, 0) != HW_OK) {
                status = HW_ERR;
                break;
            }
            while (next_eval <= samples) next_eval += config->eval_every;
        }
        if (joined == HW_JOIN_DONE && epochs_handled >= epochs_to_run) break;
    }

    if (status != HW_OK || result->interrupted_by) {
        atomic_store(&control->stop, 1);
        hw_spawn_stop(&spawn);
    }
    hw_spawn_free(&spawn);
    if (result->interrupted_by && status == HW_OK) {
        // Ctrl-C: the workers are stopped, so the shared weights are still; keep them. Workers
        // that had all finished an epoch were waiting at the barrier with its end weights, before
        // this loop handled it: that epoch is done, and the checkpoint says so.
        int min_done;
        sum_slots(control, workers, &samples, &loss_sum, &min_done);
        int epochs_done = min_done > epochs_handled ? min_done : epochs_handled;
        hw_progress_message(&log->progress, "interrupted by %s after %lld samples\n",
                            result->interrupted_by == SIGINT ? "SIGINT" : "SIGTERM", (long long)samples);
        if (config->save_path) {
            if (hw_train_log_save(log, weights, job->first_epoch + epochs_done, samples) != HW_OK) return HW_ERR;
            hw_progress_message(&log->progress, "saved the current weights to %s\n", config->save_path);
        }
    }
    if (status == HW_OK && !result->interrupted_by) {
        hw_train_log_finish(log, samples, result);
        report_memory(log, control, workers);
    }
    return status;
}

int hw_train_hogwild(const hw_train_config *config, hw_run_inputs *in, hw_train_result *result) {
    if (config->device.type == HW_DEVICE_CUDA) return hw_train_hogwild_cuda(config, in, result);
    memset(result, 0, sizeof *result);
    hw_model *model = &in->model;

    // The one shared mapping: control block + weights, mapped before fork so that every worker
    // sees it at the same address.
    size_t head = control_bytes(config->workers);
    hw_shm shm;
    if (hw_shm_open(&shm, head + sizeof(float) * model->n_weights) != HW_OK) return HW_ERR;
    shared_control *control = shm.data;
    hw_model_bind_weights(model, (float *)((char *)shm.data + head));

    hogwild_job job = {.config = config, .in = in, .control = control};
    read_fault_injection(&job);
    int64_t samples_before = 0;
    if (config->resume_path) {
        hw_ckpt_meta meta;
        if (hw_ckpt_load(config->resume_path, model, model->weights, &meta) != HW_OK) {
            hw_shm_close(&shm);
            return HW_ERR;
        }
        job.first_epoch = meta.epoch;
        samples_before = meta.samples_seen;
    } else {
        hw_model_init_weights(model, config->seed);
    }
    atomic_store(&control->released_epoch, job.first_epoch);

    hw_train_log log;
    int status = hw_train_log_open(&log, config, in, job.first_epoch, samples_before);
    if (status == HW_OK && job.first_epoch >= config->epochs) {
        status = hw_fail("the checkpoint %s has already trained %d epoch(s); ask for more with --epochs",
                         config->resume_path, job.first_epoch);
    }
    if (status == HW_OK && config->metrics_path) {
        // The first point of the curve: the weights before this run's training.
        hw_train_log_snapshot(&log, model->weights);
        status = hw_train_log_evaluate(&log, job.first_epoch, 0, 0, 0);
    }
    if (status == HW_OK) status = train_loop(config, in, control, &job, &log, result);
    hw_train_log_close(&log);
    hw_model_bind_weights(model, NULL);
    hw_shm_close(&shm);
    return status;
}
