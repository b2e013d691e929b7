// Tests of the GPU trainers (src/cuda/train/hogwild_gpu.c, src/cuda/train/dataparallel_gpu.c) and of the
// gradient all-reduce they use (src/cuda/allreduce.cu), mostly through the ./hogwild binary.
//
// The error paths run on every CUDA build (a build without CUDA has tests/gpu/test_without_cuda.c
// instead): without a GPU `--device cuda` and `--gpus` must fail with exit 1 and a message that says why, leaving no process and no shared
// memory behind; with a GPU the same holds for an index that does not exist. The training tests
// need a GPU and skip, saying why, where there is none.
#include "e2e_util.h"
#include "gpu_tests.h"
#include "hw/ckpt.h"
#include "cuda/allreduce.h"
#include "hw/err.h"
#include "hw/nn.h"
#include "hw/train.h"

#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- where the tests run ----

// 1 when the machine has a CUDA device (*count of them).
static int gpu_present(int *count) {
    *count = 0;
    return hw_cuda_device_count(count) == HW_OK;
}

// Criterion names a hook after its line: keep this off the line of test_cuda.c's hook.
ReportHook(POST_ALL)(struct criterion_global_stats *stats) { gpu_suite_report(stats, "gpu_train"); }

// The tests that run ./hogwild do so through e2e_util.h, with its fixture (.init = e2e_setup,
// .fini = e2e_teardown): each in a fresh folder (e2e.dir), as a child subreaper, so that a worker
// that outlives its run is found (e2e_assert_left_nothing). They train on synthetic digits
// (seed 1) in e2e.dir/data.

// What the message about an unusable GPU must say, where there is none.
static void expect_no_gpu_message(const char *err) {
    cr_expect(strstr(err, "CUDA") != NULL, "stderr: %s", err);
    cr_expect(strstr(err, "no CUDA device") != NULL, "stderr: %s", err);
}

// ---- the error paths: they run on every machine ----

Test(gpu_train, hogwild_cuda_without_gpu_fails_cleanly, .init = e2e_setup, .fini = e2e_teardown) {
    int count = 0;
    if (gpu_present(&count)) cr_skip_test("this machine has a GPU: --device cuda trains here (see the GPU tests)");
    char *data = e2e_synth_n("data", 1, 1000, 200);
    e2e_run_result r;
    e2e_run(&r, NULL, "--data", data, "--device", "cuda", "--workers", "2", "--quiet", "--sharing-strategy",
            "file_system");
    e2e_assert_exit(&r, 1);
    expect_no_gpu_message(r.err);
    // The parent's own message, not a worker's report of it.
    cr_expect(strstr(r.err, "hogwild: ") == r.err, "stderr: %s", r.err);
    cr_expect(strstr(r.err, "worker") == NULL, "stderr: %s", r.err);
    e2e_assert_left_nothing(&r);
}

Test(gpu_train, hogwild_cuda_missing_device_fails_cleanly, .init = e2e_setup, .fini = e2e_teardown) {
    int count = 0;
    int present = gpu_present(&count);
    char *data = e2e_synth_n("data", 1, 1000, 200);
    e2e_run_result r;
    e2e_run(&r, NULL, "--data", data, "--device", "cuda:99", "--workers", "2", "--quiet", "--sharing-strategy",
            "file_system");
    e2e_assert_exit(&r, 1);
    if (present) {
        char want[128];
        snprintf(want, sizeof want, "cuda:99 does not exist: this machine has %d CUDA device(s)", count);
        cr_expect(strstr(r.err, want) != NULL, "stderr: %s", r.err);
    } else {
        expect_no_gpu_message(r.err);
    }
    e2e_assert_left_nothing(&r);
}

// A GPU whose compute mode lets one process use it (nvidia-smi -c EXCLUSIVE_PROCESS) cannot hold
// GPU Hogwild's parent and workers: refused up front, by name, not with a worker's context error.
// Only the simulated device can play one (HW_SIM_COMPUTE_MODE); a real GPU's mode is the admin's.
// Skips unless cuda:0 is the simulated device of make sim, which alone can play `what`.
static void need_simulated_gpu(const char *what) {
    skip_without_gpu();
    char name[256];
    if (hw_cuda_describe((hw_device){HW_DEVICE_CUDA, 0}, name, sizeof name) != HW_OK || !strstr(name, "simulated")) {
        cr_skip_test("only the simulated device (make sim) can play %s", what);
    }
}

