// svg: what the plots of `hogwild compare` share: the axes on nice numbers (hw/svg.h), and (private,
// svg_internal.h) tick labels, the palette, XML-escaped text and a legend row.
#include "svg_internal.h"

#include <math.h>
#include <string.h>

const char *const svg_palette[SVG_N_COLOURS] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                                "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"};

hw_axis hw_nice_axis(double lo, double hi, int max_ticks) {
    if (max_ticks < 2) max_ticks = 2;
    if (!isfinite(lo) || !isfinite(hi)) lo = 0, hi = 1;
    if (!(hi > lo)) hi = lo + 1;
    double raw = (hi - lo) / (max_ticks - 1);
    double step = pow(10, floor(log10(raw)));
    static const double mantissa[] = {1, 2, 5};
    hw_axis axis = {0};
    // Walk up the 1-2-5 steps from below the raw step until the rounded-out range fits.
    for (int k = 0;; k = (k + 1) % 3) {
        double s = mantissa[k] * step;
        if (k == 2) step *= 10;
        if (s < raw * (1 - 1e-9)) continue;
        // The epsilon keeps 0.3 / 0.1 = 2.9999999999999996 from flooring to 2.
        double first = floor(lo / s + 1e-9), last = ceil(hi / s - 1e-9);
        int n = (int)(last - first) + 1;
        if (n > max_ticks) continue;
        axis.lo = first * s;
        axis.hi = last * s;
        axis.step = s;
        axis.n_ticks = n;
        return axis;
    }
}

double hw_axis_tick(const hw_axis *axis, int i) {
    double v = (floor(axis->lo / axis->step + 0.5) + i) * axis->step;
    return fabs(v) < axis->step * 1e-9 ? 0.0 : v;
}

// A tick label with as many decimals as the step needs; with `suffix`, thousands as "k" and
// millions as "M" (samples seen: "60k" rather than "60000").
void svg_format_tick(double v, double step, double axis_max, int suffix, char *buf, size_t cap) {
    double unit = 1;
    const char *unit_name = "";
    if (suffix && axis_max >= 1e6) {
        unit = 1e6;
        unit_name = "M";
    } else if (suffix && axis_max >= 1e4) {
        unit = 1e3;
        unit_name = "k";
    }
    double scaled_step = step / unit;
    int decimals = scaled_step >= 1 ? 0 : (int)ceil(-log10(scaled_step) - 1e-9);
    snprintf(buf, cap, "%.*f%s", decimals, v / unit, v == 0 ? "" : unit_name);
}

// Length of the valid UTF-8 sequence at s, or 0 when it is not one.
static int utf8_length(const unsigned char *s) {
    int n = s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 && s[0] < 0xe0 ? 2 : 0;
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
    }
    return n;
}

void svg_put_legend_text(FILE *out, double x, double y, const hw_metrics_table *run) {
    char label[256];
    hw_metrics_label(run, label, sizeof label);
    fprintf(out, "<text x=\"%.2f\" y=\"%.2f\" dominant-baseline=\"middle\">", x, y);
    svg_put_text(out, label);
    if (run->diverged) {
        fprintf(out, " <tspan fill=\"#d62728\" font-weight=\"bold\">diverged after %lld samples, not ranked</tspan>",
                (long long)run->diverged_at.samples_seen);
    }
    fputs(" <tspan fill=\"#666\">(", out);
    svg_put_text(out, run->path);
    fputs(")</tspan></text>\n", out);
}

