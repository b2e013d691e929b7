// svg_measure: the --measure plot of `hogwild compare` as one standalone SVG document, in the
// style of the accuracy plot (svg_accuracy.c): the staleness histogram of each measured run (the share
// of its updates in each bin, grouped bars), and the lost-update fraction against workers.
#include "svg_internal.h"

#include "hw/err.h"
#include "hw/file.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { LEGEND_TOP = SVG_PLOT_TOP + SVG_PLOT_H + 88 };  // below slanted bin names and the axis label

static const char *const bin_names[HW_METRICS_STALE_BINS] = {
    "0", "1", "2-3", "4-7", "8-15", "16-31", "32-63", "64-127", "128-255", "256-511", "512-1023", "1024+"};

static double share_of(const hw_metrics_measure *m, int bin) {
    int64_t total = 0;
    for (int b = 0; b < HW_METRICS_STALE_BINS; b++) total += m->staleness_hist[b];
    return total > 0 ? 100.0 * (double)m->staleness_hist[bin] / (double)total : 0;
}

// Left: one group of bars per staleness bin, one bar per measured run, up to the last bin any run uses.
static void put_histograms(FILE *out, const hw_metrics_table *runs, int n_runs) {
    int n_bins = 3, n_measured = 0;
    double max_share = 0;
    for (int r = 0; r < n_runs; r++) {
        if (!runs[r].measure.present) continue;
        n_measured++;
        for (int b = 0; b < HW_METRICS_STALE_BINS; b++) {
            double share = share_of(&runs[r].measure, b);
            if (runs[r].measure.staleness_hist[b] > 0 && b + 1 > n_bins) n_bins = b + 1;
            if (share > max_share) max_share = share;
        }
    }
    hw_axis y = hw_nice_axis(0, max_share > 0 ? max_share : 100, 6);
    // x runs over the bins, 0 to n_bins, its ticks (the bins' names) drawn below.
    const svg_panel panel = {SVG_PANEL_X0, {.lo = 0, .hi = n_bins, .step = 1, .n_ticks = 0}, y};
    const double bin_w = (double)SVG_PLOT_W / n_bins;
    fprintf(out, "<g>\n");
    svg_panel_frame(out, &panel, "Staleness of the updates",
                    "staleness (other workers' updates between read and write)", n_bins > 8 ? 62 : 44,
                    "share of the run's updates (%)", -1, 0);
    for (int b = 0; b < n_bins; b++) svg_put_x_tick(out, svg_panel_x(&panel, b + 0.5), bin_names[b], n_bins > 8);
    const double bar_w = 0.8 * bin_w / (n_measured > 0 ? n_measured : 1);
    int k = 0;
    for (int r = 0; r < n_runs; r++) {
        if (!runs[r].measure.present) continue;
        for (int b = 0; b < n_bins; b++) {
            double top = svg_panel_y(&panel, share_of(&runs[r].measure, b));
            fprintf(out, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\"/>\n",
                    svg_panel_x(&panel, b + 0.1) + k * bar_w, top, bar_w, svg_panel_y(&panel, 0) - top,
                    svg_palette[r % SVG_N_COLOURS]);
        }
        k++;
    }
    fprintf(out, "</g>\n");
}

static int by_workers(const void *a, const void *b) {
    const hw_metrics_table *x = *(const hw_metrics_table *const *)a, *y = *(const hw_metrics_table *const *)b;
    return (x->workers > y->workers) - (x->workers < y->workers);
}

