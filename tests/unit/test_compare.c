// Tests of the compare module: the metrics CSV reader, time to target, the table, the SVG plot,
// nice axis ticks and the `hogwild compare` command line.
#include "cli/compare_command.h"
#include "hw/compare.h"
#include "hw/svg.h"
#include "hw/err.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HEADER "mode,workers,device,wall_seconds,epoch,samples_seen,train_loss,test_loss,test_accuracy\n"

static char tmp_dir[64];

static void make_tmp_dir(void) {
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/hw_compare_XXXXXX");
    cr_assert_not_null(mkdtemp(tmp_dir));
}

static void remove_tmp_dir(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_dir);
    cr_expect_eq(system(cmd), 0);
}

// Writes `text` to tmp_dir/name; the returned path is static storage, one of four in turn.
static const char *write_file(const char *name, const char *text) {
    static char paths[4][256];
    static int next;
    char *path = paths[next++ % 4];
    snprintf(path, 256, "%s/%s", tmp_dir, name);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
    return path;
}

// Reads a whole file (or NULL when it does not exist); the caller frees.
static char *read_all(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    char *text = NULL;
    size_t cap = 0;
    FILE *mem = open_memstream(&text, &cap);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) fwrite(buf, 1, n, mem);
    fclose(f);
    fclose(mem);
    return text;
}

