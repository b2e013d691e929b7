// sweep_grid: the grid of `hogwild sweep` (src/cli/sweep_grid.c): its lists of workers, modes,
// seeds and learning rates as the command line gives them, each checked whole before any run, and
// the runs of the grid, each with its name.
#ifndef HW_CLI_SWEEP_GRID_H
#define HW_CLI_SWEEP_GRID_H

#include "cli/options.h"
#include "hw/train.h"

#include <stddef.h>
#include <stdint.h>

enum { SWEEP_MAX_VALUES = 64, SWEEP_MAX_SEEDS = 1000, SWEEP_LR_CAP = 32 };

typedef struct {
    int workers[SWEEP_MAX_VALUES];  // Hogwild workers or DataParallel replicas
    int n_workers;
    hw_mode modes[2];
    int n_modes;
    uint64_t seeds[SWEEP_MAX_SEEDS];
    int n_seeds;
    char lrs[SWEEP_MAX_VALUES][SWEEP_LR_CAP];  // the learning rates as given ("0.05"); none: the flags'
    int n_lrs;
} sweep_grid;

// The lists, each "A,B,C" with no value twice; seeds also take ranges, "1-5" or "1-3,7". Each
// refuses the list naming the value that is wrong (HW_EXIT_USAGE, error[0..cap)); grid is the
// command's target, its fields set whole.
int sweep_grid_parse_workers(const cli_option *o, const char *text, void *grid, char *error, size_t cap);
int sweep_grid_parse_modes(const cli_option *o, const char *text, void *grid, char *error, size_t cap);
int sweep_grid_parse_seeds(const cli_option *o, const char *text, void *grid, char *error, size_t cap);
int sweep_grid_parse_lrs(const cli_option *o, const char *text, void *grid, char *error, size_t cap);

// The runs of the grid: seeds outermost (a sweep stopped early has every set-up at the first seeds),
// then learning rates, modes and workers.
typedef struct {
    hw_mode mode;
    int workers;
    uint64_t seed;
    const char *lr;  // NULL: the training flags' own
    char name[96];   // "hogwild-w2-lr0.05-s3": the file names of the run
} sweep_point;

int sweep_grid_size(const sweep_grid *grid);
// Run i of the grid, 0 <= i < sweep_grid_size.
sweep_point sweep_grid_point(const sweep_grid *grid, int i);

#endif
