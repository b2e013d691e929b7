// Tests of the nn layers: a numerical gradient check of every registered layer type, the
// convolution and pooling against direct loops, log_softmax on extreme logits, and the LeNet
// forward/backward against values PyTorch computed (tests/torch_reference.h).
#include "hw/err.h"
#include "hw/nn.h"
#include "../src/nn/cpu/kernels.h"
#include "skip_report.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------------------------
// The gradient checker
//
// For one layer and batch, with L = sum(out * r) for a fixed random r, it compares the layer's
// backward (dout = r) against central differences of L, accumulated in double, for every input,
// weight and bias element. Inputs are distinct values on a grid (spacing 0.01, none near 0) and
// the input step is a quarter of the spacing, so no max-pool winner or ReLU sign changes between
// the two evaluations; dropout draws the same mask for each evaluation (the RNG is reseeded).

enum { GRAD_IN = 0, GRAD_WEIGHT = 1, GRAD_BIAS = 2 };
static const char *const grad_names[3] = {"input", "weight", "bias"};

typedef struct {
    double max_err[3];  // max |numeric - analytic| per tensor
    double scale[3];    // max |analytic| per tensor
    int checked[3];     // elements compared
    int worst[3];       // index of the worst element
} grad_report;

typedef struct {
    hw_layer layer;
    hw_shape param_shapes[HW_LAYER_MAX_PARAMS];
    int batch;
    size_t n_in, n_out, n_w, n_b;
    float *x, *y, *r, *w, *bias, *scratch, *din, *dw, *db;
    uint8_t *saved;
    uint64_t seed;
} grad_case;

static float *floats(size_t n) {
    float *p = malloc(sizeof(float) * (n ? n : 1));
    cr_assert(p);
    return p;
}

// A uniform integer in [lo, hi].
static int nn_test_rand(hw_rng *rng, int lo, int hi) { return lo + (int)hw_rng_below(rng, (uint32_t)(hi - lo + 1)); }

static void fill_nan(float *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = NAN;
}

// Sets up `line` on `in` for `batch` samples with random inputs, weights and projection r.
static void case_open(grad_case *c, const hw_layer_type *type, const char *line, hw_shape in, int batch,
                      uint64_t seed) {
    memset(c, 0, sizeof *c);
    cr_assert_eq(hw_layer_setup(&c->layer, line, in, c->param_shapes), HW_OK, "%s: %s", line, hw_error());
    cr_assert_eq(c->layer.type, type);
    c->batch = batch;
    c->seed = seed;
    c->n_in = (size_t)batch * (size_t)hw_shape_numel(in);
    c->n_out = (size_t)batch * (size_t)hw_shape_numel(c->layer.out_shape);
    c->n_w = c->layer.n_params > 0 ? (size_t)hw_shape_numel(c->param_shapes[0]) : 0;
    c->n_b = c->layer.n_params > 1 ? (size_t)hw_shape_numel(c->param_shapes[1]) : 0;
    c->x = floats(c->n_in);
    c->y = floats(c->n_out);
    c->r = floats(c->n_out);
    c->w = floats(c->n_w);
    c->bias = floats(c->n_b);
    c->din = floats(c->n_in);
    c->dw = floats(c->n_w);
    c->db = floats(c->n_b);
    size_t scratch = type->scratch_floats ? type->scratch_floats(&c->layer, batch) : 0;
    c->scratch = floats(scratch);
    fill_nan(c->scratch, scratch);  // a layer must not read scratch it did not write
    size_t saved = type->saved_bytes ? type->saved_bytes(&c->layer, batch) : 0;
    c->saved = malloc(saved ? saved : 1);
    memset(c->saved, 0xA5, saved ? saved : 1);

    hw_rng rng;
    hw_rng_seed(&rng, seed, 1);
    // distinct inputs (k + 0.5) * 0.01 for a random order of k in [-n/2, n/2)
    int64_t *order = malloc(sizeof(int64_t) * c->n_in);
    for (size_t i = 0; i < c->n_in; i++) order[i] = (int64_t)i - (int64_t)c->n_in / 2;
    for (size_t i = c->n_in; i > 1; i--) {
        size_t j = hw_rng_below(&rng, (uint32_t)i);
        int64_t t = order[i - 1];
        order[i - 1] = order[j];
        order[j] = t;
    }
    for (size_t i = 0; i < c->n_in; i++) c->x[i] = ((float)order[i] + 0.5f) * 0.01f;
    free(order);
    for (size_t i = 0; i < c->n_out; i++) c->r[i] = hw_rng_normal(&rng);
    for (size_t i = 0; i < c->n_w; i++) c->w[i] = 0.5f * hw_rng_normal(&rng);
    for (size_t i = 0; i < c->n_b; i++) c->bias[i] = 0.5f * hw_rng_normal(&rng);
}

static void case_close(grad_case *c) {
    free(c->x), free(c->y), free(c->r), free(c->w), free(c->bias);
    free(c->din), free(c->dw), free(c->db), free(c->scratch), free(c->saved);
}

static void case_forward(grad_case *c) {
    hw_rng rng;
    hw_rng_seed(&rng, c->seed, 2);  // the same dropout mask every time
    hw_layer_io io = {
        .batch = c->batch,
        .training = 1,
        .in = c->x,
        .out = c->y,
        .weight = c->n_w ? c->w : NULL,
        .bias = c->n_b ? c->bias : NULL,
        .scratch = c->scratch,
        .saved = c->saved,
        .rng = &rng,
    };
    hw_cpu_backend.forward(&c->layer, &io);
}

static double projected_loss(grad_case *c) {
    case_forward(c);
    double sum = 0.0;
    for (size_t i = 0; i < c->n_out; i++) sum += (double)c->y[i] * (double)c->r[i];
    return sum;
}

// Runs forward then `backward` (the type's own unless given) with dout = r. Gradients asked
// for (want_*) are poisoned with NaN first: a backward must overwrite them, never accumulate.
typedef hw_layer_fn backward_fn;
static void case_backward(grad_case *c, backward_fn backward, int want_in, int want_w, int want_b) {
    case_forward(c);
    fill_nan(c->din, c->n_in);
    fill_nan(c->dw, c->n_w);
    fill_nan(c->db, c->n_b);
    hw_rng rng;
    hw_rng_seed(&rng, c->seed, 3);
    hw_layer_io io = {
        .batch = c->batch,
        .training = 1,
        .in = c->x,
        .out = c->y,
        .weight = c->n_w ? c->w : NULL,
        .bias = c->n_b ? c->bias : NULL,
        .scratch = c->scratch,
        .saved = c->saved,
        .rng = &rng,
        .dout = c->r,
        .din = want_in ? c->din : NULL,
        .dweight = want_w && c->n_w ? c->dw : NULL,
        .dbias = want_b && c->n_b ? c->db : NULL,
    };
    (backward ? backward : hw_cpu_backend.backward)(&c->layer, &io);
}

// Central differences of projected_loss with respect to values[0..n), against analytic[0..n).
static void compare_numeric(grad_case *c, float *values, size_t n, float step, const float *analytic, int which,
                            grad_report *rep) {
    for (size_t i = 0; i < n; i++) {
        float saved = values[i];
        values[i] = saved + step;
        float up = values[i];
        double loss_up = projected_loss(c);
        values[i] = saved - step;
        float down = values[i];
        double loss_down = projected_loss(c);
        values[i] = saved;
        double numeric = (loss_up - loss_down) / ((double)up - (double)down);
        double err = fabs(numeric - (double)analytic[i]);
        if (!(err <= rep->max_err[which])) {  // NaN counts as the worst
            rep->max_err[which] = isnan(err) ? INFINITY : err;
            rep->worst[which] = (int)i;
        }
        if (fabs(analytic[i]) > rep->scale[which]) rep->scale[which] = fabs(analytic[i]);
        rep->checked[which]++;
    }
}

// The whole check of one case with the given backward; fills rep.
static void check_case(grad_case *c, backward_fn backward, grad_report *rep) {
    memset(rep, 0, sizeof *rep);
    case_backward(c, backward, 1, 1, 1);
    float *din = floats(c->n_in), *dw = floats(c->n_w), *db = floats(c->n_b);
    memcpy(din, c->din, sizeof(float) * c->n_in);
    memcpy(dw, c->dw, sizeof(float) * c->n_w);
    memcpy(db, c->db, sizeof(float) * c->n_b);
    compare_numeric(c, c->x, c->n_in, 0.0025f, din, GRAD_IN, rep);
    compare_numeric(c, c->w, c->n_w, 1e-2f, dw, GRAD_WEIGHT, rep);
    compare_numeric(c, c->bias, c->n_b, 1e-2f, db, GRAD_BIAS, rep);
    free(din), free(dw), free(db);
}

// Relative tolerance on the largest gradient element, plus a small absolute floor.
static int report_ok(const grad_report *rep, int which) {
    return rep->max_err[which] <= 2e-3 * rep->scale[which] + 1e-5;
}

static int report_all_ok(const grad_report *rep) {
    return report_ok(rep, GRAD_IN) && report_ok(rep, GRAD_WEIGHT) && report_ok(rep, GRAD_BIAS);
}

// ---------------------------------------------------------------------------------------------
// Every registered layer type, through its own example() generator: a new type is checked with
// no new test code.

