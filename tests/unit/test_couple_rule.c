// Tests of the rule that couples Hogwild copies of the weights (src/comm/couple_rule.c), on copies held
// here: rounds of R copies, each taking its change since the agreed weights, the rule applied on
// every copy to the same sum, as the ranks' rounds do (src/comm/mpi/hogwild_coupling.c) without MPI.
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
    int ahead[MAX_COPIES];
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
        hw_couple_rule_apply(w->rule, w->copies, w->velocity[c], &w->ahead[c], sum, w->sent[c], w->agreed[c],
                             w->live[c], NULL, N);
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

// Every copy of the world (start 1, minimum 0) ends a round at the minimum. The round's look-ahead
// goes past it by beta (1 - 1/R): a settle gives the point every copy reached, and the rounds'
// weights go on from it as if no settle had happened.
static void settle_world(world *w) {
    for (int c = 0; c < w->copies; c++)
        hw_couple_rule_settle(w->rule, w->copies, w->velocity[c], &w->ahead[c], w->agreed[c], N);
}

Test(couple_rule, a_settle_gives_the_rounds_weights_not_the_look_ahead) {
    for (int copies = 2; copies <= 8; copies *= 2) {
        world w;
        world_start(&w, HW_COUPLE_MOMENTUM, copies, 1.0f);
        for (int c = 0; c < copies; c++) {
            for (int i = 0; i < N; i++) w.live[c][i] = 0;
        }
        world_round(&w);
        double beta = 1.0 - 1.0 / copies;
        cr_expect_float_eq(w.agreed[0][0], -beta, 1e-6, "%d copies: the look-ahead after the round", copies);
        settle_world(&w);
        cr_expect_float_eq(w.agreed[0][0], 0.0, 1e-6, "%d copies: settled at %g, not at the minimum every copy reached",
                           copies, (double)w.agreed[0][0]);
        settle_world(&w);
        cr_expect_float_eq(w.agreed[0][0], 0.0, 1e-6, "%d copies: a second settle moved it to %g", copies,
                           (double)w.agreed[0][0]);
    }
    world sum_world;
    world_start(&sum_world, HW_COUPLE_SUM, 2, 1.0f);
    for (int c = 0; c < 2; c++) sum_world.live[c][0] = 0.25f;
    world_round(&sum_world);
    float before = sum_world.agreed[0][0];
    settle_world(&sum_world);
    cr_expect_eq(sum_world.agreed[0][0], before, "the sum has no look-ahead: a settle leaves it");
}

// The rounds' weights between epoch ends (a mid-epoch evaluation of the copies on several GPUs):
// what a settle would give, on every copy alike, while the world trains on as if none had been
// taken: its agreed weights, momentum and look-ahead flag are left as they were. Once settled,
// they are the agreed weights themselves. Under the sum, the agreed weights at every point.
Test(couple_rule, the_rounds_weights_are_a_settle_that_changes_nothing) {
    const hw_couple_rule rules[2] = {HW_COUPLE_MOMENTUM, HW_COUPLE_SUM};
    for (int r = 0; r < 2; r++) {
        world w;
        world_start(&w, rules[r], 4, 1.0f);
        for (int round = 0; round < 3; round++) {
            for (int c = 0; c < w.copies; c++) {
                for (int i = 0; i < N; i++) w.live[c][i] -= 0.1f * (float)(c + 1) * (float)(i + 1) / (float)(round + 1);
            }
            world_round(&w);
        }
        world before = w;
        float weights[MAX_COPIES][N];
        for (int c = 0; c < w.copies; c++)
            hw_couple_rule_weights(w.rule, w.copies, w.velocity[c], w.ahead[c], w.agreed[c], weights[c], N);
        cr_assert_eq(memcmp(&w, &before, sizeof w), 0, "rule %s: the world changed", hw_couple_rule_name(w.rule));
        for (int c = 1; c < w.copies; c++) cr_expect_eq(memcmp(weights[c], weights[0], sizeof weights[0]), 0);
        settle_world(&w);
        cr_expect_eq(memcmp(weights[0], w.agreed[0], sizeof weights[0]), 0, "rule %s: not what a settle gives",
                     hw_couple_rule_name(w.rule));
        if (w.rule == HW_COUPLE_MOMENTUM) {
            cr_expect_neq(memcmp(weights[0], before.agreed[0], sizeof weights[0]), 0, "the look-ahead is in them");
        }
        float settled[N];
        hw_couple_rule_weights(w.rule, w.copies, w.velocity[0], w.ahead[0], w.agreed[0], settled, N);
        cr_expect_eq(memcmp(settled, w.agreed[0], sizeof settled), 0, "rule %s: settled, not the agreed weights",
                     hw_couple_rule_name(w.rule));
    }
}

