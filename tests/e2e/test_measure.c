// Tests of --measure (src/train/hogwild_measure.c): the measured SGD step against the plain one, the
// lost-update arithmetic, the statistics of the counters, the CSV columns and their reading by
// `hogwild compare`, its plot; and end to end: one worker trains bit for bit as without
// --measure and loses exactly nothing, two workers see stale weights and lose a fraction in
// [0, 1), and the combinations --measure cannot measure are refused.
#include "train/hogwild_measure.h"
#include "e2e_util.h"
#include "hw/svg.h"
#include "hw/err.h"
#include "hw/optim.h"

// ---- the measured SGD step ----

// A model of one parameter of n weights, for the optimizer (it only reads the ranges). Freed by the caller.
static hw_model *one_param_model(int n) {
    hw_model *model = calloc(1, sizeof *model);
    cr_assert_not_null(model);
    hw_param *param = &model->params[0];
    snprintf(param->name, sizeof param->name, "w");
    param->offset = 0;
    param->shape.ndim = 1;
    param->shape.dims[0] = n;
    model->n_params = 1;
    model->n_weights = (size_t)n;
    return model;
}

static void check_measured_step(float momentum, int nesterov, float weight_decay) {
    enum { N = 1003, STEPS = 7 };
    hw_model *model = one_param_model(N);
    float w_plain[N], w_measured[N], copy_plain[N], copy_measured[N], g[N], start[N];
    double applied[N] = {0};
    for (int i = 0; i < N; i++) start[i] = w_plain[i] = w_measured[i] = (float)sin(i * 0.37) * (i % 5 ? 1.0f : 1e-6f);
    hw_sgd plain, measured;
    cr_assert_eq(hw_sgd_init(&plain, N, 0.05f, momentum, weight_decay, nesterov), HW_OK);
    cr_assert_eq(hw_sgd_init(&measured, N, 0.05f, momentum, weight_decay, nesterov), HW_OK);
    for (int s = 0; s < STEPS; s++) {
        for (int i = 0; i < N; i++) g[i] = (float)cos(i * 0.11 + s) * 0.3f;
        hw_sgd_step_and_copy(&plain, model, w_plain, g, copy_plain);
        hw_sgd_step_measured(&measured, model, w_measured, g, copy_measured, applied);
    }
    cr_assert_eq(memcmp(w_plain, w_measured, sizeof w_plain), 0, "the measured step changed the weights");
    cr_assert_eq(memcmp(copy_plain, copy_measured, sizeof copy_plain), 0, "the measured step changed the copy");
    // One writer: the applied increments telescope to final - initial, exactly.
    for (int i = 0; i < N; i++) {
        cr_assert_eq(applied[i], (double)w_measured[i] - (double)start[i], "weight %d: applied %.17g, moved %.17g", i,
                     applied[i], (double)w_measured[i] - (double)start[i]);
    }
    hw_sgd_free(&plain);
    hw_sgd_free(&measured);
    free(model);
}

Test(measure, measured_step_is_the_plain_step_bit_for_bit) {
    check_measured_step(0, 0, 0);
    check_measured_step(0.5f, 0, 0);
    check_measured_step(0.9f, 1, 1e-3f);
}

// ---- lost updates ----

Test(measure, lost_fraction_of_an_overwritten_update) {
    // Element 0: A reads 1 and writes 1.5; B had read 1 and written 1.25 in between: B's +0.25 is
    // lost. Element 1: only B writes, +1, kept.
    const float initial[2] = {1, 2}, final[2] = {1.5f, 3};
    const double a[2] = {0.5, 0}, b[2] = {0.25, 1};
    const double *applied[2] = {a, b};
    double fraction = measure_lost_fraction(initial, final, applied, 2, 0, 2);
    // lost = (0.5, 1) - (0.75, 1) = (-0.25, 0); applied = (0.75, 1), norm 1.25.
    cr_expect_float_eq(fraction, 0.25 / 1.25, 1e-15, "fraction %.17g", fraction);
    const double *only_a[1] = {a};
    const float moved_by_a[2] = {1.5f, 2};
    cr_expect_eq(measure_lost_fraction(initial, moved_by_a, only_a, 1, 0, 2), 0.0, "nothing lost");
    const double none[2] = {0, 0};
    const double *nothing[1] = {none};
    cr_expect_eq(measure_lost_fraction(initial, initial, nothing, 1, 0, 2), 0.0, "nothing applied, nothing lost");
    cr_expect(isnan(measure_lost_fraction(initial, final, nothing, 1, 0, 2)), "lost without anything applied");
}

