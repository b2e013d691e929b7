// Tests of --max-staleness (src/train/hogwild_staleness.c): the rule on the counts, threads that
// step through the gate on one control block keep --measure's staleness (the others' updates
// between a worker's read and its write) within (W - 1)(2S + 2) while one of them is slow, a worker
// with no step left holds nobody, a held worker gives up at the timeout naming both workers, a
// stop wakes it, a release restarts the counts; and the option's values. Beside them, on the same
// control block, the epochs a stopped run saves.
#include "train/hogwild_staleness.h"
#include "cli/options.h"
#include "cli/train_options.h"
#include "hw/clock.h"
#include "hw/data.h"
#include "hw/err.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { MAX_WORKERS = 4 };

static hogwild_control *control_new(int workers) {
    hogwild_control *control = aligned_alloc(64, hw_hogwild_control_bytes(workers));
    cr_assert_not_null(control);
    memset(control, 0, hw_hogwild_control_bytes(workers));
    return control;
}

static staleness_gate gate_of(hogwild_control *control, int workers, int rank, int bound, double timeout) {
    hw_train_config config;
    hw_train_config_init(&config);
    config.workers = workers;
    config.max_staleness = bound;
    config.sync_timeout = timeout;
    staleness_gate gate;
    staleness_gate_open(&gate, control, &config, rank);
    return gate;
}

Test(staleness, the_slowest_live_worker_sets_the_bound) {
    hogwild_control *control = control_new(3);
    atomic_store(&control->slots[0].epoch_steps, 5);
    atomic_store(&control->slots[1].epoch_steps, 3);
    atomic_store(&control->slots[2].epoch_steps, 4);
    int slowest;
    cr_expect_eq(staleness_slowest(control, 3, 0, &slowest), 3);
    cr_expect_eq(slowest, 1);
    cr_expect_eq(staleness_slowest(control, 3, 1, &slowest), 4, "a worker is not its own slowest");
    cr_expect_eq(slowest, 2);
    cr_expect(!staleness_may_step(5, 3, 0) && !staleness_may_step(5, 3, 1) && staleness_may_step(5, 3, 2));
    cr_expect(staleness_may_step(3, 3, 0), "lockstep: level with the slowest may step");
    // Done workers hold nobody: worker 1 done, worker 2 is the slowest; all others done, none is.
    atomic_store(&control->slots[1].epoch_steps, HW_STALENESS_DONE);
    cr_expect_eq(staleness_slowest(control, 3, 0, &slowest), 4);
    cr_expect_eq(slowest, 2);
    atomic_store(&control->slots[2].epoch_steps, HW_STALENESS_DONE);
    cr_expect_eq(staleness_slowest(control, 3, 0, &slowest), HW_STALENESS_DONE);
    cr_expect_eq(slowest, -1);
    cr_expect(staleness_may_step(1000000, HW_STALENESS_DONE, 0));
    // A release restarts every count at 0.
    hw_hogwild_release(control, 1, 3);
    for (int r = 0; r < 3; r++) cr_expect_eq(atomic_load(&control->slots[r].epoch_steps), 0);
    free(control);
}

// ---- threads through the gate ----

typedef struct {
    hogwild_control *control;
    atomic_llong *updates;  // --measure's count of landed updates
    int workers, rank, bound, steps, work_us;
    long long stale_max;  // out: the largest staleness this worker saw
    int status;           // out: HW_ERR when a wait failed
} stepper;

static void pause_us(int us) {
    struct timespec t = {0, (long)us * 1000};
    nanosleep(&t, NULL);
}

// A worker's steps as hogwild.c takes them, with --measure's staleness counted as
// hogwild_measure.c counts it: the others' updates between its read (its previous update) and its
// write. The step's work is a sleep before the write: 1 ms for the slow worker, 20 us for the others.
static void *step_through(void *arg) {
    stepper *s = arg;
    staleness_gate gate = gate_of(s->control, s->workers, s->rank, s->bound, 30);
    long long read = atomic_load(s->updates);
    for (int k = 0; k < s->steps; k++) {
        if (staleness_wait(&gate) != HW_OK) {
            s->status = HW_ERR;
            break;
        }
        pause_us(s->work_us);  // the step's work
        long long landed = atomic_fetch_add(s->updates, 1);
        if (landed - read > s->stale_max) s->stale_max = landed - read;
        read = landed + 1;
        staleness_step_done(&gate);
    }
    staleness_leave(&gate);
    return NULL;
}

