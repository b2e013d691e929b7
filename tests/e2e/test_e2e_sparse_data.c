// End-to-end tests of the sparse data commands: `hogwild synth --kind sparse|ratings` writes a
// folder the dataset reader opens with the shape asked for (a preset, then each flag given over
// it), refuses the flags of another kind and a folder of another dataset; `hogwild stats DIR`
// prints the paper's Omega, Delta and rho as hw_sparse_stats_compute finds them, exact or sampled.
#include "e2e_util.h"
#include "hw/err.h"
#include "hw/sparse_data.h"

TestSuite(e2e_sparse_data, .init = e2e_setup, .fini = e2e_teardown, .timeout = 120);

Test(e2e_sparse_data, synth_sparse_writes_the_shape_asked_for) {
    char *dir = e2e_path("sp");
    e2e_run_result r;
    e2e_run(&r, NULL, "synth", "--kind", "sparse", "--dir", dir, "--train", "400", "--test", "100", "--features", "300",
            "--nnz", "7", "--zipf", "0.9", "--noise", "0", "--seed", "5");
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "400 train, 100 test, 300 features, 7 nonzeros each", "stdout");
    hw_sparse_set train, test;
    cr_assert_eq(hw_sparse_dataset_open(dir, &train, &test), HW_OK, "%s", hw_error());
    cr_expect_eq(train.n, 400);
    cr_expect_eq(test.n, 100);
    cr_expect_eq(train.dim, 300);
    cr_expect_eq(train.nnz, 400 * 7);
    cr_expect_eq(train.label_kind, HW_LABEL_BINARY);
    // The same parameters through the library: the command adds nothing of its own.
    hw_sparse_synth_params p;
    hw_sparse_synth_defaults(&p);
    p.n_train = 400, p.n_test = 100, p.dim = 300, p.nnz = 7, p.zipf = 0.9, p.noise = 0, p.seed = 5;
    hw_sparse_set a, at;
    cr_assert_eq(hw_sparse_synth_generate(&p, &a, &at, NULL), HW_OK, "%s", hw_error());
    cr_expect_eq(memcmp(a.index, train.index, (size_t)a.nnz * sizeof *a.index), 0, "the library's rows");
    cr_expect_eq(memcmp(a.label, train.label, (size_t)a.n * sizeof *a.label), 0, "and its labels");
    hw_sparse_set_free(&a);
    hw_sparse_set_free(&at);
    hw_sparse_set_free(&train);
    hw_sparse_set_free(&test);
    // Again without --overwrite: refused, the dataset kept.
    e2e_run(&r, NULL, "synth", "--kind", "sparse", "--dir", dir, "--train", "50");
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, "give --overwrite", "stderr");
    // Ratings into a folder of libsvm files: refused even with --overwrite (it would hold two).
    e2e_run(&r, NULL, "synth", "--kind", "ratings", "--dir", dir, "--overwrite");
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, "remove it first", "stderr");
}

