// nn_step: times one training step's forward + backward (no optimizer) of a model on the CPU, one
// thread, and prints samples/s. Build and run from the repository root after `make`:
//
//   make build/bench_nn_step
//   build/bench_nn_step                          # models/lenet.model and models/mlp.model, batch 64
//   build/bench_nn_step models/lenet.model 64 3  # one model, batch size, seconds per measurement
//   build/bench_nn_step --layers models/lenet.model 64   # time of each layer's forward and backward
//
// Times are this thread's CPU time. Each model is measured 5 times; the best and the median are printed (the machine is shared, so
// the best is the figure of the code, the median that of the moment). Results: bench/nn_step.md.
#include "hw/blas.h"
#include "hw/err.h"
#include "hw/nn.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// CPU time of this thread, not wall time: on a shared machine a step that waited for the core
// does not count. (The two agree on an idle machine.)
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

// Flops of one sample's training step: the forward, and in backward one product like the
// forward's for the weight gradient of each layer with parameters and one for its input
// gradient, except below the first such layer (never computed).
static double step_flops(const hw_model *model) {
    double flops = hw_model_forward_flops(model);
    int seen_params = 0;
    for (int i = 0; i < model->n_layers; i++) {
        const hw_layer *layer = &model->layers[i];
        double f = layer->type->flops ? layer->type->flops(layer) : 0.0;
        if (layer->n_params) flops += f;
        if (seen_params) flops += f;
        seen_params |= layer->n_params > 0;
    }
    return flops;
}

static int bench(const char *path, int batch, double seconds) {
    hw_model model;
    hw_workspace ws;
    if (hw_model_load(&model, path) != HW_OK || hw_model_alloc_weights(&model) != HW_OK ||
        hw_workspace_alloc(&ws, &model, batch, 1) != HW_OK) {
        fprintf(stderr, "nn_step: %s\n", hw_error());
        return 1;
    }
    hw_model_init_weights(&model, 1);
    size_t in = (size_t)hw_shape_numel(model.input);
    float *x = malloc(sizeof(float) * in * batch);
    uint8_t *y = malloc((size_t)batch);
    hw_rng rng;
    hw_rng_seed(&rng, 7, 0);
    for (size_t i = 0; i < in * batch; i++) x[i] = hw_rng_normal(&rng);
    for (int b = 0; b < batch; b++) y[b] = (uint8_t)hw_rng_below(&rng, (uint32_t)model.n_classes);

    double rates[5];
    float loss = 0.0f;  // of the last step, printed so that the work cannot be optimised away
    for (int rep = -1; rep < 5; rep++) {  // rep -1 warms up
        long steps = 0;
        double t0 = now(), t;
        do {
            loss = hw_cpu_forward(&model, &ws, x, y, batch, 1);
            hw_cpu_backward(&model, &ws, y, batch);
            steps++;
        } while ((t = now() - t0) < (rep < 0 ? 0.3 : seconds));
        if (rep >= 0) rates[rep] = (double)steps * batch / t;
    }
    qsort(rates, 5, sizeof rates[0], compare);
    double gflops = step_flops(&model) * rates[4] * 1e-9;
    printf("%-22s batch %3d: %9.0f samples/s best, %9.0f median (%.0f GFLOP/s at best; loss %.3f)\n", path, batch,
           rates[4], rates[2], gflops, loss);
    free(x);
    free(y);
    hw_workspace_free(&ws);
    hw_model_free(&model);
    return 0;
}

