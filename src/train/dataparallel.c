// dataparallel: the synchronous trainer. One process; K replicas run forward and backward on
// K chunks of every batch in parallel; their gradients are reduced onto the primary; one SGD
// step; the new weights are what every replica reads next step.
//
// CPU replicas are threads of this process. They all read the primary's weight buffer, which
// no one writes while they compute, so the broadcast after the step costs nothing. (GPU
// replicas, each with its own copy of the weights, are in dataparallel_cuda.c.)
#include "hw/train.h"

#include "hw/ckpt.h"
#include "hw/err.h"
#include "hw/optim.h"

#include <pthread.h>
#include <signal.h>
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

// Chunk k of a batch of B split K ways: sizes differ by at most one; with K > B some are empty.
static void chunk_of(int batch, int replicas, int k, int *offset, int *count) {
    int base = batch / replicas, extra = batch % replicas;
    *count = base + (k < extra ? 1 : 0);
    *offset = k * base + (k < extra ? k : extra);
}

// Forward and backward of one replica on its chunk.
static void replica_step(dp_replica *r) {
    dp_team *team = r->team;
    chunk_of(team->batch, team->replicas, r->rank, &r->offset, &r->count);
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
        if (hw_workspace_alloc(&team->replica[k].ws, model, chunk, seed * 1000003u + (uint64_t)k) != HW_OK) {
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

// ---- Ctrl-C: finish the step, save, leave ----

static volatile sig_atomic_t interrupt_signal;

static void on_interrupt(int sig) { interrupt_signal = sig; }

int hw_train_dataparallel(const hw_train_config *config, hw_run_inputs *in, hw_train_result *result) {
    if (config->device.type == HW_DEVICE_CUDA) return hw_train_dataparallel_cuda(config, in, result);
    memset(result, 0, sizeof *result);
    hw_model *model = &in->model;
    if (hw_model_alloc_weights(model) != HW_OK) return HW_ERR;
    int first_epoch = 0;
    int64_t samples_before = 0;
    if (config->resume_path) {
        hw_ckpt_meta meta;
        if (hw_ckpt_load(config->resume_path, model, model->weights, &meta) != HW_OK) return HW_ERR;
        first_epoch = meta.epoch;
        samples_before = meta.samples_seen;
        if (first_epoch >= config->epochs) {
            return hw_fail("the checkpoint %s has already trained %d epoch(s); ask for more with --epochs",
                           config->resume_path, first_epoch);
        }
    } else {
        hw_model_init_weights(model, config->seed);
    }

    hw_sgd opt = {0};
    hw_dp_team *team = NULL;
    hw_train_log log = {0};
    int64_t *order = malloc(sizeof(int64_t) * (size_t)in->train.n);
    int status = order ? HW_OK : hw_fail("out of memory for the sample order");
    if (status == HW_OK) {
        status = hw_sgd_init(&opt, model->n_weights, config->lr, config->momentum, config->weight_decay,
                             config->nesterov);
    }
    if (status == HW_OK) status = hw_train_log_open(&log, config, in, first_epoch, samples_before);
    if (status == HW_OK) status = hw_dp_team_open(&team, model, config->workers, config->batch_size, config->seed);
    if (status == HW_OK && config->metrics_path) {
        hw_train_log_snapshot(&log, model->weights);
        status = hw_train_log_evaluate(&log, first_epoch, 0, 0, 0);
    }

    struct sigaction action = {.sa_handler = on_interrupt}, old_int, old_term;
    sigemptyset(&action.sa_mask);
    interrupt_signal = 0;
    sigaction(SIGINT, &action, &old_int);
    sigaction(SIGTERM, &action, &old_term);

    log.started = hw_now();
    int64_t samples = 0, next_eval = config->eval_every;
    double loss_sum = 0;
    int epochs_done = first_epoch;
    for (int epoch = first_epoch; status == HW_OK && epoch < config->epochs && !interrupt_signal; epoch++) {
        // One sampler replica: DataParallel splits each batch, not the dataset.
        hw_sampler_shard(order, in->train.n, 1, 0, epoch, config->seed);
        hw_loader *loader;
        status = hw_loader_open(&loader, &in->train, order, in->train.n, config->batch_size, in->norm,
                                config->prefetch);
        if (status != HW_OK) break;
        const float *x;
        const uint8_t *y;
        int batch;
        while (!interrupt_signal && (batch = hw_loader_next(loader, &x, &y)) > 0) {
            const float *grads;
            float loss = hw_dp_team_step(team, x, y, batch, &grads);
            hw_sgd_step(&opt, model, model->weights, grads);
            samples += batch;
            loss_sum += (double)loss * batch;
            hw_progress_update(&log.progress, epoch + 1, config->epochs, samples, loss);
            // A mid-epoch point of the curve; one that falls on the epoch's end is the epoch-end
            // row, written once below.
            int64_t epoch_end_samples = (int64_t)(epoch - first_epoch + 1) * in->train.n;
            if (next_eval > 0 && samples >= next_eval && samples < epoch_end_samples) {
                hw_train_log_snapshot(&log, model->weights);
                status = hw_train_log_evaluate(&log, epoch, samples, loss_sum, 0);
                while (next_eval <= samples) next_eval += config->eval_every;
                if (status != HW_OK) break;
            }
        }
        hw_loader_close(loader);
        if (status != HW_OK) break;
        // A signal after the epoch's last step: the epoch is done all the same.
        if (samples == (int64_t)(epoch + 1 - first_epoch) * in->train.n) epochs_done = epoch + 1;
        if (interrupt_signal) break;
        if (epochs_done == config->epochs) log.trained = hw_now();
        hw_train_log_snapshot(&log, model->weights);
        status = hw_train_log_evaluate(&log, epochs_done, samples, loss_sum, 1);
        while (next_eval > 0 && next_eval <= samples) next_eval += config->eval_every;
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);

    if (status == HW_OK && interrupt_signal) {
        result->interrupted_by = interrupt_signal;
        hw_progress_message(&log.progress, "interrupted by %s after %lld samples\n",
                            interrupt_signal == SIGINT ? "SIGINT" : "SIGTERM", (long long)samples);
        if (config->save_path) {
            status = hw_train_log_save(&log, model->weights, epochs_done, samples);
            if (status == HW_OK) hw_progress_message(&log.progress, "saved the current weights to %s\n", config->save_path);
        }
    } else if (status == HW_OK) {
        hw_train_log_finish(&log, samples, result);
    }
    hw_dp_team_close(team);
    hw_train_log_close(&log);
    hw_sgd_free(&opt);
    free(order);
    return status;
}
