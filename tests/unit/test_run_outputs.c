// Tests of the run's outputs (src/train/run_outputs.c) on their own: a checkpoint is never written from weights
// that are not finite, whichever save asks for it (epoch end, end of run, Ctrl-C), so the file
// keeps the last good checkpoint (issue #11, item 3). The runs that diverge are in
// test_e2e_diverge.c.
#include "data_util.h"
#include "cli/train_options.h"
#include "hw/ckpt.h"
#include "hw/err.h"
#include "hw/nn.h"
#include "hw/train.h"
#include "hw/run_outputs.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64];

static void make_dir(void) {
    snprintf(dir, sizeof dir, "/tmp/hw-run-log-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

static void remove_dir(void) {
    char command[128];
    snprintf(command, sizeof command, "rm -rf '%s'", dir);
    cr_expect_eq(system(command), 0);
}

TestSuite(run_outputs, .init = make_dir, .fini = remove_dir);

static void check_refused(float bad_value) {
    hw_train_config config;
    cli_train_defaults(&config);
    char path[128];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    config.save_path = path;
    hw_train_inputs in = {0};
    cr_assert_eq(hw_model_parse(&in.model, "input 1 4 4\nflatten\nlinear 10\nlog_softmax\n", "t.model"), HW_OK, "%s",
                 hw_error());
    cr_assert_eq(hw_model_alloc_weights(&in.model), HW_OK);
    hw_model_init_weights(&in.model, 3);
    hw_run_outputs log = {.config = &config, .in = &in};

    // A good checkpoint first.
    cr_assert_eq(hw_run_outputs_save(&log, in.model.weights, 1, 100), HW_OK, "%s", hw_error());
    size_t good_n;
    uint8_t *good = read_bytes(path, &good_n);

    float *bad = malloc(sizeof(float) * in.model.n_weights);
    memcpy(bad, in.model.weights, sizeof(float) * in.model.n_weights);
    bad[in.model.n_weights / 2] = bad_value;
    cr_expect_eq(hw_run_outputs_save(&log, bad, 2, 200), HW_ERR, "weights with %g were saved", (double)bad_value);
    cr_expect_not_null(strstr(hw_error(), "not finite"), "%s", hw_error());
    cr_expect_not_null(strstr(hw_error(), path), "%s", hw_error());
    cr_expect_not_null(strstr(hw_error(), "Try a lower learning rate than this run's 0.01"), "%s", hw_error());
    size_t after_n;
    uint8_t *after = read_bytes(path, &after_n);
    cr_expect(after_n == good_n && memcmp(after, good, good_n) == 0, "the good checkpoint was changed");
    free(after);
    free(good);
    free(bad);
    hw_model_free(&in.model);
}

Test(run_outputs, a_nan_weight_is_never_saved) { check_refused(NAN); }
Test(run_outputs, an_infinite_weight_is_never_saved) { check_refused(-INFINITY); }

// The rule of a diverged run (hw_loss_diverged): NaN, inf, or a loss past 1e4; chance-level and
// high-but-learning losses are not.
Test(run_outputs, the_divergence_rule) {
    cr_expect(hw_loss_diverged(NAN));
    cr_expect(hw_loss_diverged(INFINITY));
    cr_expect(hw_loss_diverged(2.5e23));
    cr_expect(hw_loss_diverged(1.0001e4));
    cr_expect(!hw_loss_diverged(1e4));
    cr_expect(!hw_loss_diverged(2.302585));
    cr_expect(!hw_loss_diverged(85.0));
    cr_expect(!hw_loss_diverged(0.0));
    char text[48];
    hw_loss_describe(text, sizeof text, NAN);
    cr_expect_str_eq(text, "nan");
    hw_loss_describe(text, sizeof text, -INFINITY);
    cr_expect_str_eq(text, "infinite");
    hw_loss_describe(text, sizeof text, 2.5e23);
    cr_expect_str_eq(text, "2.5e+23 (above 1e+04)");
}
