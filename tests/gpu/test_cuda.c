// Tests of the cuda module: devices and their errors, copies, streams and events, the GPU model
// runner against the CPU layers of the same parsed model, and CUDA IPC across fork. Each GPU layer
// function against its CPU layer is tests/gpu/test_cuda_layers.c (suite cuda_layers). The runner is
// judged by the product's CPU code: the executor's CPU backend (given the GPU's dropout masks, a
// hash of seed, step and index), hw_sgd_step and hw_batch_fill.
//
// A test that needs a GPU skips, saying why, where there is none ("no CUDA device found: ...").
// The device-error test runs on every CUDA build. A build without CUDA does not build this suite.
#include "cuda/runner.h"
#include "hw/data.h"
#include "hw/err.h"
#include "hw/nn.h"
#include "hw/optim.h"
#include "hw/rng.h"
#include "float_check.h"
#include "gpu_tests.h"
#include "cuda/runner_state.h"  // the runner's state: its last log-probabilities

#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <stdio.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static const hw_device CUDA0 = {HW_DEVICE_CUDA, 0};

// Criterion names a hook after its line: keep this off the line of test_gpu_train.c's hook.
ReportHook(POST_ALL)(struct criterion_global_stats *stats) { gpu_suite_report(stats, "cuda"); }

// ---- devices and errors (these run with or without a GPU) ----

Test(cuda, device_index_errors) {
    hw_device missing = {HW_DEVICE_CUDA, 99};
    cr_assert_eq(hw_cuda_select(missing), HW_ERR);
    char message[1024];
    snprintf(message, sizeof message, "%s", hw_error());
    int count = 0;
    if (hw_cuda_device_count(&count) != HW_OK) {
        cr_expect(strstr(message, "no CUDA device found: ") == message, "message: %s", message);
        cr_expect(strstr(hw_error(), "no CUDA device found") != NULL, "count message: %s", hw_error());
        cr_expect_eq(count, 0);
    } else {
        char want[128];
        snprintf(want, sizeof want, "cuda:99 does not exist: this machine has %d CUDA device(s)", count);
        cr_expect_str_eq(message, want);
    }
    cr_assert_eq(hw_cuda_select((hw_device){HW_DEVICE_CPU, 0}), HW_ERR);
    cr_expect(strstr(hw_error(), "cpu is not a CUDA device") != NULL, "message: %s", hw_error());
}

Test(cuda, free_memory_check) {
    need_gpu();
    size_t free_bytes = 0, total_bytes = 0;
    OK(hw_cuda_mem_info(&free_bytes, &total_bytes));
    cr_expect_gt(total_bytes, 0);
    OK(hw_cuda_check_free(1));
    cr_assert_eq(hw_cuda_check_free(total_bytes * 2), HW_ERR);
    cr_expect(strstr(hw_error(), "cuda:0 has ") && strstr(hw_error(), "MiB free, ") && strstr(hw_error(), "MiB needed"),
              "message: %s", hw_error());
    char name[256];
    OK(hw_cuda_describe(CUDA0, name, sizeof name));
    cr_expect(strstr(name, "cuda:0") != NULL, "%s", name);
}

// ---- copies and streams ----

Test(cuda, copies_pinned_streams_events) {
    need_gpu();
    hw_rng rng;
    hw_rng_seed(&rng, 1, 0);
    enum { N = 1001 };
    float *src = random_floats(&rng, N, 1.0f), *pinned = NULL, *back = NULL;
    OK(hw_cuda_host_alloc((void **)&pinned, N * sizeof(float)));
    OK(hw_cuda_host_alloc((void **)&back, N * sizeof(float)));
    memcpy(pinned, src, sizeof(float) * N);
    hw_cuda_stream copy, compute;
    hw_cuda_event start, copied, done;
    OK(hw_cuda_stream_create(&copy));
    OK(hw_cuda_stream_create(&compute));
    OK(hw_cuda_event_create(&start, 1));
    OK(hw_cuda_event_create(&copied, 1));
    OK(hw_cuda_event_create(&done, 0));
    float *a = to_device(NULL, N), *b = to_device(NULL, N);
    OK(hw_cuda_event_record(start, copy));
    OK(hw_cuda_memcpy_h2d(a, pinned, N * sizeof(float), copy));
    OK(hw_cuda_event_record(copied, copy));
    OK(hw_cuda_stream_wait_event(compute, copied));  // compute reads `a` only after the copy
    OK(hw_cuda_relu_forward(compute, b, a, N));
    OK(hw_cuda_memcpy_d2h(back, b, N * sizeof(float), compute));
    OK(hw_cuda_event_record(done, compute));
    OK(hw_cuda_event_sync(done));
    for (int i = 0; i < N; i++) cr_assert_eq(back[i], src[i] > 0 ? src[i] : 0.0f, "element %d", i);
    float ms = -1.0f;
    OK(hw_cuda_event_elapsed_ms(start, copied, &ms));
    cr_expect(ms >= 0.0f);
    // device to device
    OK(hw_cuda_memcpy_d2d(b, a, N * sizeof(float), compute));
    OK(hw_cuda_stream_sync(compute));
    float *check = from_device(b, N);
    cr_expect_arr_eq(check, src, N * sizeof(float));
    hw_cuda_event_destroy(start);
    hw_cuda_event_destroy(copied);
    hw_cuda_event_destroy(done);
    hw_cuda_stream_destroy(copy);
    hw_cuda_stream_destroy(compute);
    hw_cuda_host_free(pinned);
    hw_cuda_host_free(back);
    hw_cuda_free(a);
    hw_cuda_free(b);
    free(src);
    free(check);
}

