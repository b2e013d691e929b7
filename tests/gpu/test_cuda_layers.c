// Each GPU layer function against its CPU layer (suite cuda_layers): the hw_cuda_* functions of
// src/cuda/layer_ops.c, run on the device on random inputs and edge cases, compared with the CPU layers
// of src/nn (made by the parser's hw_layer_setup and run through the CPU backend), which are
// verified on their own (gradient checks, PyTorch reference values).
//
// What it proves: the kernels' index arithmetic (which element reads and writes which, padding,
// strides, window bounds, the permutes between NCHW and the GEMM's channel-major layout), their
// math and edge rules (ties, NaN, -0, p = 0 and 1, weight decay, nesterov), which kernels and
// GEMMs make each layer and in what order, the scratch layout, and the row-major to column-major
// GEMM mapping: all agree with the CPU layers to float rounding (relative error < 1e-4, exact
// where the kernel only selects or copies).
//
// Where it runs: on a GPU, the real kernels and cuBLAS. Without one the tests skip, saying why,
// and `make sim` runs them on the simulated device (tests/simcuda/), where layer_ops.c runs unchanged
// over launchers that loop over the kernels' own per-index code (src/cuda/kernels.cuh) and the
// GEMMs go to OpenBLAS given cuBLAS's arguments. The simulated device leaves out what only a GPU
// does: launch configurations, shared memory and barriers, atomics, the device's rounding (FMA
// contraction, expf and logf) and cuBLAS itself.
#include "cuda/kernels.cuh"  // col_major_gemm_of: the GEMM mapping's leading dimensions

#include "cuda/layer_ops.h"
#include "hw/data.h"
#include "hw/err.h"
#include "hw/nn.h"
#include "hw/optim.h"
#include "hw/rng.h"
#include "float_check.h"
#include "gpu_tests.h"

#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

// Criterion names a hook after its line: keep this off the lines of the other suites' hooks.

ReportHook(POST_ALL)(struct criterion_global_stats *stats) { gpu_suite_report(stats, "cuda_layers"); }

static float *floats(size_t n) {
    float *p = malloc(sizeof(float) * (n ? n : 1));
    cr_assert(p);
    return p;
}

// Equal bit for bit, or both NaN: for kernels that select or copy values (relu, maxpool).
static void expect_same_floats(const float *got, const float *want, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++) {
        int same = memcmp(&got[i], &want[i], sizeof(float)) == 0 || (isnan(got[i]) && isnan(want[i]));
        cr_expect(same, "%s: element %zu is %g, the CPU layer has %g", what, i, (double)got[i], (double)want[i]);
        if (!same) return;
    }
}

// ---- one CPU layer of src/nn, run the way the model runs it ----

typedef struct {
    hw_layer layer;
    int batch;
    size_t n_in, n_out, n_w, n_b;
    float *x, *y, *w, *bias, *dy, *dx, *dw, *db, *scratch;
    uint8_t *saved;
    hw_rng rng;  // the workspace RNG (dropout draws)
} cpu_layer;

// Sets up `line` on the per-sample shape `in` for `batch` samples, with random input, parameters
// and output gradient.
static void cpu_layer_open(cpu_layer *c, const char *line, hw_shape in, int batch, hw_rng *rng) {
    memset(c, 0, sizeof *c);
    hw_shape params[HW_LAYER_MAX_PARAMS];
    cr_assert_eq(hw_layer_setup(&c->layer, line, in, params), HW_OK, "%s: %s", line, hw_error());
    const hw_layer_type *type = c->layer.type;
    c->batch = batch;
    c->n_in = (size_t)batch * (size_t)hw_shape_numel(in);
    c->n_out = (size_t)batch * (size_t)hw_shape_numel(c->layer.out_shape);
    c->n_w = c->layer.n_params > 0 ? (size_t)hw_shape_numel(params[0]) : 0;
    c->n_b = c->layer.n_params > 1 ? (size_t)hw_shape_numel(params[1]) : 0;
    c->x = random_floats(rng, c->n_in, 1.0f);
    c->w = random_floats(rng, c->n_w, 0.5f);
    c->bias = random_floats(rng, c->n_b, 0.5f);
    c->dy = random_floats(rng, c->n_out, 1.0f);
    c->y = floats(c->n_out);
    c->dx = floats(c->n_in);
    c->dw = floats(c->n_w);
    c->db = floats(c->n_b);
    c->scratch = floats(type->scratch_floats ? type->scratch_floats(&c->layer, batch) : 0);
    size_t saved = type->saved_bytes ? type->saved_bytes(&c->layer, batch) : 0;
    c->saved = calloc(saved ? saved : 1, 1);
    cr_assert(c->saved);
    hw_rng_seed(&c->rng, 1, 2);
}

static hw_layer_io cpu_layer_io(cpu_layer *c) {
    return (hw_layer_io){
        .batch = c->batch,
        .training = 1,
        .in = c->x,
        .out = c->y,
        .weight = c->n_w ? c->w : NULL,
        .bias = c->n_b ? c->bias : NULL,
        .scratch = c->scratch,
        .saved = c->saved,
        .rng = &c->rng,
    };
}

static void cpu_layer_forward(cpu_layer *c) {
    hw_layer_io io = cpu_layer_io(c);
    hw_cpu_backend.forward(&c->layer, &io);
}

// Backward of the last forward into dx, dw and db, as the model asks for them: every one.
static void cpu_layer_backward(cpu_layer *c) {
    hw_layer_io io = cpu_layer_io(c);
    io.dout = c->dy;
    io.din = c->dx;
    io.dweight = c->n_w ? c->dw : NULL;
    io.dbias = c->n_b ? c->db : NULL;
    hw_cpu_backend.backward(&c->layer, &io);
}

static void cpu_layer_close(cpu_layer *c) {
    float *buffers[] = {c->x, c->y, c->w, c->bias, c->dy, c->dx, c->dw, c->db, c->scratch};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++) free(buffers[i]);
    free(c->saved);
}

// The device's result of a layer function: device copies of the CPU layer's inputs, and device
// outputs of the same sizes, unset (NaN) so that a kernel that skips an element is seen.
typedef struct {
    float *x, *w, *bias, *dy, *y, *dx, *dw, *db;
} gpu_layer;

