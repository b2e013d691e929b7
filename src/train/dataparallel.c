// dataparallel: the synchronous trainer. One process; K replicas run forward and backward on
// K chunks of every batch in parallel; their gradients are reduced onto the primary; one SGD
// step; the new weights are what every replica reads next step.
//
// CPU replicas are threads of this process. They all read the primary's weight buffer, which
// no one writes while they compute, so the broadcast after the step costs nothing. (GPU
// replicas, each with its own copy of the weights, are in dataparallel_gpu.c.)
#include "hw/train.h"
#include "hw/dataparallel.h"
#include "hw/gpu_train.h"
#include "hw/run_outputs.h"

#include "dataparallel_loop.h"
#include "hw/comm.h"
#include "hw/err.h"
#include "hw/optim.h"
#include "hw/option.h"
#include "hw/resume_optim.h"
#include "hw/signals.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct dp_replica dp_replica;

// The replica threads wait at `launch` until the set-up is complete: GO, they join the barriers;
// ABORT (a later part of the set-up failed), they leave without touching them. So a set-up that
// fails half-way never leaves a thread waiting on a barrier sized for threads that never started.
// They sleep on a condition variable meanwhile, never polling: a thousand threads polling on two
// cores spend more CPU than the set-up itself while the later ones are still being created.
enum { LAUNCH_WAIT = 0, LAUNCH_GO = 1, LAUNCH_ABORT = 2 };

struct hw_dp_team {
    const hw_model *model;
    int replicas;
    pthread_barrier_t start;   // the main thread has put a batch in place
    pthread_barrier_t finish;  // every replica has its gradient
    int barriers;              // how many of start, finish are initialised (0, 1, 2)
    int threads;               // replica threads started: ranks 1 .. threads
    int launch;                // LAUNCH_WAIT, then GO or ABORT (under launch_lock)
    pthread_mutex_t launch_lock;
    pthread_cond_t launched;
    const float *x;  // the current batch
    const uint8_t *y;
    int batch;
    int quit;  // set before the last `start`: the threads leave
    dp_replica *replica;
};
typedef hw_dp_team dp_team;

struct dp_replica {
    dp_team *team;
    int rank;
    hw_workspace ws;    // its activations and its gradient buffer
    int offset, count;  // its chunk of the current batch
    float loss;         // mean loss over its chunk
    pthread_t thread;
};

// Forward and backward of one replica on its chunk.
static void replica_step(dp_replica *r) {
    dp_team *team = r->team;
    hw_dp_chunk(team->batch, team->replicas, r->rank, &r->offset, &r->count);
    r->loss = 0;
    if (r->count == 0) return;
    int64_t sample_floats = hw_shape_numel(team->model->input);
    const float *x = team->x + (int64_t)r->offset * sample_floats;
    const uint8_t *y = team->y + r->offset;
    r->loss = hw_cpu_forward(team->model, &r->ws, x, y, r->count, 1);
    // hw_dp_chunk's counts are within the workspace's batch; should backward still refuse, the
    // loss says so (NAN) rather than the step using the previous gradients unseen.
    if (hw_cpu_backward(team->model, &r->ws, y, r->count) != HW_OK) r->loss = NAN;
}

// The set-up's outcome, for the threads waiting at the gate.
static void launch_set(dp_team *team, int launch) {
    pthread_mutex_lock(&team->launch_lock);
    team->launch = launch;
    pthread_cond_broadcast(&team->launched);
    pthread_mutex_unlock(&team->launch_lock);
}

static void *replica_thread(void *arg) {
    dp_replica *r = arg;
    dp_team *team = r->team;
    pthread_mutex_lock(&team->launch_lock);
    while (team->launch == LAUNCH_WAIT) pthread_cond_wait(&team->launched, &team->launch_lock);
    int launch = team->launch;
    pthread_mutex_unlock(&team->launch_lock);
    if (launch == LAUNCH_ABORT) return NULL;
    for (;;) {
        pthread_barrier_wait(&team->start);
        if (team->quit) return NULL;
        replica_step(r);
        pthread_barrier_wait(&team->finish);
    }
}