static int count_of(const char *haystack, const char *needle) {
    int n = 0;
    for (const char *p = strstr(haystack, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

// (A file per string, a row per line.)
// clang-format off
static const char *good_hogwild = HEADER
    "hogwild,4,cpu,0.000,0,0,nan,2.3051,9.82\n"
    "hogwild,4,cpu,3.412,0,20000,0.8123,0.4012,88.40\n"
    "hogwild,4,cpu,9.876,1,60000,0.3110,0.1021,96.93\n"
    "hogwild,4,cpu,15.000,2,120000,0.1500,0.0700,98.50\n";

static const char *good_dataparallel = HEADER
    "dataparallel,2,cuda:0+cuda:1,0.000,0,0,nan,2.3000,10.10\n"
    "dataparallel,2,cuda:0+cuda:1,2.000,1,60000,0.3000,0.1500,95.00\n"
    "dataparallel,2,cuda:0+cuda:1,4.000,2,120000,0.1200,0.0800,97.50\n";
// clang-format on

TestSuite(compare, .init = make_tmp_dir, .fini = remove_tmp_dir);

Test(compare, reads_a_well_formed_file) {
    hw_metrics_table log;
    const char *path = write_file("hw4.csv", good_hogwild);
    cr_assert_eq(hw_metrics_table_read(&log, path), HW_OK, "%s", hw_error());
    cr_expect_str_eq(log.mode, "hogwild");
    cr_expect_eq(log.workers, 4);
    cr_expect_str_eq(log.device, "cpu");
    cr_assert_eq(log.n_points, 4);
    cr_expect(isnan(log.points[0].train_loss));
    cr_expect_float_eq(log.points[0].test_loss, 2.3051, 1e-12);
    cr_expect_float_eq(log.points[2].wall_seconds, 9.876, 1e-12);
    cr_expect_eq(log.points[2].epoch, 1);
    cr_expect_eq(log.points[2].samples_seen, 60000);
    cr_expect_float_eq(log.points[2].train_loss, 0.3110, 1e-12);
    cr_expect_float_eq(log.points[3].test_accuracy, 98.50, 1e-12);
    cr_expect_float_eq(hw_metrics_best_accuracy(&log), 98.50, 1e-12);
    char label[128];
    hw_metrics_label(&log, label, sizeof label);
    cr_expect_str_eq(label, "hogwild, 4 workers, cpu");
    hw_metrics_table_free(&log);
}

Test(compare, columns_by_name_crlf_and_blank_lines) {
    hw_metrics_table log;
    const char *path = write_file("dp.csv", "test_accuracy,extra,device,mode,workers,epoch,samples_seen,wall_seconds,"
                                            "test_loss,train_loss\r\n"
                                            "91.5,x,cuda:0+cuda:1,dataparallel,2,0,20000,1.5,0.3,0.4\r\n"
                                            "\r\n"
                                            "97.25 , y, cuda:0+cuda:1 ,dataparallel,2,1,60000,4.0,0.1,nan\r\n");
    cr_assert_eq(hw_metrics_table_read(&log, path), HW_OK, "%s", hw_error());
    cr_assert_eq(log.n_points, 2);
    cr_expect_str_eq(log.device, "cuda:0+cuda:1");
    cr_expect_float_eq(log.points[1].test_accuracy, 97.25, 1e-12);
    cr_expect_float_eq(log.points[1].wall_seconds, 4.0, 1e-12);
    cr_expect(isnan(log.points[1].train_loss));
    char label[128];
    hw_metrics_label(&log, label, sizeof label);
    cr_expect_str_eq(label, "dataparallel, 2 replicas, cuda:0+cuda:1");
    hw_metrics_table_free(&log);
}

// A run built in memory: accuracies acc[i] at wall[i] seconds and samples[i] samples.
static hw_metrics_table make_run(hw_metrics_point *points, int n, const double *wall, const int64_t *samples,
                                 const double *acc) {
    hw_metrics_table log = {
        .path = "mem.csv", .mode = "hogwild", .workers = 2, .device = "cpu", .points = points, .n_points = n};
    for (int i = 0; i < n; i++) {
        points[i] = (hw_metrics_point){.wall_seconds = wall[i], .samples_seen = samples[i], .test_accuracy = acc[i]};
    }
    return log;
}

Test(compare, time_to_target_interpolates_by_accuracy) {
    const double wall[] = {0, 10, 20, 30};
    const int64_t samples[] = {0, 20000, 60000, 90000};
    const double acc[] = {9.82, 96.0, 99.0, 99.5};
    hw_metrics_point points[4];
    hw_metrics_table log = make_run(points, 4, wall, samples, acc);
    double t = -1, s = -1;
    // 98 lies 2/3 of the way from 96 (10 s, 20000) to 99 (20 s, 60000).
    cr_assert_eq(hw_metrics_time_to_target(&log, 98.0, &t, &s), 1);
    cr_expect_float_eq(t, 10 + 10 * 2.0 / 3.0, 1e-9);
    cr_expect_float_eq(s, 20000 + 40000 * 2.0 / 3.0, 1e-6);
    // Exactly at a row: that row's time, no interpolation past it.
    cr_assert_eq(hw_metrics_time_to_target(&log, 99.0, &t, &s), 1);
    cr_expect_float_eq(t, 20.0, 1e-9);
    cr_expect_float_eq(s, 60000.0, 1e-9);
    // Already above the target at the first row: that row.
    cr_assert_eq(hw_metrics_time_to_target(&log, 5.0, &t, NULL), 1);
    cr_expect_float_eq(t, 0.0, 1e-12);
    // Between the first two rows: 50 is (50 - 9.82) / (96 - 9.82) of the way.
    cr_assert_eq(hw_metrics_time_to_target(&log, 50.0, &t, &s), 1);
    cr_expect_float_eq(t, 10 * (50 - 9.82) / (96 - 9.82), 1e-9);
    cr_expect_float_eq(s, 20000 * (50 - 9.82) / (96 - 9.82), 1e-6);
}

Test(compare, time_to_target_first_crossing_not_a_later_one) {
    // Accuracy crosses 98 at the second row, dips, and crosses again: the first crossing counts.
    const double wall[] = {1, 2, 3, 4};
    const int64_t samples[] = {100, 200, 300, 400};
    const double acc[] = {97.0, 99.0, 97.5, 98.5};
    hw_metrics_point points[4];
    hw_metrics_table log = make_run(points, 4, wall, samples, acc);
    double t;
    cr_assert_eq(hw_metrics_time_to_target(&log, 98.0, &t, NULL), 1);
    cr_expect_float_eq(t, 1.5, 1e-9);
}

Test(compare, target_not_reached) {
    const double wall[] = {0, 5, 10};
    const int64_t samples[] = {0, 1000, 2000};
    const double acc[] = {10.0, 90.0, 97.99};
    hw_metrics_point points[3];
    hw_metrics_table log = make_run(points, 3, wall, samples, acc);
    double t = -7;
    cr_expect_eq(hw_metrics_time_to_target(&log, 98.0, &t, NULL), 0);
    cr_expect_eq(t, -7, "an unreached target leaves the output alone");

    char *text = NULL;
    size_t cap = 0;
    FILE *out = open_memstream(&text, &cap);
    hw_compare_print_table(out, &log, 1, 98.0);
    fclose(out);
    cr_expect(strstr(text, "not reached") != NULL, "%s", text);
    cr_expect(strstr(text, "no run reached 98%") != NULL, "%s", text);
    free(text);
}

Test(compare, table_aligns_columns_and_names_the_fastest) {
    hw_metrics_table runs[2];
    cr_assert_eq(hw_metrics_table_read(&runs[0], write_file("hw4.csv", good_hogwild)), HW_OK, "%s", hw_error());
    cr_assert_eq(hw_metrics_table_read(&runs[1], write_file("dp2.csv", good_dataparallel)), HW_OK, "%s", hw_error());
    char *text = NULL;
    size_t cap = 0;
    FILE *out = open_memstream(&text, &cap);
    hw_compare_print_table(out, runs, 2, 97.0);
    fclose(out);

    // Header, two rows, the final line.
    char *lines[8];
    int n = 0;
    for (char *save = NULL, *l = strtok_r(text, "\n", &save); l && n < 8; l = strtok_r(NULL, "\n", &save)) {
        lines[n++] = l;
    }
    cr_assert_eq(n, 4, "table:\n%s", text);
    cr_expect(strncmp(lines[1], "hw4.csv", 7) == 0, "%s", lines[1]);
    cr_expect(strncmp(lines[2], "dp2.csv", 7) == 0, "%s", lines[2]);
    // Right-aligned numeric columns end at the same place: the header and the rows have one length.
    cr_expect_eq(strlen(lines[0]), strlen(lines[1]));
    cr_expect_eq(strlen(lines[0]), strlen(lines[2]));
    // Each column starts where its header starts.
    const char *mode_col = strstr(lines[0], "mode");
    cr_assert_not_null(mode_col);
    cr_expect(strncmp(lines[2] + (mode_col - lines[0]), "dataparallel", 12) == 0, "%s", lines[2]);
    cr_expect(strstr(lines[1], "not reached") == NULL);
    cr_expect(strstr(lines[1], "8000") != NULL, "samples/s = 120000 / 15: %s", lines[1]);

    // hogwild: 97 between 96.93 (9.876 s) and 98.5 (15 s); dataparallel: between 95 (2 s) and 97.5 (4 s).
    double hw_t = 9.876 + (15 - 9.876) * (97 - 96.93) / (98.5 - 96.93);
    double dp_t = 2 + 2 * (97 - 95.0) / (97.5 - 95.0);
    cr_expect(dp_t < hw_t);
    char expect[128];
    snprintf(expect, sizeof expect, "fastest to 97%%: dp2.csv (dataparallel, 2 replicas, cuda:0+cuda:1) in %.1f s",
             dp_t);
    cr_expect(strstr(lines[3], expect) == lines[3], "got '%s', expected it to start with '%s'", lines[3], expect);
    free(text);
    hw_metrics_table_free(&runs[0]);
    hw_metrics_table_free(&runs[1]);
}

// A run of 1 ms or 9 ms (wall_seconds has 3 decimals) cannot be timed to 5%: its speed is unknown,
// said so in the table with the reason, not 60000 / 0.001 = 60 million samples/s made up; 10 ms
// and more are timed.
Test(compare, a_run_too_short_to_time_has_no_speed) {
    static const char short_run[] = HEADER "hogwild,1,cpu,0.000,0,0,nan,2.3,9.8\n"
                                           "hogwild,1,cpu,0.001,1,60000,0.5,0.4,50\n";
    static const char nine_ms[] = HEADER "hogwild,1,cpu,0.000,0,0,nan,2.3,9.8\n"
                                         "hogwild,1,cpu,0.009,1,60000,0.5,0.4,50\n";
    static const char ten_ms[] = HEADER "hogwild,2,cpu,0.000,0,0,nan,2.3,9.8\n"
                                        "hogwild,2,cpu,0.010,1,60000,0.5,0.4,50\n";
    hw_metrics_table runs[3];
    cr_assert_eq(hw_metrics_table_read(&runs[0], write_file("short.csv", short_run)), HW_OK, "%s", hw_error());
    cr_assert_eq(hw_metrics_table_read(&runs[1], write_file("nine.csv", nine_ms)), HW_OK, "%s", hw_error());
    cr_assert_eq(hw_metrics_table_read(&runs[2], write_file("ten.csv", ten_ms)), HW_OK, "%s", hw_error());
    cr_expect(isnan(hw_metrics_samples_per_second(&runs[0])), "1 ms: unknown");
    cr_expect(isnan(hw_metrics_samples_per_second(&runs[1])), "9 ms: unknown");
    cr_expect_float_eq(hw_metrics_samples_per_second(&runs[2]), 6e6, 1e-3, "10 ms: timed");
    char *text = NULL;
    size_t cap = 0;
    FILE *out = open_memstream(&text, &cap);
    hw_compare_print_table(out, runs, 3, 97.0);
    fclose(out);
    cr_expect_null(strstr(text, "60000000"), "no made-up speed:\n%s", text);
    cr_expect_null(strstr(text, "6666667"), "no made-up speed:\n%s", text);
    cr_expect(strstr(text, "unknown") != NULL, "%s", text);
    cr_expect(strstr(text, "samples/s unknown: 2 run(s) took under 10 ms") != NULL, "%s", text);
    cr_expect(strstr(text, "6000000") != NULL, "the 10 ms run's speed:\n%s", text);
    free(text);
    for (int i = 0; i < 3; i++) hw_metrics_table_free(&runs[i]);
}

// ---- bad input: each message names the file, and the line where there is one ----

static void expect_read_error(const char *name, const char *text, const char *where, const char *what) {
    hw_metrics_table log;
    const char *path = text ? write_file(name, text) : name;
    cr_assert_eq(hw_metrics_table_read(&log, path), HW_ERR, "%s was accepted", name);
    cr_expect_null(log.points);
    char expect[512];
    snprintf(expect, sizeof expect, "%s%s", path, where);
    cr_expect(strstr(hw_error(), expect) != NULL, "'%s' does not name '%s'", hw_error(), expect);
    cr_expect(strstr(hw_error(), what) != NULL, "'%s' does not say '%s'", hw_error(), what);
}

Test(compare, bad_files) {
    expect_read_error("/nonexistent/dir/run.csv", NULL, "", "No such file");
    expect_read_error("empty.csv", "", ":", "empty");
    expect_read_error("header.csv",
                      "mode,workers,device,wall_seconds,epoch,samples_seen,train_loss,test_loss,test_acc\n"
                      "hogwild,4,cpu,0.0,0,0,nan,2.3,9.8\n",
                      ":1:", "'test_accuracy'");
    expect_read_error("twice.csv",
                      "mode,workers,mode,device,wall_seconds,epoch,samples_seen,train_loss,test_loss,"
                      "test_accuracy\n",
                      ":1:", "'mode' appears twice");
    expect_read_error("fields.csv", HEADER "hogwild,4,cpu,0.0,0,0,nan,2.3,9.8\nhogwild,4,cpu,1.0,0,100,0.5,0.4\n",
                      ":3:", "8 fields, the header has 9");
    expect_read_error("number.csv", HEADER "hogwild,4,cpu,0.0,0,0,nan,2.3,9.8\n\nhogwild,4,cpu,1.0,0,100,0.5,0.4,9x\n",
                      ":4:", "test_accuracy is not");
    expect_read_error("samples.csv", HEADER "hogwild,4,cpu,1.0,0,1.5e3,0.5,0.4,50\n", ":2:", "samples_seen");
    expect_read_error("workers.csv", HEADER "hogwild,0,cpu,1.0,0,100,0.5,0.4,50\n", ":2:", "workers");
    expect_read_error("nanwall.csv", HEADER "hogwild,4,cpu,nan,0,100,0.5,0.4,50\n", ":2:", "wall_seconds");
    expect_read_error("percent.csv",
                      HEADER "hogwild,4,cpu,1.0,0,100,0.5,0.4,0.97\nhogwild,4,cpu,2.0,0,200,0.5,0.4,101\n",
                      ":3:", "[0, 100]");
    expect_read_error("backwards.csv",
                      HEADER "hogwild,4,cpu,2.0,0,100,0.5,0.4,50\nhogwild,4,cpu,1.0,0,200,0.5,0.4,60\n",
                      ":3:", "backwards");
    expect_read_error("tworuns.csv", HEADER "hogwild,4,cpu,2.0,0,100,0.5,0.4,50\nhogwild,2,cpu,3.0,0,200,0.5,0.4,60\n",
                      ":3:", "one run");
    // A mode the trainer never writes, and a wall time no run reaches (printed, it took 300 digits).
    expect_read_error("mode.csv", HEADER "foo,4,cpu,0.0,0,0,nan,2.3,9.8\n", ":2:", "mode is 'foo'");
    expect_read_error("wall.csv", HEADER "hogwild,4,cpu,0.0,0,0,nan,2.3,9.8\nhogwild,4,cpu,1e308,1,100,0.5,0.4,50\n",
                      ":3:", "wall_seconds is not a number from 0 to 1e+09");
    expect_read_error("norows.csv", HEADER, ":", "no data rows");
    expect_read_error("blankrows.csv", HEADER "\n  \n", ":", "no data rows");
    // Found by the hostile pass of issue 27: a hexadecimal number read as 16 s, and an epoch that
    // went backwards, were taken as a run.
    expect_read_error("hex.csv", HEADER "hogwild,4,cpu,0x10,0,0,nan,2.3,9.8\n", ":2:", "wall_seconds is not");
    expect_read_error("epochs.csv", HEADER "hogwild,4,cpu,1.0,2,100,0.5,0.4,50\nhogwild,4,cpu,2.0,1,200,0.5,0.4,60\n",
                      ":3:", "epoch goes backwards (1 after 2)");
}

// A file saved by a spreadsheet as "CSV UTF-8" starts with a byte order mark: it was "lacking" the
// column mode, which it has.
Test(compare, a_byte_order_mark_before_the_header_is_skipped) {
    char text[1024];
    snprintf(text, sizeof text, "\xEF\xBB\xBF%s", good_hogwild);
    hw_metrics_table log;
    cr_assert_eq(hw_metrics_table_read(&log, write_file("bom.csv", text)), HW_OK, "%s", hw_error());
    cr_expect_eq(log.n_points, 4);
    cr_expect_str_eq(log.mode, "hogwild");
    hw_metrics_table_free(&log);
}

// ---- nice axes ----

static void expect_axis(double lo, double hi, int max_ticks, double want_lo, double want_hi, double want_step) {
    hw_axis a = hw_nice_axis(lo, hi, max_ticks);
    cr_expect_float_eq(a.lo, want_lo, 1e-12, "[%g, %g]: lo %g", lo, hi, a.lo);
    cr_expect_float_eq(a.hi, want_hi, 1e-12, "[%g, %g]: hi %g", lo, hi, a.hi);
    cr_expect_float_eq(a.step, want_step, 1e-15, "[%g, %g]: step %g", lo, hi, a.step);
    cr_expect(a.n_ticks >= 2 && a.n_ticks <= max_ticks, "[%g, %g]: %d ticks", lo, hi, a.n_ticks);
    cr_expect_float_eq(hw_axis_tick(&a, 0), a.lo, 1e-12);
    cr_expect_float_eq(hw_axis_tick(&a, a.n_ticks - 1), a.hi, 1e-9 * fabs(a.hi) + 1e-15);
}

Test(compare, nice_axis) {
    expect_axis(0, 9.876, 8, 0, 10, 2);
    expect_axis(86.3, 100, 8, 86, 100, 2);
    expect_axis(0, 60000, 7, 0, 60000, 10000);
    expect_axis(0, 60001, 7, 0, 80000, 20000);
    expect_axis(97.5, 100, 8, 97.5, 100, 0.5);
    expect_axis(0.3, 0.7, 5, 0.3, 0.7, 0.1);
    expect_axis(0.0013, 0.0087, 5, 0, 0.01, 0.005);
    expect_axis(-3, 7, 7, -4, 8, 2);
    expect_axis(-3, 7, 6, -5, 10, 5);  // 2 would need 7 ticks
    expect_axis(5, 5, 5, 5, 6, 0.5);   // empty range: widened to one unit
    hw_axis a = hw_nice_axis(0.3, 0.7, 5);
    cr_expect_eq(a.n_ticks, 5);
    for (int i = 0; i < a.n_ticks; i++) cr_expect_float_eq(hw_axis_tick(&a, i), 0.3 + 0.1 * i, 1e-12);
}

// ---- the SVG plot ----

// Every opening tag is closed in order (self-closing tags aside): a tiny well-formedness check.
static int tags_balanced(const char *svg, char *why, size_t why_cap) {
    char stack[64][32];
    int depth = 0;
    for (const char *p = strchr(svg, '<'); p; p = strchr(p + 1, '<')) {
        const char *end = strchr(p, '>');
        if (!end) return snprintf(why, why_cap, "unterminated tag"), 0;
        int closing = p[1] == '/';
        const char *name = p + 1 + closing;
        size_t len = strcspn(name, " \t\n/>");
        if (len == 0 || len >= 32) return snprintf(why, why_cap, "bad tag name near %.20s", p), 0;
        if (end[-1] == '/') continue;
        if (closing) {
            if (depth == 0 || strncmp(stack[depth - 1], name, len) != 0 || stack[depth - 1][len] != '\0') {
                return snprintf(why, why_cap, "</%.*s> closes %s", (int)len, name,
                                depth ? stack[depth - 1] : "nothing"),
                       0;
            }
            depth--;
        } else {
            if (depth == 64) return snprintf(why, why_cap, "nested too deep"), 0;
            snprintf(stack[depth++], 32, "%.*s", (int)len, name);
        }
    }
    if (depth != 0) return snprintf(why, why_cap, "<%s> never closed", stack[depth - 1]), 0;
    return 1;
}

Test(compare, svg_plot) {
    hw_metrics_table runs[3];
    cr_assert_eq(hw_metrics_table_read(&runs[0], write_file("hw4.csv", good_hogwild)), HW_OK, "%s", hw_error());
    cr_assert_eq(hw_metrics_table_read(&runs[1], write_file("dp2.csv", good_dataparallel)), HW_OK, "%s", hw_error());
    // A file name that needs escaping.
    cr_assert_eq(hw_metrics_table_read(&runs[2], write_file("a<b&c.csv", good_hogwild)), HW_OK, "%s", hw_error());
    const char *path = write_file("plot.svg", "");
    cr_assert_eq(hw_compare_write_plot(path, runs, 3, 98.0), HW_OK, "%s", hw_error());
    char *svg = read_all(path);
    cr_assert_not_null(svg);

    cr_expect(strncmp(svg, "<svg xmlns=\"http://www.w3.org/2000/svg\"", 39) == 0, "%.60s", svg);
    cr_expect_eq(count_of(svg, "<polyline"), 2 * 3, "one polyline per run in each of the two panels");
    cr_expect(strstr(svg, "wall time (s)") && strstr(svg, "samples seen") && strstr(svg, "test accuracy (%)"));
    cr_expect(strstr(svg, "hogwild, 4 workers, cpu") && strstr(svg, "dataparallel, 2 replicas, cuda:0+cuda:1"));
    cr_expect(strstr(svg, "a&lt;b&amp;c.csv") != NULL, "the file name is escaped");
    cr_expect(strstr(svg, "a<b") == NULL);
    cr_expect(strstr(svg, "stroke-dasharray") && strstr(svg, "target 98%"));
    char why[128] = "";
    cr_expect(tags_balanced(svg, why, sizeof why), "unbalanced: %s", why);
    free(svg);
    for (int r = 0; r < 3; r++) hw_metrics_table_free(&runs[r]);

    cr_expect_eq(hw_compare_write_plot("/nonexistent/dir/p.svg", runs, 0, 98.0), HW_ERR);
    cr_expect(strstr(hw_error(), "/nonexistent/dir/p.svg") != NULL, "%s", hw_error());
}

Test(compare, tag_check_catches_a_broken_document) {
    char why[128];
    cr_expect(tags_balanced("<svg><g><line/></g></svg>", why, sizeof why));
    cr_expect(!tags_balanced("<svg><g><line/></svg>", why, sizeof why));
    cr_expect(!tags_balanced("<svg><g></g>", why, sizeof why));
}

// ---- the command line ----

typedef struct {
    int status;
    char *out, *err;
} cli_result;

// argv is NULL-terminated.
static cli_result run_cli(const char **argv) {
    int argc = 0;
    while (argv[argc]) argc++;
    cli_result r = {0};
    size_t cap_out = 0, cap_err = 0;
    FILE *out = open_memstream(&r.out, &cap_out), *err = open_memstream(&r.err, &cap_err);
    r.status = cli_compare_run(argc, (char **)argv, out, err);
    fclose(out);
    fclose(err);
    return r;
}

static void cli_free(cli_result *r) {
    free(r->out);
    free(r->err);
}

static void expect_usage_error(const char **argv, const char *what) {
    cli_result r = run_cli(argv);
    cr_expect_eq(r.status, 2, "%s: status %d", what, r.status);
    cr_expect(strstr(r.err, what) != NULL, "'%s' does not say '%s'", r.err, what);
    cr_expect(strstr(r.err, "usage: hogwild compare") != NULL, "no usage text after '%s'", what);
    cli_free(&r);
}

Test(compare, cli_bad_usage) {
    const char *csv = write_file("hw4.csv", good_hogwild);
    expect_usage_error((const char *[]){NULL}, "no metrics files");
    expect_usage_error((const char *[]){csv, "--target", "0", NULL}, "'0'");
    expect_usage_error((const char *[]){csv, "--target", "100.5", NULL}, "'100.5'");
    expect_usage_error((const char *[]){csv, "--target=abc", NULL}, "'abc'");
    expect_usage_error((const char *[]){csv, "--target", NULL}, "--target needs a value");
    expect_usage_error((const char *[]){csv, "--plot", NULL}, "--plot needs a file name");
    expect_usage_error((const char *[]){csv, "--fast", NULL}, "unknown option '--fast'");
    // Found by the hostile pass of issue 27: hexadecimal and a leading blank were read as 90.
    expect_usage_error((const char *[]){csv, "--target=0x5A", NULL}, "'0x5A'");
    expect_usage_error((const char *[]){csv, "--target", " 90", NULL}, "' 90'");
    expect_usage_error((const char *[]){csv, "--target", "90", "--target", "80", NULL},
                       "given twice ('90', then '80')");
    expect_usage_error((const char *[]){csv, "--no-plot=1", NULL}, "option '--no-plot' takes no value");
    // It named the command's own word: "unknown option 'compare'".
    expect_usage_error((const char *[]){csv, "-h=1", NULL}, "unknown option '-h=1'");
    cli_result r = run_cli((const char *[]){"--help", NULL});
    cr_expect_eq(r.status, 0);
    cr_expect(strstr(r.out, "usage: hogwild compare") != NULL);
    cli_free(&r);
}

Test(compare, cli_bad_file) {
    const char *good = write_file("hw4.csv", good_hogwild);
    const char *bad = write_file("bad.csv", HEADER "hogwild,4,cpu,0.0,0,0,nan,2.3\n");
    cli_result r = run_cli((const char *[]){good, bad, NULL});
    cr_expect_eq(r.status, 1);
    char expect[300];
    snprintf(expect, sizeof expect, "%s:2:", bad);
    cr_expect(strstr(r.err, expect) != NULL, "%s", r.err);
    cr_expect(strstr(r.err, "usage") == NULL, "a bad file is not a usage error");
    cli_free(&r);
}

Test(compare, cli_table_and_plot) {
    const char *hw = write_file("hw4.csv", good_hogwild);
    const char *dp = write_file("dp2.csv", good_dataparallel);
    char plot[256];
    snprintf(plot, sizeof plot, "%s/out.svg", tmp_dir);
    cli_result r = run_cli((const char *[]){hw, dp, "--target", "97", "--plot", plot, NULL});
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "fastest to 97%: dp2.csv") != NULL, "%s", r.out);
    char *svg = read_all(plot);
    cr_expect(svg && strncmp(svg, "<svg", 4) == 0);
    free(svg);
    cli_free(&r);

    // Without --plot: compare.svg next to the first file, and the path is printed.
    char default_plot[256];
    snprintf(default_plot, sizeof default_plot, "%s/compare.svg", tmp_dir);
    r = run_cli((const char *[]){dp, hw, NULL});
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "no run reached 98%") == NULL && strstr(r.out, "fastest to 98%: hw4.csv"), "%s", r.out);
    cr_expect(strstr(r.out, default_plot) != NULL, "%s", r.out);
    cr_expect_eq(access(default_plot, R_OK), 0);
    cli_free(&r);

    cr_expect_eq(unlink(default_plot), 0);
    r = run_cli((const char *[]){hw, "--no-plot", NULL});
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_neq(access(default_plot, F_OK), 0, "--no-plot writes nothing");
    cli_free(&r);
}

