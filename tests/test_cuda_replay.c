// Host replay of the CUDA kernels (suite cuda_replay): the GPU layer functions of src/cuda/ run on
// the CPU, built from the kernels' own per-index code and compared with the CPU layers of src/nn,
// which are verified on their own (gradient checks, PyTorch reference values). It needs no GPU
// and no CUDA: it runs in every build, under ASan too.
//
// How: src/cuda/kernels.cuh holds what every element-wise and gather kernel computes for one
// index (im2col_element, maxpool_forward_element, log_softmax_row, ...) in C that the host
// compiler takes as well as nvcc. tests/simcuda/replay.c builds each hw_cuda_* function of
// layers.cu, pointwise.cu and loss.cu from them (replay_*: each kernel launch a loop over every
// index calling that kernel's element function, in the same order, on the same scratch layout;
// each cuBLAS call OpenBLAS's column-major cblas_sgemm given exactly the arguments hw_cuda_sgemm
// gives cuBLAS, col_major_gemm_of). The element functions are the kernels' own code; the sequence
// of launches in each replay_* function (and the combine step of the block reductions) is a copy
// of the hw_cuda_* function it names, kept in step by hand. The same replay_* functions are the
// kernels of the simulated CUDA device (`make sim`, tests/simcuda/kernels.c).
//
// What it proves: the kernels' index arithmetic (which element reads and writes which, padding,
// strides, window bounds, the permutes between NCHW and the GEMM's channel-major layout), their
// math and edge rules (ties, NaN, -0, p = 0 and 1, weight decay, nesterov), which kernels and
// GEMMs make each layer and in what order, the scratch layout, and the row-major to column-major
// GEMM mapping: all agree with the CPU layers to float rounding (relative error < 1e-4, exact
// where the kernel only selects or copies).
//
// What it does not prove: anything that only the device does. Launch configurations (grid, block
// and shared-memory sizes; the grid-stride loop is trusted to visit every index once), the block
// reductions' shared memory and barriers (their arithmetic is replayed: each thread's strided_sum,
// added in the kernel's order), the atomicAdd of count_correct, what nvcc makes of the code for
// the device and the device's rounding (FMA contraction, expf and logf), and cuBLAS itself
// (OpenBLAS stands in for it). The GPU runner, copies, streams, the all-reduce and IPC are run by
// tests/test_cuda.c and tests/test_gpu_train.c on a GPU, and on the simulated device (`make sim`).
#include "../src/cuda/kernels.cuh"  // the kernels' per-index code (private to src/cuda/ and the tests)
#include "simcuda/replay.h"         // the GPU layer functions replayed on the host

#include "hw/data.h"
#include "hw/err.h"
#include "hw/nn.h"
#include "hw/optim.h"
#include "hw/rng.h"
#include "float_check.h"

#include <cblas.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define OK(call) cr_assert_eq((call), HW_OK, "%s: %s", #call, hw_error())

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

// ---- GEMM ----

static int max_1(int n) { return n > 1 ? n : 1; }

// The BLAS rule on the leading dimensions, which cuBLAS enforces (OpenBLAS lets an empty matrix
// pass): at least the number of rows of the matrix as stored, and at least 1.
static void expect_valid_leading_dimensions(col_major_gemm g, const char *what) {
    cr_expect_geq(g.ld_first, max_1(g.trans_first ? g.k : g.m), "%s: ld of the first matrix %d", what, g.ld_first);
    cr_expect_geq(g.ld_second, max_1(g.trans_second ? g.n : g.k), "%s: ld of the second matrix %d", what, g.ld_second);
    cr_expect_geq(g.ldc, max_1(g.m), "%s: ldc %d", what, g.ldc);
}

