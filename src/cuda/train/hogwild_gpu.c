// hogwild_gpu: Hogwild on GPUs: on one (--device cuda[:N] --workers N), on several (--gpus 0,1
// --workers N: a copy of the weights per GPU, worker r on copy r % K, the copies coupled by the
// parent, gpu_copies.c), and on GPU ranks under mpirun (each rank one GPU, B + its local rank,
// coupled to the other ranks by src/comm/mpi/hogwild_coupling.c through a host mirror).
//
// The weights live in device memory, shared by every worker process of a copy through one CUDA IPC handle.
// Each worker is its own process with its own CUDA context, streams and GPU model runner
// (hw_cuda_runner), and its SGD step writes straight onto the shared device weights, without a
// lock, as the CPU workers of hogwild.c write onto shared host memory.
//
// A process that has initialised CUDA cannot hand CUDA to a child it forks, so the order is:
//   1. before fork, no CUDA call at all: with the model and the data loaded already (by the
//      command line, cli_train_run in src/cli/train_command.c), the parent initialises (or --resume loads)
//      the weights in host memory and maps the shared control block (hw_shm):
//      per-worker progress atomics and the handle channel {state, handle, error text};
//   2. it forks the workers, and only then selects the device, allocates the weights, uploads
//      them, exports the IPC handle into the channel and marks it READY; when any of that fails
//      (no GPU, a bad index, too little memory, a build without CUDA) it marks it FAILED with its
//      message, the workers fail with that message, and the parent reports it;
//   3. each worker waits for READY, opens the handle, builds its runner on the shared weights and
//      trains on its shard epoch after epoch, with the CPU trainer's sampler, epoch barrier and
//      progress slots; it closes the handle before it returns;
//   4. the parent watches with the CPU trainer's loop (hogwild_watch.c); at an evaluation point
//      it copies the device weights to host memory (pinned, on its own stream) and evaluates them
//      on the CPU with hw_run_outputs: metrics rows, epoch results and checkpoints are the CPU's;
//   5. it frees the device memory only after every worker has been reaped, however the run ends:
//      a worker that returns has closed its handle, and one that was killed (a failure elsewhere,
//      Ctrl-C) lost its mapping with its process, so no process maps the weights any more (CUDA
//      leaves a free before the close undefined).
//
// Several processes on one GPU time-slice it unless the MPS daemon runs (nvidia-cuda-mps-control
// -d), which lets their kernels run at the same time.
#include "hw/train.h"
#include "hw/gpu_train.h"
#include "hw/run_outputs.h"

#include "train/fault.h"
#include "train/hogwild_protocol.h"
#include "train/hogwild_watch.h"
#include "hw/comm.h"
#include "cuda/device.h"
#include "cuda/runner.h"
#include "hw/err.h"
#include "hw/shm.h"
#include "hw/signals.h"
#include "hw/spawn.h"
#include "gpu_batch.h"
#include "gpu_copies.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// The handle channel, in shared memory after the control block: the parent sets `state` once,
// after `handle` or `error` is written.
enum { HANDLE_WAIT = 0, HANDLE_READY = 1, HANDLE_FAILED = 2 };

// A GPU worker reads its running loss (a wait for its stream) once every this many batches.
enum { GPU_REPORT_EVERY = 8 };

typedef struct {
    atomic_int state;                              // HANDLE_WAIT, then HANDLE_READY or HANDLE_FAILED
    hw_cuda_ipc_handle handle[HW_GPU_COPIES_MAX];  // copy c of the device weights, valid once READY
    char error[1024];                              // the parent's message, once FAILED
} handle_channel;

typedef struct {
    const hw_train_config *config;
    hw_train_inputs *in;
    hogwild_control *control;
    handle_channel *channel;
    int first_epoch;
    fault_plan fault;
    gpu_copies_plan copies;  // the copies of the weights and their GPUs (one: --device cuda:N)
    int *worker_gpu;         // worker r trains on copy r % copies, on cuda:worker_gpu[r]
} gpu_job;

static void sleep_microseconds(long us) {
    struct timespec ts = {0, us * 1000L};
    nanosleep(&ts, NULL);
}

// ---- the worker: one process, one CUDA context, one shard ----

