// svg_groups: the plots of compare's groups (include/hw/compare_groups.h): accuracy against time
// and samples, a mean line in its 95% band per group; and the scaling plot, samples/s and time to
// the target against workers, a line per mode with interval bars and the linear ideal dashed.
#include "hw/compare_groups.h"
#include "hw/file.h"

#include "svg_internal.h"

#include "hw/err.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum {
    LEGEND_TOP = SVG_PLOT_TOP + SVG_PLOT_H + 72,
    GRID = 80,  // points of a group's mean curve
};

static void put_legend_row(FILE *out, int row, const char *colour, const char *dash, const char *text) {
    double y = LEGEND_TOP + row * SVG_LEGEND_ROW, x = SVG_PANEL_X0;
    fprintf(out, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"%s\" stroke-width=\"2.5\"%s/>\n", x, y,
            x + 28, y, colour, dash);
    fprintf(out, "<text x=\"%.2f\" y=\"%.2f\" dominant-baseline=\"middle\">", x + 38, y);
    svg_put_text(out, text);
    fputs("</text>\n", out);
}

// ---- accuracy bands ----

static double x_of(const hw_metrics_point *p, int by_samples) {
    return by_samples ? (double)p->samples_seen : p->wall_seconds;
}

// The run's accuracy at x, linear between its rows (x within its range).
static double accuracy_at(const hw_metrics_table *run, double x, int by_samples) {
    const hw_metrics_point *p = run->points;
    if (x <= x_of(&p[0], by_samples)) return p[0].test_accuracy;
    for (int i = 1; i < run->n_points; i++) {
        double x0 = x_of(&p[i - 1], by_samples), x1 = x_of(&p[i], by_samples);
        if (x > x1) continue;
        double t = x1 > x0 ? (x - x0) / (x1 - x0) : 1;
        return p[i - 1].test_accuracy + t * (p[i].test_accuracy - p[i - 1].test_accuracy);
    }
    return p[run->n_points - 1].test_accuracy;
}

// The x every member reached (the shortest member's last row), so that the mean averages all.
static double group_x_end(const hw_compare_group *g, const hw_metrics_table *runs, int by_samples) {
    double end = INFINITY;
    for (int m = 0; m < g->n_members; m++) {
        const hw_metrics_table *run = &runs[g->members[m]];
        double x = x_of(&run->points[run->n_points - 1], by_samples);
        if (x < end) end = x;
    }
    return end;
}

static void put_band(FILE *out, const svg_panel *f, const hw_compare_group *g, const hw_metrics_table *runs,
                     int by_samples, const char *colour, const char *dash) {
    double end = group_x_end(g, runs, by_samples);
    double mean[GRID + 1], lo[GRID + 1], hi[GRID + 1], acc[256];
    int n = g->n_members < 256 ? g->n_members : 256;
    for (int k = 0; k <= GRID; k++) {
        double x = end * k / GRID;
        for (int m = 0; m < n; m++) acc[m] = accuracy_at(&runs[g->members[m]], x, by_samples);
        hw_stats_summary s = hw_stats_summarize(acc, n);
        mean[k] = s.mean;
        lo[k] = isnan(s.ci_low) ? s.mean : s.ci_low;
        hi[k] = isnan(s.ci_high) ? s.mean : s.ci_high;
    }
    if (n > 1) {
        fprintf(out, "<polygon fill=\"%s\" fill-opacity=\"0.18\" stroke=\"none\" points=\"", colour);
        for (int k = 0; k <= GRID; k++)
            fprintf(out, "%.2f,%.2f ", svg_panel_x(f, end * k / GRID), svg_panel_y(f, hi[k]));
        for (int k = GRID; k >= 0; k--)
            fprintf(out, "%.2f,%.2f ", svg_panel_x(f, end * k / GRID), svg_panel_y(f, lo[k]));
        fputs("\"/>\n", out);
    }
    fprintf(out, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2.2\"%s points=\"", colour, dash);
    for (int k = 0; k <= GRID; k++)
        fprintf(out, "%s%.2f,%.2f", k ? " " : "", svg_panel_x(f, end * k / GRID), svg_panel_y(f, mean[k]));
    fputs("\"/>\n", out);
}