Test(cuda_replay, sgemm_mapping_matches_row_major_products) {
    hw_rng rng;
    hw_rng_seed(&rng, 31, 0);
    // m, n, k: non-square, vectors both ways, and an empty inner dimension (C = beta C)
    const int sizes[][3] = {{1, 1, 1}, {3, 5, 7}, {7, 3, 5}, {17, 1, 9}, {1, 13, 4}, {6, 4, 0}, {23, 31, 19}};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        for (int trans = 0; trans < 4; trans++) {
            for (int with_beta = 0; with_beta < 2; with_beta++) {
                int m = sizes[s][0], n = sizes[s][1], k = sizes[s][2], ta = trans & 1, tb = trans >> 1;
                float alpha = 1.5f, beta = with_beta ? 0.75f : 0.0f;
                float *a = random_floats(&rng, (size_t)m * k, 1.0f), *b = random_floats(&rng, (size_t)k * n, 1.0f);
                float *c = random_floats(&rng, (size_t)m * n, 1.0f), *want = floats((size_t)m * n);
                memcpy(want, c, sizeof(float) * m * n);
                replay_sgemm(NULL, ta, tb, m, n, k, alpha, a, b, beta, c);
                ref_gemm(ta, tb, m, n, k, alpha, a, b, beta, want);
                char what[96];
                snprintf(what, sizeof what, "sgemm ta=%d tb=%d m=%d n=%d k=%d beta=%g", ta, tb, m, n, k, (double)beta);
                EXPECT_CLOSE(c, want, (size_t)m * n, "%s", what);
                expect_valid_leading_dimensions(col_major_gemm_of(ta, tb, m, n, k, a, b), what);
                free(a), free(b), free(c), free(want);
            }
        }
    }
}

// ---- layers ----

Test(cuda_replay, linear_matches_the_cpu_layer) {
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
        float *y = floats(c.n_out), *dx = floats(c.n_in), *dw = floats(c.n_w), *db = floats(c.n_b);
        OK(replay_linear_forward(REPLAY_OPENBLAS, y, c.x, c.w, c.bias, batch, in, out));
        OK(replay_linear_backward(REPLAY_OPENBLAS, dx, dw, db, c.dy, c.x, c.w, batch, in, out));
        EXPECT_CLOSE(y, c.y, c.n_out, "linear forward B=%d in=%d out=%d", batch, in, out);
        EXPECT_CLOSE(dx, c.dx, c.n_in, "linear dx B=%d in=%d out=%d", batch, in, out);
        EXPECT_CLOSE(dw, c.dw, c.n_w, "linear dw B=%d in=%d out=%d", batch, in, out);
        EXPECT_CLOSE(db, c.db, c.n_b, "linear dbias B=%d in=%d out=%d", batch, in, out);
        free(y), free(dx), free(dw), free(db);
        cpu_layer_close(&c);
    }
}

static void check_conv2d(hw_conv_dims d, hw_rng *rng) {
    char line[96], what[128];
    snprintf(line, sizeof line, "conv2d %d %d stride=%d padding=%d", d.out_channels, d.kernel, d.stride, d.padding);
    snprintf(what, sizeof what, "%s on B=%d C=%d %dx%d", line, d.batch, d.in_channels, d.height, d.width);
    cpu_layer c;
    cpu_layer_open(&c, line, hw_shape_make(3, (int64_t[]){d.in_channels, d.height, d.width}), d.batch, rng);
    cpu_layer_forward(&c);
    cpu_layer_backward(&c);
    size_t scratch_n = hw_cuda_conv2d_scratch_floats(d);
    float *scratch = floats(scratch_n);
    for (size_t i = 0; i < scratch_n; i++) scratch[i] = NAN;  // the kernels must write before they read
    float *y = floats(c.n_out), *dx = floats(c.n_in), *dw = floats(c.n_w), *db = floats(c.n_b);
    OK(replay_conv2d_forward(REPLAY_OPENBLAS, y, c.x, c.w, c.bias, d, scratch));
    OK(replay_conv2d_backward(REPLAY_OPENBLAS, dx, dw, db, c.dy, c.x, c.w, d, scratch));
    EXPECT_CLOSE(y, c.y, c.n_out, "forward of %s", what);
    EXPECT_CLOSE(dx, c.dx, c.n_in, "dx of %s", what);
    EXPECT_CLOSE(dw, c.dw, c.n_w, "dw of %s", what);
    EXPECT_CLOSE(db, c.db, c.n_b, "dbias of %s", what);
    free(y), free(dx), free(dw), free(db), free(scratch);
    cpu_layer_close(&c);
}

