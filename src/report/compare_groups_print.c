// compare_groups_print: the group tables of `hogwild compare` and their CSV
// (include/hw/compare_groups.h).
#include "hw/compare_groups.h"

#include "hw/err.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { CELL = 384, MAX_COLS = 8 };  // a label: mode, workers, model and setup name

// "mean ±sd [lo, hi]" with `decimals`; one value: "value (n=1)"; none: "-". The interval is cut at
// the quantity's bounds [floor, ceiling]: with few runs Student's t reaches past them (an accuracy
// of 115%, a negative speed), which no run can have.
static void stat_cell(char *buf, const hw_stats_summary *s, int decimals, double floor, double ceiling) {
    if (s->n == 0 || isnan(s->mean)) snprintf(buf, CELL, "-");
    else if (s->n == 1) snprintf(buf, CELL, "%.*f (n=1)", decimals, s->mean);
    else {
        double lo = s->ci_low < floor ? floor : s->ci_low, hi = s->ci_high > ceiling ? ceiling : s->ci_high;
        snprintf(buf, CELL, "%.*f ±%.*f [%.*f, %.*f]", decimals, s->mean, decimals, s->sd, decimals, lo, decimals, hi);
    }
}

// The group's name in a table: "hogwild 2 mlp", and what tells its setup from the others' when the
// groups have several ("hogwild 2 lenet lr-schedule=cosine").
static void group_label(char *buf, const hw_compare_groups *groups, const hw_compare_group *g) {
    if (groups->n_setups > 1) {
        snprintf(buf, CELL, "%s %d %s %s", g->mode, g->workers, g->model, g->setup_name);
    } else {
        snprintf(buf, CELL, "%s %d %s", g->mode, g->workers, g->model);
    }
}

// The UTF-8 characters of `text` (its width in a terminal: "±" is two bytes, one column).
static int text_width(const char *text) {
    int w = 0;
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) w += (*p & 0xC0) != 0x80;
    return w;
}

// An aligned table of n_rows rows of n_cols cells (the first left-aligned, the others right).
static void put_table(FILE *out, const char *const *header, char (*cells)[MAX_COLS][CELL], int n_rows, int n_cols) {
    int width[MAX_COLS];
    for (int c = 0; c < n_cols; c++) {
        width[c] = text_width(header[c]);
        for (int r = 0; r < n_rows; r++) {
            if (text_width(cells[r][c]) > width[c]) width[c] = text_width(cells[r][c]);
        }
    }
    for (int r = -1; r < n_rows; r++) {
        for (int c = 0; c < n_cols; c++) {
            const char *text = r < 0 ? header[c] : cells[r][c];
            int pad = width[c] - text_width(text);
            if (c == 0) fprintf(out, "%s%*s", text, pad, "");
            else fprintf(out, "%*s%s", pad, "", text);
            fputs(c == n_cols - 1 ? "\n" : "  ", out);
        }
    }
}

// The speed-up cell: "1.85 [1.70, 2.01]", "1.85" without an interval, "-" without a baseline.
static void speed_up_cell(char *buf, const hw_compare_groups *groups, const hw_compare_group *g) {
    if (g->baseline >= 0 && &groups->groups[g->baseline] == g) snprintf(buf, CELL, "1 (itself)");
    else if (g->baseline < 0 || isnan(g->speed_up.ratio)) snprintf(buf, CELL, "-");
    else if (isnan(g->speed_up.ci_low)) snprintf(buf, CELL, "%.2f", g->speed_up.ratio);
    else snprintf(buf, CELL, "%.2f [%.2f, %.2f]", g->speed_up.ratio, g->speed_up.ci_low, g->speed_up.ci_high);
}

static void print_welch(FILE *out, const hw_compare_groups *groups) {
    int any = 0;
    for (int a = 0; a < groups->n_groups; a++) {
        const hw_compare_group *g = &groups->groups[a];
        if (g->other_mode < 0 || strcmp(g->mode, "hogwild") != 0) continue;
        const hw_compare_group *h = &groups->groups[g->other_mode];
        if (!any) fprintf(out, "\nhogwild against dataparallel (Welch's t-test, two-sided):\n");
        any = 1;
        fprintf(out, "  at %d worker(s), %s: final accuracy %.2f vs %.2f", g->workers, g->model, g->final_accuracy.mean,
                h->final_accuracy.mean);
        if (isnan(g->welch_accuracy.p)) fprintf(out, " (no test: needs 2 runs a side with some spread)");
        else fprintf(out, " p = %.3g", g->welch_accuracy.p);
        fprintf(out, "; samples/s %.0f vs %.0f", g->samples_per_s.mean, h->samples_per_s.mean);
        if (isnan(g->welch_speed.p)) fprintf(out, " (no test)\n");
        else fprintf(out, " p = %.3g\n", g->welch_speed.p);
    }
}

