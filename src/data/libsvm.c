// libsvm: the libsvm / svmlight text format, read by a hand parser (one pass over each line, no
// sscanf, nothing allocated per line) and written back (include/hw/sparse_data.h has the rules).
#include "sparse_io.h"

#include "hw/err.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

typedef struct {
    text_place at;      // the file and the line being parsed, for messages
    int64_t dim;        // the dimension every index must be within; 0: none
    int64_t max_index;  // the largest 1-based index read
} libsvm_reader;

static int is_digit(char c) { return (unsigned)(c - '0') < 10; }

// The length of the token at p (up to a blank or the end), at most 40 bytes for a message.
static int token_length(const char *p, const char *end) {
    const char *q = p;
    while (q < end && !text_is_blank(*q) && q - p < 40) q++;
    return (int)(q - p);
}

// A number that did not parse, or parsed and was followed by something else.
static int fail_number(const libsvm_reader *r, const char *p, const char *end, const char *what) {
    if (text_is_nonfinite_word(p, end)) {
        return text_fail_at(&r->at, p, "non-finite %s '%.*s': only finite decimal numbers are read", what,
                            token_length(p, end), p);
    }
    return text_fail_at(&r->at, p, "malformed %s '%.*s': expected a decimal number", what, token_length(p, end), p);
}

// An index past HW_SPARSE_MAX_FEATURES with the dimension taken from the data: a model of that
// many features would take gigabytes per copy of its weights, most likely for one stray token.
static int fail_too_many_features(const libsvm_reader *r, const char *token, uint64_t index) {
    return text_fail_at(&r->at, token,
                        "index %llu is past %d, the most features a dimension taken from the data may have (a float "
                        "weight per feature: %.1f GiB per copy of the weights at this index); a model file's `input "
                        "sparse DIM` sets a larger dimension deliberately",
                        (unsigned long long)index, HW_SPARSE_MAX_FEATURES,
                        (double)index * sizeof(float) / (1024.0 * 1024.0 * 1024.0));
}

// "qid:N" right after the label: checked to be a decimal integer and skipped. Returns past it, or NULL after a failure.
static const char *skip_qid(const libsvm_reader *r, const char *p, const char *end) {
    const char *q = p + 4;
    if (q == end || !is_digit(*q)) {
        text_fail_at(&r->at, p, "malformed query id '%.*s': expected qid:N with N a decimal integer",
                     token_length(p, end), p);
        return NULL;
    }
    while (q < end && is_digit(*q)) q++;
    if (q < end && !text_is_blank(*q)) {
        text_fail_at(&r->at, p, "malformed query id '%.*s': expected qid:N with N a decimal integer",
                     token_length(p, end), p);
        return NULL;
    }
    return q;
}

// One line: its example is appended to b, its label to the summary; a blank or comment line adds nothing.
static int parse_line(libsvm_reader *r, sparse_build *b, label_summary *labels, const char *line, size_t len) {
    r->at.line = line;
    const char *end = memchr(line, '#', len);
    if (!end) end = line + len;
    const char *p = line;
    while (p < end && text_is_blank(*p)) p++;
    if (p == end) return HW_OK;
    float label;
    const char *q = text_parse_float(p, end, &label);
    if (!q || (q < end && !text_is_blank(*q))) return fail_number(r, p, end, "label");
    if (!isfinite(label))
        return text_fail_at(&r->at, p, "label '%.*s' is out of the range of a float", token_length(p, end), p);
    p = q;
    // A nonzero takes at least 4 bytes ("1:1" and a blank before it): room for them all, once per line.
    if (sparse_build_reserve_nnz(b, (int64_t)(end - p) / 4 + 1, r->at.path) != HW_OK) return HW_ERR;
    int64_t previous = 0;
    int first = 1;
    for (;;) {
        while (p < end && text_is_blank(*p)) p++;
        if (p == end) break;
        const char *token = p;
        if (!is_digit(*p)) {
            if (first && end - p >= 4 && memcmp(p, "qid:", 4) == 0) {
                p = skip_qid(r, p, end);
                if (!p) return HW_ERR;
                first = 0;
                continue;
            }
            if (*p == '-' && p + 1 < end && is_digit(p[1])) {
                return text_fail_at(&r->at, token, "negative index in '%.*s': indices start at 1", token_length(p, end),
                                    p);
            }
            return text_fail_at(&r->at, token, "malformed feature '%.*s': expected index:value", token_length(p, end),
                                p);
        }
        uint64_t index = 0;
        for (; p < end && is_digit(*p); p++) {
            if (index <= INT32_MAX) index = index * 10 + (uint64_t)(*p - '0');
        }
        if (p == end || *p != ':') {
            return text_fail_at(&r->at, token, "malformed feature '%.*s': expected index:value",
                                token_length(token, end), token);
        }
        if (index == 0) return text_fail_at(&r->at, token, "index 0: libsvm indices start at 1");
        if (index > INT32_MAX) {
            return text_fail_at(&r->at, token, "index '%.*s' is past the largest index supported, %d", (int)(p - token),
                                token, INT32_MAX);
        }
        if ((int64_t)index <= previous) {
            return text_fail_at(&r->at, token, "index %llu after index %lld: indices must increase along a line",
                                (unsigned long long)index, (long long)previous);
        }
        if (r->dim > 0 && (int64_t)index > r->dim) {
            return text_fail_at(&r->at, token, "index %llu is past the dimension %lld", (unsigned long long)index,
                                (long long)r->dim);
        }
        if (r->dim == 0 && index > HW_SPARSE_MAX_FEATURES) return fail_too_many_features(r, token, index);
        const char *value_at = ++p;
        float value;
        q = text_parse_float(p, end, &value);
        if (!q || (q < end && !text_is_blank(*q))) return fail_number(r, value_at, end, "value");
        if (!isfinite(value)) {
            return text_fail_at(&r->at, value_at, "value '%.*s' is out of the range of a float",
                                token_length(value_at, end), value_at);
        }
        sparse_build_push(b, (int32_t)(index - 1), value);
        previous = (int64_t)index;
        first = 0;
        p = q;
    }
    if (previous > r->max_index) r->max_index = previous;
    label_summary_add(labels, label);
    return sparse_build_end_row(b, label, r->at.path);
}

