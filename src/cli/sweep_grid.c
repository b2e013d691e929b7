// sweep_grid: the lists of `hogwild sweep` and the runs they make (src/cli/sweep_grid.h).
#include "cli/sweep_grid.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The next item of a comma-separated list at *p into item[0..cap) (cut there): 1, or 0 at its end.
// (Empty items are refused before, by ends_badly.)
static int next_item(const char **p, char *item, size_t cap) {
    if (**p == '\0') return 0;
    size_t len = strcspn(*p, ",");
    snprintf(item, cap, "%.*s", (int)len, *p);
    *p += len;
    if (**p == ',') (*p)++;
    return 1;
}

// A whole decimal integer from lo to hi; 0 when `text` is one.
static int read_whole(const char *text, long long lo, long long hi, long long *out) {
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (!isdigit((unsigned char)text[0]) || *end != '\0' || errno || v < lo || v > hi) return 1;
    *out = v;
    return 0;
}

// A list that ends with a comma, or holds an empty item, names the spot.
static int refuse_empty(const char *flag, const char *text, char *error, size_t cap) {
    return cli_refuse(error, cap, "--%s '%s' has an empty value (two commas, or one at an end)", flag, text);
}

static int ends_badly(const char *text) {
    size_t len = strlen(text);
    return len == 0 || text[0] == ',' || text[len - 1] == ',' || strstr(text, ",,") != NULL;
}

int sweep_grid_parse_workers(const cli_option *o, const char *text, void *target, char *error, size_t cap) {
    sweep_grid *grid = (sweep_grid *)((char *)target + o->field);
    if (ends_badly(text)) return refuse_empty(o->name, text, error, cap);
    grid->n_workers = 0;
    char item[64];
    for (const char *p = text; next_item(&p, item, sizeof item);) {
        long long v;
        if (read_whole(item, 1, 1024, &v)) {
            return cli_refuse(error, cap, "--%s: '%s' is not a count of workers from 1 to 1024 (in '%s')", o->name,
                              item, text);
        }
        for (int k = 0; k < grid->n_workers; k++) {
            if (grid->workers[k] == v)
                return cli_refuse(error, cap, "--%s: %lld is given twice in '%s'", o->name, v, text);
        }
        if (grid->n_workers == SWEEP_MAX_VALUES) {
            return cli_refuse(error, cap, "--%s: at most %d values, got '%s'", o->name, SWEEP_MAX_VALUES, text);
        }
        grid->workers[grid->n_workers++] = (int)v;
    }
    return HW_EXIT_OK;
}

int sweep_grid_parse_modes(const cli_option *o, const char *text, void *target, char *error, size_t cap) {
    sweep_grid *grid = (sweep_grid *)((char *)target + o->field);
    if (ends_badly(text)) return refuse_empty(o->name, text, error, cap);
    grid->n_modes = 0;
    char item[64];
    for (const char *p = text; next_item(&p, item, sizeof item);) {
        hw_mode mode;
        if (strcmp(item, "hogwild") == 0) mode = HW_MODE_HOGWILD;
        else if (strcmp(item, "dataparallel") == 0) mode = HW_MODE_DATAPARALLEL;
        else {
            return cli_refuse(error, cap, "--%s: '%s' is not a mode: hogwild or dataparallel (in '%s')", o->name, item,
                              text);
        }
        for (int k = 0; k < grid->n_modes; k++) {
            if (grid->modes[k] == mode) return cli_refuse(error, cap, "--%s: %s is given twice", o->name, item);
        }
        grid->modes[grid->n_modes++] = mode;
    }
    return HW_EXIT_OK;
}

