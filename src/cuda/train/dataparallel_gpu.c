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
//      on one GPU; see hw_cuda_allreduce in src/cuda/allreduce.h);
//   3. every replica applies the same SGD step to its own weights and momentum, as torch's
//      DistributedDataParallel does: the replicas start from the same weights and apply the same
//      reduced gradient with the same kernel, so they stay equal without a weight broadcast.
//      Evaluations and checkpoints read replica 0's weights.
// The next batch is gathered and its chunks queued (copy streams) before the current step runs,
// so the input copies overlap the compute. Each step ends with every stream drained (the loss).
//
// Across the ranks of an mpirun job (config->world, README "Several machines"), the same design
// one level up, as the CPU trainer does it (dataparallel.c): every rank reads the same global
// batch order, takes chunk `rank` of each batch (hw_dp_chunk over the ranks) and splits it over
// its replicas, each weighted by its share of the GLOBAL batch. After the sum over the rank's
// replicas (step 2), NCCL sums replica 0's gradient over the ranks (hw_cuda_ranks_sum: one
// communicator, rank 0's ncclGetUniqueId sent to all by MPI_Bcast, ncclCommInitRank), the host
// waits for it within --sync-timeout, and the rank's other replicas copy it. Every replica of
// every rank then takes the same step. The loss, a diverged flag and a stop signal travel in a
// small MPI sum after the step, so that every rank leaves after the same step; every evaluation
// point checks that the ranks' weights agree bit for bit (replica 0's, downloaded: a hash reduced
// with MIN and MAX, hw_comm_weights_agree).
//
// Which GPU: each rank drives ONE GPU, with its --replicas on it. Local rank L (the rank's place
// among the ranks of its host, OMPI_COMM_WORLD_LOCAL_RANK) takes GPU B + L of its host, where
// --device cuda:B gives B (0 for --device cuda). NCCL cannot put two ranks on one GPU, so a host
// with fewer GPUs than its ranks need is an error naming the host and the rank, before NCCL.
#include "hw/train.h"
#include "hw/dataparallel.h"
#include "hw/gpu_train.h"
#include "hw/run_outputs.h"

#include "train/dataparallel_loop.h"
#include "hw/comm.h"
#include "cuda/allreduce.h"
#include "cuda/device.h"
#include "cuda/layer_ops.h"
#include "cuda/ranks.h"
#include "cuda/runner.h"
#include "hw/err.h"
#include "hw/option.h"
#include "hw/signals.h"
#include "gpu_batch.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    int replicas;
    hw_cuda_runner **runner;  // runner[k]: replica k
    int *devices;             // devices[k]: its CUDA ordinal
    float **grads;            // grads[k]: its device gradient buffer
    hw_cuda_stream *streams;  // streams[k]: its compute stream
    hw_cuda_allreduce *reduce;
    size_t n_weights;
    size_t sample_bytes;  // one uint8 sample
    uint8_t *x, *y;       // a gathered batch, host memory
    // This epoch, for the epoch driver (dataparallel_loop.c):
    const hw_train_config *config;
    const hw_dataset *train;
    const int64_t *order;  // the epoch's sample order
    int64_t n;
    int64_t pos;          // the next sample of `order` to queue
    int queued;           // samples of the batch queued on the copy streams, 0 when none
    float *host_weights;  // the model's host buffer, for snapshots
    // Across ranks (world.size > 1); in one process world is rank 0 of 1 and ranks NULL.
    hw_world world;
    hw_cuda_ranks *ranks;  // NCCL across the ranks, on replica 0's GPU
    int stop_agreed;       // the stop signal some rank saw, agreed at the last step
    int64_t steps;
} gpu_team;

static void team_close(gpu_team *team) {
    for (int k = 0; team->runner && k < team->replicas; k++) hw_cuda_runner_free(team->runner[k]);
    hw_cuda_allreduce_free(team->reduce);
    hw_cuda_ranks_free(team->ranks);
    free(team->runner);
    free(team->devices);
    free(team->grads);
    free(team->streams);
    free(team->x);
    free(team->y);
    memset(team, 0, sizeof *team);
}

