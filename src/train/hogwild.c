// hogwild: the asynchronous trainer (Recht et al., 2011) across worker processes, on the CPU.
//
// The parent maps one shared region holding a small control block and the flat weights, forks N
// workers, and then only watches (hogwild_watch.c): progress, epoch ends, evaluations,
// checkpoints. Each worker trains on its own shard of the data and writes its SGD step straight
// onto the shared weights, without a lock: the races between workers ARE the algorithm.
// Everything else that is shared (counters, flags) is a C11 atomic.
#include "hw/train.h"
#include "hw/gpu_train.h"
#include "hw/option.h"
#include "hw/run_outputs.h"

#include "fault.h"
#include "hogwild_protocol.h"
#include "hogwild_watch.h"
#include "hogwild_measure.h"
#include "hogwild_update.h"
#include "hogwild_staleness.h"
#include "hw/comm.h"
#include "hw/err.h"
#include "hw/optim.h"
#include "hw/resume_optim.h"
#include "hw/shm.h"
#include "hw/spawn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const hw_train_config *config;
    hw_train_inputs *in;
    hogwild_control *control;
    hw_measure *measure;    // --measure; NULL otherwise
    hogwild_update update;  // --update: the mode, and the shared lock of mode locked; --weights: the dtype
                            // and, for bf16, the shared bfloat16 weights
    int first_epoch;
    fault_plan fault;
    // The optimizer state kept in checkpoints (hw_optim_kept): the parent's copy, restored from
    // --resume or fresh, which the forked workers start from; NULL when the run neither resumes nor
    // saves. With --save, `published` (shared) holds each worker's state at its last epoch end.
    hw_optim_state *optim;
    hw_optim_state optim_state;  // what `optim` points at
    hw_shm published;
    size_t published_slot;  // bytes of one worker's slot: its generator, then its velocity
} hogwild_job;

// ---- the optimizer state a checkpoint keeps ----

// Worker `rank`'s slot of the published state: its dropout generator, its velocity 64 bytes on.
static hw_rng *published_rng(const hogwild_job *job, int rank) {
    return (hw_rng *)((char *)job->published.data + (size_t)rank * job->published_slot);
}
static float *published_velocity(const hogwild_job *job, int rank) {
    return (float *)((char *)published_rng(job, rank) + 64);
}

// The state a worker starts from: the checkpoint's, when --resume restored one (a fresh state is
// what the workspace and the optimizer already start as).
static void optim_start(const hogwild_job *job, int rank, hw_workspace *ws, hw_sgd *opt) {
    const hw_optim_state *optim = job->optim;
    if (!optim || !optim->restored) return;
    ws->rng = optim->dropout[rank];
    if (opt->velocity)
        memcpy(opt->velocity, optim->velocities + (size_t)rank * optim->n_weights, sizeof(float) * optim->n_weights);
}

// At the end of each epoch, before the worker reports it: its state, for the parent's checkpoint.
static void optim_publish(const hogwild_job *job, int rank, const hw_workspace *ws, const hw_sgd *opt) {
    if (!job->published.data) return;
    *published_rng(job, rank) = ws->rng;
    if (opt->velocity) memcpy(published_velocity(job, rank), opt->velocity, sizeof(float) * job->optim->n_weights);
}

// hogwild_watch.optim_capture: at an epoch end, every worker waiting at the barrier (or gone after
// the last epoch), their published states into the parent's, which the epoch's checkpoint saves.
static void optim_capture(void *ctx) {
    hogwild_job *job = ctx;
    hw_optim_state *optim = job->optim;
    for (int k = 0; k < optim->workers; k++) {
        optim->dropout[k] = *published_rng(job, k);
        if (optim->n_velocities)
            memcpy(optim->velocities + (size_t)k * optim->n_weights, published_velocity(job, k),
                   sizeof(float) * optim->n_weights);
    }
    optim->valid = 1;
}

// The parent's optimizer state, restored from --resume when it matches the run (the one-line
// message otherwise), and with --save the shared slots the workers publish theirs in.
static int optim_open(hogwild_job *job, hw_optim_state *optim, const hw_model *model) {
    const hw_train_config *config = job->config;
    if (!hw_optim_kept(config) || (!config->resume_path && !config->save_path)) return HW_OK;
    if (hw_optim_state_open(optim, config, model->n_weights, hw_hogwild_worker_seed) != HW_OK) return HW_ERR;
    job->optim = optim;
    if (hw_optim_state_resume(optim, config, model) != HW_OK) return HW_ERR;
    if (!config->save_path) return HW_OK;
    size_t velocity = optim->n_velocities ? sizeof(float) * model->n_weights : 0;
    job->published_slot = (64 + velocity + 63) / 64 * 64;
    return hw_shm_open(&job->published, job->published_slot * (size_t)config->workers);
}