Test(gpu_train, hogwild_cuda_refuses_an_exclusive_process_gpu, .init = e2e_setup, .fini = e2e_teardown) {
    need_simulated_gpu("a GPU in EXCLUSIVE_PROCESS mode");
    char *data = e2e_synth_n("data", 1, 1000, 200);
    e2e_run_result r;
    e2e_run(&r, "HW_SIM_COMPUTE_MODE=3", "--data", data, "--device", "cuda", "--workers", "2", "--quiet");
    e2e_assert_exit(&r, 1);
    cr_expect(strstr(r.err, "cuda:0 is in EXCLUSIVE_PROCESS compute mode") != NULL, "stderr: %s", r.err);
    cr_expect(strstr(r.err, "use DataParallel there (--mode)") != NULL, "stderr: %s", r.err);
    e2e_assert_left_nothing(&r);
}

// A GPU older than the architectures compiled in (no sm_80/sm_90 code, no PTX it can JIT) is
// named before anything runs on it, in both modes, instead of failing every kernel launch.
Test(gpu_train, a_gpu_the_build_cannot_run_is_refused_by_name, .init = e2e_setup, .fini = e2e_teardown) {
    need_simulated_gpu("a GPU too old for the build");
    char *data = e2e_synth_n("data", 1, 1000, 200);
    e2e_run_result r;
    e2e_run(&r, "HW_SIM_NO_KERNEL_IMAGE=1", "--data", data, "--device", "cuda", "--workers", "2", "--quiet");
    e2e_assert_exit(&r, 1);
    cr_expect(strstr(r.err, "cuda:0 (sm_90) cannot run hogwild's kernels") != NULL, "stderr: %s", r.err);
    cr_expect(strstr(r.err, "CUDA_ARCH") != NULL, "stderr: %s", r.err);
    e2e_assert_left_nothing(&r);
    e2e_run(&r, "HW_SIM_NO_KERNEL_IMAGE=1", "--data", data, "--mode", "dataparallel", "--gpus", "0,0", "--quiet");
    e2e_assert_exit(&r, 1);
    cr_expect(strstr(r.err, "cannot run hogwild's kernels") != NULL, "stderr: %s", r.err);
    e2e_assert_left_nothing(&r);
}

Test(gpu_train, dataparallel_cuda_missing_device_fails_cleanly, .init = e2e_setup, .fini = e2e_teardown) {
    int count = 0;
    int present = gpu_present(&count);
    char *data = e2e_synth_n("data", 1, 1000, 200);
    e2e_run_result r;
    e2e_run(&r, NULL, "--data", data, "--mode", "dataparallel", "--gpus", "0,99", "--quiet");
    e2e_assert_exit(&r, 1);
    if (present) {
        cr_expect(strstr(r.err, "replica 1") && strstr(r.err, "cuda:99 does not exist"), "stderr: %s", r.err);
    } else {
        expect_no_gpu_message(r.err);
    }
    cr_expect(strstr(r.err, "DataParallel") != NULL, "stderr: %s", r.err);
    e2e_assert_left_nothing(&r);
}

Test(gpu_train, allreduce_refuses_missing_device) {
    int count = 0;
    int present = gpu_present(&count);
    int devices[2] = {0, 99};
    hw_cuda_allreduce *ar = (hw_cuda_allreduce *)(uintptr_t)1;
    cr_assert_eq(hw_cuda_allreduce_create(&ar, devices, 2, 16, 1), HW_ERR);
    cr_expect_null(ar);
    if (present) {
        cr_expect(strstr(hw_error(), "replica 1") && strstr(hw_error(), "cuda:99 does not exist"), "%s", hw_error());
    } else {
        expect_no_gpu_message(hw_error());
    }
}

// ---- checkpoints ----

// The weights of a checkpoint, laid out as the model file says; the caller frees them.
static float *load_weights(const char *model_path, const char *ckpt_path, size_t *n) {
    hw_model model;
    cr_assert_eq(hw_model_load(&model, model_path), HW_OK, "%s", hw_error());
    float *w = calloc(model.n_weights, sizeof(float));
    cr_assert_not_null(w);
    cr_assert_eq(hw_ckpt_load(ckpt_path, &model, w, NULL), HW_OK, "%s", hw_error());
    *n = model.n_weights;
    hw_model_free(&model);
    return w;
}

