// dataparallel_cuda: the synchronous trainer on GPUs (--mode dataparallel --gpus 0,1,...).
//
// One process, one thread; a replica per listed GPU, each a GPU model runner (hw_cuda_runner)
// with its own stream, weights, gradients and momentum. `--gpus 0,0` puts two replicas on one
// GPU, each with its own stream and its own copy of the weights, so the multi-replica path runs
// on a one-GPU machine too; without --gpus, --replicas K --device cuda:N puts K on cuda:N.
//
// A step over a batch of B samples:
//   1. chunk k of the batch (chunk_of, the CPU trainer's rule) goes to replica k, which runs
//      forward and backward on it; an empty chunk (K > B, or a last batch smaller than K) gives a
//      zero gradient;
//   2. each replica scales its gradient by count_k / B, and the gradients are all-reduced
//      (summed), so every replica holds the gradient of the whole batch's mean loss: NCCL across
//      distinct GPUs, peer/device copies and a sum kernel where NCCL cannot be used (two replicas
//      on one GPU; see hw_cuda_allreduce in cuda.h);
//   3. every replica applies the same SGD step to its own weights and momentum, as torch's
//      DistributedDataParallel does: the replicas start from the same weights and apply the same
//      reduced gradient with the same kernel, so they stay equal without a weight broadcast.
//      Evaluations and checkpoints read replica 0's weights.
// The next batch is gathered and its chunks queued (copy streams) before the current step runs,
// so the input copies overlap the compute. Each step ends with every stream drained (the loss).
#include "hw/train.h"

#include "dp_loop.h"
#include "hw/cuda.h"
#include "hw/err.h"
#include "train_cuda.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int replicas;
    hw_cuda_runner **runner;    // runner[k]: replica k
    int *devices;               // devices[k]: its CUDA ordinal
    float **grads;              // grads[k]: its device gradient buffer
    hw_cuda_stream *streams;    // streams[k]: its compute stream
    hw_cuda_allreduce *reduce;
    size_t n_weights;
    size_t sample_bytes;        // one uint8 sample
    uint8_t *x, *y;             // a gathered batch, host memory
    // This epoch, for dp_loop.c:
    const hw_train_config *config;
    const hw_dataset *train;
    const int64_t *order;       // the epoch's sample order
    int64_t n;
    int64_t pos;                // the next sample of `order` to queue
    int queued;                 // samples of the batch queued on the copy streams, 0 when none
    float *host_weights;        // the model's host buffer, for snapshots
} gpu_team;

static void team_close(gpu_team *team) {
    for (int k = 0; team->runner && k < team->replicas; k++) hw_cuda_runner_free(team->runner[k]);
    hw_cuda_allreduce_free(team->reduce);
    free(team->runner);
    free(team->devices);
    free(team->grads);
    free(team->streams);
    free(team->x);
    free(team->y);
    memset(team, 0, sizeof *team);
}