static const int check_batches[] = {1, 2, 3, 1, 5, 2, 1, 4, 3, 2};
enum { CASES_PER_TYPE = 10 };

Test(nn_grad, every_layer_type_matches_finite_differences) {
    int types = 0;
    for (int t = 0; hw_layer_types[t]; t++) {
        const hw_layer_type *type = hw_layer_types[t];
        cr_assert(type->example, "layer type %s has no example() for the gradient check", type->name);
        double max_scale[3] = {0};
        hw_rng rng;
        hw_rng_seed(&rng, 1000 + (uint64_t)t, 0);
        for (int k = 0; k < CASES_PER_TYPE; k++) {
            char line[256];
            hw_shape in;
            type->example(&rng, &in, line, sizeof line);
            grad_case c;
            case_open(&c, type, line, in, check_batches[k], 77 + (uint64_t)k);
            grad_report rep;
            check_case(&c, NULL, &rep);
            char shape[64];
            hw_shape_format(in, shape, sizeof shape);
            for (int w = 0; w < 3; w++) {
                cr_expect(report_ok(&rep, w),
                          "%s on input %s, batch %d: d/d%s off by %.3g at element %d (largest gradient %.3g)", line,
                          shape, c.batch, grad_names[w], rep.max_err[w], rep.worst[w], rep.scale[w]);
                if (rep.scale[w] > max_scale[w]) max_scale[w] = rep.scale[w];
            }
            cr_expect_eq(rep.checked[GRAD_IN], (int)c.n_in);
            cr_expect_eq(rep.checked[GRAD_WEIGHT] + rep.checked[GRAD_BIAS], (int)(c.n_w + c.n_b));
            case_close(&c);
        }
        // The check means something only if the gradients were not all zero.
        cr_expect_gt(max_scale[GRAD_IN], 0.0, "%s: every input gradient was 0", type->name);
        if (type->param_names[0]) {
            cr_expect_gt(max_scale[GRAD_WEIGHT], 0.0, "%s: every weight gradient was 0", type->name);
        }
        types++;
    }
    cr_expect_geq(types, 8, "linear, conv2d, maxpool2d, relu, dropout, dropout2d, flatten, log_softmax");
}

// Backward with some outputs not wanted (NULL) computes the others the same, and touches
// nothing it was not asked for.
Test(nn_grad, null_outputs_are_skipped) {
    for (int t = 0; hw_layer_types[t]; t++) {
        const hw_layer_type *type = hw_layer_types[t];
        hw_rng rng;
        hw_rng_seed(&rng, 2000 + (uint64_t)t, 0);
        char line[256];
        hw_shape in;
        type->example(&rng, &in, line, sizeof line);
        grad_case c;
        case_open(&c, type, line, in, 2, 5);
        case_backward(&c, NULL, 1, 1, 1);
        float *din = floats(c.n_in), *dw = floats(c.n_w), *db = floats(c.n_b);
        memcpy(din, c.din, sizeof(float) * c.n_in);
        memcpy(dw, c.dw, sizeof(float) * c.n_w);
        memcpy(db, c.db, sizeof(float) * c.n_b);
        for (int mask = 0; mask < 8; mask++) {
            int want_in = mask & 1, want_w = mask & 2, want_b = mask & 4;
            case_backward(&c, NULL, want_in, want_w, want_b);
            for (size_t i = 0; i < c.n_in; i++) {
                if (want_in) cr_assert_float_eq(c.din[i], din[i], 1e-6f * (1 + fabsf(din[i])), "%s din", line);
                else cr_assert(isnan(c.din[i]), "%s: din written though NULL", line);
            }
            for (size_t i = 0; i < c.n_w; i++) {
                if (want_w) cr_assert_float_eq(c.dw[i], dw[i], 1e-6f * (1 + fabsf(dw[i])), "%s dw", line);
                else cr_assert(isnan(c.dw[i]), "%s: dweight written though NULL", line);
            }
            for (size_t i = 0; i < c.n_b; i++) {
                if (want_b) cr_assert_float_eq(c.db[i], db[i], 1e-6f * (1 + fabsf(db[i])), "%s db", line);
                else cr_assert(isnan(c.db[i]), "%s: dbias written though NULL", line);
            }
        }
        free(din), free(dw), free(db);
        case_close(&c);
    }
}

// ---- the checker must be able to fail ----

static int linear_backward_wrong_weight(const hw_layer *layer, const hw_layer_io *io) {
    hw_cpu_backend.backward(layer, io);
    if (io->dweight) io->dweight[1] *= 1.02f;  // 2% off in one element
    return HW_OK;
}

static int linear_backward_wrong_bias(const hw_layer *layer, const hw_layer_io *io) {
    hw_cpu_backend.backward(layer, io);
    if (io->dbias) io->dbias[0] = 0.0f;  // a forgotten bias gradient
    return HW_OK;
}

static int relu_backward_ungated(const hw_layer *layer, const hw_layer_io *io) {
    // the classic slip: the gradient let through where the output is 0
    size_t n = (size_t)io->batch * (size_t)hw_shape_numel(layer->in_shape);
    if (io->din) memcpy(io->din, io->dout, sizeof(float) * n);
    return HW_OK;
}

static int conv2d_backward_transposed_kernel(const hw_layer *layer, const hw_layer_io *io) {
    // input gradient as if the kernel were not flipped: swap two weight taps for the duration
    float *w = (float *)io->weight;
    float t = w[0];
    w[0] = w[1];
    w[1] = t;
    hw_cpu_backend.backward(layer, io);
    w[1] = w[0];
    w[0] = t;
    return HW_OK;
}

Test(nn_grad, checker_fails_on_wrong_gradients) {
    struct {
        const char *type, *line;
        int64_t in[3];
        int ndim;
        backward_fn wrong;
        int tensor;
    } cases[] = {
        {"linear", "linear 3", {4}, 1, linear_backward_wrong_weight, GRAD_WEIGHT},
        {"linear", "linear 3", {4}, 1, linear_backward_wrong_bias, GRAD_BIAS},
        {"relu", "relu", {2, 3, 3}, 3, relu_backward_ungated, GRAD_IN},
        {"conv2d", "conv2d 2 2", {1, 4, 4}, 3, conv2d_backward_transposed_kernel, GRAD_IN},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        grad_case c;
        case_open(&c, hw_layer_type_find(cases[i].type), cases[i].line, hw_shape_make(cases[i].ndim, cases[i].in), 2,
                  11);
        grad_report rep;
        check_case(&c, NULL, &rep);
        cr_expect(report_all_ok(&rep), "%s: the right backward passes", cases[i].line);
        check_case(&c, cases[i].wrong, &rep);
        cr_expect(!report_ok(&rep, cases[i].tensor), "%s: the checker did not catch wrong case %zu (err %.3g)",
                  cases[i].line, i, rep.max_err[cases[i].tensor]);
        case_close(&c);
    }
}

// Every type declares what the parser and the workspace need.
Test(nn_layers, table_entries_are_complete) {
    for (int t = 0; hw_layer_types[t]; t++) {
        const hw_layer_type *type = hw_layer_types[t];
        cr_expect(type->name && type->usage && type->name_prefix, "type %d", t);
        cr_expect(type->configure && type->example, "%s", type->name);
        int keys = 0;
        while (keys < HW_LAYER_MAX_ARGS && type->keys[keys]) keys++;
        cr_expect_leq(type->max_args + keys, HW_LAYER_MAX_ARGS, "%s: too many arguments", type->name);
        cr_expect_leq(type->min_args, type->max_args, "%s", type->name);
        cr_expect_eq(hw_layer_type_find(type->name), type);
        for (int u = 0; u < t; u++) cr_expect_str_neq(hw_layer_types[u]->name, type->name);
        cr_expect_eq(type->kind, (hw_layer_kind)t, "%s: row %d of the table, kind %d", type->name, t, (int)type->kind);
    }
    cr_expect_null(hw_layer_types[HW_LAYER_KINDS], "one row per kind, then NULL");
    for (int t = 0; t < HW_LAYER_KINDS; t++) cr_expect_not_null(hw_layer_types[t], "kind %d has no row", t);
    cr_expect_null(hw_layer_type_find("conv3d"));
}

// Every kind has its case in the CPU backend's switches (the compiler checks, -Wswitch); a layer
// of no kind is refused with a message, never run as some other kind.
Test(nn_layers, cpu_backend_refuses_an_unknown_kind) {
    hw_layer layer;
    hw_shape ps[2];
    cr_assert_eq(hw_layer_setup(&layer, "relu", hw_shape_make(1, (int64_t[]){4}), ps), HW_OK);
    layer.kind = HW_LAYER_KINDS;
    float x[4] = {1, 2, 3, 4}, y[4] = {0}, dx[4] = {0};
    hw_layer_io io = {.batch = 1, .in = x, .out = y, .dout = x, .din = dx};
    cr_expect_eq(hw_cpu_backend.forward(&layer, &io), HW_ERR);
    cr_expect(strstr(hw_error(), "kind"), "got: %s", hw_error());
    cr_expect_eq(hw_cpu_backend.backward(&layer, &io), HW_ERR);
    cr_expect(strstr(hw_error(), "kind"), "got: %s", hw_error());
    cr_expect_eq(y[0], 0.0f, "nothing written");
}

// ---------------------------------------------------------------------------------------------
// Forward against direct loops

