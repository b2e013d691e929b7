// compare_groups: `hogwild compare`'s statistics over repeated runs. Runs that differ by seed alone
// (the same mode, workers, model and setup hash: the metrics' identity columns, hw/metrics.h) form
// a group; per group the count, the mean, the standard deviation and the 95% Student t interval
// (hw/stats.h) of the final and best test accuracy, the time and samples to the target and the
// samples per second; the speed-up over the one-worker group of the same mode, model and setup; and
// Welch's t-test between the Hogwild and DataParallel groups at the same workers. Built in
// src/report/compare_groups.c, printed and written as CSV in compare_groups_print.c, drawn in
// svg_groups.c.
#ifndef HW_COMPARE_GROUPS_H
#define HW_COMPARE_GROUPS_H

#include "hw/metrics.h"
#include "hw/stats.h"

#include <stdio.h>

typedef struct {
    // The key: what every member shares.
    char mode[32];
    int workers;
    char model[HW_METRICS_MODEL_CAP];
    uint64_t setup;
    int has_settings;  // the runs have the settings column (a file from before it has not)
    char settings[HW_METRICS_SETTINGS_CAP];
    // What tells the group from the others of another setup: the settings that not every group
    // shares, "lr-schedule=cosine", with "name=default" for one the group leaves at its default;
    // the setup's hash where the settings do not tell (files without them, a text cut short); ""
    // when all groups have one setup.
    char setup_name[HW_METRICS_SETTINGS_CAP];
    int *members;  // indices into the runs of the runs counted, in the runs' order
    int n_members;
    hw_stats_summary final_accuracy, best_accuracy, samples_per_s;
    // Over the members that reached the target (n_reached of them); NAN summaries when none did.
    int n_reached;
    hw_stats_summary seconds_to_target, samples_to_target;
    int baseline;             // the group of 1 worker with the same mode, model and setup, or -1
    hw_stats_ratio speed_up;  // samples/s over the baseline's (NAN without one)
    int other_mode;           // the group of the other mode with the same workers, model and setup, or -1
    hw_stats_welch_result welch_accuracy, welch_speed;  // against other_mode's final accuracy, samples/s
} hw_compare_group;

// A run left out of every group, and why (one sentence, naming no file: the caller names it).
typedef struct {
    int run;
    char reason[640];
} hw_compare_left_out;

typedef struct {
    hw_compare_group *groups;  // in the order of their first run
    int n_groups;
    hw_compare_left_out *left_out;
    int n_left_out;
    int n_setups;  // distinct setup hashes among the groups (the table shows the setup when > 1)
} hw_compare_groups;

// Groups runs[0..n_runs): a run without the identity columns (an older file), a diverged run, a
// copy of another run (the same identity and seed), and a run that stopped before the epochs its
// group mates completed (an interrupted run) are left out, each with its reason, and counted in no
// statistic. HW_OK, or HW_ERR out of memory (groups then holds nothing to free).
int hw_compare_groups_build(hw_compare_groups *groups, const hw_metrics_table *runs, int n_runs, double target);
void hw_compare_groups_free(hw_compare_groups *groups);

// The group tables (compare_groups_print.c): accuracy, then speed, each cell "mean ±sd [95% CI]"
// (n = 1: the value and "(n=1)"), the Welch tests, and a line per run left out naming its file.
void hw_compare_groups_print(FILE *out, const hw_compare_groups *groups, const hw_metrics_table *runs, double target);
// The group table as CSV at `path`: mode,workers,model,runs,final_accuracy_mean,...; fails naming it.
int hw_compare_groups_write_csv(const char *path, const hw_compare_groups *groups, double target);

// The plots (svg_groups.c). Accuracy against wall time and against samples seen, one line per group
// (the members' mean on a common grid) in a band of its 95% interval (none for one run).
int hw_compare_write_group_plot(const char *path, const hw_compare_groups *groups, const hw_metrics_table *runs,
                                double target);
// Scaling: samples/s and the time to the target against workers, a line per mode (and model and
// setup) with interval bars, the linear ideal from its one-worker group dashed. Fails when no line
// has two worker counts.
int hw_compare_write_scaling_plot(const char *path, const hw_compare_groups *groups, double target);
// Whether a scaling plot has something to draw: a mode (model, setup) at two worker counts or more.
int hw_compare_groups_scale(const hw_compare_groups *groups);

#endif
