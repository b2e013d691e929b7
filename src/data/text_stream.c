// text_stream: the lines of a plain or gzip text file, read in large chunks into one growing
// buffer (src/data/sparse_io.h), and the decimal number parser of the sparse readers.
#include "sparse_io.h"

#include "hw/err.h"
#include "hw/file.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <float.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

enum {
    STREAM_FIRST_BUFFER = 4 << 20,  // the line buffer starts here, and doubles for a longer line
    STREAM_INPUT = 1 << 18,         // compressed input read at a time
};
#define STREAM_MAX_LINE (1ll << 30)

struct text_stream {
    int fd;
    const char *path;
    const char *what;  // "libsvm file": what a binary byte says the file is not
    int gzip, inflating, member_ended, input_eof, data_eof;
    z_stream z;  // next_in / avail_in: gzip input read but not yet inflated
    unsigned char *in;
    char *buf;  // text [pos, end) not yet returned
    size_t cap, pos, end;
    size_t scanned;  // bytes from pos on already known to hold no '\n'
    int64_t line_no;
};

void text_stream_close(text_stream *s) {
    if (!s) return;
    if (s->inflating) inflateEnd(&s->z);
    if (s->fd >= 0) close(s->fd);
    free(s->in);
    free(s->buf);
    free(s);
}

// read(2) until `cap` bytes or the end of the file; the count, or -1 after hw_fail.
static ssize_t read_full(int fd, unsigned char *to, size_t cap, const char *path) {
    size_t got = 0;
    while (got < cap) {
        ssize_t n = read(fd, to + got, cap - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            hw_fail_errno(errno, "%s: read error", path);
            return -1;
        }
        if (n == 0) break;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

int text_stream_open(text_stream **out, const char *path, const char *what) {
    *out = NULL;
    int fd = hw_open_regular(path, what, 0, NULL);
    if (fd < 0) return HW_ERR;
    text_stream *s = calloc(1, sizeof *s);
    if (!s) {
        close(fd);
        return hw_fail("cannot read %s: out of memory", path);
    }
    s->fd = fd;
    s->path = path;
    s->what = what;
    s->cap = STREAM_FIRST_BUFFER;
    s->in = malloc(STREAM_INPUT);
    s->buf = malloc(s->cap);
    if (!s->in || !s->buf) {
        text_stream_close(s);
        return hw_fail("cannot read %s: out of memory", path);
    }
    ssize_t n = read_full(fd, s->in, 2, path);
    if (n < 0) {
        text_stream_close(s);
        return HW_ERR;
    }
    s->gzip = n == 2 && s->in[0] == 0x1f && s->in[1] == 0x8b;
    if (s->gzip) {
        s->z.next_in = s->in;
        s->z.avail_in = (uInt)n;
        int rc = inflateInit2(&s->z, 15 + 16);  // a gzip wrapper, up to 32 KiB windows
        if (rc != Z_OK) {
            text_stream_close(s);
            return hw_fail("cannot read %s: %s", path, rc == Z_MEM_ERROR ? "out of memory" : "zlib failed to start");
        }
        s->inflating = 1;
    } else {
        memcpy(s->buf, s->in, (size_t)n);
        s->end = (size_t)n;
        if (n < 2) s->data_eof = 1;
    }
    *out = s;
    return HW_OK;
}

// Appends up to `room` bytes of text at buf + end from a gzip file. The data ends only where a
// member ends and the input with it (members may follow each other, as gzip allows); input that
// ends inside a member is a truncated file, and anything after the last member that is not
// another one is refused.
static int fill_gzip(text_stream *s, size_t room) {
    size_t got = 0;
    while (got == 0) {
        if (s->z.avail_in == 0 && !s->input_eof) {
            ssize_t n = read_full(s->fd, s->in, STREAM_INPUT, s->path);
            if (n < 0) return HW_ERR;
            if (n == 0) s->input_eof = 1;
            s->z.next_in = s->in;
            s->z.avail_in = (uInt)n;
        }
        if (s->member_ended) {
            if (s->z.avail_in == 0) {
                s->data_eof = 1;  // the end of the file after a whole member
                return HW_OK;
            }
            if (s->z.next_in[0] != 0x1f) return hw_fail("%s: data after the end of the gzip stream", s->path);
            inflateReset(&s->z);  // another member; inflate checks its header
            s->member_ended = 0;
        }
        if (s->z.avail_in == 0) return hw_fail("%s: truncated gzip stream (unexpected end of file)", s->path);
        size_t chunk = room - got < (1u << 30) ? room - got : (1u << 30);
        s->z.next_out = (unsigned char *)s->buf + s->end + got;
        s->z.avail_out = (uInt)chunk;
        int rc = inflate(&s->z, Z_NO_FLUSH);
        got += chunk - s->z.avail_out;
        if (rc == Z_STREAM_END) {
            s->member_ended = 1;
        } else if (rc == Z_MEM_ERROR) {
            return hw_fail("%s: out of memory while decompressing", s->path);
        } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
            return hw_fail("%s: corrupt gzip data (zlib: %s)", s->path, s->z.msg ? s->z.msg : zError(rc));
        }
    }
    s->end += got;
    return HW_OK;
}

// Moves the unread text to the front of the buffer, grows it when a line fills it, and appends
// more text; sets data_eof at the end of the file.
static int refill(text_stream *s) {
    if (s->pos > 0) {
        memmove(s->buf, s->buf + s->pos, s->end - s->pos);
        s->end -= s->pos;
        s->pos = 0;
    }
    if (s->end == s->cap) {
        if ((long long)s->cap >= STREAM_MAX_LINE) {
            return hw_fail("%s:%lld: the line is 1 GiB or longer", s->path, (long long)s->line_no + 1);
        }
        char *bigger = realloc(s->buf, s->cap * 2);
        if (!bigger)
            return hw_fail("%s:%lld: out of memory for a line of %zu bytes", s->path, (long long)s->line_no + 1,
                           s->cap);
        s->buf = bigger;
        s->cap *= 2;
    }
    if (s->gzip) return fill_gzip(s, s->cap - s->end);
    ssize_t n = read_full(s->fd, (unsigned char *)s->buf + s->end, s->cap - s->end, s->path);
    if (n < 0) return HW_ERR;
    if (n == 0) s->data_eof = 1;
    s->end += (size_t)n;
    return HW_OK;
}

// A byte no text line holds: a control character other than the blanks (a NUL, as in a binary
// file, an image, or a file cut by a crash), or DEL. Bytes from 0x80 up are left to the readers:
// UTF-8 ids and comments are text.
static int is_binary_byte(unsigned char c) { return (c < 0x20 && !text_is_blank((char)c)) || c == 0x7f; }

// Fails naming the first binary byte of the line, with its column, when it has one: a reader's
// message about its tokens would only confuse, since the file is no text at all.
static int line_check_text(const text_stream *s, const char *line, size_t len) {
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)line[i];
        if (!is_binary_byte(c)) continue;
        return hw_fail("%s:%lld:%zu: binary data (%s 0x%02x) where text was expected: not a text %s", s->path,
                       (long long)s->line_no, i + 1, c == 0 ? "a NUL byte," : "the control byte", c, s->what);
    }
    return HW_OK;
}