// The weights a run with `seed` starts from (the trainers' initialisation).
static float *initial_weights(const char *model_path, uint64_t seed, size_t *n) {
    hw_model model;
    cr_assert_eq(hw_model_load(&model, model_path), HW_OK, "%s", hw_error());
    cr_assert_eq(hw_model_alloc_weights(&model), HW_OK, "%s", hw_error());
    hw_model_init_weights(&model, seed);
    float *w = malloc(model.n_weights * sizeof(float));
    cr_assert_not_null(w);
    memcpy(w, model.weights, model.n_weights * sizeof(float));
    *n = model.n_weights;
    hw_model_free(&model);
    return w;
}

// max |(a - w0) - (b - w0)| / max |b - w0|: how far update a is from update b, relative to b's size.
static double update_error(const float *a, const float *b, const float *w0, size_t n, double *size) {
    double diff = 0, big = 0;
    for (size_t i = 0; i < n; i++) {
        double da = (double)a[i] - w0[i], db = (double)b[i] - w0[i];
        if (fabs(da - db) > diff || isnan(da)) diff = isnan(da) ? INFINITY : fabs(da - db);
        if (fabs(db) > big) big = fabs(db);
    }
    *size = big;
    return big > 0 ? diff / big : diff;
}

// The percentage after "accuracy " on the first line that starts with `prefix`; NAN when none.
static double accuracy_on_line(const char *text, const char *prefix) {
    for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (strncmp(line, prefix, strlen(prefix)) != 0) continue;
        const char *end = strchr(line, '\n');
        const char *at = strstr(line, "accuracy ");
        if (at && (!end || at < end)) return strtod(at + strlen("accuracy "), NULL);
    }
    return NAN;
}

// A small network without dropout (so that splitting a batch changes no mask): conv, pool, linear.
static char *write_model(void) {
    char *path = e2e_path("small.model");
    const char *text = "input 1 28 28\nconv2d 4 5\nmaxpool2d 2\nrelu\nflatten\nlinear 10\nlog_softmax\n";
    write_bytes(path, text, strlen(text));
    return path;
}

// ---- DataParallel on GPUs ----

// One DataParallel run over `data` with the replicas `gpus` ("cpu:K": K CPU replicas), saving
// its final weights to `ckpt`.
static void run_dataparallel(const char *data, const char *model, const char *gpus, const char *env, const char *batch,
                             const char *momentum, const char *ckpt) {
    e2e_run_result r;
    if (strncmp(gpus, "cpu:", 4) == 0) {
        e2e_run_within(&r, 120, env, "--data", data, "--model", model, "--mode", "dataparallel", "--device", "cpu",
                       "--replicas", gpus + 4, "--batch-size", batch, "--lr", "0.1", "--momentum", momentum, "--save",
                       ckpt, "--overwrite", "--quiet");
    } else {
        e2e_run_within(&r, 120, env, "--data", data, "--model", model, "--mode", "dataparallel", "--gpus", gpus,
                       "--batch-size", batch, "--lr", "0.1", "--momentum", momentum, "--save", ckpt, "--overwrite",
                       "--quiet");
    }
    char how[128];
    cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "--gpus %s: %s; stderr: %s", gpus,
              e2e_describe_status(r.status, how, sizeof how), r.err);
    e2e_assert_left_nothing(&r);
}

// Compares the update of the run saved at `ckpt` with the reference update, within `tolerance`
// of the reference's size.
static void expect_same_update(const char *model, const char *ckpt, const float *reference, const float *w0,
                               double tolerance, const char *what) {
    size_t n = 0;
    float *w = load_weights(model, ckpt, &n);
    double size = 0;
    double err = update_error(w, reference, w0, n, &size);
    cr_expect_gt(size, 1e-4, "%s: the reference run did not move the weights", what);
    cr_expect_lt(err, tolerance, "%s: update differs by %g of its size", what, err);
    free(w);
}

