// hogwild_protocol: the calls a Hogwild worker and its parent make on their shared control block
// (src/train/hogwild_protocol.h).
#include "hogwild_protocol.h"

#include "hw/data.h"
#include "hw/procfs.h"

#include <limits.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

size_t hw_hogwild_control_bytes(int workers) {
    size_t bytes = sizeof(hogwild_control) + sizeof(worker_slot) * (size_t)workers;
    return (bytes + 63) & ~(size_t)63;
}

int64_t *hw_hogwild_shard_alloc(const hw_train_config *config, int64_t n) {
    // Shard 0 is the largest; one more index so that an empty one is not a malloc of 0 bytes.
    int64_t largest = hw_sampler_shard_size(n, hw_hogwild_world_workers(config), 0);
    return malloc(sizeof(int64_t) * (size_t)(largest + 1));
}

int hw_hogwild_shard(const hw_train_config *config, int64_t n, int rank, int epoch, int64_t *shard, int64_t *count) {
    const int workers = hw_hogwild_world_workers(config), world_rank = hw_hogwild_world_rank(config, rank);
    *count = hw_sampler_shard_size(n, workers, world_rank);
    return hw_sampler_shard(shard, n, workers, world_rank, epoch, config->seed);
}

// The control block is shared between processes (a MAP_SHARED mapping): the futex calls are the
// shared kind, not FUTEX_PRIVATE_FLAG's.
static void wake_all(hogwild_control *control) {
    atomic_fetch_add(&control->wake, 1);
    syscall(SYS_futex, &control->wake, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

void hw_hogwild_release(hogwild_control *control, int epoch, int workers) {
    for (int r = 0; r < workers; r++) atomic_store(&control->slots[r].epoch_steps, 0);
    atomic_store(&control->released_epoch, epoch);
    wake_all(control);
}

void hw_hogwild_stop(hogwild_control *control) {
    atomic_store(&control->stop, 1);
    wake_all(control);
    // The workers that --max-staleness holds back (hogwild_staleness.c) sleep on a word of their own.
    atomic_fetch_add(&control->staleness_wake, 1);
    syscall(SYS_futex, &control->staleness_wake, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

int hw_hogwild_wait_for_epoch(hogwild_control *control, int epoch) {
    for (;;) {
        // `wake` read before the conditions: a release or stop after them changes it, and the
        // futex then returns at once instead of sleeping through it.
        int seen = atomic_load(&control->wake);
        if (atomic_load(&control->stop)) return 0;
        if (atomic_load(&control->released_epoch) >= epoch) return 1;
        // A timeout as a safety net only: every release and stop wakes the waiters.
        struct timespec timeout = {1, 0};
        syscall(SYS_futex, &control->wake, FUTEX_WAIT, seen, &timeout, NULL, 0);
    }
}

void hw_hogwild_report_memory(worker_slot *slot) {
    hw_memory memory;
    hw_memory_read(&memory);
    atomic_store(&slot->peak_rss_kb, memory.peak_rss_kb);
    atomic_store(&slot->private_kb, memory.private_kb);
}

void hw_hogwild_report_diverged(worker_slot *slot, int epoch, double loss, double last_finite) {
    atomic_store(&slot->bad_loss, loss);
    atomic_store(&slot->last_finite_loss, last_finite);
    atomic_store(&slot->diverged_epoch, epoch);
    atomic_store(&slot->diverged, 1);
}

void hw_hogwild_slots_sum(const hogwild_control *control, int workers, int64_t *samples, double *loss_sum,
                          int *min_epochs_done) {
    *samples = 0;
    *loss_sum = 0;
    *min_epochs_done = 1 << 30;
    for (int r = 0; r < workers; r++) {
        *samples += atomic_load_explicit(&control->slots[r].samples, memory_order_relaxed);
        *loss_sum += atomic_load_explicit(&control->slots[r].loss_sum, memory_order_relaxed);
        int done = atomic_load(&control->slots[r].epochs_done);
        if (done < *min_epochs_done) *min_epochs_done = done;
    }
}

int hw_hogwild_epochs_trained(const hogwild_control *control, const hw_train_config *config, int64_t n, int workers) {
    int fewest = 1 << 30;
    for (int r = 0; r < workers; r++) {
        int done = atomic_load(&control->slots[r].epochs_done);
        int64_t shard = hw_sampler_shard_size(n, hw_hogwild_world_workers(config), hw_hogwild_world_rank(config, r));
        int64_t samples = atomic_load_explicit(&control->slots[r].samples, memory_order_relaxed);
        if (shard > 0 && samples / shard > done) done = (int)(samples / shard);
        if (done < fewest) fewest = done;
    }
    return fewest;
}

void hw_hogwild_slots_memory(const hogwild_control *control, int workers, int64_t *peak_kb, int64_t *private_kb) {
    *peak_kb = 0;
    *private_kb = 0;
    for (int r = 0; r < workers; r++) {
        int64_t peak = atomic_load(&control->slots[r].peak_rss_kb);
        int64_t private_part = atomic_load(&control->slots[r].private_kb);
        if (peak > *peak_kb) *peak_kb = peak;
        if (private_part > *private_kb) *private_kb = private_part;
    }
}
