// DataParallel: one step over K replicas equals one single-replica step over the whole batch,
// up to float rounding (issue: "With the same seed and data order, one DataParallel step over K
// replicas equals one single-replica step over the whole batch").
//
// The networks here have no dropout: each replica draws its own dropout masks, so with dropout
// the two steps differ by design, not by rounding.
#include "hw/err.h"
#include "hw/nn.h"
#include "hw/optim.h"
#include "hw/option.h"
#include "hw/rng.h"
#include "hw/train.h"
#include "hw/dataparallel.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *small_cnn = "input 1 12 12\n"
                               "conv2d 4 3\n"
                               "maxpool2d 2\n"
                               "relu\n"
                               "flatten\n"
                               "linear 16\n"
                               "relu\n"
                               "linear 10\n"
                               "log_softmax\n";

typedef struct {
    hw_model model;
    float *x;
    uint8_t *y;
    int batch;
} fixture;

static void fixture_make(fixture *f, const char *text, int batch) {
    cr_assert_eq(hw_model_parse(&f->model, text, "test.model"), HW_OK, "%s", hw_error());
    cr_assert_eq(hw_model_alloc_weights(&f->model), HW_OK);
    hw_model_init_weights(&f->model, 7);
    int64_t sample = hw_shape_numel(f->model.input);
    f->batch = batch;
    f->x = malloc(sizeof(float) * (size_t)(sample * batch));
    f->y = malloc((size_t)batch);
    hw_rng rng;
    hw_rng_seed(&rng, 11, 0);
    for (int64_t i = 0; i < sample * batch; i++) f->x[i] = hw_rng_normal(&rng);
    for (int i = 0; i < batch; i++) f->y[i] = (uint8_t)hw_rng_below(&rng, 10);
}

static void fixture_free(fixture *f) {
    free(f->x);
    free(f->y);
    hw_model_free(&f->model);
}

// The reduced gradient of K replicas, copied out.
static float *dp_gradient(fixture *f, int replicas, float *loss) {
    hw_dp_team *team;
    cr_assert_eq(hw_dp_team_open(&team, &f->model, replicas, f->batch, 1), HW_OK, "%s", hw_error());
    const float *grads;
    *loss = hw_dp_team_step(team, f->x, f->y, f->batch, &grads);
    float *copy = malloc(sizeof(float) * f->model.n_weights);
    memcpy(copy, grads, sizeof(float) * f->model.n_weights);
    hw_dp_team_close(team);
    return copy;
}

// max |a - b| / (max |b| + tiny): rounding-level differences stay near 1e-7..1e-6.
static double relative_difference(const float *a, const float *b, size_t n) {
    double worst = 0, scale = 1e-12;
    for (size_t i = 0; i < n; i++) {
        worst = fmax(worst, fabs((double)a[i] - b[i]));
        scale = fmax(scale, fabs((double)b[i]));
    }
    return worst / scale;
}

static void check_equivalence(const char *text, int batch, int replicas) {
    fixture f;
    fixture_make(&f, text, batch);
    float loss_one, loss_many;
    float *one = dp_gradient(&f, 1, &loss_one);
    float *many = dp_gradient(&f, replicas, &loss_many);

    // A single-replica step is the plain model's forward + backward over the whole batch.
    hw_workspace ws;
    cr_assert_eq(hw_workspace_alloc(&ws, &f.model, batch, 1), HW_OK);
    float loss_plain = hw_cpu_forward(&f.model, &ws, f.x, f.y, batch, 1);
    hw_cpu_backward(&f.model, &ws, f.y, batch);
    cr_expect_eq(memcmp(one, ws.grads, sizeof(float) * f.model.n_weights), 0,
                 "one replica is exactly the single-process step");
    cr_expect_float_eq(loss_one, loss_plain, 1e-6);

    double diff = relative_difference(many, one, f.model.n_weights);
    cr_expect_lt(diff, 2e-6, "%d replicas over a batch of %d: gradient differs by %g (relative)", replicas, batch,
                 diff);
    cr_expect_float_eq(loss_many, loss_one, 1e-5 * fabsf(loss_one));

    // And so are the weights after one SGD step from each gradient.
    float *w_one = malloc(sizeof(float) * f.model.n_weights);
    float *w_many = malloc(sizeof(float) * f.model.n_weights);
    memcpy(w_one, f.model.weights, sizeof(float) * f.model.n_weights);
    memcpy(w_many, f.model.weights, sizeof(float) * f.model.n_weights);
    hw_sgd a, b;
    cr_assert_eq(hw_sgd_init(&a, f.model.n_weights, 0.1f, 0.5f, 0.0f, 0), HW_OK);
    cr_assert_eq(hw_sgd_init(&b, f.model.n_weights, 0.1f, 0.5f, 0.0f, 0), HW_OK);
    hw_sgd_step(&a, &f.model, w_one, one);
    hw_sgd_step(&b, &f.model, w_many, many);
    diff = relative_difference(w_many, w_one, f.model.n_weights);
    cr_expect_lt(diff, 1e-6, "weights after the step differ by %g", diff);

    hw_sgd_free(&a);
    hw_sgd_free(&b);
    free(w_one);
    free(w_many);
    hw_workspace_free(&ws);
    free(one);
    free(many);
    fixture_free(&f);
}

Test(dataparallel, mlp_three_replicas_equal_one) {
    check_equivalence("input 1 28 28\nflatten\nlinear 128\nrelu\nlinear 10\nlog_softmax\n", 64, 3);
}

Test(dataparallel, cnn_uneven_chunks_equal_one) { check_equivalence(small_cnn, 37, 4); }