// THE DataParallel reduce: the gradient of the whole batch's mean loss is the chunk gradients
// weighted by chunk size. Summed onto the primary replica's (replica 0's) buffer.
static void reduce_gradients(dp_team *team) {
    const size_t n = team->model->n_weights;
    float *primary = team->replica[0].ws.grads;
    const float scale0 = (float)team->replica[0].count / (float)team->batch;
    for (size_t i = 0; i < n; i++) primary[i] *= scale0;
    for (int k = 1; k < team->replicas; k++) {
        const dp_replica *r = &team->replica[k];
        if (r->count == 0) continue;
        const float scale = (float)r->count / (float)team->batch;
        const float *g = r->ws.grads;
        for (size_t i = 0; i < n; i++) primary[i] += scale * g[i];
    }
}

// One synchronous step over a whole batch; replica 0 runs on the calling thread.
float hw_dp_team_step(hw_dp_team *team, const float *x, const uint8_t *y, int batch, const float **grads) {
    team->x = x;
    team->y = y;
    team->batch = batch;
    pthread_barrier_wait(&team->start);
    replica_step(&team->replica[0]);
    pthread_barrier_wait(&team->finish);
    if (team->replica[0].count == 0) memset(team->replica[0].ws.grads, 0, sizeof(float) * team->model->n_weights);
    reduce_gradients(team);
    double loss = 0;
    for (int k = 0; k < team->replicas; k++) loss += (double)team->replica[k].loss * team->replica[k].count;
    *grads = team->replica[0].ws.grads;
    return (float)(loss / batch);
}

// HOGWILD_FAIL_DP_SETUP=STEP makes that step of hw_dp_team_open fail as if the system had refused
// it, for the tests of every failure path: team, replicas, workspace:K, barrier:start,
// barrier:finish, thread:K (K a replica rank). Read once per set-up, never in a step.
static int injected(const char *step, int rank) {
    const char *text = getenv("HOGWILD_FAIL_DP_SETUP");
    if (!text) return 0;
    char name[64];
    if (rank < 0) snprintf(name, sizeof name, "%s", step);
    else snprintf(name, sizeof name, "%s:%d", step, rank);
    return strcmp(text, name) == 0;
}

int hw_dp_team_diverged(const hw_dp_team *team) {
    for (int k = 0; k < team->replicas; k++) {
        if (team->replica[k].count > 0 && hw_loss_diverged(team->replica[k].loss)) return k;
    }
    return -1;
}

int hw_dp_team_open(hw_dp_team **out, const hw_model *model, int replicas, int batch_size, uint64_t seed) {
    *out = NULL;
    if (replicas < 1) return hw_fail("DataParallel needs at least one replica, got %d", replicas);
    hw_dp_team *team = injected("team", -1) ? NULL : calloc(1, sizeof *team);
    if (!team) return hw_fail("DataParallel: out of memory for a team of %d replicas", replicas);
    team->model = model;
    team->replicas = replicas;
    team->launch = LAUNCH_WAIT;
    pthread_mutex_init(&team->launch_lock, NULL);  // default attributes: cannot fail on Linux
    pthread_cond_init(&team->launched, NULL);
    team->replica = injected("replicas", -1) ? NULL : calloc((size_t)replicas, sizeof(dp_replica));
    if (!team->replica) {
        pthread_cond_destroy(&team->launched);
        pthread_mutex_destroy(&team->launch_lock);
        free(team);
        return hw_fail("DataParallel: out of memory for the state of %d replicas", replicas);
    }
    int status = HW_OK;
    int chunk = (batch_size + replicas - 1) / replicas;
    for (int k = 0; status == HW_OK && k < replicas; k++) {
        team->replica[k].team = team;
        team->replica[k].rank = k;
        if (injected("workspace", k)) {
            status = hw_fail("workspace for %s: out of memory (batch %d; injected by HOGWILD_FAIL_DP_SETUP)",
                             model->path, chunk);
        } else {
            status = hw_workspace_alloc(&team->replica[k].ws, model, chunk, hw_worker_seed(seed, k));
        }
        if (status != HW_OK) {
            hw_error_prefix("DataParallel replica %d, for its chunk of %d samples of a batch of %d%s", k, chunk,
                            batch_size, hw_option_hint(HW_OPTION_BATCH_SIZE));
        }
    }
    pthread_barrier_t *barrier[2] = {&team->start, &team->finish};
    const char *barrier_name[2] = {"start", "finish"};
    for (int b = 0; status == HW_OK && b < 2; b++) {
        char step[32];
        snprintf(step, sizeof step, "barrier:%s", barrier_name[b]);
        int err = injected(step, -1) ? EAGAIN : pthread_barrier_init(barrier[b], NULL, (unsigned)replicas);
        if (err) {
            status = hw_fail_errno(err, "DataParallel: cannot create the %s barrier of %d replicas", barrier_name[b],
                                   replicas);
        } else team->barriers++;
    }
    for (int k = 1; status == HW_OK && k < replicas; k++) {
        int err = injected("thread", k)
                      ? EAGAIN
                      : pthread_create(&team->replica[k].thread, NULL, replica_thread, &team->replica[k]);
        if (err) {
            status = hw_fail_errno(err, "DataParallel: cannot start the thread of replica %d of %d (%d started)", k,
                                   replicas, team->threads);
        } else {
            team->threads++;
        }
    }
    if (status != HW_OK) {
        hw_dp_team_close(team);
        return HW_ERR;
    }
    launch_set(team, LAUNCH_GO);
    *out = team;
    return HW_OK;
}

