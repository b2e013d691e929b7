// svg_accuracy: the comparison plot of `hogwild compare` as one standalone SVG document: two panels
// (test accuracy against wall time, and against samples seen), a legend, the target as a dashed line.
#include "svg_internal.h"

#include "hw/err.h"
#include "hw/file.h"

#include <errno.h>
#include <math.h>
#include <string.h>

enum { LEGEND_TOP = SVG_PLOT_TOP + SVG_PLOT_H + 72 };

// Past ten runs the colours come round again, and the lines are dashed to tell them apart.
static const char *dash_of(int run) { return run >= SVG_N_COLOURS ? " stroke-dasharray=\"7 3\"" : ""; }

// hogwild runs are drawn with circles, the others with squares, so modes read apart without colour.
static void put_marker(FILE *out, double x, double y, const char *colour, int circle) {
    if (circle) {
        fprintf(out, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"3.5\" fill=\"%s\"/>\n", x, y, colour);
    } else {
        fprintf(out, "<rect x=\"%.2f\" y=\"%.2f\" width=\"7\" height=\"7\" fill=\"%s\"/>\n", x - 3.5, y - 3.5, colour);
    }
}

static double x_value(const hw_metrics_point *pt, int by_samples) {
    return by_samples ? (double)pt->samples_seen : pt->wall_seconds;
}

static void put_panel(FILE *out, const svg_panel *p, int index, const hw_metrics_table *runs, int n_runs,
                      double target) {
    const int by_samples = index == 1;
    const double left = p->x0, top = SVG_PLOT_TOP;
    fprintf(out, "<g>\n");
    svg_panel_frame(out, p, by_samples ? "Test accuracy against samples seen" : "Test accuracy against wall time",
                    by_samples ? "samples seen" : "wall time (s)", 44, "test accuracy (%)", by_samples, 0);
    svg_panel_target(out, p, target);

    // The curves. Points below the y range (the untrained model at ~10%) are clipped at the bottom
    // edge only; the clip reaches a little past the other edges so markers there are not cut.
    fprintf(out, "<clipPath id=\"clip%d\"><rect x=\"%.2f\" y=\"%.2f\" width=\"%d\" height=\"%d\"/></clipPath>\n", index,
            left - 8, top - 8, SVG_PLOT_W + 16, SVG_PLOT_H + 8);
    fprintf(out, "<g clip-path=\"url(#clip%d)\">\n", index);
    for (int r = 0; r < n_runs; r++) {
        const char *colour = svg_palette[r % SVG_N_COLOURS];
        const int circle = strcmp(runs[r].mode, "hogwild") == 0;
        fprintf(out, "<polyline fill=\"none\" stroke=\"%s\"%s stroke-width=\"2\" stroke-linejoin=\"round\" points=\"",
                colour, dash_of(r));
        for (int i = 0; i < runs[r].n_points; i++) {
            const hw_metrics_point *pt = &runs[r].points[i];
            fprintf(out, "%s%.2f,%.2f", i ? " " : "", svg_panel_x(p, x_value(pt, by_samples)),
                    svg_panel_y(p, pt->test_accuracy));
        }
        fprintf(out, "\"/>\n");
        for (int i = 0; i < runs[r].n_points; i++) {
            const hw_metrics_point *pt = &runs[r].points[i];
            put_marker(out, svg_panel_x(p, x_value(pt, by_samples)), svg_panel_y(p, pt->test_accuracy), colour, circle);
        }
    }
    fprintf(out, "</g>\n</g>\n");
}

// The y range: from a little below the lowest accuracy worth looking at, to 100. The evaluation
// of the untrained model (samples_seen 0, ~10%) is left out of that minimum, or it would squash
// every curve into the top of the panel; the target is always in range.
static hw_axis accuracy_axis(const hw_metrics_table *runs, int n_runs, double target) {
    double lo = target, lo_all = target;
    for (int r = 0; r < n_runs; r++) {
        for (int i = 0; i < runs[r].n_points; i++) {
            double a = runs[r].points[i].test_accuracy;
            if (a < lo_all) lo_all = a;
            if (runs[r].points[i].samples_seen > 0 && a < lo) lo = a;
        }
    }
    int trained_points = 0;
    for (int r = 0; r < n_runs; r++) trained_points += runs[r].points[runs[r].n_points - 1].samples_seen > 0;
    if (trained_points == 0) lo = lo_all;
    if (lo > 99) lo = 99;
    lo -= 0.03 * (100 - lo);  // so that the lowest point is not on the bottom edge
    hw_axis axis = hw_nice_axis(lo, 100, 8);
    if (axis.lo < 0) axis = hw_nice_axis(0, 100, 8);
    return axis;
}

int hw_compare_plot_svg(FILE *out, const hw_metrics_table *runs, int n_runs, double target) {
    double max_wall = 0, max_samples = 0;
    for (int r = 0; r < n_runs; r++) {
        const hw_metrics_point *last = &runs[r].points[runs[r].n_points - 1];
        if (last->wall_seconds > max_wall) max_wall = last->wall_seconds;
        if ((double)last->samples_seen > max_samples) max_samples = (double)last->samples_seen;
    }
    hw_axis y = accuracy_axis(runs, n_runs, target);
    svg_panel panels[2] = {
        {SVG_PANEL_X0, hw_nice_axis(0, max_wall, 8), y},
        {SVG_PANEL_X1, hw_nice_axis(0, max_samples, 7), y},
    };
    const int height = LEGEND_TOP + n_runs * SVG_LEGEND_ROW + 16;

    char title[128];
    snprintf(title, sizeof title, "hogwild compare: test accuracy of %d run%s, target %g%%", n_runs,
             n_runs == 1 ? "" : "s", target);
    svg_begin(out, SVG_WIDTH, height, title);
    for (int k = 0; k < 2; k++) put_panel(out, &panels[k], k, runs, n_runs, target);

    // The legend, one row per run, under both panels.
    fprintf(out, "<g>\n");
    for (int r = 0; r < n_runs; r++) {
        const char *colour = svg_palette[r % SVG_N_COLOURS];
        double y = LEGEND_TOP + r * SVG_LEGEND_ROW, x = SVG_PANEL_X0;
        fprintf(out, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"%s\"%s stroke-width=\"2\"/>\n", x,
                y, x + 28, y, colour, dash_of(r));
        put_marker(out, x + 14, y, colour, strcmp(runs[r].mode, "hogwild") == 0);
        svg_put_legend_text(out, x + 38, y, &runs[r]);
    }
    fprintf(out, "</g>\n</svg>\n");
    if (ferror(out)) return hw_fail("error writing the SVG plot");
    return HW_OK;
}

int hw_compare_write_plot(const char *path, const hw_metrics_table *runs, int n_runs, double target) {
    hw_whole_file w;
    if (hw_whole_file_open(&w, path, "the plot") != HW_OK) return HW_ERR;
    int drawn = hw_compare_plot_svg(w.f, runs, n_runs, target);
    // A failed write is the commit's to name, with its reason (disk full, file size limit).
    if (drawn != HW_OK && !w.error) drawn = hw_error_prefix("%s", path);
    return hw_whole_file_commit(&w, w.error ? HW_OK : drawn, "the plot");
}
