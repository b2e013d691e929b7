// Tests of the synthetic sparse data: deterministic in the seed and stable in the set's size, the
// shape of every row, labels from the planted weights with the noise asked for, the Zipf law, the
// files (read back through the dataset folder, written whole or not at all), the ratings, and the
// RCV1-shaped preset's statistics.
#include "data_util.h"
#include "hw/err.h"
#include "hw/sparse_data.h"

#include <criterion/criterion.h>
#include <math.h>

static char dir[512];
static void setup(void) { make_temp_dir(dir, sizeof dir); }
static void teardown(void) { rm_tree(dir); }

TestSuite(sparse_synth, .init = setup, .fini = teardown, .timeout = 120);

static int same_rows(const hw_sparse_set *a, const hw_sparse_set *b, int64_t rows) {
    int64_t nnz = a->row_start[rows];
    return b->row_start[rows] == nnz && memcmp(a->row_start, b->row_start, (size_t)(rows + 1) * 8) == 0 &&
           memcmp(a->index, b->index, (size_t)nnz * 4) == 0 && memcmp(a->value, b->value, (size_t)nnz * 4) == 0 &&
           memcmp(a->label, b->label, (size_t)rows * 4) == 0;
}

static hw_sparse_synth_params small_params(void) {
    hw_sparse_synth_params p;
    hw_sparse_synth_defaults(&p);
    p.n_train = 3000;
    p.n_test = 500;
    p.dim = 300;
    p.nnz = 15;
    p.zipf = 0.8;
    p.noise = 0;
    p.seed = 21;
    return p;
}

Test(sparse_synth, deterministic_in_the_seed_and_prefix_stable) {
    hw_sparse_synth_params p = small_params();
    hw_sparse_set a, at, b, bt;
    float *wa = malloc(300 * sizeof *wa), *wb = malloc(300 * sizeof *wb);
    cr_assert_eq(hw_sparse_synth_generate(&p, &a, &at, wa), HW_OK, "%s", hw_error());
    cr_assert_eq(hw_sparse_synth_generate(&p, &b, &bt, wb), HW_OK);
    cr_expect(same_rows(&a, &b, a.n) && same_rows(&at, &bt, at.n), "same seed, same sets");
    cr_expect_eq(memcmp(wa, wb, 300 * sizeof *wa), 0);
    hw_sparse_set_free(&b);
    hw_sparse_set_free(&bt);
    p.n_train = 1000;
    p.n_test = 100;
    cr_assert_eq(hw_sparse_synth_generate(&p, &b, &bt, wb), HW_OK);
    cr_expect(same_rows(&a, &b, 1000), "the first examples do not depend on the size");
    cr_expect(same_rows(&at, &bt, 100), "nor the test set's on the training set's size");
    hw_sparse_set_free(&b);
    hw_sparse_set_free(&bt);
    p.seed = 22;
    cr_assert_eq(hw_sparse_synth_generate(&p, &b, &bt, wb), HW_OK);
    cr_expect(!same_rows(&a, &b, 1000), "another seed, other examples");
    cr_expect(!same_rows(&a, &at, 100), "train and test are different draws");
    hw_sparse_set_free(&a);
    hw_sparse_set_free(&at);
    hw_sparse_set_free(&b);
    hw_sparse_set_free(&bt);
    free(wa);
    free(wb);
}