// Undoes what hw_dp_team_open did, however far it got.
void hw_dp_team_close(hw_dp_team *team) {
    if (!team) return;
    if (team->launch == LAUNCH_GO) {  // only this thread writes it
        // Every thread is in its loop: release them from `start` with quit set.
        team->quit = 1;
        pthread_barrier_wait(&team->start);
    } else {
        // The set-up failed: the threads that started wait at `launch` and leave on ABORT.
        launch_set(team, LAUNCH_ABORT);
    }
    for (int k = 1; k <= team->threads; k++) pthread_join(team->replica[k].thread, NULL);
    pthread_cond_destroy(&team->launched);
    pthread_mutex_destroy(&team->launch_lock);
    if (team->barriers > 0) pthread_barrier_destroy(&team->start);
    if (team->barriers > 1) pthread_barrier_destroy(&team->finish);
    for (int k = 0; k < team->replicas; k++) hw_workspace_free(&team->replica[k].ws);
    free(team->replica);
    free(team);
}

// ---- the trainer: hw_dp_team + SGD + a loader, driven by dataparallel_loop.c ----

typedef struct {
    hw_dp_team *team;
    hw_sgd opt;
    hw_model *model;
    const hw_train_config *config;
    const hw_train_inputs *in;
    hw_loader *loader;  // this epoch's batches
    float *rank_sum;    // across ranks: the weighted gradient, then the step's outcome (hw_dp_outcome_write)
    int64_t steps;      // steps taken in this run
    int stop_agreed;    // across ranks: the stop signal some rank saw, agreed at the last step
    // The optimizer state kept in checkpoints (hw_optim_kept), when the run resumes or saves: the
    // velocity and each replica's dropout generator at the last epoch end. NULL: none.
    hw_optim_state *optim;
} cpu_trainer;

// A replica's dropout seed in one process, as hw_dp_team_open seeds it.
static uint64_t replica_seed(const hw_train_config *config, int k) { return hw_worker_seed(config->seed, k); }

// The optimizer state: restored from --resume into the optimizer and the replicas when it matches
// the run (the one-line message otherwise), and kept up to date for --save at each epoch end.
static int optim_open(cpu_trainer *t, hw_optim_state *optim) {
    const hw_train_config *config = t->config;
    if (!hw_optim_kept(config) || (!config->resume_path && !config->save_path)) return HW_OK;
    if (hw_optim_state_open(optim, config, t->model->n_weights, replica_seed) != HW_OK) return HW_ERR;
    t->optim = optim;
    if (hw_optim_state_resume(optim, config, t->model) != HW_OK) return HW_ERR;
    if (!optim->restored) return HW_OK;
    for (int k = 0; k < t->team->replicas; k++) t->team->replica[k].ws.rng = optim->dropout[k];
    if (t->opt.velocity) memcpy(t->opt.velocity, optim->velocities, sizeof(float) * optim->n_weights);
    return HW_OK;
}

