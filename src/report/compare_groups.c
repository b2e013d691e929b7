// compare_groups: the groups of runs that differ by seed alone, and their statistics
// (include/hw/compare_groups.h).
#include "hw/compare_groups.h"

#include "hw/compare.h"
#include "hw/err.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int same_key(const hw_compare_group *g, const hw_metrics_table *run) {
    return strcmp(g->mode, run->mode) == 0 && g->workers == run->workers && strcmp(g->model, run->model) == 0 &&
           g->setup == run->setup;
}

static void leave_out(hw_compare_groups *groups, int run, const char *reason) {
    hw_compare_left_out *l = &groups->left_out[groups->n_left_out++];
    l->run = run;
    snprintf(l->reason, sizeof l->reason, "%s", reason);
}

// The group of `run` (made when it is the first of its key), or -1 out of memory.
static int group_of(hw_compare_groups *groups, const hw_metrics_table *run, int n_runs) {
    for (int g = 0; g < groups->n_groups; g++) {
        if (same_key(&groups->groups[g], run)) return g;
    }
    hw_compare_group *g = &groups->groups[groups->n_groups];
    memset(g, 0, sizeof *g);
    snprintf(g->mode, sizeof g->mode, "%s", run->mode);
    g->workers = run->workers;
    snprintf(g->model, sizeof g->model, "%s", run->model);
    g->setup = run->setup;
    g->has_settings = run->has_settings;
    snprintf(g->settings, sizeof g->settings, "%s", run->settings);
    g->baseline = g->other_mode = -1;
    g->members = malloc((size_t)n_runs * sizeof *g->members);
    if (!g->members) return -1;
    return groups->n_groups++;
}

// The last epoch a run completed.
static int64_t epochs_of(const hw_metrics_table *run) { return run->points[run->n_points - 1].epoch; }

// Puts each run in its group or leaves it out (the rules of hw_compare_groups_build), then drops
// from each group its members that stopped before the group's most epochs.
static int groups_fill(hw_compare_groups *groups, const hw_metrics_table *runs, int n_runs) {
    char reason[640];
    for (int r = 0; r < n_runs; r++) {
        const hw_metrics_table *run = &runs[r];
        if (!run->identified) {
            leave_out(groups, r, "no identity columns (model, seed, setup): a file from an older hogwild, in no group");
            continue;
        }
        if (run->diverged) {
            snprintf(reason, sizeof reason, "diverged after %lld samples: counted in no statistic",
                     (long long)run->diverged_at.samples_seen);
            leave_out(groups, r, reason);
            continue;
        }
        int g = group_of(groups, run, n_runs);
        if (g < 0) return hw_fail("out of memory grouping %d runs", n_runs);
        hw_compare_group *group = &groups->groups[g];
        int copy = -1;
        for (int m = 0; m < group->n_members && copy < 0; m++) {
            if (runs[group->members[m]].seed == run->seed) copy = group->members[m];
        }
        if (copy >= 0) {
            snprintf(reason, sizeof reason,
                     "the same run (mode, workers, model, setup and seed %llu) as %.400s: "
                     "counted once",
                     (unsigned long long)run->seed, runs[copy].path);
            leave_out(groups, r, reason);
            continue;
        }
        group->members[group->n_members++] = r;
    }
    for (int g = 0; g < groups->n_groups; g++) {
        hw_compare_group *group = &groups->groups[g];
        int64_t most = 0;
        for (int m = 0; m < group->n_members; m++) {
            if (epochs_of(&runs[group->members[m]]) > most) most = epochs_of(&runs[group->members[m]]);
        }
        int kept = 0;
        for (int m = 0; m < group->n_members; m++) {
            int r = group->members[m];
            if (epochs_of(&runs[r]) < most) {
                snprintf(reason, sizeof reason,
                         "stopped after %lld epoch(s), its group's other runs after %lld (an interrupted run?): "
                         "counted in no statistic",
                         (long long)epochs_of(&runs[r]), (long long)most);
                leave_out(groups, r, reason);
            } else {
                group->members[kept++] = r;
            }
        }
        group->n_members = kept;
    }
    return HW_OK;
}