static void check_rows(const hw_sparse_set *s, const hw_sparse_synth_params *p, const float *w, int *flipped) {
    cr_assert_eq(s->dim, p->dim);
    cr_assert_eq(s->nnz, s->n * p->nnz);
    cr_expect_eq(s->label_kind, HW_LABEL_BINARY);
    *flipped = 0;
    for (int64_t e = 0; e < s->n; e++) {
        cr_assert_eq(s->row_start[e + 1] - s->row_start[e], p->nnz);
        double norm = 0, margin = 0;
        for (int64_t k = s->row_start[e]; k < s->row_start[e + 1]; k++) {
            cr_assert(s->index[k] >= 0 && s->index[k] < p->dim);
            if (k > s->row_start[e]) cr_assert_gt(s->index[k], s->index[k - 1], "distinct, increasing");
            cr_assert_gt(s->value[k], 0.0f);
            norm += (double)s->value[k] * s->value[k];
            margin += (double)w[s->index[k]] * s->value[k];
        }
        cr_assert(fabs(norm - 1) < 1e-5, "example %lld: norm %g", (long long)e, norm);
        cr_assert(s->label[e] == 1.0f || s->label[e] == -1.0f);
        *flipped += s->label[e] != (margin >= 0 ? 1.0f : -1.0f);
    }
}

Test(sparse_synth, rows_and_labels_from_the_planted_weights) {
    hw_sparse_synth_params p = small_params();
    hw_sparse_set train, test;
    float *w = malloc(300 * sizeof *w);
    cr_assert_eq(hw_sparse_synth_generate(&p, &train, &test, w), HW_OK, "%s", hw_error());
    int flipped;
    check_rows(&train, &p, w, &flipped);
    cr_expect_eq(flipped, 0, "no noise: every label is the sign of w* . x");
    int positive = 0;
    for (int64_t e = 0; e < train.n; e++) positive += train.label[e] > 0;
    cr_expect(positive > 600 && positive < 2400, "both classes: %d of 3000 positive", positive);
    double mean = 0, sq = 0;
    for (int v = 0; v < 300; v++) mean += w[v] / 300.0, sq += (double)w[v] * w[v] / 300.0;
    cr_expect(fabs(mean) < 0.2 && fabs(sq - 1) < 0.25, "w* standard normal: mean %g, mean square %g", mean, sq);
    hw_sparse_set_free(&train);
    hw_sparse_set_free(&test);

    p.noise = 0.2;
    p.n_train = 20000;
    cr_assert_eq(hw_sparse_synth_generate(&p, &train, &test, w), HW_OK);
    check_rows(&train, &p, w, &flipped);
    // 20000 draws of probability 0.2: standard deviation 57.
    cr_expect(abs(flipped - 4000) < 300, "%d of 20000 labels flipped, expected about 4000", flipped);
    hw_sparse_set_free(&train);
    hw_sparse_set_free(&test);

    // Every feature in every example.
    p.nnz = 300;
    p.n_train = 10;
    cr_assert_eq(hw_sparse_synth_generate(&p, &train, &test, w), HW_OK, "%s", hw_error());
    check_rows(&train, &p, w, &flipped);
    hw_sparse_set_free(&train);
    hw_sparse_set_free(&test);
    free(w);
}

Test(sparse_synth, feature_frequencies_follow_the_zipf_law) {
    // One nonzero per example: its feature is one draw from the law, p_k = k^-s / H.
    hw_sparse_synth_params p = small_params();
    p.dim = 50;
    p.nnz = 1;
    p.zipf = 1.1;
    p.n_train = 200000;
    hw_sparse_set train, test;
    cr_assert_eq(hw_sparse_synth_generate(&p, &train, &test, NULL), HW_OK, "%s", hw_error());
    int64_t counts[50] = {0};
    for (int64_t k = 0; k < train.nnz; k++) counts[train.index[k]]++;
    // The ranks are given to ids by a permutation: compare the sorted counts.
    for (int i = 0; i < 50; i++) {
        for (int j = i + 1; j < 50; j++) {
            if (counts[j] > counts[i]) {
                int64_t t = counts[i];
                counts[i] = counts[j];
                counts[j] = t;
            }
        }
    }
    double total = 0;
    for (int k = 1; k <= 50; k++) total += pow(k, -1.1);
    for (int k = 1; k <= 50; k++) {
        double expected = 200000 * pow(k, -1.1) / total, sd = sqrt(expected);
        // Sorting the counts moves neighbours of nearly equal probability past each other: 6 sd.
        cr_expect(fabs((double)counts[k - 1] - expected) < 6 * sd + 0.01 * expected, "rank %d: %lld, expected %.0f", k,
                  (long long)counts[k - 1], expected);
    }
    hw_sparse_set_free(&train);
    hw_sparse_set_free(&test);
}

