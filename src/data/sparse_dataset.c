// sparse_dataset: a folder holding a sparse dataset, libsvm text or ratings, by its file names
// (include/hw/sparse_data.h lists them), opened as a training and a test set that agree.
#include "sparse_io.h"

#include "hw/err.h"
#include "hw/file.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct {
    const char *train, *test;
    hw_sparse_kind kind;
    hw_ratings_layout layout;  // for ratings
} sparse_layout;

static const sparse_layout layouts[] = {
    {"train.libsvm", "test.libsvm", HW_SPARSE_LIBSVM, 0},
    {"train.tsv", "test.tsv", HW_SPARSE_RATINGS, HW_RATINGS_TSV},
    {"train.dat", "test.dat", HW_SPARSE_RATINGS, HW_RATINGS_DAT},
    {"train.csv", "test.csv", HW_SPARSE_RATINGS, HW_RATINGS_CSV},
};
enum { N_LAYOUTS = sizeof layouts / sizeof layouts[0] };

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

// How many of dir/name and dir/name.gz exist (0, 1 or 2); *path gets the one found (the plain
// name when neither is).
static int find_file(const char *dir, const char *name, char *path, size_t cap) {
    snprintf(path, cap, "%s/%s.gz", dir, name);
    int gz = exists(path);
    char plain[4096];
    snprintf(plain, sizeof plain, "%s/%s", dir, name);
    int found = exists(plain);
    if (found || !gz) snprintf(path, cap, "%s", plain);
    return gz + found;
}

// Whether any name of layout i (plain or gzip) is in dir.
static int layout_present(const char *dir, int i) {
    char path[4096];
    return find_file(dir, layouts[i].train, path, sizeof path) + find_file(dir, layouts[i].test, path, sizeof path) > 0;
}

hw_sparse_kind hw_sparse_dataset_kind(const char *dir) {
    int present = -1;
    for (int i = 0; i < N_LAYOUTS; i++) {
        if (!layout_present(dir, i)) continue;
        if (present >= 0) return HW_SPARSE_MIXED;
        present = i;
    }
    return present < 0 ? HW_SPARSE_NONE : layouts[present].kind;
}

const char *hw_sparse_dataset_name_of(const char *dir, const char *path) {
    char folder[PATH_MAX], real_folder[PATH_MAX], real_dir[PATH_MAX];
    hw_path_folder(path, folder, sizeof folder);
    if (!dir || !realpath(folder, real_folder) || !realpath(dir, real_dir) || strcmp(real_folder, real_dir) != 0) {
        return NULL;
    }
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    for (int i = 0; i < N_LAYOUTS; i++) {
        const char *const names[2] = {layouts[i].train, layouts[i].test};
        for (int k = 0; k < 2; k++) {
            size_t n = strlen(names[k]);
            if (strncmp(base, names[k], n) == 0 && (base[n] == '\0' || strcmp(base + n, ".gz") == 0)) return names[k];
        }
    }
    return NULL;
}

// The one file of `name` in dir (plain or gzip) into path; fails when there is none or both.
static int one_file(const char *dir, const char *name, char *path, size_t cap) {
    int found = find_file(dir, name, path, cap);
    if (found == 0)
        return hw_fail("sparse dataset %s: no %s (nor %s.gz); a dataset holds both its train and test files", dir, name,
                       name);
    if (found == 2) {
        return hw_fail("sparse dataset %s holds both %s and %s.gz: remove one, so that it is clear which to read", dir,
                       name, name);
    }
    return HW_OK;
}

static int open_libsvm(const char *train_path, const char *test_path, int64_t dim, hw_sparse_set *train,
                       hw_sparse_set *test) {
    label_summary train_labels, test_labels;
    if (libsvm_read(train, &train_labels, train_path, dim) != HW_OK) return HW_ERR;
    if (libsvm_read(test, &test_labels, test_path, dim) != HW_OK) {
        hw_sparse_set_free(train);
        return HW_ERR;
    }
    label_summary_merge(&train_labels, &test_labels);
    label_summary_apply(&train_labels, train, 1);
    label_summary_apply(&train_labels, test, 1);
    int64_t shared = train->dim > test->dim ? train->dim : test->dim;
    train->dim = test->dim = shared;
    return HW_OK;
}

static int open_ratings(const char *train_path, const char *test_path, hw_ratings_layout layout, int64_t dim,
                        hw_sparse_set *train, hw_sparse_set *test) {
    if (hw_ratings_load(train, test, train_path, test_path, layout) != HW_OK) return HW_ERR;
    if (dim == 0) return HW_OK;
    if (dim < train->dim) {
        hw_fail("%s and %s hold %lld users and %lld items, %lld features: more than the dimension %lld", train_path,
                test_path, (long long)train->n_users, (long long)train->n_items, (long long)train->dim, (long long)dim);
        hw_sparse_set_free(train);
        hw_sparse_set_free(test);
        return HW_ERR;
    }
    train->dim = test->dim = dim;
    return HW_OK;
}

int hw_sparse_dataset_open_dim(const char *dir, int64_t dim, hw_sparse_set *train, hw_sparse_set *test) {
    memset(train, 0, sizeof *train);
    memset(test, 0, sizeof *test);
    if (dim < 0)
        return hw_fail("sparse dataset %s: the dimension must be positive (or 0: from the data), got %lld", dir,
                       (long long)dim);
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) return hw_fail("sparse dataset folder %s does not exist", dir);
    int chosen = -1;
    for (int i = 0; i < N_LAYOUTS; i++) {
        if (!layout_present(dir, i)) continue;
        if (chosen >= 0) {
            return hw_fail("%s holds files of two sparse layouts (%s and %s): keep one dataset per folder", dir,
                           layouts[chosen].train, layouts[i].train);
        }
        chosen = i;
    }
    if (chosen < 0) {
        return hw_fail("%s holds no sparse dataset: expected train.libsvm and test.libsvm, or ratings as train.tsv and "
                       "test.tsv (tabs), train.dat and test.dat ('::') or train.csv and test.csv (each may be .gz)",
                       dir);
    }
    const sparse_layout *l = &layouts[chosen];
    char train_path[4096], test_path[4096];
    if (one_file(dir, l->train, train_path, sizeof train_path) != HW_OK) return HW_ERR;
    if (one_file(dir, l->test, test_path, sizeof test_path) != HW_OK) return HW_ERR;
    if (l->kind == HW_SPARSE_LIBSVM) return open_libsvm(train_path, test_path, dim, train, test);
    return open_ratings(train_path, test_path, l->layout, dim, train, test);
}

int hw_sparse_dataset_open(const char *dir, hw_sparse_set *train, hw_sparse_set *test) {
    return hw_sparse_dataset_open_dim(dir, 0, train, test);
}
