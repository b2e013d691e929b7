// compare_inputs: the runs `hogwild compare` reads (src/cli/compare_inputs.c): its operands, files
// or folders, a folder standing for the *.csv files in it.
#ifndef HW_CLI_COMPARE_INPUTS_H
#define HW_CLI_COMPARE_INPUTS_H

#include "hw/metrics.h"

#include <stdio.h>

typedef struct {
    char **files;  // every file named or found, in order (a folder's sorted by name)
    int n_files;
    hw_metrics_table *runs;  // the runs read, n_runs of them
    int n_runs;
    int n_skipped;  // files of a folder that could not be read (each named on err)
} compare_inputs;

// Lists the operands' files and reads them. A file named on the command line that cannot be read
// fails the command (1, its message on `err`); a file found in a folder that cannot be read (a
// malformed CSV, another CSV) is named on `err` with the reason and skipped, so that one bad file
// does not stop a study, nor is it silently averaged. A folder's group table (--summary-csv) is
// left out, named, unless it is `own_summary` (the one this compare writes; NULL: none). A folder
// with no run read fails. Returns 0 or 1; `in` is the caller's to free either way.
int compare_inputs_read(compare_inputs *in, char *const *operands, int n_operands, const char *own_summary, FILE *err);
void compare_inputs_free(compare_inputs *in);

#endif
