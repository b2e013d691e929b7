// svg_internal: what the plots of `hogwild compare` share, private to src/report/ (in svg.c): the
// palette, the layout and a panel's frame, tick labels, escaped text and a legend row. The plots themselves and the axes, which
// svg.c defines too, are hw/svg.h's; svg_accuracy.c draws the accuracy curves, svg_groups.c the
// groups' bands and the scaling plot, svg_measure.c the --measure plot.
#ifndef HW_REPORT_SVG_INTERNAL_H
#define HW_REPORT_SVG_INTERNAL_H

#include "hw/svg.h"

#include <stddef.h>
#include <stdio.h>

enum { SVG_N_COLOURS = 10 };

// The layout every compare plot shares, in SVG user units (px): two plotting areas side by side,
// the legend below them.
enum {
    SVG_PLOT_W = 430,  // one panel's plotting area
    SVG_PLOT_H = 320,
    SVG_PLOT_TOP = 50,
    SVG_PANEL_X0 = 80,    // the first area's left edge (room for the y tick labels and the y label)
    SVG_PANEL_GAP = 110,  // from the first area's right edge to the second's left edge
    SVG_PANEL_X1 = SVG_PANEL_X0 + SVG_PLOT_W + SVG_PANEL_GAP,
    SVG_LEGEND_ROW = 22,
    SVG_WIDTH = SVG_PANEL_X1 + SVG_PLOT_W + 40,
};

// One panel: its plotting area's left edge and its two axes.
typedef struct {
    double x0;
    hw_axis x, y;
} svg_panel;

// Where value v of the panel's x (or y) axis lies in the document.
double svg_panel_x(const svg_panel *p, double v);
double svg_panel_y(const svg_panel *p, double v);
// The panel's title, the y axis's grid and ticks, the box and both axis labels, the x label
// `x_label_dy` below the box. With `x_suffix` 0 or 1 also the x axis's grid and ticks (1: thousands
// as "k", as svg_format_tick; `y_suffix` the same for the y ticks); with -1 the caller draws its own
// x ticks (named bins) with svg_put_x_tick.
void svg_panel_frame(FILE *out, const svg_panel *p, const char *title, const char *x_label, double x_label_dy,
                     const char *y_label, int x_suffix, int y_suffix);
// A tick on the x axis at document x; `slanted` labels (many bins, long names) are turned so that
// they do not overlap.
void svg_put_x_tick(FILE *out, double x, const char *label, int slanted);
// The target accuracy as a dashed line across the panel, labelled at its right end.
void svg_panel_target(FILE *out, const svg_panel *p, double target);
// One colour per run, in order; past ten runs they come round again.
extern const char *const svg_palette[SVG_N_COLOURS];

// A tick label with as many decimals as the step needs; with `suffix`, thousands as "k" and
// millions as "M" (samples seen: "60k" rather than "60000").
void svg_format_tick(double v, double step, double axis_max, int suffix, char *buf, size_t cap);
// Text content or attribute value: XML-escaped; control bytes and invalid UTF-8 (from file names)
// become '?', so that the document stays well-formed.
void svg_put_text(FILE *out, const char *text);
// The document's start: the <svg> element of width x height, its <title> (escaped) and a white
// background. The caller ends it with "</svg>".
void svg_begin(FILE *out, int width, int height, const char *title);
// A legend row's text at (x, y): the run's label, "diverged after N samples" for a diverged run,
// and its file in grey.
void svg_put_legend_text(FILE *out, double x, double y, const hw_metrics_table *run);

#endif