// Two features per example, drawn without replacement: rank k is in an example with probability
// p_k + sum_{j != k} p_j p_k / (1 - p_j). Checked on a mild law (drawn again on a repeat) and on
// a steep one (the Fenwick tree: repeats would take a thousand draws).
static void check_pairs(int64_t dim, double s, int64_t n) {
    hw_sparse_synth_params p = small_params();
    p.dim = dim;
    p.nnz = 2;
    p.zipf = s;
    p.n_train = n;
    hw_sparse_set train, test;
    cr_assert_eq(hw_sparse_synth_generate(&p, &train, &test, NULL), HW_OK, "%s", hw_error());
    int64_t *counts = calloc((size_t)dim, sizeof *counts);
    for (int64_t k = 0; k < train.nnz; k++) counts[train.index[k]]++;
    for (int64_t e = 0; e < n; e++) cr_assert_neq(train.index[2 * e], train.index[2 * e + 1]);
    for (int64_t i = 0; i < dim; i++) {
        for (int64_t j = i + 1; j < dim; j++) {
            if (counts[j] > counts[i]) {
                int64_t t = counts[i];
                counts[i] = counts[j];
                counts[j] = t;
            }
        }
    }
    double total = 0;
    for (int64_t k = 1; k <= dim; k++) total += pow((double)k, -s);
    for (int64_t k = 0; k < dim; k++) {
        double pk = pow((double)(k + 1), -s) / total, inclusion = pk;
        for (int64_t j = 0; j < dim; j++) {
            double pj = pow((double)(j + 1), -s) / total;
            if (j != k) inclusion += pj * pk / (1 - pj);
        }
        double expected = n * inclusion, sd = sqrt(expected * (1 - inclusion)) + 1;
        cr_expect(fabs((double)counts[k] - expected) < 6 * sd + 0.01 * expected,
                  "law s = %g, rank %lld: in %lld examples, expected %.1f", s, (long long)k + 1, (long long)counts[k],
                  expected);
    }
    free(counts);
    hw_sparse_set_free(&train);
    hw_sparse_set_free(&test);
}

Test(sparse_synth, features_drawn_without_replacement_by_either_path) {
    check_pairs(40, 0.7, 60000);
    check_pairs(3, 10, 60000);
    // Dense rows from a steep law: half the features in every example.
    hw_sparse_synth_params p = small_params();
    p.dim = 400;
    p.nnz = 200;
    p.zipf = 2;
    p.n_train = 300;
    hw_sparse_set train, test;
    float *w = malloc(400 * sizeof *w);
    cr_assert_eq(hw_sparse_synth_generate(&p, &train, &test, w), HW_OK, "%s", hw_error());
    int flipped;
    check_rows(&train, &p, w, &flipped);
    cr_expect_eq(flipped, 0);
    hw_sparse_set_free(&train);
    hw_sparse_set_free(&test);
    free(w);
}

