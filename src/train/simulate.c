// simulate: N virtual Hogwild workers in one process, each gradient computed on stale weights
// (include/hw/simulate.h). A trainer behind the DataParallel epoch driver's table (hw_dp_trainer,
// dataparallel_loop.h), which gives it the evaluations, metrics, checkpoints, divergence checks
// and Ctrl-C of every other run.
//
// What a virtual worker is: worker k of a real run of N workers. Its shard of each epoch is
// hw_sampler_shard's for rank k of N (positions k, k + N, ... of the epoch's permutation, which
// the driver hands over whole: the sampler deals that same permutation out round-robin), taken in
// batches of --batch-size in order, the last one partial; its dropout generator is seeded as a
// real worker's (hw_worker_seed) and kept across epochs.
//
// The interleaving: every step, a generator seeded from the run's seed and the epoch picks the
// worker that steps next, uniformly among those with batches left (workers of equal speed).
//
// The staleness: the step's delay D comes from the delay model (its own generator, seeded from
// the seed and the epoch), clamped to the steps taken so far this epoch (the epoch starts from
// the weights the run evaluated and saved: nothing older). Forward and backward run on the
// weights as they were D steps ago; the update (hw_sgd_step, the rule real workers use) lands on
// the current weights. The old weights are a ring of K copies, K the model's largest delay: with
// the current weights, K + 1 copies whatever N is.
//
// The optimiser is one: a single momentum buffer over all the steps, as serial SGD over the
// interleaved batches has. (Real workers each keep their own, which a simulation of N of them
// would pay N buffers for.) With one worker and delay 0 the run is a real run of one worker,
// bit for bit: the same batches in the same order, the same dropout draws, the same steps.
#include "hw/train.h"
#include "hw/run_outputs.h"

#include "dataparallel_loop.h"
#include "hw/err.h"
#include "hw/optim.h"
#include "hw/signals.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The streams of the two generators (hw_rng_seed), each plus the epoch: apart from the sampler's
// (the epoch itself) and every other stream of the run for any epoch count the options allow.
enum { PICK_STREAM = 0x696c7600 /* "ilv" */, DELAY_STREAM = 0x646c7900 /* "dly" */ };

typedef struct {
    hw_rng rng;     // its dropout draws: the workspace's generator while it steps
    int64_t next;   // its next sample, a position in its shard
    int64_t count;  // its shard's size this epoch
} sim_worker;

typedef struct {
    const hw_train_config *config;
    const hw_train_inputs *in;
    hw_model *model;
    hw_sgd opt;
    hw_workspace ws;  // one for all workers: a step is one worker's, start to end
    int workers;
    sim_worker *worker;
    int *alive;  // the workers with batches left this epoch, n_alive of them
    int n_alive;
    int epoch;             // the epoch under way
    const int64_t *order;  // its permutation (the driver's)
    float *ring;           // ring[(s % ring_len) * n_weights ...]: the weights before step s
    int ring_len;          // the delay model's largest delay
    int64_t t;             // steps taken this epoch
    hw_rng pick, delays;   // this epoch's interleaving and delays
    int64_t *indices;      // the batch's samples
    float *x;              // the batch's inputs
    uint8_t *y;            // and labels
    int64_t steps;         // steps taken in this run
    double delay_sum;      // the delays they were computed at, clamped
    int delay_most;        // the largest of them
} sim_trainer;

// ---- hw_dp_trainer: the steps the epoch driver takes ----

static int sim_begin_epoch(void *ctx, const int64_t *order, int64_t n) {
    sim_trainer *s = ctx;
    s->epoch++;
    s->order = order;
    s->t = 0;
    s->n_alive = 0;
    for (int k = 0; k < s->workers; k++) {
        s->worker[k].next = 0;
        s->worker[k].count = hw_sampler_shard_size(n, s->workers, k);
        if (s->worker[k].count > 0) s->alive[s->n_alive++] = k;
    }
    hw_rng_seed(&s->pick, s->config->seed, PICK_STREAM + (uint64_t)(uint32_t)s->epoch);
    hw_rng_seed(&s->delays, s->config->seed, DELAY_STREAM + (uint64_t)(uint32_t)s->epoch);
    return HW_OK;
}

