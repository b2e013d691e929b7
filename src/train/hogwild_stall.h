// hogwild_stall: the parent's watch for a Hogwild worker that makes no progress (private to
// src/train/ and the GPU trainers; src/train/hogwild_stall.c). A worker stopped by SIGSTOP, or stuck
// in a call that never returns, held the whole run at the next epoch end with no word: the parent
// now names it once it has made no progress for a while, and again once it moves, without ending
// the run (it may be stopped on purpose, and SIGCONT lets it go on).
#ifndef HW_HOGWILD_STALL_H
#define HW_HOGWILD_STALL_H

#include "hogwild_protocol.h"
#include "hw/progress.h"

#include <stdint.h>
#include <sys/types.h>

typedef struct {
    int workers;
    int rank;            // the world rank of this node's workers (0 without mpirun)
    int64_t *samples;    // each worker's samples when last seen to change
    double *since;       // when that was (or when it was last seen waiting at the barrier)
    char *named;         // whether it has been named as making no progress
    double started;      // when the watch began
    double longest_gap;  // the longest time seen between two reports of any worker (0: none yet)
} hogwild_stall;

// No progress for longer than this many seconds, or 4 times the longest gap seen between two
// reports of any worker (a model whose batches take long), whichever is longer.
#define HW_HOGWILD_STALL_SECONDS 10.0

// Starts the watch of `workers` workers of world rank `rank` at time `now` (hw_now). HW_ERR when
// out of memory.
int hw_hogwild_stall_open(hogwild_stall *stall, int workers, int rank, double now);
// One look at the workers' reports at `now`: a worker still training epoch `epochs_handled` (from
// the run's first) whose samples have not moved for too long is named on `progress`, with its pid
// and, where `worker_gpu` is not NULL, its GPU; one named before that moves again is said to. On
// a rank whose progress is silent (a rank other than 0 under mpirun) the same lines go to stderr,
// naming the rank: its workers are as much the job's as rank 0's.
void hw_hogwild_stall_check(hogwild_stall *stall, const hogwild_control *control, int epochs_handled, const pid_t *pids,
                            const int *worker_gpu, hw_progress *progress, double now);
void hw_hogwild_stall_close(hogwild_stall *stall);

#endif