Test(sparse_synth, parameters_out_of_range_are_refused) {
    hw_sparse_synth_params good = small_params(), p;
    hw_sparse_set a, b;
    p = good, p.nnz = 301;
    cr_expect_eq(hw_sparse_synth_generate(&p, &a, &b, NULL), HW_ERR);
    cr_expect(strstr(hw_error(), "nonzeros per example must be 1 to the dimension 300, got 301") != NULL, "%s",
              hw_error());
    p = good, p.nnz = 0;
    cr_expect_eq(hw_sparse_synth_generate(&p, &a, &b, NULL), HW_ERR);
    p = good, p.noise = 0.6;
    cr_expect_eq(hw_sparse_synth_generate(&p, &a, &b, NULL), HW_ERR);
    cr_expect(strstr(hw_error(), "label noise") != NULL, "%s", hw_error());
    p = good, p.zipf = -1;
    cr_expect_eq(hw_sparse_synth_generate(&p, &a, &b, NULL), HW_ERR);
    p = good, p.zipf = NAN;
    cr_expect_eq(hw_sparse_synth_generate(&p, &a, &b, NULL), HW_ERR);
    p = good, p.dim = 0;
    cr_expect_eq(hw_sparse_synth_generate(&p, &a, &b, NULL), HW_ERR);
    p = good, p.n_test = 0;
    cr_expect_eq(hw_sparse_synth_generate(&p, &a, &b, NULL), HW_ERR);
    cr_expect_null(a.index);
}

Test(sparse_synth, files_read_back_and_are_replaced_whole) {
    hw_sparse_synth_params p = small_params();
    char sub[600], path[700];
    snprintf(sub, sizeof sub, "%s/made/here", dir);
    cr_assert_eq(hw_sparse_synth_write(sub, &p), HW_OK, "%s", hw_error());
    hw_sparse_set train, test, gen_train, gen_test;
    float *w = malloc(300 * sizeof *w);
    cr_assert_eq(hw_sparse_synth_generate(&p, &gen_train, &gen_test, w), HW_OK);
    cr_assert_eq(hw_sparse_dataset_kind(sub), HW_SPARSE_LIBSVM);
    cr_assert_eq(hw_sparse_dataset_open(sub, &train, &test), HW_OK, "%s", hw_error());
    cr_expect(same_rows(&train, &gen_train, train.n) && train.n == gen_train.n, "the file holds the generated set");
    cr_expect(same_rows(&test, &gen_test, test.n) && test.n == gen_test.n);
    cr_expect_leq(train.dim, 300);
    float *planted;
    int64_t dim;
    snprintf(path, sizeof path, "%s/planted.txt", sub);
    cr_assert_eq(hw_sparse_planted_load(path, &planted, &dim), HW_OK, "%s", hw_error());
    cr_expect_eq(dim, 300);
    cr_expect_eq(memcmp(planted, w, 300 * sizeof *w), 0, "9 digits: the same floats");
    free(planted);
    hw_sparse_set_free(&train);
    hw_sparse_set_free(&test);

    // A write that fails (its planted file's temporary name is taken by a folder) changes nothing
    // and leaves no temporary file.
    size_t before_n;
    snprintf(path, sizeof path, "%s/train.libsvm", sub);
    uint8_t *before = read_bytes(path, &before_n);
    char blocker[800];
    snprintf(blocker, sizeof blocker, "%s/planted.txt.tmp.%ld", sub, (long)getpid());
    cr_assert_eq(mkdir(blocker, 0755), 0);
    p.seed = 99;
    cr_expect_eq(hw_sparse_synth_write(sub, &p), HW_ERR);
    cr_expect(strstr(hw_error(), "planted.txt.tmp") != NULL, "%s", hw_error());
    size_t after_n;
    uint8_t *after = read_bytes(path, &after_n);
    cr_expect(before_n == after_n && memcmp(before, after, before_n) == 0, "the old training file is whole");
    free(before);
    free(after);
    rmdir(blocker);
    char temp[800];
    snprintf(temp, sizeof temp, "%s/train.libsvm.tmp.%ld", sub, (long)getpid());
    cr_expect_neq(access(temp, F_OK), 0, "no temporary file is left");
    snprintf(temp, sizeof temp, "%s/test.libsvm.tmp.%ld", sub, (long)getpid());
    cr_expect_neq(access(temp, F_OK), 0, "no temporary file is left");
    cr_expect_eq(hw_sparse_synth_write(sub, &p), HW_OK, "%s", hw_error());
    hw_sparse_set_free(&gen_train);
    hw_sparse_set_free(&gen_test);
    free(w);
}