static float *nan_on_device(size_t n) {
    float *host = floats(n);
    for (size_t i = 0; i < n; i++) host[i] = NAN;
    float *dev = to_device(host, n);
    free(host);
    return dev;
}

static gpu_layer gpu_layer_open(const cpu_layer *c) {
    gpu_layer g = {
        .x = to_device(c->x, c->n_in),
        .w = to_device(c->w, c->n_w),
        .bias = to_device(c->bias, c->n_b),
        .dy = to_device(c->dy, c->n_out),
        .y = nan_on_device(c->n_out),
        .dx = nan_on_device(c->n_in),
        .dw = nan_on_device(c->n_w),
        .db = nan_on_device(c->n_b),
    };
    return g;
}

static void gpu_layer_close(gpu_layer *g) {
    float *buffers[] = {g->x, g->w, g->bias, g->dy, g->y, g->dx, g->dw, g->db};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++) hw_cuda_free(buffers[i]);
}

// ---- GEMM ----

static int max_1(int n) { return n > 1 ? n : 1; }

// The BLAS rule on the leading dimensions, which cuBLAS enforces (OpenBLAS lets an empty matrix
// pass): at least the number of rows of the matrix as stored, and at least 1.
static void expect_valid_leading_dimensions(col_major_gemm g, const char *what) {
    cr_expect_geq(g.ld_first, max_1(g.trans_first ? g.k : g.m), "%s: ld of the first matrix %d", what, g.ld_first);
    cr_expect_geq(g.ld_second, max_1(g.trans_second ? g.n : g.k), "%s: ld of the second matrix %d", what, g.ld_second);
    cr_expect_geq(g.ldc, max_1(g.m), "%s: ldc %d", what, g.ldc);
}

static void check_sgemm(hw_cuda_ctx ctx, int ta, int tb, int m, int n, int k, float alpha, float beta, hw_rng *rng) {
    float *a = random_floats(rng, (size_t)m * k, 1.0f), *b = random_floats(rng, (size_t)k * n, 1.0f);
    float *c = random_floats(rng, (size_t)m * n, 1.0f);
    float *da = to_device(a, (size_t)m * k), *db = to_device(b, (size_t)k * n), *dc = to_device(c, (size_t)m * n);
    OK(hw_cuda_sgemm(ctx.blas, ta, tb, m, n, k, alpha, da, db, beta, dc));
    OK(hw_cuda_stream_sync(ctx.stream));  // ctx.stream does not synchronise with from_device's legacy stream
    ref_gemm(ta, tb, m, n, k, alpha, a, b, beta, c);
    float *got = from_device(dc, (size_t)m * n);
    char what[96];
    snprintf(what, sizeof what, "sgemm ta=%d tb=%d m=%d n=%d k=%d beta=%g", ta, tb, m, n, k, (double)beta);
    EXPECT_CLOSE(got, c, (size_t)m * n, "%s", what);
    expect_valid_leading_dimensions(col_major_gemm_of(ta, tb, m, n, k, a, b), what);
    free(a), free(b), free(c), free(got);
    hw_cuda_free(da), hw_cuda_free(db), hw_cuda_free(dc);
}

Test(cuda_layers, sgemm_mapping_matches_row_major_products) {
    need_gpu();
    hw_cuda_ctx ctx = make_ctx();
    hw_rng rng;
    hw_rng_seed(&rng, 31, 0);
    // m, n, k: non-square, vectors both ways, and an empty inner dimension (C = beta C)
    const int sizes[][3] = {{1, 1, 1}, {3, 5, 7}, {7, 3, 5}, {17, 1, 9}, {1, 13, 4}, {6, 4, 0}, {23, 31, 19}};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        for (int trans = 0; trans < 4; trans++) {
            for (int with_beta = 0; with_beta < 2; with_beta++) {
                check_sgemm(ctx, trans & 1, trans >> 1, sizes[s][0], sizes[s][1], sizes[s][2], 1.5f,
                            with_beta ? 0.75f : 0.0f, &rng);
            }
        }
    }
    for (int round = 0; round < 8; round++) {  // random sizes and scales
        int m = round == 0 ? 1 : rand_in(&rng, 1, 37), n = rand_in(&rng, 1, 41), k = rand_in(&rng, 1, 29);
        float alpha = 0.5f + hw_rng_uniform(&rng), beta = round >= 4 ? 0.75f : 0.0f;
        check_sgemm(ctx, round & 1, (round >> 1) & 1, m, n, k, alpha, beta, &rng);
    }
    free_ctx(ctx);
}

// ---- layers ----

Test(cuda_layers, linear_matches_the_cpu_layer) {
    need_gpu();
    hw_cuda_ctx ctx = make_ctx();
    hw_rng rng;
    hw_rng_seed(&rng, 32, 0);
    for (int round = 0; round < 8; round++) {
        int batch = round == 0 ? 1 : rand_in(&rng, 1, 33), in = rand_in(&rng, 1, 67), out = rand_in(&rng, 1, 19);
        if (round == 1) batch = 64, in = 320, out = 50;  // LeNet's fc1
        char line[64];
        snprintf(line, sizeof line, "linear %d", out);
        cpu_layer c;
        cpu_layer_open(&c, line, hw_shape_make(1, (int64_t[]){in}), batch, &rng);
        cpu_layer_forward(&c);
        cpu_layer_backward(&c);
        gpu_layer g = gpu_layer_open(&c);
        OK(hw_cuda_linear_forward(ctx, g.y, g.x, g.w, g.bias, batch, in, out));
        OK(hw_cuda_linear_backward(ctx, g.dx, g.dw, g.db, g.dy, g.x, g.w, batch, in, out));
        OK(hw_cuda_stream_sync(ctx.stream));
        float *y = from_device(g.y, c.n_out), *dx = from_device(g.dx, c.n_in);
        float *dw = from_device(g.dw, c.n_w), *db = from_device(g.db, c.n_b);
        EXPECT_CLOSE(y, c.y, c.n_out, "linear forward B=%d in=%d out=%d", batch, in, out);
        EXPECT_CLOSE(dx, c.dx, c.n_in, "linear dx B=%d in=%d out=%d", batch, in, out);
        EXPECT_CLOSE(dw, c.dw, c.n_w, "linear dw B=%d in=%d out=%d", batch, in, out);
        EXPECT_CLOSE(db, c.db, c.n_b, "linear dbias B=%d in=%d out=%d", batch, in, out);
        free(y), free(dx), free(dw), free(db);
        gpu_layer_close(&g);
        cpu_layer_close(&c);
    }
    free_ctx(ctx);
}

