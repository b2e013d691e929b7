// Tests of the rule that couples Hogwild copies of the weights (src/comm/rule.c), on copies held
// here: rounds of R copies, each taking its change since the agreed weights, the rule applied on
// every copy to the same sum, as the ranks' rounds do (src/comm/couple.c) without MPI.
#include "hw/comm.h"
#include "hw/err.h"

#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

enum { MAX_COPIES = 8, N = 3 };

// R copies of N weights coupled by one rule.
typedef struct {
    hw_couple_rule rule;
    int copies;
    float live[MAX_COPIES][N], agreed[MAX_COPIES][N], velocity[MAX_COPIES][N], sent[MAX_COPIES][N];
} world;

static void world_start(world *w, hw_couple_rule rule, int copies, float start) {
    memset(w, 0, sizeof *w);
    w->rule = rule;
    w->copies = copies;
    for (int c = 0; c < copies; c++) {
        for (int i = 0; i < N; i++) w->live[c][i] = w->agreed[c][i] = start;
    }
}

// One round: every copy sends live - agreed, the sum lands on every copy.
static void world_round(world *w) {
    float sum[N] = {0};
    for (int c = 0; c < w->copies; c++) {
        for (int i = 0; i < N; i++) {
            w->sent[c][i] = w->live[c][i] - w->agreed[c][i];
            sum[i] += w->sent[c][i];
        }
    }
    for (int c = 0; c < w->copies; c++) {
        hw_couple_rule_apply(w->rule, w->copies, w->velocity[c], sum, w->sent[c], w->agreed[c], w->live[c], NULL, N);
    }
}

// Along a steep direction of the loss (minimum at 0), every copy corrects the agreed weights'
// error all the way within a round: the limit of a large curvature. Returns |agreed| after
// `rounds` rounds from 1, checking that the copies agree bit for bit.
static double steep_direction_error(hw_couple_rule rule, int copies, int rounds) {
    world w;
    world_start(&w, rule, copies, 1.0f);
    for (int r = 0; r < rounds; r++) {
        for (int c = 0; c < copies; c++) {
            for (int i = 0; i < N; i++) w.live[c][i] = 0;  // the copy's own workers reach the minimum
        }
        world_round(&w);
        for (int c = 1; c < copies; c++) cr_assert_eq(memcmp(w.agreed[c], w.agreed[0], sizeof w.agreed[0]), 0);
    }
    return fabs(w.agreed[0][0]);
}

// The sum corrects the common error once per copy: with 2 copies it comes back mirrored every
// round, with 4 it grows 3 times a round. Block momentum settles it.
Test(couple_rule, the_sum_overshoots_a_steep_direction_and_momentum_settles_it) {
    cr_expect_float_eq(steep_direction_error(HW_COUPLE_SUM, 2, 1), 1.0, 1e-6, "2 copies: mirrored");
    cr_expect_float_eq(steep_direction_error(HW_COUPLE_SUM, 2, 31), 1.0, 1e-6, "2 copies: never decays");
    cr_expect_float_eq(steep_direction_error(HW_COUPLE_SUM, 4, 5), 243.0, 1e-3, "4 copies: 3^5");
    for (int copies = 2; copies <= 8; copies *= 2) {
        double error = steep_direction_error(HW_COUPLE_MOMENTUM, copies, 30);
        cr_expect_lt(error, 1e-6, "%d copies: block momentum leaves %g of the error after 30 rounds", copies, error);
    }
}

// Along a direction where the loss keeps falling, every copy moves by the same d a round: the
// sum moves the agreed weights by R d a round (one node with all the workers). Block momentum
// reaches the same step, and trails the sum by (R - 1)^2 d in all, not more.
Test(couple_rule, momentum_keeps_the_sums_progress_where_the_changes_add_up) {
    const float d = 0.01f;
    for (int copies = 2; copies <= 8; copies *= 2) {
        world sum_world, momentum;
        world_start(&sum_world, HW_COUPLE_SUM, copies, 0);
        world_start(&momentum, HW_COUPLE_MOMENTUM, copies, 0);
        const int rounds = 200;
        double last_step = 0;
        for (int r = 0; r < rounds; r++) {
            double before = momentum.agreed[0][0];
            for (int c = 0; c < copies; c++) {
                for (int i = 0; i < N; i++) {
                    sum_world.live[c][i] += d;
                    momentum.live[c][i] += d;
                }
            }
            world_round(&sum_world);
            world_round(&momentum);
            last_step = momentum.agreed[0][0] - before;
        }
        cr_expect_float_eq(sum_world.agreed[0][0], rounds * copies * d, 1e-3, "%d copies: the sum", copies);
        cr_expect_float_eq(last_step, copies * d, 1e-5, "%d copies: a round's step %g", copies, last_step);
        double trail = sum_world.agreed[0][0] - momentum.agreed[0][0];
        double expected = (copies - 1.0) * (copies - 1.0) * d;
        cr_expect_float_eq(trail, expected, 1e-3 + 1e-3 * expected, "%d copies: trails by %g", copies, trail);
    }
}

// Every copy's live weights hold the agreed ones plus what it has not sent: a copy's own change
// is never lost nor counted twice, whatever the rule.
Test(couple_rule, a_copy_keeps_its_unsent_change_under_either_rule) {
    hw_couple_rule rules[] = {HW_COUPLE_SUM, HW_COUPLE_MOMENTUM};
    for (int k = 0; k < 2; k++) {
        world w;
        world_start(&w, rules[k], 3, 0.5f);
        for (int r = 0; r < 10; r++) {
            for (int c = 0; c < 3; c++) w.live[c][1] += 0.1f * (float)(c + 1) * (r % 2 ? -1.0f : 1.0f);
            world_round(&w);
            for (int c = 0; c < 3; c++) cr_expect_float_eq(w.live[c][1], w.agreed[c][1], 1e-6);
        }
    }
}

Test(couple_rule, names_parse_and_an_unknown_one_is_named) {
    hw_couple_rule rule = HW_COUPLE_SUM;
    cr_assert_eq(hw_couple_rule_parse("momentum", &rule), HW_OK);
    cr_expect_eq(rule, HW_COUPLE_MOMENTUM);
    cr_assert_eq(hw_couple_rule_parse("sum", &rule), HW_OK);
    cr_expect_eq(rule, HW_COUPLE_SUM);
    cr_expect_str_eq(hw_couple_rule_name(HW_COUPLE_MOMENTUM), "momentum");
    cr_expect_eq(hw_couple_rule_parse("mean", &rule), HW_ERR);
    cr_expect(strstr(hw_error(), "'mean'") != NULL, "%s", hw_error());
}