// The next worker's next batch into s->x, s->y: its size; *who gets the worker. The worker leaves
// the interleaving with its last batch.
static int next_batch(sim_trainer *s, int *who) {
    int slot = (int)hw_rng_below(&s->pick, (uint32_t)s->n_alive);
    int k = s->alive[slot];
    sim_worker *w = &s->worker[k];
    int64_t left = w->count - w->next;
    int batch = left < s->config->batch_size ? (int)left : s->config->batch_size;
    // Position p of shard k is position k + p * N of the epoch's permutation (hw_sampler_shard).
    for (int i = 0; i < batch; i++) s->indices[i] = s->order[k + (w->next + i) * s->workers];
    w->next += batch;
    if (w->next == w->count) s->alive[slot] = s->alive[--s->n_alive];
    hw_batch_fill(&s->in->train, s->indices, batch, s->in->norm, s->x, s->y);
    *who = k;
    return batch;
}

// One virtual worker's step (hw_dp_trainer.step): its gradient at the drawn delay, the update on
// the current weights. A diverged loss takes no step and names the worker.
static int sim_step(void *ctx, float lr, float *loss, int *diverged) {
    sim_trainer *s = ctx;
    if (s->n_alive == 0) return 0;
    int k;
    int batch = next_batch(s, &k);
    int delay = hw_delay_draw(&s->config->delay, &s->delays);
    if (delay > s->t) delay = (int)s->t;
    const size_t n_weights = s->model->n_weights;
    hw_model read = *s->model;  // the weights the worker read: `delay` steps old
    if (delay > 0) read.weights = s->ring + (size_t)((s->t - delay) % s->ring_len) * n_weights;
    s->ws.rng = s->worker[k].rng;
    *loss = hw_cpu_forward(&read, &s->ws, s->x, s->y, batch, 1);
    if (hw_loss_diverged(*loss)) {
        s->worker[k].rng = s->ws.rng;
        *diverged = k;
        return batch;
    }
    int status = hw_cpu_backward(&read, &s->ws, s->y, batch);
    s->worker[k].rng = s->ws.rng;
    if (status != HW_OK) return -1;
    // The weights before this step join the ring (after the read: a delay of ring_len read the
    // slot this overwrites), then the step lands on the current ones.
    if (s->ring_len > 0) {
        memcpy(s->ring + (size_t)(s->t % s->ring_len) * n_weights, s->model->weights, sizeof(float) * n_weights);
    }
    s->opt.lr = lr;
    hw_sgd_step(&s->opt, s->model, s->model->weights, s->ws.grads);
    s->t++;
    s->steps++;
    s->delay_sum += delay;
    if (delay > s->delay_most) s->delay_most = delay;
    return batch;
}

static void sim_end_epoch(void *ctx) { (void)ctx; }

static int sim_stop(void *ctx) {
    (void)ctx;
    return hw_stop_signal();
}

static int sim_snapshot(void *ctx, hw_run_outputs *outputs) {
    const sim_trainer *s = ctx;
    hw_run_outputs_snapshot(outputs, s->model->weights);
    return HW_OK;
}

// ---- set-up ----