// The layer on d, its scratch sized for a batch of scratch_batch >= d.batch samples, as the GPU
// runner sizes it for its max_batch and then runs smaller batches (an epoch's last); dx, dw or
// dbias not asked for where `mask` says so (bit 0, 1, 2: NULL for dx, dw, dbias). What is asked for
// matches the CPU layer, what is not stays NaN (untouched).
static void check_conv2d_in_scratch(hw_cuda_ctx ctx, hw_conv_dims d, int scratch_batch, int mask, hw_rng *rng) {
    char line[96], what[192];
    snprintf(line, sizeof line, "conv2d %d %d stride=%d padding=%d", d.out_channels, d.kernel, d.stride, d.padding);
    snprintf(what, sizeof what, "%s on B=%d C=%d %dx%d (scratch for %d, mask %d, direct %d)", line, d.batch,
             d.in_channels, d.height, d.width, scratch_batch, mask, conv_is_direct(d));
    cpu_layer c;
    cpu_layer_open(&c, line, hw_shape_make(3, (int64_t[]){d.in_channels, d.height, d.width}), d.batch, rng);
    cpu_layer_forward(&c);
    cpu_layer_backward(&c);
    gpu_layer g = gpu_layer_open(&c);
    hw_conv_dims sized = d;
    sized.batch = scratch_batch;
    size_t sf = hw_cuda_conv2d_scratch_floats(sized);
    cr_assert_geq(sf, hw_cuda_conv2d_scratch_floats(d), "%s: scratch shrinks with the batch", what);
    float *scratch = nan_on_device(sf);
    OK(hw_cuda_conv2d_forward(ctx, g.y, g.x, g.w, g.bias, d, scratch));
    OK(hw_cuda_conv2d_backward(ctx, mask & 1 ? NULL : g.dx, mask & 2 ? NULL : g.dw, mask & 4 ? NULL : g.db, g.dy, g.x,
                               g.w, d, scratch));
    OK(hw_cuda_stream_sync(ctx.stream));
    float *y = from_device(g.y, c.n_out), *dx = from_device(g.dx, c.n_in);
    float *dw = from_device(g.dw, c.n_w), *db = from_device(g.db, c.n_b);
    EXPECT_CLOSE(y, c.y, c.n_out, "forward of %s", what);
    if (mask & 1) {
        for (size_t i = 0; i < c.n_in; i++) cr_expect(isnan(dx[i]), "%s: dx[%zu] written", what, i);
    } else {
        EXPECT_CLOSE(dx, c.dx, c.n_in, "dx of %s", what);
    }
    if (mask & 2) {
        for (size_t i = 0; i < c.n_w; i++) cr_expect(isnan(dw[i]), "%s: dw[%zu] written", what, i);
    } else {
        EXPECT_CLOSE(dw, c.dw, c.n_w, "dw of %s", what);
    }
    if (mask & 4) {
        for (size_t i = 0; i < c.n_b; i++) cr_expect(isnan(db[i]), "%s: db[%zu] written", what, i);
    } else {
        EXPECT_CLOSE(db, c.db, c.n_b, "dbias of %s", what);
    }
    free(y), free(dx), free(dw), free(db);
    hw_cuda_free(scratch);
    gpu_layer_close(&g);
    cpu_layer_close(&c);
}

static void check_conv2d(hw_cuda_ctx ctx, hw_conv_dims d, hw_rng *rng) {
    check_conv2d_in_scratch(ctx, d, d.batch, 0, rng);
}

