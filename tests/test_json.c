// Tests of the private JSON reader behind the checkpoint loader.
#include "hw/err.h"
#include "hw/json.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static int parse(hw_json *v, const char *text) { return hw_json_parse(v, text, strlen(text)); }

Test(json, values_and_lookup) {
    hw_json v;
    const char *text = " {\"a\": [1, -2, 3.5e1, true, false, null], \"b\\u00e9\\n\": \"x\\\"y\\\\z\\ud83d\\ude00\", "
                       "\"big\": 9223372036854775807, \"huge\": 18446744073709551616, \"e\": {}} ";
    cr_assert_eq(parse(&v, text), HW_OK, "%s", hw_error());
    cr_assert_eq(v.type, HW_JSON_OBJECT);
    cr_assert_eq(v.count, 4 + 1);
    const hw_json *a = hw_json_get(&v, "a");
    cr_assert_not_null(a);
    cr_assert_eq(a->type, HW_JSON_ARRAY);
    cr_assert_eq(a->count, 6);
    cr_expect(a->items[0].is_integer && a->items[0].integer == 1);
    cr_expect(a->items[1].is_integer && a->items[1].integer == -2);
    cr_expect(!a->items[2].is_integer && a->items[2].number == 35.0);
    cr_expect(a->items[3].type == HW_JSON_BOOL && a->items[3].boolean == 1);
    cr_expect(a->items[4].type == HW_JSON_BOOL && a->items[4].boolean == 0);
    cr_expect(a->items[5].type == HW_JSON_NULL);
    const hw_json *b = hw_json_get(&v, "b\xc3\xa9\n");
    cr_assert_not_null(b, "escaped key decoded to UTF-8");
    cr_expect_eq(b->length, strlen("x\"y\\z\xf0\x9f\x98\x80"));
    cr_expect_str_eq(b->string, "x\"y\\z\xf0\x9f\x98\x80");
    cr_expect(hw_json_get(&v, "big")->is_integer && hw_json_get(&v, "big")->integer == INT64_MAX);
    cr_expect(!hw_json_get(&v, "huge")->is_integer, "beyond int64: a number, not an integer");
    cr_expect_eq(hw_json_get(&v, "e")->type, HW_JSON_OBJECT);
    cr_expect_null(hw_json_get(&v, "missing"));
    cr_expect_null(hw_json_get(a, "a"), "not an object");
    hw_json_free(&v);
    cr_expect_eq(v.count, 0);
}

Test(json, nul_inside_key_never_matches) {
    hw_json v;
    cr_assert_eq(parse(&v, "{\"ab\\u0000c\": 1}"), HW_OK, "%s", hw_error());
    cr_expect_eq(v.items[0].key_length, 4);
    cr_expect_null(hw_json_get(&v, "ab"));
    hw_json_free(&v);
}

Test(json, refuses_invalid_text) {
    const char *bad[] = {
        "",            "   ",          "{",          "{\"a\" 1}",  "{\"a\":1,}",  "[1,]",      "[1 2]",
        "{a:1}",       "\"abc",        "\"a\\x\"",   "\"\\u12\"",  "\"\\ud800\"", "\"\\udc00\"", "01",
        "-",           "1.",           "1e",         "tru",        "nul",         "{} {}",     "\"a\nb\"",
        "\"\xff\"",    "\"\xc0\xaf\"", "\"\xed\xa0\x80\"", "[1]x", "{\"a\":}",    "+1",        "\"\\",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        hw_json v;
        hw_error_clear();
        cr_expect_eq(parse(&v, bad[i]), HW_ERR, "accepted: %s", bad[i]);
        cr_expect(strstr(hw_error(), "invalid JSON at byte") != NULL, "message for %s: %s", bad[i], hw_error());
        cr_expect_eq(v.count, 0);
        cr_expect_null(v.string);
    }
}

Test(json, respects_length_not_nul) {
    hw_json v;
    const char text[] = "[1, 2]garbage";
    cr_expect_eq(hw_json_parse(&v, text, 6), HW_OK, "%s", hw_error());
    cr_expect_eq(v.count, 2);
    hw_json_free(&v);
    cr_expect_eq(hw_json_parse(&v, text, 4), HW_ERR, "cut inside the array");
}

Test(json, deep_nesting_refused_without_crashing) {
    size_t n = 200000;
    char *text = malloc(2 * n + 1);
    cr_assert_not_null(text);
    memset(text, '[', n);
    memset(text + n, ']', n);
    text[2 * n] = '\0';
    hw_json v;
    cr_expect_eq(hw_json_parse(&v, text, 2 * n), HW_ERR);
    cr_expect(strstr(hw_error(), "nested deeper") != NULL, "%s", hw_error());
    // Exactly at the limit is fine.
    int depth = HW_JSON_MAX_DEPTH + 1;  // depth 0 is the outermost array
    memset(text, '[', (size_t)depth);
    memset(text + depth, ']', (size_t)depth);
    cr_expect_eq(hw_json_parse(&v, text, 2 * (size_t)depth), HW_OK, "%s", hw_error());
    hw_json_free(&v);
    free(text);
}