// The y range: the lowest trained point of any member (the untrained one at ~10% left out), to 100.
static hw_axis group_accuracy_axis(const hw_compare_groups *groups, const hw_metrics_table *runs, double target) {
    double lo = target;
    for (int a = 0; a < groups->n_groups; a++) {
        const hw_compare_group *g = &groups->groups[a];
        for (int m = 0; m < g->n_members; m++) {
            const hw_metrics_table *run = &runs[g->members[m]];
            for (int i = 0; i < run->n_points; i++) {
                if (run->points[i].samples_seen > 0 && run->points[i].test_accuracy < lo)
                    lo = run->points[i].test_accuracy;
            }
        }
    }
    if (lo > 99) lo = 99;
    lo -= 0.05 * (100 - lo);
    hw_axis axis = hw_nice_axis(lo, 100, 8);
    return axis.lo < 0 ? hw_nice_axis(0, 100, 8) : axis;
}

// Hogwild solid, DataParallel dashed; a colour per group.
static const char *mode_dash(const char *mode) {
    return strcmp(mode, "hogwild") == 0 ? "" : " stroke-dasharray=\"7 4\"";
}

static void group_legend_text(char *buf, size_t cap, const hw_compare_groups *groups, const hw_compare_group *g) {
    const char *unit = strcmp(g->mode, "dataparallel") == 0 ? "replica" : "worker";
    int used = snprintf(buf, cap, "%s, %d %s%s, %s", g->mode, g->workers, unit, g->workers == 1 ? "" : "s", g->model);
    if (groups->n_setups > 1 && used > 0 && (size_t)used < cap) {
        used += snprintf(buf + used, cap - (size_t)used, ", %s", g->setup_name);
    }
    if (used > 0 && (size_t)used < cap) {
        snprintf(buf + used, cap - (size_t)used, ": %d run%s%s", g->n_members, g->n_members == 1 ? "" : "s",
                 g->n_members > 1 ? ", band = 95% CI of the mean" : " (n=1, no band)");
    }
}

int hw_compare_write_group_plot(const char *path, const hw_compare_groups *groups, const hw_metrics_table *runs,
                                double target) {
    hw_whole_file w;
    if (hw_whole_file_open(&w, path, "the plot") != HW_OK) return HW_ERR;
    FILE *out = w.f;
    double max_x[2] = {0, 0};
    for (int a = 0; a < groups->n_groups; a++) {
        for (int k = 0; k < 2; k++) {
            double end = group_x_end(&groups->groups[a], runs, k);
            if (end > max_x[k]) max_x[k] = end;
        }
    }
    hw_axis y = group_accuracy_axis(groups, runs, target);
    svg_panel frames[2] = {{SVG_PANEL_X0, hw_nice_axis(0, max_x[0], 8), y},
                           {SVG_PANEL_X1, hw_nice_axis(0, max_x[1], 7), y}};
    char title[128];
    snprintf(title, sizeof title, "hogwild compare: %d group(s) of runs, mean and 95%% interval", groups->n_groups);
    svg_begin(out, SVG_WIDTH, LEGEND_TOP + groups->n_groups * SVG_LEGEND_ROW + 16, title);
    for (int k = 0; k < 2; k++) {
        const svg_panel *f = &frames[k];
        svg_panel_frame(out, f, k ? "Test accuracy against samples seen" : "Test accuracy against wall time",
                        k ? "samples seen" : "wall time (s)", 44, "test accuracy (%)", k, 0);
        svg_panel_target(out, f, target);
        fprintf(out, "<clipPath id=\"band%d\"><rect x=\"%.2f\" y=\"%d\" width=\"%d\" height=\"%d\"/></clipPath>\n", k,
                f->x0, SVG_PLOT_TOP, SVG_PLOT_W, SVG_PLOT_H);
        fprintf(out, "<g clip-path=\"url(#band%d)\">\n", k);
        for (int a = 0; a < groups->n_groups; a++) {
            const hw_compare_group *g = &groups->groups[a];
            put_band(out, f, g, runs, k, svg_palette[a % SVG_N_COLOURS], mode_dash(g->mode));
        }
        fputs("</g>\n", out);
    }
    for (int a = 0; a < groups->n_groups; a++) {
        char text[256];
        group_legend_text(text, sizeof text, groups, &groups->groups[a]);
        put_legend_row(out, a, svg_palette[a % SVG_N_COLOURS], mode_dash(groups->groups[a].mode), text);
    }
    fputs("</svg>\n", out);
    return hw_whole_file_commit(&w, HW_OK, "the plot");
}