Test(cuda_layers, conv2d_matches_the_cpu_layer) {
    need_gpu();
    hw_cuda_ctx ctx = make_ctx();
    hw_rng rng;
    hw_rng_seed(&rng, 33, 0);
    // {batch, in_channels, height, width, out_channels, kernel, stride, padding}
    const hw_conv_dims cases[] = {
        {3, 1, 28, 28, 10, 5, 1, 0},   // LeNet's conv1
        {2, 10, 12, 12, 20, 5, 1, 0},  // LeNet's conv2
        {2, 3, 9, 8, 4, 3, 2, 1},      // stride 2, padding 1, odd sizes
        {3, 2, 11, 10, 5, 4, 3, 2},    // stride 3, padding 2: some taps read only padding
        {2, 4, 5, 6, 3, 1, 1, 0},      // 1x1: the CPU layer's columns are its input
        {1, 2, 7, 7, 3, 1, 2, 0},      // 1x1, stride 2
        {1, 2, 3, 3, 2, 5, 1, 1},      // a kernel as large as the padded input
        {2, 2, 6, 9, 3, 2, 2, 1},      // even kernel, stride and padding
        // Batches large enough for the weight gradient's GEMM split over the batch and the bias
        // gradient's rows summed in chunks (asserted below): conv2 at 512. The direct weight
        // gradient in chunks of one tile (conv1 at 64) and of two, the last one short (at 301).
        {64, 1, 28, 28, 10, 5, 1, 0},
        {512, 10, 12, 12, 20, 5, 1, 0},
        {301, 1, 28, 28, 10, 5, 1, 0},
        {3, 2, 7, 7, 17, 3, 1, 1},  // direct, 17 output channels: a second group of one
        // The edges of the rules (asserted below): the direct forward at 32 taps and at 4096
        // weights, the GEMM one past each; B*OH*OW of exactly 16384 and 32768 (the smallest split
        // in 32, the split in 64); columns with too few twos to split; padding past half the
        // kernel (windows of padding only); stride past the kernel (inputs no window reads);
        // outputs of one row, one column, one pixel; more output channels than rows * columns.
        {2, 2, 6, 5, 3, 4, 1, 1},       // 32 taps: direct
        {1, 33, 4, 3, 2, 1, 1, 0},      // 33 taps: GEMM
        {1, 2, 6, 6, 128, 4, 2, 1},     // 32 taps x 128 = 4096 weights: direct
        {1, 17, 3, 4, 241, 1, 1, 0},    // 17 taps x 241 = 4097 weights: GEMM
        {2, 1, 3, 3, 4096, 1, 1, 0},    // 1 tap x 4096: direct
        {64, 4, 16, 16, 8, 3, 1, 1},    // 16384 columns (36 taps: the GEMMs)
        {128, 4, 16, 16, 8, 3, 1, 1},   // 32768 columns
        {65, 4, 16, 16, 8, 3, 1, 1},    // 16640 columns: no power of two 32 or more divides them
        {2, 2, 5, 6, 3, 3, 1, 2},       // padding 2 on a 3x3 kernel
        {2, 1, 4, 4, 2, 2, 1, 3},       // padding 3 on a 2x2 kernel: outputs of padding only
        {2, 2, 11, 10, 3, 2, 4, 0},     // stride 4 on a 2x2 kernel
        {1, 3, 9, 7, 2, 1, 3, 1},       // 1x1 kernel, stride 3, padding 1
        {3, 2, 5, 9, 4, 5, 1, 0},       // OH = 1
        {3, 2, 9, 5, 4, 5, 2, 0},       // OW = 1
        {1, 3, 4, 4, 5, 4, 1, 0},       // OH = OW = 1, batch 1
        {2, 1, 1, 1, 7, 1, 1, 0},       // 1x1 input: 7 output channels over 2 columns
        {1, 34, 3, 3, 3, 3, 1, 1},      // 306 rows, 9 columns, GEMM forward
        {1, 1, 91, 91, 4097, 1, 1, 0},  // dbias in 2 chunks, not 3: col holds 8281 partial sums
    };
    cr_assert(conv_dw_splits(250, 512 * 8 * 8) > 1, "conv2 at 512 must take the split weight-gradient GEMM");
    cr_assert(sum_rows_chunks(20, 512 * 8 * 8, 250 * 512 * 8 * 8) > 1, "and the chunked bias-gradient sum");
    cr_assert(conv_dw_direct_chunk(64 * 24 * 24) == CONV_DW_DIRECT_TILE &&
                  conv_dw_direct_chunk(301 * 24 * 24) == 2 * CONV_DW_DIRECT_TILE &&
                  301 * 24 * 24 % (2 * CONV_DW_DIRECT_TILE) != 0,
              "conv1's direct weight gradient in chunks of one tile at 64, of two at 301, the last one short");
    cr_assert(conv_is_direct(cases[0]) && !conv_is_direct(cases[1]),
              "conv1 runs its forward directly, conv2 through im2col and the GEMM");
    cr_assert(conv_is_direct(cases[12]) && !conv_is_direct(cases[13]) && conv_is_direct(cases[14]) &&
                  !conv_is_direct(cases[15]) && conv_is_direct(cases[16]),
              "the direct forward's edges: 32 taps, 4096 weights");
    cr_assert(!conv_is_direct(cases[17]) && conv_dw_splits(36, 16384) == 32 && conv_dw_splits(36, 32768) == 64 &&
                  conv_dw_splits(36, 16425) == 1,
              "the split's edges: 16384 and 32768 columns split, 16425 does not");
    cr_assert(!conv_is_direct(cases[29]) && sum_rows_chunks(4097, 8281, 8281) == 2,
              "dbias's chunks limited by the scratch");
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) check_conv2d(ctx, cases[k], &rng);
    for (int round = 0; round < 8; round++) check_conv2d(ctx, random_conv_dims(&rng, 5), &rng);
    free_ctx(ctx);
}

// The runner sizes one scratch for its max_batch and runs every batch up to it in that scratch.
// A smaller batch may split the weight gradient's GEMM where the larger one does not (the split
// needs a power of two dividing B*OH*OW): a 5x5 output plane at batch 672 splits in 32, at 673
// not at all.
Test(cuda_layers, conv2d_scratch_of_a_batch_serves_every_smaller_batch) {
    need_gpu();
    // {batch, in_channels, height, width, out_channels, kernel, stride, padding}
    const hw_conv_dims shapes[] = {
        {673, 1, 7, 7, 4, 3, 1, 0},     // 5x5 outputs
        {2049, 3, 9, 9, 8, 3, 2, 1},    // 5x5 outputs, stride 2
        {1025, 2, 7, 7, 16, 1, 1, 0},   // 7x7 outputs, 1x1 kernel
        {33, 10, 12, 12, 20, 5, 1, 0},  // LeNet's conv2
        {513, 1, 28, 28, 10, 5, 1, 0},  // LeNet's conv1
    };
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        hw_conv_dims d = shapes[k];
        size_t at_max = hw_cuda_conv2d_scratch_floats(d);
        for (int batch = 1; batch < shapes[k].batch; batch++) {
            d.batch = batch;
            size_t need = hw_cuda_conv2d_scratch_floats(d);
            cr_expect_leq(need, at_max, "conv2d shape %zu: batch %d needs %zu floats of scratch, batch %d has %zu", k,
                          batch, need, shapes[k].batch, at_max);
            if (need > at_max) break;
        }
    }
    // A convolution too wide to split at any batch up to its own (32 splits of its 2000 rows would
    // outgrow half of its 19200 columns) gets no room for partial sums.
    hw_conv_dims wide = {300, 80, 12, 12, 32, 5, 1, 0};
    cr_expect_eq(hw_cuda_conv2d_scratch_floats(wide), (size_t)(2000 + 32) * 300 * 64, "no partial sums for %s",
                 "80 channels of 5x5 taps at batch 300");
    hw_cuda_ctx ctx = make_ctx();
    hw_rng rng;
    hw_rng_seed(&rng, 50, 0);
    hw_conv_dims d = shapes[0];
    d.batch = 672;
    cr_assert(conv_dw_splits(9, 672 * 25) > 1 && conv_dw_splits(9, 673 * 25) == 1, "batch 672 splits, 673 does not");
    check_conv2d_in_scratch(ctx, d, 673, 0, &rng);
    free_ctx(ctx);
}

