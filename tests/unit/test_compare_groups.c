// Tests of compare's groups (src/report/compare_groups.c, src/cli/compare_inputs.c): a fixed set of
// metrics CSV files whose group statistics are computed by hand below, the runs that must be left
// out (an older file, a diverged run, a copy, an interrupted run) named and counted in nothing, the
// summary CSV, and a folder's malformed file named and skipped.
#include "cli/compare_command.h"
#include "hw/compare_groups.h"
#include "hw/err.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HEADER                                                                                                    \
    "mode,workers,device,wall_seconds,epoch,samples_seen,train_loss,test_loss,test_accuracy,skipped_eval_points," \
    "model,seed,setup\n"
#define SETUP "00000000000000aa"

static char dir[64];

static void make_dir(void) {
    snprintf(dir, sizeof dir, "/tmp/hw_groups_XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

static void remove_dir(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_expect_eq(system(cmd), 0);
}

static void write_text(const char *name, const char *text) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "cannot write %s", path);
    fputs(text, f);
    cr_assert_eq(fclose(f), 0);
}

// A run of 1000 samples in `seconds`: the untrained row (10%), the half-way row at `mid` percent
// (epoch 0), the end at `final` percent (epochs done: `epochs`).
static void write_run(const char *name, const char *mode, int workers, int seed, double seconds, double mid,
                      double final, int epochs) {
    char text[1024];
    snprintf(text, sizeof text,
             HEADER "%s,%d,cpu,0.000,0,0,nan,2.3,10.00,0,mlp,%d," SETUP "\n"
                    "%s,%d,cpu,%.3f,0,500,0.9,0.8,%.2f,0,mlp,%d," SETUP "\n"
                    "%s,%d,cpu,%.3f,%d,1000,0.5,0.4,%.2f,0,mlp,%d," SETUP "\n",
             mode, workers, seed, mode, workers, seconds / 2, mid, seed, mode, workers, seconds, epochs, final, seed);
    write_text(name, text);
}

// The fixed set: hogwild 1 worker, seeds 1-3; hogwild 2 workers, seeds 1-2; dataparallel 1 replica,
// seeds 1-2; and four runs that no statistic may count.
static void write_the_set(void) {
    write_run("h1s1.csv", "hogwild", 1, 1, 10, 80, 90, 1);
    write_run("h1s2.csv", "hogwild", 1, 2, 8, 84, 92, 1);
    write_run("h1s3.csv", "hogwild", 1, 3, 12.5, 86, 94, 1);
    write_run("h2s1.csv", "hogwild", 2, 1, 5, 82, 91, 1);
    write_run("h2s2.csv", "hogwild", 2, 2, 6, 83, 93, 1);
    write_run("d1s1.csv", "dataparallel", 1, 1, 20, 85, 95, 1);
    write_run("d1s2.csv", "dataparallel", 1, 2, 25, 86, 96, 1);
    // A copy of h1s1 (same identity, same seed), an interrupted run of hogwild 2 (epoch 0 only), a
    // diverged run of hogwild 1, and a file from before the identity columns.
    write_run("x_copy.csv", "hogwild", 1, 1, 9, 81, 99, 1);
    write_run("x_stopped.csv", "hogwild", 2, 3, 3, 82, 99, 0);
    write_text("x_diverged.csv", HEADER "hogwild,1,cpu,0.000,0,0,nan,2.3,10.00,0,mlp,4," SETUP "\n"
                                        "hogwild,1,cpu,1.000,0,300,nan,nan,nan,0,mlp,4," SETUP "\n");
    write_text("x_old.csv", "mode,workers,device,wall_seconds,epoch,samples_seen,train_loss,test_loss,test_accuracy\n"
                            "hogwild,1,cpu,0.000,0,0,nan,2.3,10.00\nhogwild,1,cpu,1.000,1,1000,0.5,0.4,99.00\n");
}

static const char *const names[] = {"h1s1.csv", "h1s2.csv",   "h1s3.csv",      "h2s1.csv",       "h2s2.csv", "d1s1.csv",
                                    "d1s2.csv", "x_copy.csv", "x_stopped.csv", "x_diverged.csv", "x_old.csv"};
enum { N_FILES = sizeof names / sizeof names[0] };

