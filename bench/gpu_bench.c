// gpu_bench: Hogwild on one GPU. K worker processes share one set of device weights through a
// CUDA IPC handle and each runs forward, backward and an SGD step on its own batches; the table
// row it prints gives samples/s over all workers and, from a second pass timed with CUDA events,
// the time per step in input copies (H2D) and in compute.
//
//   gpu_bench --probe                       says whether there is a GPU (exit 0) or why not (exit 2)
//   gpu_bench --model lenet|mlp --batch N --workers K [--steps S] [--header]   (models/<name>.model)
//
// The order is the one the trainer must follow: fork every worker FIRST, then initialise CUDA in
// the parent, allocate the weights, publish the IPC handle in shared memory; each worker waits for
// it and opens it. A process that initialised CUDA cannot pass it to a child, so bench/gpu_bench.sh
// runs every configuration in a fresh process.
//
// The input is random uint8 images of MNIST's shape (throughput does not depend on the pixels).
#include "hw/cuda.h"
#include "hw/data.h"
#include "hw/err.h"
#include "hw/nn.h"
#include "hw/rng.h"
#include "hw/train.h"  // hw_now

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

enum { MAX_WORKERS = 64, POOL = 4096 };
enum { WAIT = 0, READY = 1, FAILED = 2 };

typedef struct {
    double seconds;            // wall time of the throughput pass
    long samples;
    double profile_steps;      // steps of the timed pass
    double copy_ms, compute_ms;
    float last_loss;
    char error[512];
} worker_result;

typedef struct {
    _Atomic int state;
    _Atomic int warmed_up;     // workers done with warm-up: the timed pass starts together
    hw_cuda_ipc_handle handle;
    char parent_error[512];
    worker_result results[MAX_WORKERS];
} channel;

// The model: models/<name>.model, initialised as the trainer does (PyTorch's defaults, seed 1).
static int load_model(hw_model *m, const char *name) {
    char path[256];
    snprintf(path, sizeof path, "models/%s.model", name);
    if (hw_model_load(m, path) != HW_OK || hw_model_alloc_weights(m) != HW_OK) return HW_ERR;
    hw_model_init_weights(m, 1);
    return HW_OK;
}

typedef struct {
    const hw_model *model;
    int batch, workers, steps;
    channel *ch;
} bench_args;

// steps of upload / forward / backward / step, pipelined: the next batch's upload is queued while
// the GPU still works on the current one. Returns the last batch's loss through *loss.
static int train_steps(hw_cuda_runner *r, const uint8_t *images, const uint8_t *labels, int batch, int steps,
                       int offset, float *loss) {
    int per = 784;
    int at = offset % (POOL - batch);
    if (hw_cuda_runner_upload_u8(r, images + (size_t)at * per, labels + at, batch) != HW_OK) return HW_ERR;
    for (int s = 0; s < steps; s++) {
        if (hw_cuda_runner_forward(r, 1, s == steps - 1 ? loss : NULL) != HW_OK) return HW_ERR;
        if (hw_cuda_runner_backward(r) != HW_OK) return HW_ERR;
        if (hw_cuda_runner_sgd_step(r, 0.01f, 0.5f, 0.0f, 0) != HW_OK) return HW_ERR;
        if (s + 1 < steps) {
            at = (at + batch) % (POOL - batch);
            if (hw_cuda_runner_upload_u8(r, images + (size_t)at * per, labels + at, batch) != HW_OK) return HW_ERR;
        }
    }
    return hw_cuda_runner_sync(r);
}