// ---- scaling ----

// A line of the scaling plot: the groups of one mode, model and setup, by workers.
static int same_line(const hw_compare_group *a, const hw_compare_group *b) {
    return strcmp(a->mode, b->mode) == 0 && strcmp(a->model, b->model) == 0 && a->setup == b->setup;
}

// Whether group a is the first of its line.
static int line_first(const hw_compare_groups *groups, int a) {
    for (int b = 0; b < a; b++) {
        if (same_line(&groups->groups[a], &groups->groups[b])) return 0;
    }
    return 1;
}

// The groups of a's line, sorted by workers, into idx; their count.
static int line_members(const hw_compare_groups *groups, int a, int *idx) {
    int n = 0;
    for (int b = 0; b < groups->n_groups; b++) {
        if (!same_line(&groups->groups[a], &groups->groups[b])) continue;
        int k = n++;
        while (k > 0 && groups->groups[idx[k - 1]].workers > groups->groups[b].workers) idx[k] = idx[k - 1], k--;
        idx[k] = b;
    }
    return n;
}

int hw_compare_groups_scale(const hw_compare_groups *groups) {
    int *idx = malloc((size_t)(groups->n_groups > 0 ? groups->n_groups : 1) * sizeof *idx);
    int scale = 0;
    for (int a = 0; idx && a < groups->n_groups && !scale; a++) scale = line_members(groups, a, idx) >= 2;
    free(idx);
    return scale;
}

// Panel k's value of group g: samples/s (k 0) or seconds to the target (k 1).
static const hw_stats_summary *scaling_value(const hw_compare_group *g, int k) {
    return k == 0 ? &g->samples_per_s : &g->seconds_to_target;
}

static void put_scaling_line(FILE *out, const svg_panel *f, const hw_compare_groups *groups, const int *idx, int n,
                             int k, const char *colour) {
    fprintf(out, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2.2\" points=\"", colour);
    for (int i = 0; i < n; i++) {
        const hw_stats_summary *s = scaling_value(&groups->groups[idx[i]], k);
        if (!isnan(s->mean))
            fprintf(out, "%.2f,%.2f ", svg_panel_x(f, groups->groups[idx[i]].workers), svg_panel_y(f, s->mean));
    }
    fputs("\"/>\n", out);
    for (int i = 0; i < n; i++) {
        const hw_compare_group *g = &groups->groups[idx[i]];
        const hw_stats_summary *s = scaling_value(g, k);
        if (isnan(s->mean)) continue;
        double x = svg_panel_x(f, g->workers);
        if (!isnan(s->ci_low)) {
            fprintf(out, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"%s\" stroke-width=\"1.5\"/>\n",
                    x, svg_panel_y(f, s->ci_low), x, svg_panel_y(f, s->ci_high), colour);
            for (int e = 0; e < 2; e++) {
                double y = svg_panel_y(f, e ? s->ci_high : s->ci_low);
                fprintf(out,
                        "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"%s\" stroke-width=\"1.5\"/>\n",
                        x - 5, y, x + 5, y, colour);
            }
        }
        fprintf(out, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"3.5\" fill=\"%s\"/>\n", x, svg_panel_y(f, s->mean), colour);
    }
    // The linear ideal from the one-worker group: samples/s times the workers, the time divided by them.
    const hw_compare_group *one = &groups->groups[idx[0]];
    const hw_stats_summary *base = scaling_value(one, k);
    if (one->workers != 1 || isnan(base->mean)) return;
    fprintf(out, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.3\" stroke-dasharray=\"5 4\" points=\"",
            colour);
    const int last = groups->groups[idx[n - 1]].workers;
    for (int i = 0; i <= 40; i++) {
        double w = 1 + (last - 1) * i / 40.0;
        fprintf(out, "%.2f,%.2f ", svg_panel_x(f, w), svg_panel_y(f, k == 0 ? base->mean * w : base->mean / w));
    }
    fputs("\"/>\n", out);
}