// ---- a plot never replaces an input (issue #21, case 1) ----

// compare with `argv` fails with status 1 naming `input`, whose bytes stay as they were.
static void expect_input_kept(const char **argv, const char *input, const char *text) {
    cli_result r = run_cli(argv);
    cr_expect_eq(r.status, 1, "status %d; stdout: %s", r.status, r.out);
    cr_expect(strstr(r.err, "would destroy it") != NULL && strstr(r.err, input) != NULL, "%s", r.err);
    cr_expect_eq(strcmp(r.out, ""), 0, "nothing is printed before the plot is checked: %s", r.out);
    char *now = read_all(input);
    cr_expect(now && strcmp(now, text) == 0, "%s was changed", input);
    free(now);
    cli_free(&r);
}

Test(compare, a_plot_never_replaces_an_input) {
    char a[256], b[256], link[256], measured[256];
    snprintf(a, sizeof a, "%s", write_file("a.csv", good_hogwild));
    // --plot naming an input, as given and through a link.
    expect_input_kept((const char *[]){a, "--plot", a, NULL}, a, good_hogwild);
    snprintf(link, sizeof link, "%s/link.svg", tmp_dir);
    cr_assert_eq(symlink(a, link), 0);
    expect_input_kept((const char *[]){a, "--plot", link, NULL}, a, good_hogwild);
    // An input called compare.svg, where the default plot goes.
    snprintf(b, sizeof b, "%s", write_file("compare.svg", good_dataparallel));
    expect_input_kept((const char *[]){b, a, NULL}, b, good_dataparallel);
    // The --measure plot beside --plot out.svg is out-measure.svg: an input of that name.
    static const char measured_text[] =
        "mode,workers,device,wall_seconds,epoch,samples_seen,train_loss,test_loss,test_accuracy,updates,"
        "staleness_mean,staleness_median,staleness_p99,staleness_max,staleness_us_mean,staleness_us_max,"
        "overlap_fraction,compute_us_per_step,update_us_per_step,lost_fraction,staleness_histogram\n"
        "hogwild,2,cpu,0.000,0,0,nan,2.3,9.8,0,nan,0,0,0,nan,nan,nan,nan,nan,nan,0;0;0;0;0;0;0;0;0;0;0;0\n"
        "hogwild,2,cpu,1.000,1,3000,0.5,0.4,90.0,188,0.99,1,3,7,812.5,4000.0,0.25,600.00,45.00,0.00125,"
        "90;60;20;10;8;0;0;0;0;0;0;0\n";
    snprintf(measured, sizeof measured, "%s", write_file("out-measure.svg", measured_text));
    char plot[256];
    snprintf(plot, sizeof plot, "%s/out.svg", tmp_dir);
    expect_input_kept((const char *[]){measured, "--plot", plot, NULL}, measured, measured_text);
    cr_expect_neq(access(plot, F_OK), 0, "no plot is written when one of them would replace an input");
}