static int worker(int rank, const bench_args *a) {
    channel *ch = a->ch;
    worker_result *res = &ch->results[rank];
    for (int waited = 0; atomic_load(&ch->state) == WAIT; waited++) {
        if (waited > 120000) return hw_fail("worker %d: the parent never published the weights' IPC handle", rank);
        usleep(1000);
    }
    if (atomic_load(&ch->state) != READY) return hw_fail("worker %d: the parent failed", rank);
    // CUDA starts here, after the fork.
    hw_device dev = {HW_DEVICE_CUDA, 0};
    float *weights = NULL;
    if (hw_cuda_select(dev) != HW_OK) return HW_ERR;
    if (hw_cuda_ipc_open(&ch->handle, (void **)&weights) != HW_OK) return HW_ERR;
    uint8_t *images = malloc((size_t)POOL * 784), *labels = malloc(POOL);
    if (!images || !labels) return hw_fail("worker %d: out of memory", rank);
    hw_rng rng;
    hw_rng_seed(&rng, 100 + (uint64_t)rank, 0);
    for (size_t i = 0; i < (size_t)POOL * 784; i++) images[i] = (uint8_t)hw_rng_below(&rng, 256);
    for (int i = 0; i < POOL; i++) labels[i] = (uint8_t)hw_rng_below(&rng, 10);

    hw_cuda_runner_config cfg = {dev, a->batch, weights, HW_MNIST_MEAN, HW_MNIST_STD, 7 + (uint64_t)rank, 0};
    hw_cuda_runner *r = NULL;
    int rc = hw_cuda_runner_create(&r, a->model, &cfg);
    float loss = 0.0f;
    if (rc == HW_OK) rc = train_steps(r, images, labels, a->batch, 20, rank * 97, &loss);  // warm-up
    atomic_fetch_add(&ch->warmed_up, 1);
    while (rc == HW_OK && atomic_load(&ch->warmed_up) < a->workers) usleep(100);
    double t0 = hw_now();
    if (rc == HW_OK) rc = train_steps(r, images, labels, a->batch, a->steps, rank * 131, &loss);
    res->seconds = hw_now() - t0;
    res->samples = (long)a->steps * a->batch;
    res->last_loss = loss;
    hw_cuda_runner_free(r);
    r = NULL;
    // The timed pass: events around every copy and every step (the runner waits for each step's
    // end before the next, so this pass runs a little slower and only gives the shares).
    cfg.timing = 1;
    if (rc == HW_OK) rc = hw_cuda_runner_create(&r, a->model, &cfg);
    int profile_steps = a->steps / 4 > 20 ? a->steps / 4 : 20;
    if (rc == HW_OK) rc = train_steps(r, images, labels, a->batch, profile_steps, rank * 7, &loss);
    if (rc == HW_OK) rc = hw_cuda_runner_timing(r, &res->copy_ms, &res->compute_ms);
    res->profile_steps = profile_steps;
    hw_cuda_runner_free(r);
    // Close before the parent frees the memory.
    if (hw_cuda_ipc_close(weights) != HW_OK && rc == HW_OK) rc = HW_ERR;
    free(images);
    free(labels);
    return rc;
}

static int probe(void) {
    int count = 0;
    if (hw_cuda_device_count(&count) != HW_OK) {
        printf("no GPU: %s\n", hw_error());
        return 2;
    }
    for (int i = 0; i < count; i++) {
        char name[256];
        if (hw_cuda_describe((hw_device){HW_DEVICE_CUDA, i}, name, sizeof name) != HW_OK) {
            printf("no GPU: %s\n", hw_error());
            return 2;
        }
        printf("GPU %d: %s\n", i, name);
    }
    return 0;
}