void hw_compare_groups_print(FILE *out, const hw_compare_groups *groups, const hw_metrics_table *runs, double target) {
    for (int l = 0; l < groups->n_left_out; l++) {
        fprintf(out, "left out: %s: %s\n", runs[groups->left_out[l].run].path, groups->left_out[l].reason);
    }
    if (groups->n_groups == 0) {
        fprintf(out, "no groups of runs (no file with the identity columns that is a result)\n");
        return;
    }
    char(*cells)[MAX_COLS][CELL] = calloc((size_t)groups->n_groups, sizeof *cells);
    if (!cells) return;
    fprintf(out,
            "\ngroups of runs that differ by seed alone; each cell: mean ±sd [95%% CI of the mean, cut where no run "
            "can be: below 0, above 100%%]\n");
    char to_target[40], samples_to_target[48];
    snprintf(to_target, sizeof to_target, "s to %g%%", target);
    snprintf(samples_to_target, sizeof samples_to_target, "samples to %g%%", target);
    const char *accuracy_header[] = {"group", "runs", "final %", "best %"};
    const char *speed_header[] = {"group",   "samples/s", "speed-up vs 1 worker",
                                  "reached", to_target,   samples_to_target};
    for (int a = 0; a < groups->n_groups; a++) {
        const hw_compare_group *g = &groups->groups[a];
        group_label(cells[a][0], groups, g);
        snprintf(cells[a][1], CELL, "%d", g->n_members);
        stat_cell(cells[a][2], &g->final_accuracy, 2, 0, 100);
        stat_cell(cells[a][3], &g->best_accuracy, 2, 0, 100);
    }
    put_table(out, accuracy_header, cells, groups->n_groups, 4);
    fputc('\n', out);
    for (int a = 0; a < groups->n_groups; a++) {
        const hw_compare_group *g = &groups->groups[a];
        stat_cell(cells[a][1], &g->samples_per_s, 0, 0, INFINITY);
        speed_up_cell(cells[a][2], groups, g);
        snprintf(cells[a][3], CELL, "%d/%d", g->n_reached, g->n_members);
        stat_cell(cells[a][4], &g->seconds_to_target, 2, 0, INFINITY);
        stat_cell(cells[a][5], &g->samples_to_target, 0, 0, INFINITY);
    }
    put_table(out, speed_header, cells, groups->n_groups, 6);
    free(cells);
    print_welch(out, groups);
}

// A number of the CSV: empty when not a number (no interval of one run, no time to an unreached target).
static void put_csv_number(FILE *f, double v) {
    if (isnan(v)) fputs(",", f);
    else fprintf(f, ",%.10g", v);
}

static void put_csv_summary(FILE *f, const hw_stats_summary *s) {
    put_csv_number(f, s->mean);
    put_csv_number(f, s->ci_low);
    put_csv_number(f, s->ci_high);
}

int hw_compare_groups_write_csv(const char *path, const hw_compare_groups *groups, double target) {
    FILE *f = fopen(path, "w");
    if (!f) return hw_fail_errno(errno, "cannot write the summary CSV %s", path);
    fprintf(f, "mode,workers,model,runs,final_accuracy_mean,final_accuracy_ci_low,final_accuracy_ci_high,"
               "samples_per_s_mean,samples_per_s_ci_low,samples_per_s_ci_high,target,reached,"
               "seconds_to_target_mean,seconds_to_target_ci_low,seconds_to_target_ci_high,samples_to_target_mean,"
               "samples_to_target_ci_low,samples_to_target_ci_high,final_accuracy_sd,samples_per_s_sd,"
               "best_accuracy_mean,speed_up,speed_up_ci_low,speed_up_ci_high,setup,settings\n");
    for (int a = 0; a < groups->n_groups; a++) {
        const hw_compare_group *g = &groups->groups[a];
        fprintf(f, "%s,%d,%s,%d", g->mode, g->workers, g->model, g->n_members);
        put_csv_summary(f, &g->final_accuracy);
        put_csv_summary(f, &g->samples_per_s);
        fprintf(f, ",%g,%d", target, g->n_reached);
        put_csv_summary(f, &g->seconds_to_target);
        put_csv_summary(f, &g->samples_to_target);
        put_csv_number(f, g->final_accuracy.sd);
        put_csv_number(f, g->samples_per_s.sd);
        put_csv_number(f, g->best_accuracy.mean);
        put_csv_number(f, g->speed_up.ratio);
        put_csv_number(f, g->speed_up.ci_low);
        put_csv_number(f, g->speed_up.ci_high);
        fprintf(f, ",%016llx,%s\n", (unsigned long long)g->setup, g->settings);
    }
    if (ferror(f)) {
        fclose(f);
        return hw_fail("cannot write the summary CSV %s", path);
    }
    if (fclose(f) != 0) return hw_fail_errno(errno, "cannot write the summary CSV %s", path);
    return HW_OK;
}
