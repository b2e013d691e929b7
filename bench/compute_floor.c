// compute_floor: how far training is from this machine's compute floor.
//
// Prints the single-core FLOP rate of the CPU BLAS (a 1024^3 sgemm, best of several, in this
// thread's CPU time as build/bench_nn_step times the step), and for
// each model its floating-point operations per training sample: forward (from the layer table)
// plus backward, which is twice the forward of every layer (weight and input gradients) except
// the first, whose input gradient is never computed. The floor is flops / rate: the time one
// sample would take if every operation ran at GEMM peak. Build and run from the repository root:
//
//   make build/bench_compute_floor && build/bench_compute_floor models/lenet.model models/mlp.model
//
// Beside each floor, the ceiling for two workers: the model's training step (forward, backward and
// the SGD update, batch 64, on private weights, no data loading) on one core alone, then as two
// independent processes at once, each on its own weights. Two cores together run it slower than
// twice one core (shared caches and memory, clocks): what the pair reaches is the most two Hogwild
// workers could, with nothing shared between them. Wall-clock rates, the best of 3 one-second runs.
#include "hw/blas.h"
#include "hw/err.h"
#include "hw/nn.h"
#include "hw/clock.h"
#include "hw/train.h"

#include "hw/optim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

// CPU time of this thread, as build/bench_nn_step times the step it is compared with: on a shared
// machine a GEMM that waited for the core does not count.
static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

// GFLOP/s of C[m x n] = op(A) op(B) over k, best of `reps` timings of `calls` calls each.
static double sgemm_gflops(hw_blas_trans ta, hw_blas_trans tb, int m, int n, int k, int calls, int reps) {
    float *a = malloc(sizeof(float) * (size_t)m * k), *b = malloc(sizeof(float) * (size_t)k * n),
          *c = malloc(sizeof(float) * (size_t)m * n);
    for (long i = 0; i < (long)m * k; i++) a[i] = (float)(i % 7) * 0.1f;
    for (long i = 0; i < (long)k * n; i++) b[i] = (float)(i % 5) * 0.1f;
    double best = 0;
    for (int rep = 0; rep < reps; rep++) {
        double t0 = cpu_now();
        for (int call = 0; call < calls; call++) {
            hw_sgemm(ta, tb, m, n, k, 1.0f, a, ta ? m : k, b, tb ? k : n, 0.0f, c, n);
        }
        double rate = 2.0 * m * n * k * calls / (cpu_now() - t0) / 1e9;
        if (rate > best) best = rate;
    }
    free(a);
    free(b);
    free(c);
    return best;
}

// Training steps of `model` (batch 64, private weights) for `seconds` of wall time; samples/s.
static double step_rate(const char *path, double seconds) {
    hw_model model;
    hw_workspace ws;
    hw_sgd opt;
    const int batch = 64;
    if (hw_model_load(&model, path) != HW_OK || hw_model_alloc_weights(&model) != HW_OK ||
        hw_workspace_alloc(&ws, &model, batch, 1) != HW_OK ||
        hw_sgd_init(&opt, model.n_weights, 0.01f, 0.5f, 0.0f, 0) != HW_OK) {
        fprintf(stderr, "compute_floor: %s\n", hw_error());
        exit(1);
    }
    hw_model_init_weights(&model, 1);
    size_t in = (size_t)hw_shape_numel(model.input) * batch;
    float *x = malloc(sizeof(float) * in);
    uint8_t *y = malloc(batch);
    hw_rng rng;
    hw_rng_seed(&rng, 7, 0);
    for (size_t i = 0; i < in; i++) x[i] = hw_rng_normal(&rng);
    for (int b = 0; b < batch; b++) y[b] = (uint8_t)hw_rng_below(&rng, (uint32_t)model.n_classes);
    double best = 0;
    for (int rep = -1; rep < 3; rep++) {  // rep -1 warms up
        long steps = 0;
        double t0 = hw_now(), t;
        do {
            hw_cpu_forward(&model, &ws, x, y, batch, 1);
            hw_cpu_backward(&model, &ws, y, batch);
            hw_sgd_step(&opt, &model, model.weights, ws.grads);
            steps++;
        } while ((t = hw_now() - t0) < (rep < 0 ? 0.2 : seconds));
        if (rep >= 0 && steps * batch / t > best) best = steps * batch / t;
    }
    free(x);
    free(y);
    hw_sgd_free(&opt);
    hw_workspace_free(&ws);
    hw_model_free(&model);
    return best;
}