Test(cuda_replay, conv2d_matches_the_cpu_layer) {
    hw_rng rng;
    hw_rng_seed(&rng, 33, 0);
    // {batch, in_channels, height, width, out_channels, kernel, stride, padding}
    const hw_conv_dims cases[] = {
        {3, 1, 28, 28, 10, 5, 1, 0},  // LeNet's conv1
        {2, 10, 12, 12, 20, 5, 1, 0}, // LeNet's conv2
        {2, 3, 9, 8, 4, 3, 2, 1},     // stride 2, padding 1, odd sizes
        {3, 2, 11, 10, 5, 4, 3, 2},   // stride 3, padding 2: some taps read only padding
        {2, 4, 5, 6, 3, 1, 1, 0},     // 1x1: the CPU layer's columns are its input
        {1, 2, 7, 7, 3, 1, 2, 0},     // 1x1, stride 2
        {1, 2, 3, 3, 2, 5, 1, 1},     // a kernel as large as the padded input
        {2, 2, 6, 9, 3, 2, 2, 1},     // even kernel, stride and padding
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) check_conv2d(cases[k], &rng);
    for (int round = 0; round < 8; round++) check_conv2d(random_conv_dims(&rng, 4), &rng);
}

// values: 0 random, 1 few distinct values (ties), 2 random with NaNs
static void check_maxpool2d(int batch, int channels, int height, int width, int kernel, int stride, int values,
                            hw_rng *rng) {
    char line[64], what[160];
    snprintf(line, sizeof line, "maxpool2d %d stride=%d", kernel, stride);
    snprintf(what, sizeof what, "%s on B=%d C=%d %dx%d, %s", line, batch, channels, height, width,
             values == 0 ? "random" : values == 1 ? "ties" : "NaNs");
    cpu_layer c;
    cpu_layer_open(&c, line, hw_shape_make(3, (int64_t[]){channels, height, width}), batch, rng);
    for (size_t i = 0; i < c.n_in && values == 1; i++) c.x[i] = (float)hw_rng_below(rng, 3);
    for (size_t i = 0; i < c.n_in && values == 2; i++) {
        if (hw_rng_below(rng, 5) == 0) c.x[i] = NAN;
    }
    cpu_layer_forward(&c);
    cpu_layer_backward(&c);
    const int32_t *cpu_argmax = (const int32_t *)(const void *)c.saved;  // the CPU layer's saved state
    int planes = batch * channels;
    float *y = floats(c.n_out), *dx = floats(c.n_in);
    int32_t *argmax = malloc(sizeof(int32_t) * c.n_out);
    cr_assert(argmax);
    replay_maxpool2d_forward(y, argmax, c.x, planes, height, width, kernel, stride);
    replay_maxpool2d_backward(dx, c.dy, argmax, planes, height, width, kernel, stride);
    expect_same_floats(y, c.y, c.n_out, what);
    for (size_t o = 0; o < c.n_out; o++) {
        cr_expect_eq(argmax[o], cpu_argmax[o], "%s: output %zu takes input %d, the CPU layer %d", what, o, argmax[o],
                     cpu_argmax[o]);
        if (argmax[o] != cpu_argmax[o]) break;
    }
    EXPECT_CLOSE(dx, c.dx, c.n_in, "dx of %s", what);
    free(y), free(dx), free(argmax);
    cpu_layer_close(&c);
}

Test(cuda_replay, maxpool2d_matches_the_cpu_layer) {
    hw_rng rng;
    hw_rng_seed(&rng, 34, 0);
    // {batch, channels, height, width, kernel, stride}
    const int cases[][6] = {
        {2, 3, 8, 8, 2, 2},  // LeNet's: non-overlapping 2x2
        {2, 2, 6, 7, 2, 2},  // an odd width leaves a column out
        {2, 2, 9, 7, 3, 2},  // overlapping windows
        {1, 3, 7, 9, 3, 1},  // overlapping, stride 1
        {2, 2, 7, 8, 2, 3},  // gaps between windows
        {1, 2, 5, 5, 5, 1},  // one window over the whole plane
        {3, 1, 4, 6, 1, 1},  // the identity
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        for (int values = 0; values < 3; values++) {
            const int *s = cases[k];
            check_maxpool2d(s[0], s[1], s[2], s[3], s[4], s[5], values, &rng);
        }
    }
}