Test(gpu_train, dataparallel_step_matches_one_replica, .init = e2e_setup, .fini = e2e_teardown) {
    int gpus = skip_without_gpu();
    char *data = e2e_synth_n("data", 1, 64, 32);  // one batch of 64: one step
    char *model = write_model();
    char *one = e2e_path("one.safetensors"), *two = e2e_path("two.safetensors");
    char *three = e2e_path("three.safetensors"), *cross = e2e_path("cross.safetensors");
    char *cross_copies = e2e_path("cross_copies.safetensors"), *cpu = e2e_path("cpu.safetensors");
    size_t n = 0;
    float *w0 = initial_weights(model, 1, &n);

    run_dataparallel(data, model, "0", NULL, "64", "0", one);
    size_t n_one = 0;
    float *reference = load_weights(model, one, &n_one);
    cr_assert_eq(n_one, n);
    // Two replicas on one GPU (32 + 32), three (22 + 21 + 21: weighted by chunk size).
    run_dataparallel(data, model, "0,0", NULL, "64", "0", two);
    expect_same_update(model, two, reference, w0, 1e-4, "--gpus 0,0");
    run_dataparallel(data, model, "0,0,0", NULL, "64", "0", three);
    expect_same_update(model, three, reference, w0, 1e-4, "--gpus 0,0,0");
    if (gpus >= 2) {  // NCCL across GPUs, then the peer copies across GPUs
        run_dataparallel(data, model, "0,1", NULL, "64", "0", cross);
        expect_same_update(model, cross, reference, w0, 1e-4, "--gpus 0,1");
        run_dataparallel(data, model, "0,1", "HOGWILD_NO_NCCL=1", "64", "0", cross_copies);
        expect_same_update(model, cross_copies, reference, w0, 1e-4, "--gpus 0,1 without NCCL");
    }
    // And the GPU step is the CPU's step, to float rounding (different summation orders).
    run_dataparallel(data, model, "cpu:1", NULL, "64", "0", cpu);
    size_t n_cpu = 0;
    float *cpu_w = load_weights(model, cpu, &n_cpu);
    double size = 0;
    cr_expect_lt(update_error(reference, cpu_w, w0, n, &size), 1e-3, "GPU and CPU steps differ");
    free(cpu_w);
    free(reference);
    free(w0);
}

Test(gpu_train, dataparallel_uneven_and_empty_chunks, .init = e2e_setup, .fini = e2e_teardown) {
    skip_without_gpu();
    char *data = e2e_synth_n("data", 1, 66, 32);
    char *model = write_model();
    char *one = e2e_path("one.safetensors"), *three = e2e_path("three.safetensors");
    char *one_b2 = e2e_path("one_b2.safetensors"), *three_b2 = e2e_path("three_b2.safetensors");
    size_t n = 0;
    float *w0 = initial_weights(model, 1, &n);
    // 66 = 64 + 2: the last batch of 2 leaves one of three replicas without a sample; momentum
    // carries the first step into the second.
    run_dataparallel(data, model, "0", NULL, "64", "0.5", one);
    run_dataparallel(data, model, "0,0,0", NULL, "64", "0.5", three);
    size_t m = 0;
    float *reference = load_weights(model, one, &m);
    expect_same_update(model, three, reference, w0, 1e-4, "batch 64 on 3 replicas, last batch of 2");
    free(reference);
    // More replicas than samples in every batch: 33 steps, each with an empty chunk.
    run_dataparallel(data, model, "0", NULL, "2", "0.5", one_b2);
    run_dataparallel(data, model, "0,0,0", NULL, "2", "0.5", three_b2);
    reference = load_weights(model, one_b2, &m);
    expect_same_update(model, three_b2, reference, w0, 1e-3, "batch 2 on 3 replicas");
    free(reference);
    free(w0);
}

// ---- Hogwild on one GPU ----

Test(gpu_train, hogwild_cuda_reaches_cpu_accuracy, .init = e2e_setup, .fini = e2e_teardown) {
    skip_without_gpu();
    char *data = e2e_synth_n("data", 1, 6000, 1000);
    e2e_run_result cpu, gpu;
    e2e_run_within(&cpu, 300, NULL, "--data", data, "--workers", "2", "--epochs", "2", "--lr", "0.05", "--quiet");
    e2e_assert_exit(&cpu, 0);
    e2e_run_within(&gpu, 300, NULL, "--data", data, "--device", "cuda", "--workers", "2", "--epochs", "2", "--lr",
                   "0.05", "--quiet", "--sharing-strategy", "file_system");
    e2e_assert_exit(&gpu, 0);
    e2e_assert_left_nothing(&gpu);
    double cpu_acc = accuracy_on_line(cpu.out, "done: "), gpu_acc = accuracy_on_line(gpu.out, "done: ");
    cr_assert(!isnan(cpu_acc) && !isnan(gpu_acc), "no result line: cpu: %s / cuda: %s", cpu.out, gpu.out);
    // Both sides race and draw different dropout masks: the same accuracy within a few points.
    cr_expect_gt(gpu_acc, 85.0, "GPU Hogwild reached %.2f%%", gpu_acc);
    cr_expect_gt(gpu_acc, cpu_acc - 5.0, "GPU Hogwild %.2f%% vs CPU %.2f%%", gpu_acc, cpu_acc);
    cr_expect(strstr(gpu.out, "epoch 2/2") != NULL, "stdout: %s", gpu.out);
}

