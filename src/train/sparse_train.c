// sparse_train: the epochs of the sparse models' two trainers (src/train/sparse_epoch.h) and their
// evaluation (include/hw/sparse_train.h); the run around the epochs is sparse_run.c's.
//
// Hogwild: the weights are one shared mapping (hw_shm_open) made before the workers are forked.
// Each epoch the parent draws one permutation of the training examples (seeded by the seed and
// the epoch), forks the workers, each of which takes its share of it and, batch by batch, runs
// the forward on the shared weights as it reads them, its backward into its own sparse gradient,
// and the step onto the shared weights, writing the touched rows only, with no lock (the race
// between workers is the algorithm). The join is the epoch's barrier; the parent then evaluates
// the weights, which nobody writes until the next fork. Worker k's velocity is the k-th buffer of
// the shared mapping (job->velocities), so that it outlives the worker: the worker of rank k
// forked at the next epoch goes on with it, as a dense Hogwild worker keeps its own across epochs,
// and the run's checkpoints save it (sparse_run.c). With one worker the run is a plain SGD loop, bit for bit the same every time.
//
// The learning-rate schedule (--lr-schedule, --warmup) is a function of the run's samples, as
// the dense trainers': the Hogwild workers add each batch to one count in the shared mapping and
// take the rate at the count before their step; DataParallel counts its steps' batches.
//
// DataParallel: in one process, each step's batch (the whole batch, of batch_size examples of
// the permutation) is split between the replicas; each replica computes its part's gradient of
// the batch's mean loss into its own sparse gradient, the replicas' gradients are summed into the
// first (over the union of their touched features) and one step is taken, as the dense
// DataParallel trainer does; its one velocity, the mapping's first buffer, goes on across epochs.
#include "sparse_epoch.h"

#include "hw/clock.h"
#include "hw/err.h"
#include "hw/rng.h"
#include "hw/signals.h"
#include "hw/spawn.h"

#include <stdlib.h>
#include <string.h>

enum { EVAL_BATCH = 256 };

void hw_sparse_evaluate(const hw_sparse_model *model, const float *weights, const hw_sparse_set *set, double *loss,
                        int64_t *correct) {
    int64_t rows[EVAL_BATCH];
    float z[EVAL_BATCH], *s = malloc((hw_fm_scratch_floats(&model->dims, EVAL_BATCH) + 1) * sizeof *s);
    double sum = 0;
    *correct = 0;
    for (int64_t e = 0; e < set->n; e += EVAL_BATCH) {
        int batch = (int)(set->n - e < EVAL_BATCH ? set->n - e : EVAL_BATCH);
        for (int k = 0; k < batch; k++) rows[k] = e + k;
        hw_sparse_batch x = {batch, rows, set->row_start, set->index, set->value};
        hw_fm_forward(z, s, weights, &x, &model->dims);
        sum += hw_sparse_loss_forward(model->loss, z, set->label + e, batch) * batch;
        *correct += hw_sparse_loss_correct(model->loss, z, set->label + e, batch);
    }
    free(s);
    *loss = sum / (double)set->n;
}

// The rate of a step over `batch` examples about to be taken: the schedule at the samples before
// it, which the batch is added to (config->lr, the count untouched, for a constant schedule).
static float step_lr(const sparse_job *job, int batch) {
    const hw_train_config *c = job->config;
    if (hw_lr_is_constant(&c->lr_schedule)) return c->lr;
    int64_t seen = atomic_fetch_add_explicit(job->samples, batch, memory_order_relaxed);
    return hw_train_lr(c, seen, job->train->n);
}

