// hogwild: the asynchronous trainer (Recht et al., 2011) across worker processes, on the CPU.
//
// The parent maps one shared region holding a small control block and the flat weights, forks N
// workers, and then only watches (hogwild_watch.c): progress, epoch ends, evaluations,
// checkpoints. Each worker trains on its own shard of the data and writes its SGD step straight
// onto the shared weights, without a lock: the races between workers ARE the algorithm.
// Everything else that is shared (counters, flags) is a C11 atomic.
#include "hw/train.h"
#include "hw/gpu_train.h"
#include "hw/run_log.h"

#include "hogwild_watch.h"
#include "hogwild_measure.h"
#include "hw/comm.h"
#include "hw/err.h"
#include "hw/optim.h"
#include "hw/shm.h"
#include "hw/spawn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const hw_train_config *config;
    hw_train_inputs *in;
    hogwild_control *control;
    hw_measure *measure;  // --measure; NULL otherwise
    int first_epoch;
    fault_plan fault;
} hogwild_job;

// ---- the worker: one process, one thread, one shard ----

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
    const hw_dataset *train = &job->in->train;
    hw_model *model = &job->in->model;  // model->weights points into the shared region
    worker_slot *slot = &job->control->slots[rank];
    int64_t samples = 0;
    double loss_sum = 0, last_finite_loss = NAN;
    int batches = 0;
    const int world_workers = config->workers * config->world.size;
    const int world_rank = config->world.rank * config->workers + rank;
    measure_worker measured, *measure = NULL;  // --measure
    if (job->measure) measure_worker_open(measure = &measured, job->measure, rank);
    for (int epoch = job->first_epoch; epoch < config->epochs; epoch++) {
        if (!hw_hogwild_wait_for_epoch(job->control, epoch)) return HW_OK;
        memcpy(local->weights, model->weights, sizeof(float) * model->n_weights);
        if (measure) measure_weights_read(measure);
        // Across ranks the world is R x N workers, each with a shard of its own.
        int64_t count = hw_sampler_shard_size(train->n, world_workers, world_rank);
        if (hw_sampler_shard(shard, train->n, world_workers, world_rank, epoch, config->seed) != HW_OK) return HW_ERR;
        hw_loader *loader;
        if (hw_loader_open(&loader, train, shard, count, config->batch_size, job->in->norm, config->prefetch) !=
            HW_OK) {
            return HW_ERR;
        }
        const float *x;
        const uint8_t *y;
        int batch;
        while ((batch = hw_loader_next(loader, &x, &y)) > 0) {
            if (measure) measure_step_begin(measure);
            // One step, all of it in src/nn/exec.c: forward and the loss, backward, the update.
            float loss = hw_cpu_forward(local, ws, x, y, batch, 1);
            if (hw_fault_poisons_loss(&job->fault, rank, batches + 1)) loss = NAN;  // the tests' HOGWILD_FAIL_WORKER
            if (hw_loss_diverged(loss)) {
                // Diverged: its gradient would write NaN, inf or huge steps into everyone's weights. The
                // parent ends the run naming this worker.
                hw_hogwild_report_diverged(slot, epoch, loss, last_finite_loss);
                hw_loader_close(loader);
                return HW_OK;
            }
            last_finite_loss = loss;
            if (hw_cpu_backward(local, ws, y, batch) != HW_OK) {
                hw_loader_close(loader);
                return HW_ERR;
            }
            // THE Hogwild update: straight onto the shared weights, no lock.
            if (measure) {
                measure_update(measure, opt, model, model->weights, ws->grads, local->weights);
            } else {
                hw_sgd_step_and_copy(opt, model, model->weights, ws->grads, local->weights);
            }

            samples += batch;
            loss_sum += (double)loss * batch;
            hogwild_report(slot, samples, loss_sum);
            if (hw_fault_check(&job->fault, rank, ++batches) != HW_OK) {
                hw_loader_close(loader);
                return HW_ERR;
            }
            if (atomic_load_explicit(&job->control->stop, memory_order_relaxed)) break;
        }
        hw_loader_close(loader);
        if (atomic_load(&job->control->stop)) return HW_OK;
        atomic_store(&slot->epochs_done, epoch - job->first_epoch + 1);
    }
    return HW_OK;
}

