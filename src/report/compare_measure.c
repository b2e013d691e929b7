// compare_measure: the --measure table of `hogwild compare`: each measured run's staleness,
// contention and lost-update fraction (the columns that `--measure` adds to a metrics CSV).
#include "hw/compare.h"
#include "hw/option.h"

#include <math.h>
#include <string.h>

int hw_compare_any_measured(const hw_metrics_table *runs, int n_runs) {
    for (int r = 0; r < n_runs; r++) {
        if (runs[r].measure.present) return 1;
    }
    return 0;
}

static const char *base_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

// A percentage, or "-" where there is none (nan: no update yet, or no epoch end).
static void percent(double fraction, char *buf, size_t cap) {
    if (isnan(fraction)) {
        snprintf(buf, cap, "-");
    } else {
        snprintf(buf, cap, "%.4g", 100.0 * fraction);
    }
}

void hw_compare_print_measure_table(FILE *out, const hw_metrics_table *runs, int n_runs) {
    int width = (int)strlen("file");
    for (int r = 0; r < n_runs; r++) {
        int w = (int)strlen(base_name(runs[r].path));
        if (runs[r].measure.present && w > width) width = w;
    }
    fprintf(out, "\nHogwild's races%s: staleness in other workers' updates between reading the weights and writing\n",
            hw_option_hint(HW_OPTION_MEASURE));
    fprintf(out, "%-*s  %7s  %9s  %10s  %6s  %5s  %6s  %11s  %9s  %11s  %11s  %10s\n", width, "file", "workers",
            "updates", "stale mean", "median", "p99", "max", "stale us", "overlap %", "fwd+bwd us", "update us",
            "lost %");
    for (int r = 0; r < n_runs; r++) {
        const hw_metrics_measure *m = &runs[r].measure;
        if (!m->present) continue;
        char overlap[32], lost[32];
        percent(m->overlap_fraction, overlap, sizeof overlap);
        percent(m->lost_fraction, lost, sizeof lost);
        fprintf(out, "%-*s  %7d  %9lld  %10.2f  %6lld  %5lld  %6lld  %11.0f  %9s  %11.1f  %11.1f  %10s\n", width,
                base_name(runs[r].path), runs[r].workers, (long long)m->updates, m->staleness_mean,
                (long long)m->staleness_median, (long long)m->staleness_p99, (long long)m->staleness_max,
                m->staleness_us_mean, overlap, m->compute_us_per_step, m->update_us_per_step, lost);
    }
}