static int team_open(gpu_team *team, const hw_train_config *config, const hw_train_inputs *in) {
    memset(team, 0, sizeof *team);
    team->config = config;
    team->train = &in->train;
    team->host_weights = in->model.weights;
    const int K = config->replicas;
    team->replicas = K;
    team->n_weights = in->model.n_weights;
    team->sample_bytes = (size_t)in->train.channels * (size_t)in->train.height * (size_t)in->train.width;
    team->runner = calloc((size_t)K, sizeof *team->runner);
    team->devices = calloc((size_t)K, sizeof *team->devices);
    team->grads = calloc((size_t)K, sizeof *team->grads);
    team->streams = calloc((size_t)K, sizeof *team->streams);
    team->x = malloc(team->sample_bytes * (size_t)config->batch_size);
    team->y = malloc((size_t)config->batch_size);
    if (!team->runner || !team->devices || !team->grads || !team->streams || !team->x || !team->y) {
        return hw_fail("out of memory for %d GPU replicas", K);
    }
    for (int k = 0; k < K; k++) team->devices[k] = config->n_gpus > 0 ? config->gpus[k] : config->device.index;

    // Every listed GPU exists before anything is allocated on any of them.
    for (int k = 0; k < K; k++) {
        if (hw_cuda_select((hw_device){HW_DEVICE_CUDA, team->devices[k]}) != HW_OK) {
            return hw_error_prefix("DataParallel replica %d", k);
        }
    }
    // The largest chunk; each runner starts from the host weights, so all replicas start equal.
    int chunk = (config->batch_size + K - 1) / K;
    for (int k = 0; k < K; k++) {
        hw_cuda_runner_config rc = {
            .device = {HW_DEVICE_CUDA, team->devices[k]},
            .max_batch = chunk,
            .weights_dev = NULL,
            .mean = in->norm.mean,
            .std = in->norm.std,
            .seed = hw_worker_seed(config->seed, k),
        };
        if (hw_cuda_runner_create(&team->runner[k], &in->model, &rc) != HW_OK) {
            return hw_error_prefix("DataParallel replica %d on cuda:%d", k, team->devices[k]);
        }
        team->grads[k] = hw_cuda_runner_grads(team->runner[k]);
        team->streams[k] = hw_cuda_runner_stream(team->runner[k]);
    }
    int allow_nccl = getenv("HOGWILD_NO_NCCL") == NULL;
    if (hw_cuda_allreduce_create(&team->reduce, team->devices, K, team->n_weights, allow_nccl) != HW_OK) {
        return hw_error_prefix("DataParallel gradient all-reduce");
    }
    return HW_OK;
}

// Gathers the batch at order[*pos ...] and queues each replica's chunk on its copy stream.
// Returns the batch size, 0 when the order is used up, -1 on error.
static int team_queue(gpu_team *team, const hw_dataset *ds, const int64_t *order, int64_t n, int64_t *pos,
                      int batch_size) {
    if (*pos >= n) return 0;
    int batch = (int)(n - *pos < batch_size ? n - *pos : batch_size);
    batch_gather_u8(ds, order + *pos, batch, team->x, team->y);
    for (int k = 0; k < team->replicas; k++) {
        int offset, count;
        hw_dp_chunk(batch, team->replicas, k, &offset, &count);
        if (count == 0) continue;  // forward skips this replica for this batch too
        if (hw_cuda_runner_upload_u8(team->runner[k], team->x + (size_t)offset * team->sample_bytes,
                                     team->y + offset, count) != HW_OK) {
            hw_error_prefix("replica %d", k);
            return -1;
        }
    }
    *pos += batch;
    return batch;
}

// Makes replica k's GPU current: the runner's calls select it themselves, the plain kernels and
// stream calls here need it done (a stream belongs to one device).
static int use_replica(const gpu_team *team, int k) {
    return hw_cuda_select((hw_device){HW_DEVICE_CUDA, team->devices[k]});
}

// One synchronous step over the oldest queued batch of `batch` samples; *loss gets the mean
// loss over the whole batch.
static int team_step(gpu_team *team, const hw_train_config *config, int batch, float *loss, int *diverged) {
    const int K = team->replicas;
    const int64_t n = (int64_t)team->n_weights;
    // Forward and backward on every replica first: they run in parallel on their streams.
    for (int k = 0; k < K; k++) {
        int offset, count;
        hw_dp_chunk(batch, K, k, &offset, &count);
        int status = count > 0 ? hw_cuda_runner_forward(team->runner[k], 1, NULL) : HW_OK;
        if (status == HW_OK && count > 0) status = hw_cuda_runner_backward(team->runner[k]);
        if (status == HW_OK) status = use_replica(team, k);
        if (status == HW_OK && count == 0) {
            status = hw_cuda_memset(team->grads[k], 0, sizeof(float) * (size_t)n, team->streams[k]);
        }
        // The gradient of the whole batch's mean loss is the chunks' gradients weighted by size.
        if (status == HW_OK && count > 0 && count != batch) {
            status = hw_cuda_scale(team->streams[k], team->grads[k], n, (float)count / (float)batch);
        }
        if (status != HW_OK) return hw_error_prefix("replica %d", k);
    }
    if (hw_cuda_allreduce_sum(team->reduce, team->grads, team->streams) != HW_OK) {
        return hw_error_prefix("gradient all-reduce");
    }
    for (int k = 0; k < K; k++) {
        if (hw_cuda_runner_sgd_step(team->runner[k], config->lr, config->momentum, config->weight_decay,
                                    config->nesterov) != HW_OK) {
            return hw_error_prefix("replica %d", k);
        }
    }
    double sum = 0;
    *diverged = -1;
    for (int k = 0; k < K; k++) {
        int offset, count;
        hw_dp_chunk(batch, K, k, &offset, &count);
        float chunk_loss = 0;
        int status = count > 0 ? hw_cuda_runner_loss(team->runner[k], &chunk_loss) : use_replica(team, k);
        if (status == HW_OK && count == 0) status = hw_cuda_stream_sync(team->streams[k]);
        if (status != HW_OK) return hw_error_prefix("replica %d", k);
        if (*diverged < 0 && hw_loss_diverged(chunk_loss)) *diverged = k;
        sum += (double)chunk_loss * count;
    }
    *loss = (float)(sum / batch);
    return HW_OK;
}