static void optim_close(hogwild_job *job) {
    hw_shm_close(&job->published);
    if (job->optim) hw_optim_state_close(job->optim);
}

// ---- the worker: one process, one thread, one shard ----

// One worker's state through its epochs: what its steps share.
typedef struct {
    hogwild_job *job;
    int rank;
    hw_workspace *ws;
    hw_sgd *opt;
    hw_model *local;           // the worker's private copy of the weights (train_shard)
    worker_slot *slot;         // its reports to the parent
    measure_worker *measure;   // --measure; NULL otherwise
    hogwild_update update;     // the job's, with this worker's own rounding keys (bf16)
    staleness_gate staleness;  // --max-staleness (hogwild_staleness.h)
    int64_t samples;
    double loss_sum, last_finite_loss;
    int batches;
    int diverged;  // it saw a diverged loss: it trains no more (the parent ends the run)
} worker_run;

// One step over `batch` samples: forward and the loss, backward, the update onto the shared
// weights (all of it in src/nn/exec.c), then the reports. HW_OK to go on (w->diverged set when
// the loss diverged, the step not applied), HW_ERR on a failure.
static int train_step(worker_run *w, int epoch, const float *x, const uint8_t *y, int batch) {
    const hw_train_config *config = w->job->config;
    hw_model *model = &w->job->in->model;  // model->weights points into the shared region
    w->opt->lr = hw_hogwild_step_lr(w->job->control, config, w->job->in->train.n, batch);
    if (w->measure) measure_step_begin(w->measure);
    float loss = hw_cpu_forward(w->local, w->ws, x, y, batch, 1);
    if (hw_fault_poisons_loss(&w->job->fault, w->rank, w->batches + 1)) loss = NAN;  // HOGWILD_FAIL_WORKER
    if (hw_loss_diverged(loss)) {
        // Diverged: its gradient would write NaN, inf or huge steps into everyone's weights. The
        // parent ends the run naming this worker.
        hw_hogwild_report_diverged(w->slot, epoch, loss, w->last_finite_loss);
        w->diverged = 1;
        return HW_OK;
    }
    w->last_finite_loss = loss;
    if (hw_cpu_backward(w->local, w->ws, y, batch) != HW_OK) return HW_ERR;
    // THE Hogwild update: straight onto the shared weights, in the --update mode (lockfree: no
    // lock; the mode's loop is chosen once per step, hogwild_update.c).
    int wrote;
    if (w->measure) {
        wrote = measure_update(w->measure, &w->update, w->opt, model, model->weights, w->ws->grads, w->local->weights);
    } else if ((wrote = hogwild_update_begin(&w->update)) == HW_OK) {
        hogwild_update_write(&w->update, w->opt, model, model->weights, w->ws->grads, w->local->weights, NULL);
        hogwild_update_end(&w->update);
    }
    if (wrote != HW_OK) return HW_ERR;
    staleness_step_done(&w->staleness);  // landed: the workers it held may go on
    w->samples += batch;
    w->loss_sum += (double)loss * batch;
    hw_hogwild_report_progress(w->slot, w->samples, w->loss_sum);
    return hw_fault_check(&w->job->fault, w->rank, ++w->batches);
}

// One epoch of the worker's shard, batch after batch, each step once --max-staleness lets it
// start. It ends early on a stop or a divergence.
static int train_epoch(worker_run *w, int epoch, int64_t *shard) {
    const hw_train_config *config = w->job->config;
    const hw_dataset *train = &w->job->in->train;
    int64_t count;
    if (hw_hogwild_shard(config, train->n, w->rank, epoch, shard, &count) != HW_OK) return HW_ERR;
    hw_loader *loader;
    if (hw_loader_open(&loader, train, shard, count, config->batch_size, w->job->in->norm, config->prefetch) != HW_OK) {
        return HW_ERR;
    }
    const float *x;
    const uint8_t *y;
    int batch, status = HW_OK;
    while (status == HW_OK && (batch = hw_loader_next(loader, &x, &y)) > 0) {
        status = staleness_wait(&w->staleness);
        if (status != HW_OK || hw_hogwild_stopping(w->job->control)) break;
        status = train_step(w, epoch, x, y, batch);
        if (w->diverged || hw_hogwild_stopping(w->job->control)) break;
    }
    hw_loader_close(loader);
    return status;
}

