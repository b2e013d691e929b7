// shm: shared storage for forked workers, and the two sharing strategies of torch.multiprocessing.
//
// Names of the file_system strategy are kept in a fixed table of this process (no malloc), so
// that hw_shm_unlink_all can run in a signal handler. Each entry remembers the pid that created
// it: a forked worker inherits the table but never unlinks the parent's names, whatever exit path
// it takes (exit() runs the inherited atexit handler, a signal runs the inherited handler).
#include "hw/shm.h"

#include "hw/err.h"
#include "hw/procfs.h"
#include "hw/signals.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

// Where glibc's shm_open keeps its names on Linux. unlink() of the full path is what the signal
// handler calls: it is async-signal-safe, shm_unlink is not on the POSIX list.
#define SHM_DIR     "/dev/shm"
#define NAME_PREFIX "hogwild-"

static const char *const strategy_names[] = {"file_descriptor", "file_system"};
enum { N_STRATEGIES = 2 };

static hw_sharing_strategy current_strategy = HW_SHARING_FILE_DESCRIPTOR;

// ---- the live names ----

enum { LIVE_CAP = 64, PATH_CAP = 96 };
enum { SLOT_FREE = 0, SLOT_FILLING = 1, SLOT_LIVE = 2 };

static _Atomic int slot_state[LIVE_CAP];
static pid_t slot_owner[LIVE_CAP];
static char slot_path[LIVE_CAP][PATH_CAP];  // "/dev/shm/hogwild-<pid>-<n>"

static atomic_uint name_counter;
static atomic_flag exit_hooks_installed = ATOMIC_FLAG_INIT;

// Claims a slot for `path`; -1 when the table is full.
static int live_add(const char *path) {
    for (int i = 0; i < LIVE_CAP; i++) {
        int expected = SLOT_FREE;
        if (atomic_compare_exchange_strong(&slot_state[i], &expected, SLOT_FILLING)) {
            slot_owner[i] = getpid();
            snprintf(slot_path[i], PATH_CAP, "%s", path);
            atomic_store(&slot_state[i], SLOT_LIVE);
            return i;
        }
    }
    return -1;
}

// Takes the slot of `path` out of the table if this process owns it; 1 when it did (the caller
// then unlinks), 0 when the name is not ours to unlink (another process's, or already unlinked).
static int live_take(const char *path) {
    pid_t self = getpid();
    for (int i = 0; i < LIVE_CAP; i++) {
        if (atomic_load(&slot_state[i]) != SLOT_LIVE || slot_owner[i] != self) continue;
        if (strcmp(slot_path[i], path) != 0) continue;
        int expected = SLOT_LIVE;
        return atomic_compare_exchange_strong(&slot_state[i], &expected, SLOT_FREE);
    }
    return 0;
}

void hw_shm_unlink_all(void) {
    int saved_errno = errno;
    pid_t self = getpid();
    for (int i = 0; i < LIVE_CAP; i++) {
        if (atomic_load(&slot_state[i]) != SLOT_LIVE || slot_owner[i] != self) continue;
        char path[PATH_CAP];
        memcpy(path, slot_path[i], PATH_CAP);
        int expected = SLOT_LIVE;
        // Whoever wins the exchange (this handler, or hw_shm_close) unlinks, once.
        if (atomic_compare_exchange_strong(&slot_state[i], &expected, SLOT_FREE)) unlink(path);
    }
    errno = saved_errno;
}

// ---- temporary files: one a process is writing now (a checkpoint's "<path>.tmp.<pid>") ----
//
// Noted before the file is created and forgotten once it is renamed or removed, so that every exit
// that runs code removes it (hw_shm_remove_all). SIGKILL runs nothing: the note is also a record,
// /dev/shm/hogwild-<pid>-tmp, a symbolic link to the file, which --clean-shm follows once the pid
// is gone. One at a time: a process writes one checkpoint at a time.

enum { TEMP_FREE = 0, TEMP_LIVE = 2 };
static _Atomic int temp_state;
static pid_t temp_owner;
static char temp_path[PATH_MAX];    // absolute
static char temp_record[PATH_CAP];  // /dev/shm/hogwild-<pid>-tmp
#define TEMP_RECORD_SUFFIX "-tmp"

static void install_exit_hooks(void);