// The step onto the shared weights in the run's --update mode (hogwild_update.h: under the lock,
// or each write an atomic add, or neither); with --measure, measured (hogwild_measure.h), the wait
// for the lock in its time, and its applied increments summed.
static int step_write(const sparse_job *job, hw_sparse_grad *g, const hw_sgd *opt, measure_worker *measured) {
    double begin = measured ? hw_now() : 0;
    if (hogwild_update_begin(&job->update) != HW_OK) return HW_ERR;
    measure_mark mark;
    if (measured) measure_update_enter(measured, &mark, begin);
    double *applied = measured ? measured->applied : NULL;
    mark.written = g->n_touched * (1 + (int64_t)job->model->dims.rank) + 1;  // its rows, and w0 (the step clears g)
    if (job->update.mode == HW_UPDATE_ATOMIC) {
        hw_sparse_grad_step_atomic(g, opt, job->weights, applied);
    } else {
        hw_sparse_grad_step(g, opt, job->weights, NULL, applied);
    }
    if (measured) measure_update_leave(measured, &mark);
    hogwild_update_end(&job->update);
    return HW_OK;
}

// The run's optimizer in *opt, whose velocity is the shared buffer `slot` (a worker's rank, or 0
// for DataParallel), left as the last epoch's steps left it; nothing to free.
static int sgd_open(const sparse_job *job, int slot, hw_sgd *opt) {
    const hw_train_config *c = job->config;
    // n = 0: the settings' check alone, no buffer of its own.
    if (hw_sgd_init(opt, 0, c->lr, c->momentum, c->weight_decay, c->nesterov) != HW_OK) return HW_ERR;
    size_t n_weights = hw_fm_n_weights(&job->model->dims);
    opt->velocity = job->velocities ? job->velocities + (size_t)slot * n_weights : NULL;
    return HW_OK;
}

// The examples order[begin .. end) in batches of `batch`, each a step of worker `rank` (its
// velocity's slot), counted in `tally`; `measured`: the worker's --measure counts, or NULL.
static int shard_train(const sparse_job *job, int rank, int64_t begin, int64_t end, sparse_tally *tally,
                       measure_worker *measured) {
    const hw_train_config *c = job->config;
    const hw_fm_dims *d = &job->model->dims;
    hw_sparse_grad g;
    hw_sgd opt;
    if (sgd_open(job, rank, &opt) != HW_OK) return HW_ERR;
    if (hw_sparse_grad_alloc(&g, d) != HW_OK) return HW_ERR;
    int b = c->batch_size;
    float *buf = malloc(((size_t)b * 3 + hw_fm_scratch_floats(d, b) + 1) * sizeof *buf);
    float *z = buf, *y = buf + b, *dz = buf + 2 * b, *s = buf + 3 * b;
    int rc = buf ? HW_OK : hw_fail("out of memory for a batch of %d examples", b);
    for (int64_t at = begin; rc == HW_OK && at < end; at += b) {
        int batch = (int)(end - at < b ? end - at : b);
        hw_sparse_batch x = {batch, job->order + at, job->train->row_start, job->train->index, job->train->value};
        for (int k = 0; k < batch; k++) y[k] = job->train->label[x.rows[k]];
        if (measured) {
            measure_weights_read(measured);  // the forward reads the shared weights as they are now
            measure_step_begin(measured);
        }
        hw_fm_forward(z, s, job->weights, &x, d);
        tally->loss_sum += hw_sparse_loss_forward(job->model->loss, z, y, batch) * batch;
        hw_sparse_loss_backward(job->model->loss, dz, z, y, batch);
        hw_fm_backward(&g, dz, s, job->weights, &x);
        opt.lr = step_lr(job, batch);
        rc = step_write(job, &g, &opt, measured);
        if (rc == HW_OK) tally->samples += batch;
    }
    free(buf);
    hw_sparse_grad_free(&g);
    return rc;
}

static int hogwild_worker(int rank, void *arg) {
    const sparse_job *job = arg;
    int64_t n = job->train->n, workers = job->config->workers;
    measure_worker measured;
    if (job->measure) measure_worker_open(&measured, job->measure, rank);
    return shard_train(job, rank, n * rank / workers, n * (rank + 1) / workers, &job->tally[rank],
                       job->measure ? &measured : NULL);
}

