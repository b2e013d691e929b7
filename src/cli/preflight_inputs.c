// preflight_inputs: the dataset folder a run reads, checked before it loads anything, so that a
// newcomer without a dataset is told the commands that write one (the data module's own message
// names only what is missing: it does not know the command line).
#include "cli/preflight.h"

#include "hw/err.h"

#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

const char *preflight_dataset_file_in(const char *dir) {
    static const char *const names[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                                        "t10k-labels-idx1-ubyte"};
    static char found[1100];
    for (int i = 0; i < 4; i++) {
        for (int gz = 0; gz < 2; gz++) {
            snprintf(found, sizeof found, "%s/%s%s", dir, names[i], gz ? ".gz" : "");
            if (access(found, F_OK) == 0) return found;
        }
    }
    return NULL;
}

static int is_folder(const char *dir, const char *name) {
    char path[1100];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int preflight_data(const hw_train_config *config) {
    const char *dir = config->data_dir;
    struct stat st;
    const char *what = NULL;
    if (stat(dir, &st) != 0) {
        what = "does not exist";
    } else if (S_ISDIR(st.st_mode) && !preflight_dataset_file_in(dir) && !is_folder(dir, "train") &&
               !is_folder(dir, "test")) {
        what = "holds no dataset (neither the four MNIST files, train-images-idx3-ubyte.gz, ..., nor train/ and "
               "test/ image folders)";
    }
    // Anything else (a file, a partial dataset, a folder that cannot be read) the loader reports.
    if (!what) return HW_OK;
    return hw_fail("the data folder %s (--data) %s: get MNIST with `hogwild download mnist --dir %s`, or write "
                   "synthetic digits with `hogwild synth --dir %s`",
                   dir, what, dir, dir);
}