// values: 0 random, 1 few distinct values (ties), 2 random with NaNs
static void check_maxpool2d(int batch, int channels, int height, int width, int kernel, int stride, int values,
                            hw_rng *rng) {
    char line[64], what[160];
    snprintf(line, sizeof line, "maxpool2d %d stride=%d", kernel, stride);
    snprintf(what, sizeof what, "%s on B=%d C=%d %dx%d, %s", line, batch, channels, height, width,
             values == 0   ? "random"
             : values == 1 ? "ties"
                           : "NaNs");
    cpu_layer c;
    cpu_layer_open(&c, line, hw_shape_make(3, (int64_t[]){channels, height, width}), batch, rng);
    for (size_t i = 0; i < c.n_in && values == 1; i++) c.x[i] = (float)hw_rng_below(rng, 3);
    for (size_t i = 0; i < c.n_in && values == 2; i++) {
        if (hw_rng_below(rng, 5) == 0) c.x[i] = NAN;
    }
    cpu_layer_forward(&c);
    cpu_layer_backward(&c);
    const int32_t *cpu_argmax = (const int32_t *)(const void *)c.saved;  // the CPU layer's saved state
    gpu_layer g = gpu_layer_open(&c);
    int32_t *d_argmax = (int32_t *)(void *)nan_on_device(c.n_out);
    OK(hw_cuda_maxpool2d_forward(NULL, g.y, d_argmax, g.x, batch, channels, height, width, kernel, stride));
    OK(hw_cuda_maxpool2d_backward(NULL, g.dx, g.dy, d_argmax, batch, channels, height, width, kernel, stride));
    float *y = from_device(g.y, c.n_out), *dx = from_device(g.dx, c.n_in);
    int32_t *argmax = (int32_t *)(void *)from_device((const float *)(const void *)d_argmax, c.n_out);
    expect_same_floats(y, c.y, c.n_out, what);
    for (size_t o = 0; o < c.n_out; o++) {
        cr_expect_eq(argmax[o], cpu_argmax[o], "%s: output %zu takes input %d, the CPU layer %d", what, o, argmax[o],
                     cpu_argmax[o]);
        if (argmax[o] != cpu_argmax[o]) break;
    }
    EXPECT_CLOSE(dx, c.dx, c.n_in, "dx of %s", what);
    free(y), free(dx), free(argmax);
    hw_cuda_free(d_argmax);
    gpu_layer_close(&g);
    cpu_layer_close(&c);
}

Test(cuda_layers, maxpool2d_matches_the_cpu_layer) {
    need_gpu();
    hw_rng rng;
    hw_rng_seed(&rng, 34, 0);
    // {batch, channels, height, width, kernel, stride}
    const int cases[][6] = {
        {2, 3, 8, 8, 2, 2},   // LeNet's: non-overlapping 2x2
        {2, 2, 6, 7, 2, 2},   // an odd width leaves a column out
        {2, 2, 9, 7, 3, 2},   // overlapping windows
        {1, 3, 7, 9, 3, 1},   // overlapping, stride 1
        {2, 2, 7, 8, 2, 3},   // gaps between windows
        {1, 2, 5, 5, 5, 1},   // one window over the whole plane
        {3, 1, 4, 6, 1, 1},   // the identity
        {2, 2, 5, 7, 2, 1},   // 2x2, stride 1: each inner pixel in 4 windows
        {1, 3, 7, 5, 2, 2},   // odd height and width: a row and a column left out
        {2, 2, 9, 11, 3, 3},  // 3x3, stride 3: the last columns left out
        {1, 2, 8, 10, 3, 2},  // 3x3, stride 2, even sizes: the last row in no window
        {2, 1, 3, 3, 3, 3},   // one window, stride past the plane
        {1, 1, 1, 9, 1, 2},   // one row, every other pixel
        // Windows that tile the plane take the gradient window by window, the others pixel by pixel.
        {2, 2, 9, 6, 3, 3},     // 3x3 windows tiling the plane
        {4, 10, 24, 24, 2, 2},  // LeNet's first pool
    };
    cr_assert(maxpool_windows_tile(8, 8, 2, 2) && maxpool_windows_tile(9, 6, 3, 3) &&
                  !maxpool_windows_tile(6, 7, 2, 2) && !maxpool_windows_tile(9, 7, 3, 2),
              "the cases take both ways of writing the gradient");
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        for (int values = 0; values < 3; values++) {
            const int *s = cases[k];
            check_maxpool2d(s[0], s[1], s[2], s[3], s[4], s[5], values, &rng);
        }
    }
    for (int round = 0; round < 6; round++) {  // random sizes
        int k = rand_in(&rng, 1, 3), s = rand_in(&rng, 1, 3);
        check_maxpool2d(round == 0 ? 1 : rand_in(&rng, 1, 4), rand_in(&rng, 1, 5), rand_in(&rng, k, 13),
                        rand_in(&rng, k, 11), k, s, round % 3, &rng);
    }
}

Test(cuda_layers, relu_matches_the_cpu_layer) {
    need_gpu();
    hw_rng rng;
    hw_rng_seed(&rng, 35, 0);
    cpu_layer c;
    // 118 x 105 floats: more than one grid of blocks' first pass
    cpu_layer_open(&c, "relu", hw_shape_make(3, (int64_t[]){3, 5, 7}), 118, &rng);
    const float special[] = {0.0f, -0.0f, NAN, INFINITY, -INFINITY, 1e-40f, -1e-40f, 3.0f, -3.0f};
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) c.x[i * 7] = special[i];
    cpu_layer_forward(&c);
    cpu_layer_backward(&c);
    gpu_layer g = gpu_layer_open(&c);
    OK(hw_cuda_relu_forward(NULL, g.y, g.x, (int64_t)c.n_out));
    OK(hw_cuda_relu_backward(NULL, g.dx, g.dy, g.y, (int64_t)c.n_in));
    float *y = from_device(g.y, c.n_out), *dx = from_device(g.dx, c.n_in);
    expect_same_floats(y, c.y, c.n_out, "relu forward");
    expect_same_floats(dx, c.dx, c.n_in, "relu backward");
    free(y), free(dx);
    gpu_layer_close(&g);
    cpu_layer_close(&c);
}