Test(gpu_train, hogwild_cuda_checkpoint_loads_on_cpu, .init = e2e_setup, .fini = e2e_teardown) {
    skip_without_gpu();
    char *data = e2e_synth_n("data", 1, 2000, 500);
    char *ckpt = e2e_path("gpu.safetensors");
    e2e_run_result train, eval, resumed;
    e2e_run_within(&train, 120, NULL, "--data", data, "--model", e2e.mlp, "--device", "cuda", "--workers", "3", "--lr",
                   "0.05", "--save", ckpt, "--quiet");
    e2e_assert_exit(&train, 0);
    e2e_assert_left_nothing(&train);
    e2e_run(&eval, NULL, "--data", data, "--model", e2e.mlp, "--device", "cpu", "--eval-only", "--resume", ckpt);
    e2e_assert_exit(&eval, 0);
    double trained = accuracy_on_line(train.out, "done: "), evaluated = NAN;
    const char *at = strstr(eval.out, "accuracy ");
    if (at) evaluated = strtod(at + strlen("accuracy "), NULL);
    cr_assert(!isnan(trained) && !isnan(evaluated), "train: %s / eval: %s", train.out, eval.out);
    // The checkpoint is the end-of-training copy the GPU run evaluated: the same weights.
    cr_expect_eq(trained, evaluated, "GPU run %.2f%%, its checkpoint on the CPU %.2f%%", trained, evaluated);
    cr_expect(strstr(eval.out, "(epoch 1, 2000 samples seen)") != NULL, "eval: %s", eval.out);
    cr_expect_gt(trained, 50.0);
    // And it resumes on the GPU for a second epoch; the GPU trainers keep no optimizer state (the
    // default momentum's buffers restart), which stderr says in one line.
    e2e_run_within(&resumed, 120, NULL, "--data", data, "--model", e2e.mlp, "--device", "cuda", "--workers", "3",
                   "--lr", "0.05", "--resume", ckpt, "--epochs", "2", "--quiet");
    e2e_assert_exit(&resumed, 0);
    cr_expect(strstr(resumed.out, "epoch 2/2") != NULL, "stdout: %s", resumed.out);
    e2e_assert_contains(resumed.err, "the optimizer state restarts", "stderr");
    e2e_assert_contains(resumed.err, "the GPU trainers keep none", "stderr");
}

Test(gpu_train, hogwild_cuda_worker_failure_ends_the_run, .init = e2e_setup, .fini = e2e_teardown) {
    skip_without_gpu();
    char *data = e2e_synth_n("data", 1, 2000, 200);
    e2e_run_result r;
    e2e_run_within(&r, 120, "HOGWILD_FAIL_WORKER=1:3", "--data", data, "--device", "cuda", "--workers", "3", "--quiet",
                   "--sharing-strategy", "file_system");
    e2e_assert_exit(&r, 1);
    cr_expect(strstr(r.err, "worker 1 failed") && strstr(r.err, "injected failure after 3 batches"), "stderr: %s",
              r.err);
    e2e_assert_left_nothing(&r);
}

Test(gpu_train, hogwild_cuda_sigint_saves_and_cleans_up, .init = e2e_setup, .fini = e2e_teardown) {
    skip_without_gpu();
    char *data = e2e_synth_n("data", 1, 1000, 100);
    char *ckpt = e2e_path("interrupted.safetensors"), *metrics = e2e_path("metrics.csv");
    e2e_run_result r;
    e2e_interrupt_once_training(
        &r, (const char *const[]){"--data",      data,    "--model",  e2e.mlp,  "--device",     "cuda",
                                  "--workers",   "2",     "--epochs", "100000", "--eval-every", "500",
                                  "--metrics",   metrics, "--save",   ckpt,     "--quiet",      "--sharing-strategy",
                                  "file_system", NULL},
        metrics);
    size_t n = 0;
    float *w = load_weights(e2e.mlp, ckpt, &n);
    for (size_t i = 0; i < n; i++) cr_assert(isfinite(w[i]), "weight %zu is %g", i, w[i]);
    free(w);
}

// ---- a diverging run stops (issue #11, item 3) ----

