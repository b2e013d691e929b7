// Tests of the model: the model-file parser and its errors, the flat parameter layout, the
// initialisation, frozen parameters, the workspace, and training to a near-zero loss.
#include "hw/err.h"
#include "hw/nn.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

// ---- parsing ----

static void expect_parse_error(const char *text, const char *where, const char *what) {
    hw_model model;
    cr_expect_eq(hw_model_parse(&model, text, "t.model"), HW_ERR, "accepted:\n%s", text);
    const char *msg = hw_error();
    cr_expect(strncmp(msg, where, strlen(where)) == 0, "message '%s' should start with '%s'", msg, where);
    cr_expect(strstr(msg, what) != NULL, "message '%s' should mention '%s'", msg, what);
}

Test(model_parse, errors_name_file_line_and_what_was_expected) {
    expect_parse_error("input 1 28 28\nconv3d 3 3\nlog_softmax\n", "t.model:2:", "unknown layer 'conv3d'");
    expect_parse_error("input 1 28 28\nconv3d 3 3\n", "t.model:2:", "conv2d");  // lists the known ones
    expect_parse_error("input 1 28 28\n\n# conv\nconv2d 10 x5\n", "t.model:4:", "bad number 'x5' for KERNEL");
    expect_parse_error("input 1 28 28\nconv2d 10 5 stride=two\n", "t.model:2:", "bad number 'two'");
    expect_parse_error("input 1 4 4\nconv2d 2 5\nflatten\nlog_softmax\n", "t.model:2:", "kernel 5 does not fit");
    expect_parse_error("input 1 4 4\nmaxpool2d 5\nflatten\nlog_softmax\n", "t.model:2:", "KERNEL <= 4");
    expect_parse_error("input 1 28 28\nlinear 10\nlog_softmax\n", "t.model:2:", "put `flatten` before it");
    expect_parse_error("input 1 28 28\nconv2d 10 5\nlog_softmax\n", "t.model:3:", "flatten");
    expect_parse_error("conv2d 10 5\n", "t.model:1:", "expected the input shape first");
    expect_parse_error("", "t.model:1:", "empty model");
    expect_parse_error("# only a comment\n\n   \n", "t.model:3:", "empty model");
    expect_parse_error("input 1 28 28\n", "t.model:1:", "no layers");
    expect_parse_error("input 784\nlinear 10\n", "t.model:2:", "expected log_softmax last");
    expect_parse_error("input 784\nlinear 10\nrelu   # no loss\n\n", "t.model:3:", "the last layer is relu");
    expect_parse_error("input 10\nlog_softmax\nlinear 3\nlog_softmax\n", "t.model:3:", "must be the last layer");
    expect_parse_error("input 1 28 28\nconv2d 10\n", "t.model:2:", "conv2d needs 2 numbers");
    expect_parse_error("input 1 28 28\nconv2d 10 5 3\n", "t.model:2:", "at most 2 numbers");
    expect_parse_error("input 1 28 28\nrelu 3\n", "t.model:2:", "relu takes no numbers");
    expect_parse_error("input 1 28 28\nconv2d 10 5 strides=2\n", "t.model:2:", "unknown option 'strides=2'");
    expect_parse_error("input 1 28 28\nconv2d 10 5 stride=0\n", "t.model:2:", "stride must be an integer from 1");
    expect_parse_error("input 1000 1000 1000\nflatten\nlog_softmax\n", "t.model:2:", "over 268435456 elements");
    expect_parse_error("input 1 28 28\nconv2d 2.5 5\n", "t.model:2:", "OUT_CHANNELS must be an integer");
    expect_parse_error("input 10\ndropout 1.5\nlog_softmax\n", "t.model:2:", "[0, 1]");
    expect_parse_error("input 10\ndropout2d 0.5\nlog_softmax\n", "t.model:2:", "[C, H, W]");
    expect_parse_error("input 0 28\n", "t.model:1:", "bad size '0'");
    expect_parse_error("input 1 2 3 4\n", "t.model:1:", "at most 3 sizes");
    expect_parse_error("input\n", "t.model:1:", "missing sizes");
    expect_parse_error("input 10\nlinear 4 name=a/b\nlog_softmax\n", "t.model:2:", "bad layer name 'a/b'");
    expect_parse_error("input 10\nlinear 4 name=fc2\nlinear 3\nlog_softmax\n", "t.model:3:", "already used");
    // Issue 21: these were accepted (0x10 read as 16, a 2-D input, a word given twice).
    expect_parse_error("input 1 28 28\nconv2d 0x10 5\n", "t.model:2:", "bad number '0x10' for OUT_CHANNELS");
    expect_parse_error("input 10\ndropout inf\nlog_softmax\n", "t.model:2:", "bad number 'inf'");
    expect_parse_error("input 1 28 28\nconv2d 10 5 stride=0x2\n", "t.model:2:", "bad number '0x2'");
    expect_parse_error("input 1 28\nflatten\nlog_softmax\n", "t.model:1:", "2 sizes given");
    expect_parse_error("input 10\nlinear 4 frozen frozen\nlog_softmax\n", "t.model:2:", "frozen given twice");
    expect_parse_error("input 10\nlinear 4 name=a name=b\nlog_softmax\n", "t.model:2:", "name= given twice");
}