// ---- the model runner against the CPU layers of the same model ----

// Models come from the real parser, as the trainers' do.
static hw_model *parsed_model(const char *text, const char *name) {
    hw_model *m = calloc(1, sizeof *m);
    cr_assert(m);
    cr_assert_eq(hw_model_parse(m, text, name), HW_OK, "%s", hw_error());
    return m;
}

static void free_model(hw_model *m) {
    hw_model_free(m);
    free(m);
}

// A small LeNet on an odd-sized 2 x 11 x 13 input: padding, stride 2, both dropouts.
static hw_model *conv_net(void) {
    return parsed_model("input 2 11 13\n"
                        "conv2d 4 3 padding=1\n"  // 4 x 11 x 13
                        "relu\n"
                        "maxpool2d 2\n"  // 4 x 5 x 6
                        "dropout2d 0.3\n"
                        "conv2d 6 3 stride=2\n"  // 6 x 2 x 2
                        "relu\n"
                        "flatten\n"
                        "linear 17\n"
                        "relu\n"
                        "dropout 0.4\n"
                        "linear 7\n"
                        "log_softmax\n",
                        "test-conv-net");
}

// An MLP that starts with flatten (the input gradient alias) on a 1 x 5 x 7 input.
static hw_model *mlp_net(void) {
    return parsed_model("input 1 5 7\nflatten\nlinear 23\nrelu\nlinear 10\nlog_softmax\n", "test-mlp");
}

// The CPU backend with the runner's dropout masks. The GPU draws its masks from a hash of
// (seed, step, index), seeded per layer from its index (hw_layer_io.index) as the runner seeds it;
// the CPU layers draw theirs from the workspace RNG. So in training a dropout layer here is given
// the GPU's mask as its saved state (one byte per kept element or channel), and the CPU layer's
// own masking applies it: its backward (din = mask * dout / (1-p)) run on the input is the
// forward. Outside training: the CPU's own layer.
typedef struct {
    uint64_t seed, step;
} gpu_masks;

static int is_training_dropout(const hw_layer *L, const hw_layer_io *io) {
    return io->training && (L->kind == HW_DROPOUT || L->kind == HW_DROPOUT2D);
}

static void put_gpu_mask(const hw_layer *L, const hw_layer_io *io) {
    const gpu_masks *g = io->backend;
    int64_t plane = L->kind == HW_DROPOUT2D ? L->dims.dropout.plane : 1;
    int64_t units = (int64_t)io->batch * hw_shape_numel(L->out_shape) / plane;
    uint64_t seed = hw_dropout_layer_seed(g->seed, io->index);
    for (int64_t u = 0; u < units; u++) {
        io->saved[u] = hw_dropout_uniform(seed, g->step, (uint64_t)u) >= L->dims.dropout.p;
    }
}

static int forward_with_gpu_masks(const hw_layer *L, const hw_layer_io *io) {
    if (!is_training_dropout(L, io)) return hw_cpu_backend.forward(L, io);
    put_gpu_mask(L, io);
    hw_layer_io masking = *io;
    masking.dout = io->in;
    masking.din = io->out;
    return hw_cpu_backend.backward(L, &masking);
}

static int backward_with_gpu_masks(const hw_layer *L, const hw_layer_io *io) {
    if (!is_training_dropout(L, io) || !io->din) return hw_cpu_backend.backward(L, io);
    put_gpu_mask(L, io);
    return hw_cpu_backend.backward(L, io);
}