// The epochs of one worker: forward, backward and the step onto the shared weights, batch after
// batch of its shard.
//
// The gradient is computed on `local`, the worker's private copy of the weights, which the step
// refreshes as it writes the shared weights: one pass over the shared cache lines per step. (Read
// by the forward and then written by the step, the lines that the other workers keep writing
// cross between cores twice per step; with the MLP's 400 KB of weights that cost half the speed
// of two workers.) The copy is the shared weights as this worker last read them, at its last
// update, which is what a Hogwild read is: some recent state of weights that everyone writes.
static int train_shard(int rank, hogwild_job *job, hw_workspace *ws, hw_sgd *opt, int64_t *shard, hw_model *local) {
    const hw_train_config *config = job->config;
    hw_model *model = &job->in->model;
    worker_run w = {.job = job,
                    .rank = rank,
                    .ws = ws,
                    .opt = opt,
                    .local = local,
                    .slot = &job->control->slots[rank],
                    .update = job->update,
                    .last_finite_loss = NAN};
    measure_worker measured;
    if (job->measure) measure_worker_open(w.measure = &measured, job->measure, rank);
    // This worker's own: with bf16 weights, its generator of the rounding's keys.
    hogwild_update_seed(&w.update, hw_hogwild_worker_seed(config, rank));
    staleness_gate_open(&w.staleness, job->control, config, rank);
    int status = HW_OK;
    for (int epoch = job->first_epoch; status == HW_OK && epoch < config->epochs; epoch++) {
        if (!hw_hogwild_wait_for_epoch(job->control, epoch)) break;
        hogwild_update_read(&w.update, model->weights, local->weights, model->n_weights);
        if (w.measure) measure_weights_read(w.measure);
        status = train_epoch(&w, epoch, shard);
        // No step left in this epoch: it holds nobody back, before the parent may release the next.
        staleness_leave(&w.staleness);
        if (status != HW_OK || w.diverged || atomic_load(&job->control->stop)) break;
        optim_publish(job, rank, ws, opt);
        hw_hogwild_report_epoch(w.slot, epoch - job->first_epoch + 1);
    }
    staleness_leave(&w.staleness);
    return status;
}

static int hogwild_worker(int rank, void *arg) {
    hogwild_job *job = arg;
    const hw_train_config *config = job->config;
    const hw_model *model = &job->in->model;
    hw_workspace ws = {0};
    hw_sgd opt = {0};
    int64_t *shard = hw_hogwild_shard_alloc(config, job->in->train.n);
    int status = shard ? HW_OK : hw_fail("worker %d: out of memory for its shard", rank);
    if (status == HW_OK) {
        status = hw_workspace_alloc(&ws, model, config->batch_size, hw_hogwild_worker_seed(config, rank));
    }
    if (status == HW_OK) {
        status =
            hw_sgd_init(&opt, model->n_weights, config->lr, config->momentum, config->weight_decay, config->nesterov);
    }
    if (status == HW_OK) optim_start(job, rank, &ws, &opt);
    hw_model local = *model;
    local.weights = malloc(sizeof(float) * model->n_weights);
    if (status == HW_OK && !local.weights) {
        status = hw_fail("worker %d: out of memory for its copy of the weights", rank);
    }
    if (status == HW_OK) status = train_shard(rank, job, &ws, &opt, shard, &local);
    free(local.weights);
    hw_hogwild_report_memory(&job->control->slots[rank]);
    free(shard);
    hw_sgd_free(&opt);
    hw_workspace_free(&ws);
    return status;
}

// ---- the parent ----

// hogwild_weights.snapshot: the weights are in host shared memory, and a snapshot is a copy.
static int snapshot_shared_weights(void *weights, hw_run_outputs *outputs) {
    hw_run_outputs_snapshot(outputs, weights);
    return HW_OK;
}

