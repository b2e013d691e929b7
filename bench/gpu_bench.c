// gpu_bench: Hogwild on one GPU. K worker processes share one set of device weights through a
// CUDA IPC handle and each runs forward, backward and an SGD step on its own batches; the table
// row it prints gives samples/s over all workers and, from a second pass timed with CUDA events,
// the time per step in input copies (H2D) and in compute.
//
//   gpu_bench --probe                       says whether there is a GPU (exit 0) or why not (exit 2)
//   gpu_bench --floor                       measures the two ceilings of a step on cuda:0: what one
//                                           kernel launch costs (20000 empty kernels back to back)
//                                           and device memory bandwidth (a 512 MiB device copy,
//                                           bytes read plus written); prints launch_us=.. gbps=..
//   gpu_bench --model lenet|mlp --batch N --workers K [--steps S] [--graph] [--header]
//             [--launch-us U --gbps G]      (models/<name>.model). --graph: each step one CUDA
//                                           graph launch (hw_cuda_runner_train_step); with U and G
//                                           the row adds the step's floor (see step_bytes below)
//
// The order is the one the trainer must follow: fork every worker FIRST, then initialise CUDA in
// the parent, allocate the weights, publish the IPC handle in shared memory; each worker waits for
// it and opens it. A process that initialised CUDA cannot pass it to a child, so bench/gpu_bench.sh
// runs every configuration in a fresh process.
//
// The input is random uint8 images of MNIST's shape (throughput does not depend on the pixels).
#include "cuda/device.h"
#include "cuda/layer_ops.h"
#include "cuda/runner.h"
#include "hw/data.h"
#include "hw/err.h"
#include "hw/nn.h"
#include "hw/rng.h"
#include "hw/clock.h"
#include "hw/train.h"

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
    long kernels_per_step;     // kernels and GEMMs of one step (hw_cuda_launches around the first)
    char graph_off[256];       // with --graph: why the steps were not graphs (empty: they were)
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
    int batch, workers, steps, graph;
    channel *ch;
} bench_args;