// The whole model on the CPU, through the executor (src/nn/exec.c) and the CPU backend, except
// dropout, which uses the runner's masks for (seed, step): loss, log-probabilities and gradients
// (frozen parameters get zero).
static double cpu_model(const hw_model *m, const float *weights, const float *x, const uint8_t *labels, int B,
                        int training, uint64_t seed, uint64_t step, float *logp_out, float *grads) {
    const hw_backend cpu = {.forward = forward_with_gpu_masks, .backward = backward_with_gpu_masks};
    gpu_masks masks = {seed, step};
    float *acts[HW_MAX_LAYERS + 1], *gacts[HW_MAX_LAYERS + 1];
    uint8_t *saved[HW_MAX_LAYERS];
    size_t scratch_floats = 1;
    for (int i = 0; i < m->n_layers; i++) {
        const hw_layer *L = &m->layers[i];
        size_t s = L->type->scratch_floats ? L->type->scratch_floats(L, B) : 0;
        if (s > scratch_floats) scratch_floats = s;
        saved[i] = calloc((L->type->saved_bytes ? L->type->saved_bytes(L, B) : 0) + 1, 1);
    }
    float *scratch = calloc(scratch_floats, sizeof(float));
    hw_rng rng;
    hw_rng_seed(&rng, 1, 2);
    size_t in_n = (size_t)B * hw_shape_numel(m->input);
    acts[0] = malloc(in_n * 4);
    gacts[0] = malloc(in_n * 4);
    memcpy(acts[0], x, in_n * 4);
    for (int i = 0; i < m->n_layers; i++) {
        size_t n = (size_t)B * hw_shape_numel(m->layers[i].out_shape);
        acts[i + 1] = malloc(n * 4 + 4);
        gacts[i + 1] = malloc(n * 4 + 4);
    }
    hw_exec_buffers bufs = {.weights = (float *)weights,
                            .grads = grads,
                            .acts = acts,
                            .grad_acts = gacts,
                            .saved = saved,
                            .scratch = scratch,
                            .rng = &rng,
                            .backend = &masks};
    OK(hw_exec_forward(&cpu, m, &bufs, B, training));
    int C = (int)hw_shape_numel(m->layers[m->n_layers - 1].out_shape);
    memcpy(logp_out, acts[m->n_layers], (size_t)B * C * 4);
    double loss = labels ? hw_nll_loss(acts[m->n_layers], labels, B, C) : 0.0;
    if (grads) {
        memset(grads, 0, m->n_weights * 4);
        hw_nll_loss_backward(gacts[m->n_layers], labels, B, C);
        OK(hw_exec_backward(&cpu, m, &bufs, B, training, hw_exec_first_trainable(m)));
    }
    for (int i = 0; i <= m->n_layers; i++) {
        free(acts[i]);
        free(gacts[i]);
        if (i < m->n_layers) free(saved[i]);
    }
    free(scratch);
    return loss;
}

static float *random_weights(const hw_model *m, uint64_t seed) {
    hw_rng rng;
    hw_rng_seed(&rng, seed, 1);
    return random_floats(&rng, m->n_weights, 0.4f);
}

static hw_cuda_runner_config runner_config(int max_batch, uint64_t seed) {
    hw_cuda_runner_config c = {CUDA0, max_batch, NULL, 0.1307f, 0.3081f, seed, 0, 0};
    return c;
}

// The last forward's log-probabilities [batch, n_classes] into host memory, and its batch size:
// read from the runner's state, since no trainer needs them on the host.
static void runner_output(hw_cuda_runner *r, float *host, int *batch) {
    *batch = r->batch;
    cr_assert_gt(r->batch, 0, "no forward has run yet");
    OK(hw_cuda_select(r->device));
    OK(hw_cuda_memcpy_d2h(host, r->acts[r->n_layers], (size_t)r->batch * (size_t)r->n_classes * sizeof(float),
                          r->compute));
    OK(hw_cuda_stream_sync(r->compute));
}

// The runner's gradient buffer (n floats) into host memory, once its stream is done with it.
static void runner_grads(hw_cuda_runner *r, float *host, size_t n) {
    OK(hw_cuda_select(r->device));
    OK(hw_cuda_memcpy_d2h(host, hw_cuda_runner_grads(r), n * sizeof(float), hw_cuda_runner_stream(r)));
    OK(hw_cuda_stream_sync(hw_cuda_runner_stream(r)));
}

