// Tests of the learning-rate schedules (src/nn/lr_schedule.c): each formula against the rates
// torch.optim.lr_scheduler gives (tests/tools/lr_schedule_reference.py printed them), the warm-up,
// and the parser's refusals.
#include "hw/lr_schedule.h"
#include "hw/err.h"

#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "lr_schedule_reference.h"

// The reference run: 5 epochs of 100 samples, batches of 10, base rate 0.1.
enum { EPOCH = 100, BATCH = 10, RUN = 500 };
static const double BASE = 0.1;

static hw_lr_schedule parsed(const char *text) {
    hw_lr_schedule s;
    cr_assert_eq(hw_lr_schedule_parse(text, &s), HW_OK, "%s: %s", text, hw_error());
    return s;
}

static void expect_rate(double got, double want, const char *what, long at) {
    cr_expect(fabs(got - want) <= 1e-12 * BASE, "%s at %ld: %.17g, torch %.17g", what, at, got, want);
}

// Stepped once per epoch in torch: the rate of epoch e is hogwild's anywhere inside it.
Test(lr_schedule, step_and_exponential_match_torch_per_epoch) {
    hw_lr_schedule step = parsed("step:2:0.5"), exponential = parsed("exponential:0.9");
    for (long e = 0; e < 5; e++) {
        for (long s = e * EPOCH; s < (e + 1) * EPOCH; s += 37) {
            expect_rate(hw_lr_at(&step, BASE, s, EPOCH, RUN), torch_step_2_half[e], "step:2:0.5", s);
            expect_rate(hw_lr_at(&exponential, BASE, s, EPOCH, RUN), torch_exponential_0_9[e], "exponential:0.9", s);
        }
    }
}

// Stepped once per batch in torch: the rate after k steps is hogwild's at k batches of samples.
Test(lr_schedule, linear_and_cosine_match_torch_per_batch) {
    hw_lr_schedule linear = parsed("linear"), cosine = parsed("cosine");
    for (long k = 0; k <= RUN / BATCH; k++) {
        expect_rate(hw_lr_at(&linear, BASE, k * BATCH, EPOCH, RUN), torch_linear[k], "linear", k * BATCH);
        expect_rate(hw_lr_at(&cosine, BASE, k * BATCH, EPOCH, RUN), torch_cosine[k], "cosine", k * BATCH);
    }
    // Past the run's end (a resumed run given fewer epochs than it has seen) they stay at 0.
    cr_expect_eq(hw_lr_at(&linear, BASE, RUN + 10, EPOCH, RUN), 0);
    cr_expect(fabs(hw_lr_at(&cosine, BASE, RUN + 10, EPOCH, RUN)) < 1e-18, "cosine past the end");
}

Test(lr_schedule, constant_is_the_base_rate) {
    hw_lr_schedule constant = parsed("constant");
    cr_expect(hw_lr_is_constant(&constant));
    for (long s = 0; s <= RUN; s += 50) cr_expect_eq(hw_lr_at(&constant, BASE, s, EPOCH, RUN), BASE);
}

// Linear from 0 over the warm-up's samples, then the schedule's own rate.
Test(lr_schedule, warmup_rises_linearly_from_zero_then_hands_over) {
    hw_lr_schedule s = parsed("exponential:0.5");
    s.warmup = 200;
    cr_expect(!hw_lr_is_constant(&s));
    cr_expect_eq(hw_lr_at(&s, BASE, 0, EPOCH, RUN), 0);
    expect_rate(hw_lr_at(&s, BASE, 50, EPOCH, RUN), BASE * 0.25, "warm-up", 50);
    expect_rate(hw_lr_at(&s, BASE, 150, EPOCH, RUN), BASE * 0.5 * 0.75, "warm-up times epoch 1's", 150);
    expect_rate(hw_lr_at(&s, BASE, 200, EPOCH, RUN), BASE * 0.25, "after the warm-up", 200);
    hw_lr_schedule c = parsed("constant");
    c.warmup = 100;
    cr_expect(!hw_lr_is_constant(&c), "a warm-up makes the constant rate change");
}

Test(lr_schedule, format_reads_back) {
    const char *texts[] = {"constant", "step:3:0.25", "exponential:0.9", "linear", "cosine"};
    for (int i = 0; i < 5; i++) {
        char out[64];
        hw_lr_schedule s = parsed(texts[i]);
        hw_lr_schedule_format(&s, out, sizeof out);
        cr_expect_str_eq(out, texts[i]);
    }
}

Test(lr_schedule, bad_schedules_are_refused_naming_what_is_wrong) {
    struct {
        const char *text, *message;
    } bad[] = {
        {"cosin", "unknown learning-rate schedule 'cosin': expected constant, step:EVERY:GAMMA"},
        {"linear:2", "unknown learning-rate schedule 'linear:2'"},
        {"exponential", "unknown learning-rate schedule 'exponential'"},
        {"exponential:1.5", "its factor must be a decimal number in (0, 1], got '1.5'"},
        {"exponential:0", "got '0'"},
        {"exponential:0x0.8", "got '0x0.8'"},
        {"exponential: 0.9", "got ' 0.9'"},
        {"exponential:nan", "got 'nan'"},
        {"step:0:0.5", "EVERY, a whole number of epochs from 1"},
        {"step:1.5:0.5", "EVERY, a whole number of epochs from 1"},
        {"step:2", "EVERY, a whole number of epochs from 1"},
        {"step:99999999999:0.5", "EVERY, a whole number of epochs from 1"},
        {"step:2:", "got ''"},
        {"", "unknown learning-rate schedule ''"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        hw_lr_schedule s;
        cr_expect_eq(hw_lr_schedule_parse(bad[i].text, &s), HW_ERR, "'%s' was accepted", bad[i].text);
        cr_expect(strstr(hw_error(), bad[i].message), "'%s': %s", bad[i].text, hw_error());
    }
}