static void read_the_set(hw_metrics_table *runs) {
    for (int i = 0; i < N_FILES; i++) {
        char path[256];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        cr_assert_eq(hw_metrics_table_read(&runs[i], path), HW_OK, "%s", hw_error());
    }
}

static const hw_compare_group *find(const hw_compare_groups *g, const char *mode, int workers) {
    for (int i = 0; i < g->n_groups; i++) {
        if (strcmp(g->groups[i].mode, mode) == 0 && g->groups[i].workers == workers) return &g->groups[i];
    }
    cr_assert_fail("no group %s %d", mode, workers);
    return NULL;
}

static void expect_near(double got, double want, const char *what) {
    cr_expect(fabs(got - want) <= 1e-9 * fmax(1, fabs(want)), "%s: %.15g, want %.15g", what, got, want);
}

// Student's t quantiles t(0.975, df) (SciPy; tests/unit/test_stats.c checks hw_stats_t_quantile on them).
#define T975_DF1 12.706204736174694
#define T975_DF2 4.302652729749462

Test(compare_groups, statistics_of_a_fixed_set_match_the_hand_computed_values, .init = make_dir, .fini = remove_dir) {
    write_the_set();
    hw_metrics_table runs[N_FILES];
    read_the_set(runs);
    cr_expect(runs[0].identified && strcmp(runs[0].model, "mlp") == 0 && runs[0].seed == 1 && runs[0].setup == 0xaa);
    cr_expect(!runs[N_FILES - 1].identified, "the old file has no identity");
    hw_compare_groups g;
    cr_assert_eq(hw_compare_groups_build(&g, runs, N_FILES, 85), HW_OK, "%s", hw_error());
    cr_assert_eq(g.n_groups, 3);
    cr_expect_eq(g.n_setups, 1);

    // hogwild 1: final 90, 92, 94: mean 92, sd 2, CI 92 -+ 4.3027 * 2 / sqrt(3).
    const hw_compare_group *h1 = find(&g, "hogwild", 1);
    cr_expect_eq(h1->n_members, 3, "the copy and the diverged run are not members");
    expect_near(h1->final_accuracy.mean, 92, "h1 final mean");
    expect_near(h1->final_accuracy.sd, 2, "h1 final sd");
    expect_near(h1->final_accuracy.ci_low, 92 - T975_DF2 * 2 / sqrt(3), "h1 final ci low");
    expect_near(h1->final_accuracy.ci_high, 92 + T975_DF2 * 2 / sqrt(3), "h1 final ci high");
    expect_near(h1->best_accuracy.mean, 92, "h1 best mean (the last rows are the best)");
    // samples/s: 1000 / 10, 1000 / 8, 1000 / 12.5 = 100, 125, 80: mean 305/3, sd sqrt(1016.67 / 2).
    const double h1_sps = 305.0 / 3,
                 h1_sd = sqrt((pow(100 - h1_sps, 2) + pow(125 - h1_sps, 2) + pow(80 - h1_sps, 2)) / 2);
    expect_near(h1->samples_per_s.mean, h1_sps, "h1 samples/s");
    expect_near(h1->samples_per_s.sd, h1_sd, "h1 samples/s sd");
    expect_near(h1->samples_per_s.sd, 22.546248764114473, "h1 samples/s sd, in figures");
    // Time to 85%: 7.5 s (between 80% at 5 s and 90% at 10 s), 4.5 s (84% at 4 s, 92% at 8 s),
    // 6.25 * 75/76 s (10% at 0 s, 86% at 6.25 s); samples likewise 750, 562.5, 500 * 75/76.
    cr_expect_eq(h1->n_reached, 3);
    expect_near(h1->seconds_to_target.mean, (7.5 + 4.5 + 6.25 * 75 / 76) / 3, "h1 seconds to 85%");
    expect_near(h1->samples_to_target.mean, (750 + 562.5 + 500.0 * 75 / 76) / 3, "h1 samples to 85%");
    cr_expect_eq(h1->baseline, (int)(h1 - g.groups), "the one-worker group is its own baseline");
    expect_near(h1->speed_up.ratio, 1, "h1 speed-up over itself");

    // hogwild 2: final 91, 93 (the interrupted run left out); samples/s 200, 1000/6.
    const hw_compare_group *h2 = find(&g, "hogwild", 2);
    cr_expect_eq(h2->n_members, 2);
    expect_near(h2->final_accuracy.mean, 92, "h2 final mean");
    expect_near(h2->final_accuracy.sd, sqrt(2), "h2 final sd");
    expect_near(h2->final_accuracy.ci_high, 92 + T975_DF1 * sqrt(2) / sqrt(2), "h2 final ci high");
    const double h2_sps = (200 + 1000.0 / 6) / 2;
    expect_near(h2->samples_per_s.mean, h2_sps, "h2 samples/s");
    // The speed-up over hogwild 1: the ratio of the means, its interval the delta method's.
    expect_near(h2->speed_up.ratio, h2_sps / h1_sps, "h2 speed-up");
    expect_near(h2->speed_up.ratio, 1.80327868852459, "h2 speed-up, in figures");
    hw_stats_ratio want = hw_stats_ratio_of_means(&h2->samples_per_s, &h1->samples_per_s);
    expect_near(h2->speed_up.ci_low, want.ci_low, "h2 speed-up ci low");
    cr_expect(h2->speed_up.ci_low < h2->speed_up.ratio && h2->speed_up.ratio < h2->speed_up.ci_high);
    cr_expect_eq(h2->other_mode, -1, "no dataparallel group at 2");

    // Welch between hogwild 1 (90, 92, 94) and dataparallel 1 (95, 96): t = (92 - 95.5) /
    // sqrt(4/3 + 0.5/2) = -2.7815, df = (4/3 + 1/4)^2 / ((4/3)^2/2 + (1/4)^2/1) = 2.635.
    const hw_compare_group *d1 = find(&g, "dataparallel", 1);
    cr_expect_eq(d1->n_members, 2);
    cr_expect_eq(h1->other_mode, (int)(d1 - g.groups));
    expect_near(h1->welch_accuracy.t, -3.5 / sqrt(4.0 / 3 + 0.25), "Welch t");
    expect_near(h1->welch_accuracy.t, -2.781517949836592, "Welch t, in figures");
    expect_near(h1->welch_accuracy.df, 2.6350364963503647, "Welch df");
    expect_near(h1->welch_accuracy.p, 2 * hw_stats_t_cdf(-2.781517949836592, 2.6350364963503647), "Welch p");

    // The four left out, each with its reason.
    cr_expect_eq(g.n_left_out, 4);
    const char *want_reason[] = {"x_copy.csv",     "the same run",
                                 "x_stopped.csv",  "stopped after 0 epoch(s)",
                                 "x_diverged.csv", "diverged after 300 samples",
                                 "x_old.csv",      "no identity columns"};
    for (int k = 0; k < 4; k++) {
        int found = 0;
        for (int l = 0; l < g.n_left_out; l++) {
            const char *path = runs[g.left_out[l].run].path;
            if (strstr(path, want_reason[2 * k]) && strstr(g.left_out[l].reason, want_reason[2 * k + 1])) found = 1;
        }
        cr_expect(found, "%s left out for '%s'", want_reason[2 * k], want_reason[2 * k + 1]);
    }
    hw_compare_groups_free(&g);
    for (int i = 0; i < N_FILES; i++) hw_metrics_table_free(&runs[i]);
}

