// memory: peak and private resident memory of this process, for the run summary and bench/.
#include "hw/train.h"

#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

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