// The statistics of one group's members.
static void group_summarize(hw_compare_group *g, const hw_metrics_table *runs, double target, double *scratch) {
    const int n = g->n_members;
    for (int m = 0; m < n; m++) {
        const hw_metrics_table *run = &runs[g->members[m]];
        scratch[m] = run->points[run->n_points - 1].test_accuracy;
    }
    g->final_accuracy = hw_stats_summarize(scratch, n);
    for (int m = 0; m < n; m++) scratch[m] = hw_metrics_best_accuracy(&runs[g->members[m]]);
    g->best_accuracy = hw_stats_summarize(scratch, n);
    for (int m = 0; m < n; m++) scratch[m] = hw_metrics_samples_per_second(&runs[g->members[m]]);
    g->samples_per_s = hw_stats_summarize(scratch, n);
    double *samples = scratch + n;
    g->n_reached = 0;
    for (int m = 0; m < n; m++) {
        double wall, seen;
        if (!hw_metrics_time_to_target(&runs[g->members[m]], target, &wall, &seen)) continue;
        scratch[g->n_reached] = wall;
        samples[g->n_reached++] = seen;
    }
    g->seconds_to_target = hw_stats_summarize(scratch, g->n_reached);
    g->samples_to_target = hw_stats_summarize(samples, g->n_reached);
}

// Each group's baseline (1 worker, same mode, model, setup) and speed-up, and the group of the other
// mode at the same workers, with Welch's tests against it.
static void groups_relate(hw_compare_groups *groups) {
    for (int a = 0; a < groups->n_groups; a++) {
        hw_compare_group *g = &groups->groups[a];
        g->speed_up = (hw_stats_ratio){NAN, NAN, NAN};
        g->welch_accuracy = g->welch_speed = (hw_stats_welch_result){NAN, NAN, NAN};
        for (int b = 0; b < groups->n_groups; b++) {
            const hw_compare_group *h = &groups->groups[b];
            if (strcmp(g->model, h->model) != 0 || g->setup != h->setup) continue;
            if (strcmp(g->mode, h->mode) == 0 && h->workers == 1) g->baseline = b;
            if (strcmp(g->mode, h->mode) != 0 && h->workers == g->workers) g->other_mode = b;
        }
        if (g->baseline >= 0) {
            g->speed_up = hw_stats_ratio_of_means(&g->samples_per_s, &groups->groups[g->baseline].samples_per_s);
        }
        if (g->other_mode >= 0) {
            const hw_compare_group *h = &groups->groups[g->other_mode];
            g->welch_accuracy = hw_stats_welch(&g->final_accuracy, &h->final_accuracy);
            g->welch_speed = hw_stats_welch(&g->samples_per_s, &h->samples_per_s);
        }
    }
}

// ---- naming the setups ----

// The next setting ("name=value") of the blank-separated list at *cursor: its start, its length in
// *len, and *cursor moved past it; NULL at the list's end. The one reader of the settings text.
static const char *settings_next(const char **cursor, size_t *len) {
    const char *p = *cursor;
    if (*p == '\0') return NULL;
    *len = strcspn(p, " ");
    *cursor = p + *len + (p[*len] == ' ');
    return p;
}

// Whether the list `settings` holds `token` (len bytes) as a whole entry.
static int settings_have(const char *settings, const char *token, size_t len) {
    size_t n;
    for (const char *cursor = settings, *p; (p = settings_next(&cursor, &n));) {
        if (n == len && strncmp(p, token, len) == 0) return 1;
    }
    return 0;
}

// The value of setting `name` (name_len bytes) in `settings`, its length in *value_len; NULL when
// the list does not hold it (the setting is at its default).
static const char *settings_value(const char *settings, const char *name, size_t name_len, size_t *value_len) {
    size_t n;
    for (const char *cursor = settings, *p; (p = settings_next(&cursor, &n));) {
        if (n > name_len && p[name_len] == '=' && strncmp(p, name, name_len) == 0) {
            *value_len = n - name_len - 1;
            return p + name_len + 1;
        }
    }
    return NULL;
}