// The GPU draws its masks from a hash of (seed, step, index) and the CPU layers from the
// workspace RNG: the masks differ by design (a GPU run is not a CPU run, as with torch). So the
// CPU layer is given the GPU's mask as its saved state, and its backward (the same masking and
// scaling its forward applies) judges both the GPU's forward and backward.
static void check_dropout(int two_d, float p, hw_rng *rng) {
    enum { B = 7, C = 5, H = 3, W = 4 };  // odd sizes
    const uint64_t seed = 11, step = 3;
    char line[64], what[96];
    snprintf(line, sizeof line, "%s %g", two_d ? "dropout2d" : "dropout", (double)p);
    snprintf(what, sizeof what, "%s (seed %d, step %d)", line, (int)seed, (int)step);
    cpu_layer c;
    cpu_layer_open(&c, line, hw_shape_make(3, (int64_t[]){C, H, W}), B, rng);
    int64_t plane = two_d ? H * W : 1, n = (int64_t)c.n_in;
    for (int64_t unit = 0; unit < n / plane; unit++) {
        c.saved[unit] = hw_dropout_uniform(seed, step, (uint64_t)unit) >= p;
    }
    gpu_layer g = gpu_layer_open(&c);
    if (two_d) {
        OK(hw_cuda_dropout2d_forward(NULL, g.y, g.x, n / plane, plane, p, seed, step));
        OK(hw_cuda_dropout2d_backward(NULL, g.dx, g.dy, n / plane, plane, p, seed, step));
    } else {
        OK(hw_cuda_dropout_forward(NULL, g.y, g.x, n, p, seed, step));
        OK(hw_cuda_dropout_backward(NULL, g.dx, g.dy, n, p, seed, step));
    }
    float *y = from_device(g.y, c.n_out), *dx = from_device(g.dx, c.n_in), *x_through_cpu = floats(c.n_in);
    cpu_layer_backward(&c);  // dx = mask * dy / (1 - p)
    for (int64_t i = 0; i < n; i++) {
        cr_expect(dx[i] == c.dx[i], "%s: dx[%lld] = %g, want %g", what, (long long)i, (double)dx[i], (double)c.dx[i]);
    }
    memcpy(c.dy, c.x, sizeof(float) * (size_t)n);
    cpu_layer_backward(&c);  // the same masking of x: the forward
    memcpy(x_through_cpu, c.dx, sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        cr_expect(y[i] == x_through_cpu[i], "%s: y[%lld] = %g, want %g", what, (long long)i, (double)y[i],
                  (double)x_through_cpu[i]);
    }
    for (int64_t unit = 0; unit < n / plane; unit++) {  // a unit (element or channel) is kept or dropped whole
        int kept = 0;
        for (int64_t j = 0; j < plane; j++) kept += y[unit * plane + j] != 0.0f;
        cr_expect(kept == 0 || kept == plane, "%s: channel %lld partly dropped", what, (long long)unit);
        if (p == 0.0f) cr_expect_eq(kept, plane, "%s keeps everything", what);
        if (p == 1.0f) cr_expect_eq(kept, 0, "%s drops everything", what);
    }
    free(y), free(dx), free(x_through_cpu);
    gpu_layer_close(&g);
    cpu_layer_close(&c);
}