// At an epoch end (or a stop, whose save then drops it): the state for the epoch's checkpoint.
static void optim_capture(cpu_trainer *t) {
    hw_optim_state *optim = t->optim;
    if (!optim) return;
    for (int k = 0; k < optim->workers; k++) optim->dropout[k] = t->team->replica[k].ws.rng;
    if (optim->n_velocities) memcpy(optim->velocities, t->opt.velocity, sizeof(float) * optim->n_weights);
    optim->valid = 1;
}

// DataParallel across the ranks of an mpirun job: every rank loads the same global batch (same
// order, same seed), trains chunk `rank` of it on its replicas, and the chunk gradients, weighted
// by chunk size, are summed over the ranks (MPI_Allreduce, src/comm/mpi/dataparallel_sum.c): the gradient of
// the whole batch's mean loss, as one process would compute it, up to float rounding. Every rank
// then takes the same SGD step on the same bits. The loss sum and a count of diverged replicas
// travel in the same message.
static int ranks_step(cpu_trainer *t, const float *x, const uint8_t *y, int batch, float *loss, int *diverged) {
    const hw_world *world = &t->config->world;
    const size_t n = t->model->n_weights;
    float *sum = t->rank_sum;
    int offset, count, local_diverged = -1;
    float local_loss_sum = 0, diverged_loss = 0;
    hw_dp_chunk(batch, world->size, world->rank, &offset, &count);
    if (count > 0) {
        const float *grads;
        int64_t sample_floats = hw_shape_numel(t->model->input);
        float local_loss = hw_dp_team_step(t->team, x + (int64_t)offset * sample_floats, y + offset, count, &grads);
        local_diverged = hw_dp_team_diverged(t->team);
        if (local_diverged >= 0) diverged_loss = t->team->replica[local_diverged].loss;
        const float scale = (float)count / (float)batch;
        for (size_t i = 0; i < n; i++) sum[i] = scale * grads[i];
        local_loss_sum = local_loss * (float)count;
    } else {
        memset(sum, 0, sizeof(float) * n);  // more ranks than samples in this (last) batch
    }
    // The gradient and the step's outcome (loss, divergence, stop: hw_dp_outcome_write) in one sum.
    hw_dp_outcome_write(sum + n, local_loss_sum, local_diverged);
    if (hw_comm_sum(sum, n + HW_DP_OUTCOME_FLOATS, t->config->sync_timeout) != HW_OK) return -1;
    *loss = sum[n + HW_DP_OUTCOME_LOSS_SUM] / (float)batch;
    if (hw_dp_outcome_agree(sum + n, local_diverged, world, t->config->replicas, &t->stop_agreed, diverged,
                            &diverged_loss) != HW_OK) {
        return -1;
    }
    if (*diverged >= 0) {  // no step: the weights stay the last finite ones
        *loss = diverged_loss;
        return batch;
    }
    hw_sgd_step(&t->opt, t->model, t->model->weights, sum);
    return batch;
}

// ---- hw_dp_trainer: the steps the epoch driver takes (dataparallel_loop.h) ----

static int cpu_begin_epoch(void *ctx, const int64_t *order, int64_t n) {
    cpu_trainer *t = ctx;
    return hw_loader_open(&t->loader, &t->in->train, order, n, t->config->batch_size, t->in->norm, t->config->prefetch);
}

// One synchronous step over the epoch's next batch (hw_dp_trainer.step), on the team's replicas.
static int cpu_step(void *ctx, float lr, float *loss, int *diverged) {
    cpu_trainer *t = ctx;
    t->opt.lr = lr;
    const float *x;
    const uint8_t *y;
    int batch = hw_loader_next(t->loader, &x, &y);
    if (batch <= 0) return batch;
    t->steps++;
    if (t->config->world.size > 1) return ranks_step(t, x, y, batch, loss, diverged);
    const float *grads;
    *loss = hw_dp_team_step(t->team, x, y, batch, &grads);
    // A diverged loss: no step, so that the weights stay the last finite ones. The loss reported is
    // the replica's (the batch's mean can be below the bound that one replica's loss is above).
    *diverged = hw_dp_team_diverged(t->team);
    if (*diverged >= 0) {
        *loss = t->team->replica[*diverged].loss;
        return batch;
    }
    // One step on the primary weights, which every replica reads: the broadcast.
    hw_sgd_step(&t->opt, t->model, t->model->weights, grads);
    return batch;
}

