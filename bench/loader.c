// bench/loader: is batch assembly worth a prefetch thread?
//
// Measures, per batch of 64 MNIST-sized samples drawn in shuffled order:
//   assembly  hw_batch_fill (gather 64 random images, bytes to normalised floats)
//   compute   the GEMMs of one forward + backward pass of the LeNet of PyTorch's mnist_hogwild
//             example (conv 1->10 5x5, conv 10->20 5x5, fc 320->50, fc 50->10) through the same
//             serial OpenBLAS the workers use; im2col, pooling and activations are left out, so
//             this is a lower bound of one worker's compute per batch
// and then one pass over the data through hw_loader with prefetch 0 and 1, each batch followed
// by that compute, as a worker would run it.
//
//   make build/bench_loader && build/bench_loader [mnist folder]   (synthetic digits without one)
#include "hw/data.h"
#include "hw/err.h"
#include "hw/clock.h"  // hw_now

#include "hw/blas.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BATCH = 64 };

// C[m, n] = A[m, k] B[k, n], and the two backward products of the same size.
static void gemm_fwd_bwd(int m, int n, int k, float *a, float *b, float *c, float *ga, float *gb) {
    hw_sgemm(HW_NO_TRANS, HW_NO_TRANS, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
    hw_sgemm(HW_TRANS, HW_NO_TRANS, k, n, m, 1.0f, a, k, c, n, 0.0f, gb, n);    // dW
    hw_sgemm(HW_NO_TRANS, HW_TRANS, m, k, n, 1.0f, c, n, b, n, 0.0f, ga, k);    // dX
}

typedef struct {
    float *a, *b, *c, *ga, *gb;
} scratch;

static void lenet_compute(scratch *s) {
    gemm_fwd_bwd(BATCH * 24 * 24, 10, 25, s->a, s->b, s->c, s->ga, s->gb);   // conv1 as im2col GEMM
    gemm_fwd_bwd(BATCH * 8 * 8, 20, 250, s->a, s->b, s->c, s->ga, s->gb);    // conv2
    gemm_fwd_bwd(BATCH, 50, 320, s->a, s->b, s->c, s->ga, s->gb);            // fc1
    gemm_fwd_bwd(BATCH, 10, 50, s->a, s->b, s->c, s->ga, s->gb);             // fc2
}

static double run_epoch(const hw_dataset *ds, const int64_t *idx, int64_t n, int prefetch, scratch *s,
                        double *sink) {
    hw_loader *loader;
    hw_normalize norm = {HW_MNIST_MEAN, HW_MNIST_STD};
    if (hw_loader_open(&loader, ds, idx, n, BATCH, norm, prefetch) != HW_OK) {
        fprintf(stderr, "bench_loader: %s\n", hw_error());
        exit(1);
    }
    const float *x;
    const uint8_t *y;
    double t0 = hw_now();
    int size;
    while ((size = hw_loader_next(loader, &x, &y)) > 0) {
        *sink += x[size - 1] + y[0];
        lenet_compute(s);
    }
    double t = hw_now() - t0;
    hw_loader_close(loader);
    return t;
}

int main(int argc, char **argv) {
    hw_dataset train, test;
    if (argc > 1) {
        if (hw_dataset_open(argv[1], &train, &test) != HW_OK) {
            fprintf(stderr, "bench_loader: %s\n", hw_error());
            return 1;
        }
        hw_dataset_free(&test);
    } else if (hw_synth_generate(&train, 60000, 1) != HW_OK) {
        fprintf(stderr, "bench_loader: %s\n", hw_error());
        return 1;
    }
    int64_t n = train.n;
    int64_t *idx = malloc((size_t)n * sizeof *idx);
    hw_sampler_shard(idx, n, 1, 0, 0, 1);
    hw_normalize norm = {HW_MNIST_MEAN, HW_MNIST_STD};
    size_t d = (size_t)train.height * (size_t)train.width;
    float *x = malloc(BATCH * d * sizeof *x);
    uint8_t y[BATCH];

    // Assembly alone, over the whole shuffled epoch.
    int64_t batches = 0;
    double t0 = hw_now(), sink = 0;
    for (int64_t i = 0; i + BATCH <= n; i += BATCH, batches++) {
        hw_batch_fill(&train, idx + i, BATCH, norm, x, y);
        sink += x[0];
    }
    double assembly = (hw_now() - t0) / (double)batches;

    // The largest operand: conv2's im2col matrix (conv1's is 64 * 576 x 25, a little smaller).
    size_t big = (size_t)BATCH * 8 * 8 * 250;
    scratch s = {calloc(big, 4), calloc(big, 4), calloc(big, 4), calloc(big, 4), calloc(big, 4)};
    lenet_compute(&s);  // warm up
    int reps = 200;
    t0 = hw_now();
    for (int r = 0; r < reps; r++) lenet_compute(&s);
    double compute = (hw_now() - t0) / reps;

    double plain = run_epoch(&train, idx, n, 0, &s, &sink);
    double ahead = run_epoch(&train, idx, n, 1, &s, &sink);
    int64_t n_batches = (n + BATCH - 1) / BATCH;
    printf("data: %s, %lld samples, batch %d\n", train.source, (long long)n, BATCH);
    printf("batch assembly (hw_batch_fill):        %8.1f us/batch\n", 1e6 * assembly);
    printf("LeNet fwd+bwd GEMMs (lower bound):     %8.1f us/batch  (assembly = %.2f%% of it)\n", 1e6 * compute,
           100.0 * assembly / compute);
    printf("epoch, prefetch 0:                     %8.3f s  (%.1f us/batch)\n", plain, 1e6 * plain / (double)n_batches);
    printf("epoch, prefetch 1:                     %8.3f s  (%.1f us/batch, %+.2f%%)\n", ahead,
           1e6 * ahead / (double)n_batches, 100.0 * (ahead - plain) / plain);
    if (sink == 12345.678) puts("");  // keeps the work observable
    free(s.a);
    free(s.b);
    free(s.c);
    free(s.ga);
    free(s.gb);
    free(x);
    free(idx);
    hw_dataset_free(&train);
    return 0;
}