// ---- diverged runs (issue #11, item 4): shown as "diverged", never ranked ----

// The trainer's file of a run that diverged: rows, then the row that marks it (test_loss nan).
// Before diverging it was the fastest to 90%: a ranking would name it.
// (A file per string, a row per line.)
// clang-format off
static const char *diverged_hogwild = HEADER
    "hogwild,2,cpu,0.000,0,0,nan,2.3051,9.82\n"
    "hogwild,2,cpu,0.500,0,20000,0.5000,0.3000,92.00\n"
    "hogwild,2,cpu,0.700,0,24000,inf,nan,nan\n";

// A file from before the fix: the NaN rows carried on and looked like results (9.80%).
static const char *old_diverged_dataparallel = HEADER
    "dataparallel,2,cpu,0.000,0,0,nan,2.3000,10.10\n"
    "dataparallel,2,cpu,2.000,1,60000,0.3000,0.1500,95.00\n"
    "dataparallel,2,cpu,4.000,2,120000,-nan,-nan,9.80\n"
    "dataparallel,2,cpu,6.000,3,180000,-nan,-nan,9.80\n";
// clang-format on

Test(compare, reads_where_a_run_diverged) {
    hw_metrics_table log;
    cr_assert_eq(hw_metrics_table_read(&log, write_file("div.csv", diverged_hogwild)), HW_OK, "%s", hw_error());
    cr_expect(log.diverged);
    cr_expect_eq(log.n_points, 2, "the rows before the divergence are the run's points");
    cr_expect_eq(log.diverged_at.samples_seen, 24000);
    cr_expect(isinf(log.diverged_at.train_loss));
    hw_metrics_table_free(&log);

    cr_assert_eq(hw_metrics_table_read(&log, write_file("old.csv", old_diverged_dataparallel)), HW_OK, "%s",
                 hw_error());
    cr_expect(log.diverged);
    cr_expect_eq(log.n_points, 2, "no NaN row is a point");
    cr_expect_eq(log.diverged_at.samples_seen, 120000, "the first NaN row is where it diverged");
    cr_expect_eq(hw_metrics_best_accuracy(&log), 95.0);
    hw_metrics_table_free(&log);

    // A run that finished: a nan train_loss (the first row's) marks nothing.
    cr_assert_eq(hw_metrics_table_read(&log, write_file("ok.csv", good_hogwild)), HW_OK, "%s", hw_error());
    cr_expect(!log.diverged);
    hw_metrics_table_free(&log);
    // nan accuracy only on a diverged row; a first row already diverged leaves nothing to compare.
    expect_read_error("nanacc.csv", HEADER "hogwild,4,cpu,0.0,0,0,nan,2.3,9.8\nhogwild,4,cpu,1.0,0,100,0.5,0.4,nan\n",
                      ":3:", "test_accuracy");
    expect_read_error("first.csv", HEADER "hogwild,4,cpu,0.0,0,0,nan,nan,nan\n", ":2:", "first row");
}