// W workers of `steps` steps each, worker 0 slow: the largest staleness any of them saw.
static long long run_steppers(int workers, int bound, int steps) {
    hogwild_control *control = control_new(workers);
    atomic_llong updates = 0;
    stepper s[MAX_WORKERS];
    pthread_t threads[MAX_WORKERS];
    for (int r = 0; r < workers; r++) {
        s[r] = (stepper){.control = control,
                         .updates = &updates,
                         .workers = workers,
                         .rank = r,
                         .bound = bound,
                         .steps = steps,
                         .work_us = r == 0 ? 1000 : 20};
        cr_assert_eq(pthread_create(&threads[r], NULL, step_through, &s[r]), 0);
    }
    long long stale_max = 0;
    for (int r = 0; r < workers; r++) {
        pthread_join(threads[r], NULL);
        cr_expect_eq(s[r].status, HW_OK, "worker %d: %s", r, hw_error());
        if (s[r].stale_max > stale_max) stale_max = s[r].stale_max;
    }
    cr_expect_eq(updates, (long long)workers * steps, "every step was taken");
    free(control);
    return stale_max;
}

Test(staleness, measured_staleness_stays_within_the_bound, .timeout = 60) {
    const int bounds[] = {0, 1, 3};
    for (int workers = 2; workers <= 3; workers++) {
        for (size_t b = 0; b < sizeof bounds / sizeof bounds[0]; b++) {
            long long most = (long long)(workers - 1) * (2 * bounds[b] + 2);
            long long seen = run_steppers(workers, bounds[b], 300);
            cr_expect_leq(seen, most, "%d workers, S = %d: staleness %lld above (W-1)(2S+2) = %lld", workers, bounds[b],
                          seen, most);
        }
    }
    // Without the bound the fast workers run far ahead of the slow one: the test sees a breach of
    // lockstep's bound, (3 - 1)(2 * 0 + 2) = 4.
    long long unbounded = run_steppers(3, HW_STALENESS_UNBOUNDED, 300);
    cr_expect_gt(unbounded, 4, "unbounded staleness %lld", unbounded);
}

Test(staleness, a_worker_without_steps_left_holds_nobody, .timeout = 30) {
    hogwild_control *control = control_new(2);
    staleness_gate ahead = gate_of(control, 2, 0, 0, 5), done = gate_of(control, 2, 1, 0, 5);
    cr_assert_eq(staleness_wait(&ahead), HW_OK);
    staleness_step_done(&ahead);
    staleness_leave(&done);
    double started = hw_now();
    for (int k = 0; k < 100; k++) {
        cr_assert_eq(staleness_wait(&ahead), HW_OK, "held by a finished worker: %s", hw_error());
        staleness_step_done(&ahead);
    }
    cr_expect_lt(hw_now() - started, 2.0, "the steps were held");
    free(control);
}

Test(staleness, a_held_worker_gives_up_at_the_timeout_naming_both, .timeout = 30) {
    hogwild_control *control = control_new(3);
    staleness_gate held = gate_of(control, 3, 2, 1, 0.3);
    atomic_store(&control->slots[0].epoch_steps, 4);
    atomic_store(&control->slots[1].epoch_steps, 1);
    atomic_store(&control->slots[2].epoch_steps, 3);
    double started = hw_now();
    cr_assert_eq(staleness_wait(&held), HW_ERR, "3 steps with the slowest at 1 and S = 1 must wait");
    double took = hw_now() - started;
    cr_expect(took >= 0.3 && took < 10, "gave up after %g s", took);
    cr_expect(strstr(hw_error(), "worker 2 waited") != NULL, "%s", hw_error());
    cr_expect(strstr(hw_error(), "for worker 1") != NULL, "%s", hw_error());
    cr_expect(strstr(hw_error(), "worker 1 is stopped, stuck or gone") != NULL, "%s", hw_error());
    free(control);
}

typedef struct {
    staleness_gate gate;
    int status;
    atomic_int returned;
} waiter;

static void *wait_in_thread(void *arg) {
    waiter *w = arg;
    w->status = staleness_wait(&w->gate);
    atomic_store(&w->returned, 1);
    return NULL;
}