// One training step through the runner against the CPU layers: loss, outputs, gradients, then
// the SGD step's weights against the CPU trainers' step (hw_sgd_step with `opt`: lr 0.05, weight
// decay 1e-3, no nesterov).
static void check_training_step(hw_model *m, hw_cuda_runner *r, float *weights, int B, uint64_t seed, uint64_t step,
                                hw_rng *rng, hw_sgd *opt) {
    size_t in_n = (size_t)B * hw_shape_numel(m->input);
    float *x = random_floats(rng, in_n, 1.5f);
    uint8_t *labels = malloc((size_t)B);
    cr_assert(labels);
    for (int b = 0; b < B; b++) labels[b] = (uint8_t)hw_rng_below(rng, (uint32_t)m->n_classes);
    float *logp = malloc((size_t)B * m->n_classes * 4), *grads = malloc(m->n_weights * 4);
    double loss = cpu_model(m, weights, x, labels, B, 1, seed, step, logp, grads);
    OK(hw_cuda_runner_upload_f32(r, x, labels, B));
    float got_loss = -1.0f;
    OK(hw_cuda_runner_forward(r, 1, &got_loss));
    OK(hw_cuda_runner_backward(r));
    cr_expect(fabs(got_loss - loss) <= 1e-4 * fmax(1.0, fabs(loss)), "B=%d loss %g, want %g", B, got_loss, loss);
    float *got_logp = malloc((size_t)B * m->n_classes * 4), *got_grads = malloc(m->n_weights * 4);
    int got_batch = 0;
    runner_output(r, got_logp, &got_batch);
    cr_expect_eq(got_batch, B);
    EXPECT_CLOSE(got_logp, logp, (size_t)B * m->n_classes, "runner log-probabilities");
    runner_grads(r, got_grads, m->n_weights);
    for (int p = 0; p < m->n_params; p++) {
        const hw_param *par = &m->params[p];
        size_t n = (size_t)hw_shape_numel(par->shape);
        char what[128];
        snprintf(what, sizeof what, "gradient of %s (B=%d)", par->name, B);
        EXPECT_CLOSE(got_grads + par->offset, grads + par->offset, n, "%s", what);
        if (par->frozen) {
            for (size_t j = 0; j < n; j++) {
                cr_assert_eq(got_grads[par->offset + j], 0.0f, "frozen %s has a gradient", par->name);
            }
        }
    }
    int correct = -1, want_correct = 0;
    OK(hw_cuda_runner_count_correct(r, &correct));
    for (int b = 0; b < B; b++) {
        int best = 0;
        for (int c = 1; c < m->n_classes; c++) {
            best = logp[b * m->n_classes + c] > logp[b * m->n_classes + best] ? c : best;
        }
        want_correct += best == labels[b];
    }
    cr_expect_eq(correct, want_correct);
    // the step, on the device weights, against the CPU trainers' (frozen parameters untouched)
    OK(hw_cuda_runner_sgd_step(r, opt->lr, opt->momentum, opt->weight_decay, opt->nesterov));
    hw_sgd_step(opt, m, weights, grads);
    float *got_w = malloc(m->n_weights * 4);
    OK(hw_cuda_runner_weights_download(r, got_w));
    EXPECT_CLOSE(got_w, weights, m->n_weights, "weights after the SGD step");
    memcpy(weights, got_w, m->n_weights * 4);  // continue from the device's rounding
    free(x), free(labels), free(logp), free(grads), free(got_logp), free(got_grads), free(got_w);
}

Test(cuda, runner_conv_net_matches_reference) {
    need_gpu();
    hw_model *m = conv_net();
    float *weights = random_weights(m, 10);
    m->weights = weights;
    hw_cuda_runner *r = NULL;
    hw_cuda_runner_config c = runner_config(9, 77);
    OK(hw_cuda_runner_create(&r, m, &c));
    hw_rng rng;
    hw_rng_seed(&rng, 11, 0);
    hw_sgd opt;
    OK(hw_sgd_init(&opt, m->n_weights, 0.05f, 0.9f, 1e-3f, 0));
    const int batches[] = {5, 1, 9, 3};
    for (int k = 0; k < 4; k++) {
        // the runner counts training forwards: the k-th uses dropout step k + 1
        check_training_step(m, r, weights, batches[k], 77, (uint64_t)k + 1, &rng, &opt);
    }
    hw_sgd_free(&opt);
    // evaluation: no dropout, no step
    float x[4 * 2 * 11 * 13];
    for (size_t i = 0; i < sizeof x / sizeof x[0]; i++) x[i] = 2.0f * hw_rng_uniform(&rng) - 1.0f;
    float logp[4 * 7], got[4 * 7];
    cpu_model(m, weights, x, NULL, 4, 0, 77, 0, logp, NULL);
    float loss = -1.0f;
    OK(hw_cuda_runner_upload_f32(r, x, NULL, 4));
    OK(hw_cuda_runner_forward(r, 0, &loss));
    cr_expect_eq(loss, 0.0f, "no labels, no loss");
    int batch = 0;
    runner_output(r, got, &batch);
    EXPECT_CLOSE(got, logp, 4 * 7, "evaluation forward");
    cr_expect_eq(hw_cuda_runner_backward(r), HW_ERR, "backward after an evaluation forward");
    hw_cuda_runner_free(r);
    free(weights), free_model(m);
}

// The runner's one conv scratch, sized for max_batch 673, serves a training step on 672 samples,
// whose 5x5 output planes split the weight gradient's GEMM where 673 do not.
Test(cuda, runner_conv_scratch_serves_a_smaller_batch) {
    need_gpu();
    hw_model *m = parsed_model("input 1 7 7\nconv2d 4 3\nflatten\nlinear 3\nlog_softmax\n", "test-conv-5x5");
    float *weights = random_weights(m, 15);
    m->weights = weights;
    hw_cuda_runner *r = NULL;
    hw_cuda_runner_config c = runner_config(673, 5);
    OK(hw_cuda_runner_create(&r, m, &c));
    hw_rng rng;
    hw_rng_seed(&rng, 16, 0);
    hw_sgd opt;
    OK(hw_sgd_init(&opt, m->n_weights, 0.05f, 0.0f, 0.0f, 0));
    check_training_step(m, r, weights, 672, 5, 1, &rng, &opt);
    hw_sgd_free(&opt);
    hw_cuda_runner_free(r);
    free(weights), free_model(m);
}

