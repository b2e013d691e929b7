// hogwild_staleness: --max-staleness, the bound on how far a CPU Hogwild worker may run ahead of
// the slowest (src/train/hogwild_staleness.h).
#include "hogwild_staleness.h"

#include "hw/clock.h"
#include "hw/err.h"
#include "hw/option.h"

#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

// The longest sleep between two looks at the counts and the clock: a safety net only, since every
// step and every stop wake the sleepers.
#define STALENESS_NAP_SECONDS 0.25

void staleness_gate_open(staleness_gate *gate, hogwild_control *control, const hw_train_config *config, int rank) {
    *gate = (staleness_gate){.control = control,
                             .workers = config->workers,
                             .rank = rank,
                             .bound = config->max_staleness,
                             .timeout = config->sync_timeout};
}

uint64_t staleness_slowest(const hogwild_control *control, int workers, int rank, int *slowest) {
    uint64_t least = HW_STALENESS_DONE;
    *slowest = -1;
    for (int r = 0; r < workers; r++) {
        if (r == rank) continue;
        uint64_t steps = atomic_load(&control->slots[r].epoch_steps);
        if (steps < least) {
            least = steps;
            *slowest = r;
        }
    }
    return least;
}

// Sleeps on the staleness word while it still reads `seen`, at most `seconds`. Shared futex calls
// (not FUTEX_PRIVATE_FLAG's): the control block is mapped by every worker process.
static void nap(hogwild_control *control, unsigned seen, double seconds) {
    if (seconds > STALENESS_NAP_SECONDS) seconds = STALENESS_NAP_SECONDS;
    struct timespec timeout = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    atomic_fetch_add(&control->staleness_sleepers, 1);
    syscall(SYS_futex, &control->staleness_wake, FUTEX_WAIT, seen, &timeout, NULL, 0);
    atomic_fetch_sub(&control->staleness_sleepers, 1);
}

int staleness_wait(const staleness_gate *gate) {
    if (gate->bound < 0 || gate->workers < 2) return HW_OK;
    hogwild_control *control = gate->control;
    const uint64_t steps = atomic_load(&control->slots[gate->rank].epoch_steps);
    double started = 0;
    for (;;) {
        // The word read before the counts: a step landing after this read changes it, and the
        // futex then returns at once instead of sleeping through the step.
        unsigned seen = atomic_load(&control->staleness_wake);
        int slowest;
        uint64_t least = staleness_slowest(control, gate->workers, gate->rank, &slowest);
        if (staleness_may_step(steps, least, gate->bound) || hw_hogwild_stopping(control)) return HW_OK;
        double now = hw_now();
        if (started == 0) started = now;
        double left = gate->timeout > 0 ? started + gate->timeout - now : STALENESS_NAP_SECONDS;
        if (left <= 0) {
            return hw_fail("worker %d waited %.3g s%s for worker %d: worker %d has made %llu steps of the epoch, "
                           "worker %d %llu, and the bound lets none start more than %d steps ahead%s; worker %d is "
                           "stopped, stuck or gone",
                           gate->rank, now - started, hw_option_hint(HW_OPTION_SYNC_TIMEOUT), slowest, gate->rank,
                           (unsigned long long)steps, slowest, (unsigned long long)least, gate->bound,
                           hw_option_hint(HW_OPTION_MAX_STALENESS), slowest);
        }
        nap(control, seen, left);
    }
}

// Bumps the staleness word and wakes its sleepers, if any: a step of an unheld run makes no call.
static void wake_held(hogwild_control *control) {
    atomic_fetch_add(&control->staleness_wake, 1);
    if (atomic_load(&control->staleness_sleepers) > 0) {
        syscall(SYS_futex, &control->staleness_wake, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
    }
}

void staleness_step_done(const staleness_gate *gate) {
    if (gate->bound < 0 || gate->workers < 2) return;
    atomic_fetch_add(&gate->control->slots[gate->rank].epoch_steps, 1);
    wake_held(gate->control);
}

void staleness_leave(const staleness_gate *gate) {
    if (gate->bound < 0 || gate->workers < 2) return;
    atomic_store(&gate->control->slots[gate->rank].epoch_steps, HW_STALENESS_DONE);
    wake_held(gate->control);
}