// Text content or attribute value: XML-escaped; control bytes and invalid UTF-8 (from file names)
// become '?', so that the document stays well-formed.
void svg_begin(FILE *out, int width, int height, const char *title) {
    fprintf(out,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
            "font-family=\"DejaVu Sans, Arial, Helvetica, sans-serif\" font-size=\"12\">\n" HW_SVG_MARKER "\n",
            width, height, width, height);
    fprintf(out, "<title>");
    svg_put_text(out, title);
    fprintf(out, "</title>\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
}

void svg_put_text(FILE *out, const char *text) {
    const unsigned char *s = (const unsigned char *)text;
    while (*s) {
        if (*s == '&') fputs("&amp;", out);
        else if (*s == '<') fputs("&lt;", out);
        else if (*s == '>') fputs("&gt;", out);
        else if (*s == '"') fputs("&quot;", out);
        else if (*s == '\'') fputs("&apos;", out);
        else if (*s < 0x20 || *s == 0x7f) fputc('?', out);
        else if (*s < 0x80) fputc(*s, out);
        else {
            int n = utf8_length(s);
            if (n == 0) {
                fputc('?', out);
            } else {
                fwrite(s, 1, (size_t)n, out);
                s += n - 1;
            }
        }
        s++;
    }
}

int hw_svg_is_compare_plot(const char *path) {
    char head[1024 + sizeof HW_SVG_MARKER] = "";
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t n = fread(head, 1, sizeof head - 1, f);
    fclose(f);
    head[n] = '\0';
    const char *line = strchr(head, '\n');
    return strncmp(head, "<svg ", 5) == 0 && line && strncmp(line + 1, HW_SVG_MARKER, strlen(HW_SVG_MARKER)) == 0;
}

double svg_panel_x(const svg_panel *p, double v) { return p->x0 + (v - p->x.lo) / (p->x.hi - p->x.lo) * SVG_PLOT_W; }

double svg_panel_y(const svg_panel *p, double v) {
    return SVG_PLOT_TOP + (p->y.hi - v) / (p->y.hi - p->y.lo) * SVG_PLOT_H;
}

void svg_put_x_tick(FILE *out, double x, const char *label, int slanted) {
    const double bottom = SVG_PLOT_TOP + SVG_PLOT_H;
    fprintf(out, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#333\"/>\n", x, bottom, x, bottom + 5);
    if (slanted) {
        fprintf(out,
                "<text transform=\"translate(%.2f %.2f) rotate(-35)\" text-anchor=\"end\" font-size=\"11\">%s</text>\n",
                x + 4, bottom + 16, label);
    } else {
        fprintf(out, "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\">%s</text>\n", x, bottom + 20, label);
    }
}

void svg_panel_frame(FILE *out, const svg_panel *p, const char *title, const char *x_label, double x_label_dy,
                     const char *y_label, int x_suffix, int y_suffix) {
    const double left = p->x0, right = p->x0 + SVG_PLOT_W, top = SVG_PLOT_TOP, bottom = SVG_PLOT_TOP + SVG_PLOT_H;
    fprintf(out, "<text x=\"%.2f\" y=\"%d\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\">%s</text>\n",
            left + SVG_PLOT_W / 2.0, SVG_PLOT_TOP - 14, title);
    for (int i = 0; i < p->y.n_ticks; i++) {
        double v = hw_axis_tick(&p->y, i), y = svg_panel_y(p, v);
        char label[32];
        svg_format_tick(v, p->y.step, p->y.hi, y_suffix, label, sizeof label);
        fprintf(out, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#e4e4e4\"/>\n", left, y, right, y);
        fprintf(out, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#333\"/>\n", left - 5, y, left, y);
        fprintf(out, "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"end\" dominant-baseline=\"middle\">%s</text>\n",
                left - 8, y, label);
    }
    for (int i = 0; x_suffix >= 0 && i < p->x.n_ticks; i++) {
        double v = hw_axis_tick(&p->x, i), x = svg_panel_x(p, v);
        char label[32];
        svg_format_tick(v, p->x.step, p->x.hi, x_suffix, label, sizeof label);
        fprintf(out, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#e4e4e4\"/>\n", x, top, x, bottom);
        svg_put_x_tick(out, x, label, 0);
    }
    fprintf(out, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#333\"/>\n", left, top,
            SVG_PLOT_W, SVG_PLOT_H);
    fprintf(out, "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\">%s</text>\n", left + SVG_PLOT_W / 2.0,
            bottom + x_label_dy, x_label);
    fprintf(out, "<text transform=\"translate(%.2f %.2f) rotate(-90)\" text-anchor=\"middle\">%s</text>\n", left - 52,
            top + SVG_PLOT_H / 2.0, y_label);
}

void svg_panel_target(FILE *out, const svg_panel *p, double target) {
    const double left = p->x0, right = p->x0 + SVG_PLOT_W, ty = svg_panel_y(p, target);
    fprintf(out,
            "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#555\" stroke-width=\"1.2\" "
            "stroke-dasharray=\"6 4\"/>\n",
            left, ty, right, ty);
    // The label sits above the line, or below it when the line runs close to the top edge.
    double label_y = ty - SVG_PLOT_TOP < 16 ? ty + 13 : ty - 4;
    fprintf(out, "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"end\" fill=\"#555\" font-size=\"11\">target %g%%</text>\n",
            right - 4, label_y, target);
}