Test(dataparallel, more_replicas_than_samples) {
    // 7 samples over 10 replicas: three replicas get nothing and must not count.
    check_equivalence(small_cnn, 7, 10);
}

Test(dataparallel, batch_of_one) { check_equivalence(small_cnn, 1, 2); }

Test(dataparallel, a_wrong_reduce_is_caught) {
    // The check above must be able to fail: an unweighted mean of uneven chunk gradients
    // (a plausible bug) differs from the full-batch gradient by far more than rounding.
    fixture f;
    fixture_make(&f, small_cnn, 5);
    float loss;
    float *full = dp_gradient(&f, 1, &loss);
    hw_workspace ws;
    cr_assert_eq(hw_workspace_alloc(&ws, &f.model, 5, 1), HW_OK);
    size_t n = f.model.n_weights;
    float *unweighted = calloc(n, sizeof(float));
    int64_t sample = hw_shape_numel(f.model.input);
    const int offsets[2] = {0, 3}, counts[2] = {3, 2};
    for (int k = 0; k < 2; k++) {
        hw_cpu_forward(&f.model, &ws, f.x + offsets[k] * sample, f.y + offsets[k], counts[k], 1);
        hw_cpu_backward(&f.model, &ws, f.y + offsets[k], counts[k]);
        for (size_t i = 0; i < n; i++) unweighted[i] += 0.5f * ws.grads[i];
    }
    cr_expect_gt(relative_difference(unweighted, full, n), 1e-3);
    free(unweighted);
    free(full);
    hw_workspace_free(&ws);
    fixture_free(&f);
}

// ---- the set-up's failure paths (issue #11, item 5) ----
// Before the fix, a failed hw_dp_team_open left barriers uninitialised (close then divided by a
// zero count: SIGFPE) or threads waiting on a barrier sized for replicas that never started
// (close waited forever). Each step is made to fail with HOGWILD_FAIL_DP_SETUP (tests only).

// Threads of this process now (/proc/self/task).
static int thread_count(void) {
    DIR *dir = opendir("/proc/self/task");
    cr_assert_not_null(dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) n += e->d_name[0] != '.';
    closedir(dir);
    return n;
}

static void check_setup_failure(const char *step, const char *expected) {
    fixture f;
    fixture_make(&f, small_cnn, 12);
    int threads_before = thread_count();
    setenv("HOGWILD_FAIL_DP_SETUP", step, 1);
    hw_dp_team *team = (hw_dp_team *)&f;  // anything but NULL: open must clear it
    cr_assert_eq(hw_dp_team_open(&team, &f.model, 4, f.batch, 1), HW_ERR, "%s: open succeeded", step);
    unsetenv("HOGWILD_FAIL_DP_SETUP");
    cr_expect_null(team, "%s: a failed open hands out no team", step);
    cr_expect_not_null(strstr(hw_error(), expected), "%s: the message \"%s\" should contain \"%s\"", step, hw_error(),
                       expected);
    // Every thread it started has left (joined), none waits on a barrier.
    cr_expect_eq(thread_count(), threads_before, "%s: threads left behind", step);
    hw_dp_team_close(team);  // NULL: nothing to do

    // The next open works: nothing of the failed one is in the way.
    float loss;
    free(dp_gradient(&f, 4, &loss));
    cr_expect(isfinite(loss));
    cr_expect_eq(thread_count(), threads_before);
    fixture_free(&f);
}

Test(dataparallel, setup_fails_cleanly_without_the_team) { check_setup_failure("team", "out of memory for a team"); }
Test(dataparallel, setup_fails_cleanly_without_the_replicas) {
    check_setup_failure("replicas", "out of memory for the state of 4 replicas");
}
Test(dataparallel, setup_fails_cleanly_without_the_first_workspace) {
    check_setup_failure("workspace:0", "DataParallel replica 0");
}
Test(dataparallel, setup_fails_cleanly_without_a_later_workspace) {
    check_setup_failure("workspace:3", "DataParallel replica 3");
}
Test(dataparallel, setup_fails_cleanly_without_the_start_barrier) {
    check_setup_failure("barrier:start", "cannot create the start barrier");
}
Test(dataparallel, setup_fails_cleanly_without_the_finish_barrier) {
    check_setup_failure("barrier:finish", "cannot create the finish barrier");
}
Test(dataparallel, setup_fails_cleanly_without_the_first_thread) {
    check_setup_failure("thread:1", "cannot start the thread of replica 1 of 4 (0 started)");
}
// Threads 1 and 2 run when thread 3 fails: they must leave, not wait at a barrier of 4.
Test(dataparallel, setup_fails_cleanly_without_a_later_thread, .timeout = 20) {
    check_setup_failure("thread:3", "cannot start the thread of replica 3 of 4 (2 started)");
}

// A workspace too large for memory, for real: no injection.
Test(dataparallel, setup_fails_cleanly_when_the_workspace_does_not_fit) {
    fixture f;
    fixture_make(&f, small_cnn, 12);
    hw_dp_team *team;
    int threads_before = thread_count();
    hw_option_hint_set(HW_OPTION_BATCH_SIZE, " (--batch-size)");  // as the command line names it
    cr_assert_eq(hw_dp_team_open(&team, &f.model, 2, 1 << 30, 1), HW_ERR);
    cr_expect_null(team);
    cr_expect_not_null(strstr(hw_error(), "out of memory"), "%s", hw_error());
    cr_expect_not_null(strstr(hw_error(), "of a batch of 1073741824 (--batch-size)"), "%s", hw_error());
    cr_expect_eq(thread_count(), threads_before);
    fixture_free(&f);
}