int hw_shm_temp_note(const char *path) {
    if (atomic_load(&temp_state) == TEMP_LIVE && temp_owner == getpid()) {
        return hw_fail("a temporary file is noted already");
    }
    // Absolute, for --clean-shm, which runs anywhere: the folder resolved, the name as given.
    char folder[PATH_MAX], real[PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(folder, sizeof folder, ".");
    else if (slash == path) snprintf(folder, sizeof folder, "/");
    else snprintf(folder, sizeof folder, "%.*s", (int)(slash - path), path);
    if (!realpath(folder, real)) return hw_fail_errno(errno, "cannot resolve the folder of %s", path);
    if (snprintf(temp_path, sizeof temp_path, "%s/%s", strcmp(real, "/") == 0 ? "" : real, slash ? slash + 1 : path) >=
        (int)sizeof temp_path) {
        return hw_fail("%s: the path is too long", path);
    }
    snprintf(temp_record, sizeof temp_record, SHM_DIR "/" NAME_PREFIX "%ld" TEMP_RECORD_SUFFIX, (long)getpid());
    temp_owner = getpid();
    install_exit_hooks();
    atomic_store(&temp_state, TEMP_LIVE);
    // Best effort: without /dev/shm the exits that run code still remove the file.
    if (symlink(temp_path, temp_record) != 0 && errno == EEXIST && unlink(temp_record) == 0) {
        if (symlink(temp_path, temp_record) != 0) temp_record[0] = '\0';
    }
    return HW_OK;
}

void hw_shm_temp_forget(void) {
    int expected = TEMP_LIVE;
    if (temp_owner != getpid() || !atomic_compare_exchange_strong(&temp_state, &expected, TEMP_FREE)) return;
    if (temp_record[0]) unlink(temp_record);
}

// Async-signal-safe: the death paths call it.
static void temp_remove(void) {
    int expected = TEMP_LIVE;
    if (temp_owner != getpid() || !atomic_compare_exchange_strong(&temp_state, &expected, TEMP_FREE)) return;
    unlink(temp_path);
    if (temp_record[0]) unlink(temp_record);
}

void hw_shm_remove_all(void) {
    int saved_errno = errno;
    hw_shm_unlink_all();
    temp_remove();
    errno = saved_errno;
}

// ---- exit paths of a process that holds names ----

static void remove_all_at_exit(void) { hw_shm_remove_all(); }

// At the first file_system open or temporary file: the names are unlinked at exit and, through
// the clean-up that src/proc/signals.c runs, at a stop signal while a run trains (the names) and
// before a death by any signal whose default action is death (the names and the file).
static void install_exit_hooks(void) {
    if (atomic_flag_test_and_set(&exit_hooks_installed)) return;
    atexit(remove_all_at_exit);
    hw_signals_set_cleanup(hw_shm_unlink_all, hw_shm_remove_all);
    hw_signals_cleanup_on_death();
}

// ---- strategies ----

const char *const *hw_sharing_strategies(int *count) {
    if (count) *count = N_STRATEGIES;
    return strategy_names;
}

const char *hw_sharing_strategy_get(void) { return strategy_names[current_strategy]; }

int hw_sharing_strategy_set(const char *name) {
    for (int i = 0; i < N_STRATEGIES; i++) {
        if (name && strcmp(name, strategy_names[i]) == 0) {
            current_strategy = (hw_sharing_strategy)i;
            return HW_OK;
        }
    }
    return hw_fail("unknown sharing strategy '%s'; known: %s, %s", name ? name : "(null)", strategy_names[0],
                   strategy_names[1]);
}

// ---- sizes and their limits ----

// "1.5 GiB (1610612736 bytes)"; with exact = 0 just "1.5 GiB".
static void format_size(uint64_t bytes, int exact, char *buf, size_t cap) {
    static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double value = (double)bytes;
    int unit = 0;
    while (value >= 1024.0 && unit < 6) {
        value /= 1024.0;
        unit++;
    }
    if (unit == 0) {
        snprintf(buf, cap, "%llu bytes", (unsigned long long)bytes);
    } else if (!exact) {
        snprintf(buf, cap, "%.1f %s", value, units[unit]);
    } else {
        snprintf(buf, cap, "%.1f %s (%llu bytes)", value, units[unit], (unsigned long long)bytes);
    }
}

static void format_bytes(uint64_t bytes, char *buf, size_t cap) { format_size(bytes, 1, buf, cap); }

static const char *const more_memory_hint =
    "use a smaller model or batch, or give the machine or container more memory";

static const char *what_to_try(hw_sharing_strategy strategy) {
    if (strategy == HW_SHARING_FILE_SYSTEM) {
        return "try the file_descriptor strategy (it does not use /dev/shm), give the container a larger "
               "/dev/shm (docker run --shm-size=2g), or use a smaller model or batch";
    }
    return "try a smaller model or batch, or give the machine or container more memory";
}

// Refuses sizes that cannot work before anything is reserved: 0, more than the machine's (or the
// container's) memory, more than RLIMIT_FSIZE (the kernel would send SIGXFSZ) or RLIMIT_AS.
static int check_size(size_t bytes, hw_sharing_strategy strategy) {
    const char *name = strategy_names[strategy];
    if (bytes == 0) return hw_fail("cannot open 0 bytes of shared memory (%s strategy)", name);
    char asked[64], limit_text[64];
    format_bytes(bytes, asked, sizeof asked);

    long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
    uint64_t ram = pages > 0 && page_size > 0 ? (uint64_t)pages * (uint64_t)page_size : 0;
    if (ram > 0 && (uint64_t)bytes > ram) {
        format_size(ram, 0, limit_text, sizeof limit_text);
        return hw_fail("cannot reserve %s of shared memory with the %s strategy: more than the machine's "
                       "memory, %s; %s",
                       asked, name, limit_text, more_memory_hint);
    }
    uint64_t cgroup = hw_process_cgroup_memory_limit();
    if (cgroup > 0 && (uint64_t)bytes > cgroup) {
        format_size(cgroup, 0, limit_text, sizeof limit_text);
        return hw_fail("cannot reserve %s of shared memory with the %s strategy: more than this container's "
                       "memory limit, %s (cgroup memory.max); %s",
                       asked, name, limit_text, more_memory_hint);
    }
    const struct {
        int resource;
        const char *what;
    } limits[] = {{RLIMIT_FSIZE, "the file size limit (RLIMIT_FSIZE, ulimit -f)"},
                  {RLIMIT_AS, "the address space limit (RLIMIT_AS, ulimit -v)"}};
    for (size_t k = 0; k < sizeof limits / sizeof limits[0]; k++) {
        struct rlimit rl;
        if (getrlimit(limits[k].resource, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
            (uint64_t)bytes > (uint64_t)rl.rlim_cur) {
            format_size((uint64_t)rl.rlim_cur, 0, limit_text, sizeof limit_text);
            return hw_fail("cannot reserve %s of shared memory with the %s strategy: more than %s, %s; raise "
                           "the limit or use a smaller model or batch",
                           asked, name, limits[k].what, limit_text);
        }
    }
    return HW_OK;
}

// The message for a failed reservation (posix_fallocate's error code `err`).
static int fail_reserve(int err, size_t bytes, hw_sharing_strategy strategy) {
    const char *name = strategy_names[strategy];
    char asked[64];
    format_bytes(bytes, asked, sizeof asked);
    if (strategy == HW_SHARING_FILE_SYSTEM && err == ENOSPC) {
        struct statvfs vfs;
        char free_text[64] = "?", size_text[64] = "?";
        if (statvfs(SHM_DIR, &vfs) == 0) {
            format_size((uint64_t)vfs.f_bavail * vfs.f_frsize, 0, free_text, sizeof free_text);
            format_size((uint64_t)vfs.f_blocks * vfs.f_frsize, 0, size_text, sizeof size_text);
        }
        return hw_fail("cannot reserve %s of shared memory with the file_system strategy: " SHM_DIR
                       " is too small (%s free of %s); %s",
                       asked, free_text, size_text, what_to_try(strategy));
    }
    return hw_fail("cannot reserve %s of shared memory with the %s strategy: %s; %s", asked, name, strerror(err),
                   what_to_try(strategy));
}

// ---- open and close ----

// Creates "/hogwild-<pid>-<n>" and records it in the live table, with the signals that unlink
// held back in between, so that no signal can leave a created name unrecorded.
static int create_named(hw_shm *shm) {
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    int fd = -1, err = 0;
    for (int attempt = 0; attempt < 1000; attempt++) {
        unsigned n = atomic_fetch_add(&name_counter, 1);
        snprintf(shm->name, sizeof shm->name, "/" NAME_PREFIX "%ld-%u", (long)getpid(), n);
        fd = shm_open(shm->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd >= 0 || errno != EEXIST) break;  // EEXIST: a leftover of a dead run with our pid
    }
    err = errno;
    if (fd >= 0) {
        char path[PATH_CAP];
        snprintf(path, sizeof path, SHM_DIR "%s", shm->name);
        if (live_add(path) < 0) {
            shm_unlink(shm->name);
            close(fd);
            fd = -1;
            err = 0;
        }
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (fd < 0) {
        char failed_name[sizeof shm->name];
        memcpy(failed_name, shm->name, sizeof failed_name);
        shm->name[0] = '\0';
        if (err == 0) {
            return hw_fail("cannot open shared memory with the file_system strategy: this process already "
                           "holds %d named regions",
                           LIVE_CAP);
        }
        return hw_fail_errno(err, "cannot open shared memory %s with the file_system strategy (shm_open)", failed_name);
    }
    install_exit_hooks();
    shm->fd = fd;
    return HW_OK;
}

static void unlink_named(hw_shm *shm) {
    if (shm->name[0] == '\0') return;
    char path[PATH_CAP];
    snprintf(path, sizeof path, SHM_DIR "%s", shm->name);
    if (live_take(path)) unlink(path);
    shm->name[0] = '\0';
}

int hw_shm_open(hw_shm *shm, size_t bytes) {
    memset(shm, 0, sizeof *shm);
    shm->fd = -1;
    shm->strategy = current_strategy;
    if (check_size(bytes, shm->strategy) != HW_OK) return HW_ERR;

    if (shm->strategy == HW_SHARING_FILE_DESCRIPTOR) {
        shm->fd = memfd_create("hogwild", MFD_CLOEXEC);
        if (shm->fd < 0) {
            return hw_fail_errno(errno, "cannot open shared memory with the file_descriptor strategy (memfd_create)");
        }
    } else if (create_named(shm) != HW_OK) {
        return HW_ERR;
    }

    // Reserve every page now: a /dev/shm that is full or too small fails here with a message,
    // not with SIGBUS in a worker halfway through training.
    int err;
    do {
        err = posix_fallocate(shm->fd, 0, (off_t)bytes);
    } while (err == EINTR);
    if (err != 0) {
        fail_reserve(err, bytes, shm->strategy);
        close(shm->fd);
        unlink_named(shm);
        shm->fd = -1;
        return HW_ERR;
    }
    void *data = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, shm->fd, 0);
    if (data == MAP_FAILED) {
        int mmap_errno = errno;
        close(shm->fd);
        unlink_named(shm);
        shm->fd = -1;
        char asked[64];
        format_bytes(bytes, asked, sizeof asked);
        return hw_fail_errno(mmap_errno, "cannot map %s of shared memory with the %s strategy (mmap)", asked,
                             strategy_names[shm->strategy]);
    }
    shm->data = data;
    shm->bytes = bytes;
    return HW_OK;
}

void hw_shm_close(hw_shm *shm) {
    if (shm->data == NULL) return;
    munmap(shm->data, shm->bytes);
    close(shm->fd);
    unlink_named(shm);  // only when this process created it: a worker's close leaves it alone
    shm->data = NULL;
    shm->bytes = 0;
    shm->fd = -1;
}

// ---- names left by runs that were killed ----

// Parses "hogwild-<pid>-<n>" (a segment) or "hogwild-<pid>-tmp" (a temporary file's record),
// nothing before or after; the pid, or 0 when it is not our pattern. *record: which.
static pid_t parse_our_name(const char *entry, int *record) {
    size_t prefix = strlen(NAME_PREFIX);
    if (strncmp(entry, NAME_PREFIX, prefix) != 0) return 0;
    const char *p = entry + prefix;
    long long pid = 0;
    int digits = 0;
    for (; *p >= '0' && *p <= '9'; p++, digits++) {
        pid = pid * 10 + (*p - '0');
        if (pid > INT32_MAX) return 0;
    }
    if (digits == 0 || *p != '-') return 0;
    *record = strcmp(p, TEMP_RECORD_SUFFIX) == 0;
    if (*record) return (pid_t)pid;
    p++;
    digits = 0;
    for (; *p >= '0' && *p <= '9'; p++) digits++;
    if (digits == 0 || *p != '\0') return 0;
    return (pid_t)pid;
}

// When process `pid` started, in seconds on CLOCK_BOOTTIME; -1 when it cannot be read.
static double process_start_boottime(pid_t pid) {
    unsigned long long start;
    int ended;
    if (hw_process_stat(pid, &start, &ended) != HW_OK) return -1;
    long ticks = sysconf(_SC_CLK_TCK);
    return ticks > 0 ? (double)start / (double)ticks : -1;
}

// When `path` (not what a link points to) was created, in seconds on CLOCK_BOOTTIME: its change
// time (set when it was created and sized; writes through a mapping do not move it), moved from
// the wall clock to the boot clock; -1 when unknown.
static double created_boottime(const char *path) {
    struct stat st;
    struct timespec real, boot;
    if (lstat(path, &st) != 0 || clock_gettime(CLOCK_REALTIME, &real) != 0 ||
        clock_gettime(CLOCK_BOOTTIME, &boot) != 0) {
        return -1;
    }
    double offset = ((double)real.tv_sec + real.tv_nsec * 1e-9) - ((double)boot.tv_sec + boot.tv_nsec * 1e-9);
    return (double)st.st_ctim.tv_sec + st.st_ctim.tv_nsec * 1e-9 - offset;
}

// Whether process `pid`, which made `path`, is gone: dead, or its pid now belongs to a process
// started after `path` was made (reused). *why says which. When unsure, not gone.
static int maker_gone(pid_t pid, const char *path, const char **why) {
    *why = "its process is gone";
    if (kill(pid, 0) != 0 && errno == ESRCH) return 1;
    // The pid is alive (or alive under another user: EPERM). It is the maker only if it started
    // before the name was made; a process started later got the pid by reuse. A 0.1 s margin
    // covers the clock tick of the start time: when unsure, keep.
    double started = process_start_boottime(pid), created = created_boottime(path);
    if (started < 0 || created < 0 || started <= created + 0.1) return 0;
    *why = "its pid now belongs to a process started after it was made (pid reuse)";
    return 1;
}

// Whether `name` is "<base>.tmp.<pid>" for this pid: a checkpoint's temporary file.
static int is_temp_name_of(const char *name, const char *base, pid_t pid) {
    char expected[NAME_MAX + 32];
    int n = snprintf(expected, sizeof expected, "%s.tmp.%ld", base ? base : "", (long)pid);
    if (n < 0 || (size_t)n >= sizeof expected) return 0;
    if (base) return strcmp(name, expected) == 0;
    size_t len = strlen(name), tail = strlen(expected);  // any base: the name ends with ".tmp.<pid>"
    return len > tail && strcmp(name + len - tail, expected) == 0;
}

// A removal: counted and reported, or reported as failed (the first failure kept for the message).
typedef struct {
    FILE *report;
    const char *prefix;  // before each line: "" for --clean-shm's list, "hogwild: " on stderr
    int removed, failed;
    char first_failure[512];
} clean_tally;

static void remove_reported(clean_tally *t, const char *path, const char *what) {
    if (unlink(path) == 0) {
        t->removed++;
        if (t->report) fprintf(t->report, "%sremoved %s: %s\n", t->prefix, path, what);
    } else if (errno != ENOENT) {  // ENOENT: someone else removed it first
        if (t->report) fprintf(t->report, "%scould not remove %s: %s\n", t->prefix, path, strerror(errno));
        if (!t->failed) snprintf(t->first_failure, sizeof t->first_failure, "%s: %s", path, strerror(errno));
        t->failed++;
    }
}

// The record of a temporary file whose process is gone: the file it names (only a regular file
// whose name ends with ".tmp.<that pid>"), then the record.
static void clean_temp_record(clean_tally *t, const char *record, pid_t pid, const char *why) {
    char target[PATH_MAX];
    ssize_t n = readlink(record, target, sizeof target - 1);
    struct stat st;
    if (n > 0) {
        target[n] = '\0';
        const char *slash = strrchr(target, '/');
        char what[256];
        snprintf(what, sizeof what, "a checkpoint's temporary file that process %ld was writing (%s)", (long)pid, why);
        if (slash && is_temp_name_of(slash + 1, NULL, pid) && lstat(target, &st) == 0 && S_ISREG(st.st_mode)) {
            remove_reported(t, target, what);
        }
    }
    if (unlink(record) != 0 && errno != ENOENT && t->report) {
        fprintf(t->report, "could not remove %s: %s\n", record, strerror(errno));
    }
}

int hw_shm_clean(FILE *report, int *removed) {
    if (removed) *removed = 0;
    DIR *dir = opendir(SHM_DIR);
    if (!dir) return hw_fail_errno(errno, "cannot list " SHM_DIR);
    clean_tally t = {.report = report, .prefix = ""};
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL) {
        int record = 0;
        pid_t pid = parse_our_name(entry->d_name, &record);
        if (pid <= 0) continue;
        char path[sizeof SHM_DIR + sizeof entry->d_name];
        snprintf(path, sizeof path, SHM_DIR "/%s", entry->d_name);
        const char *why;
        if (!maker_gone(pid, path, &why)) {
            if (report) {
                fprintf(report, "kept %s: process %ld is alive and may be the run that made it\n", path, (long)pid);
            }
        } else if (record) {
            clean_temp_record(&t, path, pid, why);
        } else {
            remove_reported(&t, path, why);
        }
    }
    closedir(dir);
    if (removed) *removed = t.removed;
    if (t.failed) {
        return hw_fail("removed %d stale name(s) and file(s), could not remove %d: %s", t.removed, t.failed,
                       t.first_failure);
    }
    return HW_OK;
}

// The record (/dev/shm/hogwild-<pid>-tmp) of a dead process's temporary file called `name`, once
// the file is gone: a link to nothing that --clean-shm would otherwise find later.
static void record_remove(pid_t pid, const char *name) {
    char record[PATH_CAP], target[PATH_MAX];
    snprintf(record, sizeof record, SHM_DIR "/" NAME_PREFIX "%ld" TEMP_RECORD_SUFFIX, (long)pid);
    ssize_t n = readlink(record, target, sizeof target - 1);
    if (n <= 0) return;
    target[n] = '\0';
    const char *slash = strrchr(target, '/');
    const char *why;
    if (strcmp(slash ? slash + 1 : target, name) == 0 && maker_gone(pid, record, &why)) unlink(record);
}

int hw_shm_temp_sweep(const char *path, FILE *report) {
    char folder[PATH_MAX];
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (!slash) snprintf(folder, sizeof folder, ".");
    else if (slash == path) snprintf(folder, sizeof folder, "/");
    else snprintf(folder, sizeof folder, "%.*s", (int)(slash - path), path);
    DIR *dir = opendir(folder);
    if (!dir) return HW_OK;  // the output check names a folder that cannot be read
    clean_tally t = {.report = report, .prefix = "hogwild: "};
    size_t base_len = strlen(base);
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL) {
        const char *name = entry->d_name;
        if (strncmp(name, base, base_len) != 0 || strncmp(name + base_len, ".tmp.", 5) != 0) continue;
        long long pid = 0;
        const char *p = name + base_len + 5;
        for (; *p >= '0' && *p <= '9' && pid <= INT32_MAX; p++) pid = pid * 10 + (*p - '0');
        if (*p != '\0' || pid <= 0 || pid > INT32_MAX || pid == getpid()) continue;
        char file[PATH_MAX + NAME_MAX + 2];
        snprintf(file, sizeof file, "%s/%s", folder, name);
        struct stat st;
        const char *why;
        if (lstat(file, &st) != 0 || !S_ISREG(st.st_mode) || !maker_gone((pid_t)pid, file, &why)) continue;
        char what[256];
        snprintf(what, sizeof what, "the temporary file of a save of %s that process %lld did not finish (%s)", path,
                 pid, why);
        remove_reported(&t, file, what);
        record_remove((pid_t)pid, name);
    }
    closedir(dir);
    return HW_OK;
}

int hw_shm_clean_stale(int *removed) { return hw_shm_clean(NULL, removed); }
