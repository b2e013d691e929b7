// What the GPU test suites (cuda, gpu_train) share: the skip of a test that needs a GPU, and the
// report printed after all tests: how many of the suite's tests did not run and why
// (skip_report.h), and which device the others ran on, so that neither a machine without a GPU nor the simulated device of make sim
// (tests/simcuda/) can pass for a GPU.
#ifndef HW_TESTS_GPU_TESTS_H
#define HW_TESTS_GPU_TESTS_H

#include "hw/cuda.h"
#include "hw/err.h"
#include "skip_report.h"

#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <stdio.h>
#include <string.h>

// Skips the test, saying why, unless the machine has a CUDA device; the number of devices. (A
// build without CUDA does not build the GPU suites: tests/test_without_cuda.c runs instead.)
static inline int skip_without_gpu(void) {
    int count = 0;
    if (hw_cuda_device_count(&count) != HW_OK) cr_skip_test("%s", hw_error());
    return count;
}

static inline void gpu_suite_report(const struct criterion_global_stats *stats, const char *name) {
    size_t skipped;
    size_t ran = skip_report(stats, name, &skipped);
    if (ran == skipped) return;
    // Runs after every test, so starting CUDA in this process here forks nothing after it.
    char device[256];
    if (hw_cuda_describe((hw_device){HW_DEVICE_CUDA, 0}, device, sizeof device) != HW_OK) return;
    if (strstr(device, "simulated")) {
        fprintf(stderr, "[NOTE] %s: %zu tests ran on the simulated CUDA device (host), not a GPU: %s\n", name,
                ran - skipped, device);
    } else {
        fprintf(stderr, "[NOTE] %s: %zu tests ran on %s\n", name, ran - skipped, device);
    }
}

#endif
