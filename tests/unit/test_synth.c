// Tests of the synthetic digits: determinism, shape, balance, and that they are learnable but
// not trivially (checked with an inline softmax regression, as the nn module is separate).
#include "data_util.h"
#include "hw/data.h"
#include "hw/err.h"

#include <criterion/criterion.h>
#include <math.h>

TestSuite(synth, .timeout = 60);

Test(synth, deterministic_in_the_seed_and_prefix_stable) {
    hw_dataset a, b, c;
    cr_assert_eq(hw_synth_generate(&a, 300, 11), HW_OK, "%s", hw_error());
    cr_assert_eq(hw_synth_generate(&b, 100, 11), HW_OK);
    cr_assert_eq(hw_synth_generate(&c, 300, 12), HW_OK);
    cr_expect_eq(memcmp(a.images, b.images, 100 * 784), 0, "the first samples do not depend on n");
    cr_expect_eq(memcmp(a.labels, b.labels, 100), 0);
    cr_expect_neq(memcmp(a.images, c.images, 300 * 784), 0, "another seed, other images");
    hw_dataset_free(&b);
    cr_assert_eq(hw_synth_generate(&b, 300, 11), HW_OK);
    cr_expect_eq(memcmp(a.images, b.images, 300 * 784), 0, "same seed, same images");
    hw_dataset_free(&a);
    hw_dataset_free(&b);
    hw_dataset_free(&c);
}

Test(synth, looks_like_mnist) {
    hw_dataset ds;
    cr_assert_eq(hw_synth_generate(&ds, 5000, 3), HW_OK);
    cr_expect_eq(ds.height, 28);
    cr_expect_eq(ds.width, 28);
    cr_expect_eq(ds.channels, 1);
    cr_expect_eq(ds.n_classes, 10);
    int counts[10] = {0};
    for (int i = 0; i < 5000; i++) {
        cr_assert_lt(ds.labels[i], 10);
        counts[ds.labels[i]]++;
        int ink = 0, top = 0, border = 0;
        for (int p = 0; p < 784; p++) {
            ink += ds.images[i * 784 + p] > 128;
            if (ds.images[i * 784 + p] > top) top = ds.images[i * 784 + p];
            int x = p % 28, y = p / 28;
            if ((x < 1 || x > 26 || y < 1 || y > 26) && ds.images[i * 784 + p] > 128) border++;
        }
        cr_assert(top >= 200, "sample %d has no full ink (max %d)", i, top);
        cr_assert(ink >= 10 && ink <= 350, "sample %d: %d ink pixels", i, ink);
        cr_assert_leq(border, 6, "sample %d runs off the image", i);
    }
    for (int c = 0; c < 10; c++) cr_expect(counts[c] > 400 && counts[c] < 600, "class %d: %d", c, counts[c]);
    hw_normalize s = hw_dataset_stats(&ds);
    // MNIST: mean 0.13, std 0.31.
    cr_expect(s.mean > 0.07f && s.mean < 0.2f, "mean %f", (double)s.mean);
    cr_expect(s.std > 0.2f && s.std < 0.4f, "std %f", (double)s.std);
    hw_dataset_free(&ds);
}

// One pass of plain SGD on softmax regression over `train`, then the accuracy on `test`.
static double softmax_regression_accuracy(const hw_dataset *train, const hw_dataset *test) {
    enum { D = 784, K = 10 };
    static float w[K][D];
    float b[K] = {0};
    memset(w, 0, sizeof w);
    float x[D], p[K];
    const float lr = 0.05f;
    for (int64_t i = 0; i < train->n; i++) {
        for (int j = 0; j < D; j++) x[j] = train->images[i * D + j] / 255.0f;
        float top = -INFINITY, sum = 0;
        for (int k = 0; k < K; k++) {
            p[k] = b[k];
            for (int j = 0; j < D; j++) p[k] += w[k][j] * x[j];
            if (p[k] > top) top = p[k];
        }
        for (int k = 0; k < K; k++) sum += p[k] = expf(p[k] - top);
        for (int k = 0; k < K; k++) {
            float g = p[k] / sum - (k == train->labels[i] ? 1.0f : 0.0f);
            b[k] -= lr * g;
            for (int j = 0; j < D; j++) w[k][j] -= lr * g * x[j];
        }
    }
    int correct = 0;
    for (int64_t i = 0; i < test->n; i++) {
        int best = 0;
        float best_score = -INFINITY;
        for (int k = 0; k < K; k++) {
            float s = b[k];
            for (int j = 0; j < D; j++) s += w[k][j] * (test->images[i * D + j] / 255.0f);
            if (s > best_score) {
                best_score = s;
                best = k;
            }
        }
        correct += best == test->labels[i];
    }
    return (double)correct / (double)test->n;
}

Test(synth, learnable_but_not_trivially) {
    hw_dataset train, test;
    cr_assert_eq(hw_synth_generate(&train, 10000, 1), HW_OK);
    cr_assert_eq(hw_synth_generate(&test, 2000, 2), HW_OK);
    double accuracy = softmax_regression_accuracy(&train, &test);
    cr_log_info("synthetic digits: softmax regression, one pass over 10000, held-out accuracy %.4f", accuracy);
    fprintf(stderr, "synth: softmax regression one pass over 10000 samples: held-out accuracy %.4f\n", accuracy);
    cr_expect_gt(accuracy, 0.75, "a linear model should learn the digits: %.4f", accuracy);
    cr_expect_lt(accuracy, 0.99, "too easy for a linear model: %.4f", accuracy);
    hw_dataset_free(&train);
    hw_dataset_free(&test);
}

Test(synth, write_four_files_that_dataset_open_reads) {
    char dir[512];
    make_temp_dir(dir, sizeof dir);
    char sub[600];
    snprintf(sub, sizeof sub, "%s/synthetic", dir);
    cr_assert_eq(hw_synth_write(sub, 120, 40, 9), HW_OK, "%s", hw_error());
    hw_dataset train, test, ref;
    cr_assert_eq(hw_dataset_open(sub, &train, &test), HW_OK, "%s", hw_error());
    cr_expect_eq(train.n, 120);
    cr_expect_eq(test.n, 40);
    cr_expect_eq(train.n_classes, 10);
    cr_assert_eq(hw_synth_generate(&ref, 120, 9), HW_OK);
    cr_expect_eq(memcmp(train.images, ref.images, 120 * 784), 0, "train is hw_synth_generate(seed)");
    cr_expect_neq(memcmp(test.images, ref.images, 40 * 784), 0, "test comes from other streams");
    hw_dataset_free(&train);
    hw_dataset_free(&test);
    hw_dataset_free(&ref);
    cr_expect_eq(hw_synth_write(sub, 0, 10, 9), HW_ERR);
    cr_expect(strstr(hw_error(), "positive") != NULL, "%s", hw_error());
    rm_tree(dir);
}