// The names of the settings that not every group has with the same value, into names[cap] joined
// by blanks, in the order the groups list them.
static void differing_names(const hw_compare_groups *groups, char *names, size_t cap) {
    names[0] = '\0';
    for (int a = 0; a < groups->n_groups; a++) {
        size_t n;
        for (const char *cursor = groups->groups[a].settings, *p; (p = settings_next(&cursor, &n));) {
            size_t name_len = strcspn(p, "=");
            if (name_len > n) name_len = n;
            int shared = 1;
            for (int b = 0; b < groups->n_groups && shared; b++)
                shared = settings_have(groups->groups[b].settings, p, n);
            size_t used = strlen(names);
            if (!shared && !settings_have(names, p, name_len) && used + name_len + 2 <= cap) {
                snprintf(names + used, cap - used, "%s%.*s", used ? " " : "", (int)name_len, p);
            }
        }
    }
}

// Each group's setup_name (see hw_compare_group); by hash when one group has no settings column,
// when the settings tell no two groups apart, or when two groups come out with one name.
static void groups_name_setups(hw_compare_groups *groups) {
    if (groups->n_setups <= 1) return;
    int by_settings = 1;
    for (int a = 0; a < groups->n_groups; a++) by_settings &= groups->groups[a].has_settings;
    char names[HW_METRICS_SETTINGS_CAP];
    if (by_settings) differing_names(groups, names, sizeof names);
    if (by_settings && names[0] == '\0') by_settings = 0;
    for (int a = 0; a < groups->n_groups && by_settings; a++) {
        hw_compare_group *g = &groups->groups[a];
        size_t used = 0, cap = sizeof g->setup_name;
        g->setup_name[0] = '\0';
        size_t n;
        for (const char *cursor = names, *p; used < cap && (p = settings_next(&cursor, &n));) {
            size_t value_len = 0;
            const char *value = settings_value(g->settings, p, n, &value_len);
            used += (size_t)snprintf(g->setup_name + used, cap - used, "%s%.*s=%.*s", used ? " " : "", (int)n, p,
                                     value ? (int)value_len : 7, value ? value : "default");
        }
    }
    for (int a = 0; a < groups->n_groups && by_settings; a++) {
        for (int b = 0; b < a; b++) {
            const hw_compare_group *g = &groups->groups[a], *h = &groups->groups[b];
            if (g->setup != h->setup && strcmp(g->setup_name, h->setup_name) == 0) by_settings = 0;
        }
    }
    for (int a = 0; a < groups->n_groups && !by_settings; a++) {
        hw_compare_group *g = &groups->groups[a];
        snprintf(g->setup_name, sizeof g->setup_name, "setup %016llx", (unsigned long long)g->setup);
    }
}

int hw_compare_groups_build(hw_compare_groups *groups, const hw_metrics_table *runs, int n_runs, double target) {
    memset(groups, 0, sizeof *groups);
    int cap = n_runs > 0 ? n_runs : 1;
    groups->groups = calloc((size_t)cap, sizeof *groups->groups);
    groups->left_out = calloc((size_t)cap, sizeof *groups->left_out);
    double *scratch = malloc(2 * (size_t)cap * sizeof *scratch);
    int rc = groups->groups && groups->left_out && scratch ? groups_fill(groups, runs, n_runs)
                                                           : hw_fail("out of memory grouping %d runs", n_runs);
    // A group whose every run was left out (each diverged after the first was counted, none here) is
    // dropped, so that no table shows a group of 0.
    int kept = 0;
    for (int g = 0; rc == HW_OK && g < groups->n_groups; g++) {
        if (groups->groups[g].n_members == 0) {
            free(groups->groups[g].members);
            continue;
        }
        groups->groups[kept++] = groups->groups[g];
    }
    if (rc == HW_OK) groups->n_groups = kept;
    for (int g = 0; rc == HW_OK && g < groups->n_groups; g++)
        group_summarize(&groups->groups[g], runs, target, scratch);
    if (rc == HW_OK) groups_relate(groups);
    for (int g = 0; rc == HW_OK && g < groups->n_groups; g++) {
        int seen = 0;
        for (int h = 0; h < g; h++) seen |= groups->groups[h].setup == groups->groups[g].setup;
        groups->n_setups += !seen;
    }
    if (rc == HW_OK) groups_name_setups(groups);
    free(scratch);
    if (rc != HW_OK) hw_compare_groups_free(groups);
    return rc;
}

void hw_compare_groups_free(hw_compare_groups *groups) {
    for (int g = 0; g < groups->n_groups; g++) free(groups->groups[g].members);
    free(groups->groups);
    free(groups->left_out);
    memset(groups, 0, sizeof *groups);
}