// A model file saved with a UTF-8 byte order mark (Windows Notepad) reads as without one; it was
// refused with "expected the input shape first ..., got '\xef\xbb\xbfinput'".
Test(model_parse, a_byte_order_mark_is_skipped) {
    hw_model model;
    cr_assert_eq(hw_model_parse(&model, "\xef\xbb\xbfinput 10\nlinear 3\nlog_softmax\n", "bom.model"), HW_OK, "%s",
                 hw_error());
    cr_expect_eq(model.n_weights, 33u);
    cr_expect_eq(strncmp(model.text, "input", 5), 0, "the stored text keeps the mark");
    hw_model_free(&model);
    // Numbers in the usual decimal forms still read.
    cr_assert_eq(hw_model_parse(&model, "input 10\ndropout .5\ndropout 5e-1\nlinear +3\nlog_softmax\n", "d.model"),
                 HW_OK, "%s", hw_error());
    hw_model_free(&model);
}

Test(model_parse, load_names_a_missing_file) {
    hw_model model;
    cr_expect_eq(hw_model_load(&model, "/nonexistent/x.model"), HW_ERR);
    cr_expect(strstr(hw_error(), "/nonexistent/x.model") != NULL, "%s", hw_error());
}

Test(model_parse, options_comments_and_names) {
    hw_model model;
    const char *text = "# a comment\n"
                       "input 3 9 9   # trailing comment\r\n"
                       "\n"
                       "conv2d 4 3 padding=1 stride=2 name=stem frozen\n"
                       "\tmaxpool2d 2 stride=1\n"
                       "relu\n"
                       "flatten\n"
                       "linear 7\n"
                       "linear 5 name=head\n"
                       "log_softmax";  // no final newline
    cr_assert_eq(hw_model_parse(&model, text, "t.model"), HW_OK, "%s", hw_error());
    cr_expect_eq(model.n_layers, 7);
    cr_expect_str_eq(model.layers[0].name, "stem");
    cr_expect_eq(model.layers[0].frozen, 1);
    cr_expect_eq(model.layers[0].line, 4);
    cr_expect_eq(model.layers[0].out_shape.dims[1], 5);  // (9 + 2 - 3) / 2 + 1
    cr_expect_eq(model.layers[1].out_shape.dims[1], 4);
    cr_expect_str_eq(model.layers[4].name, "fc1");
    cr_expect_str_eq(model.layers[5].name, "head");
    cr_expect_eq(model.n_classes, 5);
    cr_expect_str_eq(model.params[0].name, "stem.weight");
    cr_expect_eq(model.params[0].frozen, 1);
    cr_expect_eq(model.params[1].frozen, 1);
    cr_expect_eq(model.params[2].frozen, 0);
    cr_expect_geq(hw_model_find_param(&model, "head.bias"), 0);
    cr_expect_str_eq(model.text, text);
    hw_model_free(&model);
}

// ---- the shipped models ----

static void expect_param(const hw_model *m, const char *name, size_t offset, int ndim, const int64_t *dims) {
    int i = hw_model_find_param(m, name);
    cr_assert_geq(i, 0, "no %s", name);
    cr_expect_eq(m->params[i].offset, offset, "%s offset %zu", name, m->params[i].offset);
    cr_expect(hw_shape_equal(m->params[i].shape, hw_shape_make(ndim, dims)), "%s shape", name);
}

Test(model_files, lenet_is_pytorchs_net) {
    hw_model m;
    cr_assert_eq(hw_model_load(&m, "models/lenet.model"), HW_OK, "%s", hw_error());
    cr_expect_eq(m.n_weights, 21840);
    cr_expect_eq(m.n_params, 8);
    cr_expect_eq(m.n_classes, 10);
    expect_param(&m, "conv1.weight", 0, 4, (int64_t[]){10, 1, 5, 5});
    expect_param(&m, "conv1.bias", 250, 1, (int64_t[]){10});
    expect_param(&m, "conv2.weight", 260, 4, (int64_t[]){20, 10, 5, 5});
    expect_param(&m, "conv2.bias", 5260, 1, (int64_t[]){20});
    expect_param(&m, "fc1.weight", 5280, 2, (int64_t[]){50, 320});
    expect_param(&m, "fc1.bias", 21280, 1, (int64_t[]){50});
    expect_param(&m, "fc2.weight", 21330, 2, (int64_t[]){10, 50});
    expect_param(&m, "fc2.bias", 21830, 1, (int64_t[]){10});
    // conv 2 x 24 x 24 x 10 x 25 + 2 x 8 x 8 x 20 x 250 + 2 x 320 x 50 + 2 x 50 x 10, and the softmax
    double flops = hw_model_forward_flops(&m);
    cr_expect(flops >= 961000 && flops < 961100, "forward flops %g", flops);

    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    hw_model_summary(&m, out);
    fclose(out);
    cr_expect(strstr(buf, "total parameters: 21840") != NULL, "%s", buf);
    cr_expect(strstr(buf, "conv2") && strstr(buf, "[20, 8, 8]") && strstr(buf, "5020"), "%s", buf);
    free(buf);
    hw_model_free(&m);
}

