// A build without CUDA (make CUDA=0, or no nvcc): it has no GPU part, and src/train/gpu_plugin.c
// refuses every GPU run. `--device cuda`, `--device cuda:N` and `--gpus` must fail in the parent,
// before any worker starts, with exit 1 and a message naming the build, leaving no process and no
// shared memory behind. Built only without CUDA (the Makefile); CUDA builds run test_gpu_train.c.
#include "e2e_util.h"

#include <criterion/criterion.h>
#include <string.h>

static void expect_without_cuda_message(const char *err) {
    cr_expect(strstr(err, "built without CUDA") != NULL, "stderr: %s", err);
    // The parent's own message, not a worker's report of it.
    cr_expect(strstr(err, "hogwild: ") == err, "stderr: %s", err);
    cr_expect(strstr(err, "worker") == NULL, "stderr: %s", err);
}

Test(without_cuda, hogwild_on_a_gpu_is_refused_by_the_build, .init = e2e_setup, .fini = e2e_teardown) {
    char *data = e2e_synth_n("data", 1, 1000, 200);
    e2e_run_result r;
    e2e_run(&r, NULL, "--data", data, "--device", "cuda", "--workers", "2", "--quiet", "--sharing-strategy",
            "file_system");
    e2e_assert_exit(&r, 1);
    expect_without_cuda_message(r.err);
    cr_expect(strstr(r.err, "the device cuda:0: ") != NULL, "stderr: %s", r.err);
    cr_expect(strstr(r.err, "train on the CPU (--device)") != NULL, "stderr: %s", r.err);
    e2e_assert_left_nothing(&r);
    e2e_run(&r, NULL, "--data", data, "--device", "cuda:99", "--workers", "2", "--quiet");
    e2e_assert_exit(&r, 1);
    expect_without_cuda_message(r.err);
    e2e_assert_left_nothing(&r);
}

Test(without_cuda, dataparallel_on_gpus_is_refused_by_the_build, .init = e2e_setup, .fini = e2e_teardown) {
    char *data = e2e_synth_n("data", 1, 1000, 200);
    e2e_run_result r;
    e2e_run(&r, NULL, "--data", data, "--mode", "dataparallel", "--gpus", "0,99", "--quiet");
    e2e_assert_exit(&r, 1);
    expect_without_cuda_message(r.err);
    cr_expect(strstr(r.err, "DataParallel") != NULL, "stderr: %s", r.err);
    e2e_assert_left_nothing(&r);
}
