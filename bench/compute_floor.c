// compute_floor: how far training is from this machine's compute floor.
//
// Prints the single-core FLOP rate of the CPU BLAS (a 1024^3 sgemm, best of several), and for
// each model its floating-point operations per training sample: forward (from the layer table)
// plus backward, which is twice the forward of every layer (weight and input gradients) except
// the first, whose input gradient is never computed. The floor is flops / rate: the time one
// sample would take if every operation ran at GEMM peak. Build and run from the repository root:
//
//   make build/bench_compute_floor && build/bench_compute_floor models/lenet.model models/mlp.model
#include "hw/blas.h"
#include "hw/err.h"
#include "hw/nn.h"
#include "hw/train.h"  // hw_now

#include <stdio.h>
#include <stdlib.h>

static double sgemm_gflops(int n) {
    float *a = malloc(sizeof(float) * (size_t)n * n), *b = malloc(sizeof(float) * (size_t)n * n),
          *c = malloc(sizeof(float) * (size_t)n * n);
    for (long i = 0; i < (long)n * n; i++) a[i] = b[i] = (float)(i % 7) * 0.1f;
    double best = 0;
    for (int rep = 0; rep < 7; rep++) {
        double t0 = hw_now();
        hw_sgemm(0, 0, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        double rate = 2.0 * n * n * n / (hw_now() - t0) / 1e9;
        if (rate > best) best = rate;
    }
    free(a);
    free(b);
    free(c);
    return best;
}

int main(int argc, char **argv) {
    double peak = sgemm_gflops(1024);
    printf("single-core sgemm peak: %.1f GFLOP/s (1024^3, best of 7)\n", peak);
    for (int i = 1; i < argc; i++) {
        hw_model model;
        if (hw_model_load(&model, argv[i]) != HW_OK) {
            fprintf(stderr, "%s\n", hw_error());
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
        hw_model_free(&model);
    }
    return 0;
}