Test(model_files, mlp_totals) {
    hw_model m;
    cr_assert_eq(hw_model_load(&m, "models/mlp.model"), HW_OK, "%s", hw_error());
    cr_expect_eq(m.n_weights, 101770);
    expect_param(&m, "fc1.weight", 0, 2, (int64_t[]){128, 784});
    expect_param(&m, "fc2.bias", 101760, 1, (int64_t[]){10});
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    hw_model_summary(&m, out);
    fclose(out);
    cr_expect(strstr(buf, "total parameters: 101770") != NULL, "%s", buf);
    free(buf);
    hw_model_free(&m);
}

// ---- weights ----

Test(model_weights, init_is_pytorchs_default) {
    hw_model m;
    cr_assert_eq(hw_model_load(&m, "models/lenet.model"), HW_OK);
    cr_assert_eq(hw_model_alloc_weights(&m), HW_OK);
    hw_model_init_weights(&m, 42);
    // bound 1/sqrt(fan_in) for the weight and the bias of each layer
    const char *layers[4] = {"conv1", "conv2", "fc1", "fc2"};
    double fan_in[4] = {25, 250, 320, 50};
    for (int l = 0; l < 4; l++) {
        double bound = 1.0 / sqrt(fan_in[l]);
        for (int which = 0; which < 2; which++) {
            char name[64];
            snprintf(name, sizeof name, "%s.%s", layers[l], which ? "bias" : "weight");
            const hw_param *p = &m.params[hw_model_find_param(&m, name)];
            int64_t n = hw_shape_numel(p->shape);
            double max = 0, sum = 0;
            for (int64_t i = 0; i < n; i++) {
                double v = m.weights[p->offset + i];
                max = fmax(max, fabs(v));
                sum += v;
            }
            cr_expect_leq(max, bound, "%s exceeds 1/sqrt(fan_in)", name);
            if (n >= 50) {
                cr_expect_gt(max, 0.9 * bound, "%s does not fill U(-b, b)", name);
                cr_expect_lt(fabs(sum / n), 0.2 * bound, "%s mean %g", name, sum / n);
            }
        }
    }
    float first = m.weights[0], last = m.weights[m.n_weights - 1];
    hw_model_init_weights(&m, 42);
    cr_expect_eq(m.weights[0], first, "same seed, same weights");
    cr_expect_eq(m.weights[m.n_weights - 1], last);
    hw_model_init_weights(&m, 43);
    cr_expect_neq(m.weights[0], first, "another seed, other weights");
    hw_model_free(&m);
}

Test(model_weights, bound_weights_are_used_in_place) {
    hw_model m;
    cr_assert_eq(hw_model_load(&m, "models/mlp.model"), HW_OK);
    cr_assert_eq(hw_model_alloc_weights(&m), HW_OK);
    hw_model_init_weights(&m, 1);
    float *shared = malloc(sizeof(float) * m.n_weights);
    memcpy(shared, m.weights, sizeof(float) * m.n_weights);
    hw_workspace ws;
    cr_assert_eq(hw_workspace_alloc(&ws, &m, 4, 1), HW_OK);
    float x[4 * 784];
    for (int i = 0; i < 4 * 784; i++) x[i] = sinf(0.1f * (float)i);
    uint8_t y[4] = {1, 2, 3, 4};
    float own = hw_cpu_forward(&m, &ws, x, y, 4, 0);
    hw_model_bind_weights(&m, shared);
    cr_expect_eq(m.weights, shared);
    cr_expect_eq(m.owns_weights, 0);
    cr_expect_eq(hw_cpu_forward(&m, &ws, x, y, 4, 0), own);
    shared[m.n_weights - 1] += 1.0f;  // a write by another worker is seen at once
    cr_expect_neq(hw_cpu_forward(&m, &ws, x, y, 4, 0), own);
    hw_workspace_free(&ws);
    hw_model_free(&m);  // does not free memory it does not own
    free(shared);
}

// ---- running ----

static hw_model lenet_with_weights(uint64_t seed) {
    hw_model m;
    cr_assert_eq(hw_model_load(&m, "models/lenet.model"), HW_OK, "%s", hw_error());
    cr_assert_eq(hw_model_alloc_weights(&m), HW_OK);
    hw_model_init_weights(&m, seed);
    return m;
}

static void fill_batch(float *x, uint8_t *y, int batch, int features, uint64_t seed) {
    hw_rng rng;
    hw_rng_seed(&rng, seed, 0);
    for (int i = 0; i < batch * features; i++) x[i] = hw_rng_normal(&rng);
    for (int b = 0; b < batch; b++) y[b] = (uint8_t)hw_rng_below(&rng, 10);
}

