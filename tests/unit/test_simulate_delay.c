// Tests of the simulator's delay models (src/train/simulate_delay.c): what each draws (fixed its
// K; uniform's and geometric's means within 3 standard errors of the law's over 10^5 draws;
// measured's bins in the proportions of a histogram a --measure run wrote), the same draws from
// the same seed, and every malformed or out-of-range text refused naming what is wrong.
#include "hw/simulate.h"

#include "hw/err.h"
#include "hw/metrics.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { DRAWS = 100000 };

static hw_delay parsed(const char *text) {
    hw_delay d;
    cr_assert_eq(hw_delay_parse(text, &d), HW_OK, "%s: %s", text, hw_error());
    return d;
}

// The mean and variance of DRAWS draws, each checked to lie in 0..max.
static void draw_many(const hw_delay *d, uint64_t seed, double *mean, double *var) {
    hw_rng rng;
    hw_rng_seed(&rng, seed, 7);
    double sum = 0, sq = 0;
    for (int i = 0; i < DRAWS; i++) {
        int x = hw_delay_draw(d, &rng);
        cr_assert(x >= 0 && x <= d->max, "%s drew %d, outside 0..%d", d->spec, x, d->max);
        sum += x;
        sq += (double)x * x;
    }
    *mean = sum / DRAWS;
    *var = sq / DRAWS - *mean * *mean;
}

// The sample mean within 3 standard errors of the law's mean `expected`.
static void expect_mean(const hw_delay *d, double expected) {
    double mean, var;
    draw_many(d, 42, &mean, &var);
    double se = sqrt(var / DRAWS);
    cr_expect(fabs(mean - expected) <= 3 * se, "%s: mean %.4f over %d draws, expected %.4f (3 SE = %.4f)", d->spec,
              mean, DRAWS, expected, 3 * se);
}

Test(simulate_delay, fixed_always_draws_k) {
    const char *texts[] = {"fixed:0", "fixed:5", "fixed:1024"};
    const int k[] = {0, 5, 1024};
    for (int t = 0; t < 3; t++) {
        hw_delay d = parsed(texts[t]);
        cr_expect_eq(d.max, k[t]);
        hw_rng rng;
        hw_rng_seed(&rng, 1, 2);
        for (int i = 0; i < 1000; i++) cr_assert_eq(hw_delay_draw(&d, &rng), k[t], "%s", texts[t]);
        cr_expect_eq(hw_delay_mean(&d), k[t]);
    }
}

Test(simulate_delay, uniform_mean_is_half_of_k) {
    const char *texts[] = {"uniform:1", "uniform:8", "uniform:64"};
    const int k[] = {1, 8, 64};
    for (int t = 0; t < 3; t++) {
        hw_delay d = parsed(texts[t]);
        cr_expect_eq(d.max, k[t]);
        cr_expect_eq(hw_delay_mean(&d), k[t] / 2.0);
        expect_mean(&d, k[t] / 2.0);
    }
    // Every value of 0..K comes up.
    hw_delay d = parsed("uniform:8");
    int seen[9] = {0};
    hw_rng rng;
    hw_rng_seed(&rng, 3, 4);
    for (int i = 0; i < 10000; i++) seen[hw_delay_draw(&d, &rng)]++;
    for (int v = 0; v <= 8; v++) cr_expect_gt(seen[v], 900, "uniform:8 drew %d only %d times in 10000", v, seen[v]);
}

// The geometric law cut where its tail falls below 1e-4: its mean (1 - P) / P, nearly; exactly
// the cut law's, which hw_delay_mean computes and this test computes again.
Test(simulate_delay, geometric_mean_is_the_cut_laws) {
    const double ps[] = {0.5, 0.2, 0.05, 1.0};
    for (int t = 0; t < 4; t++) {
        char text[32];
        snprintf(text, sizeof text, "geometric:%g", ps[t]);
        hw_delay d = parsed(text);
        double q = 1 - ps[t];
        cr_expect(pow(q, d.max + 1) < 1e-4 && (d.max == 0 || pow(q, d.max) >= 1e-4), "%s: cut at %d", text, d.max);
        double sum = 0, mass = 0;
        for (int k = 0; k <= d.max; k++) sum += k * pow(q, k), mass += pow(q, k);
        double expected = sum / mass;
        cr_expect(fabs(hw_delay_mean(&d) - expected) < 1e-9, "%s: hw_delay_mean %g, the law's %g", text,
                  hw_delay_mean(&d), expected);
        cr_expect(fabs(expected - q / ps[t]) < 0.01 * (1 + q / ps[t]), "%s: the cut moves the mean little", text);
        expect_mean(&d, expected);
    }
}

Test(simulate_delay, the_same_seed_draws_the_same_delays) {
    hw_delay d = parsed("geometric:0.1");
    hw_rng a, b;
    hw_rng_seed(&a, 9, 1);
    hw_rng_seed(&b, 9, 1);
    int differ = 0;
    for (int i = 0; i < 1000; i++) differ += hw_delay_draw(&d, &a) != hw_delay_draw(&d, &b);
    cr_expect_eq(differ, 0);
}

// A metrics CSV of one row whose --measure columns hold `hist`, as a --measure run writes it.
static void write_measured(const char *path, const int64_t *hist, int with_measure) {
    hw_metrics m;
    hw_metrics_run run = {
        .mode = "hogwild", .workers = 2, .device = "cpu", .model = "mlp", .seed = 1, .with_measure = with_measure};
    cr_assert_eq(hw_metrics_open(&m, path, &run), HW_OK, "%s", hw_error());
    hw_metrics_commit(&m);
    hw_metrics_measure_none(&m.measure);
    int64_t total = 0;
    for (int b = 0; b < HW_METRICS_STALE_BINS; b++) total += m.measure.staleness_hist[b] = hist[b];
    m.measure.updates = total;
    cr_assert_eq(hw_metrics_row(&m, 0.5, 1, 100, 0.5, 0.5, 90), HW_OK, "%s", hw_error());
    cr_assert_eq(hw_metrics_close(&m), HW_OK, "%s", hw_error());
}