int libsvm_read(hw_sparse_set *set, label_summary *labels, const char *path, int64_t dim) {
    memset(set, 0, sizeof *set);
    label_summary_init(labels);
    if (dim < 0)
        return hw_fail("%s: the dimension must be positive (or 0: from the data), got %lld", path, (long long)dim);
    text_stream *in;
    if (text_stream_open(&in, path, "libsvm file") != HW_OK) return HW_ERR;
    sparse_build b;
    sparse_build_init(&b);
    libsvm_reader r = {.at.path = path, .dim = dim};
    const char *line;
    size_t len;
    int got;
    while ((got = text_stream_line(in, &line, &len, &r.at.line_no)) == 1) {
        if (parse_line(&r, &b, labels, line, len) != HW_OK) break;
    }
    text_stream_close(in);
    if (got != 0) {
        sparse_build_free(&b);
        return HW_ERR;
    }
    if (b.set.n == 0) {
        sparse_build_free(&b);
        return hw_fail("%s: no examples (the file is empty, or holds only comments and blank lines)", path);
    }
    if (sparse_build_finish(&b, set, path) != HW_OK) {
        sparse_build_free(&b);
        return HW_ERR;
    }
    set->dim = dim > 0 ? dim : r.max_index;
    return HW_OK;
}

int hw_libsvm_load(hw_sparse_set *set, const char *path, int64_t dim) {
    label_summary labels;
    if (libsvm_read(set, &labels, path, dim) != HW_OK) return HW_ERR;
    label_summary_apply(&labels, set, 1);
    return HW_OK;
}

// ---- writing ----

static int ends_with(const char *s, const char *suffix) {
    size_t ls = strlen(s), lx = strlen(suffix);
    return ls >= lx && strcmp(s + ls - lx, suffix) == 0;
}

int libsvm_write(const hw_sparse_set *set, const char *path, int gz) {
    errno = 0;
    gzFile f = gzopen(path, gz ? "wb6" : "wbT");
    if (!f) return errno ? hw_fail_errno(errno, "cannot create %s", path) : hw_fail("cannot create %s", path);
    gzbuffer(f, 1 << 20);
    int whole = set->label_kind == HW_LABEL_BINARY || set->label_kind == HW_LABEL_CLASSES;
    char text[64];
    int ok = 1;
    for (int64_t i = 0; ok && i < set->n; i++) {
        int n = whole ? snprintf(text, sizeof text, "%d", (int)set->label[i])
                      : snprintf(text, sizeof text, "%.9g", (double)set->label[i]);
        ok = gzwrite(f, text, (unsigned)n) == n;
        for (int64_t k = set->row_start[i]; ok && k < set->row_start[i + 1]; k++) {
            n = snprintf(text, sizeof text, " %d:%.9g", set->index[k] + 1, (double)set->value[k]);
            ok = gzwrite(f, text, (unsigned)n) == n;
        }
        ok = ok && gzputc(f, '\n') == '\n';
    }
    int saved_errno = errno;
    if (gzclose(f) != Z_OK) ok = 0;
    if (!ok) return hw_fail_errno(saved_errno ? saved_errno : EIO, "cannot write %s", path);
    return HW_OK;
}

int hw_libsvm_save(const hw_sparse_set *set, const char *path) {
    if (libsvm_write(set, path, ends_with(path, ".gz")) == HW_OK) return HW_OK;
    unlink(path);
    return HW_ERR;
}
