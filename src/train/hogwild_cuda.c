// hogwild_cuda: Hogwild on one GPU (--device cuda[:N] --workers N).
//
// The weights live in device memory, shared by every worker process through one CUDA IPC handle.
// Each worker is its own process with its own CUDA context, streams and GPU model runner
// (hw_cuda_runner), and its SGD step writes straight onto the shared device weights, without a
// lock, as the CPU workers of hogwild.c write onto shared host memory.
//
// A process that has initialised CUDA cannot hand CUDA to a child it forks, so the order is:
//   1. before fork, no CUDA call at all: the parent loads the model and the data, initialises (or
//      --resume loads) the weights in host memory and maps the shared control block (hw_shm):
//      per-worker progress atomics and the handle channel {state, handle, error text};
//   2. it forks the workers, and only then selects the device, allocates the weights, uploads
//      them, exports the IPC handle into the channel and marks it READY; when any of that fails
//      (no GPU, a bad index, too little memory, a build without CUDA) it marks it FAILED with its
//      message, the workers fail with that message, and the parent reports it;
//   3. each worker waits for READY, opens the handle, builds its runner on the shared weights and
//      trains on its shard epoch after epoch, with the CPU trainer's sampler, epoch barrier and
//      progress slots; it closes the handle before it returns;
//   4. the parent watches as the CPU parent does; at an evaluation point it copies the device
//      weights to host memory (pinned, on its own stream) and evaluates them on the CPU with
//      hw_train_log: metrics rows, epoch results and checkpoints are the CPU trainer's;
//   5. it frees the device memory only after every worker has been reaped, however the run ends:
//      a worker that returns has closed its handle, and one that was killed (a failure elsewhere,
//      Ctrl-C) lost its mapping with its process, so no process maps the weights any more (CUDA
//      leaves a free before the close undefined).
//
// Several processes on one GPU time-slice it unless the MPS daemon runs (nvidia-cuda-mps-control
// -d), which lets their kernels run at the same time.
#include "hw/train.h"

#include "hw/ckpt.h"
#include "hw/cuda.h"
#include "hw/err.h"
#include "hw/shm.h"
#include "hw/spawn.h"
#include "train_cuda.h"

#include <math.h>
#include <signal.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// What one worker tells the parent, as in hogwild.c: a cache line each.
typedef struct {
    alignas(64) atomic_llong samples;  // training samples this worker has processed in this run
    _Atomic double loss_sum;           // the sum of their training losses
    atomic_int epochs_done;            // epochs finished in this run, their steps landed on the GPU
} worker_slot;

// The handle channel: the parent sets `state` once, after `handle` or `error` is written.
enum { HANDLE_WAIT = 0, HANDLE_READY = 1, HANDLE_FAILED = 2 };

typedef struct {
    atomic_int released_epoch;  // workers may start epoch e once released_epoch >= e
    atomic_int stop;            // the parent asks the workers to finish now
    atomic_int handle_state;    // HANDLE_WAIT, then HANDLE_READY or HANDLE_FAILED
    hw_cuda_ipc_handle handle;  // the device weights, valid once READY
    char error[1024];           // the parent's message, once FAILED
    worker_slot slots[];        // one per worker
} gpu_control;

typedef struct {
    const hw_train_config *config;
    hw_run_inputs *in;
    gpu_control *control;
    int first_epoch;
    int fail_rank;              // fault injection for the tests (HOGWILD_FAIL_WORKER), -1 off
    int fail_after_batches;
    int fail_by_signal;         // 1: the worker aborts instead of returning an error
} gpu_job;

static void sleep_microseconds(long us) {
    struct timespec ts = {0, us * 1000L};
    nanosleep(&ts, NULL);
}

// ---- the worker: one process, one CUDA context, one shard ----

// Waits for the parent's device set-up. HW_OK with *go = 1 once the handle is READY; HW_OK with
// *go = 0 when the parent asks to stop first; HW_ERR with the parent's message when it FAILED.
static int wait_for_weights(const gpu_control *control, int *go) {
    *go = 0;
    for (;;) {
        int state = atomic_load(&control->handle_state);
        if (state == HANDLE_READY) {
            *go = 1;
            return HW_OK;
        }
        if (state == HANDLE_FAILED) return hw_fail("the parent could not set up the GPU: %s", control->error);
        if (atomic_load(&control->stop)) return HW_OK;
        sleep_microseconds(200);
    }
}