Test(cuda_replay, relu_matches_the_cpu_layer) {
    hw_rng rng;
    hw_rng_seed(&rng, 35, 0);
    cpu_layer c;
    cpu_layer_open(&c, "relu", hw_shape_make(3, (int64_t[]){3, 5, 7}), 4, &rng);
    const float special[] = {0.0f, -0.0f, NAN, INFINITY, -INFINITY, 1e-40f, -1e-40f, 3.0f, -3.0f};
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) c.x[i * 7] = special[i];
    cpu_layer_forward(&c);
    cpu_layer_backward(&c);
    float *y = floats(c.n_out), *dx = floats(c.n_in);
    replay_relu_forward(y, c.x, (int64_t)c.n_out);
    replay_relu_backward(dx, c.dy, y, (int64_t)c.n_in);
    expect_same_floats(y, c.y, c.n_out, "relu forward");
    expect_same_floats(dx, c.dx, c.n_in, "relu backward");
    free(y), free(dx);
    cpu_layer_close(&c);
}

// The GPU draws its masks from a hash of (seed, step, index) and the CPU layers from the
// workspace RNG: the masks differ by design (a GPU run is not a CPU run, as with torch). So the
// CPU layer is given the GPU's mask as its saved state, and its backward (the same masking and
// scaling its forward applies) judges both the replayed forward and backward.
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
    float *y = floats(c.n_out), *dx = floats(c.n_in), *x_through_cpu = floats(c.n_in);
    replay_dropout(y, c.x, n, plane, p, seed, step);
    replay_dropout(dx, c.dy, n, plane, p, seed, step);
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
    cpu_layer_close(&c);
}

Test(cuda_replay, dropout_masks_scale_as_the_cpu_layers) {
    hw_rng rng;
    hw_rng_seed(&rng, 36, 0);
    const float ps[] = {0.0f, 0.3f, 0.5f, 1.0f};
    for (int k = 0; k < 4; k++) {
        check_dropout(0, ps[k], &rng);
        check_dropout(1, ps[k], &rng);
    }
    // The kernel keeps about 1 - p of a large tensor, and another step draws another mask.
    int64_t n = 1 << 18, kept = 0, same = 0;
    float *ones = floats((size_t)n), *a = floats((size_t)n), *b = floats((size_t)n);
    for (int64_t i = 0; i < n; i++) ones[i] = 1.0f;
    replay_dropout(a, ones, n, 1, 0.3f, 11, 3);
    replay_dropout(b, ones, n, 1, 0.3f, 11, 4);
    for (int64_t i = 0; i < n; i++) {
        kept += a[i] != 0.0f;
        same += (a[i] != 0.0f) == (b[i] != 0.0f);
    }
    cr_expect(fabs((double)kept / n - 0.7) < 0.005, "kept fraction %g", (double)kept / n);
    cr_expect(fabs((double)same / n - 0.58) < 0.01, "masks of two steps agree on %g", (double)same / n);
    free(ones), free(a), free(b);
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
    OK(hw_model_parse(&m, text, "replay-loss"));
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

    float *logp = floats(n), *dlogits = floats(n);
    float loss = NAN, *row_loss = floats((size_t)batch);
    replay_log_softmax_nll_forward(logp, &loss, logits, labels, batch, classes, row_loss);
    replay_nll_backward(dlogits, logp, labels, batch, classes);
    int32_t correct = 0;
    replay_count_correct(&correct, logp, labels, batch, classes);

    cr_expect(fabs(loss - cpu_loss) <= 1e-4 * fmax(1.0, fabs(cpu_loss)), "%s: loss %g, the CPU %g", what,
              (double)loss, (double)cpu_loss);
    EXPECT_CLOSE(logp, cpu_logp, n, "log_softmax %s", what);
    EXPECT_CLOSE(dlogits, cpu_dlogits, n, "nll backward %s", what);
    cr_expect_eq(correct, hw_model_count_correct(&m, &ws, labels, batch), "count_correct %s", what);
    free(x), free(labels), free(logp), free(dlogits), free(row_loss);
    hw_workspace_free(&ws);
    hw_model_free(&m);
}