// Waits for the parent's device set-up. HW_OK with *go = 1 once the handle is READY; HW_OK with
// *go = 0 when the parent asks to stop first; HW_ERR with the parent's message when it FAILED.
static int wait_for_weights(const gpu_job *job, int *go) {
    *go = 0;
    for (;;) {
        int state = atomic_load(&job->channel->state);
        if (state == HANDLE_READY) {
            *go = 1;
            return HW_OK;
        }
        if (state == HANDLE_FAILED) return hw_fail("the parent could not set up the GPU: %s", job->channel->error);
        if (atomic_load(&job->control->stop)) return HW_OK;
        sleep_microseconds(200);
    }
}

// Whether the workers' steps are CUDA graphs: yes, unless HOGWILD_CUDA_GRAPHS=0.
static int graphs_wanted(void) {
    const char *value = getenv("HOGWILD_CUDA_GRAPHS");
    return !(value && strcmp(value, "0") == 0);
}

// Gathers the batch at shard[*pos ...] and queues it on the runner; the number of samples, 0 when
// the shard is used up, -1 on error.
static int queue_batch(hw_cuda_runner *runner, const hw_dataset *ds, const int64_t *shard, int64_t count, int64_t *pos,
                       int batch_size, uint8_t *x, uint8_t *y) {
    if (*pos >= count) return 0;
    int batch = (int)(count - *pos < batch_size ? count - *pos : batch_size);
    batch_gather_u8(ds, shard + *pos, batch, x, y);
    if (hw_cuda_runner_upload_u8(runner, x, y, batch) != HW_OK) return -1;
    *pos += batch;
    return batch;
}

// The epochs of one worker on the shared device weights.
static int train_shard(int rank, gpu_job *job, hw_cuda_runner *runner, int64_t *shard, uint8_t *x, uint8_t *y) {
    const hw_train_config *config = job->config;
    const hw_dataset *train = &job->in->train;
    hogwild_control *control = job->control;
    worker_slot *slot = &control->slots[rank];
    int64_t samples = 0, reported_samples = 0;
    double reported_sum = 0, last_finite_loss = NAN;
    int batches = 0;
    for (int epoch = job->first_epoch; epoch < config->epochs; epoch++) {
        if (!hw_hogwild_wait_for_epoch(control, epoch)) return HW_OK;
        int64_t count;
        if (hw_hogwild_shard(config, train->n, rank, epoch, shard, &count) != HW_OK) return HW_ERR;
        int64_t pos = 0;
        int batch = queue_batch(runner, train, shard, count, &pos, config->batch_size, x, y);
        while (batch > 0) {
            // The next batch's copy to the GPU runs on the copy stream while this one computes.
            int next = queue_batch(runner, train, shard, count, &pos, config->batch_size, x, y);
            if (next < 0) return HW_ERR;
            // Forward, backward and THE Hogwild update: straight onto the shared device weights, no lock.
            float lr = hw_hogwild_step_lr(control, config, train->n, batch);
            if (hw_cuda_runner_train_step(runner, lr, config->momentum, config->weight_decay, config->nesterov) !=
                HW_OK) {
                return HW_ERR;
            }
            samples += batch;
            batches++;
            // Reading the loss waits for the GPU, so the progress is reported every few batches
            // and at the epoch's end, while the GPU keeps the queued steps running in between.
            if (batches % GPU_REPORT_EVERY == 0 || next == 0) {
                double loss_sum = 0;
                if (hw_cuda_runner_train_loss_sum(runner, &loss_sum) != HW_OK) return HW_ERR;
                // The mean loss of the batches since the last report: the one the rule judges.
                double window = 0;
                if (samples > reported_samples) {
                    window = (loss_sum - reported_sum) / (double)(samples - reported_samples);
                }
                if (!isfinite(loss_sum) || hw_loss_diverged(window)) {
                    // Diverged within these batches: the parent ends the run naming this worker.
                    // Their samples were trained (their steps are in the weights): they count.
                    hw_hogwild_report_progress(slot, samples, reported_sum);
                    hw_hogwild_report_diverged(slot, epoch, isfinite(loss_sum) ? window : loss_sum, last_finite_loss);
                    return hw_cuda_runner_sync(runner);
                }
                if (samples > reported_samples) last_finite_loss = window;
                reported_samples = samples;
                reported_sum = loss_sum;
                hw_hogwild_report_progress(slot, samples, loss_sum);
            }
            if (hw_fault_check(&job->fault, rank, batches) != HW_OK) return HW_ERR;
            if (hw_hogwild_stopping(control)) return HW_OK;
            batch = next;
        }
        if (batch < 0) return HW_ERR;
        // The epoch's last step must have landed in the shared weights before the parent copies them.
        if (hw_cuda_runner_sync(runner) != HW_OK) return HW_ERR;
        hw_hogwild_report_epoch(slot, epoch - job->first_epoch + 1);
    }
    return HW_OK;
}

