// shm: storage that forked workers share, and the sharing strategies of torch.multiprocessing.
//
//   file_descriptor  memfd_create: an anonymous file that lives only as long as a descriptor or
//                    mapping of it does. Nothing in the file system, nothing to leak. The default.
//   file_system      shm_open with a name "/hogwild-<parent pid>-<n>" under /dev/shm, unlinked
//                    on every exit path (normal, error, SIGINT/SIGTERM, after a worker crash);
//                    `hogwild --clean-shm` removes the names of runs killed with SIGKILL.
//
// Either way the region is mmap'ed MAP_SHARED before fork, so every worker sees the same pages
// at the same address: a write by one is seen by all, with no pointer fix-ups.
#ifndef HW_SHM_H
#define HW_SHM_H

#include <stddef.h>
#include <stdio.h>

typedef enum { HW_SHARING_FILE_DESCRIPTOR = 0, HW_SHARING_FILE_SYSTEM = 1 } hw_sharing_strategy;

typedef struct {
    void *data;  // the mapping, `bytes` long
    size_t bytes;
    hw_sharing_strategy strategy;
    char name[64];  // file_system: the shm name; "" otherwise
    int fd;
} hw_shm;

// The strategy names, in order; *count receives how many.
const char *const *hw_sharing_strategies(int *count);
// The current strategy's name ("file_descriptor" unless set).
const char *hw_sharing_strategy_get(void);
// Sets the strategy by name; an unknown name fails listing the known ones.
int hw_sharing_strategy_set(const char *name);

// Creates and maps `bytes` of zeroed shared storage with the current strategy. Every page is
// reserved at once (posix_fallocate), so a full or too small /dev/shm fails here rather than
// with SIGBUS later; so do sizes over the machine's memory, the cgroup's memory.max, RLIMIT_FSIZE
// or RLIMIT_AS. On failure the message names the strategy, the bytes asked for and what to try.
//
// The first file_system open also registers the exit paths that unlink: an atexit handler, and
// for each of SIGINT, SIGTERM, SIGHUP whose action is still the default, a handler that unlinks
// and then dies of the same signal (hw_spawn puts its own in front while workers run).
int hw_shm_open(hw_shm *shm, size_t bytes);
// Unmaps, closes and (file_system) unlinks. Safe to call twice, and on a struct whose open failed.
// Called in a forked worker it unmaps and closes but never unlinks: the name is the parent's.
void hw_shm_close(hw_shm *shm);
// Unlinks every name this process created and has not closed yet. Async-signal-safe: the
// signal handlers and atexit path of the parent call it. In a forked child it does nothing (the
// names belong to the process that created them), so a worker cannot pull them from the parent.
void hw_shm_unlink_all(void);
// ---- temporary files ----
// A file this process is writing and would leave behind if it died now (a checkpoint's
// "<path>.tmp.<pid>"): noted before it is created, forgotten once it is renamed or removed. Every
// exit that runs code removes it (hw_shm_remove_all: atexit, a second stop signal, the stop's grace
// running out, any other deadly signal). SIGKILL runs nothing: the note is also a record in
// /dev/shm, "hogwild-<pid>-tmp", a symbolic link to the file, which hw_shm_clean follows once the
// process is gone. One file at a time per process.
int hw_shm_temp_note(const char *path);
void hw_shm_temp_forget(void);
// Unlinks the names (hw_shm_unlink_all) and removes the noted temporary file: the death paths.
// Async-signal-safe; in a forked child it does nothing.
void hw_shm_remove_all(void);
// Removes "<path>.tmp.<pid>" files beside `path` whose process is gone (a save that was killed),
// writing a line for each to `report` (NULL: quiet). Never this process's own, nor one of a live
// process.
int hw_shm_temp_sweep(const char *path, FILE *report);

// Removes /dev/shm/hogwild-<pid>-<n> entries whose pid is no longer alive (kill(pid, 0) fails with
// ESRCH); *removed gets the count. Never touches a name of a live process (any user's) or a name
// that is not exactly of that pattern. Fails, after trying all, when one could not be removed.
int hw_shm_clean_stale(int *removed);
// The same, also removing a name whose pid is alive but belongs to a process that started after
// the name was created (the pid was reused: the process that made it is gone), and the temporary
// file (and the record) of each "hogwild-<pid>-tmp" record whose process is gone; writing to
// `report` (NULL: nothing) a line for each name or file removed, kept or that could not be
// removed, with the reason. *removed counts names and files removed.
int hw_shm_clean(FILE *report, int *removed);

#endif