Test(sparse_synth, low_rank_ratings) {
    hw_ratings_synth_params p;
    hw_ratings_synth_defaults(&p);
    p.users = 300;
    p.items = 200;
    p.density = 0.1;
    p.sigma = 0.1;
    p.seed = 4;
    char a[600], b[600], path[700];
    snprintf(a, sizeof a, "%s/a", dir);
    snprintf(b, sizeof b, "%s/b", dir);
    cr_assert_eq(hw_ratings_synth_write(a, &p), HW_OK, "%s", hw_error());
    cr_assert_eq(hw_ratings_synth_write(b, &p), HW_OK, "%s", hw_error());
    const char *names[2] = {"train.tsv", "test.tsv"};
    for (int i = 0; i < 2; i++) {
        size_t na, nb;
        snprintf(path, sizeof path, "%s/%s", a, names[i]);
        uint8_t *x = read_bytes(path, &na);
        snprintf(path, sizeof path, "%s/%s", b, names[i]);
        uint8_t *y = read_bytes(path, &nb);
        cr_expect(na == nb && memcmp(x, y, na) == 0, "%s: the same bytes for the same seed", names[i]);
        free(x);
        free(y);
    }
    hw_sparse_set train, test;
    cr_assert_eq(hw_sparse_dataset_kind(a), HW_SPARSE_RATINGS);
    cr_assert_eq(hw_sparse_dataset_open(a, &train, &test), HW_OK, "%s", hw_error());
    int64_t n = train.n + test.n;
    // 60000 entries of probability 0.1: 6000, standard deviation 73.
    cr_expect(llabs(n - 6000) < 400, "%lld ratings", (long long)n);
    cr_expect(llabs(test.n - n / 10) < 150, "%lld test ratings of %lld", (long long)test.n, (long long)n);
    cr_expect_eq(train.n_users + train.n_items, train.dim);
    cr_expect(train.n_users >= 295 && train.n_users <= 300, "%lld users", (long long)train.n_users);
    cr_expect_eq(train.n_items, 200);
    double sq = 0;
    for (int64_t e = 0; e < train.n; e++) sq += (double)train.label[e] * train.label[e];
    cr_expect(fabs(sq / train.n - 1.01) < 0.15, "ratings of variance 1 + sigma^2: mean square %g", sq / train.n);
    hw_sparse_set_free(&train);
    hw_sparse_set_free(&test);

    hw_ratings_synth_netflix(&p);
    cr_expect(fabs((double)p.users / p.items - 480189.0 / 17770) < 0.05, "Netflix's users per item");
    cr_expect(fabs(p.density - 100480507.0 / (480189.0 * 17770)) < 0.0005, "Netflix's density");
    p.rank = 0;
    cr_expect_eq(hw_ratings_synth_write(a, &p), HW_ERR);
    cr_expect(strstr(hw_error(), "rank") != NULL, "%s", hw_error());
}

Test(sparse_synth, rcv1_preset_has_the_papers_rho) {
    hw_sparse_synth_params p;
    hw_sparse_synth_rcv1(&p);
    cr_expect_eq(p.dim, 47236);
    cr_expect_eq(p.nnz, 76);
    hw_sparse_set train, test;
    cr_assert_eq(hw_sparse_synth_generate(&p, &train, &test, NULL), HW_OK, "%s", hw_error());
    hw_sparse_stats st;
    cr_assert_eq(hw_sparse_stats_compute(&st, &train, 0, 1), HW_OK, "%s", hw_error());
    cr_expect_eq(st.omega, 76);
    cr_expect(st.rho > 0.40 && st.rho < 0.48, "rho %g, the paper's 0.44", st.rho);
    cr_expect(st.delta > 0.05 && st.delta < 0.2, "Delta %g", st.delta);
    hw_sparse_set_free(&train);
    hw_sparse_set_free(&test);
}
