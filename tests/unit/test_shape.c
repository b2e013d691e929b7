// Tests of the shape (src/shape.c), rng and err modules.
#include "hw/err.h"
#include "hw/rng.h"
#include "hw/shape.h"

#include <criterion/criterion.h>
#include <string.h>

Test(shape, numel_and_format) {
    int64_t dims[4] = {10, 1, 5, 5};
    hw_shape s = hw_shape_make(4, dims);
    cr_expect_eq(hw_shape_numel(s), 250);
    char buf[64];
    hw_shape_format(s, buf, sizeof buf);
    cr_expect_str_eq(buf, "[10, 1, 5, 5]");
}

Test(shape, device_parse) {
    hw_device d;
    cr_assert_eq(hw_device_parse("cpu", &d), HW_OK);
    cr_expect_eq(d.type, HW_DEVICE_CPU);
    cr_assert_eq(hw_device_parse("cuda:3", &d), HW_OK);
    cr_expect_eq(d.type, HW_DEVICE_CUDA);
    cr_expect_eq(d.index, 3);
    cr_expect_eq(hw_device_parse("cuda:x", &d), HW_ERR);
    cr_expect(strstr(hw_error(), "cuda:x") != NULL);
    cr_expect_eq(hw_device_parse("gpu", &d), HW_ERR);
}

Test(rng, deterministic_and_uniform) {
    hw_rng a, b;
    hw_rng_seed(&a, 42, 7);
    hw_rng_seed(&b, 42, 7);
    for (int i = 0; i < 100; i++) cr_assert_eq(hw_rng_u32(&a), hw_rng_u32(&b));
    hw_rng_seed(&b, 42, 8);
    int same = 0;
    for (int i = 0; i < 100; i++) same += hw_rng_u32(&a) == hw_rng_u32(&b);
    cr_expect_lt(same, 3, "another stream gives another sequence");
    double sum = 0;
    int counts[10] = {0};
    for (int i = 0; i < 100000; i++) {
        float u = hw_rng_uniform(&a);
        cr_assert(u >= 0.0f && u < 1.0f);
        sum += u;
        counts[hw_rng_below(&a, 10)]++;
    }
    cr_expect_float_eq(sum / 100000, 0.5, 0.01);
    for (int k = 0; k < 10; k++) cr_expect(counts[k] > 9500 && counts[k] < 10500, "bucket %d: %d", k, counts[k]);
}

Test(err, prefix_and_errno) {
    hw_fail("bad number '%s'", "x1");
    hw_error_prefix("models/a.model:3");
    cr_expect_str_eq(hw_error(), "models/a.model:3: bad number 'x1'");
    hw_fail_errno(2, "cannot open %s", "f");
    cr_expect_str_eq(hw_error(), "cannot open f: No such file or directory");
}

// A message naming two long paths (a checkpoint and a dataset, each near PATH_MAX) is kept whole:
// --eval-only's verdict on a blown-up checkpoint names both, and its advice comes last.
Test(err, a_message_with_two_long_paths_is_kept_whole) {
    static char a[4000], b[4000];
    memset(a, 'a', sizeof a - 1);
    memset(b, 'b', sizeof b - 1);
    hw_fail("the checkpoint %s gives a test loss of nan on %s: use an earlier checkpoint", a, b);
    hw_error_prefix("hogwild");
    size_t want = strlen("hogwild: the checkpoint  gives a test loss of nan on : use an earlier checkpoint") + 2 * 3999;
    cr_expect_eq(strlen(hw_error()), want);
    cr_expect(strstr(hw_error(), ": use an earlier checkpoint") != NULL, "the message's end was cut");
}
