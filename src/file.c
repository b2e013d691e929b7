// file: only regular files are read, and each with a size limit (include/hw/file.h).
#include "hw/file.h"

#include "hw/err.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

int hw_open_regular(const char *path, const char *what, uint64_t max_bytes, uint64_t *size) {
    // O_NONBLOCK: opening a FIFO for reading would wait for a writer; the check below refuses it.
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        hw_fail_errno(errno, "cannot open %s %s", what, path);
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        hw_fail_errno(errno, "cannot open %s %s", what, path);
    } else if (S_ISDIR(st.st_mode)) {
        hw_fail("%s %s is a folder, expected a file", what, path);
    } else if (!S_ISREG(st.st_mode)) {
        hw_fail("%s %s is not a regular file (a device, FIFO or socket); give a file", what, path);
    } else if (max_bytes > 0 && (uint64_t)st.st_size > max_bytes) {
        hw_fail("%s %s is %llu bytes, more than the limit of %llu bytes for a %s", what, path,
                (unsigned long long)st.st_size, (unsigned long long)max_bytes, what);
    } else {
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
        if (size) *size = (uint64_t)st.st_size;
        return fd;
    }
    close(fd);
    return -1;
}

FILE *hw_fopen_regular(const char *path, const char *what, uint64_t max_bytes, uint64_t *size) {
    int fd = hw_open_regular(path, what, max_bytes, size);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        hw_fail_errno(errno, "cannot open %s %s", what, path);
        close(fd);
    }
    return f;
}