// ---- the statistics of the counters ----

Test(measure, stats_mean_percentiles_and_csv_bins) {
    measure_slot *slots = calloc(2, sizeof *slots);
    cr_assert_not_null(slots);
    // Worker 0: 98 updates at staleness 1, one at 5, one at 2000; worker 1: 100 at 0.
    atomic_store(&slots[0].steps, 100);
    atomic_store(&slots[0].overlapped, 50);
    atomic_store(&slots[0].stale_hist[1], 98);
    atomic_store(&slots[0].stale_hist[5], 1);
    atomic_store(&slots[0].stale_hist[STALE_EXACT], 1);
    atomic_store(&slots[0].stale_sum, 98 + 5 + 2000);
    atomic_store(&slots[0].stale_max, 2000);
    atomic_store(&slots[0].update_seconds, 0.01);
    atomic_store(&slots[1].steps, 100);
    atomic_store(&slots[1].stale_hist[0], 100);
    measure_stats one, both;
    measure_stats_of(&slots[0], 1, &one);
    cr_expect_eq(one.steps, 100);
    cr_expect_float_eq(one.stale_mean, 21.03, 1e-12);
    cr_expect_eq(one.stale_median, 1);
    cr_expect_eq(one.stale_p99, 5, "99 of 100 updates are at most 5");
    cr_expect_eq(one.stale_max, 2000);
    cr_expect_float_eq(one.update_us_per_step, 100.0, 1e-9);
    measure_stats_of(slots, 2, &both);
    cr_expect_eq(both.steps, 200);
    cr_expect_eq(both.overlapped, 50);
    cr_expect_eq(both.stale_median, 0, "100 of 200 at 0");
    cr_expect_eq(both.stale_p99, 1, "198 of 200 at most 1");
    const int64_t bins[STALE_CSV_BINS] = {100, 98, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1};
    for (int b = 0; b < STALE_CSV_BINS; b++) cr_expect_eq(both.csv_hist[b], bins[b], "CSV bin %d", b);
    free(slots);
}

// The hot path takes no lock: every counter it touches is a lock-free atomic on this machine
// (a type that is not would be emulated with a lock by libatomic).
Test(measure, counters_are_lock_free_atomics) {
    measure_shared shared;
    measure_slot *slot = calloc(1, sizeof *slot);
    cr_assert_not_null(slot);
    cr_expect(atomic_is_lock_free(&shared.updates));
    cr_expect(atomic_is_lock_free(&shared.update_entries));
    cr_expect(atomic_is_lock_free(&shared.in_update));
    cr_expect(atomic_is_lock_free(&slot->steps));
    cr_expect(atomic_is_lock_free(&slot->stale_us_sum), "_Atomic double");
    cr_expect(atomic_is_lock_free(&slot->stale_hist[0]));
    free(slot);
}

// ---- the CSV columns in `hogwild compare` ----

#define OLD_HEADER "mode,workers,device,wall_seconds,epoch,samples_seen,train_loss,test_loss,test_accuracy"
#define MEASURE_HEADER                                                                                   \
    OLD_HEADER ",updates,staleness_mean,staleness_median,staleness_p99,staleness_max,staleness_us_mean," \
               "staleness_us_max,overlap_fraction,compute_us_per_step,update_us_per_step,lost_fraction," \
               "staleness_histogram\n"