Test(staleness, a_stop_wakes_a_held_worker, .timeout = 30) {
    hogwild_control *control = control_new(2);
    atomic_store(&control->slots[0].epoch_steps, 2);
    waiter w = {.gate = gate_of(control, 2, 0, 0, 0)};  // no timeout: only the stop lets it go
    pthread_t thread;
    cr_assert_eq(pthread_create(&thread, NULL, wait_in_thread, &w), 0);
    pause_us(100000);
    cr_expect_eq(atomic_load(&w.returned), 0, "went on while 2 steps ahead in lockstep");
    double stopped = hw_now();
    hw_hogwild_stop(control);
    pthread_join(thread, NULL);
    cr_expect_eq(w.status, HW_OK);
    cr_expect(hw_hogwild_stopping(control));
    cr_expect_lt(hw_now() - stopped, 5.0);
    free(control);
}

Test(staleness, an_unbounded_gate_never_waits) {
    hogwild_control *control = control_new(2);
    atomic_store(&control->slots[0].epoch_steps, 1000);
    staleness_gate gate = gate_of(control, 2, 0, HW_STALENESS_UNBOUNDED, 0.001);
    cr_expect_eq(staleness_wait(&gate), HW_OK);
    staleness_step_done(&gate);
    cr_expect_eq(atomic_load(&control->slots[0].epoch_steps), 1000, "an unbounded run counts nothing");
    staleness_gate alone = gate_of(control, 1, 0, 0, 0.001);
    cr_expect_eq(staleness_wait(&alone), HW_OK, "one worker has nobody to wait for");
    free(control);
}

// ---- the option ----

static int parse_staleness(hw_train_config *config, cli_parsed *parsed, const char *value) {
    const char *argv[] = {"hogwild", "--max-staleness", value, NULL};
    cli_train_defaults(config);
    int status = cli_parse(&cli_train_command, 3, (char **)argv, config, parsed);
    cli_parsed_free(parsed);
    return status;
}

Test(staleness, option_takes_whole_steps_or_none) {
    hw_train_config c;
    cli_parsed p;
    cli_train_defaults(&c);
    cr_expect_eq(c.max_staleness, HW_STALENESS_UNBOUNDED, "no bound by default");
    cr_assert_eq(parse_staleness(&c, &p, "0"), HW_EXIT_OK, "%s", p.error);
    cr_expect_eq(c.max_staleness, 0);
    cr_assert_eq(parse_staleness(&c, &p, "17"), HW_EXIT_OK, "%s", p.error);
    cr_expect_eq(c.max_staleness, 17);
    cr_assert_eq(parse_staleness(&c, &p, "none"), HW_EXIT_OK, "%s", p.error);
    cr_expect_eq(c.max_staleness, HW_STALENESS_UNBOUNDED);
    const char *bad[] = {"-1", "1.5", "two", "3x", "+2", " 2", "99999999999", "1073741825"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_expect_eq(parse_staleness(&c, &p, bad[i]), HW_EXIT_USAGE, "'%s' accepted", bad[i]);
        cr_expect(strstr(p.error, "--max-staleness expects a whole number of steps from 0 (lockstep)") != NULL,
                  "'%s': %s", bad[i], p.error);
    }
}

// The epochs a stopped run saves (hw_hogwild_epochs_trained): a worker killed between the last
// step of its shard and its epoch report counts the epoch by its samples; the fewest over the
// workers, whose shards differ by one sample (hw_sampler_shard_size: 7 samples, 2 workers: 4, 3).
Test(staleness, a_worker_stopped_before_its_epoch_report_counts_the_epoch_by_its_samples) {
    hogwild_control *control = control_new(2);
    hw_train_config config;
    hw_train_config_init(&config);
    config.workers = 2;
    int64_t shard0 = hw_sampler_shard_size(7, 2, 0), shard1 = hw_sampler_shard_size(7, 2, 1);
    cr_assert_eq(shard0 + shard1, 7);
    atomic_store(&control->slots[0].epochs_done, 1);
    atomic_store(&control->slots[0].samples, shard0);
    atomic_store(&control->slots[1].samples, shard1 - 1);  // one sample short of its shard
    cr_expect_eq(hw_hogwild_epochs_trained(control, &config, 7, 2), 0);
    atomic_store(&control->slots[1].samples, shard1);  // its last step landed, its report did not
    cr_expect_eq(hw_hogwild_epochs_trained(control, &config, 7, 2), 1);
    atomic_store(&control->slots[0].samples, 2 * shard0 + 1);  // into its third epoch's shard
    atomic_store(&control->slots[1].samples, 2 * shard1);
    cr_expect_eq(hw_hogwild_epochs_trained(control, &config, 7, 2), 2);
    free(control);
}