// The step on one core, then in two processes at once. Returns the exit status: a process that
// could not measure (killed by a signal, failed) is said, not printed as a rate of 0.
static int two_worker_ceiling(const char *path) {
    double alone = step_rate(path, 1.0);
    int fds[2];
    pid_t pids[2];
    if (pipe(fds) != 0) {
        perror("compute_floor: pipe");
        return 1;
    }
    for (int i = 0; i < 2; i++) {
        if ((pids[i] = fork()) < 0) {
            perror("compute_floor: fork");
            return 1;
        }
        if (pids[i] == 0) {
            double rate = step_rate(path, 1.0);
            ssize_t wrote = write(fds[1], &rate, sizeof rate);
            _exit(wrote == (ssize_t)sizeof rate ? 0 : 1);
        }
    }
    close(fds[1]);
    double rates[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        if (read(fds[0], &rates[i], sizeof rates[i]) != (ssize_t)sizeof rates[i]) rates[i] = 0;
    }
    close(fds[0]);
    int failed = 0;
    for (int i = 0; i < 2; i++) {
        int status = 0;
        if (waitpid(pids[i], &status, 0) != pids[i] || !WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
            !(rates[i] > 0)) {
            fprintf(stderr, "compute_floor: %s: the second measurement's process %d %s\n", path, i,
                    WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "failed");
            failed = 1;
        }
    }
    if (failed) return 1;
    double both = rates[0] + rates[1];
    printf("%s: training step (forward, backward, SGD update) on one core %.0f samples/s; two at once, each on "
           "its own weights: %.0f + %.0f = %.0f samples/s (%.2fx one core): the ceiling for 2 workers\n",
           path, alone, rates[0], rates[1], both, both / alone);
    return 0;
}

static const char USAGE[] =
    "usage: build/bench_compute_floor [MODEL...]\n"
    "  Prints the single-core sgemm peak and LeNet's GEMMs; for each MODEL file, its FLOPs per\n"
    "  training sample, the floor they give, and the ceiling for two workers.\n";

int main(int argc, char **argv) {
    // The arguments, all checked before the measurements (which take seconds).
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(USAGE, stdout);
            return 0;
        }
        if (argv[i][0] == '-') {
            fprintf(stderr, "compute_floor: no such option '%s'\n%s", argv[i], USAGE);
            return 2;
        }
        hw_model model;
        if (hw_model_load(&model, argv[i]) != HW_OK) {
            fprintf(stderr, "compute_floor: %s\n", hw_error());
            return 1;
        }
        hw_model_free(&model);
    }
    if (hw_blas_open() != HW_OK) {
        fprintf(stderr, "compute_floor: %s\n", hw_error());
        return 1;
    }
    if (hw_nn_kernels_select(getenv("HOGWILD_CPU_PATH")) != HW_OK) {
        fprintf(stderr, "compute_floor: %s\n", hw_error());
        return 1;
    }
    printf("BLAS: %s\nCPU kernels: %s\n", hw_blas_info(), hw_nn_kernels_info());
    double peak = sgemm_gflops(HW_NO_TRANS, HW_NO_TRANS, 1024, 1024, 1024, 1, 7);
    printf("single-core sgemm peak: %.1f GFLOP/s (1024^3, best of 7)\n", peak);
    // The GEMMs of one LeNet sample (conv as im2col + GEMM): what training actually runs.
    static const struct { const char *what; hw_blas_trans ta, tb; int m, n, k; } lenet[] = {
        {"conv2 forward    W[20x250] cols[250x64]", HW_NO_TRANS, HW_NO_TRANS, 20, 64, 250},
        {"conv2 dW         dy[20x64] cols^T", HW_NO_TRANS, HW_TRANS, 20, 250, 64},
        {"conv2 dcols      W^T dy[20x64]", HW_TRANS, HW_NO_TRANS, 250, 64, 20},
        {"conv1 forward    W[10x25] cols[25x576]", HW_NO_TRANS, HW_NO_TRANS, 10, 576, 25},
        {"fc1 forward      x[64x320] W^T (batch 64)", HW_NO_TRANS, HW_TRANS, 64, 50, 320},
    };
    for (size_t i = 0; i < sizeof lenet / sizeof lenet[0]; i++) {
        printf("  LeNet %s: %.1f GFLOP/s\n", lenet[i].what,
               sgemm_gflops(lenet[i].ta, lenet[i].tb, lenet[i].m, lenet[i].n, lenet[i].k, 2000, 5));
    }
    for (int i = 1; i < argc; i++) {
        hw_model model;
        if (hw_model_load(&model, argv[i]) != HW_OK) {
            fprintf(stderr, "compute_floor: %s\n", hw_error());
            return 1;
        }
        double forward = hw_model_forward_flops(&model);
        // Backward stops below the first layer with parameters: no input gradient there or before.
        double first_flops = 0;
        for (int l = 0; l < model.n_layers; l++) {
            const hw_layer *layer = &model.layers[l];
            if (layer->type->flops) first_flops += layer->type->flops(layer);
            if (layer->n_params > 0) break;
        }
        double train = 3 * forward - first_flops;
        printf("%s: forward %.3f MFLOP/sample, training ~%.3f MFLOP/sample, floor %.0f samples/s per core\n", argv[i],
               forward / 1e6, train / 1e6, peak * 1e9 / train);
        fflush(stdout);
        hw_model_free(&model);
        if (two_worker_ceiling(argv[i]) != 0) return 1;
    }
    return 0;
}
