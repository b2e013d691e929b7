// Tests of the sparsity statistics: every one against a brute-force count (every pair of
// examples intersected) on small random sets that have both busy features (the bitset path) and
// rare ones (the posting-list path), the sampled estimate's guarantees, and small cases by hand.
#include "hw/err.h"
#include "hw/rng.h"
#include "hw/sparse_data.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

TestSuite(sparse_stats, .timeout = 60);

// n random examples over dim features: feature v in an example with probability p_v, where a few
// features are busy (0.3 to 0.8) and the rest rare; about one example in 20 is empty.
static void random_set(hw_sparse_set *s, int64_t n, int64_t dim, uint64_t seed) {
    memset(s, 0, sizeof *s);
    hw_rng rng;
    hw_rng_seed(&rng, seed, 3);
    double *p = malloc((size_t)dim * sizeof *p);
    for (int64_t v = 0; v < dim; v++)
        p[v] = v % 17 == 3 ? 0.3 + 0.5 * hw_rng_uniform(&rng) : 0.02 * hw_rng_uniform(&rng);
    s->row_start = malloc((size_t)(n + 1) * sizeof *s->row_start);
    s->index = malloc((size_t)(n * dim) * sizeof *s->index);
    s->value = malloc((size_t)(n * dim) * sizeof *s->value);
    s->label = calloc((size_t)n, sizeof *s->label);
    s->row_start[0] = 0;
    for (int64_t e = 0; e < n; e++) {
        int empty = hw_rng_uniform(&rng) < 0.05f;
        for (int64_t v = 0; v < dim && !empty; v++) {
            if (hw_rng_uniform(&rng) < p[v]) {
                s->index[s->nnz] = (int32_t)v;
                s->value[s->nnz++] = 1;
            }
        }
        s->row_start[e + 1] = s->nnz;
    }
    s->n = n;
    s->dim = dim;
    free(p);
}

static int intersects(const hw_sparse_set *s, int64_t a, int64_t b) {
    for (int64_t i = s->row_start[a]; i < s->row_start[a + 1]; i++) {
        for (int64_t j = s->row_start[b]; j < s->row_start[b + 1]; j++) {
            if (s->index[i] == s->index[j]) return 1;
        }
    }
    return 0;
}

static int64_t brute_conflicts(const hw_sparse_set *s, int64_t e) {
    int64_t count = 0;
    for (int64_t f = 0; f < s->n; f++) count += intersects(s, e, f);
    return count;
}

static void check_against_brute_force(int64_t n, int64_t dim, uint64_t seed) {
    hw_sparse_set s;
    random_set(&s, n, dim, seed);
    hw_sparse_stats st;
    cr_assert_eq(hw_sparse_stats_compute(&st, &s, 0, 1), HW_OK, "%s", hw_error());
    int64_t omega = 0, feature_max = 0, unused = 0, best = 0, upper = 0;
    int64_t *degree = calloc((size_t)dim, sizeof *degree);
    for (int64_t e = 0; e < n; e++) {
        int64_t k = s.row_start[e + 1] - s.row_start[e];
        if (k > omega) omega = k;
        for (int64_t i = s.row_start[e]; i < s.row_start[e + 1]; i++) degree[s.index[i]]++;
    }
    for (int64_t v = 0; v < dim; v++) {
        if (degree[v] > feature_max) feature_max = degree[v];
        unused += degree[v] == 0;
    }
    for (int64_t e = 0; e < n; e++) {
        int64_t c = brute_conflicts(&s, e);
        if (c > best) best = c;
        if (s.row_start[e + 1] > s.row_start[e]) {
            int64_t b = 1;
            for (int64_t i = s.row_start[e]; i < s.row_start[e + 1]; i++) b += degree[s.index[i]] - 1;
            if (b > upper) upper = b;
        }
    }
    if (upper > n) upper = n;
    cr_expect_eq(st.n, n);
    cr_expect_eq(st.nnz, s.nnz);
    cr_expect_eq(st.omega, omega);
    cr_expect_eq(st.omega_example >= 0 && st.omega_example < n, 1);
    cr_expect_eq(s.row_start[st.omega_example + 1] - s.row_start[st.omega_example], omega);
    cr_expect_eq(st.feature_max, feature_max);
    cr_expect_eq(degree[st.delta_feature], feature_max);
    cr_expect_eq(st.features_unused, unused);
    cr_expect_eq(st.delta, (double)feature_max / n);
    cr_expect_eq(st.nnz_per_example_mean, (double)s.nnz / n);
    cr_expect_eq(st.nnz_per_feature_mean, (double)s.nnz / dim);
    cr_expect_eq(st.rho_exact, 1);
    cr_expect_eq(st.rho_examples, n);
    cr_expect_eq(st.rho, (double)best / n, "rho %g, brute force %g (n %lld, seed %llu)", st.rho, (double)best / n,
                 (long long)n, (unsigned long long)seed);
    cr_expect_eq(brute_conflicts(&s, st.rho_example), best, "the example named reaches rho");
    cr_expect_eq(st.rho_upper, (double)upper / n);
    cr_expect_eq(st.rho_lower, st.rho);
    cr_expect_geq(st.rho, st.delta, "rho >= Delta always");

    // Sampled: the max over the sample is one example's exact count, below rho, within the bounds.
    hw_sparse_stats sampled;
    cr_assert_eq(hw_sparse_stats_compute(&sampled, &s, n / 4, 9), HW_OK);
    cr_expect_eq(sampled.rho_exact, 0);
    cr_expect_eq(sampled.rho_examples, n / 4);
    cr_expect_leq(sampled.rho, st.rho);
    cr_expect_eq(sampled.rho, (double)brute_conflicts(&s, sampled.rho_example) / n);
    cr_expect_leq(sampled.rho_lower, st.rho);
    cr_expect_geq(sampled.rho_upper, st.rho);
    cr_expect_eq(sampled.rho_lower, fmax(sampled.rho, sampled.delta));
    cr_expect_eq(sampled.delta, st.delta, "Delta is exact even when rho is sampled");
    free(degree);
    hw_sparse_set_free(&s);
}

