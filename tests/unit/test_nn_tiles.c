// The AVX-512 copy of the CPU kernels on a CPU without AVX-512: its register tiles, checked.
//
// kernels_avx512.c differs from kernels_avx2.c only in its tile sizes (32 registers allow larger
// tiles) and in the instruction set it is compiled for; its vectors are the same 8 floats. The
// tiles are where the index arithmetic is: the edges of a tile, the channels and taps left over
// when a count is not a multiple of one. On a CPU with AVX-512 the nn_kernels suite runs the copy
// itself through the layers; elsewhere (the development VMs are Zen 3 as often as Zen 4) it would
// never run. This file compiles that same source with this test binary's flags (AVX2 and FMA,
// no AVX-512: the tiles spill registers but compute the same sums) and runs its table against the
// baseline copy's on the sizes LeNet uses and on random ones around the tile sizes. What stays
// unchecked without an AVX-512 CPU is only the compiler's EVEX encoding of the same intrinsics.
//
// The table is the one the layers call (src/nn/conv2d.c, maxpool2d.c): the same functions, the
// same arguments. Its function is renamed, as the library exports the real copy's under its name.
#define nn_kernels_avx512 nn_kernels_avx512_tiles_here
#include "nn/kernels_avx512.c"
#undef nn_kernels_avx512

#include "float_check.h"
#include "skip_report.h"

#include <cpuid.h>
#include <criterion/criterion.h>
#include <stdlib.h>

ReportHook(POST_ALL)(struct criterion_global_stats *stats) { skip_report(stats, "nn_tiles", NULL); }

static void need_avx2(void) {
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
        cr_skip_test("the AVX-512 copy's tiles not checked: this test is built for AVX2 and FMA, which this CPU lacks");
    }
}

static float *tile_floats(hw_rng *rng, size_t n, float zero_share) {
    float *p = malloc(sizeof(float) * (n ? n : 1));
    cr_assert_not_null(p);
    for (size_t i = 0; i < n; i++) p[i] = hw_rng_uniform(rng) < zero_share ? 0.0f : hw_rng_normal(rng);
    return p;
}

static int tile_rand(hw_rng *rng, int lo, int hi) { return lo + (int)hw_rng_below(rng, (uint32_t)(hi - lo + 1)); }

// One convolution, forward and both gradients, under the AVX-512 copy's tiles and the baseline's.
// Half of dy's planes are zero in some cases: the input gradient skips those channels.
static void conv_case(hw_rng *rng, hw_conv2d_dims d, int batch) {
    const nn_kernels *copies[2] = {nn_kernels_avx512_tiles_here(), nn_kernels_baseline()};
    cr_assert(nn_conv2d_direct(&d), "%dx%d output rows do not take the kernels", d.out_h, d.out_w);
    size_t in_n = (size_t)batch * d.in_c * d.in_h * d.in_w, out_n = (size_t)batch * d.out_c * d.out_h * d.out_w;
    size_t w_n = (size_t)d.out_c * d.in_c * d.k * d.k;
    float *x = tile_floats(rng, in_n, 0.0f), *w = tile_floats(rng, w_n, 0.0f);
    float *bias = tile_floats(rng, (size_t)d.out_c, 0.0f);
    float *dy = tile_floats(rng, out_n, 0.0f);
    size_t plane = (size_t)d.out_h * d.out_w;
    for (size_t p = 0; p < (size_t)batch * d.out_c; p++) {
        if (hw_rng_uniform(rng) < 0.5f) memset(dy + p * plane, 0, sizeof(float) * plane);  // as after dropout2d
    }
    float *y[2], *dw[2], *db[2], *dx[2];
    for (int c = 0; c < 2; c++) {
        size_t scratch_n = copies[c]->conv_scratch_floats(&d);
        float *scratch = malloc(sizeof(float) * (scratch_n ? scratch_n : 1));
        y[c] = malloc(sizeof(float) * out_n), dw[c] = malloc(sizeof(float) * w_n);
        db[c] = malloc(sizeof(float) * d.out_c), dx[c] = malloc(sizeof(float) * in_n);
        copies[c]->conv_forward(y[c], scratch, x, w, bias, &d, batch);
        copies[c]->conv_backward_weight(dw[c], db[c], scratch, x, dy, &d, batch);
        copies[c]->conv_backward_input(dx[c], scratch, dy, w, &d, batch);
        free(scratch);
    }
    char what[160];
    snprintf(what, sizeof what, "conv2d %d -> %d channels, %dx%d kernel, %dx%d input, batch %d", d.in_c, d.out_c, d.k,
             d.k, d.in_h, d.in_w, batch);
    EXPECT_CLOSE(y[0], y[1], out_n, "%s: forward", what);
    EXPECT_CLOSE(dw[0], dw[1], w_n, "%s: weight gradient", what);
    EXPECT_CLOSE(db[0], db[1], (size_t)d.out_c, "%s: bias gradient", what);
    EXPECT_CLOSE(dx[0], dx[1], in_n, "%s: input gradient", what);
    for (int c = 0; c < 2; c++) free(y[c]), free(dw[c]), free(db[c]), free(dx[c]);
    free(x), free(w), free(bias), free(dy);
}

