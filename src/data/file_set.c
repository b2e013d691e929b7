// file_set: the files of one dataset written under temporary names and renamed into place only
// once all are complete (src/data/sparse_io.h), so that a failure leaves the old dataset whole.
#include "sparse_io.h"

#include "hw/err.h"
#include "hw/shm.h"

#include <errno.h>
#include <stdio.h>
#include <unistd.h>

int file_set_add(file_set *set, const char *path, int *index) {
    if (set->count == FILE_SET_MAX) return hw_fail("cannot write %s: too many files in one set", path);
    int i = set->count;
    if (snprintf(set->path[i], sizeof set->path[i], "%s", path) >= (int)sizeof set->path[i] ||
        snprintf(set->temp[i], sizeof set->temp[i], "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof set->temp[i]) {
        return hw_fail("cannot create %s: the path is too long", path);
    }
    // Complete temporary files of a writer that was killed between two files stay behind; the
    // next writer of the same names removes them.
    hw_shm_temp_sweep(path, NULL);
    set->count++;
    *index = i;
    return HW_OK;
}

int file_set_begin(file_set *set, int index) { return hw_shm_temp_note(set->temp[index]); }

void file_set_end(file_set *set, int index) {
    (void)set;
    (void)index;
    hw_shm_temp_forget();
}

int file_set_commit(file_set *set, int status) {
    int i = 0;
    for (; status == HW_OK && i < set->count; i++) {
        if (rename(set->temp[i], set->path[i]) != 0) {
            status = hw_fail_errno(errno, "cannot write %s (renaming %s)", set->path[i], set->temp[i]);
            break;
        }
    }
    // On a failure, every file not yet renamed; the ones renamed before a failed rename are the
    // new dataset's and stay (a rename within one folder fails only on a broken file system).
    for (; i < set->count; i++) unlink(set->temp[i]);
    return status;
}