Test(cuda, runner_frozen_layers_and_u8_input) {
    need_gpu();
    hw_model *m = conv_net();
    m->params[0].frozen = m->params[1].frozen = 1;  // conv1: backward stops at conv2
    float *weights = random_weights(m, 12);
    m->weights = weights;
    hw_cuda_runner *r = NULL;
    hw_cuda_runner_config c = runner_config(6, 5);
    OK(hw_cuda_runner_create(&r, m, &c));
    hw_rng rng;
    hw_rng_seed(&rng, 13, 0);
    hw_sgd opt;
    OK(hw_sgd_init(&opt, m->n_weights, 0.05f, 0.0f, 1e-3f, 0));
    check_training_step(m, r, weights, 6, 5, 1, &rng, &opt);
    hw_sgd_free(&opt);
    hw_cuda_runner_free(r);
    free_model(m);

    // uint8 input, normalised on the device, through the MLP (its input gradient is never made)
    m = mlp_net();
    free(weights);
    weights = random_weights(m, 14);
    m->weights = weights;
    c = runner_config(8, 5);
    OK(hw_cuda_runner_create(&r, m, &c));
    enum { B = 8, IN = 35 };
    uint8_t bytes[B * IN], labels[B];
    float x[B * IN], logp[B * 10], got[B * 10], grads[23 * 35 + 23 + 10 * 23 + 10],
        got_grads[23 * 35 + 23 + 10 * 23 + 10];
    cr_assert_eq(sizeof grads / 4, m->n_weights);
    for (int i = 0; i < B * IN; i++) bytes[i] = (uint8_t)hw_rng_below(&rng, 256);
    for (int b = 0; b < B; b++) labels[b] = (uint8_t)hw_rng_below(&rng, 10);
    // the CPU input: the same bytes through the CPU trainers' batch fill, normalised as runner_config's
    hw_dataset ds = {
        .n = B, .channels = 1, .height = 5, .width = 7, .n_classes = 10, .images = bytes, .labels = labels};
    int64_t indices[B];
    uint8_t batch_labels[B];
    for (int b = 0; b < B; b++) indices[b] = b;
    hw_batch_fill(&ds, indices, B, (hw_normalize){c.mean, c.std}, x, batch_labels);
    double loss = cpu_model(m, weights, x, labels, B, 1, 5, 1, logp, grads);
    float got_loss = 0.0f;
    OK(hw_cuda_runner_upload_u8(r, bytes, labels, B));
    OK(hw_cuda_runner_forward(r, 1, &got_loss));
    OK(hw_cuda_runner_backward(r));
    int batch = 0;
    runner_output(r, got, &batch);
    runner_grads(r, got_grads, m->n_weights);
    cr_expect(fabs(got_loss - loss) <= 1e-4 * fmax(1.0, fabs(loss)), "loss %g, want %g", got_loss, loss);
    EXPECT_CLOSE(got, logp, B * 10, "mlp log-probabilities from uint8 input");
    EXPECT_CLOSE(got_grads, grads, m->n_weights, "mlp gradients");
    hw_cuda_runner_free(r);
    free(weights), free_model(m);
}

Test(cuda, runner_queue_and_input_errors) {
    need_gpu();
    hw_model *m = mlp_net();
    float *weights = random_weights(m, 15);
    m->weights = weights;
    hw_cuda_runner *r = NULL;
    hw_cuda_runner_config c = runner_config(4, 1);
    OK(hw_cuda_runner_create(&r, m, &c));
    uint8_t bytes[5 * 35] = {0}, labels[5] = {1, 2, 3, 4, 5}, bad[1] = {10};
    cr_expect_eq(hw_cuda_runner_forward(r, 1, NULL), HW_ERR, "forward with nothing queued");
    cr_expect(strstr(hw_error(), "upload") != NULL, "message: %s", hw_error());
    cr_expect_eq(hw_cuda_runner_upload_u8(r, bytes, labels, 5), HW_ERR);
    cr_expect(strstr(hw_error(), "batch 5") != NULL, "message: %s", hw_error());
    cr_expect_eq(hw_cuda_runner_upload_u8(r, bytes, bad, 1), HW_ERR);
    cr_expect(strstr(hw_error(), "label 10") != NULL, "message: %s", hw_error());
    // two batches queue (double buffering); a third waits for a forward
    OK(hw_cuda_runner_upload_u8(r, bytes, labels, 4));
    OK(hw_cuda_runner_upload_u8(r, bytes, labels, 2));
    cr_expect_eq(hw_cuda_runner_upload_u8(r, bytes, labels, 1), HW_ERR);
    OK(hw_cuda_runner_forward(r, 1, NULL));
    OK(hw_cuda_runner_backward(r));
    OK(hw_cuda_runner_sgd_step(r, 0.1f, 0.0f, 0.0f, 0));
    OK(hw_cuda_runner_upload_u8(r, bytes, labels, 3));
    int batch = 0;
    float out[4 * 10];
    OK(hw_cuda_runner_forward(r, 1, NULL));
    runner_output(r, out, &batch);
    cr_expect_eq(batch, 2, "forward takes the oldest queued batch");
    OK(hw_cuda_runner_forward(r, 0, NULL));
    runner_output(r, out, &batch);
    cr_expect_eq(batch, 3);
    cr_expect_eq(hw_cuda_runner_sgd_step(r, -1.0f, 0.0f, 0.0f, 0), HW_ERR);
    cr_expect_eq(hw_cuda_runner_sgd_step(r, 0.1f, 0.0f, 0.0f, 1), HW_ERR);
    cr_expect(strstr(hw_error(), "nesterov") != NULL, "message: %s", hw_error());
    hw_cuda_runner_free(r);

    // a model too large for the device
    size_t free_bytes = 0, total_bytes = 0;
    OK(hw_cuda_mem_info(&free_bytes, &total_bytes));
    c.max_batch = (int)(total_bytes / 100 < INT32_MAX ? total_bytes / 100 : INT32_MAX);
    cr_expect_eq(hw_cuda_runner_create(&r, m, &c), HW_ERR);
    cr_expect(strstr(hw_error(), "MiB free") != NULL, "message: %s", hw_error());
    c = runner_config(4, 1);
    c.device.index = 99;
    cr_expect_eq(hw_cuda_runner_create(&r, m, &c), HW_ERR);
    cr_expect(strstr(hw_error(), "cuda:99 does not exist") != NULL, "message: %s", hw_error());
    free(weights), free_model(m);
}

