// hogwild_update: a CPU worker's write of its step in the --update mode (hogwild_update.h).
#include "hogwild_update.h"

#include "hw/err.h"
#include "hw/option.h"

#include <errno.h>
#include <string.h>

int hogwild_update_lock_init(pthread_mutex_t *lock) {
    pthread_mutexattr_t attr;
    int rc = pthread_mutexattr_init(&attr);
    if (rc == 0) rc = pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    if (rc == 0) rc = pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
    if (rc == 0) rc = pthread_mutex_init(lock, &attr);
    pthread_mutexattr_destroy(&attr);
    if (rc != 0) {
        return hw_fail("locked updates%s: cannot make the shared update lock: %s", hw_option_hint(HW_OPTION_UPDATE),
                       strerror(rc));
    }
    return HW_OK;
}

void hogwild_update_lock_destroy(pthread_mutex_t *lock) { pthread_mutex_destroy(lock); }

int hogwild_update_begin(const hogwild_update *update) {
    if (update->mode != HW_UPDATE_LOCKED) return HW_OK;
    int rc = pthread_mutex_lock(update->lock);
    // The previous holder died inside its step: the lock is ours, and the weights are as a race
    // would leave them, which Hogwild tolerates; the parent ends the run naming that worker.
    if (rc == EOWNERDEAD) rc = pthread_mutex_consistent(update->lock);
    if (rc != 0) {
        return hw_fail("locked updates%s: cannot take the shared update lock: %s", hw_option_hint(HW_OPTION_UPDATE),
                       strerror(rc));
    }
    return HW_OK;
}

void hogwild_update_end(const hogwild_update *update) {
    if (update->mode == HW_UPDATE_LOCKED) pthread_mutex_unlock(update->lock);
}

// The generator's stream, "bf16": apart from dropout's ("drop") under the same worker seed.
enum { ROUNDING_STREAM = 0x62663136 };

void hogwild_update_seed(hogwild_update *update, uint64_t seed) {
    if (update->dtype == HW_WEIGHTS_BF16) hw_rng_seed(&update->rounding, seed, ROUNDING_STREAM);
}

void hogwild_update_write(hogwild_update *update, hw_sgd *opt, const hw_model *model, float *weights,
                          const float *grads, float *copy, double *applied) {
    if (update->dtype == HW_WEIGHTS_BF16) {
        uint64_t key = (uint64_t)hw_rng_u32(&update->rounding) << 32;
        key |= hw_rng_u32(&update->rounding);
        hw_sgd_step_bf16(opt, model, update->bf16, grads, copy, applied, key);
    } else if (update->mode == HW_UPDATE_ATOMIC) {
        hw_sgd_step_atomic(opt, model, weights, grads, copy, applied);
    } else if (applied) {
        hw_sgd_step_measured(opt, model, weights, grads, copy, applied);
    } else {
        hw_sgd_step_and_copy(opt, model, weights, grads, copy);
    }
}

void hogwild_update_read(const hogwild_update *update, const float *weights, float *local, size_t n) {
    if (update->dtype == HW_WEIGHTS_BF16) {
        hw_bf16_to_floats(local, update->bf16, n);
    } else {
        memcpy(local, weights, sizeof(float) * n);
    }
}