Test(compare, a_diverged_run_is_marked_not_ranked) {
    const char *bad = write_file("div.csv", diverged_hogwild);
    const char *old = write_file("old.csv", old_diverged_dataparallel);
    const char *good = write_file("hw4.csv", good_hogwild);
    char plot[256];
    snprintf(plot, sizeof plot, "%s/div.svg", tmp_dir);
    cli_result r = run_cli((const char *[]){bad, old, good, "--target", "90", "--plot", plot, NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    // The table: "diverged" in place of the final accuracy, no best, no time to the target.
    char *line = strstr(r.out, "\ndiv.csv");
    cr_assert_not_null(line, "%s", r.out);
    char row[512];
    snprintf(row, sizeof row, "%.*s", (int)strcspn(line + 1, "\n"), line + 1);
    cr_expect_not_null(strstr(row, "diverged"), "%s", row);
    cr_expect_null(strstr(row, "92.00"), "its accuracy is not shown as a result: %s", row);
    cr_expect_null(strstr(row, "0.4"), "nor its time to the target: %s", row);
    line = strstr(r.out, "\nold.csv");
    cr_assert_not_null(line, "%s", r.out);
    snprintf(row, sizeof row, "%.*s", (int)strcspn(line + 1, "\n"), line + 1);
    cr_expect_not_null(strstr(row, "diverged"), "%s", row);
    cr_expect_null(strstr(row, "9.80"), "the NaN run's 9.80%% is no result: %s", row);
    // The fastest is the run that did not diverge, though both diverged ones were faster.
    cr_expect_not_null(strstr(r.out, "fastest to 90%: hw4.csv"), "%s", r.out);
    cr_expect_not_null(strstr(r.out, "diverged: div.csv (hogwild, 2 workers, cpu): its loss diverged (NaN, infinite or "
                                     "above 1e+04) after 24000 samples, in epoch 1; not ranked"),
                       "%s", r.out);
    cr_expect_not_null(strstr(r.out, "diverged: old.csv"), "%s", r.out);
    // The legend says so.
    char *svg = read_all(plot);
    cr_assert_not_null(svg);
    cr_expect_eq(count_of(svg, "diverged after"), 2, "%s", svg);
    cr_expect_not_null(strstr(svg, "diverged after 24000 samples"));
    char why[256];
    cr_expect(tags_balanced(svg, why, sizeof why), "%s", why);
    free(svg);
    cli_free(&r);

    // Only diverged runs: none reached the target.
    r = run_cli((const char *[]){bad, "--target", "90", "--no-plot", NULL});
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_not_null(strstr(r.out, "no run reached 90%"), "%s", r.out);
    cli_free(&r);
}

// A run stopped for a finite training loss above 1e4 (its last row: 2564720.75, nan, nan) is named
// diverged without being said to have reached NaN or infinity.
Test(compare, a_run_diverged_above_1e4_is_not_called_nan) {
    const char *big = write_file("big.csv", HEADER "hogwild,2,cpu,0.000,0,0,nan,2.3130,10.69\n"
                                                   "hogwild,2,cpu,0.019,0,128,2564720.750000,nan,nan\n");
    cli_result r = run_cli((const char *[]){big, "--no-plot", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_not_null(strstr(r.out, "diverged: big.csv (hogwild, 2 workers, cpu): its loss diverged (NaN, infinite "
                                     "or above 1e+04) after 128 samples, in epoch 1; not ranked"),
                       "%s", r.out);
    cr_expect_null(strstr(r.out, "became NaN"), "%s", r.out);
    cli_free(&r);
}