// LeNet at --lr 100 on these digits goes to NaN within the first few hundred samples (on the
// simulated device too). The run stops at once: exit 1, the worker or replica named with the
// epoch, the samples and a lower --lr to try; the metrics keep the first row and end with the row
// that marks the run diverged; no checkpoint is written; no result line.
static void check_gpu_divergence(const char *const *mode_args, const char *who) {
    skip_without_gpu();
    char *data = e2e_synth_n("data", 1, 1000, 200);
    char *ckpt = e2e_path("diverged.safetensors"), *metrics = e2e_path("metrics.csv");
    const char *args[24] = {"--data", data, "--lr",      "100",   "--epochs", "2",
                            "--save", ckpt, "--metrics", metrics, "--quiet"};
    int n = 11;
    for (int i = 0; mode_args[i]; i++) args[n++] = mode_args[i];
    args[n] = NULL;
    e2e_run_result r;
    e2e_run_argv_within(&r, 120, NULL, args);
    e2e_assert_exit(&r, 1);
    e2e_assert_left_nothing(&r);
    e2e_assert_contains(r.err, who, "stderr");
    e2e_assert_contains(r.err, "training diverged in epoch 1/2 after ", "stderr");
    e2e_assert_diverged_loss(r.err, "its training loss");
    e2e_assert_contains(r.err, "Try a lower learning rate than this run's 100 (--lr)", "stderr");
    cr_expect_null(strstr(r.out, "done:"), "stdout: %s", r.out);
    cr_expect_null(strstr(r.out, "epoch 1/2"), "stdout: %s", r.out);
    long long said = -1;
    cr_assert_eq(sscanf(strstr(r.err, " after "), " after %lld samples seen", &said), 1, "stderr: %s", r.err);
    // Within the first epoch (1000 samples): a GPU worker reads its loss every 8 batches and at
    // its epoch's end, which for 500 samples in batches of 64 is the same point, so the run may
    // stop exactly at the epoch's end, before its epoch-end row.
    cr_expect(said > 0 && said <= 1000, "it stopped within the first epoch: %lld samples", said);
    e2e_metrics_row rows[16];
    int rows_n = e2e_read_metrics_of(metrics, rows, 16, 1);
    cr_expect_eq(rows_n, 2, "the starting point and the row of the divergence, got %d", rows_n);
    cr_expect_eq(rows[rows_n - 1].samples, said);
    cr_expect(!e2e_file_exists(ckpt), "diverged weights were saved to %s", ckpt);
}

Test(gpu_train, hogwild_cuda_divergence_stops_the_run, .init = e2e_setup, .fini = e2e_teardown) {
    check_gpu_divergence(
        (const char *const[]){"--device", "cuda", "--workers", "2", "--sharing-strategy", "file_system", NULL},
        "hogwild: worker ");
}

Test(gpu_train, dataparallel_cuda_divergence_stops_the_run, .init = e2e_setup, .fini = e2e_teardown) {
    check_gpu_divergence((const char *const[]){"--mode", "dataparallel", "--gpus", "0,0", NULL}, "hogwild: replica ");
}

// One replica's loss diverged, the other's not, their mean below the bound: the replica's is the
// loss reported (e2e_check_replica_loss_reported; the GPU team's step took the mean once).
Test(gpu_train, dataparallel_cuda_reports_the_diverged_replicas_loss, .init = e2e_setup, .fini = e2e_teardown) {
    skip_without_gpu();
    e2e_check_replica_loss_reported((const char *const[]){"--gpus", "0,0", NULL});
}

// ---- the all-reduce on its own ----

// Replica k's buffer holds (k + 1) * (1 + i / n) + 1 / (i + 1): sums that are not round numbers.
static float term(int k, size_t i, size_t n) {
    return (float)(k + 1) * (1.0f + (float)i / (float)n) + 1.0f / (float)(i + 1);
}