static int gpu_worker(int rank, void *arg) {
    gpu_job *job = arg;
    const hw_train_config *config = job->config;
    const hw_dataset *train = &job->in->train;
    int go = 0;
    if (wait_for_weights(job, &go) != HW_OK) return HW_ERR;
    if (!go) return HW_OK;

    // This process's first CUDA call: its own context on the device of its copy of the weights.
    const int copy = rank % job->copies.copies;
    const hw_device device = {HW_DEVICE_CUDA, job->worker_gpu[rank]};
    float *weights = NULL;
    if (hw_cuda_select(device) != HW_OK || hw_cuda_ipc_open(&job->channel->handle[copy], (void **)&weights) != HW_OK) {
        return hw_error_prefix("opening the shared device weights");
    }
    const size_t sample = (size_t)train->channels * (size_t)train->height * (size_t)train->width;
    int64_t *shard = hw_hogwild_shard_alloc(config, train->n);
    uint8_t *x = malloc(sample * (size_t)config->batch_size);
    uint8_t *y = malloc((size_t)config->batch_size);
    hw_cuda_runner *runner = NULL;
    hw_cuda_runner_config rc = {
        .device = device,
        .max_batch = config->batch_size,
        .weights_dev = weights,
        .mean = job->in->norm.mean,
        .std = job->in->norm.std,
        .seed = hw_hogwild_worker_seed(config, rank),
        // Each step one CUDA graph launch (runner.cu): up to 3x the steps of a lone worker on an
        // H100, even with four (bench/RESULTS.md, "GPU"). HOGWILD_CUDA_GRAPHS=0 launches kernel by kernel.
        .graph = graphs_wanted(),
    };
    int status = shard && x && y ? HW_OK : hw_fail("out of memory for the shard and a batch");
    if (status == HW_OK) status = hw_cuda_runner_create(&runner, &job->in->model, &rc);
    if (status == HW_OK) status = train_shard(rank, job, runner, shard, x, y);
    // Asked for by name, graphs that could not be had are worth a word; by default they are not.
    const char *asked = getenv("HOGWILD_CUDA_GRAPHS");
    if (status == HW_OK && rank == 0 && asked && strcmp(asked, "1") == 0 && hw_cuda_runner_graph_off(runner)) {
        fprintf(stderr, "note: HOGWILD_CUDA_GRAPHS=1, but the steps ran launch by launch: %s\n",
                hw_cuda_runner_graph_off(runner));
    }
    char message[1024] = "";
    if (status != HW_OK) snprintf(message, sizeof message, "%s", hw_error());
    // The runner waits for its streams; then nothing of this process uses the weights any more.
    hw_cuda_runner_free(runner);
    int closed = hw_cuda_ipc_close(weights);
    hw_hogwild_report_memory(&job->control->slots[rank]);
    free(shard);
    free(x);
    free(y);
    if (status != HW_OK) return hw_fail("%s", message);  // the first failure, not the close's
    return closed;
}

// ---- the device set-up ----

// Step 2 above: after the fork, the copies of the weights (gpu_copies.c), their handles exported.
// On failure the channel says FAILED with the message.
static int parent_device_open(gpu_copies *copies, const gpu_job *job, const hw_model *model) {
    int status = gpu_copies_open(copies, &job->copies, model->weights, model->n_weights);
    for (int c = 0; status == HW_OK && c < copies->copies; c++) {
        status = hw_cuda_select((hw_device){HW_DEVICE_CUDA, copies->devices[c]});
        if (status == HW_OK) status = hw_cuda_ipc_export(copies->live[c], &job->channel->handle[c]);
    }
    if (status != HW_OK) {
        char name[160] = "";
        size_t used = 0;
        for (int c = 0; c < job->copies.copies && used < sizeof name; c++) {
            used +=
                (size_t)snprintf(name + used, sizeof name - used, "%scuda:%d", c ? "+" : "", job->copies.devices[c]);
        }
        hw_error_prefix("GPU Hogwild on %s", name);
        snprintf(job->channel->error, sizeof job->channel->error, "%s", hw_error());
        atomic_store(&job->channel->state, HANDLE_FAILED);
        return HW_ERR;
    }
    atomic_store(&job->channel->state, HANDLE_READY);
    return HW_OK;
}