// Across ranks: this rank's GPU, local rank L's GPU B + L (see the top of this file).
static int rank_gpu(const hw_train_config *config, int *device) {
    const hw_world *w = &config->world;
    char host[64] = "?";
    gethostname(host, sizeof host - 1);
    int count = 0;
    if (hw_cuda_device_count(&count) != HW_OK) {
        return hw_error_prefix("rank %d of %d on host %s has no GPU for the device cuda%s", w->rank, w->size, host,
                               hw_option_hint(HW_OPTION_DEVICE));
    }
    *device = config->device.index + w->local_rank;
    if (*device >= count) {
        int room = count - config->device.index;
        return hw_fail("rank %d of %d on host %s is local rank %d there, so it would drive cuda:%d, the device "
                       "cuda:%d%s plus its local rank, but the host has %d GPU(s): NCCL cannot put two ranks on one "
                       "GPU; start at most %d rank(s) on this host, each rank's GPU taking several replicas%s",
                       w->rank, w->size, host, w->local_rank, *device, config->device.index,
                       hw_option_hint(HW_OPTION_DEVICE), count, room > 0 ? room : 0,
                       hw_option_hint(HW_OPTION_REPLICAS));
    }
    return HW_OK;
}

// Across ranks: the NCCL communicator, from rank 0's unique id sent to all by MPI.
static int ranks_open(gpu_team *team) {
    unsigned char id[HW_NCCL_ID_BYTES];
    memset(id, 0, sizeof id);
    if (team->world.rank == 0 && hw_cuda_ranks_id(id) != HW_OK) return HW_ERR;
    if (hw_comm_bcast(id, sizeof id, 0) != HW_OK) return hw_error_prefix("sending NCCL's unique id to the ranks");
    return hw_cuda_ranks_open(&team->ranks, id, team->world.rank, team->world.size, team->devices, team->replicas,
                              team->n_weights);
}

// This rank's chunk of a global batch: all of it in one process.
static void rank_chunk(const gpu_team *team, int batch, int *offset, int *count) {
    hw_dp_chunk(batch, team->world.size, team->world.rank, offset, count);
}