static void check_allreduce(const int *devices, int replicas, int allow_nccl, const char *method_part) {
    enum { N = 10007 };
    float *host = malloc(N * sizeof(float));
    cr_assert_not_null(host);
    float *buffers[8];
    hw_cuda_stream streams[8];
    for (int k = 0; k < replicas; k++) {
        cr_assert_eq(hw_cuda_select((hw_device){HW_DEVICE_CUDA, devices[k]}), HW_OK, "%s", hw_error());
        cr_assert_eq(hw_cuda_stream_create(&streams[k]), HW_OK, "%s", hw_error());
        cr_assert_eq(hw_cuda_malloc((void **)&buffers[k], N * sizeof(float)), HW_OK, "%s", hw_error());
        for (size_t i = 0; i < N; i++) host[i] = term(k, i, N);
        cr_assert_eq(hw_cuda_memcpy_h2d(buffers[k], host, N * sizeof(float), streams[k]), HW_OK, "%s", hw_error());
        cr_assert_eq(hw_cuda_stream_sync(streams[k]), HW_OK, "%s", hw_error());
    }
    hw_cuda_allreduce *ar = NULL;
    cr_assert_eq(hw_cuda_allreduce_create(&ar, devices, replicas, N, allow_nccl), HW_OK, "%s", hw_error());
    const char *method = hw_cuda_allreduce_method(ar);
    cr_expect(strstr(method, method_part) != NULL, "method: %s (expected %s)", method, method_part);
    // Twice: the second sum starts from the first one's result, on every replica alike.
    for (int round = 0; round < 2; round++) {
        cr_assert_eq(hw_cuda_allreduce_sum(ar, buffers, streams), HW_OK, "%s", hw_error());
    }
    for (int k = 0; k < replicas; k++) {
        cr_assert_eq(hw_cuda_select((hw_device){HW_DEVICE_CUDA, devices[k]}), HW_OK, "%s", hw_error());
        cr_assert_eq(hw_cuda_memcpy_d2h(host, buffers[k], N * sizeof(float), streams[k]), HW_OK, "%s", hw_error());
        cr_assert_eq(hw_cuda_stream_sync(streams[k]), HW_OK, "%s", hw_error());
        for (size_t i = 0; i < N; i++) {
            double want = 0;
            for (int j = 0; j < replicas; j++) want += term(j, i, N);
            want *= replicas;  // the second round sums K copies of the first round's sum
            cr_assert_lt(fabs(host[i] - want), 1e-5 * fabs(want), "%s: replica %d, element %zu: %g, want %g", method, k,
                         i, (double)host[i], want);
        }
    }
    hw_cuda_allreduce_free(ar);
    for (int k = 0; k < replicas; k++) {
        hw_cuda_select((hw_device){HW_DEVICE_CUDA, devices[k]});
        hw_cuda_free(buffers[k]);
        hw_cuda_stream_destroy(streams[k]);
    }
    free(host);
}

Test(gpu_train, allreduce_sums_onto_every_replica) {
    int gpus = skip_without_gpu();
    const int one[1] = {0}, same2[2] = {0, 0}, same3[3] = {0, 0, 0};
    check_allreduce(one, 1, 1, "none");
    check_allreduce(same2, 2, 1, "copies");
    check_allreduce(same3, 3, 1, "copies");
    if (gpus >= 2) {
        const int pair[2] = {0, 1}, mixed[3] = {0, 1, 0};
#ifdef HW_HAVE_NCCL
        check_allreduce(pair, 2, 1, "nccl");
#else
        check_allreduce(pair, 2, 1, "copies");
#endif
        check_allreduce(pair, 2, 0, "copies");
        check_allreduce(mixed, 3, 1, "copies");
    }
}

Test(gpu_train, scale_and_add_kernels) {
    skip_without_gpu();
    cr_assert_eq(hw_cuda_select((hw_device){HW_DEVICE_CUDA, 0}), HW_OK, "%s", hw_error());
    enum { N = 3001 };
    float x[N], y[N], out[N];
    for (int i = 0; i < N; i++) {
        x[i] = (float)i - 1000.0f;
        y[i] = 0.5f * (float)i;
    }
    float *dx = NULL, *dy = NULL;
    cr_assert_eq(hw_cuda_malloc((void **)&dx, sizeof x), HW_OK, "%s", hw_error());
    cr_assert_eq(hw_cuda_malloc((void **)&dy, sizeof y), HW_OK, "%s", hw_error());
    cr_assert_eq(hw_cuda_memcpy_h2d(dx, x, sizeof x, NULL), HW_OK, "%s", hw_error());
    cr_assert_eq(hw_cuda_memcpy_h2d(dy, y, sizeof y, NULL), HW_OK, "%s", hw_error());
    cr_assert_eq(hw_cuda_scale(NULL, dx, N, 0.25f), HW_OK, "%s", hw_error());
    cr_assert_eq(hw_cuda_add(NULL, dy, dx, N), HW_OK, "%s", hw_error());
    cr_assert_eq(hw_cuda_memcpy_d2h(out, dy, sizeof out, NULL), HW_OK, "%s", hw_error());
    cr_assert_eq(hw_cuda_stream_sync(NULL), HW_OK, "%s", hw_error());
    for (int i = 0; i < N; i++) cr_assert_eq(out[i], y[i] + x[i] * 0.25f, "element %d: %g", i, (double)out[i]);
    hw_cuda_free(dx);
    hw_cuda_free(dy);
}