Test(sparse_stats, every_statistic_against_brute_force) {
    check_against_brute_force(200, 60, 1);
    check_against_brute_force(301, 40, 2);   // n not a multiple of 64
    check_against_brute_force(130, 500, 3);  // mostly rare features
    check_against_brute_force(64, 17, 4);
    check_against_brute_force(1000, 80, 5);  // hot features' bitsets of 16 words
}

Test(sparse_stats, small_cases_by_hand) {
    // Examples {0, 1}, {1}, {2}, {} over 5 features (3 and 4 unused).
    int64_t row_start[5] = {0, 2, 3, 4, 4};
    int32_t index[4] = {0, 1, 1, 2};
    float value[4] = {1, 1, 1, 1}, label[4] = {0};
    hw_sparse_set s = {
        .n = 4, .nnz = 4, .dim = 5, .row_start = row_start, .index = index, .value = value, .label = label};
    hw_sparse_stats st;
    cr_assert_eq(hw_sparse_stats_compute(&st, &s, 0, 1), HW_OK);
    cr_expect_eq(st.omega, 2);
    cr_expect_eq(st.omega_example, 0);
    cr_expect_eq(st.feature_max, 2);
    cr_expect_eq(st.delta_feature, 1);
    cr_expect_eq(st.delta, 0.5);
    cr_expect_eq(st.features_unused, 2);
    cr_expect_eq(st.rho, 0.5, "{0, 1} meets itself and {1}");
    cr_expect_eq(st.rho_upper, 0.5);
    cr_expect_eq(st.nnz_per_example_mean, 1.0);
    cr_expect_eq(st.nnz_per_feature_mean, 0.8);
    // No examples at all: zeros, nothing to fail.
    hw_sparse_set empty = {.dim = 3};
    cr_assert_eq(hw_sparse_stats_compute(&st, &empty, 0, 1), HW_OK);
    cr_expect_eq(st.rho, 0);
    cr_expect_eq(st.omega, 0);
}

Test(sparse_stats, ratings_union_bound_is_exact_without_repeats) {
    // 3 users x 3 items, every pair once: each rating meets the 3 of its user and the 3 of its
    // item, itself counted once: 5 of 9.
    int64_t row_start[10];
    int32_t index[18];
    float value[18], label[9] = {0};
    for (int e = 0; e < 9; e++) {
        row_start[e] = 2 * e;
        index[2 * e] = e / 3;
        index[2 * e + 1] = 3 + e % 3;
        value[2 * e] = value[2 * e + 1] = 1;
    }
    row_start[9] = 18;
    hw_sparse_set s = {.n = 9,
                       .nnz = 18,
                       .dim = 6,
                       .row_start = row_start,
                       .index = index,
                       .value = value,
                       .label = label,
                       .n_users = 3,
                       .n_items = 3};
    hw_sparse_stats st;
    cr_assert_eq(hw_sparse_stats_compute(&st, &s, 0, 1), HW_OK);
    cr_expect_eq(st.rho, 5.0 / 9);
    cr_expect_eq(st.rho_upper, 5.0 / 9);
    cr_expect_eq(st.delta, 3.0 / 9);
}
