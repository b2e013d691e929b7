// json: a small, strict JSON reader (RFC 8259) for file headers such as safetensors'.
//
// It parses a whole text into a tree. It is written for untrusted input: every read is bounds
// checked against the given length, nesting is limited (HW_JSON_MAX_DEPTH) so that a corrupted
// file cannot exhaust the stack, and any error leaves a message naming the byte offset.
#ifndef HW_JSON_H
#define HW_JSON_H

#include <stddef.h>
#include <stdint.h>

enum { HW_JSON_MAX_DEPTH = 64 };

typedef enum {
    HW_JSON_NULL = 0,
    HW_JSON_BOOL,
    HW_JSON_NUMBER,
    HW_JSON_STRING,
    HW_JSON_ARRAY,
    HW_JSON_OBJECT
} hw_json_type;

typedef struct hw_json hw_json;
struct hw_json {
    hw_json_type type;
    int boolean;          // BOOL
    double number;        // NUMBER
    int is_integer;       // NUMBER written without fraction or exponent and within int64_t
    int64_t integer;      // NUMBER, when is_integer
    char *string;         // STRING: decoded UTF-8, NUL-terminated (may also hold NULs: see length)
    size_t length;        // STRING: bytes in `string`
    char *key;            // a member of an OBJECT: its decoded key, NUL-terminated
    size_t key_length;
    hw_json *items;       // ARRAY elements or OBJECT members, in document order
    int count;
};

// Parses text[0 .. length) (need not be NUL-terminated). Leading and trailing whitespace is
// allowed, anything else after the value is an error. On failure *out is left empty (safe to
// free) and the message reads "invalid JSON at byte <offset>: <what>".
int hw_json_parse(hw_json *out, const char *text, size_t length);
void hw_json_free(hw_json *value);
// The first member of `object` called `key` (compared over the whole key, so a key holding a NUL
// never matches), or NULL; NULL too when `object` is not an object.
const hw_json *hw_json_get(const hw_json *object, const char *key);
// The name of a type, for messages: "null", "boolean", "number", "string", "array", "object".
const char *hw_json_type_name(hw_json_type type);

// Length of the valid UTF-8 sequence starting at s[0] (a byte >= 0x80) within `avail` bytes, or
// 0 when it is invalid (bad lead byte, missing continuation, overlong form, surrogate, > U+10FFFF).
// The JSON reader accepts only valid UTF-8; the checkpoint writer uses it to write only that.
size_t hw_utf8_sequence_length(const unsigned char *s, size_t avail);

#endif