// ---- learning-rate schedules on the GPU ----

// Checkpoint files a and b hold the same bytes.
static void expect_same_checkpoint(const char *a, const char *b, const char *why) {
    size_t na, nb;
    uint8_t *ba = e2e_own(read_bytes(a, &na)), *bb = e2e_own(read_bytes(b, &nb));
    cr_assert_eq(na, nb, "%s: %zu and %zu bytes", why, na, nb);
    cr_expect_eq(memcmp(ba, bb, na), 0, "%s: the checkpoints differ", why);
}

// GPU Hogwild's steps take the schedule's rate at the shared count, as the CPU's do: the rows'
// lr is hw_lr_at's; the captured steps (CUDA graphs) take each new rate as the steps launched one
// by one do (HOGWILD_CUDA_GRAPHS=0), bit for bit; and one worker stopped after epoch 1 and resumed
// (momentum 0, the MLP: no state a checkpoint lacks) ends with the unbroken run's weights.
Test(gpu_train, hogwild_cuda_follows_the_schedule_and_resumes_exactly, .init = e2e_setup, .fini = e2e_teardown) {
    skip_without_gpu();
    char *data = e2e_synth_n("data", 1, 2000, 200);
    char *whole = e2e_path("whole.safetensors"), *launched = e2e_path("launched.safetensors");
    char *cut = e2e_path("cut.safetensors"), *resumed = e2e_path("resumed.safetensors");
    char *csv = e2e_path("cosine.csv");
    e2e_run_result r;
    e2e_run_within(&r, 120, NULL, "--data", data, "--model", e2e.mlp, "--device", "cuda", "--workers", "1", "--epochs",
                   "2", "--momentum", "0", "--seed", "5", "--lr", "0.05", "--lr-schedule", "cosine", "--warmup", "300",
                   "--eval-every", "500", "--metrics", csv, "--save", whole, "--quiet");
    e2e_assert_exit(&r, 0);
    e2e_assert_left_nothing(&r);
    e2e_expect_lr_column(csv, "cosine", 300, 0.05, 2, 2000);
    e2e_run_within(&r, 120, "HOGWILD_CUDA_GRAPHS=0", "--data", data, "--model", e2e.mlp, "--device", "cuda",
                   "--workers", "1", "--epochs", "2", "--momentum", "0", "--seed", "5", "--lr", "0.05", "--lr-schedule",
                   "cosine", "--warmup", "300", "--save", launched, "--quiet");
    e2e_assert_exit(&r, 0);
    expect_same_checkpoint(whole, launched, "graphs and launches");
    // 2000 samples of batch 64: 32 batches an epoch; the worker fails after batch 33, the first
    // of epoch 2, once epoch 1's checkpoint is saved.
    e2e_run_within(&r, 120, "HOGWILD_FAIL_WORKER=0:33", "--data", data, "--model", e2e.mlp, "--device", "cuda",
                   "--workers", "1", "--epochs", "2", "--momentum", "0", "--seed", "5", "--lr", "0.05", "--lr-schedule",
                   "cosine", "--warmup", "300", "--save", cut, "--quiet");
    e2e_assert_exit(&r, 1);
    e2e_run_within(&r, 120, NULL, "--data", data, "--model", e2e.mlp, "--device", "cuda", "--workers", "1", "--epochs",
                   "2", "--momentum", "0", "--lr", "0.05", "--resume", cut, "--save", resumed, "--quiet");
    e2e_assert_exit(&r, 0);
    e2e_assert_left_nothing(&r);
    expect_same_checkpoint(whole, resumed, "resumed after epoch 1");
}

// DataParallel on the GPU hands every step the schedule's rate.
Test(gpu_train, dataparallel_cuda_follows_the_schedule, .init = e2e_setup, .fini = e2e_teardown) {
    skip_without_gpu();
    char *data = e2e_synth_n("data", 1, 2000, 200);
    char *csv = e2e_path("step.csv");
    e2e_run_result r;
    e2e_run_within(&r, 120, NULL, "--data", data, "--model", e2e.mlp, "--mode", "dataparallel", "--device", "cuda",
                   "--replicas", "2", "--epochs", "3", "--lr", "0.05", "--lr-schedule", "step:1:0.5", "--warmup", "100",
                   "--eval-every", "700", "--metrics", csv, "--quiet");
    e2e_assert_exit(&r, 0);
    e2e_assert_left_nothing(&r);
    e2e_expect_lr_column(csv, "step:1:0.5", 100, 0.05, 3, 2000);
}
