// stats: the statistics `hogwild compare` puts beside a group of repeated runs (src/report/stats.c):
// mean, standard deviation and Student's t confidence interval of a sample; Welch's t-test between
// two samples; the interval of a ratio of two means (a speed-up). Plain double arithmetic, no
// library: Student's t distribution through the regularized incomplete beta function.
#ifndef HW_STATS_H
#define HW_STATS_H

// A sample's summary. With n = 1 the standard deviation and the interval are NAN (one run says
// nothing of the spread); with n = 0 everything is NAN.
typedef struct {
    int n;
    double mean;
    double sd;      // the sample standard deviation (n - 1 in the denominator)
    double ci_low;  // the 95% confidence interval of the mean: mean -+ t(0.975, n-1) sd / sqrt(n)
    double ci_high;
} hw_stats_summary;

// Summarises x[0..n).
hw_stats_summary hw_stats_summarize(const double *x, int n);

// Student's t distribution with `df` degrees of freedom (df > 0, not necessarily whole): the
// probability P(T <= t), and its inverse, the t with P(T <= t) = p for 0 < p < 1.
double hw_stats_t_cdf(double t, double df);
double hw_stats_t_quantile(double p, double df);

// The regularized incomplete beta function I_x(a, b), for a, b > 0 and 0 <= x <= 1.
double hw_stats_beta_inc(double a, double b, double x);

// Welch's unequal-variances t-test of the means of two samples: the statistic t = (m1 - m2) /
// sqrt(s1^2/n1 + s2^2/n2), the Welch-Satterthwaite degrees of freedom and the two-sided p-value.
// Needs n >= 2 on both sides; otherwise, or when both samples have no spread, every field is NAN
// (with no spread at all there is no test: equal means give 0/0, unequal ones certainty that no
// finite sample can claim).
typedef struct {
    double t;
    double df;
    double p;
} hw_stats_welch_result;
hw_stats_welch_result hw_stats_welch(const hw_stats_summary *a, const hw_stats_summary *b);

// The ratio of the means a / b (a speed-up: a group's samples/s over the one-worker group's) and
// its 95% interval by the delta method: the ratio's standard error is
// r sqrt(sa^2 / (na ma^2) + sb^2 / (nb mb^2)), with Welch-Satterthwaite degrees of freedom over
// the two relative variances. The interval is NAN when either side has fewer than 2 runs.
typedef struct {
    double ratio;
    double ci_low;
    double ci_high;
} hw_stats_ratio;
hw_stats_ratio hw_stats_ratio_of_means(const hw_stats_summary *a, const hw_stats_summary *b);

#endif