static const char *write_text(const char *dir, const char *name, const char *text) {
    char *path = malloc(strlen(dir) + strlen(name) + 2);
    cr_assert_not_null(path);
    sprintf(path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

Test(measure, compare_reads_the_columns_and_old_files_still_load) {
    char dir[256];
    make_temp_dir(dir, sizeof dir);
    // The columns as the trainer writes them: the names of hw_metrics_columns, in order (one table
    // for the writer and the reader), --measure's after the others.
    char header[1024] = OLD_HEADER;
    for (int c = 0; c < HW_METRICS_N_COLUMNS; c++) {
        // Not in this file, which compare reads all the same.
        if (c == HW_COL_SKIPPED_EVAL_POINTS || c == HW_COL_LR || (c >= HW_COL_MODEL && c <= HW_COL_SETTINGS)) continue;
        if (c < HW_METRICS_FIRST_MEASURE) {
            cr_assert_not_null(strstr(OLD_HEADER, hw_metrics_columns[c].name));
            continue;
        }
        strcat(header, ",");
        strcat(header, hw_metrics_columns[c].name);
    }
    strcat(header, "\n");
    cr_assert_str_eq(header, MEASURE_HEADER);

    const char *measured =
        write_text(dir, "m.csv",
                   MEASURE_HEADER
                   "hogwild,2,cpu,0.000,0,0,nan,2.3,9.8,0,nan,0,0,0,nan,nan,nan,nan,nan,nan,0;0;0;0;0;0;0;0;0;0;0;0\n"
                   "hogwild,2,cpu,1.000,1,3000,0.5,0.4,90.0,188,0.99,1,3,7,812.5,4000.0,0.25,600.00,45.00,0.00125,"
                   "90;60;20;10;8;0;0;0;0;0;0;0\n"
                   "hogwild,2,cpu,1.500,1,4500,0.5,0.4,91.0,280,1.10,1,4,9,900.0,4100.0,0.30,610.00,46.00,nan,"
                   "120;100;30;20;10;0;0;0;0;0;0;0\n");
    hw_metrics_table log;
    cr_assert_eq(hw_metrics_table_read(&log, measured), HW_OK, "%s", hw_error());
    cr_expect(log.measure.present);
    cr_expect_eq(log.measure.updates, 280, "the last row");
    cr_expect_float_eq(log.measure.staleness_mean, 1.10, 1e-12);
    cr_expect_eq(log.measure.staleness_p99, 4);
    cr_expect_eq(log.measure.staleness_max, 9);
    cr_expect_float_eq(log.measure.overlap_fraction, 0.30, 1e-12);
    cr_expect_float_eq(log.measure.lost_fraction, 0.00125, 1e-15, "the last row that has one (an epoch end)");
    cr_expect_eq(log.measure.staleness_hist[1], 100);
    cr_expect_eq(log.measure.staleness_hist[4], 10);
    hw_metrics_table_free(&log);

    const char *old = write_text(dir, "old.csv", OLD_HEADER "\nhogwild,2,cpu,0.000,0,0,nan,2.3,9.8\n");
    cr_assert_eq(hw_metrics_table_read(&log, old), HW_OK, "%s", hw_error());
    cr_expect(!log.measure.present, "a file without the columns");
    hw_metrics_table_free(&log);

    const char *partial =
        write_text(dir, "partial.csv", OLD_HEADER ",updates,lost_fraction\nhogwild,2,cpu,0,0,0,nan,2.3,9.8,0,nan\n");
    cr_expect_eq(hw_metrics_table_read(&log, partial), HW_ERR);
    cr_expect(strstr(hw_error(), "staleness_mean") != NULL, "names a missing column: %s", hw_error());

    const char *bad_hist =
        write_text(dir, "bad.csv",
                   MEASURE_HEADER "hogwild,2,cpu,0.000,0,0,nan,2.3,9.8,0,nan,0,0,0,nan,nan,nan,nan,nan,nan,0;0;0\n");
    cr_expect_eq(hw_metrics_table_read(&log, bad_hist), HW_ERR);
    cr_expect(strstr(hw_error(), "bad.csv:2: staleness_histogram") != NULL, "%s", hw_error());

    const char *negative = write_text(
        dir, "neg.csv",
        MEASURE_HEADER
        "hogwild,2,cpu,0.000,0,0,nan,2.3,9.8,0,nan,0,0,0,nan,nan,nan,nan,nan,-0.5,0;0;0;0;0;0;0;0;0;0;0;0\n");
    cr_expect_eq(hw_metrics_table_read(&log, negative), HW_ERR);
    cr_expect(strstr(hw_error(), "lost_fraction") != NULL, "%s", hw_error());
    free((void *)measured);
    free((void *)old);
    free((void *)partial);
    free((void *)bad_hist);
    free((void *)negative);
    rm_tree(dir);
}

static int occurrences(const char *haystack, const char *needle) {
    int n = 0;
    for (const char *p = strstr(haystack, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

Test(measure, plot_has_a_bar_per_run_and_bin_and_a_point_per_run) {
    hw_metrics_point point = {.wall_seconds = 1, .epoch = 1, .samples_seen = 100, .test_accuracy = 90};
    hw_metrics_table runs[3];
    memset(runs, 0, sizeof runs);
    for (int r = 0; r < 3; r++) {
        snprintf(runs[r].path, sizeof runs[r].path, "run%d<&>.csv", r);
        snprintf(runs[r].mode, sizeof runs[r].mode, "hogwild");
        snprintf(runs[r].device, sizeof runs[r].device, "cpu");
        runs[r].workers = 1 << r;
        runs[r].points = &point;
        runs[r].n_points = 1;
        runs[r].measure.present = r != 1;  // run 1 has no --measure columns: left out
        runs[r].measure.lost_fraction = r == 0 ? 0 : 0.02;
        runs[r].measure.staleness_hist[0] = 10;
        runs[r].measure.staleness_hist[3] = r;  // run 2 reaches bin 3 (4-7): 4 bins drawn
    }
    char *svg = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&svg, &len);
    cr_assert_eq(hw_compare_plot_measure_svg(mem, runs, 3), HW_OK);
    fclose(mem);
    cr_expect(strstr(svg, "Staleness of the updates") != NULL);
    cr_expect(strstr(svg, "Lost updates against workers") != NULL);
    cr_expect_eq(occurrences(svg, "<circle"), 2, "one point per measured run");
    cr_expect_eq(occurrences(svg, ">4-7</text>"), 1, "bins up to the last one used");
    cr_expect_eq(occurrences(svg, ">8-15</text>"), 0, "no bin past it");
    // 2 runs x 4 bins of bars, 2 legend swatches, the background and the 2 panel frames.
    cr_expect_eq(occurrences(svg, "<rect"), 8 + 2 + 1 + 2, "%s", svg);
    cr_expect(strstr(svg, "run0&lt;&amp;&gt;.csv") != NULL, "file names escaped");
    cr_expect(strstr(svg, "run1") == NULL, "a run without the columns is not drawn");
    cr_expect(strstr(svg, ">2%</text>") != NULL, "the lost fraction is labelled in percent");
    free(svg);
}

// ---- end to end ----

TestSuite(e2e_measure, .init = e2e_setup, .fini = e2e_teardown, .timeout = 120);

enum { MAX_CSV_ROWS = 64 };

// The value of column `name` in data row `row` of a metrics CSV (0: the first after the header;
// -1: the last), owned until teardown.
static const char *row_field(const char *csv_path, const char *name, int row) {
    char *text = e2e_read_text(csv_path);
    char *lines[MAX_CSV_ROWS];
    int n = 0;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line && n < MAX_CSV_ROWS;
         line = strtok_r(NULL, "\n", &save)) {
        lines[n++] = line;
    }
    cr_assert_geq(n, 2, "%s has no data rows", csv_path);
    if (row < 0) row = n - 2;
    cr_assert_lt(row + 1, n, "%s has no row %d", csv_path, row);
    int column = -1, i = 0;
    for (char *save = NULL, *field = strtok_r(lines[0], ",", &save); field; field = strtok_r(NULL, ",", &save), i++) {
        if (strcmp(field, name) == 0) column = i;
    }
    cr_assert_geq(column, 0, "%s has no column %s", csv_path, name);
    i = 0;
    for (char *save = NULL, *field = strtok_r(lines[row + 1], ",", &save); field;
         field = strtok_r(NULL, ",", &save), i++) {
        if (i == column) return field;
    }
    cr_assert_fail("row %d of %s has no field %d", row, csv_path, column);
    return NULL;
}

static const char *last_row_field(const char *csv_path, const char *name) { return row_field(csv_path, name, -1); }

// One worker: --measure changes nothing in training (the checkpoints are equal byte for byte:
// LeNet has dropout, the default momentum 0.5), staleness is 0 and the lost fraction exactly 0.
Test(e2e_measure, one_worker_trains_bit_for_bit_and_loses_exactly_nothing) {
    char *data = e2e_synth(21);
    char *plain_ckpt = e2e_path("plain.safetensors"), *measured_ckpt = e2e_path("measured.safetensors");
    char *csv = e2e_path("measured.csv");
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", e2e.lenet, "--data", data, "--workers", "1", "--epochs", "2", "--quiet", "--save",
            plain_ckpt);
    e2e_assert_exit(&r, 0);
    e2e_run(&r, NULL, "--model", e2e.lenet, "--data", data, "--workers", "1", "--epochs", "2", "--quiet", "--save",
            measured_ckpt, "--measure", "--metrics", csv);
    e2e_assert_exit(&r, 0);
    size_t n_plain, n_measured;
    uint8_t *plain = e2e_own(read_bytes(plain_ckpt, &n_plain));
    uint8_t *measured = e2e_own(read_bytes(measured_ckpt, &n_measured));
    cr_assert_eq(n_plain, n_measured);
    cr_expect_eq(memcmp(plain, measured, n_plain), 0, "--measure changed the trained weights");

    cr_expect_str_eq(last_row_field(csv, "lost_fraction"), "0", "one worker loses exactly nothing");
    cr_expect_str_eq(last_row_field(csv, "staleness_max"), "0", "nobody else writes between read and write");
    cr_expect_str_eq(last_row_field(csv, "overlap_fraction"), "0.000000");
    // 3000 samples in batches of 64: 47 updates an epoch.
    cr_expect_str_eq(last_row_field(csv, "updates"), "94");
    cr_expect_str_eq(last_row_field(csv, "staleness_histogram"), "94;0;0;0;0;0;0;0;0;0;0;0");
    e2e_assert_contains(r.out, "measure: staleness", "the summary block");
    e2e_assert_contains(r.out, "): 0% in total", "the lost fraction in the summary");
    e2e_assert_left_nothing(&r);
}

// Two workers: some gradients are computed on weights that the other worker has since written,
// and the lost fraction is a fraction.
Test(e2e_measure, two_workers_see_stale_weights_and_lose_a_fraction) {
    char *data = e2e_synth_n("data", 22, 24000, E2E_TEST);
    char *csv = e2e_path("two.csv");
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--workers", "2", "--epochs", "2", "--batch-size", "16",
            "--eval-every", "16000", "--quiet", "--measure", "--metrics", csv);
    e2e_assert_exit(&r, 0);
    // Points: 16000 (mid-epoch 1), 24000 (epoch 1's end), 32000 and 40000 (mid-epoch 2), 48000
    // (epoch 2's end). The parent takes a mid-epoch point when it polls (every 10 ms) and finds it
    // passed; one passed together with the next is one row (on a Zen 5, epochs of 3000 samples ran
    // between two polls and the mid-epoch row was not there). So the rows are found by their
    // samples, and one mid-epoch row at least must be there. Lost updates are measured where the
    // workers wait, at epoch ends; mid-epoch rows say nan, and count the updates so far.
    cr_expect_str_eq(row_field(csv, "lost_fraction", 0), "nan", "before training");
    const int rows = e2e_count_lines(csv) - 1;  // the data rows, after the header
    int epoch_ends = 0, mid_epoch = 0;
    for (int i = 1; i < rows; i++) {
        long long seen = e2e_parse_integer(row_field(csv, "samples_seen", i), 0);
        const char *lost = row_field(csv, "lost_fraction", i);
        if (seen == 24000 || seen == 48000) {
            epoch_ends++;
            cr_expect_str_neq(lost, "nan", "the epoch end at %lld samples", seen);
        } else {
            mid_epoch++;
            cr_expect_str_eq(lost, "nan", "the mid-epoch row at %lld samples", seen);
            cr_expect_gt(e2e_parse_integer(row_field(csv, "updates", i), 0), 0, "the mid-epoch row counts updates");
        }
    }
    cr_expect_eq(epoch_ends, 2, "rows at the two epoch ends");
    cr_expect_geq(mid_epoch, 1, "no mid-epoch row among %d", rows);
    double mean = e2e_parse_number(last_row_field(csv, "staleness_mean"), 0);
    double lost = e2e_parse_number(last_row_field(csv, "lost_fraction"), 0);
    double overlap = e2e_parse_number(last_row_field(csv, "overlap_fraction"), 0);
    long long updates = e2e_parse_integer(last_row_field(csv, "updates"), 0);
    cr_expect_gt(mean, 0, "staleness mean %g with two workers", mean);
    cr_expect(lost >= 0 && lost < 1, "lost fraction %g not in [0, 1)", lost);
    cr_expect(overlap >= 0 && overlap <= 1, "overlap fraction %g", overlap);
    // Each worker's shard is 12000 samples: 750 batches of 16 an epoch.
    cr_expect_eq(updates, 2 * 2 * 750);
    // The histogram counts every update.
    char *hist = (char *)last_row_field(csv, "staleness_histogram");
    long long counted = 0;
    for (char *save = NULL, *bin = strtok_r(hist, ";", &save); bin; bin = strtok_r(NULL, ";", &save)) {
        counted += e2e_parse_integer(bin, 0);
    }
    cr_expect_eq(counted, updates);
    e2e_assert_contains(r.out, "  all ", "the summary's line for all workers");
    e2e_assert_left_nothing(&r);

    // compare: the table and the second plot.
    char *plot = e2e_path("cmp.svg");
    e2e_run(&r, NULL, "compare", csv, csv, "--plot", plot);
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "Hogwild's races (--measure): staleness", "the measure table");
    char *measure_plot = e2e_path("cmp-measure.svg");
    e2e_assert_contains(r.out, measure_plot, "the measure plot's path");
    char *svg = e2e_read_text(measure_plot);
    e2e_assert_contains(svg, "Lost updates against workers", "the plot");
    cr_expect_eq(occurrences(svg, "<circle"), 2, "a point per run");
}