static void run_forward(const hw_layer *layer, int batch, const float *x, float *y, const float *w, const float *b,
                        int training) {
    size_t scratch = layer->type->scratch_floats ? layer->type->scratch_floats(layer, batch) : 0;
    size_t saved = layer->type->saved_bytes ? layer->type->saved_bytes(layer, batch) : 0;
    float *s = floats(scratch);
    uint8_t *m = malloc(saved ? saved : 1);
    hw_rng rng;
    hw_rng_seed(&rng, 3, 3);
    hw_layer_io io = {.batch = batch,
                      .training = training,
                      .in = x,
                      .out = y,
                      .weight = w,
                      .bias = b,
                      .scratch = s,
                      .saved = m,
                      .rng = &rng};
    hw_cpu_backend.forward(layer, &io);
    free(s);
    free(m);
}

Test(nn_layers, conv2d_matches_direct_convolution) {
    hw_rng rng;
    hw_rng_seed(&rng, 9, 0);
    for (int trial = 0; trial < 40; trial++) {
        int in_c = hw_rng_below(&rng, 3) + 1, out_c = hw_rng_below(&rng, 4) + 1, k = hw_rng_below(&rng, 5) + 1;
        int stride = hw_rng_below(&rng, 3) + 1, pad = hw_rng_below(&rng, 3), batch = hw_rng_below(&rng, 3) + 1;
        if (trial == 0) in_c = 1, out_c = 10, k = 5, stride = 1, pad = 0;  // LeNet's conv1 on a 28x28 input
        int h = k + (int)hw_rng_below(&rng, 9), w = k + (int)hw_rng_below(&rng, 9);
        if (trial == 0) h = w = 28;
        char line[128];
        snprintf(line, sizeof line, "conv2d %d %d stride=%d padding=%d", out_c, k, stride, pad);
        hw_layer layer;
        hw_shape ps[2];
        cr_assert_eq(hw_layer_setup(&layer, line, hw_shape_make(3, (int64_t[]){in_c, h, w}), ps), HW_OK, "%s",
                     hw_error());
        int oh = (h + 2 * pad - k) / stride + 1, ow = (w + 2 * pad - k) / stride + 1;
        cr_assert_eq(layer.out_shape.dims[1], oh);
        cr_assert_eq(layer.out_shape.dims[2], ow);
        size_t nx = (size_t)batch * in_c * h * w, ny = (size_t)batch * out_c * oh * ow,
               nw = (size_t)out_c * in_c * k * k;
        float *x = floats(nx), *y = floats(ny), *wt = floats(nw), *b = floats(out_c);
        for (size_t i = 0; i < nx; i++) x[i] = hw_rng_normal(&rng);
        for (size_t i = 0; i < nw; i++) wt[i] = hw_rng_normal(&rng);
        for (int i = 0; i < out_c; i++) b[i] = hw_rng_normal(&rng);
        fill_nan(y, ny);
        run_forward(&layer, batch, x, y, wt, b, 1);
        for (int n = 0; n < batch; n++)
            for (int o = 0; o < out_c; o++)
                for (int i = 0; i < oh; i++)
                    for (int j = 0; j < ow; j++) {
                        double sum = b[o];
                        for (int c = 0; c < in_c; c++)
                            for (int ki = 0; ki < k; ki++)
                                for (int kj = 0; kj < k; kj++) {
                                    int ih = i * stride - pad + ki, iw = j * stride - pad + kj;
                                    if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
                                    sum += (double)wt[((o * in_c + c) * k + ki) * k + kj] *
                                           x[(((size_t)n * in_c + c) * h + ih) * w + iw];
                                }
                        float got = y[(((size_t)n * out_c + o) * oh + i) * ow + j];
                        cr_assert(fabs(got - sum) <= 1e-4 * (1 + fabs(sum)),
                                  "%s on %dx%dx%d: y[%d][%d][%d][%d] = %g, want %g", line, in_c, h, w, n, o, i, j, got,
                                  sum);
                    }
        free(x), free(y), free(wt), free(b);
    }
}

Test(nn_layers, maxpool2d_matches_direct_pooling) {
    hw_rng rng;
    hw_rng_seed(&rng, 10, 0);
    for (int trial = 0; trial < 40; trial++) {
        int ch = hw_rng_below(&rng, 3) + 1, k = hw_rng_below(&rng, 4) + 1, stride = hw_rng_below(&rng, 3) + 1;
        int batch = hw_rng_below(&rng, 3) + 1;
        if (trial < 6) k = stride = 2;  // the vectorised 2x2 paths, with even and odd sizes
        int h = k + (int)hw_rng_below(&rng, 8), w = k + (int)hw_rng_below(&rng, 8);
        if (trial >= 2 && trial < 6) {
            w = 16 + (int)hw_rng_below(&rng, 11);  // rows of 8 outputs or more: the CPU kernels
        }
        if (trial >= 6 && trial < 9) {
            w = 8 + (int)hw_rng_below(&rng, 2), h = 4 * (1 + (int)hw_rng_below(&rng, 2));  // rows of 4
        }
        if (trial >= 6 && trial < 9) k = stride = 2;
        char line[64];
        snprintf(line, sizeof line, "maxpool2d %d stride=%d", k, stride);
        hw_layer layer;
        hw_shape ps[2];
        cr_assert_eq(hw_layer_setup(&layer, line, hw_shape_make(3, (int64_t[]){ch, h, w}), ps), HW_OK, "%s",
                     hw_error());
        int oh = (h - k) / stride + 1, ow = (w - k) / stride + 1;
        size_t nx = (size_t)batch * ch * h * w, ny = (size_t)batch * ch * oh * ow;
        float *x = floats(nx), *y = floats(ny);
        // small integers: ties happen, and any of the tied values is the same maximum
        for (size_t i = 0; i < nx; i++) x[i] = (float)hw_rng_below(&rng, 7) - 3.0f;
        run_forward(&layer, batch, x, y, NULL, NULL, 1);
        for (int p = 0; p < batch * ch; p++)
            for (int i = 0; i < oh; i++)
                for (int j = 0; j < ow; j++) {
                    float best = -INFINITY;
                    for (int a = 0; a < k; a++)
                        for (int b = 0; b < k; b++) {
                            best = fmaxf(best, x[((size_t)p * h + i * stride + a) * w + j * stride + b]);
                        }
                    cr_assert_eq(y[((size_t)p * oh + i) * ow + j], best, "%s on %dx%d", line, h, w);
                }
        free(x), free(y);
    }
}

// Ties go to the first maximum (PyTorch), so a plane of equal values sends the whole gradient
// to each window's first element.
Test(nn_layers, maxpool2d_ties_go_to_the_first) {
    hw_layer layer;
    hw_shape ps[2];
    cr_assert_eq(hw_layer_setup(&layer, "maxpool2d 2", hw_shape_make(3, (int64_t[]){1, 4, 4}), ps), HW_OK);
    float x[16], y[4], dy[4] = {1, 2, 3, 4}, dx[16];
    for (int i = 0; i < 16; i++) x[i] = 1.0f;
    int32_t saved[4];
    hw_layer_io io = {.batch = 1, .training = 1, .in = x, .out = y, .saved = (uint8_t *)saved, .dout = dy, .din = dx};
    hw_cpu_backend.forward(&layer, &io);
    hw_cpu_backend.backward(&layer, &io);
    float want[16] = {1, 0, 2, 0, 0, 0, 0, 0, 3, 0, 4, 0, 0, 0, 0, 0};
    for (int i = 0; i < 16; i++) cr_expect_eq(dx[i], want[i], "dx[%d]", i);
}

Test(nn_layers, dropout_masks_and_scales) {
    hw_layer layer;
    hw_shape ps[2];
    int64_t n = 20000;
    cr_assert_eq(hw_layer_setup(&layer, "dropout 0.25", hw_shape_make(1, &n), ps), HW_OK);
    float *x = floats((size_t)n), *y = floats((size_t)n);
    for (int i = 0; i < n; i++) x[i] = 1.0f + (float)(i % 5);
    run_forward(&layer, 1, x, y, NULL, NULL, 1);
    int zeros = 0;
    for (int i = 0; i < n; i++) {
        if (y[i] == 0.0f) zeros++;
        else cr_assert_float_eq(y[i], x[i] / 0.75f, 1e-5f);
    }
    cr_expect(zeros > 0.22 * n && zeros < 0.28 * n, "dropped %d of %lld at p = 0.25", zeros, (long long)n);
    run_forward(&layer, 1, x, y, NULL, NULL, 0);  // evaluation: the identity
    for (int i = 0; i < n; i++) cr_assert_eq(y[i], x[i]);
    free(x), free(y);

    // dropout2d: whole channels
    cr_assert_eq(hw_layer_setup(&layer, "dropout2d 0.5", hw_shape_make(3, (int64_t[]){64, 3, 3}), ps), HW_OK);
    x = floats(64 * 9 * 4);
    y = floats(64 * 9 * 4);
    for (int i = 0; i < 64 * 9 * 4; i++) x[i] = 1.0f;
    run_forward(&layer, 4, x, y, NULL, NULL, 1);
    int dropped = 0;
    for (int c = 0; c < 64 * 4; c++) {
        for (int i = 1; i < 9; i++) cr_assert_eq(y[c * 9 + i], y[c * 9], "channel %d not uniform", c);
        cr_assert(y[c * 9] == 0.0f || y[c * 9] == 2.0f);
        dropped += y[c * 9] == 0.0f;
    }
    cr_expect(dropped > 90 && dropped < 166, "dropped %d of 256 channels at p = 0.5", dropped);
    free(x), free(y);
}

