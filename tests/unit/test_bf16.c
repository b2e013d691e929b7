// Tests of the bfloat16 weights of --weights bf16 (include/hw/bf16.h, hw_sgd_step_bf16 in
// src/nn/exec.c): stochastic rounding is unbiased (the mean error over 10^6 seeded draws within 3
// standard errors of 0, drawn as one step over 10^6 weights and as 10^6 steps of one weight),
// values that are bfloat16 already never move, every bfloat16 survives the trip through a float,
// and the step writes one of the two bfloat16 around the float rule's result, the same for the same
// key.
#include "hw/bf16.h"
#include "hw/err.h"
#include "hw/optim.h"
#include "hw/rng.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

enum { DRAWS = 1000000 };

// The bfloat16 just below |x| and just above it, with x's sign (the two values x may round to).
static void neighbours(float x, float *down, float *up) {
    uint32_t u = hw_float_bits(x) & 0xFFFF0000u;
    float truncated;
    memcpy(&truncated, &u, sizeof truncated);
    *down = truncated;
    *up = hw_bf16_to_float((uint16_t)((u >> 16) + 1));
}

// Mean error of 10^6 roundings of x, either with one key over 10^6 indices (`per_index`: one step
// over 10^6 weights) or with 10^6 keys from a seeded PCG32 at one index (one weight's 10^6 steps),
// against 3 standard errors; every result is one of x's two neighbours, and both occur where x
// lies strictly between them. The draws are seeded, so the test checks one fixed sample: an
// unbiased rounding leaves a value's mean beyond 3 standard errors with probability 0.3% (so a
// new seed may need checking), while a biased one (truncation, or rounding to nearest) misses by
// hundreds of them.
static void expect_unbiased(float x, int per_index) {
    hw_rng rng;
    hw_rng_seed(&rng, 1, 0x62663136);  // a worker's stream (hogwild_update.c) under seed 1
    uint64_t key = (uint64_t)hw_rng_u32(&rng) << 32 | hw_rng_u32(&rng);
    float down, up;
    neighbours(x, &down, &up);
    int exact = down == x;
    double sum = 0, sum_sq = 0;
    long ups = 0;
    for (long i = 0; i < DRAWS; i++) {
        if (!per_index) key = (uint64_t)hw_rng_u32(&rng) << 32 | hw_rng_u32(&rng);
        uint32_t bits = hw_bf16_random_bits(key, per_index ? (size_t)i : 17);
        float r = hw_bf16_to_float(hw_bf16_round_stochastic(x, bits));
        cr_assert(r == down || r == up, "%a rounded to %a, not to %a or %a", (double)x, (double)r, (double)down,
                  (double)up);
        ups += r == up;
        double e = (double)r - (double)x;
        sum += e;
        sum_sq += e * e;
    }
    double mean = sum / DRAWS, var = sum_sq / DRAWS - mean * mean;
    double se = sqrt(var > 0 ? var / DRAWS : 0);
    if (exact) {
        cr_expect_eq(ups, 0, "%a is a bfloat16, yet rounded up %ld times", (double)x, ups);
        cr_expect_eq(sum, 0.0, "%a is a bfloat16, yet moved", (double)x);
        return;
    }
    cr_expect(ups > 0 && ups < DRAWS, "%a: rounded up %ld of %d times: not stochastic", (double)x, ups, DRAWS);
    cr_expect(fabs(mean) <= 3 * se, "%a (%s): mean error %.6g, 3 standard errors %.6g (gap %.6g)", (double)x,
              per_index ? "one key, 10^6 weights" : "10^6 keys, one weight", mean, 3 * se, (double)up - (double)down);
}

static const float values[] = {
    1.0f,                      // a bfloat16
    -2.0f,                     // a negative bfloat16
    0.0f,                      // zero
    0.1f,                      // between two: 0x3DCCCCCD
    1.0f + 0x1p-9f,            // exactly half a gap above 1
    1.0f + 0x1p-20f,           // just above 1 (rounds up rarely)
    -0.3f,                     // negative
    -123.456f,                 // negative, large-ish
    3.14159265f,               // pi
    1e-40f,                    // subnormal float (bfloat16 has subnormals at the same scale)
    -2.5e-39f,                 // negative subnormal
    1.17549435e-38f + 1e-44f,  // just past the smallest normal
    1e30f,                     // large
    -1e38f,                    // near the largest finite bfloat16 (3.39e38), below it
};