Test(compare_groups, a_folder_names_and_skips_what_it_cannot_count, .init = make_dir, .fini = remove_dir) {
    write_the_set();
    write_text("y_malformed.csv", HEADER "hogwild,1,cpu,zero,0,0,nan,2.3,10.00,0,mlp,9," SETUP "\n");
    write_text("y_bad_setup.csv", HEADER "hogwild,1,cpu,0.000,0,0,nan,2.3,10.00,0,mlp,9,xyz\n");
    char summary[128], plot[128], out_path[128], err_path[128];
    snprintf(summary, sizeof summary, "%s/sum/groups.csv", dir);
    snprintf(plot, sizeof plot, "%s/plot/c.svg", dir);
    snprintf(out_path, sizeof out_path, "%s/out.txt", dir);
    snprintf(err_path, sizeof err_path, "%s/err.txt", dir);
    char mk[300];
    snprintf(mk, sizeof mk, "mkdir '%s/sum' '%s/plot'", dir, dir);
    cr_assert_eq(system(mk), 0);
    FILE *out = fopen(out_path, "w+"), *err = fopen(err_path, "w+");
    cr_assert(out && err);
    char *argv[] = {dir, "--target", "85", "--summary-csv", summary, "--plot", plot};
    cr_expect_eq(cli_compare_run(7, argv, out, err), 0);
    fclose(out), fclose(err);
    char text[65536];
    FILE *f = fopen(err_path, "r");
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    cr_expect(strstr(text, "skipped: ") && strstr(text, "y_malformed.csv:2: wall_seconds is not a number"), "%s", text);
    cr_expect(strstr(text, "y_bad_setup.csv:2: setup is not 16 hexadecimal digits"), "%s", text);
    f = fopen(out_path, "r");
    n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    cr_expect(strstr(text, "x_diverged.csv: diverged after 300 samples"), "%s", text);
    cr_expect(strstr(text, "x_old.csv: no identity columns"), "%s", text);
    // Student's t gives [79.29, 104.71] for 2 runs; no accuracy passes 100%, so the table cuts it
    // there (the summary CSV keeps the interval as computed).
    cr_expect(strstr(text, "hogwild 2 mlp") && strstr(text, "92.00 ±1.41 [79.29, 100.00]"), "%s", text);
    cr_expect(strstr(text, "p = "), "the Welch test printed: %s", text);
    // The summary: one row per group, the columns named.
    f = fopen(summary, "r");
    cr_assert_not_null(f);
    n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    const char *columns = "mode,workers,model,runs,final_accuracy_mean,final_accuracy_ci_low,final_accuracy_ci_high,"
                          "samples_per_s_mean,samples_per_s_ci_low,samples_per_s_ci_high,";
    cr_expect(strncmp(text, columns, strlen(columns)) == 0, "%s", text);
    cr_expect(strstr(text, "\nhogwild,1,mlp,3,92,"), "%s", text);
    cr_expect(strstr(text, "\nhogwild,2,mlp,2,92,"), "%s", text);
    cr_expect(strstr(text, "\ndataparallel,1,mlp,2,95.5,"), "%s", text);
    char path[200];
    snprintf(path, sizeof path, "%s/plot/c-groups.svg", dir);
    cr_expect_eq(access(path, R_OK), 0, "the groups' plot");
    snprintf(path, sizeof path, "%s/plot/c-scaling.svg", dir);
    cr_expect_eq(access(path, R_OK), 0, "the scaling plot (hogwild at 1 and 2 workers)");
}