// ---- hogwild_weights: the copies of the weights on the GPUs (gpu_copies.c) ----

// The device weights on one GPU; on several, the rounds' weights that the copies agree on
// (gpu_copies_snapshot), which every copy is at an epoch end.
static int snapshot_device_weights(void *ctx, hw_run_outputs *outputs) {
    gpu_copies *copies = ctx;
    if (gpu_copies_snapshot(copies) != HW_OK) return hw_error_prefix("copying the device weights for an evaluation");
    hw_run_outputs_snapshot(outputs, copies->host[0]);
    return HW_OK;
}

static int round_copies(void *ctx, int settle, int64_t samples) { return gpu_copies_poll(ctx, settle, samples); }
static double wait_copies(void *ctx) { return gpu_copies_wait(ctx); }
static int pull_mirror(void *ctx) { return gpu_copies_pull(ctx); }
static int push_mirror(void *ctx, int settled) { return gpu_copies_push(ctx, settled); }
static void report_copies(void *ctx, char *text, size_t cap) { gpu_copies_report(ctx, text, cap); }

// Where the parent's loop finds the weights: `copies` on their GPUs, with rounds between them
// where there are several, and the host mirror of the device weights where the ranks couple them.
static hogwild_weights device_weights(gpu_copies *copies, int coupled) {
    const int several = copies->copies > 1;
    return (hogwild_weights){.ctx = copies,
                             .snapshot = snapshot_device_weights,
                             .copies_round = several ? round_copies : NULL,
                             .copies_wait = several ? wait_copies : NULL,
                             .mirror_pull = coupled ? pull_mirror : NULL,
                             .mirror_push = coupled ? push_mirror : NULL,
                             .report = several ? report_copies : NULL};
}

// ---- the parent ----

// The device set-up failed: the workers see FAILED and leave with the parent's message; wait for
// them (stopping any that lingers) and report the parent's own message.
static int fail_setup(hw_spawn_ctx *spawn) {
    char message[1200];
    snprintf(message, sizeof message, "%s", hw_error());
    hw_join(spawn, 10.0);
    hw_spawn_stop(spawn);
    return hw_fail("%s", message);
}

// The parent's loop over the copies on the GPUs, coupled to the other ranks by `couple` (GPU
// ranks) or not (NULL).
static int watch_workers(const hw_train_config *config, hw_train_inputs *in, gpu_job *job, gpu_copies *copies,
                         hw_couple *couple, hw_spawn_ctx *spawn, hw_run_outputs *outputs, hw_train_result *result) {
    hogwild_watch watch = {.config = config,
                           .control = job->control,
                           .n_train = in->train.n,
                           .first_epoch = job->first_epoch,
                           .weights = device_weights(copies, couple != NULL),
                           .couple = couple,
                           // Named where the GPU is not the one --device names.
                           .worker_gpu = config->n_gpus > 0 || config->world.size > 1 ? job->worker_gpu : NULL};
    return hw_hogwild_watch_run(&watch, spawn, outputs, result);
}

// After the fork: MPI across ranks, the device set up, then hogwild_watch's loop with snapshots
// from the device.
static int run_workers(const hw_train_config *config, hw_train_inputs *in, gpu_job *job, int64_t samples_before,
                       hw_run_outputs *outputs, hw_train_result *result) {
    hw_spawn_ctx spawn;
    outputs->started = hw_now();  // timed from the first fork, as on the CPU: the set-up below counts
    if (hw_spawn(&spawn, gpu_worker, job, config->workers) != HW_OK) return HW_ERR;
    // Across ranks MPI comes first (its threads after the fork, as on the CPU), so that a failure
    // of this rank's device set-up ends the whole job (MPI_Abort) instead of leaving the others in
    // MPI_Init.
    gpu_copies copies = {0};
    int opened = HW_ERR;
    if (config->world.size > 1 && hw_comm_init(&config->world, config->sync_timeout) != HW_OK) {
        hw_hogwild_stop(job->control);  // the workers, still waiting for the weights, leave
    } else {
        // From here on this process may use CUDA. Its first calls start the runtime's helper
        // threads, which inherit this thread's signal mask: with SIGINT and SIGTERM blocked
        // meanwhile, a Ctrl-C can only be delivered to this thread, whose waits (ppoll in hw_join)
        // it must wake. One that comes meanwhile stays pending until the mask is restored.
        sigset_t stop_signals, old_mask;
        hw_stop_signal_set(&stop_signals);
        pthread_sigmask(SIG_BLOCK, &stop_signals, &old_mask);
        opened = parent_device_open(&copies, job, &in->model);
        pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
    }
    int status;
    hw_couple *couple = NULL;
    if (opened != HW_OK) {
        status = fail_setup(&spawn);
    } else {
        status = HW_OK;
        if (config->world.size > 1) {
            // The workers wait at the barrier until this node is coupled to the others.
            status = hw_hogwild_couple_open(config, in, job->control, job->first_epoch, samples_before, copies.mirror,
                                            NULL, &couple);
            outputs->started = hw_now();  // the workers start now: MPI and the checks were set-up
        }
        if (status == HW_OK) {
            status = watch_workers(config, in, job, &copies, couple, &spawn, outputs, result);
        } else {
            hw_hogwild_stop(job->control);
            hw_spawn_stop(&spawn);
        }
    }
    hw_spawn_free(&spawn);
    hw_couple_close(couple);
    // Every worker is reaped: no other process maps the device weights any more.
    gpu_copies_close(&copies);
    return status;
}