// ---------------------------------------------------------------------------------------------
// log_softmax + NLL on extreme logits

// The CPU backend runs a convolution and the dropout2d after it in one call in training
// (forward_pair, src/nn/exec.c): the mask is drawn first and the dropped channels are not
// computed. Against the same walk one layer at a time (a backend without pairs), from the same RNG:
// every activation bit for bit (of the convolution's own output, the kept channels: the pair
// leaves the dropped ones +0.0), the same masks, the RNG left in the same state, and the same
// gradients. Once on LeNet (the kernels) and once on a padded convolution (im2col and the BLAS).
// model: loaded, without weights (freed here).
static void pair_matches_the_layers_one_by_one(hw_model *model, const char *name, int batch) {
    cr_assert_eq(hw_model_alloc_weights(model), HW_OK);
    hw_model_init_weights(model, 3);
    int conv = -1;
    for (int i = 0; i + 1 < model->n_layers; i++) {
        if (model->layers[i].kind == HW_CONV2D && model->layers[i + 1].kind == HW_DROPOUT2D) conv = i;
    }
    cr_assert(conv >= 0 && hw_exec_pairs(&hw_cpu_backend, model, conv, 1), "%s: no pair", name);
    cr_assert(!hw_exec_pairs(&hw_cpu_backend, model, conv, 0), "%s: a pair in evaluation", name);
    const hw_backend one_by_one = {.forward = hw_cpu_backend.forward, .backward = hw_cpu_backend.backward};
    const hw_backend *backends[2] = {&hw_cpu_backend, &one_by_one};
    size_t in = (size_t)hw_shape_numel(model->input) * batch;
    float *x = floats(in);
    uint8_t *y = malloc((size_t)batch);
    hw_rng rng;
    hw_rng_seed(&rng, 12, 0);
    for (size_t i = 0; i < in; i++) x[i] = hw_rng_normal(&rng);
    for (int b = 0; b < batch; b++) y[b] = (uint8_t)hw_rng_below(&rng, (uint32_t)model->n_classes);
    hw_workspace ws[2];
    for (int p = 0; p < 2; p++) {
        cr_assert_eq(hw_workspace_alloc(&ws[p], model, batch, 1), HW_OK);
        hw_rng_seed(&ws[p].rng, 11, 0);
        ws[p].acts[0] = x;
        ws[p].training = 1;
        // The convolution's output starts as NaN: the pair must write its dropped planes, not
        // leave what the buffer held.
        fill_nan(ws[p].acts[conv + 1], (size_t)batch * hw_shape_numel(model->layers[conv].out_shape));
        hw_exec_buffers bufs = hw_workspace_buffers(model, &ws[p]);
        cr_assert_eq(hw_exec_forward(backends[p], model, &bufs, batch, 1), HW_OK, "%s", hw_error());
        hw_nll_loss_backward(ws[p].grad_acts[model->n_layers], y, batch, model->n_classes);
        cr_assert_eq(hw_exec_backward(backends[p], model, &bufs, batch, 1, 0), HW_OK, "%s", hw_error());
    }
    const uint8_t *mask = ws[0].saved[conv + 1];
    const size_t planes = (size_t)batch * model->layers[conv + 1].dims.dropout.c;
    cr_expect(memcmp(mask, ws[1].saved[conv + 1], planes) == 0, "%s: the pair drew another mask", name);
    size_t dropped = 0;
    for (size_t c = 0; c < planes; c++) dropped += !mask[c];
    cr_assert(dropped > 0 && dropped < planes, "%s: %zu of %zu channels dropped: nothing to check", name, dropped,
              planes);
    for (int i = 1; i <= model->n_layers; i++) {
        size_t n = (size_t)batch * hw_shape_numel(model->layers[i - 1].out_shape), differ = 0, not_zero = 0;
        size_t plane = n / planes;
        for (size_t e = 0; e < n; e++) {
            if (i == conv + 1 && !mask[e / plane]) {  // a dropped channel of the convolution's output: +0.0
                not_zero += ws[0].acts[i][e] != 0.0f || signbit(ws[0].acts[i][e]);
                continue;
            }
            differ += memcmp(&ws[0].acts[i][e], &ws[1].acts[i][e], sizeof(float)) != 0;
        }
        cr_expect(differ == 0, "%s: %zu values of the output of layer %d (%s) differ", name, differ, i - 1,
                  model->layers[i - 1].name);
        cr_expect(not_zero == 0, "%s: %zu values of the convolution's dropped channels are not +0.0", name, not_zero);
    }
    cr_expect(memcmp(ws[0].grads, ws[1].grads, sizeof(float) * model->n_weights) == 0, "%s: the gradients differ",
              name);
    cr_expect_eq(hw_rng_u32(&ws[0].rng), hw_rng_u32(&ws[1].rng), "%s: the RNG is left elsewhere", name);
    for (int p = 0; p < 2; p++) hw_workspace_free(&ws[p]);
    free(x), free(y);
    hw_model_free(model);
}

Test(nn_layers, a_conv_and_its_dropout2d_in_one_call_match_the_layers_one_by_one) {
    hw_model lenet, padded;
    cr_assert_eq(hw_model_load(&lenet, "models/lenet.model"), HW_OK, "%s", hw_error());
    pair_matches_the_layers_one_by_one(&lenet, "lenet", 16);
    cr_assert_eq(hw_model_parse(&padded,
                                "input 2 9 9\nconv2d 6 3 padding=1\ndropout2d 0.4\nrelu\nflatten\nlinear 10\n"
                                "log_softmax\n",
                                "padded"),
                 HW_OK, "%s", hw_error());
    pair_matches_the_layers_one_by_one(&padded, "padded", 5);
}

// Only a convolution and a dropout2d pair: the keep mask is one byte per (sample, output channel),
// which an elementwise dropout's mask (a byte per value) is not, nor is anything else's state.
Test(nn_layers, only_a_conv_and_a_dropout2d_pair) {
    static const struct {
        const char *text;
        int pairs;
    } cases[] = {
        {"input 1 12 12\nconv2d 4 5\ndropout2d 0.5\nflatten\nlog_softmax\n", 1},
        {"input 1 12 12\nconv2d 4 5\ndropout 0.5\nflatten\nlog_softmax\n", 0},
        {"input 1 12 12\nconv2d 4 5\nrelu\ndropout2d 0.5\nflatten\nlog_softmax\n", 0},
        {"input 1 12 12\nmaxpool2d 2\ndropout2d 0.5\nflatten\nlog_softmax\n", 0},
        {"input 1 12 12\ndropout2d 0.5\nconv2d 4 5\nflatten\nlog_softmax\n", 0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        hw_model model;
        cr_assert_eq(hw_model_parse(&model, cases[c].text, "pairs.model"), HW_OK, "%s", hw_error());
        for (int i = 0; i < model.n_layers; i++) {
            cr_expect_eq(hw_exec_pairs(&hw_cpu_backend, &model, i, 1), cases[c].pairs && i == 0,
                         "case %zu, layer %d (%s)", c, i, model.layers[i].name);
            cr_expect(!hw_exec_pairs(&hw_cpu_backend, &model, i, 0), "case %zu, layer %d: a pair in evaluation", c, i);
        }
        hw_model_free(&model);
    }
}

// A dropped channel is +0.0 whatever the input held (NaN, -0.0, a negative value): the GPU's
// kernel writes the same, and a convolution before it need not compute it (forward_pair).
Test(nn_layers, dropout2d_drops_to_positive_zero_whatever_the_input) {
    enum { BATCH = 8, N = BATCH * 4 * 3 };
    hw_layer L;
    hw_shape params[HW_LAYER_MAX_PARAMS];
    cr_assert_eq(hw_layer_setup(&L, "dropout2d 0.5", hw_shape_make(3, (int64_t[]){4, 1, 3}), params), HW_OK);
    float in[N], out[N];
    uint8_t mask[BATCH * 4];
    for (int i = 0; i < N; i++) in[i] = i % 3 == 0 ? NAN : i % 3 == 1 ? -0.0f : -1.5f;
    hw_rng rng;
    hw_rng_seed(&rng, 5, 0);
    hw_layer_io io = {.batch = BATCH, .training = 1, .in = in, .out = out, .saved = mask, .rng = &rng};
    cr_assert_eq(hw_cpu_backend.forward(&L, &io), HW_OK);
    int dropped = 0;
    for (int i = 0; i < N; i++) {
        if (mask[i / 3]) {
            cr_expect(i % 3 == 0 ? isnan(out[i]) : out[i] == in[i] * 2.0f && signbit(out[i]) == signbit(in[i]),
                      "kept value %d: %g from %g", i, out[i], in[i]);
        } else {
            dropped++;
            cr_expect(out[i] == 0.0f && !signbit(out[i]), "dropped value %d: %g from %g", i, out[i], in[i]);
        }
    }
    cr_assert(dropped > 0 && dropped < N, "%d of %d dropped: nothing to check", dropped, N);
}

Test(nn_layers, log_softmax_is_stable_on_huge_logits) {
    hw_model model;
    cr_assert_eq(hw_model_parse(&model, "input 4\nlog_softmax\n", "t.model"), HW_OK, "%s", hw_error());
    cr_assert_eq(hw_model_alloc_weights(&model), HW_OK);
    hw_workspace ws;
    cr_assert_eq(hw_workspace_alloc(&ws, &model, 3, 1), HW_OK);
    float x[12] = {1e4f, -1e4f, 0.0f, 1e4f, -1e4f, -1e4f, -1e4f, -1e4f + 1.0f, 3.0f, 1e4f, -1e4f, 2.0f};
    uint8_t labels[3] = {0, 3, 2};
    float loss = hw_cpu_forward(&model, &ws, x, labels, 3, 1);
    cr_assert(isfinite(loss), "loss %g", loss);
    const float *logp = hw_model_output(&model, &ws);
    for (int b = 0; b < 3; b++) {
        double max = -INFINITY, sum = 0;
        for (int i = 0; i < 4; i++) max = fmax(max, x[b * 4 + i]);
        for (int i = 0; i < 4; i++) sum += exp((double)x[b * 4 + i] - max);
        for (int i = 0; i < 4; i++) {
            double want = x[b * 4 + i] - max - log(sum);
            cr_expect(isfinite(logp[b * 4 + i]));
            cr_expect(fabs(logp[b * 4 + i] - want) <= 1e-3 + 1e-6 * fabs(want), "logp[%d][%d] = %g, want %g", b, i,
                      logp[b * 4 + i], want);
        }
    }
    // sample 0: two equal top logits -> -log(1/2); sample 1: the label leads the three others by 1;
    // sample 2: the label is 2e4 below the top
    double want_loss = (log(2.0) + (log(3.0 * exp(-1.0) + 1.0)) + 2e4) / 3.0;
    cr_expect(fabs(loss - want_loss) <= 1e-3 * want_loss, "loss %g, want %g", loss, want_loss);
    hw_workspace_free(&ws);
    hw_model_free(&model);
}

// ---------------------------------------------------------------------------------------------
// LeNet against PyTorch: tests/tools/make_torch_reference.py wrote tests/torch_reference.h with
// mnist_hogwild's Net at weights 0.1*sin(i) (flat order), a deterministic input batch, its
// log-probabilities, mean NLL and weight gradients in eval mode.
#include "torch_reference.h"

static double rel_err(const float *got, const float *want, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num = fmax(num, fabs((double)got[i] - want[i]));
        den = fmax(den, fabs((double)want[i]));
    }
    return num / (den > 0 ? den : 1);
}