// Panel k's y range over every line, the ideal included, from 0.
static hw_axis scaling_axis(const hw_compare_groups *groups, int k) {
    double hi = 0;
    for (int a = 0; a < groups->n_groups; a++) {
        const hw_compare_group *g = &groups->groups[a];
        const hw_stats_summary *s = scaling_value(g, k);
        double top = isnan(s->ci_high) ? s->mean : s->ci_high;
        if (top > hi) hi = top;
        if (k == 0 && g->baseline >= 0) {
            double ideal = groups->groups[g->baseline].samples_per_s.mean * g->workers;
            if (ideal > hi) hi = ideal;
        }
    }
    return hw_nice_axis(0, hi > 0 ? hi * 1.05 : 1, 7);
}

int hw_compare_write_scaling_plot(const char *path, const hw_compare_groups *groups, double target) {
    if (!hw_compare_groups_scale(groups)) return hw_fail("no mode was run at two worker counts: no scaling to plot");
    int *idx = malloc((size_t)groups->n_groups * sizeof *idx);
    if (!idx) return hw_fail("out of memory for the scaling plot");
    hw_whole_file w;
    if (hw_whole_file_open(&w, path, "the plot") != HW_OK) {
        free(idx);
        return HW_ERR;
    }
    FILE *out = w.f;
    int most = 1, n_lines = 0;
    for (int a = 0; a < groups->n_groups; a++) {
        if (groups->groups[a].workers > most) most = groups->groups[a].workers;
        n_lines += line_first(groups, a);
    }
    // A tick at every worker count up to 10; past it, nice numbers.
    hw_axis x = most <= 10 ? (hw_axis){0, most + 0.5, 1, most + 1} : hw_nice_axis(0, most, 8);
    svg_panel frames[2] = {{SVG_PANEL_X0, x, scaling_axis(groups, 0)}, {SVG_PANEL_X1, x, scaling_axis(groups, 1)}};
    char title[160], time_title[96];
    snprintf(title, sizeof title, "hogwild compare: scaling of %d line(s), mean and 95%% interval", n_lines);
    snprintf(time_title, sizeof time_title, "Time to %g%% test accuracy", target);
    svg_begin(out, SVG_WIDTH, LEGEND_TOP + (n_lines + 1) * SVG_LEGEND_ROW + 16, title);
    const char *workers = "workers (Hogwild) or replicas (DataParallel)";
    svg_panel_frame(out, &frames[0], "Training throughput", workers, 44, "samples / s", 0, 1);
    svg_panel_frame(out, &frames[1], time_title, workers, 44, "seconds", 0, 1);
    for (int k = 0; k < 2; k++) {
        fprintf(out, "<clipPath id=\"scale%d\"><rect x=\"%.2f\" y=\"%d\" width=\"%d\" height=\"%d\"/></clipPath>\n", k,
                frames[k].x0 - 8, SVG_PLOT_TOP - 8, SVG_PLOT_W + 16, SVG_PLOT_H + 8);
    }
    int line = 0;
    for (int a = 0; a < groups->n_groups; a++) {
        if (!line_first(groups, a)) continue;
        int n = line_members(groups, a, idx);
        const char *colour = svg_palette[line % SVG_N_COLOURS];
        for (int k = 0; k < 2; k++) {
            // Bars below 0 (a wide interval of few runs) stop at the frame.
            fprintf(out, "<g clip-path=\"url(#scale%d)\">\n", k);
            put_scaling_line(out, &frames[k], groups, idx, n, k, colour);
            fputs("</g>\n", out);
        }
        const hw_compare_group *g = &groups->groups[a];
        char text[200];
        int used = snprintf(text, sizeof text, "%s, %s", g->mode, g->model);
        if (groups->n_setups > 1 && used > 0 && (size_t)used < sizeof text) {
            snprintf(text + used, sizeof text - (size_t)used, ", setup %016llx", (unsigned long long)g->setup);
        }
        put_legend_row(out, line++, colour, "", text);
    }
    put_legend_row(out, line, "#555", " stroke-dasharray=\"5 4\"",
                   "linear ideal from the line's 1-worker group (its colour); bars: 95% CI of the mean");
    fputs("</svg>\n", out);
    free(idx);
    return hw_whole_file_commit(&w, HW_OK, "the plot");
}