Test(bf16, stochastic_rounding_is_unbiased_across_weights) {
    for (size_t v = 0; v < sizeof values / sizeof values[0]; v++) expect_unbiased(values[v], 1);
}

Test(bf16, stochastic_rounding_is_unbiased_across_steps) {
    for (size_t v = 0; v < sizeof values / sizeof values[0]; v++) expect_unbiased(values[v], 0);
}

// Truncation (no random bits added) is what a biased store would do: a test that cannot tell the
// two apart tests nothing. Its mean error on 0.1f is -(0.1 - down), far beyond 3 standard errors of 0.
Test(bf16, truncation_is_biased) {
    float down, up;
    neighbours(0.1f, &down, &up);
    cr_assert_lt(down, 0.1f);
    cr_expect_eq(hw_bf16_to_float(hw_bf16_round_stochastic(0.1f, 0)), down, "no random bits: the value below");
    cr_expect_eq(hw_bf16_to_float(hw_bf16_round_stochastic(0.1f, 0xFFFF)), up, "all random bits: the value above");
}

// Every bfloat16 but the NaNs: widened and rounded back, by nearest or stochastically with any
// bits, it is itself; a NaN stays a NaN; infinities stay infinite.
Test(bf16, every_bfloat16_round_trips_exactly) {
    const uint32_t bits[] = {0, 1, 0x7FFF, 0x8000, 0xFFFF, 0x12345678, 0xDEADBEEF};
    for (uint32_t h = 0; h <= 0xFFFF; h++) {
        float x = hw_bf16_to_float((uint16_t)h);
        if (isnan(x)) {
            cr_assert(isnan(hw_bf16_to_float(hw_bf16_from_float(x))), "NaN %04x became a number", h);
            for (size_t b = 0; b < sizeof bits / sizeof bits[0]; b++) {
                cr_assert(isnan(hw_bf16_to_float(hw_bf16_round_stochastic(x, bits[b]))), "NaN %04x became a number", h);
            }
            continue;
        }
        cr_assert_eq(hw_bf16_from_float(x), h, "%04x (%a) does not round back to itself", h, (double)x);
        for (size_t b = 0; b < sizeof bits / sizeof bits[0]; b++) {
            cr_assert_eq(hw_bf16_round_stochastic(x, bits[b]), h, "%04x (%a) moved with random bits %08x", h, (double)x,
                         bits[b]);
        }
    }
    // A float NaN whose payload lives in the low half only: its truncation would be infinity.
    uint32_t low_nan = 0x7F800001u;
    float nan_low;
    memcpy(&nan_low, &low_nan, sizeof nan_low);
    cr_expect(isnan(hw_bf16_to_float(hw_bf16_round_stochastic(nan_low, 0))));
    cr_expect(isnan(hw_bf16_to_float(hw_bf16_from_float(nan_low))));
}

Test(bf16, the_whole_buffer_conversions_match_the_per_value_rules) {
    enum { N = 1001 };
    float in[N], back[N];
    uint16_t h[N];
    for (int i = 0; i < N; i++) in[i] = (float)sin(i * 0.7) * powf(10.0f, (float)(i % 13) - 6.0f);
    hw_bf16_from_floats(h, in, N);
    hw_bf16_to_floats(back, h, N);
    for (int i = 0; i < N; i++) {
        cr_assert_eq(h[i], hw_bf16_from_float(in[i]));
        cr_assert_eq(back[i], hw_bf16_to_float(h[i]));
        cr_assert_leq(fabs((double)back[i] - in[i]), fabs((double)in[i]) * 0x1p-8, "weight %d: %a -> %a", i,
                      (double)in[i], (double)back[i]);
    }
}

