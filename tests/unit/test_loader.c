// Tests of hw_batch_fill and the loader, with and without the prefetch thread.
#include "data_util.h"
#include "hw/data.h"
#include "hw/err.h"

#include <criterion/criterion.h>
#include <math.h>
#include <time.h>

TestSuite(loader, .timeout = 30);

static const hw_normalize norm = {HW_MNIST_MEAN, HW_MNIST_STD};

Test(loader, batch_fill_normalises) {
    hw_dataset ds;
    make_pattern_dataset(&ds, 10, 3, 4, 5);
    int64_t idx[3] = {7, 0, 7};
    float x[3 * 12];
    uint8_t y[3];
    hw_batch_fill(&ds, idx, 3, norm, x, y);
    for (int i = 0; i < 3; i++) {
        cr_expect_eq(y[i], ds.labels[idx[i]]);
        for (int j = 0; j < 12; j++) {
            float want = ((float)ds.images[idx[i] * 12 + j] / 255.0f - HW_MNIST_MEAN) / HW_MNIST_STD;
            cr_expect_float_eq(x[i * 12 + j], want, 1e-5, "sample %d pixel %d", i, j);
        }
    }
    hw_dataset_free(&ds);
}

// Runs a whole pass and returns a copy of every batch, concatenated, and the batch sizes.
static int collect(hw_loader *loader, float *xs, uint8_t *ys, int *sizes, int d) {
    int batches = 0, offset = 0, size;
    const float *x;
    const uint8_t *y;
    while ((size = hw_loader_next(loader, &x, &y)) > 0) {
        memcpy(xs + (size_t)offset * (size_t)d, x, (size_t)size * (size_t)d * sizeof(float));
        memcpy(ys + offset, y, (size_t)size);
        sizes[batches++] = size;
        offset += size;
    }
    cr_expect_eq(hw_loader_next(loader, &x, &y), 0, "stays at 0 after the end");
    return batches;
}

Test(loader, prefetch_and_plain_yield_identical_batches_with_a_partial_last) {
    enum { N = 103, D = 12, BATCH = 10 };
    hw_dataset ds;
    make_pattern_dataset(&ds, 200, 3, 4, 10);
    int64_t idx[N];
    cr_assert_eq(hw_sampler_shard(idx, 200, 2, 1, 3, 5), HW_OK);  // 100 indices ...
    for (int i = 100; i < N; i++) idx[i] = i;                     // ... and 3 more
    static float xa[N * D], xb[N * D], want[N * D];
    uint8_t ya[N], yb[N], want_y[N];
    int sa[20], sb[20];
    hw_batch_fill(&ds, idx, N, norm, want, want_y);
    for (int prefetch = 0; prefetch <= 1; prefetch++) {
        hw_loader *loader;
        cr_assert_eq(hw_loader_open(&loader, &ds, idx, N, BATCH, norm, prefetch), HW_OK, "%s", hw_error());
        int batches = collect(loader, prefetch ? xb : xa, prefetch ? yb : ya, prefetch ? sb : sa, D);
        hw_loader_close(loader);
        cr_expect_eq(batches, 11);
        for (int b = 0; b < 10; b++) cr_expect_eq((prefetch ? sb : sa)[b], BATCH);
        cr_expect_eq((prefetch ? sb : sa)[10], 3, "the last, partial batch is kept");
    }
    cr_expect_eq(memcmp(xa, want, sizeof want), 0);
    cr_expect_eq(memcmp(xb, want, sizeof want), 0);
    cr_expect_eq(memcmp(ya, want_y, N), 0);
    cr_expect_eq(memcmp(yb, want_y, N), 0);
    hw_dataset_free(&ds);
}

static void sleep_us(long us) {
    struct timespec t = {0, us * 1000};
    nanosleep(&t, NULL);
}

Test(loader, batch_in_hand_is_not_overwritten) {
    // The caller lingers on every batch, so the thread is always ahead and waiting: the batch the
    // caller holds must still read the same after the pause.
    enum { N = 60, D = 12, BATCH = 4 };
    hw_dataset ds;
    make_pattern_dataset(&ds, N, 3, 4, 10);
    int64_t idx[N];
    cr_assert_eq(hw_sampler_shard(idx, N, 1, 0, 0, 1), HW_OK);
    hw_loader *loader;
    cr_assert_eq(hw_loader_open(&loader, &ds, idx, N, BATCH, norm, 1), HW_OK, "%s", hw_error());
    const float *x;
    const uint8_t *y;
    float copy[BATCH * D];
    int size, batch = 0;
    while ((size = hw_loader_next(loader, &x, &y)) > 0) {
        memcpy(copy, x, sizeof copy);
        sleep_us(300);
        cr_assert_eq(memcmp(copy, x, (size_t)size * D * sizeof(float)), 0, "batch %d changed under the caller", batch);
        cr_assert_eq(y[0], ds.labels[idx[batch * BATCH]]);
        batch++;
    }
    cr_expect_eq(batch, N / BATCH);
    hw_loader_close(loader);
    hw_dataset_free(&ds);
}

Test(loader, close_in_the_middle_of_a_pass) {
    hw_dataset ds;
    make_pattern_dataset(&ds, 500, 28, 28, 10);
    int64_t idx[500];
    cr_assert_eq(hw_sampler_shard(idx, 500, 1, 0, 0, 1), HW_OK);
    const float *x;
    const uint8_t *y;
    for (int round = 0; round < 50; round++) {
        hw_loader *loader;
        cr_assert_eq(hw_loader_open(&loader, &ds, idx, 500, 16, norm, 1), HW_OK, "%s", hw_error());
        for (int b = 0; b < round % 4; b++) cr_assert_eq(hw_loader_next(loader, &x, &y), 16);
        hw_loader_close(loader);  // the thread may be waiting, filling, or not started yet
    }
    hw_dataset_free(&ds);
}

Test(loader, bad_arguments) {
    hw_dataset ds;
    make_pattern_dataset(&ds, 10, 2, 2, 10);
    snprintf(ds.source, sizeof ds.source, "pattern");
    int64_t idx[3] = {1, 10, 2};
    hw_loader *loader;
    cr_expect_eq(hw_loader_open(&loader, &ds, idx, 3, 2, norm, 1), HW_ERR);
    cr_expect(strstr(hw_error(), "index 10 at position 1 is outside pattern") != NULL, "%s", hw_error());
    cr_expect_null(loader);
    cr_expect_eq(hw_loader_open(&loader, &ds, idx, 1, 0, norm, 0), HW_ERR);
    cr_expect(strstr(hw_error(), "batch size") != NULL, "%s", hw_error());
    const float *x;
    const uint8_t *y;
    // An empty pass is fine.
    cr_assert_eq(hw_loader_open(&loader, &ds, idx, 0, 4, norm, 1), HW_OK);
    cr_expect_eq(hw_loader_next(loader, &x, &y), 0);
    hw_loader_close(loader);
    hw_dataset_free(&ds);
}