static void cpu_end_epoch(void *ctx) {
    cpu_trainer *t = ctx;
    hw_loader_close(t->loader);
    t->loader = NULL;
    optim_capture(t);
}

// Across ranks the stop signal agreed at the last step (ranks_step).
static int cpu_stop(void *ctx) {
    const cpu_trainer *t = ctx;
    return t->config->world.size > 1 ? t->stop_agreed : hw_stop_signal();
}

// The primary's weights, which every replica reads. Across ranks, every evaluation point (every
// epoch end among them) first checks that the ranks still hold the same weights, bit for bit:
// they took the same steps from the same sums. Not the snapshot of a stopped run, which only rank
// 0 takes (to save it).
static int cpu_snapshot(void *ctx, hw_run_outputs *outputs) {
    cpu_trainer *t = ctx;
    if (t->config->world.size > 1 && !t->stop_agreed) {
        char when[96];
        snprintf(when, sizeof when, "an evaluation point (%lld steps into the run)", (long long)t->steps);
        if (hw_comm_weights_agree(t->model->weights, t->model->n_weights, when) != HW_OK) return HW_ERR;
    }
    hw_run_outputs_snapshot(outputs, t->model->weights);
    return HW_OK;
}

int hw_train_dataparallel(const hw_train_config *config, hw_train_inputs *in, hw_train_result *result) {
    if (config->device.type == HW_DEVICE_CUDA) return hw_gpu_train_dataparallel(config, in, result);
    memset(result, 0, sizeof *result);
    hw_model *model = &in->model;
    if (hw_model_alloc_weights(model) != HW_OK) return HW_ERR;
    int first_epoch;
    int64_t samples_before;
    if (hw_train_start_weights(config, model, &first_epoch, &samples_before) != HW_OK) return HW_ERR;

    cpu_trainer t = {.model = model, .config = config, .in = in};
    hw_run_outputs outputs = {0};
    const hw_world *world = &config->world;
    int status =
        hw_sgd_init(&t.opt, model->n_weights, config->lr, config->momentum, config->weight_decay, config->nesterov);
    // Across ranks: MPI before the replica threads (it starts threads of its own), and each rank's
    // replicas take chunks of the rank's chunk of the batch, with seeds of their own in the world.
    int rank_batch = config->batch_size;
    uint64_t team_seed = config->seed;
    if (status == HW_OK && world->size > 1) {
        status = hw_comm_init(world, config->sync_timeout);
        if (status == HW_OK) status = hw_run_check_ranks(config, in, first_epoch, samples_before);
        rank_batch = (config->batch_size + world->size - 1) / world->size;
        // Rank 0's replicas draw the masks of a single process's; the others' differ (rank in the high bits).
        team_seed = config->seed ^ ((uint64_t)world->rank << 40);
        t.rank_sum = malloc(sizeof(float) * (model->n_weights + HW_DP_OUTCOME_FLOATS));
        if (status == HW_OK && !t.rank_sum) status = hw_fail("out of memory for the gradient sum across ranks");
        if (status == HW_OK) status = hw_comm_weights_agree(model->weights, model->n_weights, "the start");
    }
    if (status == HW_OK) status = hw_run_outputs_open(&outputs, config, in, first_epoch, samples_before);
    outputs.distributed = config->world.size > 1;  // every rank evaluates a share: none waits for rank 0
    if (status == HW_OK) status = hw_dp_team_open(&t.team, model, config->replicas, rank_batch, team_seed);
    hw_optim_state optim = {0};
    if (status == HW_OK) status = optim_open(&t, &optim);
    outputs.optim = config->save_path ? t.optim : NULL;
    if (status == HW_OK) status = hw_run_outputs_first_point(&outputs, model->weights, first_epoch);
    hw_dp_trainer steps = {.ctx = &t,
                           .begin_epoch = cpu_begin_epoch,
                           .step = cpu_step,
                           .end_epoch = cpu_end_epoch,
                           .stop = cpu_stop,
                           .snapshot = cpu_snapshot};
    if (status == HW_OK) status = hw_dp_loop_run(&steps, in, first_epoch, &outputs, result);
    hw_dp_team_close(t.team);
    hw_run_outputs_close(&outputs);
    if (t.optim) hw_optim_state_close(t.optim);
    hw_sgd_free(&t.opt);
    free(t.rank_sum);
    return status;
}