Test(model_run, loss_is_the_mean_nll_of_the_output) {
    hw_model m = lenet_with_weights(3);
    hw_workspace ws;
    cr_assert_eq(hw_workspace_alloc(&ws, &m, 8, 1), HW_OK);
    float x[8 * 784];
    uint8_t y[8];
    fill_batch(x, y, 8, 784, 5);
    float loss = hw_cpu_forward(&m, &ws, x, y, 5, 1);  // a batch smaller than max_batch
    const float *logp = hw_model_output(&m, &ws);
    double nll = 0;
    for (int b = 0; b < 5; b++) {
        double total = 0;
        for (int c = 0; c < 10; c++) total += exp(logp[b * 10 + c]);
        cr_expect(fabs(total - 1.0) < 1e-5, "probabilities of sample %d sum to %g", b, total);
        nll -= logp[b * 10 + y[b]];
    }
    cr_expect(fabs(loss - nll / 5) < 1e-5, "loss %g, mean NLL %g", loss, nll / 5);
    cr_expect_eq(hw_cpu_forward(&m, &ws, x, NULL, 5, 0), 0.0f, "no labels, no loss");
    int correct = hw_model_count_correct(&m, &ws, y, 5), want = 0;
    for (int b = 0; b < 5; b++) {
        int best = 0;
        for (int c = 1; c < 10; c++) best = logp[b * 10 + c] > logp[b * 10 + best] ? c : best;
        want += best == y[b];
    }
    cr_expect_eq(correct, want);
    cr_expect(isnan(hw_cpu_forward(&m, &ws, x, y, 9, 1)), "batch above max_batch");
    cr_expect(strstr(hw_error(), "batch of 9") != NULL, "%s", hw_error());
    y[0] = 10;
    cr_expect(isnan(hw_cpu_forward(&m, &ws, x, y, 2, 1)), "a label the model has no class for");
    hw_workspace_free(&ws);
    hw_model_free(&m);
}

// A backward it cannot run fails with a message and leaves the gradients alone: returning
// quietly, it let the next step apply the previous batch's gradients.
Test(model_run, backward_refuses_a_bad_batch_loudly) {
    hw_model m = lenet_with_weights(3);
    hw_workspace ws;
    cr_assert_eq(hw_workspace_alloc(&ws, &m, 8, 1), HW_OK);
    float x[8 * 784];
    uint8_t y[8];
    fill_batch(x, y, 8, 784, 6);
    hw_cpu_forward(&m, &ws, x, y, 4, 1);
    cr_assert_eq(hw_cpu_backward(&m, &ws, y, 4), HW_OK, "%s", hw_error());
    float *before = malloc(m.n_weights * sizeof *before);
    cr_assert_not_null(before);
    memcpy(before, ws.grads, m.n_weights * sizeof *before);
    cr_expect_eq(hw_cpu_backward(&m, &ws, y, 9), HW_ERR, "batch above max_batch");
    cr_expect(strstr(hw_error(), "backward: batch of 9 outside [1, 8]") != NULL, "%s", hw_error());
    cr_expect_eq(hw_cpu_backward(&m, &ws, y, 0), HW_ERR, "empty batch");
    cr_expect_eq(hw_cpu_backward(&m, &ws, NULL, 4), HW_ERR, "no labels");
    cr_expect(strstr(hw_error(), "no labels") != NULL, "%s", hw_error());
    cr_expect_eq(memcmp(before, ws.grads, m.n_weights * sizeof *before), 0, "a refused backward wrote gradients");
    free(before);
    hw_workspace_free(&ws);
    hw_model_free(&m);
}

// Evaluation is deterministic (no dropout); training draws masks from the workspace RNG.
Test(model_run, dropout_only_in_training) {
    hw_model m = lenet_with_weights(3);
    hw_workspace ws;
    cr_assert_eq(hw_workspace_alloc(&ws, &m, 4, 1), HW_OK);
    float x[4 * 784];
    uint8_t y[4];
    fill_batch(x, y, 4, 784, 6);
    float e1 = hw_cpu_forward(&m, &ws, x, y, 4, 0), e2 = hw_cpu_forward(&m, &ws, x, y, 4, 0);
    float t1 = hw_cpu_forward(&m, &ws, x, y, 4, 1), t2 = hw_cpu_forward(&m, &ws, x, y, 4, 1);
    cr_expect_eq(e1, e2);
    cr_expect_neq(t1, t2, "two training passes draw different masks");
    cr_expect_neq(t1, e1);
    hw_workspace_free(&ws);
    hw_model_free(&m);
}

// A workspace kept from children (the parent's evaluation workspace) is not mapped in a process
// forked afterwards, while one not kept is: msync on an unmapped page fails with ENOMEM.
static int mapped(const void *block) {
    uintptr_t page = (uintptr_t)block & ~(uintptr_t)(sysconf(_SC_PAGESIZE) - 1);
    return msync((void *)page, 1, MS_ASYNC) == 0 ? 1 : errno == ENOMEM ? 0 : -1;
}