// One item of --seeds, "S" or "A-B" with A <= B, appended; HW_EXIT_OK or the refusal.
static int add_seeds(const cli_option *o, sweep_grid *grid, const char *item, const char *text, char *error,
                     size_t cap) {
    char first[64];
    const char *dash = strchr(item, '-');
    long long a, b;
    snprintf(first, sizeof first, "%.*s", (int)(dash ? (size_t)(dash - item) : strlen(item)), item);
    if (read_whole(first, 0, LLONG_MAX, &a) || (dash && read_whole(dash + 1, 0, LLONG_MAX, &b))) {
        return cli_refuse(error, cap, "--%s: '%s' is not a seed (an integer >= 0) or a range A-B (in '%s')", o->name,
                          item, text);
    }
    if (!dash) b = a;
    if (b < a) return cli_refuse(error, cap, "--%s: the range '%s' runs backwards (in '%s')", o->name, item, text);
    if (b - a >= SWEEP_MAX_SEEDS - grid->n_seeds) {
        return cli_refuse(error, cap, "--%s: at most %d seeds, got more in '%s'", o->name, SWEEP_MAX_SEEDS, text);
    }
    for (long long s = a; s <= b; s++) {
        for (int k = 0; k < grid->n_seeds; k++) {
            if (grid->seeds[k] == (uint64_t)s) {
                return cli_refuse(error, cap, "--%s: the seed %lld is given twice in '%s'", o->name, s, text);
            }
        }
        grid->seeds[grid->n_seeds++] = (uint64_t)s;
    }
    return HW_EXIT_OK;
}

int sweep_grid_parse_seeds(const cli_option *o, const char *text, void *target, char *error, size_t cap) {
    sweep_grid *grid = (sweep_grid *)((char *)target + o->field);
    if (ends_badly(text)) return refuse_empty(o->name, text, error, cap);
    grid->n_seeds = 0;
    char item[64];
    for (const char *p = text; next_item(&p, item, sizeof item);) {
        int status = add_seeds(o, grid, item, text, error, cap);
        if (status != HW_EXIT_OK) return status;
    }
    return HW_EXIT_OK;
}

int sweep_grid_parse_lrs(const cli_option *o, const char *text, void *target, char *error, size_t cap) {
    sweep_grid *grid = (sweep_grid *)((char *)target + o->field);
    if (ends_badly(text)) return refuse_empty(o->name, text, error, cap);
    grid->n_lrs = 0;
    char item[64];
    for (const char *p = text; next_item(&p, item, sizeof item);) {
        char *end;
        errno = 0;
        double v = strtod(item, &end);
        // Decimal, as every number of the command line: "0x1" is refused, not read as 1.
        if (item[0] == '\0' || *end != '\0' || errno || strpbrk(item, "xX") || isspace((unsigned char)item[0]) ||
            !(v > 0) || v > 1e9 || strlen(item) >= SWEEP_LR_CAP) {
            return cli_refuse(error, cap, "--%s: '%s' is not a learning rate (a decimal number > 0) (in '%s')", o->name,
                              item, text);
        }
        for (int k = 0; k < grid->n_lrs; k++) {
            if (strtod(grid->lrs[k], NULL) == v) {
                return cli_refuse(error, cap, "--%s: %s is given twice (as %s) in '%s'", o->name, item, grid->lrs[k],
                                  text);
            }
        }
        if (grid->n_lrs == SWEEP_MAX_VALUES) {
            return cli_refuse(error, cap, "--%s: at most %d values, got '%s'", o->name, SWEEP_MAX_VALUES, text);
        }
        memcpy(grid->lrs[grid->n_lrs++], item, strlen(item) + 1);  // strlen(item) < SWEEP_LR_CAP, checked above
    }
    return HW_EXIT_OK;
}

int sweep_grid_size(const sweep_grid *grid) {
    int lrs = grid->n_lrs > 0 ? grid->n_lrs : 1;
    return grid->n_seeds * lrs * grid->n_modes * grid->n_workers;
}

sweep_point sweep_grid_point(const sweep_grid *grid, int i) {
    sweep_point pt;
    memset(&pt, 0, sizeof pt);
    int lrs = grid->n_lrs > 0 ? grid->n_lrs : 1;
    pt.workers = grid->workers[i % grid->n_workers];
    i /= grid->n_workers;
    pt.mode = grid->modes[i % grid->n_modes];
    i /= grid->n_modes;
    int l = i % lrs;
    pt.lr = grid->n_lrs > 0 ? grid->lrs[l] : NULL;
    pt.seed = grid->seeds[i / lrs];
    char lr_part[SWEEP_LR_CAP + 4] = "";
    if (pt.lr) snprintf(lr_part, sizeof lr_part, "-lr%s", pt.lr);
    snprintf(pt.name, sizeof pt.name, "%s-w%d%s-s%llu", pt.mode == HW_MODE_HOGWILD ? "hogwild" : "dataparallel",
             pt.workers, lr_part, (unsigned long long)pt.seed);
    return pt;
}