// Everything the steps need beside the model: HW_ERR (message set) when out of memory.
static int sim_open(sim_trainer *s, int first_epoch) {
    const hw_train_config *config = s->config;
    const hw_model *model = s->model;
    s->workers = config->simulate;
    s->epoch = first_epoch - 1;
    s->ring_len = config->delay.max;
    s->worker = calloc((size_t)s->workers, sizeof *s->worker);
    s->alive = calloc((size_t)s->workers, sizeof *s->alive);
    s->indices = malloc(sizeof(int64_t) * (size_t)config->batch_size);
    s->y = malloc((size_t)config->batch_size);
    void *x = NULL;
    size_t x_bytes = sizeof(float) * (size_t)config->batch_size * (size_t)hw_shape_numel(model->input);
    if (posix_memalign(&x, 64, x_bytes) != 0) x = NULL;
    s->x = x;
    if (s->ring_len > 0) s->ring = malloc(sizeof(float) * model->n_weights * (size_t)s->ring_len);
    if (!s->worker || !s->alive || !s->indices || !s->y || !s->x || (s->ring_len > 0 && !s->ring)) {
        return hw_fail("out of memory for %d virtual workers and %d old copies of the %zu weights", s->workers,
                       s->ring_len, model->n_weights);
    }
    if (hw_workspace_alloc(&s->ws, model, config->batch_size, config->seed) != HW_OK) return HW_ERR;
    // Each worker's dropout generator starts as a real worker's workspace's does.
    for (int k = 0; k < s->workers; k++) {
        hw_workspace_seed(&s->ws, hw_worker_seed(config->seed, k));
        s->worker[k].rng = s->ws.rng;
    }
    return hw_sgd_init(&s->opt, model->n_weights, config->lr, config->momentum, config->weight_decay, config->nesterov);
}

static void sim_close(sim_trainer *s) {
    hw_sgd_free(&s->opt);
    hw_workspace_free(&s->ws);
    free(s->worker);
    free(s->alive);
    free(s->indices);
    free(s->x);
    free(s->y);
    free(s->ring);
}

// The run's last line: the staleness it trained at, and what it kept for it.
static void sim_report(const sim_trainer *s, hw_run_outputs *outputs) {
    const hw_delay *delay = &s->config->delay;
    double mb = 4.0 * (double)s->model->n_weights * (double)(s->ring_len + 1) / (1024.0 * 1024.0);
    hw_progress_message(
        &outputs->progress,
        "simulated: %d virtual worker%s, %lld steps at delay %s (mean %.3g, at most %d); as applied "
        "(capped at the epoch's steps so far) mean %.3g, at most %d; %d cop%s of the weights (%.1f MiB)\n",
        s->workers, s->workers == 1 ? "" : "s", (long long)s->steps, delay->spec, hw_delay_mean(delay), delay->max,
        s->steps ? s->delay_sum / (double)s->steps : 0.0, s->delay_most, s->ring_len + 1, s->ring_len ? "ies" : "y",
        mb);
}

int hw_train_simulate(const hw_train_config *config, hw_train_inputs *in, hw_train_result *result) {
    memset(result, 0, sizeof *result);
    if (config->simulate < 1)
        return hw_fail("a simulation needs at least one virtual worker, got %d", config->simulate);
    if (config->world.size > 1 || config->device.type == HW_DEVICE_CUDA) {
        return hw_fail("a simulation runs in one process on the CPU");
    }
    hw_model *model = &in->model;
    if (hw_model_alloc_weights(model) != HW_OK) return HW_ERR;
    int first_epoch;
    int64_t samples_before;
    if (hw_train_start_weights(config, model, &first_epoch, &samples_before) != HW_OK) return HW_ERR;
    sim_trainer s = {.config = config, .in = in, .model = model};
    hw_run_outputs outputs = {0};
    int status = sim_open(&s, first_epoch);
    if (status == HW_OK) status = hw_run_outputs_open(&outputs, config, in, first_epoch, samples_before);
    if (status == HW_OK) status = hw_run_outputs_first_point(&outputs, model->weights, first_epoch);
    hw_dp_trainer steps = {.ctx = &s,
                           .begin_epoch = sim_begin_epoch,
                           .step = sim_step,
                           .end_epoch = sim_end_epoch,
                           .stop = sim_stop,
                           .snapshot = sim_snapshot,
                           .unit = "virtual worker"};
    if (status == HW_OK) status = hw_dp_loop_run(&steps, in, first_epoch, &outputs, result);
    if (status == HW_OK && !result->interrupted_by) sim_report(&s, &outputs);
    sim_close(&s);
    hw_run_outputs_close(&outputs);
    return status;
}