Test(compare_groups, one_run_groups_print_without_an_interval, .init = make_dir, .fini = remove_dir) {
    write_run("a.csv", "hogwild", 1, 1, 10, 80, 90, 1);
    hw_metrics_table run;
    char path[256];
    snprintf(path, sizeof path, "%s/a.csv", dir);
    cr_assert_eq(hw_metrics_table_read(&run, path), HW_OK, "%s", hw_error());
    hw_compare_groups g;
    cr_assert_eq(hw_compare_groups_build(&g, &run, 1, 85), HW_OK);
    cr_assert_eq(g.n_groups, 1);
    cr_expect(isnan(g.groups[0].final_accuracy.ci_low) && isnan(g.groups[0].speed_up.ci_low));
    char text[8192];
    FILE *f = fmemopen(text, sizeof text, "w");
    hw_compare_groups_print(f, &g, &run, 85);
    fclose(f);
    cr_expect(strstr(text, "90.00 (n=1)"), "%s", text);
    // The group's rows (one per table) hold no interval.
    for (const char *line = strstr(text, "\nhogwild 1 mlp"); line; line = strstr(line + 1, "\nhogwild 1 mlp")) {
        const char *end = strchr(line + 1, '\n');
        const char *bracket = strchr(line + 1, '[');
        cr_expect(!bracket || (end && bracket > end), "no interval for one run: %s", text);
    }
    hw_compare_groups_free(&g);
    hw_metrics_table_free(&run);
}

// A run of 1000 samples with the settings column: `setup` its hash, `settings` its text (NULL: a
// file from before the column).
static void write_set_run(const char *name, int seed, const char *setup, const char *settings) {
    char text[1024];
    const char *header = settings ? "mode,workers,device,wall_seconds,epoch,samples_seen,train_loss,test_loss,"
                                    "test_accuracy,skipped_eval_points,model,seed,setup,settings\n"
                                  : HEADER;
    char tail[300];
    snprintf(tail, sizeof tail, "%s%s", settings ? "," : "", settings ? settings : "");
    snprintf(text, sizeof text,
             "%shogwild,1,cpu,0.000,0,0,nan,2.3,10.00,0,mlp,%d,%s%s\n"
             "hogwild,1,cpu,2.000,1,1000,0.5,0.4,%d.00,0,mlp,%d,%s%s\n",
             header, seed, setup, tail, 90 + seed, seed, setup, tail);
    write_text(name, text);
}