Test(model_run, a_workspace_kept_from_children_is_not_inherited) {
    hw_model m = lenet_with_weights(3);
    hw_workspace kept, inherited;
    cr_assert_eq(hw_workspace_alloc(&kept, &m, 8, 1), HW_OK);
    cr_assert_eq(hw_workspace_alloc(&inherited, &m, 8, 1), HW_OK);
    cr_assert_eq(hw_workspace_keep_from_children(&kept), HW_OK, "%s", hw_error());
    float x[8 * 784];
    uint8_t y[8];
    fill_batch(x, y, 8, 784, 9);
    float before = hw_cpu_forward(&m, &kept, x, y, 8, 0);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        int bad = 0;
        for (int i = 1; i <= kept.n_layers; i++) bad += mapped(kept.acts[i]) != 0 || mapped(inherited.acts[i]) != 1;
        bad += mapped(kept.grads) != 0 || mapped(kept.scratch) != 0 || mapped(inherited.grads) != 1;
        _exit(bad ? 1 : 0);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child saw the kept workspace, or not the other");
    // The parent keeps using it as before.
    cr_expect_eq(hw_cpu_forward(&m, &kept, x, y, 8, 0), before);
    hw_workspace_free(&kept);
    hw_workspace_free(&inherited);
    hw_model_free(&m);
}

// A flatten's output and its gradient are its input's buffers (no copy), after the input too,
// where they are the caller's x; the model trains exactly as the same model without the flattens;
// and the workspace neither frees nor keeps from children the memory its views point at.
Test(model_run, flatten_is_a_view_of_its_input) {
    hw_model flat, plain;
    cr_assert_eq(
        hw_model_parse(&flat, "input 2 3 3\nflatten\nflatten\nlinear 4\nrelu\nflatten\nlinear 3\nlog_softmax\n",
                       "flat.model"),
        HW_OK, "%s", hw_error());
    cr_assert_eq(hw_model_parse(&plain, "input 18\nlinear 4\nrelu\nlinear 3\nlog_softmax\n", "plain.model"), HW_OK,
                 "%s", hw_error());
    cr_assert_eq(flat.n_weights, plain.n_weights);
    cr_assert_eq(hw_model_alloc_weights(&flat), HW_OK);
    hw_model_init_weights(&flat, 5);
    hw_model_bind_weights(&plain, flat.weights);
    hw_workspace ws, ref;
    cr_assert_eq(hw_workspace_alloc(&ws, &flat, 6, 1), HW_OK);
    cr_assert_eq(hw_workspace_alloc(&ref, &plain, 6, 1), HW_OK);
    cr_expect(ws.acts[5] == ws.acts[4] && ws.grad_acts[5] == ws.grad_acts[4], "the third flatten copies");
    cr_expect(ws.acts[4] != NULL && ws.grad_acts[4] != NULL && ws.acts[4] != ws.acts[3]);
    float *x = malloc(sizeof(float) * 6 * 18);
    uint8_t y[6];
    fill_batch(x, y, 6, 18, 4);
    for (int b = 0; b < 6; b++) y[b] %= 3;
    float loss = hw_cpu_forward(&flat, &ws, x, y, 6, 1);
    cr_expect(ws.acts[1] == x && ws.acts[2] == x, "the flattens after the input read x where it is");
    cr_expect_eq(loss, hw_cpu_forward(&plain, &ref, x, y, 6, 1));
    cr_assert_eq(hw_cpu_backward(&flat, &ws, y, 6), HW_OK, "%s", hw_error());
    cr_assert_eq(hw_cpu_backward(&plain, &ref, y, 6), HW_OK, "%s", hw_error());
    cr_expect(memcmp(ws.grads, ref.grads, sizeof(float) * flat.n_weights) == 0, "the gradients differ");
    cr_expect(memcmp(hw_model_output(&flat, &ws), hw_model_output(&plain, &ref), sizeof(float) * 6 * 3) == 0);
    // x is the caller's: a workspace kept from children leaves it inherited.
    cr_assert_eq(hw_workspace_keep_from_children(&ws), HW_OK, "%s", hw_error());
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) _exit(mapped(x) == 1 && mapped(ws.acts[4]) == 0 ? 0 : 1);
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "x was kept from the child, or relu's output was not");
    // A walk over an input set by hand: the views follow acts[0] (hw_workspace_buffers), so the
    // walk reads x2 and writes nothing into the x of the forward before.
    float *x2 = malloc(sizeof(float) * 6 * 18), *x_before = malloc(sizeof(float) * 6 * 18);
    fill_batch(x2, y, 6, 18, 8);
    memcpy(x_before, x, sizeof(float) * 6 * 18);
    ws.acts[0] = x2;
    hw_exec_buffers bufs = hw_workspace_buffers(&flat, &ws);
    cr_assert_eq(hw_exec_forward(&hw_cpu_backend, &flat, &bufs, 6, 0), HW_OK, "%s", hw_error());
    cr_expect(ws.acts[1] == x2 && ws.acts[2] == x2, "the views still point at the old input");
    cr_expect(memcmp(x, x_before, sizeof(float) * 6 * 18) == 0, "the walk wrote into the previous input");
    float by_hand[6 * 3];
    memcpy(by_hand, hw_model_output(&flat, &ws), sizeof by_hand);
    hw_cpu_forward(&plain, &ref, x2, NULL, 6, 0);
    cr_expect(memcmp(by_hand, hw_model_output(&plain, &ref), sizeof by_hand) == 0, "not the output of x2");
    hw_workspace_free(&ws);  // frees neither x nor x2 nor a view twice (the ASan build checks)
    hw_workspace_free(&ref);
    free(x);
    free(x2);
    free(x_before);
    hw_model_free(&plain);
    hw_model_free(&flat);
}

