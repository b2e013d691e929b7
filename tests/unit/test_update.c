// Tests of --update's two modes that lose nothing (src/train/hogwild_update.c, include/hw/optim.h):
// two threads hammer one float with known increments, through hw_atomic_add_float or under the
// shared update lock, and the sum is exact (1.0f increments: every partial sum up to 2^24 is a
// float). Plain unlocked adds lose some of them on any machine with two cores.
#include "train/hogwild_update.h"
#include "hw/err.h"
#include "hw/optim.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

enum { ADDS = 1 << 20 };  // per thread; two threads end at 2^21, below 2^24

typedef struct {
    float *target;
    const hogwild_update *update;  // NULL: hw_atomic_add_float
} hammer_job;

static void *hammer(void *arg) {
    hammer_job *job = arg;
    for (int i = 0; i < ADDS; i++) {
        if (!job->update) {
            hw_atomic_add_float(job->target, 1.0f, NULL);
            continue;
        }
        cr_assert_eq(hogwild_update_begin(job->update), HW_OK);
        // A read and a write apart, as a lock-free step does: only the lock keeps them together.
        volatile float *w = job->target;
        *w = *w + 1.0f;
        hogwild_update_end(job->update);
    }
    return NULL;
}

static float hammer_twice(const hogwild_update *update) {
    float target = 0;
    hammer_job job = {&target, update};
    pthread_t a, b;
    cr_assert_eq(pthread_create(&a, NULL, hammer, &job), 0);
    cr_assert_eq(pthread_create(&b, NULL, hammer, &job), 0);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    return target;
}

Test(update, atomic_add_from_two_threads_loses_nothing) {
    float sum = hammer_twice(NULL);
    cr_expect_eq(sum, (float)(2 * ADDS), "two threads of %d adds of 1 ended at %.1f", ADDS, (double)sum);
}

Test(update, locked_adds_from_two_threads_lose_nothing) {
    pthread_mutex_t lock;
    cr_assert_eq(hogwild_update_lock_init(&lock), HW_OK, "%s", hw_error());
    hogwild_update update = {.mode = HW_UPDATE_LOCKED, .lock = &lock};
    float sum = hammer_twice(&update);
    cr_expect_eq(sum, (float)(2 * ADDS), "two threads of %d locked adds of 1 ended at %.1f", ADDS, (double)sum);
    hogwild_update_lock_destroy(&lock);
}

// The lock is robust: a process that dies holding it leaves it to the next, who takes it
// (EOWNERDEAD, made consistent) instead of waiting forever.
Test(update, a_holder_that_dies_does_not_hang_the_others) {
    pthread_mutex_t *lock = mmap(NULL, sizeof *lock, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(lock, MAP_FAILED);
    cr_assert_eq(hogwild_update_lock_init(lock), HW_OK, "%s", hw_error());
    hogwild_update update = {.mode = HW_UPDATE_LOCKED, .lock = lock};
    pid_t child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) {
        hogwild_update_begin(&update);
        _exit(0);  // dies holding it
    }
    int status;
    waitpid(child, &status, 0);
    cr_assert_eq(hogwild_update_begin(&update), HW_OK, "%s", hw_error());
    hogwild_update_end(&update);
    cr_assert_eq(hogwild_update_begin(&update), HW_OK, "taken again after the recovery: %s", hw_error());
    hogwild_update_end(&update);
    hogwild_update_lock_destroy(lock);
    munmap(lock, sizeof *lock);
}

// The atomic step with one writer: every weight moves by its increment, the copy and the applied
// increments say what was written.
Test(update, atomic_step_applies_what_it_records) {
    enum { N = 257 };
    hw_model model = {0};
    hw_param *param = &model.params[0];
    snprintf(param->name, sizeof param->name, "w");
    param->shape.ndim = 1;
    param->shape.dims[0] = N;
    model.n_params = 1;
    model.n_weights = N;
    float w[N], start[N], g[N], copy[N];
    double applied[N] = {0};
    for (int i = 0; i < N; i++) start[i] = w[i] = 0.5f + 0.001f * (float)i, g[i] = 0.25f - 0.002f * (float)i;
    hw_sgd opt;
    cr_assert_eq(hw_sgd_init(&opt, N, 0.1f, 0.5f, 0, 0), HW_OK);
    for (int s = 0; s < 3; s++) hw_sgd_step_atomic(&opt, &model, w, g, copy, applied);
    for (int i = 0; i < N; i++) {
        cr_expect_eq(copy[i], w[i], "weight %d", i);
        cr_expect_eq(applied[i], (double)w[i] - (double)start[i], "weight %d", i);
        cr_expect((w[i] < start[i]) == (g[i] > 0), "weight %d moved against its gradient", i);
    }
    hw_sgd_free(&opt);
}