// The join stops and reaps the workers on a stop signal; the weights keep what they wrote.
static int hogwild_epoch(sparse_job *job, int *stopped_by) {
    hw_spawn_ctx ctx;
    if (hw_spawn(&ctx, hogwild_worker, job, job->config->workers) != HW_OK) return HW_ERR;
    hw_join_status status = hw_join(&ctx, -1);
    char why[1200];
    int rc = HW_OK;
    if (status == HW_JOIN_FAILED) rc = hw_fail("%s", hw_spawn_describe_failure(&ctx, why, sizeof why));
    if (status == HW_JOIN_INTERRUPTED) *stopped_by = ctx.interrupt_signal;
    hw_spawn_free(&ctx);
    return rc;
}

// One DataParallel epoch: steps of batch_size examples, split between the replicas; a stop signal
// is seen between two steps.
static int dataparallel_epoch(sparse_job *job, int *stopped_by) {
    const hw_train_config *c = job->config;
    const hw_fm_dims *d = &job->model->dims;
    int replicas = c->replicas, b = c->batch_size, rc = HW_OK;
    hw_sparse_grad *g = calloc((size_t)replicas, sizeof *g);
    float *buf = malloc(((size_t)b * 3 + hw_fm_scratch_floats(d, b) + 1) * sizeof *buf);
    hw_sgd opt;
    int have_opt = sgd_open(job, 0, &opt) == HW_OK;
    for (int r = 0; r < replicas && have_opt && rc == HW_OK; r++) rc = hw_sparse_grad_alloc(&g[r], d);
    if (!have_opt || rc != HW_OK || !buf) rc = hw_fail("cannot allocate the replicas' gradients");
    float *z = buf, *y = buf + b, *dz = buf + 2 * b, *s = buf + 3 * b;
    for (int64_t at = 0; rc == HW_OK && at < job->train->n && !(*stopped_by = hw_stop_signal()); at += b) {
        int batch = (int)(job->train->n - at < b ? job->train->n - at : b);
        for (int r = 0; r < replicas; r++) {
            int first = batch * r / replicas, part = batch * (r + 1) / replicas - first;
            if (part == 0) continue;
            hw_sparse_batch x = {part, job->order + at + first, job->train->row_start, job->train->index,
                                 job->train->value};
            for (int k = 0; k < part; k++) y[k] = job->train->label[x.rows[k]];
            hw_fm_forward(z, s, job->weights, &x, d);
            job->tally->loss_sum += hw_sparse_loss_forward(job->model->loss, z, y, part) * part;
            hw_sparse_loss_backward(job->model->loss, dz, z, y, part);
            for (int k = 0; k < part; k++) dz[k] *= (float)part / (float)batch;  // the whole batch's mean
            hw_fm_backward(&g[r], dz, s, job->weights, &x);
        }
        for (int r = 1; r < replicas; r++) hw_sparse_grad_add(&g[0], &g[r]);
        opt.lr = step_lr(job, batch);
        hw_sparse_grad_step(&g[0], &opt, job->weights, NULL, NULL);
        job->tally->samples += batch;
    }
    for (int r = 0; r < replicas; r++) hw_sparse_grad_free(&g[r]);
    free(g);
    free(buf);
    return rc;
}

int sparse_epoch_train(sparse_job *job, int *stopped_by) {
    int tallies = job->config->mode == HW_MODE_HOGWILD ? job->config->workers : 1;
    memset(job->tally, 0, (size_t)tallies * sizeof *job->tally);
    *stopped_by = 0;
    return job->config->mode == HW_MODE_HOGWILD ? hogwild_epoch(job, stopped_by) : dataparallel_epoch(job, stopped_by);
}

void sparse_order_draw(int64_t *order, int64_t n, uint64_t seed, int epoch) {
    hw_rng rng;
    hw_rng_seed(&rng, seed, 1000 + (uint64_t)epoch);
    for (int64_t i = 0; i < n; i++) order[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(((uint64_t)hw_rng_u32(&rng) << 32 | hw_rng_u32(&rng)) % (uint64_t)(i + 1));
        int64_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}