// Gathers the batch at shard[*pos ...] and queues it on the runner; the number of samples, 0 when
// the shard is used up, -1 on error.
static int queue_batch(hw_cuda_runner *runner, const hw_dataset *ds, const int64_t *shard, int64_t count,
                       int64_t *pos, int batch_size, uint8_t *x, uint8_t *y) {
    if (*pos >= count) return 0;
    int batch = (int)(count - *pos < batch_size ? count - *pos : batch_size);
    hw_batch_gather_u8(ds, shard + *pos, batch, x, y);
    if (hw_cuda_runner_upload_u8(runner, x, y, batch) != HW_OK) return -1;
    *pos += batch;
    return batch;
}

// The epochs of one worker on the shared device weights.
static int train_shard(int rank, gpu_job *job, hw_cuda_runner *runner, int64_t *shard, uint8_t *x, uint8_t *y) {
    const hw_train_config *config = job->config;
    const hw_dataset *train = &job->in->train;
    gpu_control *control = job->control;
    worker_slot *slot = &control->slots[rank];
    int64_t samples = 0;
    double loss_sum = 0;
    int batches = 0;
    for (int epoch = job->first_epoch; epoch < config->epochs; epoch++) {
        // Wait until the parent has taken its end-of-epoch copy of the weights.
        while (atomic_load(&control->released_epoch) < epoch) {
            if (atomic_load(&control->stop)) return HW_OK;
            sleep_microseconds(100);
        }
        int64_t count = hw_sampler_shard_size(train->n, config->workers, rank);
        if (hw_sampler_shard(shard, train->n, config->workers, rank, epoch, config->seed) != HW_OK) return HW_ERR;
        int64_t pos = 0;
        int batch = queue_batch(runner, train, shard, count, &pos, config->batch_size, x, y);
        while (batch > 0) {
            // The next batch's copy to the GPU runs on the copy stream while this one computes.
            int next = queue_batch(runner, train, shard, count, &pos, config->batch_size, x, y);
            if (next < 0) return HW_ERR;
            float loss = 0;
            if (hw_cuda_runner_forward(runner, 1, &loss) != HW_OK || hw_cuda_runner_backward(runner) != HW_OK ||
                // THE Hogwild update: straight onto the shared device weights, no lock.
                hw_cuda_runner_sgd_step(runner, config->lr, config->momentum, config->weight_decay,
                                        config->nesterov) != HW_OK) {
                return HW_ERR;
            }
            samples += batch;
            loss_sum += (double)loss * batch;
            atomic_store_explicit(&slot->samples, samples, memory_order_relaxed);
            atomic_store_explicit(&slot->loss_sum, loss_sum, memory_order_relaxed);
            if (++batches == job->fail_after_batches && rank == job->fail_rank) {
                if (job->fail_by_signal) abort();
                return hw_fail("injected failure after %d batches (HOGWILD_FAIL_WORKER)", batches);
            }
            if (atomic_load_explicit(&control->stop, memory_order_relaxed)) return HW_OK;
            batch = next;
        }
        if (batch < 0) return HW_ERR;
        // The epoch's last step must have landed in the shared weights before the parent copies them.
        if (hw_cuda_runner_sync(runner) != HW_OK) return HW_ERR;
        atomic_store(&slot->epochs_done, epoch - job->first_epoch + 1);
    }
    return HW_OK;
}

static int gpu_worker(int rank, void *arg) {
    gpu_job *job = arg;
    const hw_train_config *config = job->config;
    const hw_dataset *train = &job->in->train;
    int go = 0;
    if (wait_for_weights(job->control, &go) != HW_OK) return HW_ERR;
    if (!go) return HW_OK;

    // This process's first CUDA call: its own context on the device.
    float *weights = NULL;
    if (hw_cuda_select(config->device) != HW_OK ||
        hw_cuda_ipc_open(&job->control->handle, (void **)&weights) != HW_OK) {
        return hw_error_prefix("opening the shared device weights");
    }
    const size_t sample = (size_t)train->channels * (size_t)train->height * (size_t)train->width;
    int64_t *shard = malloc(sizeof(int64_t) * (size_t)(hw_sampler_shard_size(train->n, config->workers, 0) + 1));
    uint8_t *x = malloc(sample * (size_t)config->batch_size);
    uint8_t *y = malloc((size_t)config->batch_size);
    hw_cuda_runner *runner = NULL;
    hw_cuda_runner_config rc = {
        .device = config->device,
        .max_batch = config->batch_size,
        .weights_dev = weights,
        .mean = job->in->norm.mean,
        .std = job->in->norm.std,
        .seed = config->seed * 1000003u + (uint64_t)rank,  // each worker its own dropout masks
    };
    int status = shard && x && y ? HW_OK : hw_fail("out of memory for the shard and a batch");
    if (status == HW_OK) status = hw_cuda_runner_create(&runner, &job->in->model, &rc);
    if (status == HW_OK) status = train_shard(rank, job, runner, shard, x, y);
    char message[1024] = "";
    if (status != HW_OK) snprintf(message, sizeof message, "%s", hw_error());
    // The runner waits for its streams; then nothing of this process uses the weights any more.
    hw_cuda_runner_free(runner);
    int closed = hw_cuda_ipc_close(weights);
    free(shard);
    free(x);
    free(y);
    if (status != HW_OK) return hw_fail("%s", message);  // the first failure, not the close's
    return closed;
}

