// json: a recursive-descent JSON reader with bounds checks on every byte it looks at.
//
// Invariant that keeps error paths simple: every parse function leaves its output node in a state
// hw_json_free() can release, whatever happened; the top level frees the whole tree on failure.
#include "hw/json.h"

#include "hw/err.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *text;
    size_t length;
    size_t pos;
} json_parser;

static int fail_at(const json_parser *p, size_t pos, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail_at(const json_parser *p, size_t pos, const char *fmt, ...) {
    (void)p;
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return hw_fail("invalid JSON at byte %zu: %s", pos, what);
}

static int fail_unexpected(const json_parser *p, const char *expected) {
    if (p->pos >= p->length) return fail_at(p, p->pos, "unexpected end of input, expected %s", expected);
    unsigned char c = (unsigned char)p->text[p->pos];
    if (c >= 0x20 && c < 0x7f) return fail_at(p, p->pos, "unexpected '%c', expected %s", c, expected);
    return fail_at(p, p->pos, "unexpected byte 0x%02x, expected %s", c, expected);
}

static void skip_whitespace(json_parser *p) {
    while (p->pos < p->length) {
        char c = p->text[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

static int peek(const json_parser *p) { return p->pos < p->length ? (unsigned char)p->text[p->pos] : -1; }

// ---- strings ----

static int hex_digit(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// Four hex digits at p->pos (after "\u"); advances past them.
static int read_hex4(json_parser *p, unsigned *out) {
    if (p->length - p->pos < 4) return fail_at(p, p->pos, "truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int d = hex_digit((unsigned char)p->text[p->pos + (size_t)i]);
        if (d < 0) return fail_at(p, p->pos + (size_t)i, "bad hex digit in \\u escape");
        v = v * 16 + (unsigned)d;
    }
    p->pos += 4;
    *out = v;
    return HW_OK;
}

static size_t utf8_encode(unsigned cp, char *out) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

// Length of the valid UTF-8 sequence starting at s[0] (a byte >= 0x80) within `avail` bytes, or
// 0 when it is invalid (bad lead byte, missing continuation, overlong form, surrogate, > U+10FFFF).
size_t hw_utf8_sequence_length(const unsigned char *s, size_t avail) {
    size_t n;
    unsigned cp, min;
    if (s[0] >= 0xc2 && s[0] <= 0xdf) {
        n = 2, cp = s[0] & 0x1fu, min = 0x80;
    } else if (s[0] >= 0xe0 && s[0] <= 0xef) {
        n = 3, cp = s[0] & 0x0fu, min = 0x800;
    } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
        n = 4, cp = s[0] & 0x07u, min = 0x10000;
    } else {
        return 0;
    }
    if (avail < n) return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3fu);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return n;
}

// A string starting at the opening quote at p->pos. The decoded text is never longer than the
// raw text between the quotes, which bounds the allocation.
static int parse_string(json_parser *p, char **out, size_t *out_length) {
    size_t start = p->pos + 1;
    size_t end = start;
    while (end < p->length && p->text[end] != '"') end += p->text[end] == '\\' ? 2 : 1;
    if (end >= p->length) return fail_at(p, p->pos, "unterminated string");
    char *buf = malloc(end - start + 1);
    if (buf == NULL) return fail_at(p, p->pos, "out of memory for a string of %zu bytes", end - start);
    size_t n = 0;
    p->pos = start;
    while (p->pos < end) {
        unsigned char c = (unsigned char)p->text[p->pos];
        if (c < 0x20) {
            free(buf);
            return fail_at(p, p->pos, "control byte 0x%02x inside a string (must be escaped)", c);
        }
        if (c >= 0x80) {
            size_t len = hw_utf8_sequence_length((const unsigned char *)p->text + p->pos, end - p->pos);
            if (len == 0) {
                free(buf);
                return fail_at(p, p->pos, "invalid UTF-8 in a string");
            }
            memcpy(buf + n, p->text + p->pos, len);
            n += len;
            p->pos += len;
            continue;
        }
        if (c != '\\') {
            buf[n++] = (char)c;
            p->pos++;
            continue;
        }
        size_t escape_at = p->pos;
        p->pos++;  // end - 1 >= escape_at, and the scan above skipped the escaped byte, so it is < end
        char e = p->text[p->pos++];
        switch (e) {
        case '"': buf[n++] = '"'; break;
        case '\\': buf[n++] = '\\'; break;
        case '/': buf[n++] = '/'; break;
        case 'b': buf[n++] = '\b'; break;
        case 'f': buf[n++] = '\f'; break;
        case 'n': buf[n++] = '\n'; break;
        case 'r': buf[n++] = '\r'; break;
        case 't': buf[n++] = '\t'; break;
        case 'u': {
            unsigned cp;
            if (p->pos > end || end - p->pos < 4 || read_hex4(p, &cp) != HW_OK) {
                free(buf);
                return fail_at(p, escape_at, "bad \\u escape");
            }
            if (cp >= 0xdc00 && cp <= 0xdfff) {
                free(buf);
                return fail_at(p, escape_at, "lone low surrogate in \\u escape");
            }
            if (cp >= 0xd800 && cp <= 0xdbff) {
                unsigned low;
                if (end - p->pos < 6 || p->text[p->pos] != '\\' || p->text[p->pos + 1] != 'u') {
                    free(buf);
                    return fail_at(p, escape_at, "high surrogate not followed by a \\u low surrogate");
                }
                p->pos += 2;
                if (read_hex4(p, &low) != HW_OK || low < 0xdc00 || low > 0xdfff) {
                    free(buf);
                    return fail_at(p, escape_at, "high surrogate not followed by a low surrogate");
                }
                cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
            }
            n += utf8_encode(cp, buf + n);
            break;
        }
        default:
            free(buf);
            return fail_at(p, escape_at, "unknown escape in a string");
        }
    }
    buf[n] = '\0';
    p->pos = end + 1;
    *out = buf;
    *out_length = n;
    return HW_OK;
}

// ---- numbers ----

static int is_digit(int c) { return c >= '0' && c <= '9'; }

static int parse_number(json_parser *p, hw_json *out) {
    size_t start = p->pos;
    int negative = 0, integral = 1, overflow = 0;
    uint64_t magnitude = 0;
    if (peek(p) == '-') negative = 1, p->pos++;
    if (!is_digit(peek(p))) return fail_unexpected(p, "a digit");
    if (peek(p) == '0') {
        p->pos++;
        if (is_digit(peek(p))) return fail_at(p, p->pos, "leading zero in a number");
    } else {
        while (is_digit(peek(p))) {
            unsigned d = (unsigned)(peek(p) - '0');
            if (magnitude > (UINT64_MAX - d) / 10) overflow = 1;
            else magnitude = magnitude * 10 + d;
            p->pos++;
        }
    }
    if (peek(p) == '.') {
        integral = 0;
        p->pos++;
        if (!is_digit(peek(p))) return fail_unexpected(p, "a digit after '.'");
        while (is_digit(peek(p))) p->pos++;
    }
    if (peek(p) == 'e' || peek(p) == 'E') {
        integral = 0;
        p->pos++;
        if (peek(p) == '+' || peek(p) == '-') p->pos++;
        if (!is_digit(peek(p))) return fail_unexpected(p, "a digit in the exponent");
        while (is_digit(peek(p))) p->pos++;
    }
    size_t len = p->pos - start;
    char small[64];
    char *copy = len < sizeof small ? small : malloc(len + 1);
    if (copy == NULL) return fail_at(p, start, "out of memory for a number");
    memcpy(copy, p->text + start, len);
    copy[len] = '\0';
    out->type = HW_JSON_NUMBER;
    out->number = strtod(copy, NULL);
    if (copy != small) free(copy);
    if (integral && !overflow) {
        if (!negative && magnitude <= (uint64_t)INT64_MAX) {
            out->is_integer = 1, out->integer = (int64_t)magnitude;
        } else if (negative && magnitude <= (uint64_t)INT64_MAX + 1) {
            out->is_integer = 1, out->integer = magnitude == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)magnitude;
        }
    }
    return HW_OK;
}

// ---- values ----

static int parse_value(json_parser *p, hw_json *out, int depth);

static int expect_literal(json_parser *p, const char *word) {
    size_t n = strlen(word);
    if (p->length - p->pos < n || memcmp(p->text + p->pos, word, n) != 0) return fail_unexpected(p, "a value");
    p->pos += n;
    return HW_OK;
}

// Makes room for one more item and returns it zeroed, already counted (see the invariant above).
static hw_json *append_item(json_parser *p, hw_json *parent, int *cap) {
    if (parent->count == *cap) {
        if (*cap > INT_MAX / 2) {
            fail_at(p, p->pos, "too many items");
            return NULL;
        }
        int new_cap = *cap ? *cap * 2 : 8;
        hw_json *items = realloc(parent->items, (size_t)new_cap * sizeof *items);
        if (items == NULL) {
            fail_at(p, p->pos, "out of memory");
            return NULL;
        }
        parent->items = items;
        *cap = new_cap;
    }
    hw_json *item = &parent->items[parent->count++];
    memset(item, 0, sizeof *item);
    return item;
}

static int parse_array(json_parser *p, hw_json *out, int depth) {
    out->type = HW_JSON_ARRAY;
    int cap = 0;
    p->pos++;  // '['
    skip_whitespace(p);
    if (peek(p) == ']') {
        p->pos++;
        return HW_OK;
    }
    for (;;) {
        hw_json *item = append_item(p, out, &cap);
        if (item == NULL || parse_value(p, item, depth + 1) != HW_OK) return HW_ERR;
        skip_whitespace(p);
        if (peek(p) == ',') {
            p->pos++;
            continue;
        }
        if (peek(p) == ']') {
            p->pos++;
            return HW_OK;
        }
        return fail_unexpected(p, "',' or ']'");
    }
}

static int parse_object(json_parser *p, hw_json *out, int depth) {
    out->type = HW_JSON_OBJECT;
    int cap = 0;
    p->pos++;  // '{'
    skip_whitespace(p);
    if (peek(p) == '}') {
        p->pos++;
        return HW_OK;
    }
    for (;;) {
        skip_whitespace(p);
        if (peek(p) != '"') return fail_unexpected(p, "a string key");
        hw_json *item = append_item(p, out, &cap);
        if (item == NULL || parse_string(p, &item->key, &item->key_length) != HW_OK) return HW_ERR;
        skip_whitespace(p);
        if (peek(p) != ':') return fail_unexpected(p, "':'");
        p->pos++;
        if (parse_value(p, item, depth + 1) != HW_OK) return HW_ERR;
        skip_whitespace(p);
        if (peek(p) == ',') {
            p->pos++;
            continue;
        }
        if (peek(p) == '}') {
            p->pos++;
            return HW_OK;
        }
        return fail_unexpected(p, "',' or '}'");
    }
}

// Fills the value fields of `out` (its key, if it is an object member, is already set).
static int parse_value(json_parser *p, hw_json *out, int depth) {
    if (depth > HW_JSON_MAX_DEPTH) return fail_at(p, p->pos, "nested deeper than %d levels", HW_JSON_MAX_DEPTH);
    skip_whitespace(p);
    switch (peek(p)) {
    case '{': return parse_object(p, out, depth);
    case '[': return parse_array(p, out, depth);
    case '"':
        out->type = HW_JSON_STRING;
        return parse_string(p, &out->string, &out->length);
    case 't':
        out->type = HW_JSON_BOOL, out->boolean = 1;
        return expect_literal(p, "true");
    case 'f':
        out->type = HW_JSON_BOOL, out->boolean = 0;
        return expect_literal(p, "false");
    case 'n':
        out->type = HW_JSON_NULL;
        return expect_literal(p, "null");
    default:
        if (peek(p) == '-' || is_digit(peek(p))) return parse_number(p, out);
        return fail_unexpected(p, "a value");
    }
}

int hw_json_parse(hw_json *out, const char *text, size_t length) {
    memset(out, 0, sizeof *out);
    json_parser p = {text, length, 0};
    if (parse_value(&p, out, 0) == HW_OK) {
        skip_whitespace(&p);
        if (p.pos == p.length) return HW_OK;
        fail_unexpected(&p, "the end of the input after the value");
    }
    hw_json_free(out);
    return HW_ERR;
}

void hw_json_free(hw_json *value) {
    // A member's key is freed by its parent (below), not by the member itself.
    for (int i = 0; i < value->count; i++) {
        hw_json_free(&value->items[i]);
        free(value->items[i].key);
    }
    free(value->items);
    free(value->string);
    char *key = value->key;
    size_t key_length = value->key_length;
    memset(value, 0, sizeof *value);
    value->key = key;
    value->key_length = key_length;
}

const hw_json *hw_json_get(const hw_json *object, const char *key) {
    if (object == NULL || object->type != HW_JSON_OBJECT) return NULL;
    size_t n = strlen(key);
    for (int i = 0; i < object->count; i++) {
        const hw_json *m = &object->items[i];
        if (m->key_length == n && memcmp(m->key, key, n) == 0) return m;
    }
    return NULL;
}

const char *hw_json_type_name(hw_json_type type) {
    switch (type) {
    case HW_JSON_NULL: return "null";
    case HW_JSON_BOOL: return "boolean";
    case HW_JSON_NUMBER: return "number";
    case HW_JSON_STRING: return "string";
    case HW_JSON_ARRAY: return "array";
    case HW_JSON_OBJECT: return "object";
    }
    return "unknown";
}