// ---- the runner's checks of its configuration, before it touches a device (GPU or not) ----

// The model comes from the parser, which checked it; hw_cuda_runner_create checks its own
// configuration before it selects the device, so a bad one is named as such on every CUDA build,
// with or without a GPU; a good one gets as far as the device.
Test(cuda, runner_checks_its_configuration_before_the_device) {
    hw_cuda_runner_config c = runner_config(4, 1);
    hw_model *m = mlp_net();
    hw_cuda_runner *r = (hw_cuda_runner *)&c;  // create must set it to NULL on failure
    c.max_batch = 0;
    cr_expect_eq(hw_cuda_runner_create(&r, m, &c), HW_ERR);
    cr_expect_null(r);
    cr_expect(strstr(hw_error(), "max_batch 0 must be at least 1") != NULL, "message: %s", hw_error());
    c.max_batch = 4;
    int count = 0;
    if (hw_cuda_device_count(&count) != HW_OK) {
        cr_expect_eq(hw_cuda_runner_create(&r, m, &c), HW_ERR);
        cr_expect(strstr(hw_error(), "no CUDA device found") == hw_error(), "the good model reaches the device: %s",
                  hw_error());
    } else {
        OK(hw_cuda_runner_create(&r, m, &c));
        hw_cuda_runner_free(r);
    }
    free_model(m);
}

// The training loss summed on the GPU (what a GPU Hogwild worker reports) equals the sum of the
// losses read after each forward, times their batches; evaluation forwards do not count.
Test(cuda, runner_sums_the_training_loss_on_the_gpu) {
    need_gpu();
    hw_model *m = mlp_net();
    float *weights = random_weights(m, 16);
    m->weights = weights;
    hw_cuda_runner *r = NULL;
    hw_cuda_runner_config c = runner_config(4, 1);
    OK(hw_cuda_runner_create(&r, m, &c));
    double sum = -1.0;
    OK(hw_cuda_runner_train_loss_sum(r, &sum));
    cr_expect_eq(sum, 0.0, "a new runner has summed nothing");
    hw_rng rng;
    hw_rng_seed(&rng, 17, 0);
    uint8_t bytes[4 * 35], labels[4];
    double expected = 0.0;
    const int batches[5] = {4, 3, 4, 1, 2};
    for (int i = 0; i < 5; i++) {
        for (int j = 0; j < 4 * 35; j++) bytes[j] = (uint8_t)hw_rng_below(&rng, 256);
        for (int j = 0; j < 4; j++) labels[j] = (uint8_t)hw_rng_below(&rng, 10);
        OK(hw_cuda_runner_upload_u8(r, bytes, labels, batches[i]));
        float loss = 0.0f;
        int training = i != 3;  // batch 3 is an evaluation forward
        OK(hw_cuda_runner_forward(r, training, &loss));
        if (!training) continue;
        expected += (double)loss * batches[i];
        OK(hw_cuda_runner_backward(r));
        OK(hw_cuda_runner_sgd_step(r, 0.1f, 0.5f, 0.0f, 0));
    }
    OK(hw_cuda_runner_train_loss_sum(r, &sum));
    cr_expect(expected > 0.0, "the losses are positive");
    cr_expect(fabs(sum - expected) <= 1e-6 * expected, "GPU sum %.9g, sum of the forwards' losses %.9g", sum, expected);
    hw_cuda_runner_free(r);
    free(weights), free_model(m);
}