// The same for weights shared in bfloat16 (--weights bf16): a snapshot widens them to floats.
static int snapshot_shared_bf16(void *weights, hw_run_outputs *outputs) {
    hw_run_outputs_snapshot_bf16(outputs, weights);
    return HW_OK;
}

// After the fork: across ranks MPI (its threads start only now, and the workers never call MPI),
// the checks that the ranks start alike and the coupling (src/comm/mpi/hogwild_coupling.c), which
// releases the workers; then the parent's loop over the shared weights. A failure before the loop
// stops the workers. The caller frees `spawn` and closes *couple.
static int watch_workers(const hw_train_config *config, hw_train_inputs *in, const hogwild_job *job,
                         int64_t samples_before, hw_spawn_ctx *spawn, hw_couple **couple, hw_run_outputs *outputs,
                         hw_train_result *result) {
    int status = HW_OK;
    if (config->world.size > 1) {
        // --measure: the coupling's changes to the live weights are applied updates, not lost ones.
        double *applied = NULL;
        if (job->measure && !(applied = measure_coupled(job->measure))) status = HW_ERR;
        if (status == HW_OK) status = hw_comm_init(&config->world, config->sync_timeout);
        if (status == HW_OK) {
            status = hw_hogwild_couple_open(config, in, job->control, job->first_epoch, samples_before,
                                            in->model.weights, applied, couple);
        }
        outputs->started = hw_now();  // the workers start now, not at the fork: MPI_Init is set-up
    }
    if (status != HW_OK) {
        hw_hogwild_stop(job->control);
        hw_spawn_stop(spawn);
        return status;
    }
    hogwild_weights weights = {.ctx = in->model.weights, .snapshot = snapshot_shared_weights};
    if (job->update.dtype == HW_WEIGHTS_BF16)
        weights = (hogwild_weights){.ctx = job->update.bf16, .snapshot = snapshot_shared_bf16};
    hogwild_watch watch = {.config = config,
                           .control = job->control,
                           .n_train = in->train.n,
                           .first_epoch = job->first_epoch,
                           .weights = weights,
                           .measure = job->measure,
                           .couple = *couple,
                           .optim_capture = job->published.data ? optim_capture : NULL,
                           .optim_ctx = (void *)job};
    return hw_hogwild_watch_run(&watch, spawn, outputs, result);
}

// --weights bf16, where the parent keeps the weights it starts from in floats (`parent`, which the
// model is bound to: the start, the first point and measure_open read them there): they are
// rounded to the nearest bfloat16 into the shared weights, and `parent` is made the floats of what
// was stored, so that everything the parent reads before the fork is what the workers start from.
static void bf16_store_start(const hw_model *model, uint16_t *shared, float *parent) {
    hw_bf16_from_floats(shared, parent, model->n_weights);
    hw_bf16_to_floats(parent, shared, model->n_weights);
}

// bf16 weights are CPU workers' in one process: GPU workers have their own float kernels, and
// the coupling across ranks reads and writes float weights; nor is there a bfloat16 atomic add.
static int bf16_applies(const hw_train_config *config) {
    if (config->weights != HW_WEIGHTS_BF16) return HW_OK;
    if (config->device.type == HW_DEVICE_CUDA || config->world.size > 1) {
        return hw_fail("bf16 shared weights%s are for Hogwild workers on the CPU of one process, not %s",
                       hw_option_hint(HW_OPTION_WEIGHTS), config->world.size > 1 ? "across ranks" : "a GPU's");
    }
    if (config->update == HW_UPDATE_ATOMIC) {
        return hw_fail("bf16 shared weights%s have no atomic add; atomic updates%s are for float weights",
                       hw_option_hint(HW_OPTION_WEIGHTS), hw_option_hint(HW_OPTION_UPDATE));
    }
    return HW_OK;
}

// The staleness bound counts the steps of one process's CPU workers in its control block: GPU
// workers and other ranks' are not there.
static int staleness_applies(const hw_train_config *config) {
    if (config->max_staleness == HW_STALENESS_UNBOUNDED) return HW_OK;
    if (config->device.type != HW_DEVICE_CUDA && config->world.size == 1) return HW_OK;
    return hw_fail("a staleness bound%s is for Hogwild workers on the CPU of one process, not %s",
                   hw_option_hint(HW_OPTION_MAX_STALENESS), config->world.size > 1 ? "across ranks" : "a GPU's");
}

