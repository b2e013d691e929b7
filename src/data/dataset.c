// dataset: opening a dataset folder (IDX files or image folders), statistics, freeing.
#include "hw/data.h"
#include "hw/err.h"
#include "hw/option.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const idx_names[4] = {
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
};

static int is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && !S_ISDIR(st.st_mode);
}

// The path of one of the four IDX files in dir: name.gz (what `hogwild download` leaves, md5
// checked) or else the plain name. Returns 0 when neither is there.
static int find_idx(const char *dir, const char *name, char *path, size_t cap) {
    snprintf(path, cap, "%s/%s.gz", dir, name);
    if (is_file(path)) return 1;
    snprintf(path, cap, "%s/%s", dir, name);
    return is_file(path);
}

static int open_idx_pair(const char *dir, hw_dataset *train, hw_dataset *test) {
    char paths[4][1024];
    for (int i = 0; i < 4; i++) find_idx(dir, idx_names[i], paths[i], sizeof paths[i]);
    if (hw_idx_load(train, paths[0], paths[1]) != HW_OK) return HW_ERR;
    if (hw_idx_load(test, paths[2], paths[3]) != HW_OK) {
        hw_dataset_free(train);
        return HW_ERR;
    }
    if (train->height != test->height || train->width != test->width) {
        hw_fail("%s: test images are %d x %d but the training images (%s) are %d x %d", test->source, test->height,
                test->width, train->source, train->height, train->width);
        hw_dataset_free(train);
        hw_dataset_free(test);
        return HW_ERR;
    }
    return HW_OK;
}

// Every class folder (not starting with '.') of `a` must also be one in `b`; names the first that is not.
static int classes_within(const char *a, const char *b) {
    DIR *d = opendir(a);
    if (!d) return hw_fail_errno(errno, "cannot open image folder %s", a);
    int rc = HW_OK;
    char path[2048];
    for (struct dirent *e; rc == HW_OK && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s", a, e->d_name);
        if (!is_dir(path)) continue;
        snprintf(path, sizeof path, "%s/%s", b, e->d_name);
        if (!is_dir(path)) {
            rc = hw_fail("%s/%s has no matching class folder %s: train/ and test/ need the same classes", a, e->d_name,
                         path);
        }
    }
    closedir(d);
    return rc;
}

static int open_image_folders(const char *dir, int height, int width, hw_dataset *train, hw_dataset *test) {
    char path[1024];
    snprintf(path, sizeof path, "%s/train", dir);
    if (hw_image_folder_load(train, path, height, width) != HW_OK) return HW_ERR;
    char test_path[1024];
    snprintf(test_path, sizeof test_path, "%s/test", dir);
    if (classes_within(path, test_path) != HW_OK || classes_within(test_path, path) != HW_OK ||
        hw_image_folder_load(test, test_path, train->height, train->width) != HW_OK) {
        hw_dataset_free(train);
        return HW_ERR;
    }
    return HW_OK;
}

int hw_dataset_open(const char *dir, hw_dataset *train, hw_dataset *test) {
    return hw_dataset_open_resized(dir, 0, 0, train, test);
}

int hw_dataset_open_resized(const char *dir, int height, int width, hw_dataset *train, hw_dataset *test) {
    memset(train, 0, sizeof *train);
    memset(test, 0, sizeof *test);
    struct stat st;
    if (stat(dir, &st) != 0) {
        if (errno != ENOENT)
            return hw_fail_errno(errno, "cannot open data folder %s%s", dir, hw_option_hint(HW_OPTION_DATA));
        return hw_fail("data folder %s%s does not exist", dir, hw_option_hint(HW_OPTION_DATA));
    }
    if (!S_ISDIR(st.st_mode)) return hw_fail("data folder %s%s is not a folder", dir, hw_option_hint(HW_OPTION_DATA));

    char path[1024];
    int found = 0;
    char missing[512] = "";
    for (int i = 0; i < 4; i++) {
        if (find_idx(dir, idx_names[i], path, sizeof path)) {
            found++;
        } else {
            size_t used = strlen(missing);
            snprintf(missing + used, sizeof missing - used, "%s%s[.gz]", used ? ", " : "", idx_names[i]);
        }
    }
    if (found == 4 && height > 0) {
        return hw_fail("data folder %s holds IDX files, whose images all have one size; resizing%s applies to "
                       "train/ and test/ image folders",
                       dir, hw_option_hint(HW_OPTION_RESIZE));
    }
    if (found == 4) return open_idx_pair(dir, train, test);
    if (found > 0) return hw_fail("data folder %s%s is missing %s", dir, hw_option_hint(HW_OPTION_DATA), missing);

    char train_dir[1024], test_dir[1024];
    snprintf(train_dir, sizeof train_dir, "%s/train", dir);
    snprintf(test_dir, sizeof test_dir, "%s/test", dir);
    if (is_dir(train_dir) && is_dir(test_dir)) return open_image_folders(dir, height, width, train, test);
    if (is_dir(train_dir) || is_dir(test_dir)) {
        return hw_fail("data folder %s%s has %s but no %s image folder", dir, hw_option_hint(HW_OPTION_DATA),
                       is_dir(train_dir) ? "train/" : "test/", is_dir(train_dir) ? "test/" : "train/");
    }
    return hw_fail("data folder %s%s holds neither the four MNIST files (train-images-idx3-ubyte.gz, ...) nor "
                   "train/ and test/ image folders",
                   dir, hw_option_hint(HW_OPTION_DATA));
}

void hw_dataset_free(hw_dataset *ds) {
    if (!ds) return;
    free(ds->images);
    free(ds->labels);
    memset(ds, 0, sizeof *ds);
}

hw_normalize hw_dataset_stats(const hw_dataset *ds) {
    // A histogram of the byte values gives the exact sums in one pass without float drift.
    uint64_t counts[256] = {0};
    size_t total = (size_t)ds->n * (size_t)ds->channels * (size_t)ds->height * (size_t)ds->width;
    for (size_t i = 0; i < total; i++) counts[ds->images[i]]++;
    double sum = 0, sum_sq = 0;
    for (int v = 0; v < 256; v++) {
        double x = v / 255.0;
        sum += (double)counts[v] * x;
        sum_sq += (double)counts[v] * x * x;
    }
    hw_normalize out = {0.0f, 1.0f};
    if (total == 0) return out;
    double mean = sum / (double)total;
    double var = sum_sq / (double)total - mean * mean;
    out.mean = (float)mean;
    out.std = var > 1e-12 ? (float)sqrt(var) : 1.0f;
    return out;
}