// A file without the columns: no measure table, no second plot.
Test(e2e_measure, compare_of_unmeasured_runs_draws_no_measure_plot) {
    char *data = e2e_synth(23);
    char *csv = e2e_path("plain.csv");
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--workers", "2", "--quiet", "--metrics", csv);
    e2e_assert_exit(&r, 0);
    e2e_run(&r, NULL, "compare", csv, "--plot", e2e_path("cmp.svg"));
    e2e_assert_exit(&r, 0);
    cr_expect_null(strstr(r.out, "Hogwild's races"), "%s", r.out);
    cr_expect(!e2e_file_exists(e2e_path("cmp-measure.svg")));
}

static void expect_refused(const char *const *args, const char *why) {
    e2e_run_result r;
    e2e_run_argv(&r, NULL, args);
    e2e_assert_exit(&r, 2);
    e2e_assert_contains(r.err, "--measure", "stderr");
    e2e_assert_contains(r.err, why, "stderr");
    e2e_assert_left_nothing(&r);
}

Test(e2e_measure, combinations_it_cannot_measure_are_usage_errors) {
    char *data = e2e_synth(24);
    expect_refused((const char *const[]){"--data", data, "--mode", "dataparallel", "--measure", NULL}, "DataParallel");
    expect_refused((const char *const[]){"--data", data, "--device", "cuda", "--measure", NULL}, "cuda");
    expect_refused((const char *const[]){"--data", data, "--eval-only", "--resume", "x.safetensors", "--measure", NULL},
                   "--eval-only");
}