// ---- the parent ----

static size_t control_bytes(int workers) {
    return sizeof(gpu_control) + sizeof(worker_slot) * (size_t)workers;
}

static void sum_slots(const gpu_control *control, int workers, int64_t *samples, double *loss_sum,
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

// HOGWILD_FAIL_WORKER=RANK:BATCHES[:abort], as in hogwild.c.
static void read_fault_injection(gpu_job *job) {
    job->fail_rank = -1;
    const char *text = getenv("HOGWILD_FAIL_WORKER");
    if (!text) return;
    char mode[16] = "";
    if (sscanf(text, "%d:%d:%15s", &job->fail_rank, &job->fail_after_batches, mode) < 2) job->fail_rank = -1;
    job->fail_by_signal = strcmp(mode, "abort") == 0;
}

// The parent's side of the GPU: the shared weights, a stream and a pinned buffer to copy them out.
typedef struct {
    float *weights;       // device, exported to the workers
    float *host;          // pinned, n_weights floats
    hw_cuda_stream stream;
    size_t bytes;
} gpu_parent;

// Step 2 above: after the fork. On failure the channel says FAILED with the message.
static int parent_device_open(gpu_parent *dev, const hw_train_config *config, const hw_model *model,
                              gpu_control *control) {
    char name[32];
    hw_device_format(config->device, name, sizeof name);
    dev->bytes = sizeof(float) * model->n_weights;
    int status = hw_cuda_select(config->device);
    if (status == HW_OK && hw_cuda_check_free(dev->bytes) != HW_OK) status = hw_error_prefix("the shared weights");
    if (status == HW_OK) status = hw_cuda_malloc((void **)&dev->weights, dev->bytes);
    if (status == HW_OK) status = hw_cuda_stream_create(&dev->stream);
    if (status == HW_OK) status = hw_cuda_host_alloc((void **)&dev->host, dev->bytes);
    if (status == HW_OK) {
        memcpy(dev->host, model->weights, dev->bytes);  // initialised or loaded before the fork
        status = hw_cuda_memcpy_h2d(dev->weights, dev->host, dev->bytes, dev->stream);
    }
    if (status == HW_OK) status = hw_cuda_stream_sync(dev->stream);
    if (status == HW_OK) status = hw_cuda_ipc_export(dev->weights, &control->handle);
    if (status != HW_OK) {
        hw_error_prefix("GPU Hogwild on %s", name);
        snprintf(control->error, sizeof control->error, "%s", hw_error());
        atomic_store(&control->handle_state, HANDLE_FAILED);
        return HW_ERR;
    }
    atomic_store(&control->handle_state, HANDLE_READY);
    return HW_OK;
}

// Only once no worker can map the weights any more (every worker reaped).
static void parent_device_close(gpu_parent *dev) {
    hw_cuda_stream_destroy(dev->stream);
    hw_cuda_host_free(dev->host);
    hw_cuda_free(dev->weights);
    memset(dev, 0, sizeof *dev);
}

// The device weights into dev->host (waits): while workers write them, a Hogwild snapshot.
static int parent_device_copy(gpu_parent *dev) {
    if (hw_cuda_memcpy_d2h(dev->host, dev->weights, dev->bytes, dev->stream) != HW_OK) return HW_ERR;
    return hw_cuda_stream_sync(dev->stream);
}

static int snapshot(gpu_parent *dev, hw_train_log *log) {
    if (parent_device_copy(dev) != HW_OK) return hw_error_prefix("copying the device weights for an evaluation");
    hw_train_log_snapshot(log, dev->host);
    return HW_OK;
}

// The device set-up failed: the workers see FAILED and leave with the parent's message; wait for
// them (stopping any that lingers) and report the parent's own message.
static int fail_setup(hw_spawn_ctx *spawn) {
    char message[1200];
    snprintf(message, sizeof message, "%s", hw_error());
    hw_join(spawn, 10.0);
    hw_spawn_stop(spawn);
    return hw_fail("%s", message);
}

// hogwild.c's train_loop, with the device set up after the fork and the weights copied from the
// device at every evaluation point.
static int train_loop(const hw_train_config *config, hw_run_inputs *in, gpu_control *control, gpu_job *job,
                      hw_train_log *log, hw_train_result *result) {
    const int workers = config->workers;
    hw_spawn_ctx spawn;
    if (hw_spawn(&spawn, gpu_worker, job, workers) != HW_OK) return HW_ERR;
    log->started = hw_now();  // timed from the first fork, as on the CPU: the set-up below counts

    // From here on this process may use CUDA.
    gpu_parent dev = {0};
    if (parent_device_open(&dev, config, &in->model, control) != HW_OK) {
        int status = fail_setup(&spawn);
        hw_spawn_free(&spawn);
        parent_device_close(&dev);
        return status;
    }

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
            // Every worker has finished this epoch, synchronised its stream and waits at the
            // barrier: the device weights are the end-of-epoch weights. Copy them, release the
            // workers, evaluate the copy while they train.
            if (snapshot(&dev, log) != HW_OK) {
                status = HW_ERR;
                break;
            }
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
        } else if (next_eval > 0 && samples >= next_eval) {
            // A mid-epoch point of the curve: a copy taken while the workers write (Hogwild).
            if (snapshot(&dev, log) != HW_OK ||
                hw_train_log_evaluate(log, job->first_epoch + epochs_handled, samples, loss_sum, 0) != HW_OK) {
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
    // Every worker is reaped: the device weights are no longer mapped anywhere else, and still.
    if (result->interrupted_by && status == HW_OK) {
        // Ctrl-C: keep the current weights.
        hw_progress_message(&log->progress, "interrupted by %s after %lld samples\n",
                            result->interrupted_by == SIGINT ? "SIGINT" : "SIGTERM", (long long)samples);
        if (config->save_path) {
            status = parent_device_copy(&dev);
            if (status == HW_OK) status = hw_train_log_save(log, dev.host, job->first_epoch + epochs_handled, samples);
            if (status == HW_OK) hw_progress_message(&log->progress, "saved the current weights to %s\n", config->save_path);
        }
    }
    parent_device_close(&dev);
    if (status == HW_OK && !result->interrupted_by) hw_train_log_finish(log, samples, result);
    return status;
}

int hw_train_hogwild_cuda(const hw_train_config *config, hw_run_inputs *in, hw_train_result *result) {
    memset(result, 0, sizeof *result);
    char name[32];
    hw_device_format(config->device, name, sizeof name);
    char what[64];
    snprintf(what, sizeof what, "--device %s", name);
    // No CUDA call may come before the fork: this one only asks what was compiled in.
    if (hw_train_cuda_check_build(what) != HW_OK) return HW_ERR;

    // The host copy of the weights: initialised (or loaded) here, before the fork, uploaded by the
    // parent after it; the workers never read it.
    hw_model *model = &in->model;
    if (!model->weights && hw_model_alloc_weights(model) != HW_OK) return HW_ERR;
    gpu_job job = {.config = config, .in = in};
    read_fault_injection(&job);
    int64_t samples_before = 0;
    if (config->resume_path) {
        hw_ckpt_meta meta;
        if (hw_ckpt_load(config->resume_path, model, model->weights, &meta) != HW_OK) return HW_ERR;
        job.first_epoch = meta.epoch;
        samples_before = meta.samples_seen;
    } else {
        hw_model_init_weights(model, config->seed);
    }

    hw_shm shm;
    if (hw_shm_open(&shm, control_bytes(config->workers)) != HW_OK) return HW_ERR;
    gpu_control *control = shm.data;
    job.control = control;
    atomic_store(&control->released_epoch, job.first_epoch);
    atomic_store(&control->handle_state, HANDLE_WAIT);

    hw_train_log log;
    int status = hw_train_log_open(&log, config, in, job.first_epoch, samples_before);
    if (status == HW_OK && job.first_epoch >= config->epochs) {
        status = hw_fail("the checkpoint %s has already trained %d epoch(s); ask for more with --epochs",
                         config->resume_path, job.first_epoch);
    }
    if (status == HW_OK && config->metrics_path) {
        // The first point of the curve: the weights before this run's training (still on the host).
        hw_train_log_snapshot(&log, model->weights);
        status = hw_train_log_evaluate(&log, job.first_epoch, 0, 0, 0);
    }
    if (status == HW_OK) status = train_loop(config, in, control, &job, &log, result);
    hw_train_log_close(&log);
    hw_shm_close(&shm);
    return status;
}
