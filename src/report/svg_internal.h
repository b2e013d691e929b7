// svg_internal: what the plots of `hogwild compare` share, private to src/report/ (in svg.c): the
// palette, tick labels, escaped text and a legend row. The plots themselves and the axes, which
// svg.c defines too, are hw/svg.h's; svg_accuracy.c draws the accuracy curves, svg_measure.c the
// --measure plot.
#ifndef HW_REPORT_SVG_INTERNAL_H
#define HW_REPORT_SVG_INTERNAL_H

#include "hw/svg.h"

#include <stddef.h>
#include <stdio.h>

enum { SVG_N_COLOURS = 10 };
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
