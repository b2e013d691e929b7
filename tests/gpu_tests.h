// What the GPU test suites (cuda, cuda_layers, gpu_train, mpi_gpu) share: the skip of a test that
// needs a GPU, buffers copied to and from the device, and the report printed after all tests: how
// many of the suite's tests did not run and why (skip_report.h), and which device the others ran
// on, so that neither a machine without a GPU nor the simulated device of make sim
// (tests/simcuda/) can pass for a GPU.
#ifndef HW_TESTS_GPU_TESTS_H
#define HW_TESTS_GPU_TESTS_H

#include "cuda/allreduce.h"  // the GPU backend's private headers, as the suites call them
#include "cuda/blas.h"
#include "cuda/device.h"
#include "cuda/dropout_mask.h"
#include "cuda/layer_ops.h"
#include "cuda/ranks.h"
#include "cuda/runner.h"
#include "hw/err.h"
#include "skip_report.h"

#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Skips the test, saying why, unless the machine has a CUDA device; the number of devices. (A
// build without CUDA does not build the GPU suites: tests/gpu/test_without_cuda.c runs instead.)
static inline int skip_without_gpu(void) {
    int count = 0;
    if (hw_cuda_device_count(&count) != HW_OK) cr_skip_test("%s", hw_error());
    return count;
}

// Skips unless this build has CUDA and the machine a device; then selects cuda:0.
static inline void need_gpu(void) {
    skip_without_gpu();
    cr_assert_eq(hw_cuda_select((hw_device){HW_DEVICE_CUDA, 0}), HW_OK, "%s", hw_error());
}

// ---- host/device buffers for the layer tests, on the legacy stream ----

// Asserts that a call of the project returned HW_OK, with its message otherwise.
#define OK(call) cr_assert_eq((call), HW_OK, "%s: %s", #call, hw_error())

// n floats on the current device, a copy of host (or unset with NULL); + 4 bytes: never a
// zero-byte allocation.
static inline float *to_device(const float *host, size_t n) {
    void *dev = NULL;
    OK(hw_cuda_malloc(&dev, n * sizeof(float) + 4));
    if (host) OK(hw_cuda_memcpy_h2d(dev, host, n * sizeof(float), NULL));
    OK(hw_cuda_stream_sync(NULL));
    return (float *)dev;
}

static inline void *bytes_to_device(const void *host, size_t n) {
    void *dev = NULL;
    OK(hw_cuda_malloc(&dev, n + 4));
    OK(hw_cuda_memcpy_h2d(dev, host, n, NULL));
    OK(hw_cuda_stream_sync(NULL));
    return dev;
}

// A host copy of n floats of device memory (malloc'd). Waits for the legacy stream only: work
// queued on a stream of hw_cuda_stream_create (which does not synchronise with it) must be
// waited for by the caller first.
static inline float *from_device(const float *dev, size_t n) {
    float *host = (float *)malloc(n * sizeof(float) + 4);
    cr_assert(host);
    OK(hw_cuda_stream_sync(NULL));
    OK(hw_cuda_memcpy_d2h(host, dev, n * sizeof(float), NULL));
    OK(hw_cuda_stream_sync(NULL));
    return host;
}

// A stream and a cuBLAS handle bound to it, as a runner has.
static inline hw_cuda_ctx make_ctx(void) {
    hw_cuda_ctx ctx;
    OK(hw_cuda_stream_create(&ctx.stream));
    OK(hw_cublas_create(&ctx.blas, ctx.stream));
    return ctx;
}

static inline void free_ctx(hw_cuda_ctx ctx) {
    hw_cublas_destroy(ctx.blas);
    hw_cuda_stream_destroy(ctx.stream);
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
