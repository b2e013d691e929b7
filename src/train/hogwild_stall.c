// hogwild_stall: the parent's watch for a Hogwild worker that makes no progress
// (src/train/hogwild_stall.h).
#include "hogwild_stall.h"

#include "hw/err.h"

#include <stdio.h>
#include <stdlib.h>

int hw_hogwild_stall_open(hogwild_stall *stall, int workers, int rank, double now) {
    *stall = (hogwild_stall){.workers = workers, .rank = rank, .started = now};
    stall->samples = calloc((size_t)workers, sizeof *stall->samples);
    stall->since = calloc((size_t)workers, sizeof *stall->since);
    stall->named = calloc((size_t)workers, sizeof *stall->named);
    if (!stall->samples || !stall->since || !stall->named) {
        hw_hogwild_stall_close(stall);
        return hw_fail("out of memory for the watch of %d workers", workers);
    }
    for (int r = 0; r < workers; r++) stall->since[r] = now;
    return HW_OK;
}

// "worker 3 (pid 1234)" or "worker 3 on cuda:1 (pid 1234)".
static void name_worker(char *who, size_t cap, int r, const pid_t *pids, const int *worker_gpu) {
    if (worker_gpu) snprintf(who, cap, "worker %d on cuda:%d (pid %d)", r, worker_gpu[r], (int)pids[r]);
    else snprintf(who, cap, "worker %d (pid %d)", r, (int)pids[r]);
}

// One line about a worker: on `progress`, or on stderr naming the rank where progress is silent.
static void say(const hogwild_stall *stall, hw_progress *progress, const char *line) {
    if (progress->silent) fprintf(stderr, "hogwild: rank %d: %s", stall->rank, line);
    else hw_progress_message(progress, "%s", line);
}

void hw_hogwild_stall_check(hogwild_stall *stall, const hogwild_control *control, int epochs_handled, const pid_t *pids,
                            const int *worker_gpu, hw_progress *progress, double now) {
    for (int r = 0; r < stall->workers; r++) {
        const worker_slot *slot = &control->slots[r];
        int64_t samples = atomic_load_explicit(&slot->samples, memory_order_relaxed);
        int waits = atomic_load(&slot->epochs_done) > epochs_handled;  // at the barrier, or done
        char who[96], line[512];
        if (samples != stall->samples[r] || waits) {
            // A gap between two reports counts only when the worker trained through it.
            double gap = now - stall->since[r];
            if (samples != stall->samples[r] && gap > stall->longest_gap) stall->longest_gap = gap;
            if (stall->named[r]) {
                name_worker(who, sizeof who, r, pids, worker_gpu);
                snprintf(line, sizeof line, "%s makes progress again\n", who);
                say(stall, progress, line);
                stall->named[r] = 0;
            }
            stall->samples[r] = samples;
            stall->since[r] = now;
            continue;
        }
        // Until a worker has reported, how long a batch takes is unknown: no worker is named.
        double bound =
            4 * stall->longest_gap > HW_HOGWILD_STALL_SECONDS ? 4 * stall->longest_gap : HW_HOGWILD_STALL_SECONDS;
        if (stall->named[r] || stall->longest_gap == 0 || now - stall->since[r] <= bound) continue;
        stall->named[r] = 1;
        name_worker(who, sizeof who, r, pids, worker_gpu);
        snprintf(line, sizeof line,
                 "warning: %s has made no progress for %.0f s (its samples stay at %lld): it is stopped (SIGSTOP?) "
                 "or stuck, and the run waits for it at the epoch's end\n",
                 who, now - stall->since[r], (long long)samples);
        say(stall, progress, line);
    }
}

void hw_hogwild_stall_close(hogwild_stall *stall) {
    free(stall->samples);
    free(stall->since);
    free(stall->named);
    stall->samples = NULL;
    stall->since = NULL;
    stall->named = NULL;
}