Test(cuda_replay, log_softmax_nll_and_accuracy_match_the_cpu_model) {
    hw_rng rng;
    hw_rng_seed(&rng, 37, 0);
    check_log_softmax_nll(1, 10, 3.0f, 0, &rng);
    check_log_softmax_nll(37, 10, 3.0f, 0, &rng);
    check_log_softmax_nll(5, 3, 30.0f, 0, &rng);
    check_log_softmax_nll(300, 13, 30.0f, 0, &rng);   // more rows than the mean's HW_THREADS lanes
    check_log_softmax_nll(20, 10, 1e4f, 0, &rng);     // exp would overflow without the max shift
    check_log_softmax_nll(4, 1, 1.0f, 0, &rng);       // one class: logp = 0
    check_log_softmax_nll(64, 10, 1.0f, 1, &rng);     // equal logits: the first maximum is the prediction
}

// The GPU runner steps each range of trainable parameters with hw_cuda_sgd_step; the replay steps
// each trainable parameter with the kernel's element function, against hw_sgd_step.
Test(cuda_replay, sgd_step_matches_hw_sgd_step) {
    const struct {
        float lr, momentum, weight_decay;
        int nesterov;
    } cases[] = {{0.1f, 0.0f, 0.0f, 0}, {0.05f, 0.9f, 0.0f, 0}, {0.01f, 0.5f, 1e-2f, 1}, {0.2f, 0.0f, 5e-4f, 0}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        hw_model m;
        OK(hw_model_parse(&m, "input 6\nlinear 5\nrelu\nlinear 3\nlog_softmax\n", "replay-sgd"));
        OK(hw_model_alloc_weights(&m));
        OK(hw_model_freeze(&m, "fc1.bias"));
        hw_rng rng;
        hw_rng_seed(&rng, 38, k);
        size_t n = m.n_weights;
        float *w = random_floats(&rng, n, 1.0f), *v = calloc(n, sizeof(float));
        cr_assert(v);
        memcpy(m.weights, w, sizeof(float) * n);
        hw_sgd opt;
        OK(hw_sgd_init(&opt, n, cases[k].lr, cases[k].momentum, cases[k].weight_decay, cases[k].nesterov));
        for (int step = 0; step < 3; step++) {
            float *g = random_floats(&rng, n, 1.0f);
            hw_sgd_step(&opt, &m, m.weights, g);
            for (int p = 0; p < m.n_params; p++) {
                const hw_param *param = &m.params[p];
                if (param->frozen) continue;
                size_t off = param->offset;
                replay_sgd_step(w + off, g + off, v + off, hw_shape_numel(param->shape), cases[k].lr,
                                cases[k].momentum, cases[k].weight_decay, cases[k].nesterov, step > 0);
            }
            free(g);
        }
        EXPECT_CLOSE(w, m.weights, n, "sgd case %zu: weights", k);
        if (opt.velocity) EXPECT_CLOSE(v, opt.velocity, n, "sgd case %zu: momentum", k);
        hw_sgd_free(&opt);
        free(w), free(v);
        hw_model_free(&m);
    }
}

Test(cuda_replay, normalize_u8_matches_the_cpu_batches) {
    enum { N = 4, C = 1, H = 8, W = 8 };
    uint8_t images[N * C * H * W], labels[N] = {3, 1, 4, 1}, got_labels[N];
    for (int i = 0; i < N * C * H * W; i++) images[i] = (uint8_t)(i * 37 % 256);  // spread over 0..255
    images[0] = 0, images[1] = 255;
    hw_dataset ds = {.n = N, .channels = C, .height = H, .width = W, .n_classes = 10};
    ds.images = images;
    ds.labels = labels;
    int64_t indices[N] = {0, 1, 2, 3};
    hw_normalize norm = {HW_MNIST_MEAN, HW_MNIST_STD};
    float cpu[N * C * H * W], x[N * C * H * W];
    hw_batch_fill(&ds, indices, N, norm, cpu, got_labels);
    replay_normalize_u8(x, images, N * C * H * W, norm.mean, norm.std);
    EXPECT_CLOSE(x, cpu, (size_t)(N * C * H * W), "normalize_u8");
}