static char csv_path[64];
static void make_path(void) { snprintf(csv_path, sizeof csv_path, "/tmp/hw-delay-%d.csv", (int)getpid()); }
static void remove_path(void) { unlink(csv_path); }

// Bins 0, 1, [2,4) and [1024, inf) in 4:3:2:1: each drawn in that share, within-bin values uniform.
Test(simulate_delay, measured_draws_the_histograms_bins, .init = make_path, .fini = remove_path) {
    int64_t hist[HW_METRICS_STALE_BINS] = {400, 300, 200};
    hist[HW_METRICS_STALE_BINS - 1] = 100;
    write_measured(csv_path, hist, 1);
    char text[96];
    snprintf(text, sizeof text, "measured:%s", csv_path);
    hw_delay d = parsed(text);
    cr_expect_eq(d.max, HW_DELAY_MAX, "the open last bin draws the bound");
    cr_expect_str_eq(d.spec, text);
    int counts[HW_DELAY_MAX + 1] = {0};
    hw_rng rng;
    hw_rng_seed(&rng, 5, 6);
    for (int i = 0; i < DRAWS; i++) counts[hw_delay_draw(&d, &rng)]++;
    const double share[4] = {0.4, 0.3, 0.1, 0.1};  // 0, 1, 2, 3: [2,4) halves its 0.2
    const int value[4] = {0, 1, 2, 3};
    for (int i = 0; i < 4; i++) {
        double p = share[i], se = sqrt(p * (1 - p) / DRAWS), got = (double)counts[value[i]] / DRAWS;
        cr_expect(fabs(got - p) <= 3 * se, "delay %d drawn %.4f of the time, expected %.2f", value[i], got, p);
    }
    double p = 0.1, se = sqrt(p * (1 - p) / DRAWS), got = (double)counts[HW_DELAY_MAX] / DRAWS;
    cr_expect(fabs(got - p) <= 3 * se, "the bound drawn %.4f of the time, expected 0.1", got);
    int others = DRAWS - counts[0] - counts[1] - counts[2] - counts[3] - counts[HW_DELAY_MAX];
    cr_expect_eq(others, 0, "%d draws outside the histogram's bins", others);
    cr_expect(fabs(hw_delay_mean(&d) - (0.3 + 0.2 * 2.5 + 0.1 * 1024)) < 1e-9, "mean %g", hw_delay_mean(&d));
}

// The top bin drawn from sets the largest delay: [4,8) is 7.
Test(simulate_delay, measured_max_is_its_top_bin, .init = make_path, .fini = remove_path) {
    int64_t hist[HW_METRICS_STALE_BINS] = {10, 0, 0, 5};
    write_measured(csv_path, hist, 1);
    char text[96];
    snprintf(text, sizeof text, "measured:%s", csv_path);
    cr_expect_eq(parsed(text).max, 7);
}

Test(simulate_delay, measured_without_a_histogram_is_refused, .init = make_path, .fini = remove_path) {
    int64_t hist[HW_METRICS_STALE_BINS] = {0};
    char text[96];
    snprintf(text, sizeof text, "measured:%s", csv_path);
    hw_delay d;
    write_measured(csv_path, hist, 0);
    cr_expect_eq(hw_delay_parse(text, &d), HW_ERR);
    cr_expect(strstr(hw_error(), "no staleness histogram"), "%s", hw_error());
    write_measured(csv_path, hist, 1);
    cr_expect_eq(hw_delay_parse(text, &d), HW_ERR);
    cr_expect(strstr(hw_error(), "all zero"), "%s", hw_error());
    unlink(csv_path);
    cr_expect_eq(hw_delay_parse(text, &d), HW_ERR);
    cr_expect(strstr(hw_error(), csv_path), "the missing file is named: %s", hw_error());
}

Test(simulate_delay, malformed_or_unbounded_models_are_refused) {
    const struct {
        const char *text, *says;
    } bad[] = {
        {"", "expects fixed:K"},
        {"fixed", "expects fixed:K"},
        {"bogus:3", "expects fixed:K"},
        {"Fixed:3", "expects fixed:K"},
        {"fixed:", "whole number"},
        {"fixed:-1", "whole number"},
        {"fixed:+3", "whole number"},
        {"fixed:3x", "whole number"},
        {"fixed:1025", "bounded by 1024"},
        {"uniform:99999999999999999999", "whole number"},
        {"uniform:2000", "bounded by 1024"},
        {"geometric:0", "(0, 1]"},
        {"geometric:1.5", "(0, 1]"},
        {"geometric:nan", "(0, 1]"},
        {"geometric:0x0.5", "(0, 1]"},
        {"geometric:", "(0, 1]"},
        {"geometric:0.001", "at least 0.0090"},
        {"measured:", "no file"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        hw_delay d;
        cr_expect_eq(hw_delay_parse(bad[i].text, &d), HW_ERR, "'%s' was accepted", bad[i].text);
        cr_expect(strstr(hw_error(), bad[i].says), "'%s': the message lacks \"%s\": %s", bad[i].text, bad[i].says,
                  hw_error());
    }
    // The least P named is accepted, and cut within the bound.
    cr_expect_eq(parsed("geometric:0.009").max <= HW_DELAY_MAX, 1);
    // K in one spelling.
    cr_expect_str_eq(parsed("uniform:08").spec, "uniform:8");
}