Test(bf16, dtype_names) {
    hw_weights_dtype d;
    cr_expect_eq(hw_weights_dtype_parse("bf16", &d), HW_OK);
    cr_expect_eq(d, HW_WEIGHTS_BF16);
    cr_expect_eq(hw_weights_dtype_parse("f32", &d), HW_OK);
    cr_expect_eq(d, HW_WEIGHTS_F32);
    cr_expect_eq(hw_weights_dtype_parse("fp16", &d), HW_ERR);
    cr_expect(strstr(hw_error(), "f32 or bf16") != NULL, "%s", hw_error());
    cr_expect_str_eq(hw_weights_dtype_name(HW_WEIGHTS_BF16), "bf16");
    cr_expect_eq(hw_weights_dtype_bytes(HW_WEIGHTS_BF16), 2);
    cr_expect_eq(hw_weights_dtype_bytes(HW_WEIGHTS_F32), 4);
}

// ---- the step ----

static hw_model *one_param_model(int n) {
    hw_model *model = calloc(1, sizeof *model);
    cr_assert_not_null(model);
    snprintf(model->params[0].name, sizeof model->params[0].name, "w");
    model->params[0].shape.ndim = 1;
    model->params[0].shape.dims[0] = n;
    model->n_params = 1;
    model->n_weights = (size_t)n;
    return model;
}

// Against the float rule on the same (widened) weights with the same velocity: each weight written
// is one of the two bfloat16 around the float result, the copy is its float, `applied` telescopes
// to final - initial (one writer), and the same key gives the same weights bit for bit.
static void check_bf16_step(float momentum, int nesterov, float weight_decay) {
    enum { N = 1003, STEPS = 9 };
    hw_model *model = one_param_model(N);
    uint16_t w[N], w_again[N];
    float ref[N], copy[N], copy_again[N], g[N], start[N];
    double applied[N] = {0};
    for (int i = 0; i < N; i++) {
        w[i] = w_again[i] = hw_bf16_from_float((float)sin(i * 0.37) * (i % 5 ? 1.0f : 1e-6f));
        start[i] = hw_bf16_to_float(w[i]);
    }
    hw_sgd opt, again, reference;
    cr_assert_eq(hw_sgd_init(&opt, N, 0.05f, momentum, weight_decay, nesterov), HW_OK);
    cr_assert_eq(hw_sgd_init(&again, N, 0.05f, momentum, weight_decay, nesterov), HW_OK);
    cr_assert_eq(hw_sgd_init(&reference, N, 0.05f, momentum, weight_decay, nesterov), HW_OK);
    for (int s = 0; s < STEPS; s++) {
        for (int i = 0; i < N; i++) g[i] = (float)cos(i * 0.11 + s) * 0.3f;
        for (int i = 0; i < N; i++) ref[i] = hw_bf16_to_float(w[i]);
        // The reference's velocity follows the bf16 step's (the same rule on the same inputs).
        hw_sgd_step(&reference, model, ref, g);
        uint64_t key = 0x9E3779B97F4A7C15u * (uint64_t)(s + 1);
        hw_sgd_step_bf16(&opt, model, w, g, copy, applied, key);
        hw_sgd_step_bf16(&again, model, w_again, g, copy_again, NULL, key);
        for (int i = 0; i < N; i++) {
            float down, up, got = hw_bf16_to_float(w[i]);
            neighbours(ref[i], &down, &up);
            cr_assert(got == down || got == up, "step %d weight %d: %a written, the rule gives %a", s, i, (double)got,
                      (double)ref[i]);
            cr_assert_eq(copy[i], got, "the copy is the weight written");
        }
    }
    cr_assert_eq(memcmp(w, w_again, sizeof w), 0, "the same keys rounded differently");
    cr_assert_eq(memcmp(copy, copy_again, sizeof copy), 0);
    for (int i = 0; i < N; i++) {
        cr_assert_eq(applied[i], (double)hw_bf16_to_float(w[i]) - (double)start[i], "weight %d", i);
    }
    hw_sgd_free(&opt);
    hw_sgd_free(&again);
    hw_sgd_free(&reference);
    free(model);
}

Test(bf16, the_step_rounds_the_float_rule_to_a_neighbour) {
    check_bf16_step(0, 0, 0);
    check_bf16_step(0.5f, 0, 0);
    check_bf16_step(0.9f, 1, 1e-3f);
}