int hw_train_hogwild(const hw_train_config *config, hw_train_inputs *in, hw_train_result *result) {
    int bf16 = config->weights == HW_WEIGHTS_BF16;
    if (bf16_applies(config) != HW_OK || staleness_applies(config) != HW_OK) return HW_ERR;
    if (config->device.type == HW_DEVICE_CUDA) {
        // GPU workers write their steps with their own kernels: only the lock-free one.
        if (config->update != HW_UPDATE_LOCKFREE) {
            return hw_fail("%s updates%s are for Hogwild workers on the CPU, not a GPU's",
                           hw_update_mode_name(config->update), hw_option_hint(HW_OPTION_UPDATE));
        }
        return hw_gpu_train_hogwild(config, in, result);
    }
    memset(result, 0, sizeof *result);
    hw_model *model = &in->model;

    // The one shared mapping: control block + weights, mapped before fork so that every worker
    // sees it at the same address.
    size_t head = hw_hogwild_control_bytes(config->workers);
    hw_shm shm;
    // With bf16 weights the shared region holds them in bfloat16, half the bytes, and the parent
    // keeps floats of its own to start from (bf16_store_start).
    float *parent = bf16 ? malloc(sizeof(float) * (model->n_weights ? model->n_weights : 1)) : NULL;
    if (bf16 && !parent) return hw_fail("out of memory for a float copy of %zu weights", model->n_weights);
    if (hw_shm_open(&shm, head + hw_weights_dtype_bytes(config->weights) * model->n_weights) != HW_OK) {
        free(parent);
        return HW_ERR;
    }
    void *shared_weights = (char *)shm.data + head;
    hogwild_job job = {.config = config,
                       .in = in,
                       .control = shm.data,
                       .update = {.mode = config->update,
                                  .lock = &((hogwild_control *)shm.data)->update_lock,
                                  .dtype = config->weights,
                                  .bf16 = bf16 ? shared_weights : NULL}};
    int locked = config->update == HW_UPDATE_LOCKED;
    if (locked && hogwild_update_lock_init(job.update.lock) != HW_OK) {
        hw_shm_close(&shm);
        free(parent);
        return HW_ERR;
    }
    hw_model_bind_weights(model, bf16 ? parent : (float *)shared_weights);
    hw_fault_read(&job.fault);
    int64_t samples_before = 0;
    hw_run_outputs outputs = {0};
    hw_measure measure = {0};
    int status = hw_train_start_weights(config, model, &job.first_epoch, &samples_before);
    if (status == HW_OK) status = optim_open(&job, &job.optim_state, model);
    if (status == HW_OK && bf16) bf16_store_start(model, job.update.bf16, parent);
    hw_hogwild_release_first(job.control, config, job.first_epoch);
    hw_hogwild_schedule_start(job.control, samples_before);
    if (status == HW_OK && config->measure &&
        (status = measure_open(&measure, model, config->workers, config->weights)) == HW_OK) {
        job.measure = &measure;
    }
    if (status == HW_OK) status = hw_run_outputs_open(&outputs, config, in, job.first_epoch, samples_before);
    outputs.optim = job.published.data ? job.optim : NULL;
    if (job.measure) measure_metrics_values(job.measure, &outputs.metrics.measure);
    if (status == HW_OK) status = hw_run_outputs_first_point(&outputs, model->weights, job.first_epoch);
    // A stop in the set-up or the first evaluation: no worker is started (across ranks the coupling
    // agrees on the stop).
    if (status == HW_OK && config->world.size == 1) {
        status = hw_run_outputs_stop_before_training(&outputs, model->weights, job.first_epoch, result);
    }
    hw_spawn_ctx spawn;
    hw_couple *couple = NULL;
    outputs.started = hw_now();  // training is timed from the first fork to the last join
    if (status == HW_OK && !result->interrupted_by) status = hw_spawn(&spawn, hogwild_worker, &job, config->workers);
    if (status == HW_OK && !result->interrupted_by) {
        status = watch_workers(config, in, &job, samples_before, &spawn, &couple, &outputs, result);
        hw_spawn_free(&spawn);
    }
    hw_couple_close(couple);
    optim_close(&job);
    measure_close(&measure);
    hw_run_outputs_close(&outputs);
    hw_model_bind_weights(model, NULL);
    if (locked) hogwild_update_lock_destroy(job.update.lock);
    hw_shm_close(&shm);
    free(parent);
    return status;
}
