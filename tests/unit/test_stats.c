// Tests of the statistics of compare's groups (src/report/stats.c) against values computed by
// SciPy 1.17 (scipy.stats.t, scipy.special.betainc, scipy.stats.ttest_ind(equal_var=False)).
#include "hw/stats.h"

#include <criterion/criterion.h>
#include <math.h>

static void expect_close(double got, double want, double rel, const char *what) {
    cr_expect(fabs(got - want) <= rel * fabs(want), "%s: %.17g, want %.17g", what, got, want);
}

Test(stats, incomplete_beta_matches_scipy) {
    expect_close(hw_stats_beta_inc(2.5, 0.5, 0.3), 0.018927124071945658, 1e-12, "I_0.3(2.5, 0.5)");
    expect_close(hw_stats_beta_inc(0.5, 3, 0.99), 0.9999996863210445, 1e-12, "I_0.99(0.5, 3)");
    expect_close(hw_stats_beta_inc(40, 0.5, 0.999), 0.777919867635688, 1e-12, "I_0.999(40, 0.5)");
    cr_expect_eq(hw_stats_beta_inc(2, 3, 0), 0);
    cr_expect_eq(hw_stats_beta_inc(2, 3, 1), 1);
    cr_expect(isnan(hw_stats_beta_inc(-1, 3, 0.5)), "a negative shape has no value");
}

Test(stats, student_t_cdf_matches_scipy) {
    expect_close(hw_stats_t_cdf(-2.0, 3), 0.06966298427942152, 1e-12, "cdf(-2, 3)");
    expect_close(hw_stats_t_cdf(0.5, 7), 0.6837964321553578, 1e-12, "cdf(0.5, 7)");
    expect_close(hw_stats_t_cdf(10, 1), 0.9682744825694465, 1e-12, "cdf(10, 1)");
    expect_close(hw_stats_t_cdf(3.3, 12.4), 0.9969557052128469, 1e-12, "cdf(3.3, 12.4)");
    cr_expect_eq(hw_stats_t_cdf(0, 5), 0.5);
}

Test(stats, student_t_quantile_matches_scipy) {
    const double df[] = {1, 2, 4, 9, 30, 2.5};
    const double want[] = {12.706204736174694, 4.302652729749462,  2.7764451051977934,
                           2.262157162798205,  2.0422724563012378, 3.5746548420036817};
    for (int i = 0; i < 6; i++) {
        expect_close(hw_stats_t_quantile(0.975, df[i]), want[i], 1e-10, "t(0.975)");
        expect_close(hw_stats_t_quantile(0.025, df[i]), -want[i], 1e-10, "t(0.025)");
    }
    cr_expect(isnan(hw_stats_t_quantile(1, 3)), "p = 1 has no finite quantile");
}

static const double group_a[] = {97.1, 97.4, 96.9, 97.3, 97.0};
static const double group_b[] = {96.2, 96.8, 96.5, 96.9};

Test(stats, summary_is_mean_sd_and_students_interval) {
    hw_stats_summary s = hw_stats_summarize(group_a, 5);
    cr_expect_eq(s.n, 5);
    expect_close(s.mean, 97.14, 1e-14, "mean");
    expect_close(s.sd, 0.20736441353327706, 1e-12, "sd");
    expect_close(s.ci_low, 96.8825230732071, 1e-12, "ci low");
    expect_close(s.ci_high, 97.3974769267929, 1e-12, "ci high");
}

Test(stats, one_run_has_a_mean_and_no_spread) {
    hw_stats_summary s = hw_stats_summarize(group_a, 1);
    cr_expect_eq(s.mean, 97.1);
    cr_expect(isnan(s.sd) && isnan(s.ci_low) && isnan(s.ci_high), "one run: no spread, no interval");
    s = hw_stats_summarize(group_a, 0);
    cr_expect(isnan(s.mean), "no run: no mean");
}

Test(stats, welch_matches_scipy_ttest_ind) {
    hw_stats_summary a = hw_stats_summarize(group_a, 5), b = hw_stats_summarize(group_b, 4);
    hw_stats_welch_result w = hw_stats_welch(&a, &b);
    expect_close(w.t, 2.945941518185932, 1e-12, "t");
    expect_close(w.df, 4.977265713403968, 1e-12, "df");
    expect_close(w.p, 0.03221337821737395, 1e-10, "p");
    // Symmetric: the other order gives -t and the same p.
    hw_stats_welch_result back = hw_stats_welch(&b, &a);
    expect_close(back.t, -w.t, 1e-14, "t reversed");
    expect_close(back.p, w.p, 1e-14, "p reversed");
}

Test(stats, welch_needs_two_runs_and_some_spread) {
    hw_stats_summary a = hw_stats_summarize(group_a, 1), b = hw_stats_summarize(group_b, 4);
    cr_expect(isnan(hw_stats_welch(&a, &b).p), "one run on a side: no test");
    const double same[] = {1, 1, 1};
    hw_stats_summary c = hw_stats_summarize(same, 3), d = hw_stats_summarize(same, 3);
    cr_expect(isnan(hw_stats_welch(&c, &d).p), "no spread on either side: no test");
}

// The delta method by hand: a = {2, 4, 6} (mean 4, sd 2), b = {1, 2, 3} (mean 2, sd 1): the ratio
// 2, relative variances 4/(3*16) and 1/(3*4), both 1/12; se = 2 sqrt(1/6); df = (1/6)^2 /
// (2 (1/12)^2 / 2) = 4; half-width t(0.975, 4) se.
Test(stats, ratio_of_means_by_the_delta_method) {
    const double a_runs[] = {2, 4, 6}, b_runs[] = {1, 2, 3};
    hw_stats_summary a = hw_stats_summarize(a_runs, 3), b = hw_stats_summarize(b_runs, 3);
    hw_stats_ratio r = hw_stats_ratio_of_means(&a, &b);
    double half = 2.7764451051977934 * 2 * sqrt(1.0 / 6);
    expect_close(r.ratio, 2, 1e-15, "ratio");
    expect_close(r.ci_low, 2 - half, 1e-10, "low");
    expect_close(r.ci_high, 2 + half, 1e-10, "high");
    hw_stats_summary one = hw_stats_summarize(a_runs, 1);
    hw_stats_ratio lone = hw_stats_ratio_of_means(&one, &b);
    cr_expect(lone.ratio == 1 && isnan(lone.ci_low), "one run: a ratio, no interval");
}
