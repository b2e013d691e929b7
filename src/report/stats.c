// stats: summaries, Student's t and Welch's test for groups of repeated runs (include/hw/stats.h).
#include "hw/stats.h"

#include <math.h>

// The continued fraction of I_x(a, b) (modified Lentz), which converges fast for
// x < (a + 1) / (a + b + 2); hw_stats_beta_inc uses the symmetry I_x(a, b) = 1 - I_{1-x}(b, a)
// for the other side.
static double beta_continued_fraction(double a, double b, double x) {
    const double tiny = 1e-300, eps = 1e-16;
    double qab = a + b, qap = a + 1, qam = a - 1;
    double c = 1, d = 1 - qab * x / qap;
    if (fabs(d) < tiny) d = tiny;
    d = 1 / d;
    double h = d;
    for (int m = 1; m <= 1000; m++) {
        int m2 = 2 * m;
        double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1 + aa * d;
        if (fabs(d) < tiny) d = tiny;
        c = 1 + aa / c;
        if (fabs(c) < tiny) c = tiny;
        d = 1 / d;
        h *= d * c;
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1 + aa * d;
        if (fabs(d) < tiny) d = tiny;
        c = 1 + aa / c;
        if (fabs(c) < tiny) c = tiny;
        d = 1 / d;
        double step = d * c;
        h *= step;
        if (fabs(step - 1) < eps) break;
    }
    return h;
}

double hw_stats_beta_inc(double a, double b, double x) {
    if (!(a > 0) || !(b > 0) || !(x >= 0) || !(x <= 1)) return NAN;
    if (x == 0 || x == 1) return x;
    double log_front = lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x);
    if (x < (a + 1) / (a + b + 2)) return exp(log_front) * beta_continued_fraction(a, b, x) / a;
    return 1 - exp(log_front) * beta_continued_fraction(b, a, 1 - x) / b;
}

// P(T <= t) = 1 - I_{df/(df+t^2)}(df/2, 1/2) / 2 for t >= 0, and its mirror for t < 0.
double hw_stats_t_cdf(double t, double df) {
    if (isnan(t) || !(df > 0)) return NAN;
    if (isinf(t)) return t > 0 ? 1 : 0;
    double tail = 0.5 * hw_stats_beta_inc(df / 2, 0.5, df / (df + t * t));
    return t >= 0 ? 1 - tail : tail;
}

// Bisection on the cdf, which is increasing: the bracket doubles until it holds p, then 200
// halvings take it to the last bit of a double.
double hw_stats_t_quantile(double p, double df) {
    if (!(p > 0) || !(p < 1) || !(df > 0)) return NAN;
    if (p < 0.5) return -hw_stats_t_quantile(1 - p, df);
    if (p == 0.5) return 0;
    double lo = 0, hi = 1;
    while (hw_stats_t_cdf(hi, df) < p && hi < 1e300) {
        lo = hi;
        hi *= 2;
    }
    for (int i = 0; i < 200 && hi - lo > 0; i++) {
        double mid = lo + (hi - lo) / 2;
        if (mid == lo || mid == hi) break;
        if (hw_stats_t_cdf(mid, df) < p) lo = mid;
        else hi = mid;
    }
    return lo + (hi - lo) / 2;
}

hw_stats_summary hw_stats_summarize(const double *x, int n) {
    hw_stats_summary s = {.n = n, .mean = NAN, .sd = NAN, .ci_low = NAN, .ci_high = NAN};
    if (n <= 0) return s;
    double sum = 0;
    for (int i = 0; i < n; i++) sum += x[i];
    s.mean = sum / n;
    if (n < 2) return s;
    double squares = 0;  // two passes: the spread of values far from 0 keeps its digits
    for (int i = 0; i < n; i++) squares += (x[i] - s.mean) * (x[i] - s.mean);
    s.sd = sqrt(squares / (n - 1));
    double half = hw_stats_t_quantile(0.975, n - 1) * s.sd / sqrt((double)n);
    s.ci_low = s.mean - half;
    s.ci_high = s.mean + half;
    return s;
}

// The Welch-Satterthwaite degrees of freedom of a sum of two variance terms va = sa^2/na and
// vb = sb^2/nb.
static double welch_df(double va, int na, double vb, int nb) {
    return (va + vb) * (va + vb) / (va * va / (na - 1) + vb * vb / (nb - 1));
}

hw_stats_welch_result hw_stats_welch(const hw_stats_summary *a, const hw_stats_summary *b) {
    hw_stats_welch_result r = {NAN, NAN, NAN};
    if (a->n < 2 || b->n < 2) return r;
    double va = a->sd * a->sd / a->n, vb = b->sd * b->sd / b->n;
    if (!(va + vb > 0)) return r;
    r.t = (a->mean - b->mean) / sqrt(va + vb);
    r.df = welch_df(va, a->n, vb, b->n);
    r.p = 2 * hw_stats_t_cdf(-fabs(r.t), r.df);
    return r;
}

hw_stats_ratio hw_stats_ratio_of_means(const hw_stats_summary *a, const hw_stats_summary *b) {
    hw_stats_ratio r = {a->mean / b->mean, NAN, NAN};
    if (a->n < 2 || b->n < 2 || !(a->mean != 0) || !(b->mean != 0)) return r;
    // Relative variances of the two means; the ratio's variance is their sum times r^2.
    double va = a->sd * a->sd / (a->n * a->mean * a->mean), vb = b->sd * b->sd / (b->n * b->mean * b->mean);
    if (!(va + vb > 0)) {
        r.ci_low = r.ci_high = r.ratio;
        return r;
    }
    double half = hw_stats_t_quantile(0.975, welch_df(va, a->n, vb, b->n)) * fabs(r.ratio) * sqrt(va + vb);
    r.ci_low = r.ratio - half;
    r.ci_high = r.ratio + half;
    return r;
}
