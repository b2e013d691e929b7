// procfs: what /proc (and getrusage, and its cgroup's memory.max) says about a process: when it
// started, whether it has ended, its threads, its memory, its address space, its memory limit and
// its capabilities. Every file of /proc that hogwild reads is read here (src/proc/procfs.c); the
// one other use of /proc is src/plugin.c's readlink of /proc/self/exe, a path.
#ifndef HW_PROCFS_H
#define HW_PROCFS_H

#include <stdint.h>
#include <sys/types.h>

// Process `pid` as /proc/PID/stat shows it: when it started (clock ticks after boot, field 22:
// tells it from a later process that reused its pid) and whether it has ended and waits to be
// reaped (a zombie). HW_ERR (no message) when there is no such process or it cannot be read.
int hw_process_stat(pid_t pid, unsigned long long *start_ticks, int *ended);

// The threads of this process, from /proc/self/status; 0 when it cannot be read.
int hw_process_threads(void);

// Address space mapped by this process now, in bytes, from /proc/self/statm (0 when /proc cannot say).
double hw_process_mapped_bytes(void);

// What a process holds: its peak resident set, and how much of its resident memory is private
// to it. A Hogwild worker's private memory excludes the dataset, which it shares with the
// parent copy-on-write: that is how a run shows the data is not copied per worker.
typedef struct {
    int64_t peak_rss_kb;  // getrusage ru_maxrss
    int64_t rss_kb;       // now, from /proc/self/smaps_rollup
    int64_t private_kb;   // Private_Clean + Private_Dirty, now
} hw_memory;
void hw_memory_read(hw_memory *m);

// The memory limit of this process's cgroup (v2: the memory.max of the group /proc/self/cgroup
// names), in bytes; 0 when there is none or it cannot be read.
uint64_t hw_process_cgroup_memory_limit(void);

// Whether this process has CAP_FOWNER in effect (bit 3 of CapEff in /proc/self/status).
int hw_process_has_cap_fowner(void);

#endif