// Replica 0's weights into the host copy of the model (waits).
static int team_download(gpu_team *team, float *host) {
    if (hw_cuda_runner_weights_download(team->runner[0], host) != HW_OK) {
        return hw_error_prefix("copying the weights of replica 0");
    }
    return HW_OK;
}

// ---- driven by dp_loop.c ----

static int gpu_begin_epoch(void *arg, const int64_t *order, int64_t n) {
    gpu_team *team = arg;
    team->order = order;
    team->n = n;
    team->pos = 0;
    team->queued = team_queue(team, team->train, order, n, &team->pos, team->config->batch_size);
    return team->queued < 0 ? HW_ERR : HW_OK;
}

// The queued batch's step; the next batch is queued first, so its copies overlap this compute.
static int gpu_step(void *arg, float *loss, int *diverged) {
    gpu_team *team = arg;
    int batch = team->queued;
    if (batch <= 0) return batch;
    team->queued = team_queue(team, team->train, team->order, team->n, &team->pos, team->config->batch_size);
    if (team->queued < 0 || team_step(team, team->config, batch, loss, diverged) != HW_OK) return -1;
    return batch;
}

static void gpu_end_epoch(void *arg) {
    gpu_team *team = arg;
    team->queued = 0;
}

static int gpu_snapshot(void *arg, hw_train_outputs *log) {
    gpu_team *team = arg;
    if (team_download(team, team->host_weights) != HW_OK) return HW_ERR;
    hw_train_outputs_snapshot(log, team->host_weights);
    return HW_OK;
}

int hw_train_dataparallel_cuda(const hw_train_config *config, hw_train_inputs *in, hw_train_result *result) {
    memset(result, 0, sizeof *result);
    const int K = config->replicas;
    if (K < 1) return hw_fail("DataParallel on GPUs needs at least one replica, got %d", K);
    hw_model *model = &in->model;
    if (!model->weights && hw_model_alloc_weights(model) != HW_OK) return HW_ERR;
    int first_epoch;
    int64_t samples_before;
    if (hw_train_start_weights(config, model, &first_epoch, &samples_before) != HW_OK) return HW_ERR;

    gpu_team team = {0};
    hw_train_outputs log = {0};
    int status = hw_train_outputs_open(&log, config, in, first_epoch, samples_before);
    if (status == HW_OK) status = team_open(&team, config, in);
    if (status == HW_OK && !config->quiet) {
        hw_progress_message(&log.progress, "DataParallel on %d GPU replica(s), gradient all-reduce: %s\n", K,
                            hw_cuda_allreduce_method(team.reduce));
    }
    if (status == HW_OK && config->metrics_path) {
        // The first point of the curve: the weights before this run's training.
        hw_train_outputs_snapshot(&log, model->weights);
        status = hw_train_outputs_evaluate(&log, first_epoch, 0, 0, 0);
    }
    static const dp_ops gpu_ops = {gpu_begin_epoch, gpu_step, gpu_end_epoch, gpu_snapshot, NULL};
    if (status == HW_OK) status = dp_run(config, in, first_epoch, &log, &gpu_ops, &team, result);
    team_close(&team);
    hw_train_outputs_close(&log);
    return status;
}