Test(cuda_layers, dropout_masks_scale_as_the_cpu_layers) {
    need_gpu();
    hw_rng rng;
    hw_rng_seed(&rng, 36, 0);
    const float ps[] = {0.0f, 0.3f, 0.5f, 1.0f};
    for (int k = 0; k < 4; k++) {
        check_dropout(0, ps[k], &rng);
        check_dropout(1, ps[k], &rng);
    }
    // The kernel keeps about 1 - p of a large tensor, and another step draws another mask.
    int64_t n = 1 << 18, kept = 0, same = 0;
    float *ones = floats((size_t)n);
    for (int64_t i = 0; i < n; i++) ones[i] = 1.0f;
    float *d_ones = to_device(ones, (size_t)n), *d_a = to_device(NULL, (size_t)n), *d_b = to_device(NULL, (size_t)n);
    OK(hw_cuda_dropout_forward(NULL, d_a, d_ones, n, 0.3f, 11, 3));
    OK(hw_cuda_dropout_forward(NULL, d_b, d_ones, n, 0.3f, 11, 4));
    float *a = from_device(d_a, (size_t)n), *b = from_device(d_b, (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        kept += a[i] != 0.0f;
        same += (a[i] != 0.0f) == (b[i] != 0.0f);
    }
    cr_expect(fabs((double)kept / n - 0.7) < 0.005, "kept fraction %g", (double)kept / n);
    cr_expect(fabs((double)same / n - 0.58) < 0.01, "masks of two steps agree on %g", (double)same / n);
    cr_expect_eq(hw_cuda_dropout_forward(NULL, d_a, d_ones, n, 1.5f, 1, 1), HW_ERR);
    cr_expect(strstr(hw_error(), "p = 1.5 is not in [0, 1]") != NULL, "message: %s", hw_error());
    free(ones), free(a), free(b);
    hw_cuda_free(d_ones), hw_cuda_free(d_a), hw_cuda_free(d_b);
}

// ---- loss, accuracy, optimiser, input ----

// The CPU side is the model path itself: "linear C" with weights scale * I and no bias turns x
// into the logits scale * x exactly, then hw_cpu_forward, hw_cpu_backward and
// hw_model_count_correct give the loss, the log-probabilities, the gradient of the loss with
// respect to the logits and the accuracy.
static void check_log_softmax_nll(int batch, int classes, float scale, int ties, hw_rng *rng) {
    char text[96], what[96];
    snprintf(text, sizeof text, "input %d\nlinear %d\nlog_softmax\n", classes, classes);
    snprintf(what, sizeof what, "B=%d C=%d logits up to %g%s", batch, classes, (double)scale, ties ? ", ties" : "");
    hw_model m;
    OK(hw_model_parse(&m, text, "gpu-loss"));
    OK(hw_model_alloc_weights(&m));
    for (int c = 0; c < classes; c++) m.weights[(size_t)c * classes + c] = scale;
    hw_workspace ws;
    OK(hw_workspace_alloc(&ws, &m, batch, 1));
    size_t n = (size_t)batch * classes;
    float *x = random_floats(rng, n, 1.0f);
    for (size_t i = 0; i < n && ties; i++) x[i] = (float)hw_rng_below(rng, 3);
    uint8_t *labels = malloc((size_t)batch);
    cr_assert(labels);
    for (int b = 0; b < batch; b++) labels[b] = (uint8_t)hw_rng_below(rng, (uint32_t)classes);
    float cpu_loss = hw_cpu_forward(&m, &ws, x, labels, batch, 1);
    hw_cpu_backward(&m, &ws, labels, batch);
    const float *logits = ws.acts[1], *cpu_logp = ws.acts[2], *cpu_dlogits = ws.grad_acts[1];

    float *d_logits = to_device(logits, n), *d_logp = nan_on_device(n), *d_dlogits = nan_on_device(n);
    float *d_rows = nan_on_device((size_t)batch), *d_loss = nan_on_device(1);
    uint8_t *d_labels = bytes_to_device(labels, (size_t)batch);
    int32_t *d_count = (int32_t *)(void *)to_device(NULL, 1);
    OK(hw_cuda_memset(d_count, 0, sizeof(int32_t), NULL));
    OK(hw_cuda_log_softmax_nll_forward(NULL, d_logp, d_loss, d_logits, d_labels, batch, classes, d_rows));
    OK(hw_cuda_log_softmax_nll_backward(NULL, d_dlogits, d_logp, d_labels, batch, classes));
    OK(hw_cuda_count_correct(NULL, d_count, d_logp, d_labels, batch, classes));
    float *logp = from_device(d_logp, n), *dlogits = from_device(d_dlogits, n), *loss = from_device(d_loss, 1);
    int32_t *correct = (int32_t *)(void *)from_device((const float *)(const void *)d_count, 1);

    cr_expect(fabs(loss[0] - cpu_loss) <= 1e-4 * fmax(1.0, fabs(cpu_loss)), "%s: loss %g, the CPU %g", what,
              (double)loss[0], (double)cpu_loss);
    EXPECT_CLOSE(logp, cpu_logp, n, "log_softmax %s", what);
    EXPECT_CLOSE(dlogits, cpu_dlogits, n, "nll backward %s", what);
    cr_expect_eq(correct[0], hw_model_count_correct(&m, &ws, labels, batch), "count_correct %s", what);
    free(x), free(labels), free(logp), free(dlogits), free(loss), free(correct);
    hw_cuda_free(d_logits), hw_cuda_free(d_logp), hw_cuda_free(d_dlogits), hw_cuda_free(d_rows);
    hw_cuda_free(d_loss), hw_cuda_free(d_labels), hw_cuda_free(d_count);
    hw_workspace_free(&ws);
    hw_model_free(&m);
}

Test(cuda_layers, log_softmax_nll_and_accuracy_match_the_cpu_model) {
    need_gpu();
    hw_rng rng;
    hw_rng_seed(&rng, 37, 0);
    check_log_softmax_nll(1, 10, 3.0f, 0, &rng);
    check_log_softmax_nll(37, 10, 3.0f, 0, &rng);
    check_log_softmax_nll(5, 3, 30.0f, 0, &rng);
    check_log_softmax_nll(300, 13, 30.0f, 0, &rng);  // more rows than the mean's HW_THREADS lanes
    check_log_softmax_nll(20, 10, 1e4f, 0, &rng);    // exp would overflow without the max shift
    check_log_softmax_nll(4, 1, 1.0f, 0, &rng);      // one class: logp = 0
    check_log_softmax_nll(64, 10, 1.0f, 1, &rng);    // equal logits: the first maximum is the prediction
}

// The GPU runner steps each range of trainable parameters with hw_cuda_sgd_step; here each
// trainable parameter is stepped so, against hw_sgd_step over the whole model.
Test(cuda_layers, sgd_step_matches_hw_sgd_step) {
    need_gpu();
    const struct {
        float lr, momentum, weight_decay;
        int nesterov;
    } cases[] = {{0.1f, 0.0f, 0.0f, 0}, {0.05f, 0.9f, 0.0f, 0}, {0.01f, 0.5f, 1e-2f, 1}, {0.2f, 0.0f, 5e-4f, 0}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        hw_model m;
        OK(hw_model_parse(&m, "input 60\nlinear 50\nrelu\nlinear 3\nlog_softmax\n", "gpu-sgd"));
        OK(hw_model_alloc_weights(&m));
        OK(hw_model_freeze(&m, "fc1.bias"));
        hw_rng rng;
        hw_rng_seed(&rng, 38, k);
        size_t n = m.n_weights;
        float *w = random_floats(&rng, n, 1.0f), *v = calloc(n, sizeof(float));
        cr_assert(v);
        memcpy(m.weights, w, sizeof(float) * n);
        float *d_w = to_device(w, n), *d_v = to_device(v, n);
        hw_sgd opt;
        OK(hw_sgd_init(&opt, n, cases[k].lr, cases[k].momentum, cases[k].weight_decay, cases[k].nesterov));
        for (int step = 0; step < 3; step++) {
            float *g = random_floats(&rng, n, 1.0f), *d_g = to_device(g, n);
            hw_sgd_step(&opt, &m, m.weights, g);
            for (int p = 0; p < m.n_params; p++) {
                const hw_param *param = &m.params[p];
                if (param->frozen) continue;
                size_t off = param->offset;
                OK(hw_cuda_sgd_step(NULL, d_w + off, d_g + off, cases[k].momentum != 0.0f ? d_v + off : NULL,
                                    hw_shape_numel(param->shape), cases[k].lr, cases[k].momentum, cases[k].weight_decay,
                                    cases[k].nesterov, step > 0));
            }
            free(g);
            OK(hw_cuda_stream_sync(NULL));
            hw_cuda_free(d_g);
        }
        float *got_w = from_device(d_w, n), *got_v = from_device(d_v, n);
        EXPECT_CLOSE(got_w, m.weights, n, "sgd case %zu: weights", k);
        if (opt.velocity) EXPECT_CLOSE(got_v, opt.velocity, n, "sgd case %zu: momentum", k);
        hw_sgd_free(&opt);
        free(w), free(v), free(got_w), free(got_v);
        hw_cuda_free(d_w), hw_cuda_free(d_v);
        hw_model_free(&m);
    }
}

Test(cuda_layers, normalize_u8_matches_the_cpu_batches) {
    need_gpu();
    enum { N = 16, C = 1, H = 8, W = 8 };
    uint8_t images[N * C * H * W], labels[N], got_labels[N];
    for (int i = 0; i < N * C * H * W; i++) images[i] = (uint8_t)(i * 37 % 256);  // spread over 0..255
    images[0] = 0, images[1] = 255;
    for (int i = 0; i < N; i++) labels[i] = (uint8_t)(i % 10);
    hw_dataset ds = {.n = N, .channels = C, .height = H, .width = W, .n_classes = 10};
    ds.images = images;
    ds.labels = labels;
    int64_t indices[N];
    for (int i = 0; i < N; i++) indices[i] = i;
    hw_normalize norm = {HW_MNIST_MEAN, HW_MNIST_STD};
    float cpu[N * C * H * W];
    hw_batch_fill(&ds, indices, N, norm, cpu, got_labels);
    uint8_t *d_images = bytes_to_device(images, sizeof images);
    float *d_x = nan_on_device(N * C * H * W);
    OK(hw_cuda_normalize_u8(NULL, d_x, d_images, N * C * H * W, norm.mean, norm.std));
    float *x = from_device(d_x, N * C * H * W);
    for (int i = 0; i < N * C * H * W; i++) {  // the same three operations in float: equal but for contraction
        int near = fabsf(x[i] - cpu[i]) <= 1e-6f * fmaxf(1.0f, fabsf(cpu[i]));
        cr_expect(near, "normalize_u8: byte %d gives %g, the CPU batch %g", images[i], (double)x[i], (double)cpu[i]);
        if (!near) break;
    }
    cr_expect_eq(hw_cuda_normalize_u8(NULL, d_x, d_images, N * C * H * W, 0.0f, 0.0f), HW_ERR);
    cr_expect(strstr(hw_error(), "std = 0 must be > 0") != NULL, "message: %s", hw_error());
    free(x);
    hw_cuda_free(d_images), hw_cuda_free(d_x);
}

// ---- the direct weight and bias gradients (conv_is_direct) at their edges ----

// Every output the backward may be asked for or not (NULL), at the direct path's edges: 31, 32 and
// 33 taps, 4096 and 4097 weights, 15 to 33 output channels (groups of 16), strides and paddings
// past the kernel, columns around a tile (128) and around 1024 chunks of one tile (131072), the
// scratch sized for a larger batch; then 200 random shapes near those edges.
Test(cuda_layers, conv2d_direct_gradients_at_their_edges, .timeout = 300) {
    need_gpu();
    hw_cuda_ctx ctx = make_ctx();
    hw_rng rng;
    hw_rng_seed(&rng, 77, 0);
    // {batch, in_channels, height, width, out_channels, kernel, stride, padding}
    const hw_conv_dims fixed[] = {
        {2, 2, 6, 6, 128, 4, 2, 1},     // 32 taps x 128
        {2, 31, 3, 3, 17, 1, 1, 0},     // 31 taps, 17 channels
        {2, 32, 3, 3, 33, 1, 1, 0},     // 32 taps, 33 channels
        {2, 33, 3, 3, 16, 1, 1, 0},     // 33 taps: GEMM
        {2, 1, 3, 3, 4096, 1, 1, 0},    // 1 tap x 4096
        {2, 1, 3, 3, 4097, 1, 1, 0},    // 1 tap x 4097: GEMM
        {3, 1, 9, 9, 1, 1, 3, 2},       // stride and padding larger than the kernel
        {2, 2, 4, 4, 15, 2, 5, 4},      // stride 5, padding 4 on a 2x2 kernel
        {1, 1, 1, 127, 16, 1, 1, 0},    // 127 columns
        {1, 1, 1, 129, 31, 1, 1, 0},    // 129 columns
        {1, 1, 2, 128, 1, 1, 1, 0},     // 256 columns
        {1, 1, 1, 131071, 2, 1, 1, 0},  // 1024 chunks of one tile, the last short
        {1, 1, 1, 131072, 1, 1, 1, 0},  // 1024 full chunks of one tile
        {1, 1, 1, 131073, 3, 1, 1, 0},  // 513 chunks of two tiles, the last of 1 column
        {228, 1, 24, 24, 10, 1, 1, 0},  // 131328 columns
        {460, 1, 28, 28, 10, 5, 1, 0},  // conv1, 264960 columns: three tiles a chunk
    };
    int n = 0;
    for (size_t k = 0; k < sizeof fixed / sizeof fixed[0]; k++) {
        for (int mask = 0; mask < 8; mask++, n++) {
            if (fixed[k].batch * fixed[k].width > 100000 && mask != 0 && mask != 1 && mask != 6) continue;
            check_conv2d_in_scratch(ctx, fixed[k], fixed[k].batch + (mask & 1), mask, &rng);
        }
    }
    const int taps[][2] = {{1, 1}, {2, 4}, {1, 5}, {32, 1}, {8, 2}, {31, 1}, {3, 3}, {2, 3}, {1, 3}, {16, 1}, {17, 1}};
    const int ocs[] = {1, 15, 16, 17, 31, 32, 33, 128};
    for (int round = 0; round < 200; round++, n++) {
        hw_conv_dims d;
        const int *t = taps[rand_in(&rng, 0, 10)];
        d.in_channels = t[0], d.kernel = t[1], d.out_channels = ocs[rand_in(&rng, 0, 7)];
        d.stride = rand_in(&rng, 1, 6), d.padding = rand_in(&rng, 0, 6);
        d.height = rand_in(&rng, 1, 14), d.width = rand_in(&rng, 1, 14);
        if (d.height + 2 * d.padding < d.kernel || d.width + 2 * d.padding < d.kernel) d.padding = d.kernel;
        d.batch = rand_in(&rng, 1, 40);
        int scratch_batch = d.batch + (round % 3 == 0 ? rand_in(&rng, 1, 3000) : 0);
        check_conv2d_in_scratch(ctx, d, scratch_batch, rand_in(&rng, 0, 7), &rng);
    }
    cr_log_info("%d conv2d cases at the direct path's edges", n);
    free_ctx(ctx);
}