// hw_cuda_runner_train_step with config.graph against the same steps launched one by one, from the
// same weights and seed: batches of two sizes (a new capture for each size and input slot), the
// momentum's first step and a change of learning rate (new captures too), and both dropouts, whose
// masks change every step (the step set on the graph's dropout nodes before each replay: masks
// frozen at the capture's step would train other weights). A graph replays the same kernels on
// the same buffers, so the weights and the summed loss must be the same. The simulated device captures no graphs: there the runner must fall back, say why, and
// still train the same.
Test(cuda, runner_train_step_as_a_graph_matches_launches) {
    need_gpu();
    hw_model *m = conv_net();
    float *weights = random_weights(m, 21);
    m->weights = weights;
    hw_cuda_runner *plain = NULL, *graphed = NULL;
    hw_cuda_runner_config c = runner_config(9, 5);
    OK(hw_cuda_runner_create(&plain, m, &c));
    c.graph = 1;
    OK(hw_cuda_runner_create(&graphed, m, &c));
    hw_rng rng;
    hw_rng_seed(&rng, 23, 0);
    const int batches[8] = {9, 9, 9, 4, 9, 4, 9, 9};
    size_t sample = (size_t)hw_shape_numel(m->input);
    for (int i = 0; i < 8; i++) {
        float *x = random_floats(&rng, (size_t)batches[i] * sample, 1.5f);
        uint8_t labels[9];
        for (int b = 0; b < batches[i]; b++) labels[b] = (uint8_t)hw_rng_below(&rng, (uint32_t)m->n_classes);
        float lr = i < 5 ? 0.05f : 0.02f;
        OK(hw_cuda_runner_upload_f32(plain, x, labels, batches[i]));
        OK(hw_cuda_runner_upload_f32(graphed, x, labels, batches[i]));
        OK(hw_cuda_runner_train_step(plain, lr, 0.5f, 1e-3f, 0));
        OK(hw_cuda_runner_train_step(graphed, lr, 0.5f, 1e-3f, 0));
        free(x);
    }
    cr_expect_null(hw_cuda_runner_graph_off(plain), "a runner without config.graph has nothing to say");
    const char *off = hw_cuda_runner_graph_off(graphed);
    char name[256];
    OK(hw_cuda_describe(CUDA0, name, sizeof name));
    if (strstr(name, "simulated")) {
        cr_expect(off && strstr(off, "simulated device captures no CUDA graphs"), "graph_off: %s",
                  off ? off : "(null)");
    } else {
        cr_expect_null(off, "on %s the step could not be a graph: %s", name, off ? off : "");
    }
    float *got_plain = malloc(m->n_weights * 4), *got_graph = malloc(m->n_weights * 4);
    OK(hw_cuda_runner_weights_download(plain, got_plain));
    OK(hw_cuda_runner_weights_download(graphed, got_graph));
    size_t differ = 0;
    for (size_t i = 0; i < m->n_weights; i++) differ += got_plain[i] != got_graph[i];
    cr_expect_eq(differ, 0, "%zu of %zu weights differ between the graph and the launches", differ, m->n_weights);
    size_t moved = 0;
    for (size_t i = 0; i < m->n_weights; i++) moved += got_plain[i] != weights[i];
    cr_expect_gt(moved, m->n_weights / 2, "the steps trained: %zu of %zu weights moved", moved, m->n_weights);
    double sum_plain = 0, sum_graph = 0;
    OK(hw_cuda_runner_train_loss_sum(plain, &sum_plain));
    OK(hw_cuda_runner_train_loss_sum(graphed, &sum_graph));
    cr_expect_eq(sum_plain, sum_graph, "summed loss: launches %.9g, graph %.9g", sum_plain, sum_graph);
    hw_cuda_runner_free(plain);
    hw_cuda_runner_free(graphed);
    free(got_plain), free(got_graph), free(weights), free_model(m);
}

// ---- CUDA IPC across fork ----

enum { IPC_WAIT = 0, IPC_READY = 1, IPC_SKIP = 2, IPC_N = 4096 };

typedef struct {
    _Atomic int state;
    hw_cuda_ipc_handle handle;
    char child_error[512];
} ipc_channel;

// The child: opens the parent's allocation and applies an SGD step to it (a Hogwild update).
static int ipc_child(ipc_channel *ch) {
    for (int waited = 0; atomic_load(&ch->state) == IPC_WAIT; waited++) {
        if (waited > 60 * 1000) return 3;  // the parent never published the handle
        usleep(1000);
    }
    if (atomic_load(&ch->state) == IPC_SKIP) return 0;
    // CUDA is initialised here, after the fork, for the first time in this process.
    float *shared = NULL, *grad = NULL, ones[IPC_N];
    for (int i = 0; i < IPC_N; i++) ones[i] = 1.0f;
    if (hw_cuda_select(CUDA0) != HW_OK || hw_cuda_ipc_open(&ch->handle, (void **)&shared) != HW_OK ||
        hw_cuda_malloc((void **)&grad, sizeof ones) != HW_OK ||
        hw_cuda_memcpy_h2d(grad, ones, sizeof ones, NULL) != HW_OK ||
        hw_cuda_sgd_step(NULL, shared, grad, NULL, IPC_N, 0.5f, 0.0f, 0.0f, 0, 0) != HW_OK ||
        hw_cuda_stream_sync(NULL) != HW_OK || hw_cuda_ipc_close(shared) != HW_OK) {
        snprintf(ch->child_error, sizeof ch->child_error, "%s", hw_error());
        return 1;
    }
    hw_cuda_free(grad);
    return 0;
}