// --update locked and atomic with two workers: the steps race as before (atomic's overlap), but
// every increment lands, and the lost fraction is exactly 0 at each epoch end. lockfree's is some
// fraction (it may be 0 on a run whose steps never met).
static void expect_update_mode_loses(const char *mode, int exactly_nothing) {
    char *data = e2e_synth_n("data", 25, 8000, E2E_TEST);
    char csv[64];
    snprintf(csv, sizeof csv, "%s.csv", mode);
    char *path = e2e_path(csv);
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--workers", "2", "--epochs", "1", "--batch-size", "16",
            "--update", mode, "--quiet", "--measure", "--metrics", path);
    e2e_assert_exit(&r, 0);
    const char *lost = last_row_field(path, "lost_fraction");
    if (exactly_nothing) {
        cr_expect_str_eq(lost, "0", "--update %s lost a fraction %s", mode, lost);
        e2e_assert_contains(r.out, "): 0% in total", "the lost fraction in the summary");
    } else {
        double fraction = e2e_parse_number(lost, 0);
        cr_expect(fraction >= 0 && fraction < 1, "lost fraction %g", fraction);
    }
    // 4000 samples a worker in batches of 16: 250 updates each.
    cr_expect_str_eq(last_row_field(path, "updates"), "500");
    // The settings column names a mode other than the default, so that compare tells the runs apart.
    if (exactly_nothing) {
        char setting[32];
        snprintf(setting, sizeof setting, "update=%s", mode);
        e2e_assert_contains(e2e_read_text(path), setting, "the settings column");
    }
    e2e_assert_left_nothing(&r);
}