enum { STREAM_SNIFF = 4096 };  // the bytes at a file's start looked at for binary data

// Before the first line is parsed: fails naming the first binary byte of the file's start (its
// first STREAM_SNIFF bytes read), so that a binary file (an image, an archive) is called binary
// even where its first line happens to hold none, rather than a malformed first token.
static int start_check_text(const text_stream *s, const char *text, size_t have) {
    size_t n = have < STREAM_SNIFF ? have : STREAM_SNIFF, line_start = 0;
    int64_t line = 1;
    for (size_t i = 0; i < n; i++) {
        if (text[i] == '\n') {
            line++;
            line_start = i + 1;
        } else if (is_binary_byte((unsigned char)text[i])) {
            text_stream at = *s;
            at.line_no = line;
            return line_check_text(&at, text + line_start, i + 1 - line_start);
        }
    }
    return HW_OK;
}

int text_stream_line(text_stream *s, const char **line, size_t *len, int64_t *line_no) {
    for (;;) {
        char *start = s->buf + s->pos;
        size_t have = s->end - s->pos;
        char *nl = have > s->scanned ? memchr(start + s->scanned, '\n', have - s->scanned) : NULL;
        if (nl || (s->data_eof && have > 0)) {
            if (s->line_no == 0 && start_check_text(s, start, have) != HW_OK) return HW_ERR;
            size_t n = nl ? (size_t)(nl - start) : have;
            s->pos += nl ? n + 1 : n;
            s->scanned = 0;
            if (n > 0 && start[n - 1] == '\r') n--;
            *line = start;
            *len = n;
            *line_no = ++s->line_no;
            return line_check_text(s, start, n) == HW_OK ? 1 : HW_ERR;
        }
        if (s->data_eof) return 0;
        s->scanned = have;
        if (refill(s) != HW_OK) return HW_ERR;
    }
}