// Right: the lost-update fraction (%) of each run at its worker count, joined in worker order.
static int put_lost(FILE *out, const hw_metrics_table *runs, int n_runs) {
    const hw_metrics_table **sorted = malloc(sizeof *sorted * (size_t)(n_runs > 0 ? n_runs : 1));
    if (!sorted) return hw_fail("out of memory drawing the plot of the lost updates");
    int n = 0, max_workers = 1;
    double max_lost = 0;
    for (int r = 0; r < n_runs; r++) {
        const hw_metrics_measure *m = &runs[r].measure;
        if (!m->present || isnan(m->lost_fraction)) continue;
        sorted[n++] = &runs[r];
        if (runs[r].workers > max_workers) max_workers = runs[r].workers;
        if (100 * m->lost_fraction > max_lost) max_lost = 100 * m->lost_fraction;
    }
    qsort(sorted, (size_t)n, sizeof *sorted, by_workers);
    hw_axis x = hw_nice_axis(0, max_workers, 9), y = hw_nice_axis(0, max_lost > 0 ? max_lost * 1.1 : 1, 6);
    const svg_panel panel = {SVG_PANEL_X1, x, y};
    fprintf(out, "<g>\n");
    svg_panel_frame(out, &panel, "Lost updates against workers", "workers", 44,
                    "lost update norm (% of the applied update norm)", 0, 0);
    fprintf(out, "<polyline fill=\"none\" stroke=\"#888\" stroke-width=\"1.5\" points=\"");
    for (int i = 0; i < n; i++) {
        double px = svg_panel_x(&panel, sorted[i]->workers);
        double py = svg_panel_y(&panel, 100 * sorted[i]->measure.lost_fraction);
        fprintf(out, "%s%.2f,%.2f", i ? " " : "", px, py);
    }
    fprintf(out, "\"/>\n");
    for (int i = 0; i < n; i++) {
        double lost = 100 * sorted[i]->measure.lost_fraction;
        double px = svg_panel_x(&panel, sorted[i]->workers), py = svg_panel_y(&panel, lost);
        const char *colour = svg_palette[(sorted[i] - runs) % SVG_N_COLOURS];
        fprintf(out, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"4.5\" fill=\"%s\"/>\n", px, py, colour);
        // The value beside the point; to its left near the right edge, so that it is not cut off.
        int near_edge = px > panel.x0 + SVG_PLOT_W - 60;
        fprintf(out, "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"%s\" font-size=\"11\" fill=\"#444\">%.3g%%</text>\n",
                near_edge ? px - 7 : px + 7, py - 7, near_edge ? "end" : "start", lost);
    }
    fprintf(out, "</g>\n");
    free(sorted);
    return HW_OK;
}

int hw_compare_plot_measure_svg(FILE *out, const hw_metrics_table *runs, int n_runs) {
    int n_measured = 0;
    for (int r = 0; r < n_runs; r++) n_measured += runs[r].measure.present;
    const int height = LEGEND_TOP + n_measured * SVG_LEGEND_ROW + 16;
    char title[128];
    snprintf(title, sizeof title, "hogwild compare: staleness and lost updates of %d measured run%s", n_measured,
             n_measured == 1 ? "" : "s");
    svg_begin(out, SVG_WIDTH, height, title);
    put_histograms(out, runs, n_runs);
    if (put_lost(out, runs, n_runs) != HW_OK) return HW_ERR;
    fprintf(out, "<g>\n");
    int row = 0;
    for (int r = 0; r < n_runs; r++) {
        if (!runs[r].measure.present) continue;
        double y = LEGEND_TOP + row++ * SVG_LEGEND_ROW, x = SVG_PANEL_X0;
        fprintf(out, "<rect x=\"%.2f\" y=\"%.2f\" width=\"28\" height=\"10\" fill=\"%s\"/>\n", x, y - 5,
                svg_palette[r % SVG_N_COLOURS]);
        svg_put_legend_text(out, x + 38, y, &runs[r]);
    }
    fprintf(out, "</g>\n</svg>\n");
    if (ferror(out)) return hw_fail("error writing the SVG plot");
    return HW_OK;
}

int hw_compare_write_measure_plot(const char *path, const hw_metrics_table *runs, int n_runs) {
    hw_whole_file w;
    if (hw_whole_file_open(&w, path, "the plot") != HW_OK) return HW_ERR;
    int drawn = hw_compare_plot_measure_svg(w.f, runs, n_runs);
    // A failed write is the commit's to name, with its reason (disk full, file size limit).
    if (drawn != HW_OK && !w.error) drawn = hw_error_prefix("%s", path);
    return hw_whole_file_commit(&w, w.error ? HW_OK : drawn, "the plot");
}