// The names of n groups built from the files `files` (each read into runs[]).
static void group_names(const char *const *files, int n, char names_out[][HW_METRICS_SETTINGS_CAP]) {
    hw_metrics_table runs[8];
    for (int i = 0; i < n; i++) {
        char path[256];
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        cr_assert_eq(hw_metrics_table_read(&runs[i], path), HW_OK, "%s", hw_error());
    }
    hw_compare_groups g;
    cr_assert_eq(hw_compare_groups_build(&g, runs, n, 99), HW_OK);
    for (int i = 0; i < g.n_groups; i++) snprintf(names_out[i], HW_METRICS_SETTINGS_CAP, "%s", g.groups[i].setup_name);
    cr_expect_eq(g.n_setups, g.n_groups);
    hw_compare_groups_free(&g);
    for (int i = 0; i < n; i++) hw_metrics_table_free(&runs[i]);
}

Test(compare_groups, setups_are_named_by_the_settings_that_differ, .init = make_dir, .fini = remove_dir) {
    write_set_run("c.csv", 1, "0000000000000001", "epochs=10 data=d");
    write_set_run("e.csv", 1, "0000000000000002", "epochs=10 lr-schedule=exponential:0.9 data=d");
    write_set_run("k.csv", 1, "0000000000000003", "epochs=10 lr-schedule=cosine data=d warmup=600");
    const char *files[] = {"c.csv", "e.csv", "k.csv"};
    char got[3][HW_METRICS_SETTINGS_CAP];
    group_names(files, 3, got);
    // The settings every group shares (epochs, data) name none; one a group leaves at its default
    // is named so.
    cr_expect_str_eq(got[0], "lr-schedule=default warmup=default");
    cr_expect_str_eq(got[1], "lr-schedule=exponential:0.9 warmup=default");
    cr_expect_str_eq(got[2], "lr-schedule=cosine warmup=600");
}

Test(compare_groups, setups_are_named_by_hash_where_the_settings_cannot_tell, .init = make_dir, .fini = remove_dir) {
    // One file from before the settings column: every group is named by its hash.
    write_set_run("a.csv", 1, "0000000000000001", "epochs=10");
    write_set_run("b.csv", 1, "00000000000000b2", NULL);
    const char *files[] = {"a.csv", "b.csv"};
    char got[2][HW_METRICS_SETTINGS_CAP];
    group_names(files, 2, got);
    cr_expect_str_eq(got[0], "setup 0000000000000001");
    cr_expect_str_eq(got[1], "setup 00000000000000b2");
    // Two setups whose texts are one (a text cut short): the hash again.
    write_set_run("c.csv", 1, "0000000000000003", "epochs=10 ...");
    write_set_run("d.csv", 1, "0000000000000004", "epochs=10 ...");
    const char *cut[] = {"c.csv", "d.csv"};
    group_names(cut, 2, got);
    cr_expect_str_eq(got[0], "setup 0000000000000003");
    cr_expect_str_eq(got[1], "setup 0000000000000004");
}

// A resumed run's first row holds the samples its checkpoint had seen, trained before this run's
// clock started: its speed is the samples it trained over its own wall time (compare printed the
// total over this run's time, 3x the run's own figure in the review of 2026-12-02).
Test(compare_groups, a_resumed_runs_speed_counts_the_samples_it_trained, .init = make_dir, .fini = remove_dir) {
    write_text("resumed.csv", HEADER "hogwild,1,cpu,0.000,2,120000,nan,0.3,91.00,0,mlp,1," SETUP "\n"
                                     "hogwild,1,cpu,2.000,3,180000,0.3,0.3,92.00,0,mlp,1," SETUP "\n");
    hw_metrics_table run;
    char path[256];
    snprintf(path, sizeof path, "%s/resumed.csv", dir);
    cr_assert_eq(hw_metrics_table_read(&run, path), HW_OK, "%s", hw_error());
    expect_near(hw_metrics_samples_per_second(&run), 30000, "samples/s: 60000 trained in 2 s");
    hw_metrics_table_free(&run);
}