Test(e2e_sparse_data, synth_ratings_and_the_presets) {
    char *dir = e2e_path("r");
    e2e_run_result r;
    e2e_run(&r, NULL, "synth", "--kind", "ratings", "--dir", dir, "--users", "300", "--items", "200", "--rank", "3",
            "--density", "0.1", "--sigma", "0.2", "--test-share", "0.2");
    e2e_assert_exit(&r, 0);
    hw_sparse_set train, test;
    cr_assert_eq(hw_sparse_dataset_open(dir, &train, &test), HW_OK, "%s", hw_error());
    cr_expect(train.n_users <= 300 && train.n_items <= 200 && train.n_users > 250 && train.n_items > 150);
    double total = (double)(train.n + test.n);
    cr_expect(fabs(total - 6000) < 6 * sqrt(6000), "about 10%% of 60000 entries, got %.0f", total);
    cr_expect(fabs(test.n / total - 0.2) < 0.03, "a fifth for the test, got %g", test.n / total);
    cr_expect_eq(train.label_kind, HW_LABEL_REAL);
    hw_sparse_set_free(&train);
    hw_sparse_set_free(&test);
    // A preset names its kind; another --kind beside it, or a flag of the other kind, is refused.
    e2e_run(&r, NULL, "synth", "--preset", "netflix", "--kind", "sparse", "--dir", e2e_path("x"));
    e2e_assert_exit(&r, 2);
    e2e_assert_contains(r.err, "--preset netflix makes --kind ratings", "stderr");
    e2e_run(&r, NULL, "synth", "--kind", "ratings", "--nnz", "5", "--dir", e2e_path("x"));
    e2e_assert_exit(&r, 2);
    e2e_assert_contains(r.err, "--nnz does not apply to --kind ratings", "stderr");
    e2e_run(&r, NULL, "synth", "--features", "5", "--dir", e2e_path("x"));
    e2e_assert_exit(&r, 2);
    e2e_assert_contains(r.err, "--features does not apply to --kind digits", "stderr");
    e2e_run(&r, NULL, "synth", "--kind", "sparse", "--preset", "kdd", "--dir", e2e_path("x"));
    e2e_assert_exit(&r, 2);
    e2e_assert_contains(r.err, "unknown --preset 'kdd'", "stderr");
    // The RCV1 preset with fewer examples: its features and nonzeros, the count given.
    e2e_run(&r, NULL, "synth", "--preset", "rcv1", "--train", "300", "--test", "100", "--dir", e2e_path("rcv1"));
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "300 train, 100 test, 47236 features, 76 nonzeros each", "stdout");
}

// The figures `stats` prints for a set: those of hw_sparse_stats_compute, as text.
static void expect_stats_line(const char *out, const hw_sparse_set *set, int64_t sample) {
    hw_sparse_stats s;
    cr_assert_eq(hw_sparse_stats_compute(&s, set, sample, 1), HW_OK, "%s", hw_error());
    char line[160];
    snprintf(line, sizeof line, "Omega = %lld  (example", (long long)s.omega);
    e2e_assert_contains(out, line, "stdout");
    snprintf(line, sizeof line, "Delta = %.4f  (feature %lld, in %lld examples)", s.delta,
             (long long)s.delta_feature + 1, (long long)s.feature_max);
    e2e_assert_contains(out, line, "stdout");
    snprintf(line, sizeof line, "rho %s %.4f", s.rho_exact ? "  =" : " ~=", s.rho);
    e2e_assert_contains(out, line, "stdout");
}

Test(e2e_sparse_data, stats_prints_omega_delta_rho) {
    char *dir = e2e_path("sp");
    e2e_run_result r;
    e2e_run(&r, NULL, "synth", "--kind", "sparse", "--dir", dir, "--train", "600", "--test", "150", "--features", "200",
            "--nnz", "6");
    e2e_assert_exit(&r, 0);
    hw_sparse_set train, test;
    cr_assert_eq(hw_sparse_dataset_open(dir, &train, &test), HW_OK, "%s", hw_error());
    e2e_run(&r, NULL, "stats", dir, "--sample", "0");
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "binary labels", "stdout");
    e2e_assert_contains(r.out, "600 examples, 200 features, 3600 nonzeros", "stdout");
    e2e_assert_contains(r.out, "exact, every example counted", "stdout");
    e2e_assert_contains(r.out, "nonzeros per example: mean 6.00, max 6", "stdout");
    expect_stats_line(r.out, &train, 0);
    expect_stats_line(r.out, &test, 0);
    // Sampled: the estimate, its sample and the exact bounds.
    e2e_run(&r, NULL, "stats", dir, "--sample", "100");
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "sampled from 100 of 600 examples", "stdout");
    e2e_assert_contains(r.out, "exact bounds [", "stdout");
    expect_stats_line(r.out, &train, 100);
    hw_sparse_set_free(&train);
    hw_sparse_set_free(&test);
    // A folder with no sparse dataset, and no folder: exit 1 or 2, naming it.
    e2e_run(&r, NULL, "stats", e2e_path("none"));
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, "none", "stderr");
    e2e_run(&r, NULL, "stats");
    e2e_assert_exit(&r, 2);
    e2e_assert_contains(r.err, "which dataset folder", "stderr");
}
