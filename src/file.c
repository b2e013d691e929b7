// file: only regular files are read, and each with a size limit; the files a command writes are
// checked before it works (include/hw/file.h).
#include "hw/file.h"

#include "hw/err.h"
#include "hw/procfs.h"
#include "hw/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
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

// ---- outputs ----

int hw_same_file(const char *a, const char *b) {
    struct stat sa, sb;
    if (!a || !b || stat(a, &sa) != 0 || stat(b, &sb) != 0) return 0;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

void hw_path_folder(const char *path, char *buf, size_t cap) {
    const char *slash = strrchr(path, '/');
    if (!slash) {
        snprintf(buf, cap, ".");
    } else if (slash == path) {
        snprintf(buf, cap, "/");
    } else {
        snprintf(buf, cap, "%.*s", (int)(slash - path), path);
    }
}

// An immutable or append-only file (chattr +i, +a) can be neither replaced nor rewritten.
static int is_immutable(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) return 0;
    int flags = 0;
    int locked = ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0 && (flags & (FS_IMMUTABLE_FL | FS_APPEND_FL));
    close(fd);
    return locked;
}

int hw_output_check(const char *flag, const char *path, int by_rename) {
    if (!path || !*path) return hw_fail("%s needs a file name, got an empty one", flag);
    char folder[PATH_MAX], probe[PATH_MAX];
    hw_path_folder(path, folder, sizeof folder);
    struct stat st, dir;
    int exists = stat(path, &st) == 0;
    if (!exists && errno != ENOENT) return hw_fail_errno(errno, "%s: cannot use '%s'", flag, path);
    if (exists && S_ISDIR(st.st_mode)) return hw_fail("%s %s is a folder; give a file name", flag, path);
    if (exists && !S_ISREG(st.st_mode)) return hw_fail("%s %s exists and is not a regular file", flag, path);
    if (stat(folder, &dir) != 0) return hw_fail_errno(errno, "%s %s: its folder %s", flag, path, folder);
    if (!S_ISDIR(dir.st_mode)) return hw_fail("%s %s: %s is not a folder", flag, path, folder);
    if (exists && is_immutable(path)) {
        return hw_fail("%s %s is immutable or append-only (chattr +i or +a): it cannot be replaced", flag, path);
    }
    if (exists && by_rename && (dir.st_mode & S_ISVTX) && st.st_uid != geteuid() && dir.st_uid != geteuid() &&
        !hw_process_has_cap_fowner()) {
        return hw_fail("%s %s belongs to another user (uid %d) in the sticky folder %s, where only its owner may "
                       "replace it; choose another path",
                       flag, path, (int)st.st_uid, folder);
    }
    if (exists && !by_rename && access(path, W_OK) != 0) {
        return hw_fail_errno(errno, "%s %s cannot be written", flag, path);
    }
    // The longest name the writer creates there, created and removed now: a name too long for the
    // file system, a read-only or full folder fail here, not after the work.
    if (snprintf(probe, sizeof probe, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof probe) {
        return hw_fail("%s %s: the path is too long (its temporary file %s.tmp.%ld would exceed %d bytes)", flag, path,
                       path, (long)getpid(), PATH_MAX - 1);
    }
    // Noted as the save's own temporary file is (hw_shm_temp_note): a SIGKILL between the create
    // and the unlink leaves a file that --clean-shm then finds.
    if (hw_shm_temp_note(probe) != HW_OK) return hw_error_prefix("%s %s", flag, path);
    int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST && unlink(probe) == 0) {
        fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    }
    int err = errno;
    if (fd >= 0) {
        close(fd);
        unlink(probe);
    }
    hw_shm_temp_forget();
    errno = err;
    if (fd < 0 && errno == ENAMETOOLONG) {
        const char *name = strrchr(probe, '/') ? strrchr(probe, '/') + 1 : probe;
        return hw_fail("%s %s: the name is too long for the file system (its temporary file's name, %s, is %zu "
                       "characters; at most %ld)",
                       flag, path, name, strlen(name), pathconf(folder, _PC_NAME_MAX));
    }
    if (fd < 0) return hw_fail_errno(errno, "%s %s: cannot write in the folder %s", flag, path, folder);
    return HW_OK;
}
