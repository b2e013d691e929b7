// Helpers shared by the tests: temporary folders and files (the data module's tests first), the
// real-data mirror.
#ifndef HW_TESTS_DATA_UTIL_H
#define HW_TESTS_DATA_UTIL_H

#include "hw/data.h"

#include <criterion/criterion.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// A fresh folder under $TMPDIR (or /tmp); the test removes it with rm_tree.
static inline void make_temp_dir(char *out, size_t cap) {
    const char *base = getenv("TMPDIR");
    snprintf(out, cap, "%s/hw-data-test-XXXXXX", base && base[0] ? base : "/tmp");
    cr_assert_not_null(mkdtemp(out), "mkdtemp %s", out);
}

static inline int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static inline void rm_tree(const char *dir) { nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

static inline void write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "cannot create %s", path);
    cr_assert_eq(fwrite(data, 1, n, f), n);
    cr_assert_eq(fclose(f), 0);
}

// A fresh file holding text: path a template ending in XXXXXX, which mkstemp rewrites in place.
static inline void write_temp_file(char *path, const char *text) {
    int fd = mkstemp(path);
    cr_assert(fd >= 0, "mkstemp %s", path);
    const size_t n = strlen(text);
    cr_assert_eq(write(fd, text, n), (ssize_t)n);
    cr_assert_eq(close(fd), 0);
}

// Reads a whole file into a malloc'ed buffer; *n gets its size.
static inline uint8_t *read_bytes(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)size + 1);
    cr_assert_eq(fread(buf, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    *n = (size_t)size;
    return buf;
}

// A small dataset with a recognisable pattern: pixel j of image i is (i * 7 + j) % 256.
static inline void make_pattern_dataset(hw_dataset *ds, int64_t n, int h, int w, int n_classes) {
    memset(ds, 0, sizeof *ds);
    ds->n = n;
    ds->channels = 1;
    ds->height = h;
    ds->width = w;
    ds->n_classes = n_classes;
    ds->images = malloc((size_t)(n * h * w));
    ds->labels = malloc((size_t)n);
    for (int64_t i = 0; i < n; i++) {
        for (int j = 0; j < h * w; j++) ds->images[i * h * w + j] = (uint8_t)((i * 7 + j) % 256);
        ds->labels[i] = (uint8_t)(i % n_classes);
    }
}

// The folder with the real datasets (mnist/, fashion-mnist/): $HOGWILD_DATA_MIRROR, else the
// shared folder beside the checkout as CI lays it out; NULL when none is there.
static inline const char *real_data_dir(void) {
    static char found[1024];
    const char *candidates[] = {getenv("HOGWILD_DATA_MIRROR"), "../shared/data", "/work/shared/data"};
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
        if (!candidates[i] || !candidates[i][0]) continue;
        snprintf(found, sizeof found, "%s/mnist/train-labels-idx1-ubyte.gz", candidates[i]);
        // Absolute, because the fetch tests turn it into file:// URLs.
        if (access(found, R_OK) == 0 && realpath(candidates[i], found)) return found;
    }
    return NULL;
}

#endif
