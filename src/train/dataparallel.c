// dataparallel: the synchronous trainer. One process; K replicas run forward and backward on
// K chunks of every batch in parallel; their gradients are reduced onto the primary; one SGD
// step; the new weights are what every replica reads next step.
//
// CPU replicas are threads of this process. They all read the primary's weight buffer, which
// no one writes while they compute, so the broadcast after the step costs nothing. (GPU
// replicas, each with its own copy of the weights, are in dataparallel_cuda.c.)
#include "hw/train.h"

#include "dp_loop.h"
#include "hw/err.h"
#include "hw/optim.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct dp_replica dp_replica;

struct hw_dp_team {
    const hw_model *model;
    int replicas;
    pthread_barrier_t start;    // the main thread has put a batch in place
    pthread_barrier_t finish;   // every replica has its gradient
    const float *x;             // the current batch
    const uint8_t *y;
    int batch;
    int quit;                   // set before the last `start`: the threads leave
    dp_replica *replica;
};
typedef hw_dp_team dp_team;

struct dp_replica {
    dp_team *team;
    int rank;
    hw_workspace ws;            // its activations and its gradient buffer
    int offset, count;          // its chunk of the current batch
    float loss;                 // mean loss over its chunk
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
    r->loss = hw_model_forward(team->model, &r->ws, x, y, r->count, 1);
    hw_model_backward(team->model, &r->ws, y, r->count);
}

static void *replica_thread(void *arg) {
    dp_replica *r = arg;
    dp_team *team = r->team;
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

int hw_dp_team_open(hw_dp_team **out, const hw_model *model, int replicas, int batch_size, uint64_t seed) {
    hw_dp_team *team = calloc(1, sizeof *team);
    *out = team;
    if (!team) return hw_fail("out of memory for %d replicas", replicas);
    team->model = model;
    team->replicas = replicas;
    team->replica = calloc((size_t)replicas, sizeof(dp_replica));
    if (!team->replica) return hw_fail("out of memory for %d replicas", replicas);
    int chunk = (batch_size + replicas - 1) / replicas;
    for (int k = 0; k < replicas; k++) {
        team->replica[k].team = team;
        team->replica[k].rank = k;
        if (hw_workspace_alloc(&team->replica[k].ws, model, chunk, hw_worker_seed(seed, k)) != HW_OK) {
            return hw_error_prefix("replica %d", k);
        }
    }
    pthread_barrier_init(&team->start, NULL, (unsigned)replicas);
    pthread_barrier_init(&team->finish, NULL, (unsigned)replicas);
    for (int k = 1; k < replicas; k++) {
        int err = pthread_create(&team->replica[k].thread, NULL, replica_thread, &team->replica[k]);
        if (err) return hw_fail_errno(err, "cannot start the thread of replica %d", k);
    }
    return HW_OK;
}

void hw_dp_team_close(hw_dp_team *team) {
    if (!team) return;
    if (!team->replica) {
        free(team);
        return;
    }
    team->quit = 1;
    pthread_barrier_wait(&team->start);
    for (int k = 1; k < team->replicas; k++) pthread_join(team->replica[k].thread, NULL);
    pthread_barrier_destroy(&team->start);
    pthread_barrier_destroy(&team->finish);
    for (int k = 0; k < team->replicas; k++) hw_workspace_free(&team->replica[k].ws);
    free(team->replica);
    free(team);
}

// ---- the trainer: hw_dp_team + SGD + a loader, driven by dp_loop.c ----

typedef struct {
    hw_dp_team *team;
    hw_sgd opt;
    hw_model *model;
    const hw_train_config *config;
    const hw_run_inputs *in;
    hw_loader *loader;          // this epoch's batches
} cpu_trainer;

static int cpu_begin_epoch(void *arg, const int64_t *order, int64_t n) {
    cpu_trainer *t = arg;
    return hw_loader_open(&t->loader, &t->in->train, order, n, t->config->batch_size, t->in->norm,
                          t->config->prefetch);
}

static int cpu_step(void *arg, float *loss) {
    cpu_trainer *t = arg;
    const float *x;
    const uint8_t *y;
    int batch = hw_loader_next(t->loader, &x, &y);
    if (batch <= 0) return batch;
    const float *grads;
    *loss = hw_dp_team_step(t->team, x, y, batch, &grads);
    // One step on the primary weights, which every replica reads: the broadcast.
    hw_sgd_step(&t->opt, t->model, t->model->weights, grads);
    return batch;
}

static void cpu_end_epoch(void *arg) {
    cpu_trainer *t = arg;
    hw_loader_close(t->loader);
    t->loader = NULL;
}

static int cpu_snapshot(void *arg, hw_train_log *log) {
    cpu_trainer *t = arg;
    hw_train_log_snapshot(log, t->model->weights);
    return HW_OK;
}

int hw_train_dataparallel(const hw_train_config *config, hw_run_inputs *in, hw_train_result *result) {
    if (config->device.type == HW_DEVICE_CUDA) return hw_train_dataparallel_cuda(config, in, result);
    memset(result, 0, sizeof *result);
    hw_model *model = &in->model;
    if (hw_model_alloc_weights(model) != HW_OK) return HW_ERR;
    int first_epoch;
    int64_t samples_before;
    if (hw_train_start_weights(config, model, &first_epoch, &samples_before) != HW_OK) return HW_ERR;

    cpu_trainer t = {.model = model, .config = config, .in = in};
    hw_train_log log = {0};
    int status = hw_sgd_init(&t.opt, model->n_weights, config->lr, config->momentum, config->weight_decay,
                             config->nesterov);
    if (status == HW_OK) status = hw_train_log_open(&log, config, in, first_epoch, samples_before);
    if (status == HW_OK) status = hw_dp_team_open(&t.team, model, config->workers, config->batch_size, config->seed);
    if (status == HW_OK && config->metrics_path) {
        // The first point of the curve: the weights before this run's training.
        hw_train_log_snapshot(&log, model->weights);
        status = hw_train_log_evaluate(&log, first_epoch, 0, 0, 0);
    }
    static const hw_dp_ops cpu_ops = {cpu_begin_epoch, cpu_step, cpu_end_epoch, cpu_snapshot};
    if (status == HW_OK) status = hw_dp_run(config, in, first_epoch, &log, &cpu_ops, &t, result);
    hw_dp_team_close(t.team);
    hw_train_log_close(&log);
    hw_sgd_free(&t.opt);
    return status;
}