Test(cuda, ipc_handle_shared_across_fork) {
    ipc_channel *ch = mmap(NULL, sizeof *ch, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert(ch != MAP_FAILED);
    memset(ch, 0, sizeof *ch);
    // Fork first: neither process has touched CUDA yet.
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) _exit(ipc_child(ch));
    int count = 0, status = 0;
    if (hw_cuda_device_count(&count) != HW_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", hw_error());
        atomic_store(&ch->state, IPC_SKIP);
        waitpid(pid, &status, 0);
        munmap(ch, sizeof *ch);
        cr_skip_test("%s", why);
    }
    float *weights = NULL, start[IPC_N], after[IPC_N];
    for (int i = 0; i < IPC_N; i++) start[i] = (float)i;
    if (hw_cuda_select(CUDA0) != HW_OK || hw_cuda_malloc((void **)&weights, sizeof start) != HW_OK ||
        hw_cuda_memcpy_h2d(weights, start, sizeof start, NULL) != HW_OK || hw_cuda_stream_sync(NULL) != HW_OK ||
        hw_cuda_ipc_export(weights, &ch->handle) != HW_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", hw_error());
        atomic_store(&ch->state, IPC_SKIP);
        waitpid(pid, &status, 0);
        cr_assert_fail("parent: %s", why);
    }
    atomic_store(&ch->state, IPC_READY);
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child failed (status %d): %s", status, ch->child_error);
    OK(hw_cuda_memcpy_d2h(after, weights, sizeof after, NULL));
    OK(hw_cuda_stream_sync(NULL));
    for (int i = 0; i < IPC_N; i++) cr_assert_eq(after[i], start[i] - 0.5f, "weight %d: %g", i, after[i]);
    hw_cuda_free(weights);
    munmap(ch, sizeof *ch);
}

// The GPU runner against the product's own CPU path (hw_cpu_forward / hw_cpu_backward in
// src/nn), on the LeNet shape without dropout (the two draw different masks by design): the
// loss, the log-probabilities and every parameter's gradient agree to float rounding.
Test(cuda, runner_matches_the_cpu_model) {
    need_gpu();
    static const char *lenet_without_dropout = "input 1 28 28\n"
                                               "conv2d 10 5\nmaxpool2d 2\nrelu\n"
                                               "conv2d 20 5\nmaxpool2d 2\nrelu\n"
                                               "flatten\nlinear 50\nrelu\nlinear 10\nlog_softmax\n";
    hw_model m;
    OK(hw_model_parse(&m, lenet_without_dropout, "lenet-without-dropout"));
    OK(hw_model_alloc_weights(&m));
    hw_model_init_weights(&m, 5);
    const int batch = 13;
    float *x = malloc(sizeof(float) * batch * 784);
    uint8_t y[13];
    hw_rng rng;
    hw_rng_seed(&rng, 21, 0);
    for (int i = 0; i < batch * 784; i++) x[i] = hw_rng_normal(&rng);
    for (int i = 0; i < batch; i++) y[i] = (uint8_t)hw_rng_below(&rng, 10);

    hw_workspace ws;
    OK(hw_workspace_alloc(&ws, &m, batch, 1));
    float cpu_loss = hw_cpu_forward(&m, &ws, x, y, batch, 1);
    hw_cpu_backward(&m, &ws, y, batch);
    const float *cpu_logp = hw_model_output(&m, &ws);

    hw_cuda_runner *r = NULL;
    hw_cuda_runner_config c = {.device = CUDA0, .max_batch = batch, .weights_dev = NULL, .mean = 0, .std = 1};
    OK(hw_cuda_runner_create(&r, &m, &c));  // uploads m.weights
    OK(hw_cuda_runner_upload_f32(r, x, y, batch));
    float gpu_loss = 0;
    OK(hw_cuda_runner_forward(r, 1, &gpu_loss));
    OK(hw_cuda_runner_backward(r));
    float *gpu_logp = malloc(sizeof(float) * batch * 10), *gpu_grads = malloc(sizeof(float) * m.n_weights);
    int out_batch = 0;
    runner_output(r, gpu_logp, &out_batch);
    runner_grads(r, gpu_grads, m.n_weights);

    cr_expect_eq(out_batch, batch);
    cr_expect_float_eq(gpu_loss, cpu_loss, 1e-4f * fabsf(cpu_loss), "loss: gpu %g cpu %g", gpu_loss, cpu_loss);
    EXPECT_CLOSE(gpu_logp, cpu_logp, (size_t)batch * 10, "log-probabilities");
    for (int p = 0; p < m.n_params; p++) {
        const hw_param *param = &m.params[p];
        EXPECT_CLOSE(gpu_grads + param->offset, ws.grads + param->offset, (size_t)hw_shape_numel(param->shape), "%s",
                     param->name);
    }
    hw_cuda_runner_free(r);
    hw_workspace_free(&ws);
    hw_model_free(&m);
    free(x), free(gpu_logp), free(gpu_grads);
}