// The copies of the weights: one per entry of --gpus (worker r on copy r % K: round-robin, or as
// the list repeats a GPU), or one on --device cuda:N.
static void copies_plan(gpu_copies_plan *plan, const hw_train_config *config) {
    memset(plan, 0, sizeof *plan);
    plan->copies = config->n_gpus > 0 ? config->n_gpus : 1;
    for (int c = 0; c < plan->copies; c++) {
        plan->devices[c] = config->n_gpus > 0 ? config->gpus[c] : config->device.index;
    }
    plan->rule = config->sync_rule;
    plan->every_ms = config->sync_every_ms;
    plan->every_samples = config->sync_every_samples;
    plan->most_samples = config->sync_most_samples;
    if (config->world.size > 1) {
        // Across ranks, as DataParallel's GPU ranks: local rank L of a host on cuda:B+L (--device cuda:B).
        plan->devices[0] = config->device.index + config->world.local_rank;
        plan->mirror = 1;
    }
}

int hw_train_hogwild_cuda(const hw_train_config *config, hw_train_inputs *in, hw_train_result *result) {
    memset(result, 0, sizeof *result);

    // The host copy of the weights: initialised (or loaded) here, before the fork, uploaded by the
    // parent after it; the workers never read it.
    hw_model *model = &in->model;
    if (!model->weights && hw_model_alloc_weights(model) != HW_OK) return HW_ERR;
    gpu_job job = {.config = config, .in = in};
    hw_fault_read(&job.fault);
    copies_plan(&job.copies, config);
    int worker_gpu[HW_SPAWN_MAX_WORKERS];
    for (int r = 0; r < config->workers && r < HW_SPAWN_MAX_WORKERS; r++) {
        worker_gpu[r] = job.copies.devices[r % job.copies.copies];
    }
    job.worker_gpu = worker_gpu;
    int64_t samples_before = 0;
    if (hw_train_start_weights(config, model, &job.first_epoch, &samples_before) != HW_OK) return HW_ERR;

    // Shared with the workers: the control block, then the handle channel.
    size_t head = hw_hogwild_control_bytes(config->workers);
    hw_shm shm;
    if (hw_shm_open(&shm, head + sizeof(handle_channel)) != HW_OK) return HW_ERR;
    job.control = shm.data;
    job.channel = (handle_channel *)((char *)shm.data + head);
    // Across ranks the workers wait until the node is coupled to the others (run_workers).
    hw_hogwild_release_first(job.control, config, job.first_epoch);
    hw_hogwild_schedule_start(job.control, samples_before);
    atomic_store(&job.channel->state, HANDLE_WAIT);

    hw_run_outputs outputs = {0};
    int status = hw_run_outputs_open(&outputs, config, in, job.first_epoch, samples_before);
    // The weights are still on the host.
    if (status == HW_OK) status = hw_run_outputs_first_point(&outputs, model->weights, job.first_epoch);
    // A stop in the set-up or the first evaluation: no worker is started (across ranks the coupling
    // agrees on the stop).
    if (status == HW_OK && config->world.size == 1) {
        status = hw_run_outputs_stop_before_training(&outputs, model->weights, job.first_epoch, result);
    }
    if (status == HW_OK && !result->interrupted_by)
        status = run_workers(config, in, &job, samples_before, &outputs, result);
    hw_run_outputs_close(&outputs);
    hw_shm_close(&shm);
    return status;
}
