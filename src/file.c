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
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
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

// ---- a file written whole ----

// The stream's writes, kept: the first failure's errno stays for the message, as stdio's own
// error flag does not say why.
static ssize_t whole_file_write(void *cookie, const char *buf, size_t size) {
    hw_whole_file *w = cookie;
    size_t done = 0;
    while (done < size) {
        ssize_t n = write(w->fd, buf + done, size - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            if (w->error == 0) w->error = n < 0 ? errno : ENOSPC;
            errno = w->error;
            return -1;
        }
        done += (size_t)n;
    }
    return (ssize_t)size;
}

static int whole_file_close(void *cookie) {
    (void)cookie;  // the descriptor is closed by hw_whole_file_commit, after its sync
    return 0;
}

int hw_whole_file_open(hw_whole_file *w, const char *path, const char *what) {
    memset(w, 0, sizeof *w);
    w->fd = -1;
    if (snprintf(w->path, sizeof w->path, "%s", path) >= (int)sizeof w->path ||
        snprintf(w->temp, sizeof w->temp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof w->temp) {
        return hw_fail("cannot write %s %s: the path is too long", what, path);
    }
    if (hw_shm_temp_note(w->temp) != HW_OK) return hw_error_prefix("cannot write %s %s", what, path);
    // O_EXCL: never through a file or link already there; a leftover of a dead run with this pid goes first.
    w->fd = open(w->temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (w->fd < 0 && errno == EEXIST && unlink(w->temp) == 0) {
        w->fd = open(w->temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    }
    if (w->fd < 0) {
        int err = errno;
        hw_shm_temp_forget();
        return hw_fail_errno(err, "cannot write %s %s: cannot create %s", what, path, w->temp);
    }
    w->f = fopencookie(w, "w", (cookie_io_functions_t){.write = whole_file_write, .close = whole_file_close});
    if (!w->f) {
        int err = errno;
        close(w->fd);
        unlink(w->temp);
        hw_shm_temp_forget();
        return hw_fail_errno(err, "cannot write %s %s", what, path);
    }
    return HW_OK;
}

int hw_whole_file_commit(hw_whole_file *w, int status, const char *what) {
    int err = 0;
    if (fflush(w->f) != 0 || ferror(w->f)) err = w->error ? w->error : EIO;
    fclose(w->f);
    w->f = NULL;
    if (status == HW_OK && err == 0 && fsync(w->fd) != 0 && errno != EINVAL) err = errno;
    if (close(w->fd) != 0 && err == 0) err = errno;
    w->fd = -1;
    if (status == HW_OK && err == 0 && rename(w->temp, w->path) != 0) err = errno;
    if (status != HW_OK || err != 0) unlink(w->temp);
    hw_shm_temp_forget();
    if (status != HW_OK) return HW_ERR;
    if (err != 0) {
        return hw_fail("cannot write %s %s: %s%s; the previous file, if any, is unchanged", what, w->path,
                       strerror(err), err == EFBIG ? " (the file size limit, ulimit -f)" : "");
    }
    return HW_OK;
}

// ---- one writer per output ----

enum { CLAIMS_MAX = 8 };
static char claim_paths[CLAIMS_MAX][128];
static pid_t claim_owner;
static int n_claims;

// A normal exit of the claimer removes its claim files (its lock goes with its descriptors).
static void claims_remove(void) {
    if (getpid() != claim_owner) return;  // a forked worker leaves them to the parent
    for (int i = 0; i < n_claims; i++) unlink(claim_paths[i]);
}

// The claim file's name for `path`: by its folder's device and inode and its name's FNV-1a hash.
static int claim_name(const char *path, char *buf, size_t cap) {
    char folder[PATH_MAX];
    hw_path_folder(path, folder, sizeof folder);
    struct stat dir;
    if (stat(folder, &dir) != 0) return -1;
    const char *slash = strrchr(path, '/');
    uint64_t hash = 14695981039346656037ull;
    for (const unsigned char *c = (const unsigned char *)(slash ? slash + 1 : path); *c; c++) {
        hash = (hash ^ *c) * 1099511628211ull;
    }
    snprintf(buf, cap, "/dev/shm/hogwild-claim-%llx-%llx-%016llx", (unsigned long long)dir.st_dev,
             (unsigned long long)dir.st_ino, (unsigned long long)hash);
    return 0;
}

int hw_output_claim(const char *flag, const char *path) {
    char name[128];
    if (claim_name(path, name, sizeof name) != 0) return HW_OK;  // the output check names the folder
    if (n_claims == CLAIMS_MAX) return hw_fail("%s %s: too many outputs claimed", flag, path);
    for (int attempt = 0; attempt < 8; attempt++) {
        int fd = open(name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
        if (fd < 0 && (errno == ENOENT || errno == EACCES || errno == EROFS)) return HW_OK;  // no /dev/shm to use
        if (fd < 0) return hw_fail_errno(errno, "%s %s: cannot claim it for this run (%s)", flag, path, name);
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            char text[32] = "";
            ssize_t got = pread(fd, text, sizeof text - 1, 0);
            text[got > 0 ? got : 0] = '\0';
            close(fd);
            return hw_fail("%s %s is being written by another run, process %ld, which is still alive; wait for it to "
                           "end, or choose another path",
                           flag, path, strtol(text, NULL, 10));
        }
        // Locked; but a claimer that ended meanwhile may have removed this name: then the lock is on
        // a file nobody else sees, and the claim is made again.
        struct stat held, named;
        if (fstat(fd, &held) != 0 || stat(name, &named) != 0 || held.st_ino != named.st_ino) {
            close(fd);
            continue;
        }
        char text[32];
        int n = snprintf(text, sizeof text, "%ld\n", (long)getpid());
        if (ftruncate(fd, 0) != 0 || pwrite(fd, text, (size_t)n, 0) != n) {
            int err = errno;
            close(fd);
            return hw_fail_errno(err, "%s %s: cannot claim it for this run (%s)", flag, path, name);
        }
        if (n_claims == 0) atexit(claims_remove);
        claim_owner = getpid();
        snprintf(claim_paths[n_claims++], sizeof claim_paths[0], "%s", name);
        return HW_OK;  // fd stays open: the claim lasts as long as this process and its workers
    }
    return hw_fail("%s %s: cannot claim it for this run: %s keeps changing", flag, path, name);
}