static void lenet_against_pytorch(void) {
    hw_model model;
    cr_assert_eq(hw_model_load(&model, "models/lenet.model"), HW_OK, "%s", hw_error());
    cr_assert_eq((int)model.n_weights, TORCH_REF_N_WEIGHTS);
    cr_assert_eq(hw_model_alloc_weights(&model), HW_OK);
    for (int i = 0; i < TORCH_REF_N_WEIGHTS; i++) model.weights[i] = (float)(0.1 * sin((double)i));
    // the parameter names and offsets are those of PyTorch's state_dict
    for (int p = 0; p < TORCH_REF_N_PARAMS; p++) {
        int idx = hw_model_find_param(&model, torch_ref_param_names[p]);
        cr_assert_geq(idx, 0, "no parameter %s", torch_ref_param_names[p]);
        cr_expect_eq((int)model.params[idx].offset, torch_ref_param_offsets[p], "%s", torch_ref_param_names[p]);
    }
    hw_workspace ws;
    cr_assert_eq(hw_workspace_alloc(&ws, &model, TORCH_REF_BATCH, 1), HW_OK);
    float loss = hw_cpu_forward(&model, &ws, torch_ref_input, torch_ref_labels, TORCH_REF_BATCH, 0);
    cr_expect(fabs(loss - TORCH_REF_LOSS) <= 1e-4 * fabs(TORCH_REF_LOSS), "loss %.7g, torch %.7g", loss,
              TORCH_REF_LOSS);
    double e = rel_err(hw_model_output(&model, &ws), torch_ref_logp, (size_t)TORCH_REF_BATCH * 10);
    cr_expect_lt(e, 1e-4, "log-probabilities: relative error %g", e);
    hw_cpu_backward(&model, &ws, torch_ref_labels, TORCH_REF_BATCH);
    for (int p = 0; p < TORCH_REF_N_PARAMS; p++) {
        size_t n = (size_t)(p + 1 < TORCH_REF_N_PARAMS ? torch_ref_param_offsets[p + 1] : TORCH_REF_N_WEIGHTS) -
                   (size_t)torch_ref_param_offsets[p];
        e = rel_err(ws.grads + torch_ref_param_offsets[p], torch_ref_grads + torch_ref_param_offsets[p], n);
        cr_expect_lt(e, 1e-4, "gradient of %s: relative error %g", torch_ref_param_names[p], e);
    }
    hw_workspace_free(&ws);
    hw_model_free(&model);
}

Test(nn_torch, lenet_matches_pytorch) { lenet_against_pytorch(); }

// configure names every size of its kind, as the backends read them.
Test(nn_layers, setup_sets_the_kind_and_named_sizes) {
    hw_layer L;
    hw_shape params[HW_LAYER_MAX_PARAMS];
    cr_assert_eq(hw_layer_setup(&L, "conv2d 6 3 stride=2 padding=1", hw_shape_make(3, (int64_t[]){2, 11, 13}), params),
                 HW_OK, "%s", hw_error());
    cr_expect_eq(L.kind, HW_CONV2D);
    const hw_conv2d_dims *c = &L.dims.conv2d;
    cr_expect(c->in_c == 2 && c->out_c == 6 && c->k == 3 && c->stride == 2 && c->pad == 1, "conv2d dims");
    cr_expect(c->in_h == 11 && c->in_w == 13 && c->out_h == 6 && c->out_w == 7, "%d x %d", c->out_h, c->out_w);
    cr_assert_eq(hw_layer_setup(&L, "maxpool2d 3 stride=2", hw_shape_make(3, (int64_t[]){4, 9, 8}), params), HW_OK);
    const hw_maxpool2d_dims *p = &L.dims.maxpool2d;
    cr_expect_eq(L.kind, HW_MAXPOOL2D);
    cr_expect(p->c == 4 && p->k == 3 && p->stride == 2 && p->in_h == 9 && p->in_w == 8 && p->out_h == 4 &&
              p->out_w == 3);
    cr_assert_eq(hw_layer_setup(&L, "linear 5", hw_shape_make(1, (int64_t[]){12}), params), HW_OK);
    cr_expect(L.kind == HW_LINEAR && L.dims.linear.in == 12 && L.dims.linear.out == 5);
    cr_assert_eq(hw_layer_setup(&L, "dropout2d 0.25", hw_shape_make(3, (int64_t[]){4, 3, 5}), params), HW_OK);
    cr_expect(L.kind == HW_DROPOUT2D && L.dims.dropout.p == 0.25f && L.dims.dropout.c == 4 &&
              L.dims.dropout.plane == 15);
    cr_assert_eq(hw_layer_setup(&L, "dropout", hw_shape_make(1, (int64_t[]){12}), params), HW_OK);
    cr_expect(L.kind == HW_DROPOUT && L.dims.dropout.p == 0.5f && L.dims.dropout.c == 1 && L.dims.dropout.plane == 12);
}

// ---------------------------------------------------------------------------------------------
// The CPU kernels (src/nn/cpu/kernels.h), one copy per instruction set. Each copy this CPU can run is
// chosen as HOGWILD_CPU_PATH chooses it (hw_nn_kernels_select) and run through the layers' own
// functions, as training runs it: the gradient check on sizes that take the kernels, the whole
// LeNet against PyTorch, and every layer against the baseline copy, the product's own reference
// path. A copy this CPU cannot run is skipped with the reason.

// Said after the run (skip_report.h). (Criterion names a hook by its line: no two files may put
// theirs on the same line.)
ReportHook(POST_ALL)(struct criterion_global_stats *stats) { skip_report(stats, "nn_kernels", NULL); }

static void use_kernels(const char *path) {
    if (!hw_nn_kernels_runnable(path)) {
        cr_skip_test("CPU kernels %s not checked: this CPU (and OS) cannot run them (%s needs %s)", path, path,
                     strcmp(path, "avx512") == 0 ? "AVX-512 F, VL, BW and DQ" : "AVX2 and FMA");
    }
    cr_assert_eq(hw_nn_kernels_select(path), HW_OK, "%s", hw_error());
    cr_assert(strncmp(hw_nn_kernels_info(), path, strlen(path)) == 0, "%s", hw_nn_kernels_info());
}

// A conv2d line and input shape that take the kernels (stride 1, no padding, output rows of 8, 16
// or 24), with channel counts around the kernels' tile sizes. Up to 6 output rows: rows of 8 take
// the input gradient's tile of 4 stacked vectors (the avx512 copy's) from 4 rows on.
static void direct_conv_example(hw_rng *rng, hw_shape *in, char *line, size_t cap) {
    static const int outs[] = {1, 2, 3, 5, 6, 7, 10, 11, 16, 20, 21};
    int k = nn_test_rand(rng, 1, 5), out_w = 8 * nn_test_rand(rng, 1, 3);
    int64_t dims[3] = {nn_test_rand(rng, 1, 3), k - 1 + nn_test_rand(rng, 1, 6), out_w + k - 1};
    *in = hw_shape_make(3, dims);
    snprintf(line, cap, "conv2d %d %d", outs[hw_rng_below(rng, sizeof outs / sizeof outs[0])], k);
}