// A workspace runs a model only where it holds every buffer the model needs, each as large, and
// its flatten views where the model's flattens are: a model of as many layers of other kinds, or
// of larger layers, is refused by forward and backward (it would write past the buffers); a model
// that needs less runs in it and computes what it computes in its own.
Test(model_run, a_workspace_refuses_a_model_it_cannot_hold) {
    const char *texts[5] = {
        "input 784\nflatten\nlinear 10\nlog_softmax\n",
        "input 784\nrelu\nlinear 10\nlog_softmax\n",  // relu where the first has a flatten (a view)
        "input 784\nflatten\nlinear 12\nlog_softmax\n",
        // two convolutions of the same output size (2304 floats) but not the same weights and scratch
        "input 1 28 28\nconv2d 4 5\nflatten\nlinear 10\nlog_softmax\n",
        "input 1 28 28\nconv2d 16 17\nflatten\nlinear 10\nlog_softmax\n",
    };
    // fits[a][b]: model b runs in model a's workspace
    static const int fits[5][5] = {
        {1, 0, 0, 0, 0}, {0, 1, 0, 0, 0}, {1, 0, 1, 0, 0}, {0, 0, 0, 1, 0}, {0, 0, 0, 1, 1},
    };
    hw_model m[5];
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(hw_model_parse(&m[i], texts[i], "m.model"), HW_OK, "%s", hw_error());
        cr_assert_eq(hw_model_alloc_weights(&m[i]), HW_OK);
        hw_model_init_weights(&m[i], 1);
    }
    float *x = malloc(2 * 784 * sizeof(float));
    uint8_t y[2];
    fill_batch(x, y, 2, 784, 3);
    for (int a = 0; a < 5; a++) {
        hw_workspace ws;
        cr_assert_eq(hw_workspace_alloc(&ws, &m[a], 2, 1), HW_OK);
        for (int b = 0; b < 5; b++) {
            cr_expect_eq(hw_workspace_fits(&ws, &m[b]), fits[a][b], "workspace of model %d, model %d", a, b);
            if (fits[a][b]) {
                hw_workspace own;
                cr_assert_eq(hw_workspace_alloc(&own, &m[b], 2, 1), HW_OK);
                float loss = hw_cpu_forward(&m[b], &ws, x, y, 2, 0);
                cr_expect(isfinite(loss) && loss == hw_cpu_forward(&m[b], &own, x, y, 2, 0), "model %d in %d's", b, a);
                cr_expect_eq(hw_cpu_backward(&m[b], &ws, y, 2), HW_OK, "%s", hw_error());
                hw_workspace_free(&own);
                continue;
            }
            cr_expect(isnan(hw_cpu_forward(&m[b], &ws, x, y, 2, 1)), "forward ran model %d in %d's workspace", b, a);
            cr_expect(strstr(hw_error(), "another model") != NULL, "%s", hw_error());
            cr_expect_eq(hw_cpu_backward(&m[b], &ws, y, 2), HW_ERR, "backward ran model %d in %d's workspace", b, a);
        }
        hw_workspace_free(&ws);
    }
    free(x);
    for (int i = 0; i < 5; i++) hw_model_free(&m[i]);
}

// Nothing is allocated by forward or backward (after a first warm-up step, in which OpenBLAS
// may set up its own buffers).
Test(model_run, no_allocation_in_the_training_step) {
    hw_model m = lenet_with_weights(3);
    hw_workspace ws;
    cr_assert_eq(hw_workspace_alloc(&ws, &m, 16, 1), HW_OK);
    float *x = malloc(sizeof(float) * 16 * 784);
    uint8_t y[16];
    fill_batch(x, y, 16, 784, 7);
    hw_cpu_forward(&m, &ws, x, y, 16, 1);
    hw_cpu_backward(&m, &ws, y, 16);
    struct mallinfo2 before = mallinfo2();
    for (int step = 0; step < 3; step++) {
        hw_cpu_forward(&m, &ws, x, y, 16 - step, 1);
        hw_cpu_backward(&m, &ws, y, 16 - step);
    }
    struct mallinfo2 after = mallinfo2();
    cr_expect_eq(after.uordblks, before.uordblks, "heap in use went from %zu to %zu bytes", before.uordblks,
                 after.uordblks);
    cr_expect_eq(after.hblkhd, before.hblkhd, "mmap'ed blocks changed");
    free(x);
    hw_workspace_free(&ws);
    hw_model_free(&m);
}