static int team_open(gpu_team *team, const hw_train_config *config, const hw_train_inputs *in) {
    memset(team, 0, sizeof *team);
    team->world = config->world;
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
    int rank_device = config->device.index;
    if (team->world.size > 1 && rank_gpu(config, &rank_device) != HW_OK) return HW_ERR;
    for (int k = 0; k < K; k++) {
        team->devices[k] = config->n_gpus > 0 && team->world.size == 1 ? config->gpus[k] : rank_device;
    }

    // Every listed GPU exists before anything is allocated on any of them.
    for (int k = 0; k < K; k++) {
        if (hw_cuda_select((hw_device){HW_DEVICE_CUDA, team->devices[k]}) != HW_OK) {
            return hw_error_prefix("DataParallel replica %d", k);
        }
    }
    // The largest chunk; each runner starts from the host weights, so all replicas start equal.
    int rank_batch = (config->batch_size + team->world.size - 1) / team->world.size;
    int chunk = (rank_batch + K - 1) / K;
    for (int k = 0; k < K; k++) {
        hw_cuda_runner_config rc = {
            .device = {HW_DEVICE_CUDA, team->devices[k]},
            .max_batch = chunk,
            .weights_dev = NULL,
            .mean = in->norm.mean,
            .std = in->norm.std,
            // Numbered over the world: rank r's replica k draws what replica r*K+k of one process would.
            .seed = hw_worker_seed(config->seed, team->world.rank * K + k),
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
    if (team->world.size > 1 && ranks_open(team) != HW_OK) return HW_ERR;
    return HW_OK;
}

// Gathers the batch at order[*pos ...] and queues each replica's chunk on its copy stream.
// Returns the batch size, 0 when the order is used up, -1 on error.
static int team_queue(gpu_team *team, const hw_dataset *ds, const int64_t *order, int64_t n, int64_t *pos,
                      int batch_size) {
    if (*pos >= n) return 0;
    int batch = (int)(n - *pos < batch_size ? n - *pos : batch_size);
    int rank_offset, rank_count;
    rank_chunk(team, batch, &rank_offset, &rank_count);
    batch_gather_u8(ds, order + *pos + rank_offset, rank_count, team->x, team->y);
    for (int k = 0; k < team->replicas; k++) {
        int offset, count;
        hw_dp_chunk(rank_count, team->replicas, k, &offset, &count);
        if (count == 0) continue;  // forward skips this replica for this batch too
        if (hw_cuda_runner_upload_u8(team->runner[k], team->x + (size_t)offset * team->sample_bytes, team->y + offset,
                                     count) != HW_OK) {
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

// Across ranks, after the step: the step's outcomes (hw_dp_outcome_write) summed over the ranks
// (MPI, within --sync-timeout), so that every rank ends the run, or leaves on Ctrl-C, after the
// same step. *loss_sum, *diverged and *diverged_loss are the world's on return.
static int ranks_agree(gpu_team *team, float *loss_sum, int *diverged, float *diverged_loss) {
    float outcome[HW_DP_OUTCOME_FLOATS];
    hw_dp_outcome_write(outcome, *loss_sum, *diverged);
    if (hw_comm_sum(outcome, HW_DP_OUTCOME_FLOATS, team->config->sync_timeout) != HW_OK) return HW_ERR;
    *loss_sum = outcome[HW_DP_OUTCOME_LOSS_SUM];
    return hw_dp_outcome_agree(outcome, *diverged, &team->world, team->replicas, &team->stop_agreed, diverged,
                               diverged_loss);
}

// One synchronous step over the oldest queued batch of `batch` samples (the global batch: this
// rank's chunk of it across ranks); *loss gets the mean loss over the whole batch, or where a
// replica diverged its loss (hw_dp_outcome_agree says why). The SGD step's rate is `lr`.
static int team_step(gpu_team *team, const hw_train_config *config, int batch, float lr, float *loss, int *diverged) {
    const int K = team->replicas;
    const int64_t n = (int64_t)team->n_weights;
    int rank_offset, rank_count;
    rank_chunk(team, batch, &rank_offset, &rank_count);
    // Forward and backward on every replica first: they run in parallel on their streams.
    for (int k = 0; k < K; k++) {
        int offset, count;
        hw_dp_chunk(rank_count, K, k, &offset, &count);
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
    if (team->ranks && hw_cuda_ranks_sum(team->ranks, team->grads, team->streams, config->sync_timeout) != HW_OK) {
        return HW_ERR;
    }
    for (int k = 0; k < K; k++) {
        if (hw_cuda_runner_sgd_step(team->runner[k], lr, config->momentum, config->weight_decay, config->nesterov) !=
            HW_OK) {
            return hw_error_prefix("replica %d", k);
        }
    }
    double sum = 0;
    float diverged_loss = 0;
    *diverged = -1;
    for (int k = 0; k < K; k++) {
        int offset, count;
        hw_dp_chunk(rank_count, K, k, &offset, &count);
        float chunk_loss = 0;
        int status = count > 0 ? hw_cuda_runner_loss(team->runner[k], &chunk_loss) : use_replica(team, k);
        if (status == HW_OK && count == 0) status = hw_cuda_stream_sync(team->streams[k]);
        if (status != HW_OK) return hw_error_prefix("replica %d", k);
        if (*diverged < 0 && hw_loss_diverged(chunk_loss)) {
            *diverged = k;
            diverged_loss = chunk_loss;
        }
        sum += (double)chunk_loss * count;
    }
    if (team->ranks) {
        float world_sum = (float)sum;
        if (ranks_agree(team, &world_sum, diverged, &diverged_loss) != HW_OK) return HW_ERR;
        sum = world_sum;
    }
    *loss = *diverged >= 0 ? diverged_loss : (float)(sum / batch);
    return HW_OK;
}

// Replica 0's weights into the host copy of the model (waits).
static int team_download(gpu_team *team, float *host) {
    if (hw_cuda_runner_weights_download(team->runner[0], host) != HW_OK) {
        return hw_error_prefix("copying the weights of replica 0");
    }
    return HW_OK;
}

// ---- hw_dp_trainer: the steps the epoch driver takes (src/train/dataparallel_loop.h) ----

static int gpu_begin_epoch(void *ctx, const int64_t *order, int64_t n) {
    gpu_team *team = ctx;
    team->order = order;
    team->n = n;
    team->pos = 0;
    team->queued = team_queue(team, team->train, order, n, &team->pos, team->config->batch_size);
    return team->queued < 0 ? HW_ERR : HW_OK;
}

// The queued batch's step (hw_dp_trainer.step); the next batch is queued first, so its copies
// overlap this compute.
static int gpu_step(void *ctx, float lr, float *loss, int *diverged) {
    gpu_team *team = ctx;
    int batch = team->queued;
    if (batch <= 0) return batch;
    team->queued = team_queue(team, team->train, team->order, team->n, &team->pos, team->config->batch_size);
    if (team->queued < 0 || team_step(team, team->config, batch, lr, loss, diverged) != HW_OK) return -1;
    team->steps++;
    return batch;
}

static void gpu_end_epoch(void *ctx) {
    gpu_team *team = ctx;
    team->queued = 0;
}

// Across ranks the stop signal agreed at the last step (ranks_agree).
static int gpu_stop(void *ctx) {
    const gpu_team *team = ctx;
    return team->config->world.size > 1 ? team->stop_agreed : hw_stop_signal();
}

// Replica 0's weights, downloaded. Across ranks, every evaluation point (every epoch end among
// them) checks that the ranks hold the same weights, bit for bit; not the snapshot of a stopped
// run, which rank 0 alone takes.
static int gpu_snapshot(void *ctx, hw_run_outputs *outputs) {
    gpu_team *team = ctx;
    if (team_download(team, team->host_weights) != HW_OK) return HW_ERR;
    if (team->ranks && !team->stop_agreed) {
        char when[96];
        snprintf(when, sizeof when, "an evaluation point (%lld steps into the run)", (long long)team->steps);
        if (hw_comm_weights_agree(team->host_weights, team->n_weights, when) != HW_OK) return HW_ERR;
    }
    hw_run_outputs_snapshot(outputs, team->host_weights);
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
    hw_run_outputs outputs = {0};
    int status = HW_OK;
    if (config->world.size > 1) {
        // MPI first: a rank that fails after it ends the whole job (MPI_Abort), not only itself.
        status = hw_comm_init(&config->world, config->sync_timeout);
        if (status == HW_OK) status = hw_run_check_ranks(config, in, first_epoch, samples_before);
        if (status == HW_OK) status = hw_comm_weights_agree(model->weights, model->n_weights, "the start");
    }
    if (status == HW_OK) status = hw_run_outputs_open(&outputs, config, in, first_epoch, samples_before);
    outputs.distributed = config->world.size > 1;  // every rank evaluates a share: none waits for rank 0
    if (status == HW_OK) status = team_open(&team, config, in);
    if (status == HW_OK && !config->quiet && team.ranks) {
        hw_progress_message(&outputs.progress,
                            "DataParallel on %d GPU ranks x %d replica(s), each rank on the GPU of its local rank; "
                            "gradient sum: on a rank %s, across ranks %s\n",
                            config->world.size, K, hw_cuda_allreduce_method(team.reduce),
                            hw_cuda_ranks_method(team.ranks));
    } else if (status == HW_OK && !config->quiet) {
        hw_progress_message(&outputs.progress, "DataParallel on %d GPU replica(s), gradient all-reduce: %s\n", K,
                            hw_cuda_allreduce_method(team.reduce));
    }
    if (status == HW_OK) status = hw_run_outputs_first_point(&outputs, model->weights, first_epoch);
    hw_dp_trainer steps = {.ctx = &team,
                           .begin_epoch = gpu_begin_epoch,
                           .step = gpu_step,
                           .end_epoch = gpu_end_epoch,
                           .stop = gpu_stop,
                           .snapshot = gpu_snapshot};
    if (status == HW_OK) status = hw_dp_loop_run(&steps, in, first_epoch, &outputs, result);
    team_close(&team);
    hw_run_outputs_close(&outputs);
    return status;
}