static void kernels_match_finite_differences(const char *path) {
    use_kernels(path);
    hw_rng rng;
    hw_rng_seed(&rng, 4000, 0);
    for (int k = 0; k < 12; k++) {
        char line[256];
        hw_shape in;
        direct_conv_example(&rng, &in, line, sizeof line);
        grad_case c;
        case_open(&c, hw_layer_type_find("conv2d"), line, in, check_batches[k % 10], 300 + (uint64_t)k);
        cr_assert(c.layer.dims.conv2d.out_w % 8 == 0 && c.layer.type->saved_bytes(&c.layer, 1) == 0,
                  "%s: does not take the kernels", line);
        grad_report rep;
        check_case(&c, NULL, &rep);
        char shape[64];
        hw_shape_format(in, shape, sizeof shape);
        for (int w = 0; w < 3; w++) {
            cr_expect(report_ok(&rep, w), "%s kernels, %s on input %s, batch %d: d/d%s off by %.3g (largest %.3g)",
                      path, line, shape, c.batch, grad_names[w], rep.max_err[w], rep.scale[w]);
        }
        case_close(&c);
    }
}

// LeNet's layers at batch 64 (and 3), forward and every gradient, under `path` and under the
// baseline copy: the same within float rounding (the copies differ in FMA and in the order of
// the sums, not in the math).
static void kernels_match_baseline(const char *path) {
    use_kernels(path);
    hw_model model;
    cr_assert_eq(hw_model_load(&model, "models/lenet.model"), HW_OK, "%s", hw_error());
    cr_assert_eq(hw_model_alloc_weights(&model), HW_OK);
    hw_model_init_weights(&model, 5);
    for (int batch = 64; batch > 0; batch = batch == 64 ? 3 : 0) {
        hw_workspace ws;
        cr_assert_eq(hw_workspace_alloc(&ws, &model, batch, 1), HW_OK);
        size_t in = (size_t)hw_shape_numel(model.input) * batch;
        float *x = floats(in), *logp[2], *grads[2];
        uint8_t *y = malloc((size_t)batch);
        hw_rng rng;
        hw_rng_seed(&rng, 6, 0);
        for (size_t i = 0; i < in; i++) x[i] = hw_rng_normal(&rng);
        for (int b = 0; b < batch; b++) y[b] = (uint8_t)hw_rng_below(&rng, 10);
        const char *paths[2] = {path, "baseline"};
        for (int p = 0; p < 2; p++) {
            cr_assert_eq(hw_nn_kernels_select(paths[p]), HW_OK);
            hw_rng_seed(&ws.rng, 9, 0);  // the same dropout masks
            hw_cpu_forward(&model, &ws, x, y, batch, 1);
            cr_assert_eq(hw_cpu_backward(&model, &ws, y, batch), HW_OK);
            logp[p] = floats((size_t)batch * 10);
            memcpy(logp[p], hw_model_output(&model, &ws), sizeof(float) * batch * 10);
            grads[p] = floats(model.n_weights);
            memcpy(grads[p], ws.grads, sizeof(float) * model.n_weights);
        }
        double e = rel_err(logp[0], logp[1], (size_t)batch * 10);
        cr_expect_lt(e, 1e-5, "%s kernels, batch %d: log-probabilities off the baseline's by %g", path, batch, e);
        for (int i = 0; i < model.n_params; i++) {
            size_t off = model.params[i].offset, n = (size_t)hw_shape_numel(model.params[i].shape);
            e = rel_err(grads[0] + off, grads[1] + off, n);
            cr_expect_lt(e, 1e-4, "%s kernels, batch %d: gradient of %s off the baseline's by %g", path, batch,
                         model.params[i].name, e);
        }
        for (int p = 0; p < 2; p++) free(logp[p]), free(grads[p]);
        free(x), free(y);
        hw_workspace_free(&ws);
    }
    hw_model_free(&model);
}

static void kernels_match_pytorch(const char *path) {
    use_kernels(path);
    lenet_against_pytorch();
}

// Every copy's convolution on sizes around its tiles, through the layer's own functions, with
// exactly the scratch the layer asks for and a guard after it: nothing is written past the end of
// scratch or of the outputs, and forward and every gradient equal a plain sum in double. Output
// channels of all-zero gradient (the input gradient's skip) in half of the samples. Sizes where
// the channels outnumber the output positions (out_c > out_h * out_w) once wrote the input
// gradient's list of live channels past the end of the scratch.
enum { GUARD_FLOATS = 1024 };
static const float guard_value = 12345.5f;

static float *guarded(size_t n) {
    float *p = floats(n + GUARD_FLOATS);
    for (size_t i = 0; i < n + GUARD_FLOATS; i++) p[i] = guard_value;
    return p;
}

static int guard_intact(const float *p, size_t n) {
    for (size_t i = n; i < n + GUARD_FLOATS; i++) {
        if (p[i] != guard_value) return 0;
    }
    return 1;
}

static double max_rel(const float *got, const double *want, size_t n) {
    double err = 0, scale = 1e-30;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]);
        if (!(e <= err)) err = isnan(e) ? INFINITY : e;
        if (fabs(want[i]) > scale) scale = fabs(want[i]);
    }
    return err / scale;
}

// Forward with a keep mask (a dropout2d's, drawn first: forward_pair in src/nn/exec.c): the kept
// channels' planes equal the unmasked forward's, y, bit for bit; the dropped ones are +0.0 (the
// output starts as NaN); nothing is written past the output or the scratch. The mask keeps every
// channel of sample 0, none of sample 1, and about half of the others'.
static void conv_forward_skips_dropped_channels(const char *path, const char *line, const nn_kernels *table,
                                                const float *y, float *scratch, size_t n_scratch, const float *x,
                                                const float *w, const float *b, const hw_conv2d_dims *d, int batch) {
    const size_t n = (size_t)d->out_h * d->out_w, planes = (size_t)batch * d->out_c;
    uint8_t *keep = malloc(planes);
    hw_rng rng;
    hw_rng_seed(&rng, 90, (uint64_t)batch);
    for (size_t i = 0; i < planes; i++)
        keep[i] = i < (size_t)d->out_c ? 1 : i < 2 * (size_t)d->out_c ? 0 : hw_rng_below(&rng, 2);
    float *masked = guarded(planes * n);
    fill_nan(masked, planes * n);
    table->conv_forward(masked, scratch, x, w, b, keep, d, batch);
    size_t wrong = 0, first = 0;
    for (size_t i = 0; i < planes * n; i++) {
        int ok =
            keep[i / n] ? memcmp(&masked[i], &y[i], sizeof(float)) == 0 : signbit(masked[i]) == 0 && masked[i] == 0.0f;
        if (!ok && !wrong++) first = i;
    }
    cr_expect(wrong == 0,
              "%s kernels, %s, batch %d, a keep mask: %zu of %zu outputs wrong, the first at %zu (channel %zu, %s): "
              "%g where %g",
              path, line, batch, wrong, planes * n, first, first / n, keep[first / n] ? "kept" : "dropped",
              masked[first], keep[first / n] ? y[first] : 0.0);
    cr_expect(guard_intact(masked, planes * n) && guard_intact(scratch, n_scratch),
              "%s kernels, %s, a keep mask: wrote past the output or the scratch", path, line);
    free(masked), free(keep);
}