// The whole model against finite differences of its own loss (eval mode), on a model with
// padding and stride, for a sample of weights of every parameter tensor.
Test(model_run, model_gradient_matches_finite_differences) {
    hw_model m;
    const char *text = "input 2 7 7\nconv2d 3 3 stride=2 padding=1\nrelu\nmaxpool2d 2 stride=1\n"
                       "flatten\nlinear 6\nrelu\nlinear 4\nlog_softmax\n";
    cr_assert_eq(hw_model_parse(&m, text, "g.model"), HW_OK, "%s", hw_error());
    cr_assert_eq(hw_model_alloc_weights(&m), HW_OK);
    hw_model_init_weights(&m, 8);
    hw_workspace ws;
    cr_assert_eq(hw_workspace_alloc(&ws, &m, 3, 1), HW_OK);
    float x[3 * 98];
    uint8_t y[3];
    fill_batch(x, y, 3, 98, 9);
    for (int b = 0; b < 3; b++) y[b] %= 4;
    hw_cpu_forward(&m, &ws, x, y, 3, 0);
    hw_cpu_backward(&m, &ws, y, 3);
    for (size_t i = 0; i < m.n_weights; i += 3) {
        float saved = m.weights[i];
        double step = 1e-3;
        m.weights[i] = saved + (float)step;
        double up = hw_cpu_forward(&m, &ws, x, y, 3, 0);
        m.weights[i] = saved - (float)step;
        double down = hw_cpu_forward(&m, &ws, x, y, 3, 0);
        m.weights[i] = saved;
        double numeric = (up - down) / (2 * step);
        cr_expect(fabs(numeric - ws.grads[i]) < 5e-4 + 1e-2 * fabs(numeric), "weight %zu: analytic %g, numeric %g", i,
                  ws.grads[i], numeric);
    }
    hw_workspace_free(&ws);
    hw_model_free(&m);
}

// ---- frozen parameters ----

Test(model_frozen, freeze_by_name_and_unknown_names) {
    hw_model m = lenet_with_weights(1);
    cr_expect_eq(hw_model_freeze(&m, "conv1.weight, conv1.bias"), HW_OK, "%s", hw_error());
    cr_expect(m.params[0].frozen && m.params[1].frozen && !m.params[2].frozen);
    cr_expect_eq(hw_model_freeze(&m, "fc2.bias,conv9.weight"), HW_ERR);
    cr_expect(strstr(hw_error(), "conv9.weight") != NULL, "%s", hw_error());
    cr_expect(strstr(hw_error(), "fc1.weight") != NULL, "the message lists the parameters: %s", hw_error());
    cr_expect_eq(m.params[hw_model_find_param(&m, "fc2.bias")].frozen, 0, "a failed call freezes nothing");
    cr_expect_eq(hw_model_freeze(&m, "fc1"), HW_OK, "a layer name freezes its parameters");
    cr_expect(m.params[4].frozen && m.params[5].frozen);
    cr_expect_eq(hw_model_freeze(&m, "relu1"), HW_ERR, "a layer without parameters");
    // An empty name is refused, not read as nothing to freeze.
    const char *empty[] = {",,", ",", "fc2.bias,,fc1", "fc2.bias,", ",fc2.bias", " , fc2.bias"};
    for (size_t i = 0; i < sizeof empty / sizeof empty[0]; i++) {
        cr_expect_eq(hw_model_freeze(&m, empty[i]), HW_ERR, "'%s' accepted", empty[i]);
        cr_expect(strstr(hw_error(), "single commas") != NULL, "%s", hw_error());
    }
    cr_expect_eq(m.params[hw_model_find_param(&m, "fc2.bias")].frozen, 0, "a refused list freezes nothing");
    hw_model_free(&m);
}