// ---- numbers ----

static const double exact_powers_of_ten[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                               1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

// The float nearest the number in [p, q) by strtof, on a NUL-terminated copy.
static float slow_float(const char *p, const char *q) {
    char small[128];
    size_t n = (size_t)(q - p);
    char *copy = n < sizeof small ? small : malloc(n + 1);
    if (!copy) return strtof("nan", NULL);  // out of memory: refused as non-finite by the caller
    memcpy(copy, p, n);
    copy[n] = '\0';
    float f = strtof(copy, NULL);
    if (copy != small) free(copy);
    return f;
}

// d is exactly halfway between two neighbouring normal floats: its 29 bits below a float's
// mantissa are 1 followed by zeros. Rounding d to float could then differ from rounding the
// decimal number it approximates (double rounding).
static int halfway_between_floats(double d) {
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    return (bits & ((1ull << 29) - 1)) == (1ull << 28);
}

const char *text_parse_float(const char *p, const char *end, float *out) {
    const char *start = p;
    int negative = 0;
    if (p < end && (*p == '-' || *p == '+')) negative = *p++ == '-';
    // The significant digits go into `mantissa` (it wraps past 19 of them, when the slow path
    // takes over); leading zeros are skipped, a fraction's digits lower the exponent.
    uint64_t mantissa = 0;
    int64_t exp10 = 0;
    const char *digits_start = p;
    while (p < end && *p == '0') p++;
    const char *significant = p;
    for (; p < end && (unsigned)(*p - '0') < 10; p++) mantissa = mantissa * 10 + (uint64_t)(*p - '0');
    int64_t n_significant = p - significant;
    int any = p > digits_start;
    if (p < end && *p == '.') {
        p++;
        const char *fraction = p;
        if (n_significant == 0) {
            while (p < end && *p == '0') p++;  // zeros before the first significant digit
        }
        const char *first = p;
        for (; p < end && (unsigned)(*p - '0') < 10; p++) mantissa = mantissa * 10 + (uint64_t)(*p - '0');
        n_significant += p - first;
        exp10 -= p - fraction;  // every digit of the fraction, zeros included
        any |= p > fraction;
    }
    int exact = n_significant <= 19;
    if (!any) return NULL;
    if (p < end && (*p == 'e' || *p == 'E')) {
        const char *q = p + 1;
        int exp_negative = 0;
        if (q < end && (*q == '-' || *q == '+')) exp_negative = *q++ == '-';
        if (q == end || (unsigned)(*q - '0') >= 10) return NULL;
        int64_t e = 0;
        for (; q < end && (unsigned)(*q - '0') < 10; q++) {
            if (e < 100000) e = e * 10 + (*q - '0');
        }
        exp10 += exp_negative ? -e : e;
        p = q;
    }
    // Clinger's fast path: a mantissa a double holds exactly times or over an exact power of ten
    // is one correctly rounded operation; its rounding to float is then right unless it landed
    // exactly halfway between two floats, or outside the normal floats.
    if (exact && mantissa <= (1ull << 53) && exp10 >= -22 && exp10 <= 22) {
        double d =
            exp10 >= 0 ? (double)mantissa * exact_powers_of_ten[exp10] : (double)mantissa / exact_powers_of_ten[-exp10];
        if (d == 0 || (d >= FLT_MIN && d <= FLT_MAX && !halfway_between_floats(d))) {
            float f = (float)d;
            *out = negative ? -f : f;
            return p;
        }
    }
    *out = slow_float(start, p);
    return p;
}

int text_is_nonfinite_word(const char *p, const char *end) {
    if (p < end && (*p == '-' || *p == '+')) p++;
    if (end - p < 3) return 0;
    return strncasecmp(p, "inf", 3) == 0 || strncasecmp(p, "nan", 3) == 0;
}

int text_fail_at(const text_place *place, const char *at, const char *fmt, ...) {
    char message[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    return hw_fail("%s:%lld:%lld: %s", place->path, (long long)place->line_no, (long long)(at - place->line) + 1,
                   message);
}