// table: a copy's functions called directly, with the scratch it asks for; NULL: the layer's own
// functions on the copy in use, with the scratch the layer asks for (the most of any copy's).
// sparse: dy mostly zeros (1 value in 8, and whole channels), as a convolution before max-pooling
// and dropout2d gets it: the weight gradient then sums over the nonzeros (src/nn/cpu/conv_pool.h).
static void conv_stays_in_bounds_with(const char *path, const nn_kernels *table, int sparse) {
    static const int shapes[][5] = {
        // in_c, out_c, k, out_h, out_w
        {1, 21, 1, 1, 8},  {1, 100, 1, 1, 8}, {1, 100, 3, 2, 8}, {3, 21, 2, 2, 8},   {17, 100, 7, 3, 24},
        {1, 1, 1, 1, 8},   {1, 5, 5, 3, 16},  {3, 6, 3, 2, 24},  {17, 21, 1, 1, 32}, {2, 64, 5, 1, 16},
        {10, 20, 5, 8, 8}, {3, 7, 3, 5, 8},  // rows of 8 stacked 4 high (LeNet's conv2, and a rest of 1)
    };
    static const int batches[] = {1, 3};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        for (size_t bi = 0; bi < sizeof batches / sizeof batches[0]; bi++) {
            const int in_c = shapes[s][0], out_c = shapes[s][1], k = shapes[s][2], batch = batches[bi];
            const int out_h = shapes[s][3], out_w = shapes[s][4], in_h = out_h + k - 1, in_w = out_w + k - 1;
            char line[64];
            snprintf(line, sizeof line, "conv2d %d %d", out_c, k);
            hw_layer L;
            hw_shape params[HW_LAYER_MAX_PARAMS];
            cr_assert_eq(hw_layer_setup(&L, line, hw_shape_make(3, (int64_t[]){in_c, in_h, in_w}), params), HW_OK, "%s",
                         hw_error());
            cr_assert_eq(L.type->saved_bytes(&L, batch), 0, "%s: does not take the kernels", line);
            const size_t n_in = (size_t)batch * in_c * in_h * in_w, n = (size_t)out_h * out_w;
            const size_t n_out = (size_t)batch * out_c * n, taps = (size_t)in_c * k * k, n_w = out_c * taps;
            const hw_conv2d_dims *d = &L.dims.conv2d;
            const size_t n_scratch = table ? table->conv_scratch_floats(d) : L.type->scratch_floats(&L, batch);
            float *x = floats(n_in), *w = floats(n_w), *b = floats((size_t)out_c), *dy = floats(n_out);
            float *y = guarded(n_out), *scratch = guarded(n_scratch), *dx = guarded(n_in), *dw = guarded(n_w);
            float *db = guarded((size_t)out_c);
            hw_rng rng;
            hw_rng_seed(&rng, 70 + s, bi + 2 * (uint64_t)sparse);
            for (size_t i = 0; i < n_in; i++) x[i] = hw_rng_normal(&rng);
            for (size_t i = 0; i < n_w; i++) w[i] = hw_rng_normal(&rng);
            for (int i = 0; i < out_c; i++) b[i] = hw_rng_normal(&rng);
            for (size_t i = 0; i < n_out; i++) {
                int sample = (int)(i / ((size_t)out_c * n)), channel = (int)(i / n % (size_t)out_c);
                dy[i] = sample % 2 == 1 && channel % 3 != 0 ? 0.0f : hw_rng_normal(&rng);
                if (sparse && (channel % 2 == sample % 2 || !hw_rng_below(&rng, 8))) dy[i] = 0.0f;
            }
            if (table) {
                table->conv_forward(y, scratch, x, w, b, NULL, d, batch);
                table->conv_backward_weight(dw, db, scratch, x, dy, d, batch);
                table->conv_backward_input(dx, scratch, dy, w, d, batch);
            } else {
                hw_layer_io io = {.batch = batch,
                                  .training = 1,
                                  .in = x,
                                  .out = y,
                                  .weight = w,
                                  .bias = b,
                                  .scratch = scratch,
                                  .rng = &rng};
                hw_cpu_backend.forward(&L, &io);
                io.dout = dy, io.din = dx, io.dweight = dw, io.dbias = db;
                hw_cpu_backend.backward(&L, &io);
            }
            conv_forward_skips_dropped_channels(path, line, table ? table : nn_kernels_in_use(), y, scratch, n_scratch,
                                                x, w, b, d, batch);
            cr_expect(guard_intact(scratch, n_scratch),
                      "%s kernels, %s on %dx%dx%d, batch %d%s: wrote past the %zu "
                      "floats of scratch",
                      path, line, in_c, in_h, in_w, batch, sparse ? ", sparse dy" : "", n_scratch);
            cr_expect(guard_intact(y, n_out) && guard_intact(dx, n_in) && guard_intact(dw, n_w) &&
                          guard_intact(db, (size_t)out_c),
                      "%s kernels, %s: wrote past an output", path, line);
            double *ry = calloc(n_out, sizeof(double)), *rdx = calloc(n_in, sizeof(double));
            double *rdw = calloc(n_w, sizeof(double)), *rdb = calloc((size_t)out_c, sizeof(double));
            for (int s0 = 0; s0 < batch; s0++) {
                for (int o = 0; o < out_c; o++) {
                    for (size_t p = 0; p < n; p++) {
                        size_t at = ((size_t)s0 * out_c + o) * n + p;
                        double sum = b[o], g = dy[at];
                        rdb[o] += g;
                        for (size_t t = 0; t < taps; t++) {
                            int c = (int)(t / ((size_t)k * k)), ki = (int)(t / k % k), kj = (int)(t % k);
                            size_t xi = (((size_t)s0 * in_c + c) * in_h + p / out_w + ki) * in_w + p % out_w + kj;
                            sum += (double)w[o * taps + t] * x[xi];
                            rdw[o * taps + t] += g * x[xi];
                            rdx[xi] += g * w[o * taps + t];
                        }
                        ry[at] = sum;
                    }
                }
            }
            double e[4] = {max_rel(y, ry, n_out), max_rel(dx, rdx, n_in), max_rel(dw, rdw, n_w),
                           max_rel(db, rdb, (size_t)out_c)};
            cr_expect(e[0] < 1e-5 && e[1] < 1e-5 && e[2] < 1e-5 && e[3] < 1e-5,
                      "%s kernels, %s on %dx%dx%d, batch %d%s: off a plain sum by %.3g (forward), %.3g (input), "
                      "%.3g (weight), %.3g (bias)",
                      path, line, in_c, in_h, in_w, batch, sparse ? ", sparse dy" : "", e[0], e[1], e[2], e[3]);
            free(ry), free(rdx), free(rdw), free(rdb);
            free(x), free(w), free(b), free(dy), free(y), free(scratch), free(dx), free(dw), free(db);
        }
    }
}

static void conv_stays_in_bounds(const char *path, const nn_kernels *table) {
    conv_stays_in_bounds_with(path, table, 0);
    conv_stays_in_bounds_with(path, table, 1);
}

static void kernels_stay_in_bounds(const char *path) {
    use_kernels(path);
    conv_stays_in_bounds(path, NULL);
}

Test(nn_kernels, avx512_stays_in_bounds) { kernels_stay_in_bounds("avx512"); }
Test(nn_kernels, avx2_stays_in_bounds) { kernels_stay_in_bounds("avx2"); }
Test(nn_kernels, baseline_stays_in_bounds) { kernels_stay_in_bounds("baseline"); }

// Every copy's linear kernels (src/nn/cpu/linear.h), called straight from the copy's table as
// linear.c calls them, on sizes around their tiles, vectors and batch blocks: input features
// below, at and past a vector (16, 8 or 4 floats) and a weight gradient tile's vectors, outputs
// and samples around the tiles (4 x 5, 3 x 4) and past a block of 64 samples. The forward and the
// weight gradient equal a plain sum in double, and nothing is written past either output. The
// baseline copy's linear runs on the BLAS in training (linear_on_kernels), but its kernels are
// the same math and are held to the same.
static void linear_kernels_match_a_plain_sum(const char *path, const nn_kernels *table) {
    static const int ins[] = {1, 3, 4, 8, 15, 16, 17, 31, 33, 48, 64, 65, 100, 200};
    static const int outs[] = {1, 2, 3, 4, 5, 6, 7, 11, 13};
    static const int batches[] = {1, 2, 3, 4, 5, 7, 64, 65, 130};
    hw_rng rng;
    hw_rng_seed(&rng, 4200, 0);
    for (int c = 0; c < 60; c++) {
        const int n_in = ins[c % 14], n_out = outs[hw_rng_below(&rng, 9)], batch = batches[hw_rng_below(&rng, 9)];
        const size_t nx = (size_t)batch * n_in, nw = (size_t)n_out * n_in, ny = (size_t)batch * n_out;
        float *x = floats(nx), *w = floats(nw), *b = floats((size_t)n_out), *dy = floats(ny);
        float *y = guarded(ny), *dw = guarded(nw);
        for (size_t i = 0; i < nx; i++) x[i] = hw_rng_normal(&rng);
        for (size_t i = 0; i < nw; i++) w[i] = hw_rng_normal(&rng);
        for (int i = 0; i < n_out; i++) b[i] = hw_rng_normal(&rng);
        for (size_t i = 0; i < ny; i++) dy[i] = hw_rng_normal(&rng);
        fill_nan(y, ny);
        fill_nan(dw, nw);
        table->linear_forward(y, x, w, b, n_in, n_out, batch);
        table->linear_backward_weight(dw, dy, x, n_in, n_out, batch);
        double *ry = calloc(ny, sizeof(double)), *rdw = calloc(nw, sizeof(double));
        for (int s = 0; s < batch; s++) {
            for (int o = 0; o < n_out; o++) {
                double sum = b[o];
                for (int k = 0; k < n_in; k++) sum += (double)x[(size_t)s * n_in + k] * w[(size_t)o * n_in + k];
                ry[(size_t)s * n_out + o] = sum;
                for (int k = 0; k < n_in; k++) {
                    rdw[(size_t)o * n_in + k] += (double)dy[(size_t)s * n_out + o] * x[(size_t)s * n_in + k];
                }
            }
        }
        double ey = max_rel(y, ry, ny), ew = max_rel(dw, rdw, nw);
        cr_expect_lt(ey, 1e-5, "%s linear, %d -> %d, batch %d: forward off a plain sum by %g", path, n_in, n_out, batch,
                     ey);
        cr_expect_lt(ew, 1e-5, "%s linear, %d -> %d, batch %d: weight gradient off a plain sum by %g", path, n_in,
                     n_out, batch, ew);
        cr_expect(guard_intact(y, ny) && guard_intact(dw, nw), "%s linear, %d -> %d, batch %d: wrote past an output",
                  path, n_in, n_out, batch);
        free(x), free(w), free(b), free(dy), free(y), free(dw), free(ry), free(rdw);
    }
}

static void linear_kernels_check(const char *path) {
    use_kernels(path);
    linear_kernels_match_a_plain_sum(path, nn_kernels_in_use());
}