// Frozen parameters get no gradient (their entries are never written), the trainable ones the
// same gradient as without freezing, and backward computes nothing below the first trainable
// layer: the activation gradients there keep the poison put in them.
Test(model_frozen, backward_stops_at_the_first_trainable_layer) {
    hw_model m = lenet_with_weights(1);
    hw_workspace ws;
    cr_assert_eq(hw_workspace_alloc(&ws, &m, 4, 1), HW_OK);
    float x[4 * 784];
    uint8_t y[4];
    fill_batch(x, y, 4, 784, 2);

    hw_cpu_forward(&m, &ws, x, y, 4, 0);
    hw_cpu_backward(&m, &ws, y, 4);
    cr_expect_eq(ws.first_trainable, 0);
    cr_expect_null(ws.grad_acts[0], "no buffer for the input's gradient: it is never computed");
    float *full = malloc(sizeof(float) * m.n_weights);
    memcpy(full, ws.grads, sizeof(float) * m.n_weights);

    hw_workspace_free(&ws);
    cr_assert_eq(hw_workspace_alloc(&ws, &m, 4, 1), HW_OK);
    cr_assert_eq(hw_model_freeze(&m, "conv1.weight,conv1.bias"), HW_OK);
    for (int i = 1; i <= 3; i++) {  // outputs of conv1, pool1, relu1: inputs of layers 1..3
        size_t n = 4 * (size_t)hw_shape_numel(m.layers[i - 1].out_shape);
        for (size_t j = 0; j < n; j++) ws.grad_acts[i][j] = NAN;
    }
    hw_cpu_forward(&m, &ws, x, y, 4, 0);
    hw_cpu_backward(&m, &ws, y, 4);
    cr_expect_eq(ws.first_trainable, 3, "conv2 is the first layer with a trainable parameter");
    for (int i = 1; i <= 3; i++) {
        size_t n = 4 * (size_t)hw_shape_numel(m.layers[i - 1].out_shape);
        for (size_t j = 0; j < n; j++) cr_assert(isnan(ws.grad_acts[i][j]), "grad_acts[%d][%zu] was computed", i, j);
    }
    cr_expect(!isnan(ws.grad_acts[4][0]), "conv2's output gradient is computed");
    for (size_t i = 0; i < 260; i++) cr_assert_eq(ws.grads[i], 0.0f, "frozen conv1 got a gradient at %zu", i);
    for (size_t i = 260; i < m.n_weights; i++) cr_assert_eq(ws.grads[i], full[i], "gradient %zu changed", i);

    // a frozen bias alone: its entries are never written, the weight's are
    int fc2b = hw_model_find_param(&m, "fc2.bias");
    cr_assert_eq(hw_model_freeze(&m, "fc2.bias"), HW_OK);
    for (int i = 0; i < 10; i++) ws.grads[m.params[fc2b].offset + i] = 123.0f;
    hw_cpu_backward(&m, &ws, y, 4);
    for (int i = 0; i < 10; i++) cr_expect_eq(ws.grads[m.params[fc2b].offset + i], 123.0f);
    cr_expect_eq(ws.grads[m.params[fc2b - 1].offset], full[m.params[fc2b - 1].offset]);

    // everything frozen: nothing to do
    cr_assert_eq(hw_model_freeze(&m, "conv2,fc1,fc2"), HW_OK);
    hw_cpu_backward(&m, &ws, y, 4);
    cr_expect_eq(ws.first_trainable, m.n_layers);
    free(full);
    hw_workspace_free(&ws);
    hw_model_free(&m);
}

Test(model_frozen, frozen_in_the_model_file) {
    hw_model m;
    cr_assert_eq(
        hw_model_parse(&m, "input 1 8 8\nconv2d 2 3 frozen\nrelu\nflatten\nlinear 3\nlog_softmax\n", "f.model"), HW_OK,
        "%s", hw_error());
    cr_expect(m.params[0].frozen && m.params[1].frozen && !m.params[2].frozen && !m.params[3].frozen);
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    hw_model_summary(&m, out);
    fclose(out);
    cr_expect(strstr(buf, "frozen") != NULL, "%s", buf);
    cr_expect(strstr(buf, "(20 frozen, 219 trainable)") != NULL, "%s", buf);
    free(buf);
    hw_model_free(&m);
}

// ---- training ----

// Plain SGD (w -= lr * grad, written here: the optim module is tested on its own) on one fixed
// batch: the network memorises it.
static float train_fixed_batch(const char *path, int batch, int steps, float lr) {
    hw_model m;
    cr_assert_eq(hw_model_load(&m, path), HW_OK, "%s", hw_error());
    cr_assert_eq(hw_model_alloc_weights(&m), HW_OK);
    hw_model_init_weights(&m, 11);
    hw_workspace ws;
    cr_assert_eq(hw_workspace_alloc(&ws, &m, batch, 12), HW_OK);
    float *x = malloc(sizeof(float) * batch * 784);
    uint8_t *y = malloc((size_t)batch);
    fill_batch(x, y, batch, 784, 13);
    float first = hw_cpu_forward(&m, &ws, x, y, batch, 0);
    for (int step = 0; step < steps; step++) {
        hw_cpu_forward(&m, &ws, x, y, batch, 1);
        hw_cpu_backward(&m, &ws, y, batch);
        for (size_t i = 0; i < m.n_weights; i++) m.weights[i] -= lr * ws.grads[i];
    }
    float last = hw_cpu_forward(&m, &ws, x, y, batch, 0);
    cr_expect_gt(first, 1.5f, "%s: an untrained model starts near ln(10), got %g", path, first);
    cr_expect_eq(hw_model_count_correct(&m, &ws, y, batch), batch, "%s: the batch is memorised", path);
    free(x);
    free(y);
    hw_workspace_free(&ws);
    hw_model_free(&m);
    return last;
}

Test(model_train, mlp_memorises_a_batch) {
    float loss = train_fixed_batch("models/mlp.model", 16, 100, 0.1f);
    cr_expect_lt(loss, 0.02f, "loss after training %g", loss);
}

Test(model_train, lenet_memorises_a_batch) {
    float loss = train_fixed_batch("models/lenet.model", 16, 300, 0.05f);
    cr_expect_lt(loss, 0.05f, "loss after training %g", loss);
}
