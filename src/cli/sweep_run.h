// sweep_run: the runs of `hogwild sweep` one after another (src/cli/sweep_run.c): each a child
// ./hogwild into its own CSV, the runs done before skipped, a stop signal passed on to the run,
// then compare over the folder.
#ifndef HW_CLI_SWEEP_RUN_H
#define HW_CLI_SWEEP_RUN_H

#include "cli/sweep_grid.h"

// What the command line settled, checked: the folder, the grid, the training flags of every run
// and the target passed to compare.
typedef struct {
    const char *dir;
    const sweep_grid *grid;
    char **flags;  // the training flags after "--", n_flags of them
    int n_flags;
    double target;  // compare's target accuracy, or 0: its default
} sweep_plan;

// The arguments of the run `pt` of the plan, into words[0..*n) (NULL-terminated; words has room for
// n_flags + 16): the training flags, then the run's mode, workers or replicas, seed, learning rate
// (if the grid has some) and metrics file `metrics`, and --quiet. words[0] is `program`. The texts
// it points to live in `texts` (room for 8 of 64 characters).
void sweep_run_words(const sweep_plan *plan, const sweep_point *pt, const char *program, const char *metrics,
                     char **words, int *n, char (*texts)[64]);

// Runs the plan's grid and compare. Returns the exit status: 0; 1 when a run failed (it stops the
// sweep) or compare did; 128 + the signal when stopped.
int sweep_execute(const sweep_plan *plan);

#endif