static int hogwild_worker(int rank, void *arg) {
    hogwild_job *job = arg;
    const hw_train_config *config = job->config;
    const hw_model *model = &job->in->model;
    hw_workspace ws = {0};
    hw_sgd opt = {0};
    const int world_workers = config->workers * config->world.size;
    const int world_rank = config->world.rank * config->workers + rank;
    int64_t *shard = malloc(sizeof(int64_t) * (size_t)hw_sampler_shard_size(job->in->train.n, world_workers, 0));
    int status = shard ? HW_OK : hw_fail("worker %d: out of memory for its shard", rank);
    if (status == HW_OK) {
        status = hw_workspace_alloc(&ws, model, config->batch_size, hw_worker_seed(config->seed, world_rank));
    }
    if (status == HW_OK) {
        status =
            hw_sgd_init(&opt, model->n_weights, config->lr, config->momentum, config->weight_decay, config->nesterov);
    }
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

// The weights are in host shared memory: a snapshot is a copy.
static int snapshot_shared_weights(void *weights, hw_train_outputs *log) {
    hw_train_outputs_snapshot(log, weights);
    return HW_OK;
}

// Hogwild across ranks (src/comm/mpi/hogwild_coupling.c): after the fork, since MPI_Init starts threads and the
// workers never call MPI. The ranks start from the same weights (checked), then the workers go.
static int couple_ranks(const hw_train_config *config, hw_train_inputs *in, hogwild_control *control, int first_epoch,
                        int64_t samples_before, hw_measure *measure, hw_couple **couple) {
    // --measure: the coupling's changes to the live weights are applied updates, not lost ones.
    double *applied = NULL;
    if (measure && !(applied = measure_coupled(measure))) return HW_ERR;
    if (hw_comm_init(&config->world, config->sync_timeout) != HW_OK ||
        hw_hogwild_couple_open(config, in, first_epoch, samples_before, in->model.weights, applied, couple) != HW_OK) {
        return HW_ERR;
    }
    atomic_store(&control->released_epoch, first_epoch);
    return HW_OK;
}

int hw_train_hogwild(const hw_train_config *config, hw_train_inputs *in, hw_train_result *result) {
    if (config->device.type == HW_DEVICE_CUDA) return hw_gpu_train_hogwild(config, in, result);
    memset(result, 0, sizeof *result);
    hw_model *model = &in->model;

    // The one shared mapping: control block + weights, mapped before fork so that every worker
    // sees it at the same address.
    size_t head = hw_hogwild_control_bytes(config->workers);
    hw_shm shm;
    if (hw_shm_open(&shm, head + sizeof(float) * model->n_weights) != HW_OK) return HW_ERR;
    hogwild_control *control = shm.data;
    hw_model_bind_weights(model, (float *)((char *)shm.data + head));

    hogwild_job job = {.config = config, .in = in, .control = control};
    hw_fault_read(&job.fault);
    int64_t samples_before = 0;
    hw_train_outputs log = {0};
    hw_measure measure = {0};
    int status = hw_train_start_weights(config, model, &job.first_epoch, &samples_before);
    atomic_store(&control->released_epoch, job.first_epoch);
    if (status == HW_OK && config->measure && (status = measure_open(&measure, model, config->workers)) == HW_OK) {
        job.measure = &measure;
    }
    if (status == HW_OK) status = hw_train_outputs_open(&log, config, in, job.first_epoch, samples_before);
    if (job.measure) measure_metrics_values(job.measure, &log.metrics.measure);
    if (status == HW_OK) status = hw_train_outputs_first_point(&log, model->weights, job.first_epoch);
    hw_spawn_ctx spawn;
    hw_couple *couple = NULL;
    // Across ranks the workers wait until the node is coupled to the others (couple_ranks).
    if (config->world.size > 1) atomic_store(&control->released_epoch, job.first_epoch - 1);
    log.started = hw_now();  // training is timed from the first fork to the last join
    if (status == HW_OK) status = hw_spawn(&spawn, hogwild_worker, &job, config->workers);
    if (status == HW_OK) {
        if (config->world.size > 1) {
            status = couple_ranks(config, in, control, job.first_epoch, samples_before, job.measure, &couple);
            log.started = hw_now();  // the workers start now, not at the fork: MPI_Init is set-up
        }
        hogwild_watch watch = {.config = config,
                               .control = control,
                               .n_train = in->train.n,
                               .first_epoch = job.first_epoch,
                               .snapshot = snapshot_shared_weights,
                               .snapshot_ctx = model->weights,
                               .measure = job.measure,
                               .couple = couple};
        if (status == HW_OK) {
            status = hw_hogwild_watch_run(&watch, &spawn, &log, result);
        } else {
            atomic_store(&control->stop, 1);
            hw_spawn_stop(&spawn);
        }
        hw_spawn_free(&spawn);
        if (status == HW_OK && !result->interrupted_by && job.measure) measure_report(job.measure, &log.progress);
        if (status == HW_OK && !result->interrupted_by && couple) {
            char text[1024];
            hw_couple_report(couple, text, sizeof text);
            hw_progress_message(&log.progress, "%s", text);
        }
    }
    hw_couple_close(couple);
    measure_close(&measure);
    hw_train_outputs_close(&log);
    hw_model_bind_weights(model, NULL);
    hw_shm_close(&shm);
    return status;
}
