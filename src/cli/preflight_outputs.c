// preflight_outputs: the files a run will write (--save, --metrics), checked before it trains, so that a
// bad path fails at once instead of after an epoch, and no run destroys a file it was not meant to.
//
// --save and --metrics must be writable (hw_output_check: a name, not a folder or a special file,
// a folder that takes the checkpoint's temporary file, a file its owner lets this run replace);
// --save must not be the model file, a dataset file (a sparse folder's names too, existing or not),
// the --metrics file, or inside the image folders; and an existing checkpoint is replaced only by
// the run that resumed from it or with --overwrite. --metrics must not be an input or the
// checkpoint either.
#include "preflight.h"

#include "hw/err.h"
#include "hw/file.h"
#include "hw/shm.h"
#include "hw/sparse_data.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

// Whether the folder `dir` is `root` or inside it (both resolved with realpath).
static int folder_within(const char *dir, const char *root) {
    char real_dir[PATH_MAX], real_root[PATH_MAX];
    if (!realpath(dir, real_dir) || !realpath(root, real_root)) return 0;
    size_t n = strlen(real_root);
    return strncmp(real_dir, real_root, n) == 0 && (real_dir[n] == '\0' || real_dir[n] == '/');
}

// The input files `path` must not be: the model file (none when the model is the text a --resume
// checkpoint records: then model_path names that checkpoint, which --save may continue), every
// dataset file, a sparse dataset's name in the data folder (hw_sparse_dataset_name_of: a file
// there is read as the dataset), or a place inside the image folders (a file there becomes a
// sample of the next run).
static int check_not_an_input(const char *flag, const char *path, const hw_train_config *config) {
    if (!config->model_text && hw_same_file(path, config->model_path)) {
        return hw_fail("%s %s is the model file (--model %s): it would be destroyed; choose another path", flag, path,
                       config->model_path);
    }
    static const char *const data_files[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                             "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
    char candidate[PATH_MAX + 64];
    for (int i = 0; i < 4; i++) {
        for (int gz = 0; gz < 2; gz++) {
            snprintf(candidate, sizeof candidate, "%s/%s%s", config->data_dir, data_files[i], gz ? ".gz" : "");
            if (hw_same_file(path, candidate)) {
                return hw_fail("%s %s is the dataset file %s: it would be destroyed; choose another path", flag, path,
                               candidate);
            }
        }
    }
    const char *sparse = hw_sparse_dataset_name_of(config->data_dir, path);
    if (sparse) {
        return hw_fail("%s %s is a file of the sparse dataset in %s (a file named %s or %s.gz there is read as "
                       "the dataset): it would destroy the dataset or corrupt it; choose another path",
                       flag, path, config->data_dir, sparse, sparse);
    }
    char folder[PATH_MAX];
    hw_path_folder(path, folder, sizeof folder);
    const char *const image_folders[] = {"train", "test"};
    for (int i = 0; i < 2; i++) {
        snprintf(candidate, sizeof candidate, "%s/%s", config->data_dir, image_folders[i]);
        if (folder_within(folder, candidate)) {
            return hw_fail("%s %s is inside the image folder %s: it would become a sample; choose another path", flag,
                           path, candidate);
        }
    }
    return HW_OK;
}

int preflight_outputs(const hw_train_config *config) {
    const char *save = config->save_path, *metrics = config->metrics_path;
    // A save of this checkpoint killed half-way (SIGKILL) leaves its "<save>.tmp.<pid>" behind:
    // removed before this run saves.
    if (save) hw_shm_temp_sweep(save, stderr);
    if (save) {
        if (check_not_an_input("--save", save, config) != HW_OK || hw_output_check("--save", save, 1) != HW_OK) {
            return HW_ERR;
        }
        if (metrics && (strcmp(save, metrics) == 0 || hw_same_file(save, metrics))) {
            return hw_fail("--save and --metrics are the same file (%s); give each its own", save);
        }
        // No other live run writes it (two runs resuming from one checkpoint and saving it).
        if (hw_output_claim("--save", save) != HW_OK) return HW_ERR;
        struct stat st;
        int resumed_from_it = config->resume_path && hw_same_file(save, config->resume_path);
        if (stat(save, &st) == 0 && !resumed_from_it && !config->overwrite) {
            return hw_fail("--save %s already exists and this run did not --resume from it; give --overwrite to "
                           "replace it, or another path",
                           save);
        }
    }
    if (metrics) {
        if (check_not_an_input("--metrics", metrics, config) != HW_OK ||
            hw_output_check("--metrics", metrics, 0) != HW_OK) {
            return HW_ERR;
        }
        if (hw_same_file(metrics, config->resume_path)) {
            return hw_fail("--metrics %s is the checkpoint given to --resume: it would be destroyed", metrics);
        }
        if (hw_output_claim("--metrics", metrics) != HW_OK) return HW_ERR;
    }
    return HW_OK;
}