// steps of upload and training step (forward, backward, SGD: hw_cuda_runner_train_step, as the
// trainer runs it), pipelined: the next batch's upload is queued while the GPU still works on the
// current one. Returns the last batch's loss through *loss.
static int train_steps(hw_cuda_runner *r, const uint8_t *images, const uint8_t *labels, int batch, int steps,
                       int offset, float *loss) {
    int per = 784;
    int at = offset % (POOL - batch);
    if (hw_cuda_runner_upload_u8(r, images + (size_t)at * per, labels + at, batch) != HW_OK) return HW_ERR;
    for (int s = 0; s < steps; s++) {
        if (hw_cuda_runner_train_step(r, 0.01f, 0.5f, 0.0f, 0) != HW_OK) return HW_ERR;
        if (s + 1 < steps) {
            at = (at + batch) % (POOL - batch);
            if (hw_cuda_runner_upload_u8(r, images + (size_t)at * per, labels + at, batch) != HW_OK) return HW_ERR;
        }
    }
    if (hw_cuda_runner_sync(r) != HW_OK) return HW_ERR;
    return hw_cuda_runner_loss(r, loss);
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

    hw_cuda_runner_config cfg = {dev, a->batch, weights, HW_MNIST_MEAN, HW_MNIST_STD, 7 + (uint64_t)rank, 0, a->graph};
    hw_cuda_runner *r = NULL;
    int rc = hw_cuda_runner_create(&r, a->model, &cfg);
    float loss = 0.0f;
    // One step alone counts its kernels (with --graph: those its capture recorded), then the warm-up.
    long launches_before = hw_cuda_launches();
    if (rc == HW_OK) rc = train_steps(r, images, labels, a->batch, 1, rank * 97, &loss);
    res->kernels_per_step = hw_cuda_launches() - launches_before;
    if (rc == HW_OK) rc = train_steps(r, images, labels, a->batch, 20, rank * 97, &loss);  // warm-up
    if (rc == HW_OK && hw_cuda_runner_graph_off(r)) {
        snprintf(res->graph_off, sizeof res->graph_off, "%s", hw_cuda_runner_graph_off(r));
    }
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

// ---- the floor of a step ----
//
// Two bounds that no implementation of this step (as layer-by-layer kernels) can beat:
// - launches: the kernels and GEMMs of one step, each costing at least what one launch costs
//   (measured: launch_us);
// - bytes: what the step must move through device memory at the measured bandwidth. Counted per
//   layer: forward reads its input and writes its output; backward reads the output's gradient
//   and what the layer kept (its input or output) and writes the input's gradient (not for the
//   first layer); the parameters are read twice (forward, backward's dx), their gradient written
//   once, and the SGD step reads weights, gradients and momentum and writes weights and momentum
//   (7 passes over the flat buffer); the uint8 batch is read and its floats written. Scratch
//   memory (conv2d's im2col) is not counted: a fused implementation does without it.
// The floor is the larger of the two, per step; a GPU runs steps of several workers one after
// another (processes time-share it), so it bounds every row's samples/s at batch / floor.
static double step_bytes(const hw_model *m, int batch) {
    double floats = 0.0;
    for (int i = 0; i < m->n_layers; i++) {
        const hw_layer *layer = &m->layers[i];
        if (layer->kind == HW_FLATTEN) continue;
        double in = (double)hw_shape_numel(layer->in_shape), out = (double)hw_shape_numel(layer->out_shape);
        floats += (in + out) * batch;                       // forward
        floats += (out + (in > out ? in : out)) * batch;    // backward: dy and what it kept
        if (i > 0) floats += in * batch;                    // backward: dx
    }
    floats += 7.0 * (double)m->n_weights;
    double input = (double)hw_shape_numel(m->input) * batch;
    return 4.0 * floats + input * (1.0 + 4.0);  // the uint8 batch read, its floats written
}

static int measure_floor(void) {
    if (hw_cuda_select((hw_device){HW_DEVICE_CUDA, 0}) != HW_OK) {
        fprintf(stderr, "gpu_bench: %s\n", hw_error());
        return 2;
    }
    hw_cuda_stream stream = NULL;
    hw_cuda_event start = NULL, end = NULL;
    void *a = NULL, *b = NULL;
    const size_t bytes = (size_t)512 << 20;
    const int launches = 20000, copies = 10;
    float launch_ms = 0.0f, copy_ms = 0.0f;
    int rc = hw_cuda_stream_create(&stream);
    if (rc == HW_OK) rc = hw_cuda_event_create(&start, 1);
    if (rc == HW_OK) rc = hw_cuda_event_create(&end, 1);
    for (int i = 0; rc == HW_OK && i < 1000; i++) rc = hw_cuda_launch_empty(stream);  // warm-up
    if (rc == HW_OK) rc = hw_cuda_stream_sync(stream);
    if (rc == HW_OK) rc = hw_cuda_event_record(start, stream);
    for (int i = 0; rc == HW_OK && i < launches; i++) rc = hw_cuda_launch_empty(stream);
    if (rc == HW_OK) rc = hw_cuda_event_record(end, stream);
    if (rc == HW_OK) rc = hw_cuda_event_sync(end);
    if (rc == HW_OK) rc = hw_cuda_event_elapsed_ms(start, end, &launch_ms);
    if (rc == HW_OK) rc = hw_cuda_malloc(&a, bytes);
    if (rc == HW_OK) rc = hw_cuda_malloc(&b, bytes);
    if (rc == HW_OK) rc = hw_cuda_memset(a, 1, bytes, stream);  // not zeros: real data
    if (rc == HW_OK) rc = hw_cuda_memcpy_d2d(b, a, bytes, stream);  // warm-up
    if (rc == HW_OK) rc = hw_cuda_event_record(start, stream);
    for (int i = 0; rc == HW_OK && i < copies; i++) rc = hw_cuda_memcpy_d2d(i % 2 ? a : b, i % 2 ? b : a, bytes, stream);
    if (rc == HW_OK) rc = hw_cuda_event_record(end, stream);
    if (rc == HW_OK) rc = hw_cuda_event_sync(end);
    if (rc == HW_OK) rc = hw_cuda_event_elapsed_ms(start, end, &copy_ms);
    hw_cuda_free(a);
    hw_cuda_free(b);
    hw_cuda_event_destroy(start);
    hw_cuda_event_destroy(end);
    hw_cuda_stream_destroy(stream);
    if (rc != HW_OK) {
        fprintf(stderr, "gpu_bench: %s\n", hw_error());
        return 1;
    }
    double launch_us = 1000.0 * launch_ms / launches;
    double gbps = 2.0 * (double)bytes * copies / (copy_ms / 1000.0) / 1e9;
    printf("launch_us=%.3f gbps=%.0f (%d empty kernels back to back; %d device copies of %zu MiB, bytes read + "
           "written)\n", launch_us, gbps, launches, copies, bytes >> 20);
    return 0;
}

static int run(const char *model_name, int batch, int workers, int steps, int graph, double launch_us, double gbps,
               int header) {
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
    bench_args args = {&model, batch, workers, steps, graph, ch};
    const double bytes = step_bytes(&model, batch);  // before the model is freed below
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
    if (graph && ch->results[0].graph_off[0]) fprintf(stderr, "gpu_bench: --graph: %s\n", ch->results[0].graph_off);
    if (header) {
        printf("| model | batch | GPU workers | graph | samples/s (all workers) | ms/step per worker | H2D copy ms/step | "
               "compute ms/step | copy share | kernels/step | floor: launches us | floor: bytes us | "
               "floor samples/s | share of floor |\n");
        printf("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    }
    double step_ms = 1000.0 * slowest / steps;
    long kernels = ch->results[0].kernels_per_step;
    double rate = samples / slowest;
    printf("| %s | %d | %d | %s | %.0f | %.3f | %.4f | %.3f | %.1f%% | %ld |", model_name, batch, workers,
           graph ? (ch->results[0].graph_off[0] ? "off (failed)" : "yes") : "no", rate, step_ms, copy_ms / profile_steps,
           compute_ms / profile_steps, 100.0 * copy_ms / (copy_ms + compute_ms), kernels);
    if (launch_us > 0 && gbps > 0) {
        double launches_us = kernels * launch_us, bytes_us = bytes / (gbps * 1e3);
        double floor_us = launches_us > bytes_us ? launches_us : bytes_us;
        double floor_rate = batch / (floor_us * 1e-6);
        printf(" %.1f | %.1f | %.0f | %.0f%% |\n", launches_us, bytes_us, floor_rate, 100.0 * rate / floor_rate);
    } else {
        printf(" | | | |\n");
    }
    munmap(ch, sizeof *ch);
    return 0;
}

int main(int argc, char **argv) {
    const char *model = "lenet";
    int batch = 64, workers = 1, steps = 0, header = 0, graph = 0;
    double launch_us = 0.0, gbps = 0.0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--probe") == 0) return probe();
        if (strcmp(argv[i], "--floor") == 0) return measure_floor();
        if (strcmp(argv[i], "--header") == 0) {
            header = 1;
        } else if (strcmp(argv[i], "--graph") == 0) {
            graph = 1;
        } else if (i + 1 < argc && strcmp(argv[i], "--model") == 0) {
            model = argv[++i];
        } else if (i + 1 < argc && strcmp(argv[i], "--batch") == 0) {
            batch = atoi(argv[++i]);
        } else if (i + 1 < argc && strcmp(argv[i], "--workers") == 0) {
            workers = atoi(argv[++i]);
        } else if (i + 1 < argc && strcmp(argv[i], "--steps") == 0) {
            steps = atoi(argv[++i]);
        } else if (i + 1 < argc && strcmp(argv[i], "--launch-us") == 0) {
            launch_us = atof(argv[++i]);
        } else if (i + 1 < argc && strcmp(argv[i], "--gbps") == 0) {
            gbps = atof(argv[++i]);
        } else {
            fprintf(stderr, "usage: gpu_bench --probe | --floor | --model lenet|mlp --batch N --workers K [--steps S] "
                            "[--graph] [--launch-us U --gbps G] [--header]\n");
            return 2;
        }
    }
    if (steps == 0) steps = batch >= 1 && 100000 / batch > 50 ? 100000 / batch : 50;
    return run(model, batch, workers, steps, graph, launch_us, gbps, header);
}