// Per-layer times: runs the model's layers one by one, as hw_cpu_forward/backward do. Returns the
// exit status.
static int layer_times(const char *path, int batch) {
    hw_model model;
    hw_workspace ws;
    if (hw_model_load(&model, path) != HW_OK || hw_model_alloc_weights(&model) != HW_OK ||
        hw_workspace_alloc(&ws, &model, batch, 1) != HW_OK) {
        fprintf(stderr, "nn_step: %s\n", hw_error());
        return 1;
    }
    hw_model_init_weights(&model, 1);
    size_t in = (size_t)hw_shape_numel(model.input);
    float *x = malloc(sizeof(float) * in * batch);
    uint8_t *y = calloc((size_t)batch, 1);
    hw_rng rng;
    hw_rng_seed(&rng, 7, 0);
    for (size_t i = 0; i < in * batch; i++) x[i] = hw_rng_normal(&rng);
    // 200 timed steps after 20 to warm up, fewer where a step is slow (a large BATCH or model; 220
    // steps of LeNet at batch 65536 took over 20 minutes): the warm-up ends after 0.3 s and the
    // timing after 2 s, with at least 3 steps timed.
    enum { STEPS = 200, WARM = 20, LEAST = 3 };
    double fwd[HW_MAX_LAYERS] = {0}, bwd[HW_MAX_LAYERS] = {0};
    int paired[HW_MAX_LAYERS] = {0};
    int timed = 0, warming = 1;
    double start = now();
    for (int step = 0; timed < STEPS; step++) {
        if (warming && (step == WARM || now() - start > 0.3)) {
            warming = 0;
            start = now();
        }
        hw_cpu_forward(&model, &ws, x, y, batch, 1);
        hw_cpu_backward(&model, &ws, y, batch);  // sets first_trainable, fills the last gradient
        // Each layer again, timed one by one, through the walk's own per-layer calls.
        hw_exec_buffers b = hw_workspace_buffers(&model, &ws);
        for (int i = 0; i < model.n_layers; i++) {
            double t0 = now();
            paired[i] = hw_exec_pairs(&hw_cpu_backend, &model, i, 1);
            if (paired[i]) {  // the walk runs layers i and i + 1 in one call: its time is layer i's
                hw_exec_pair_forward(&hw_cpu_backend, &model, &b, i, batch, 1);
            } else {
                hw_exec_layer_forward(&hw_cpu_backend, &model, &b, i, batch, 1);
            }
            if (!warming) fwd[i] += now() - t0;
            i += paired[i];
        }
        for (int i = model.n_layers - 1; i >= ws.first_trainable; i--) {
            double t0 = now();
            hw_exec_layer_backward(&hw_cpu_backend, &model, &b, i, batch, 1, ws.first_trainable);
            if (!warming) bwd[i] += now() - t0;
        }
        if (!warming && ++timed >= LEAST && now() - start > 2.0) break;
    }
    double total = 0.0;
    for (int i = 0; i < model.n_layers; i++) total += fwd[i] + bwd[i];
    // The header as it always was when all 200 steps ran, so that the figures stay comparable; the
    // count where a slow step cut them short.
    char steps[48] = "";
    if (timed < STEPS) snprintf(steps, sizeof steps, " (mean of %d steps)", timed);
    printf("%s, batch %d, microseconds per batch%s:\n  %-14s %9s %9s\n", path, batch, steps, "layer", "forward",
           "backward");
    for (int i = 0; i < model.n_layers; i++) {
        printf("  %-14s %9.1f %9.1f\n", model.layers[i].name, 1e6 * fwd[i] / timed, 1e6 * bwd[i] / timed);
    }
    printf("  %-14s %19.1f  (%.0f samples/s)\n", "total", 1e6 * total / timed, timed * batch / total);
    for (int i = 0; i + 1 < model.n_layers; i++) {
        if (paired[i]) {
            printf("  (%s's forward includes %s's: one call, src/nn/exec.c)\n", model.layers[i].name,
                   model.layers[i + 1].name);
        }
    }
    free(x);
    free(y);
    hw_workspace_free(&ws);
    hw_model_free(&model);
    return 0;
}

static const char USAGE[] =
    "usage: build/bench_nn_step [MODEL [BATCH [SECONDS]]]\n"
    "       build/bench_nn_step --layers [MODEL [BATCH]]\n"
    "  MODEL    a model file (default: models/lenet.model, then models/mlp.model; with --layers,\n"
    "           models/lenet.model)\n"
    "  BATCH    samples per step, 1 to 65536 (default 64)\n"
    "  SECONDS  length of each of the 5 measurements, over 0 and at most 3600 (default 1)\n"
    "HOGWILD_CPU_PATH=avx512|avx2|baseline times that copy of the CPU kernels.\n";

static int usage_error(const char *what, const char *value) {
    fprintf(stderr, "nn_step: %s, got '%s'\n%s", what, value, USAGE);
    return 2;
}

int main(int argc, char **argv) {
    // The arguments, all checked before any work.
    if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        fputs(USAGE, stdout);
        return 0;
    }
    const int layers = argc > 1 && strcmp(argv[1], "--layers") == 0, first = layers ? 2 : 1;
    if (argc > first + (layers ? 2 : 3)) return usage_error("too many arguments", argv[argc - 1]);
    const char *model = argc > first ? argv[first] : NULL;
    if (model && model[0] == '-') return usage_error("no such option", model);
    long batch = 64;
    if (argc > first + 1) {
        // Digits only: strtol alone took ' 64' and '+64' (but not '64 ').
        const char *arg = argv[first + 1];
        errno = 0;
        batch = strtol(arg, NULL, 10);
        if (!*arg || strspn(arg, "0123456789") != strlen(arg) || errno || batch < 1 || batch > 65536) {
            return usage_error("BATCH must be a whole number from 1 to 65536", argv[first + 1]);
        }
    }
    double seconds = 1.0;
    if (argc > first + 2) {
        // A decimal number: strtod alone took ' 1' and hexadecimal ('0x10' ran as 16 seconds).
        const char *arg = argv[first + 2];
        char *end;
        seconds = strtod(arg, &end);
        if (end == arg || *end || strspn(arg, "0123456789.eE+-") != strlen(arg) || !isfinite(seconds) ||
            seconds <= 0 || seconds > 3600) {
            return usage_error("SECONDS must be a number over 0 and at most 3600", argv[first + 2]);
        }
    }
    // A model file given is read now too, so that a missing or bad one is said alone, before the
    // header lines (the other models are read again where they are timed).
    if (model) {
        hw_model check;
        if (hw_model_load(&check, model) != HW_OK) {
            fprintf(stderr, "nn_step: %s\n", hw_error());
            return 1;
        }
        hw_model_free(&check);
    }
    // The copy of the CPU kernels timed, as ./hogwild chooses it (HOGWILD_CPU_PATH), named with the
    // BLAS: the figures are the kernels'.
    if (hw_nn_kernels_select(getenv("HOGWILD_CPU_PATH")) != HW_OK) {
        fprintf(stderr, "nn_step: %s\n", hw_error());
        return 1;
    }
    printf("BLAS: %s\nCPU kernels: %s\n", hw_blas_info(), hw_nn_kernels_info());
    if (layers) return layer_times(model ? model : "models/lenet.model", (int)batch);
    if (model) return bench(model, (int)batch, seconds);
    return bench("models/lenet.model", (int)batch, seconds) || bench("models/mlp.model", (int)batch, seconds);
}