Test(e2e_measure, locked_updates_lose_exactly_nothing) { expect_update_mode_loses("locked", 1); }
Test(e2e_measure, atomic_updates_lose_exactly_nothing) { expect_update_mode_loses("atomic", 1); }
Test(e2e_measure, lockfree_updates_lose_a_fraction) { expect_update_mode_loses("lockfree", 0); }

static void expect_update_refused(const char *env, const char *const *args, const char *why) {
    e2e_run_result r;
    e2e_run_argv(&r, env, args);
    e2e_assert_exit(&r, 2);
    e2e_assert_contains(r.err, "--update", "stderr");
    e2e_assert_contains(r.err, why, "stderr");
    e2e_assert_left_nothing(&r);
}

Test(e2e_measure, update_modes_that_do_not_apply_are_usage_errors) {
    char *data = e2e_synth(26);
    expect_update_refused(NULL, (const char *const[]){"--data", data, "--update", "sometimes", NULL},
                          "expects lockfree, locked or atomic");
    expect_update_refused(NULL,
                          (const char *const[]){"--data", data, "--mode", "dataparallel", "--update", "locked", NULL},
                          "DataParallel");
    expect_update_refused(NULL, (const char *const[]){"--data", data, "--device", "cuda", "--update", "atomic", NULL},
                          "cuda");
    expect_update_refused("OMPI_COMM_WORLD_SIZE=2", (const char *const[]){"--data", data, "--update", "locked", NULL},
                          "mpirun");
}

// The checkpoint records the mode, and --resume continues in it unless --update is given.
Test(e2e_measure, the_checkpoint_records_the_update_mode_and_resume_keeps_it) {
    char *data = e2e_synth(27);
    char *ckpt = e2e_path("locked.safetensors");
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--workers", "2", "--update", "locked", "--quiet", "--save",
            ckpt);
    e2e_assert_exit(&r, 0);
    hw_ckpt_meta meta;
    cr_assert_eq(hw_ckpt_load_meta(ckpt, &meta), HW_OK, "%s", hw_error());
    cr_expect_str_eq(meta.update, "locked");
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--workers", "2", "--epochs", "2", "--quiet", "--measure",
            "--resume", ckpt, "--save", ckpt);
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "): 0% in total", "the resumed run is locked, and loses nothing");
    cr_assert_eq(hw_ckpt_load_meta(ckpt, &meta), HW_OK, "%s", hw_error());
    cr_expect_str_eq(meta.update, "locked");
    cr_expect_eq(meta.epoch, 2);
}
