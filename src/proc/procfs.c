// procfs: the readers of /proc (include/hw/procfs.h).
#include "hw/procfs.h"

#include "hw/err.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

int hw_process_stat(pid_t pid, unsigned long long *start_ticks, int *ended) {
    char path[64], text[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return HW_ERR;
    ssize_t got = read(fd, text, sizeof text - 1);
    close(fd);
    if (got <= 0) return HW_ERR;
    text[got] = '\0';
    const char *p = strrchr(text, ')');  // the command name may hold spaces and parentheses
    char state = 0;
    // After ")": state (3), then fields 4..21, then starttime (22).
    if (!p || sscanf(p + 1, " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu", &state,
                     start_ticks) != 2) {
        return HW_ERR;
    }
    *ended = state == 'Z' || state == 'X';
    return HW_OK;
}

int hw_process_threads(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    int threads = 0;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "Threads: %d", &threads) == 1) break;
    }
    fclose(f);
    return threads;
}

double hw_process_mapped_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return 0;
    unsigned long long pages = 0;
    int ok = fscanf(f, "%llu", &pages) == 1;
    fclose(f);
    return ok ? (double)pages * (double)sysconf(_SC_PAGESIZE) : 0;
}

void hw_memory_read(hw_memory *m) {
    memset(m, 0, sizeof *m);
    struct rusage usage;
    if (getrusage(RUSAGE_SELF, &usage) == 0) m->peak_rss_kb = usage.ru_maxrss;
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    if (!f) return;  // not Linux, or /proc not mounted: the peak is still known
    char line[256];
    long long kb;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "Rss: %lld kB", &kb) == 1) m->rss_kb = kb;
        if (sscanf(line, "Private_Clean: %lld kB", &kb) == 1) m->private_kb += kb;
        if (sscanf(line, "Private_Dirty: %lld kB", &kb) == 1) m->private_kb += kb;
    }
    fclose(f);
}

uint64_t hw_process_cgroup_memory_limit(void) {
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f) return 0;
    char line[512], group[512] = "";
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "0::", 3) == 0) {
            snprintf(group, sizeof group, "%s", line + 3);
            group[strcspn(group, "\n")] = '\0';
            break;
        }
    }
    fclose(f);
    if (group[0] != '/') return 0;
    char path[sizeof group + 32];
    snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.max", strcmp(group, "/") == 0 ? "" : group);
    f = fopen(path, "r");
    if (!f) return 0;
    unsigned long long limit = 0;
    int ok = fscanf(f, "%llu", &limit) == 1;  // "max" reads as no limit
    fclose(f);
    return ok ? (uint64_t)limit : 0;
}

int hw_process_has_cap_fowner(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long caps = 0;
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) found = sscanf(line, "CapEff: %llx", &caps) == 1;
    fclose(f);
    return found && (caps >> 3 & 1);
}