static int run(const char *model_name, int batch, int workers, int steps, int header) {
    static hw_model model;
    if (load_model(&model, model_name) != HW_OK) {
        fprintf(stderr, "gpu_bench: %s\n", hw_error());
        return 2;
    }
    if (workers < 1 || workers > MAX_WORKERS || batch < 1 || batch > POOL / 2 || steps < 1) {
        fprintf(stderr, "gpu_bench: workers 1..%d, batch 1..%d, steps >= 1\n", MAX_WORKERS, POOL / 2);
        return 2;
    }
    channel *ch = mmap(NULL, sizeof *ch, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (ch == MAP_FAILED) {
        perror("gpu_bench: mmap");
        return 1;
    }
    memset(ch, 0, sizeof *ch);
    bench_args args = {&model, batch, workers, steps, ch};
    fflush(stdout);
    // 1. Fork every worker before this process touches CUDA.
    pid_t pids[MAX_WORKERS];
    for (int k = 0; k < workers; k++) {
        pids[k] = fork();
        if (pids[k] < 0) {
            perror("gpu_bench: fork");
            atomic_store(&ch->state, FAILED);
            for (int j = 0; j < k; j++) waitpid(pids[j], NULL, 0);
            return 1;
        }
        if (pids[k] == 0) {
            int rc = worker(k, &args);
            if (rc != HW_OK) snprintf(ch->results[k].error, sizeof ch->results[k].error, "%s", hw_error());
            _exit(rc == HW_OK ? 0 : 1);
        }
    }
    // 2. Now CUDA: the shared device weights, and their handle published in shared memory.
    float *weights = NULL, *host = model.weights;
    int rc = hw_cuda_select((hw_device){HW_DEVICE_CUDA, 0});
    if (rc == HW_OK) rc = hw_cuda_malloc((void **)&weights, model.n_weights * sizeof(float));
    if (rc == HW_OK) rc = hw_cuda_memcpy_h2d(weights, host, model.n_weights * sizeof(float), NULL);
    if (rc == HW_OK) rc = hw_cuda_stream_sync(NULL);
    if (rc == HW_OK) rc = hw_cuda_ipc_export(weights, &ch->handle);
    if (rc != HW_OK) snprintf(ch->parent_error, sizeof ch->parent_error, "%s", hw_error());
    atomic_store(&ch->state, rc == HW_OK ? READY : FAILED);
    // 3. Wait for the workers; they close their handles before they exit.
    int failed = rc != HW_OK;
    for (int k = 0; k < workers; k++) {
        int status = 0;
        waitpid(pids[k], &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            if (rc == HW_OK) fprintf(stderr, "gpu_bench: worker %d failed: %s\n", k, ch->results[k].error);
            failed = 1;
        }
    }
    if (rc != HW_OK) fprintf(stderr, "gpu_bench: %s\n", ch->parent_error);
    hw_cuda_free(weights);
    hw_model_free(&model);
    if (failed) return 1;

    long samples = 0;
    double slowest = 0.0, copy_ms = 0.0, compute_ms = 0.0, profile_steps = 0.0;
    for (int k = 0; k < workers; k++) {
        const worker_result *res = &ch->results[k];
        samples += res->samples;
        if (res->seconds > slowest) slowest = res->seconds;
        copy_ms += res->copy_ms;
        compute_ms += res->compute_ms;
        profile_steps += res->profile_steps;
    }
    if (header) {
        printf("| model | batch | GPU workers | samples/s (all workers) | ms/step per worker | H2D copy ms/step | "
               "compute ms/step | copy share |\n");
        printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
    }
    double step_ms = 1000.0 * slowest / steps;
    printf("| %s | %d | %d | %.0f | %.3f | %.4f | %.3f | %.1f%% |\n", model_name, batch, workers, samples / slowest,
           step_ms, copy_ms / profile_steps, compute_ms / profile_steps, 100.0 * copy_ms / (copy_ms + compute_ms));
    munmap(ch, sizeof *ch);
    return 0;
}

int main(int argc, char **argv) {
    const char *model = "lenet";
    int batch = 64, workers = 1, steps = 0, header = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--probe") == 0) return probe();
        if (strcmp(argv[i], "--header") == 0) {
            header = 1;
        } else if (i + 1 < argc && strcmp(argv[i], "--model") == 0) {
            model = argv[++i];
        } else if (i + 1 < argc && strcmp(argv[i], "--batch") == 0) {
            batch = atoi(argv[++i]);
        } else if (i + 1 < argc && strcmp(argv[i], "--workers") == 0) {
            workers = atoi(argv[++i]);
        } else if (i + 1 < argc && strcmp(argv[i], "--steps") == 0) {
            steps = atoi(argv[++i]);
        } else {
            fprintf(stderr, "usage: gpu_bench --probe | --model lenet|mlp --batch N --workers K [--steps S] [--header]\n");
            return 2;
        }
    }
    if (steps == 0) steps = batch >= 1 && 100000 / batch > 50 ? 100000 / batch : 50;
    return run(model, batch, workers, steps, header);
}