static hw_conv2d_dims conv_dims(int in_c, int out_c, int k, int in_h, int in_w) {
    return (hw_conv2d_dims){.in_c = in_c, .out_c = out_c, .k = k, .stride = 1, .pad = 0, .in_h = in_h, .in_w = in_w,
                            .out_h = in_h - k + 1, .out_w = in_w - k + 1};
}

Test(nn_tiles, avx512_tiles_match_the_baseline_on_lenets_convolutions) {
    need_avx2();
    hw_rng rng;
    hw_rng_seed(&rng, 28, 0);
    conv_case(&rng, conv_dims(1, 10, 5, 28, 28), 64);  // conv1
    conv_case(&rng, conv_dims(10, 20, 5, 12, 12), 64);  // conv2
    conv_case(&rng, conv_dims(10, 20, 5, 12, 12), 3);
}

// Channel counts around every copy's tile sizes (1 to 13 outputs, 1 to 9 inputs), kernels of 1 to
// 5, output rows of 8, 16 and 24, batches of 1 to 5.
Test(nn_tiles, avx512_tiles_match_the_baseline_on_sizes_around_the_tiles) {
    need_avx2();
    hw_rng rng;
    hw_rng_seed(&rng, 512, 0);
    for (int i = 0; i < 40; i++) {
        int k = tile_rand(&rng, 1, 5), out_w = 8 * tile_rand(&rng, 1, 3), out_h = tile_rand(&rng, 1, 9);
        conv_case(&rng, conv_dims(tile_rand(&rng, 1, 9), tile_rand(&rng, 1, 13), k, out_h + k - 1, out_w + k - 1),
                  tile_rand(&rng, 1, 5));
    }
}

// 2x2 pooling, forward (values and argmax) and backward, on LeNet's two pools and odd sizes.
Test(nn_tiles, avx512_tiles_pool_as_the_baseline) {
    need_avx2();
    const nn_kernels *copies[2] = {nn_kernels_avx512_tiles_here(), nn_kernels_baseline()};
    static const int sizes[][3] = {{10, 24, 24}, {20, 8, 8}, {3, 17, 33}, {2, 9, 16}, {5, 8, 17}};
    hw_rng rng;
    hw_rng_seed(&rng, 2, 0);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        hw_maxpool2d_dims d = {.c = sizes[s][0], .k = 2, .stride = 2, .in_h = sizes[s][1], .in_w = sizes[s][2],
                               .out_h = sizes[s][1] / 2, .out_w = sizes[s][2] / 2};
        if (!nn_pool2x2_kernel(&d)) continue;
        int planes = 3 * d.c;
        size_t in_n = (size_t)planes * d.in_h * d.in_w, out_n = (size_t)planes * d.out_h * d.out_w;
        float *x = tile_floats(&rng, in_n, 0.1f), *dy = tile_floats(&rng, out_n, 0.0f);
        float *y[2], *dx[2];
        int32_t *arg[2];
        for (int c = 0; c < 2; c++) {
            y[c] = malloc(sizeof(float) * out_n), arg[c] = malloc(sizeof(int32_t) * out_n);
            dx[c] = calloc(in_n, sizeof(float));
            copies[c]->pool2x2_forward(y[c], arg[c], x, planes, d.in_h, d.in_w, d.out_h, d.out_w);
            copies[c]->pool2x2_backward(dx[c], dy, arg[c], planes, d.in_h, d.in_w, d.out_h, d.out_w);
        }
        cr_expect_eq(memcmp(y[0], y[1], sizeof(float) * out_n), 0, "pool %dx%d: forward differs", d.in_h, d.in_w);
        cr_expect_eq(memcmp(arg[0], arg[1], sizeof(int32_t) * out_n), 0, "pool %dx%d: argmax differs", d.in_h, d.in_w);
        cr_expect_eq(memcmp(dx[0], dx[1], sizeof(float) * in_n), 0, "pool %dx%d: backward differs", d.in_h, d.in_w);
        for (int c = 0; c < 2; c++) free(y[c]), free(arg[c]), free(dx[c]);
        free(x), free(dy);
    }
}