// The same sums land on two worlds, one settled after round 3: from the next round on, its agreed
// weights are the other's (the momentum is kept), and right after the settle they trail by the
// look-ahead beta v alone.
Test(couple_rule, a_settle_keeps_the_momentum_of_the_rounds) {
    float v_plain[N] = {0}, v_settled[N] = {0}, plain[N] = {0}, settled[N] = {0}, live[N] = {0}, sent[N] = {0};
    int ahead_plain = 0, ahead_settled = 0;
    const int copies = 4;
    const double beta = 1.0 - 1.0 / copies;
    for (int round = 0; round < 8; round++) {
        float sum[N];
        for (int i = 0; i < N; i++) sum[i] = 0.02f * (float)(i + 1) * (round % 3 ? 1.0f : -0.4f);
        hw_couple_rule_apply(HW_COUPLE_MOMENTUM, copies, v_plain, &ahead_plain, sum, sent, plain, live, NULL, N);
        hw_couple_rule_apply(HW_COUPLE_MOMENTUM, copies, v_settled, &ahead_settled, sum, sent, settled, live, NULL, N);
        if (round == 3) {
            hw_couple_rule_settle(HW_COUPLE_MOMENTUM, copies, v_settled, &ahead_settled, settled, N);
            for (int i = 0; i < N; i++) {
                cr_expect_float_eq(plain[i] - settled[i], beta * v_plain[i], 1e-6, "weight %d: trails by %g", i,
                                   (double)(plain[i] - settled[i]));
            }
        } else {
            for (int i = 0; i < N; i++) {
                cr_expect_float_eq(settled[i], plain[i], 1e-6, "round %d, weight %d: %.7g settled, %.7g not", round, i,
                                   (double)settled[i], (double)plain[i]);
            }
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

// ---- the wire: the rounds' changes in bfloat16 (hw_couple_pack, rule.c) ----

Test(couple_rule, bfloat16_rounds_to_nearest_even_and_keeps_nan_and_infinity) {
    cr_expect_eq(hw_bf16_from_float(1.0f), 0x3f80);
    cr_expect_eq(hw_bf16_from_float(-2.0f), 0xc000);
    cr_expect_eq(hw_bf16_from_float(1.0f + 0x1p-8f), 0x3f80, "a tie goes to the even significand (down)");
    cr_expect_eq(hw_bf16_from_float(1.0f + 0x3p-8f), 0x3f82, "a tie goes to the even significand (up)");
    cr_expect_eq(hw_bf16_from_float(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81, "above the tie rounds up");
    cr_expect_eq(hw_bf16_from_float(3.0e38f), 0x7f62);
    cr_expect_eq(hw_bf16_from_float(3.4e38f), 0x7f80, "past the largest bfloat16: infinity");
    cr_expect_eq(hw_bf16_from_float(INFINITY), 0x7f80);
    cr_expect(isnan(hw_bf16_to_float(hw_bf16_from_float(NAN))), "a NaN must stay a NaN, not become infinity");
    float tiny = hw_bf16_to_float(hw_bf16_from_float(1e-30f));
    cr_expect(fabsf(tiny - 1e-30f) <= 1e-30f * 0x1p-8f, "1e-30 (a weight's smallest steps) came back as %g",
              (double)tiny);
    for (float x = -3.0f; x < 3.0f; x += 0.0137f) {
        float back = hw_bf16_to_float(hw_bf16_from_float(x));
        cr_expect_leq(fabsf(back - x), fabsf(x) * 0x1p-8f, "%g came back as %g", (double)x, (double)back);
    }
}

// One round as the ranks run it: each copy packs its change, the bfloat16 sum over the copies (in
// rank order, as a reduction may), unpacked, then the rule on every copy.
static void world_round_wire(world *w) {
    uint16_t wire[MAX_COPIES][N] = {{0}}, sum_wire[N];
    for (int c = 0; c < w->copies; c++) hw_couple_pack(wire[c], w->sent[c], w->live[c], w->agreed[c], N);
    memcpy(sum_wire, wire[0], sizeof sum_wire);
    for (int c = 1; c < w->copies; c++) hw_couple_wire_add(wire[c], sum_wire, N);
    float sum[N];
    hw_couple_unpack(sum, sum_wire, N);
    for (int c = 0; c < w->copies; c++) {
        hw_couple_rule_apply(w->rule, w->copies, w->velocity[c], &w->ahead[c], sum, w->sent[c], w->agreed[c],
                             w->live[c], NULL, N);
    }
}

// A change bfloat16 cannot hold goes in pieces over the next rounds: nothing is lost, and the
// copies stay agreed with each other all along.
Test(couple_rule, what_bfloat16_keeps_back_goes_with_the_next_rounds) {
    world w;
    world_start(&w, HW_COUPLE_SUM, 2, 0.5f);
    const float change = 0.1234567f;
    w.live[0][0] += change;
    float wanted = w.live[0][0];
    world_round_wire(&w);
    cr_expect_neq(w.agreed[0][0], wanted, "the first round should carry only bfloat16's part of the change");
    cr_expect_neq(w.live[0][0], w.agreed[0][0], "the copy that changed keeps the rest");
    for (int r = 0; r < 4; r++) world_round_wire(&w);
    for (int c = 0; c < 2; c++) {
        cr_expect_eq(w.agreed[c][0], wanted, "copy %d: agreed %.9g, the change made %.9g", c, (double)w.agreed[c][0],
                     (double)wanted);
        cr_expect_eq(w.live[c][0], wanted, "copy %d: live %.9g", c, (double)w.live[c][0]);
    }
}

// Under the default rule with changes every round, the copies' agreed weights stay the same bits,
// and they follow the float rounds' within bfloat16's rounding.
Test(couple_rule, the_wire_keeps_the_copies_agreed_and_close_to_float_rounds) {
    world w, f;
    world_start(&w, HW_COUPLE_MOMENTUM, 4, 0.25f);
    world_start(&f, HW_COUPLE_MOMENTUM, 4, 0.25f);
    for (int r = 0; r < 50; r++) {
        for (int c = 0; c < 4; c++) {
            for (int i = 0; i < N; i++) {
                float step = 0.001f * (float)(c + 1) * (float)(i + 1) * (r % 3 ? 1.0f : -0.5f);
                w.live[c][i] += step;
                f.live[c][i] += step;
            }
        }
        world_round_wire(&w);
        world_round(&f);
        for (int c = 1; c < 4; c++) cr_assert_eq(memcmp(w.agreed[c], w.agreed[0], sizeof w.agreed[0]), 0);
    }
    for (int i = 0; i < N; i++) {
        cr_expect_float_eq(w.agreed[0][i], f.agreed[0][i], 2e-3 * fabsf(f.agreed[0][i] - 0.25f) + 1e-6,
                           "weight %d: %.7g in bfloat16 rounds, %.7g in float ones", i, (double)w.agreed[0][i],
                           (double)f.agreed[0][i]);
    }
}