Test(nn_kernels, avx512_linear_matches_a_plain_sum) { linear_kernels_check("avx512"); }
Test(nn_kernels, avx2_linear_matches_a_plain_sum) { linear_kernels_check("avx2"); }
Test(nn_kernels, baseline_linear_matches_a_plain_sum) { linear_kernels_check("baseline"); }

// Which linear layers take the kernels, as training calls them (linear.c): the MLP's first layer
// and others of 512 to 1000 inputs in whole vectors under the avx512 and avx2 copies; on the BLAS
// the layers where the kernels lost (fewer inputs: LeNet's fc1, a 128-wide hidden layer; inputs
// past whole vectors; 1024 inputs; the 10-output last layers), and every layer under the baseline
// copy.
Test(nn_kernels, linear_takes_the_kernels_where_they_ran_faster) {
    const hw_linear_dims kernels[] = {{784, 128}, {512, 8}, {992, 10}, {784, 1000}};
    const hw_linear_dims blas[] = {{320, 50}, {128, 128}, {63, 1000}, {520, 128}, {1024, 128}, {784, 5}, {128, 10}};
    const char *const paths[] = {"avx512", "avx2", "baseline"};
    for (int p = 0; p < 3; p++) {
        if (!hw_nn_kernels_runnable(paths[p])) continue;
        cr_assert_eq(hw_nn_kernels_select(paths[p]), HW_OK, "%s", hw_error());
        for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++) {
            cr_expect_eq(nn_linear_direct(&kernels[i]), p < 2, "%s: %d -> %d", paths[p], kernels[i].in, kernels[i].out);
        }
        for (size_t i = 0; i < sizeof blas / sizeof blas[0]; i++) {
            cr_expect_eq(nn_linear_direct(&blas[i]), 0, "%s: %d -> %d", paths[p], blas[i].in, blas[i].out);
        }
    }
    cr_assert_eq(hw_nn_kernels_select("auto"), HW_OK);
}

// The AVX-512 copy's tiles and 16-position vectors compiled with AVX2 (tests/kernels_avx512_tiles.c): its edge
// checked on CPUs without AVX-512 too, against a plain sum, the baseline copy and the AVX2 copy.
const nn_kernels *nn_test_kernels_avx512_tiles(void);

Test(nn_kernels, avx512_tiles_on_avx2_stay_in_bounds) {
    if (!hw_nn_kernels_runnable("avx2")) cr_skip_test("the AVX-512 copy's tiles on AVX2 not checked: no AVX2 and FMA");
    conv_stays_in_bounds(nn_test_kernels_avx512_tiles()->name, nn_test_kernels_avx512_tiles());
    linear_kernels_match_a_plain_sum(nn_test_kernels_avx512_tiles()->name, nn_test_kernels_avx512_tiles());
}

Test(nn_kernels, avx512_tiles_on_avx2_match_the_baseline) {
    if (!hw_nn_kernels_runnable("avx2")) cr_skip_test("the AVX-512 copy's tiles on AVX2 not checked: no AVX2 and FMA");
    const nn_kernels *tiles = nn_test_kernels_avx512_tiles(), *base = nn_kernels_baseline();
    hw_rng rng;
    hw_rng_seed(&rng, 4100, 0);
    for (int k = 0; k < 40; k++) {
        char line[256];
        hw_shape in;
        direct_conv_example(&rng, &in, line, sizeof line);
        hw_layer L;
        hw_shape params[HW_LAYER_MAX_PARAMS];
        cr_assert_eq(hw_layer_setup(&L, line, in, params), HW_OK, "%s", hw_error());
        const hw_conv2d_dims *d = &L.dims.conv2d;
        const int batch = check_batches[k % 10];
        const size_t n_in = (size_t)batch * (size_t)hw_shape_numel(in);
        const size_t n_out = (size_t)batch * (size_t)hw_shape_numel(L.out_shape);
        const size_t n_w = (size_t)hw_shape_numel(params[0]), n_b = (size_t)d->out_c;
        float *x = floats(n_in), *w = floats(n_w), *b = floats(n_b), *dy = floats(n_out), *out[3][4];
        for (size_t i = 0; i < n_in; i++) x[i] = hw_rng_normal(&rng);
        for (size_t i = 0; i < n_w; i++) w[i] = hw_rng_normal(&rng);
        for (size_t i = 0; i < n_b; i++) b[i] = hw_rng_normal(&rng);
        // every other case mostly zeros, so that the weight gradient sums over the nonzeros
        for (size_t i = 0; i < n_out; i++) {
            int nonzero = k % 2 ? hw_rng_below(&rng, 10) == 0 : hw_rng_below(&rng, 3) != 0;
            dy[i] = nonzero ? hw_rng_normal(&rng) : 0.0f;
        }
        const nn_kernels *copies[3] = {tiles, base, nn_kernels_avx2()};
        for (int c = 0; c < 3; c++) {
            float *scratch = floats(copies[c]->conv_scratch_floats(d));
            out[c][0] = floats(n_out), out[c][1] = floats(n_in), out[c][2] = floats(n_w), out[c][3] = floats(n_b);
            copies[c]->conv_forward(out[c][0], scratch, x, w, b, NULL, d, batch);
            copies[c]->conv_backward_weight(out[c][2], out[c][3], scratch, x, dy, d, batch);
            copies[c]->conv_backward_input(out[c][1], scratch, dy, w, d, batch);
            free(scratch);
        }
        const size_t sizes[4] = {n_out, n_in, n_w, n_b};
        static const char *const what[4] = {"forward", "input gradient", "weight gradient", "bias gradient"};
        for (int t = 0; t < 4; t++) {
            double e = rel_err(out[0][t], out[1][t], sizes[t]);
            cr_expect_lt(e, 1e-5, "%s, %s, batch %d: %s off the baseline's by %g", tiles->name, line, batch, what[t],
                         e);
            // Against the AVX2 copy (FMA, 8-float vectors, other tiles): forward sums each output
            // in the same order whatever the tiles and vectors, so its bits are the same. The input
            // gradient adds a tile's taps into dx in the tile's order; the weight and bias gradients
            // over positions keep a partial sum per lane, 16 of them here against AVX2's 8.
            if (t != 0) {
                e = rel_err(out[0][t], out[2][t], sizes[t]);
                cr_expect_lt(e, 1e-5, "%s, %s, batch %d: %s off the avx2 copy's by %g", tiles->name, line, batch,
                             what[t], e);
            } else {
                cr_expect(memcmp(out[0][t], out[2][t], sizeof(float) * sizes[t]) == 0,
                          "%s, %s, batch %d: %s not bit for bit the avx2 copy's", tiles->name, line, batch, what[t]);
            }
        }
        for (int c = 0; c < 3; c++) {
            for (int t = 0; t < 4; t++) free(out[c][t]);
        }
        free(x), free(w), free(b), free(dy);
    }
}

Test(nn_kernels, avx512_matches_finite_differences) { kernels_match_finite_differences("avx512"); }
Test(nn_kernels, avx2_matches_finite_differences) { kernels_match_finite_differences("avx2"); }
Test(nn_kernels, baseline_matches_finite_differences) { kernels_match_finite_differences("baseline"); }
Test(nn_kernels, avx512_matches_the_baseline) { kernels_match_baseline("avx512"); }
Test(nn_kernels, avx2_matches_the_baseline) { kernels_match_baseline("avx2"); }
Test(nn_kernels, avx512_lenet_matches_pytorch) { kernels_match_pytorch("avx512"); }
Test(nn_kernels, avx2_lenet_matches_pytorch) { kernels_match_pytorch("avx2"); }
Test(nn_kernels, baseline_lenet_matches_pytorch) { kernels_match_pytorch("baseline"); }

// A name that is not a copy, or one this CPU cannot run, is refused with what the CPU runs.
Test(nn_kernels, an_unknown_or_unrunnable_path_is_refused) {
    cr_expect_eq(hw_nn_kernels_select("avx3"), HW_ERR);
    cr_expect(strstr(hw_error(), "HOGWILD_CPU_PATH=avx3") && strstr(hw_error(), "baseline"), "%s", hw_error());
    // A long value still gives the message's point: what was expected and what this CPU runs.
    char long_name[5000];
    memset(long_name, 'a', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    cr_expect_eq(hw_nn_kernels_select(long_name), HW_ERR);
    cr_expect(strstr(hw_error(), "expected avx512, avx2, baseline or auto (this CPU runs ") &&
                  strstr(hw_error(), "aaa...: no such CPU path"),
              "%s", hw_error());
    // The automatic choice: the copy needing the most that this CPU runs, which it then says.
    cr_expect_eq(hw_nn_kernels_select("auto"), HW_OK);
    const char *automatic = hw_nn_kernels_runnable("avx512") ? "avx512 ("
                            : hw_nn_kernels_runnable("avx2") ? "avx2 ("
                                                             : "baseline (";
    cr_expect(strncmp(hw_nn_kernels_info(), automatic, strlen(automatic)) == 0, "%s", hw_nn_kernels_info());
    cr_expect(strstr(hw_nn_kernels_info(), "the CPU's best"), "%s", hw_nn_kernels_info());
    cr_expect(hw_nn_kernels_runnable("baseline"));
    if (!hw_nn_kernels_runnable("avx512")) {
        cr_expect_eq(hw_nn_kernels_select("avx512"), HW_ERR);
        cr_expect(strstr(hw_error(), "cannot run"), "%s", hw_error());
    }
}
