// ckpt: safetensors checkpoints, written atomically and read with every byte bounds-checked.
//
// Saving builds the JSON header in memory, then writes "<path>.tmp.<pid>" with plain write(2)
// (so the error of the very call that failed, e.g. ENOSPC or EFBIG, is what the message names),
// fsyncs it, closes it, renames it over the target and fsyncs the directory: at any moment the
// target is either the old complete file or the new complete file.
//
// Loading checks the header against the file size before it trusts any offset, validates every
// tensor entry (dtype, shape, offsets, that the tensors tile the data section exactly) and then
// matches the entries to the model's parameters by name. Only when everything fits is the data
// read, into a staging buffer, and copied into the caller's weights.
#include "hw/ckpt.h"

#include "hw/err.h"
#include "hw/json.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "ckpt.c writes the float32 data as it is in memory; safetensors is little-endian"
#endif

// safetensors' own limit on the header size; a larger length field means a corrupted file.
#define CKPT_MAX_HEADER_BYTES 100000000ull

static int ckpt_fail(const char *path, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int ckpt_fail(const char *path, const char *fmt, ...) {
    char what[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return hw_fail("checkpoint '%s': %s", path, what);
}

// ---------------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------------

typedef struct {
    char *data;
    size_t length;
    size_t cap;
    int out_of_memory;
} text_buffer;

static void tb_append(text_buffer *tb, const char *s, size_t n) {
    if (tb->out_of_memory) return;
    if (tb->length + n + 1 > tb->cap) {
        size_t cap = tb->cap ? tb->cap : 1024;
        while (cap < tb->length + n + 1) cap *= 2;
        char *data = realloc(tb->data, cap);
        if (data == NULL) {
            tb->out_of_memory = 1;
            return;
        }
        tb->data = data;
        tb->cap = cap;
    }
    memcpy(tb->data + tb->length, s, n);
    tb->length += n;
    tb->data[tb->length] = '\0';
}

static void tb_puts(text_buffer *tb, const char *s) { tb_append(tb, s, strlen(s)); }

static void tb_printf(text_buffer *tb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void tb_printf(text_buffer *tb, const char *fmt, ...) {
    char buf[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0) tb_append(tb, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

// A JSON string literal. Bytes that are not valid UTF-8 (JSON text must be UTF-8, and Python's
// and Rust's readers refuse anything else) become U+FFFD.
static void tb_json_string(text_buffer *tb, const char *s, size_t n) {
    tb_puts(tb, "\"");
    size_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            tb_append(tb, esc, 2);
            i++;
        } else if (c < 0x20) {
            switch (c) {
            case '\n': tb_puts(tb, "\\n"); break;
            case '\r': tb_puts(tb, "\\r"); break;
            case '\t': tb_puts(tb, "\\t"); break;
            case '\b': tb_puts(tb, "\\b"); break;
            case '\f': tb_puts(tb, "\\f"); break;
            default: tb_printf(tb, "\\u%04x", c); break;
            }
            i++;
        } else if (c < 0x80) {
            size_t run = i;
            while (run < n && (unsigned char)s[run] >= 0x20 && (unsigned char)s[run] < 0x80 && s[run] != '"' &&
                   s[run] != '\\') {
                run++;
            }
            tb_append(tb, s + i, run - i);
            i = run;
        } else {
            size_t len = hw_utf8_sequence_length((const unsigned char *)s + i, n - i);
            if (len == 0) {
                tb_puts(tb, "\\ufffd");
                i++;
            } else {
                tb_append(tb, s + i, len);
                i += len;
            }
        }
    }
    tb_puts(tb, "\"");
}

// The header JSON, padded with spaces so that 8 + its length is a multiple of 8.
static int build_header(const char *path, const hw_model *model, const hw_ckpt_meta *meta, text_buffer *tb) {
    tb_puts(tb, "{\"__metadata__\":{\"format\":\"pt\"");
    if (model->text != NULL) {
        tb_puts(tb, ",\"hogwild_model\":");
        tb_json_string(tb, model->text, strlen(model->text));
    }
    tb_printf(tb, ",\"epoch\":\"%d\",\"samples_seen\":\"%" PRId64 "\",\"seed\":\"%" PRIu64 "\"}", meta->epoch,
              meta->samples_seen, meta->seed);
    uint64_t data_bytes = 0;
    for (int p = 0; p < model->n_params; p++) {
        const hw_param *param = &model->params[p];
        int64_t numel = hw_shape_numel(param->shape);
        if (numel < 0 || param->offset > model->n_weights || (uint64_t)numel > model->n_weights - param->offset) {
            return ckpt_fail(path, "model parameter '%s' (offset %zu, %" PRId64 " floats) lies outside the %zu floats "
                             "of the parameter buffer", param->name, param->offset, numel, model->n_weights);
        }
        uint64_t bytes = (uint64_t)numel * sizeof(float);
        tb_puts(tb, ",");
        tb_json_string(tb, param->name, strnlen(param->name, sizeof param->name));
        tb_puts(tb, ":{\"dtype\":\"F32\",\"shape\":[");
        for (int d = 0; d < param->shape.ndim; d++) tb_printf(tb, "%s%" PRId64, d ? "," : "", param->shape.dims[d]);
        tb_printf(tb, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", data_bytes, data_bytes + bytes);
        data_bytes += bytes;
    }
    tb_puts(tb, "}");
    while ((8 + tb->length) % 8 != 0) tb_puts(tb, " ");
    if (tb->out_of_memory) return ckpt_fail(path, "out of memory while building the header");
    return HW_OK;
}

// Writes all n bytes; returns 0 or the errno of the failing call.
static int write_all(int fd, const void *buf, size_t n) {
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        if (w == 0) return EIO;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

// The directory part of path ("." when there is none) into buf.
static void directory_of(const char *path, char *buf, size_t cap) {
    const char *slash = strrchr(path, '/');
    if (slash == NULL) {
        snprintf(buf, cap, ".");
    } else if (slash == path) {
        snprintf(buf, cap, "/");
    } else {
        snprintf(buf, cap, "%.*s", (int)(slash - path), path);
    }
}

// Writes header and data into the open temporary file and syncs it; returns 0 or an errno.
static int write_contents(int fd, const hw_model *model, const float *weights, const text_buffer *header) {
    unsigned char length_field[8];
    uint64_t n = header->length;
    for (int i = 0; i < 8; i++) length_field[i] = (unsigned char)(n >> (8 * i));
    int err = write_all(fd, length_field, sizeof length_field);
    if (err == 0) err = write_all(fd, header->data, header->length);
    for (int p = 0; p < model->n_params && err == 0; p++) {
        const hw_param *param = &model->params[p];
        err = write_all(fd, weights + param->offset, (size_t)hw_shape_numel(param->shape) * sizeof(float));
    }
    if (err == 0 && fsync(fd) != 0) err = errno;
    return err;
}

int hw_ckpt_save(const char *path, const hw_model *model, const float *weights, const hw_ckpt_meta *meta) {
    hw_ckpt_meta zero = {0};
    if (meta == NULL) meta = &zero;
    if (weights == NULL && model->n_weights > 0) return ckpt_fail(path, "no weights to save");
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp) {
        return ckpt_fail(path, "path too long");
    }
    text_buffer header = {0};
    if (build_header(path, model, meta, &header) != HW_OK) {
        free(header.data);
        return HW_ERR;
    }
    // O_EXCL: never write through a file or link that is already there; a leftover of a killed
    // run with the same pid is removed first.
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno == EEXIST && unlink(tmp) == 0) fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
        int err = errno;
        free(header.data);
        return hw_fail_errno(err, "cannot save checkpoint '%s': cannot create '%s'", path, tmp);
    }
    int err = write_contents(fd, model, weights, &header);
    free(header.data);
    if (close(fd) != 0 && err == 0) err = errno;
    if (err == 0 && rename(tmp, path) != 0) err = errno;
    if (err != 0) {
        unlink(tmp);
        return hw_fail_errno(err, "cannot save checkpoint '%s' (the previous file, if any, is unchanged)", path);
    }
    // Make the rename itself durable.
    char dir[PATH_MAX];
    directory_of(path, dir, sizeof dir);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return hw_fail_errno(errno, "checkpoint '%s' written, but cannot open its directory to sync it", path);
    // EINVAL: the file system does not support syncing directories; nothing more can be done.
    if (fsync(dfd) != 0 && errno != EINVAL) {
        int sync_err = errno;
        close(dfd);
        return hw_fail_errno(sync_err, "checkpoint '%s' written, but syncing its directory '%s' failed", path, dir);
    }
    close(dfd);
    return HW_OK;
}

// ---------------------------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------------------------

typedef struct {
    const char *path;
    int fd;
    uint64_t file_size;
    uint64_t header_length;
    uint64_t data_size;       // bytes after the header
    hw_json header;
    const hw_json *metadata;  // the __metadata__ object, or NULL
} ckpt_reader;

// One tensor entry of the header, validated against the data section.
typedef struct {
    const hw_json *member;    // its key is the tensor name
    const hw_json *shape;     // the JSON array, for messages
    uint64_t begin, end;
    int param;                // index of the model parameter it fills, or -1
} tensor_entry;

// Reads exactly n bytes at offset; returns 0 or an errno (EIO for a file that got shorter).
static int read_exact(int fd, void *buf, size_t n, uint64_t offset) {
    char *p = buf;
    while (n > 0) {
        ssize_t r = pread(fd, p, n, (off_t)offset);
        if (r < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        if (r == 0) return EIO;
        p += r;
        n -= (size_t)r;
        offset += (uint64_t)r;
    }
    return 0;
}

static void reader_close(ckpt_reader *r) {
    if (r->fd >= 0) close(r->fd);
    r->fd = -1;
    hw_json_free(&r->header);
}

// The header is an object; __metadata__, if there, is an object of strings.
static int check_header_shape(ckpt_reader *r) {
    if (r->header.type != HW_JSON_OBJECT) {
        return ckpt_fail(r->path, "the header is a JSON %s, not an object", hw_json_type_name(r->header.type));
    }
    const hw_json *metadata = hw_json_get(&r->header, "__metadata__");
    if (metadata == NULL) return HW_OK;
    if (metadata->type != HW_JSON_OBJECT) {
        return ckpt_fail(r->path, "__metadata__ is a JSON %s, not an object", hw_json_type_name(metadata->type));
    }
    for (int i = 0; i < metadata->count; i++) {
        if (metadata->items[i].type != HW_JSON_STRING) {
            return ckpt_fail(r->path, "__metadata__ value '%s' is a JSON %s; safetensors metadata values are strings",
                             metadata->items[i].key, hw_json_type_name(metadata->items[i].type));
        }
    }
    r->metadata = metadata;
    return HW_OK;
}

// Checks the header length against the file size and parses the header (r->fd is open).
static int reader_read_header(ckpt_reader *r) {
    const char *path = r->path;
    struct stat st;
    if (fstat(r->fd, &st) != 0) return hw_fail_errno(errno, "cannot stat checkpoint '%s'", path);
    if (!S_ISREG(st.st_mode)) return ckpt_fail(path, "not a regular file");
    r->file_size = (uint64_t)st.st_size;
    if (r->file_size < 8) {
        return ckpt_fail(path, "the file is %" PRIu64 " bytes, shorter than the 8-byte header length (truncated?)",
                         r->file_size);
    }
    unsigned char length_field[8];
    int err = read_exact(r->fd, length_field, 8, 0);
    if (err != 0) return hw_fail_errno(err, "cannot read checkpoint '%s'", path);
    for (int i = 7; i >= 0; i--) r->header_length = (r->header_length << 8) | length_field[i];
    if (r->header_length > r->file_size - 8) {
        return ckpt_fail(path, "the header length %" PRIu64 " runs past the end of the file (%" PRIu64 " bytes): "
                         "truncated, or not a safetensors file", r->header_length, r->file_size);
    }
    if (r->header_length > CKPT_MAX_HEADER_BYTES) {
        return ckpt_fail(path, "the header length %" PRIu64 " is beyond safetensors' limit of %llu bytes",
                         r->header_length, CKPT_MAX_HEADER_BYTES);
    }
    r->data_size = r->file_size - 8 - r->header_length;
    char *text = malloc(r->header_length + 1);
    if (text == NULL) return ckpt_fail(path, "out of memory for a header of %" PRIu64 " bytes", r->header_length);
    err = read_exact(r->fd, text, r->header_length, 8);
    if (err != 0) {
        free(text);
        return hw_fail_errno(err, "cannot read the header of checkpoint '%s'", path);
    }
    int parsed = hw_json_parse(&r->header, text, r->header_length);
    free(text);
    if (parsed != HW_OK) return hw_error_prefix("checkpoint '%s': the header is not valid JSON", path);
    return check_header_shape(r);
}

// Opens the file and reads its header; on failure nothing is left open.
static int reader_open(ckpt_reader *r, const char *path) {
    memset(r, 0, sizeof *r);
    r->path = path;
    r->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (r->fd < 0) return hw_fail_errno(errno, "cannot open checkpoint '%s'", path);
    if (reader_read_header(r) != HW_OK) {
        reader_close(r);
        return HW_ERR;
    }
    return HW_OK;
}

static int is_metadata(const hw_json *member) {
    return member->key_length == 12 && memcmp(member->key, "__metadata__", 12) == 0;
}

// "[10, 1, 5, 5]" from a JSON shape array (already checked to hold integers).
static void format_json_shape(const hw_json *shape, char *buf, size_t cap) {
    size_t used = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < shape->count && used < cap; i++) {
        used += (size_t)snprintf(buf + used, cap - used, "%s%" PRId64, i ? ", " : "", shape->items[i].integer);
    }
    if (used < cap) snprintf(buf + used, cap - used, "]");
}

// Checks one header entry: dtype, shape, offsets within the data section, size matching the shape.
static int check_entry(const ckpt_reader *r, const hw_json *member, tensor_entry *out) {
    const char *name = member->key;
    if (member->type != HW_JSON_OBJECT) {
        return ckpt_fail(r->path, "tensor '%s' is described by a JSON %s, not an object", name,
                         hw_json_type_name(member->type));
    }
    const hw_json *dtype = hw_json_get(member, "dtype");
    const hw_json *shape = hw_json_get(member, "shape");
    const hw_json *offsets = hw_json_get(member, "data_offsets");
    if (dtype == NULL || shape == NULL || offsets == NULL) {
        return ckpt_fail(r->path, "tensor '%s' lacks \"%s\"", name,
                         dtype == NULL ? "dtype" : shape == NULL ? "shape" : "data_offsets");
    }
    if (dtype->type != HW_JSON_STRING || strcmp(dtype->string, "F32") != 0 || dtype->length != 3) {
        return ckpt_fail(r->path, "tensor '%s' has dtype %s%s%s; only F32 (float32) is supported", name,
                         dtype->type == HW_JSON_STRING ? "'" : "a JSON ",
                         dtype->type == HW_JSON_STRING ? dtype->string : hw_json_type_name(dtype->type),
                         dtype->type == HW_JSON_STRING ? "'" : "");
    }
    if (shape->type != HW_JSON_ARRAY) return ckpt_fail(r->path, "tensor '%s': \"shape\" is not an array", name);
    // numel <= 2^61 keeps numel * 4 within uint64; any real file is far below.
    const uint64_t numel_limit = (uint64_t)1 << 61;
    uint64_t numel = 1;
    for (int i = 0; i < shape->count; i++) {
        const hw_json *d = &shape->items[i];
        if (d->type != HW_JSON_NUMBER || !d->is_integer || d->integer < 0) {
            return ckpt_fail(r->path, "tensor '%s': shape entry %d is not a non-negative integer", name, i);
        }
        uint64_t dim = (uint64_t)d->integer;
        if (dim != 0 && numel > numel_limit / dim) {
            return ckpt_fail(r->path, "tensor '%s': the shape has too many elements", name);
        }
        numel *= dim;
    }
    if (offsets->type != HW_JSON_ARRAY || offsets->count != 2) {
        return ckpt_fail(r->path, "tensor '%s': \"data_offsets\" is not an array of two offsets", name);
    }
    for (int i = 0; i < 2; i++) {
        const hw_json *o = &offsets->items[i];
        if (o->type != HW_JSON_NUMBER || !o->is_integer || o->integer < 0) {
            return ckpt_fail(r->path, "tensor '%s': data offset %d is not a non-negative integer", name, i);
        }
    }
    out->member = member;
    out->shape = shape;
    out->begin = (uint64_t)offsets->items[0].integer;
    out->end = (uint64_t)offsets->items[1].integer;
    out->param = -1;
    if (out->begin > out->end || out->end > r->data_size) {
        return ckpt_fail(r->path, "tensor '%s': data offsets [%" PRIu64 ", %" PRIu64 "] lie outside the data section "
                         "(%" PRIu64 " bytes)%s", name, out->begin, out->end, r->data_size,
                         out->end > r->data_size ? ": truncated file?" : "");
    }
    if (out->end - out->begin != numel * sizeof(float)) {
        char shape_text[128];
        format_json_shape(shape, shape_text, sizeof shape_text);
        return ckpt_fail(r->path, "tensor '%s': data offsets [%" PRIu64 ", %" PRIu64 "] hold %" PRIu64 " bytes, but "
                         "shape %s of float32 needs %" PRIu64, name, out->begin, out->end, out->end - out->begin,
                         shape_text, numel * (uint64_t)sizeof(float));
    }
    return HW_OK;
}

static int compare_by_begin(const void *a, const void *b) {
    const tensor_entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

// The tensors must tile the data section exactly: no overlap, no gap, nothing after the last one.
static int check_tiling(const ckpt_reader *r, tensor_entry *entries, int n) {
    qsort(entries, (size_t)n, sizeof *entries, compare_by_begin);
    uint64_t at = 0;
    for (int i = 0; i < n; i++) {
        if (entries[i].begin < at) {
            return ckpt_fail(r->path, "tensors '%s' and '%s' overlap in the data section", entries[i - 1].member->key,
                             entries[i].member->key);
        }
        if (entries[i].begin > at) {
            return ckpt_fail(r->path, "%" PRIu64 " bytes of the data section before tensor '%s' belong to no tensor",
                             entries[i].begin - at, entries[i].member->key);
        }
        at = entries[i].end;
    }
    if (at != r->data_size) {
        return ckpt_fail(r->path, "the file is %" PRIu64 " bytes but the header accounts for %" PRIu64 " (8 + %" PRIu64
                         " header + %" PRIu64 " data): trailing bytes", r->file_size, 8 + r->header_length + at,
                         r->header_length, at);
    }
    return HW_OK;
}

static int find_param(const hw_model *model, const hw_json *member) {
    for (int p = 0; p < model->n_params; p++) {
        const char *name = model->params[p].name;
        if (strnlen(name, HW_NAME_CAP) == member->key_length && memcmp(name, member->key, member->key_length) == 0) {
            return p;
        }
    }
    return -1;
}

static void append_name(char *list, size_t cap, const char *name) {
    size_t used = strlen(list);
    if (used < cap) snprintf(list + used, cap - used, "%s'%s'", used ? ", " : "", name);
}

static const char *model_label(const hw_model *model) { return model->path[0] ? model->path : "the model"; }

// Every entry names a parameter of the model (no unknown or repeated names), with its shape; every
// parameter has an entry.
static int match_model(const ckpt_reader *r, const hw_model *model, tensor_entry *entries, int n) {
    char list[512] = "";
    int unknown = 0;
    for (int i = 0; i < n; i++) {
        entries[i].param = find_param(model, entries[i].member);
        if (entries[i].param < 0) unknown++, append_name(list, sizeof list, entries[i].member->key);
    }
    if (unknown) {
        return ckpt_fail(r->path, "%d tensor%s not in %s: %s (a checkpoint of another network?)", unknown,
                         unknown == 1 ? " is" : "s are", model_label(model), list);
    }
    int *seen = calloc((size_t)model->n_params + 1, sizeof *seen);
    if (seen == NULL) return ckpt_fail(r->path, "out of memory");
    for (int i = 0; i < n; i++) {
        const hw_param *param = &model->params[entries[i].param];
        int64_t numel = hw_shape_numel(param->shape);
        if (numel < 0 || param->offset > model->n_weights || (uint64_t)numel > model->n_weights - param->offset) {
            free(seen);
            return ckpt_fail(r->path, "model parameter '%s' (offset %zu, %" PRId64 " floats) lies outside the %zu "
                             "floats of the parameter buffer", param->name, param->offset, numel, model->n_weights);
        }
        if (seen[entries[i].param]++) {
            free(seen);
            return ckpt_fail(r->path, "tensor '%s' appears twice in the header", param->name);
        }
        const hw_json *shape = entries[i].shape;
        int same = shape->count == param->shape.ndim;
        for (int d = 0; same && d < shape->count; d++) same = shape->items[d].integer == param->shape.dims[d];
        if (!same) {
            char file_shape[128], model_shape[128];
            format_json_shape(shape, file_shape, sizeof file_shape);
            hw_shape_format(param->shape, model_shape, sizeof model_shape);
            free(seen);
            return ckpt_fail(r->path, "tensor '%s' has shape %s in the file but %s in %s", param->name, file_shape,
                             model_shape, model_label(model));
        }
    }
    int missing = 0;
    for (int p = 0; p < model->n_params; p++) {
        if (!seen[p]) missing++, append_name(list, sizeof list, model->params[p].name);
    }
    free(seen);
    if (missing) {
        return ckpt_fail(r->path, "%d tensor%s that %s needs %s missing: %s", missing, missing == 1 ? "" : "s",
                         model_label(model), missing == 1 ? "is" : "are", list);
    }
    return HW_OK;
}

// A decimal metadata value into *out (within [min, max] as unsigned or signed); absent keys are 0.
static int metadata_number(const ckpt_reader *r, const char *key, int is_signed, int64_t min, int64_t max,
                           uint64_t *out) {
    *out = 0;
    const hw_json *v = hw_json_get(r->metadata, key);
    if (v == NULL) return HW_OK;
    const char *s = v->string;
    int ok = v->length > 0 && v->length < 32 && strlen(s) == v->length;
    for (size_t i = 0; ok && i < v->length; i++) ok = (s[i] >= '0' && s[i] <= '9') || (i == 0 && is_signed && s[i] == '-');
    if (ok) {
        errno = 0;
        char *end = NULL;
        if (is_signed) {
            long long x = strtoll(s, &end, 10);
            ok = errno == 0 && *end == '\0' && x >= min && x <= max;
            *out = (uint64_t)x;
        } else {
            unsigned long long x = strtoull(s, &end, 10);
            ok = errno == 0 && *end == '\0';
            *out = (uint64_t)x;
        }
    }
    if (!ok) return ckpt_fail(r->path, "__metadata__ '%s' is \"%.40s\", expected a whole number", key, s);
    return HW_OK;
}

static int read_meta(const ckpt_reader *r, hw_ckpt_meta *meta) {
    uint64_t epoch, samples, seed;
    if (metadata_number(r, "epoch", 1, 0, INT_MAX, &epoch) != HW_OK) return HW_ERR;
    if (metadata_number(r, "samples_seen", 1, 0, INT64_MAX, &samples) != HW_OK) return HW_ERR;
    if (metadata_number(r, "seed", 0, 0, 0, &seed) != HW_OK) return HW_ERR;
    meta->epoch = (int)epoch;
    meta->samples_seen = (int64_t)samples;
    meta->seed = seed;
    return HW_OK;
}

int hw_ckpt_load(const char *path, const hw_model *model, float *weights, hw_ckpt_meta *meta) {
    ckpt_reader r;
    if (reader_open(&r, path) != HW_OK) return HW_ERR;
    hw_ckpt_meta file_meta = {0};
    if (read_meta(&r, &file_meta) != HW_OK) {
        reader_close(&r);
        return HW_ERR;
    }
    int n_metadata = 0;
    for (int i = 0; i < r.header.count; i++) n_metadata += is_metadata(&r.header.items[i]);
    if (n_metadata > 1) {
        reader_close(&r);
        return ckpt_fail(path, "__metadata__ appears %d times in the header", n_metadata);
    }
    int n = r.header.count - n_metadata;
    tensor_entry *entries = calloc((size_t)n + 1, sizeof *entries);
    char *data = NULL;
    if (entries == NULL) {
        reader_close(&r);
        return ckpt_fail(path, "out of memory for %d tensor entries", n);
    }
    int status = HW_OK;
    int k = 0;
    for (int i = 0; i < r.header.count && status == HW_OK; i++) {
        const hw_json *member = &r.header.items[i];
        if (is_metadata(member)) continue;
        status = check_entry(&r, member, &entries[k++]);
    }
    if (status == HW_OK) status = match_model(&r, model, entries, n);
    if (status == HW_OK) status = check_tiling(&r, entries, n);
    if (status == HW_OK && r.data_size > 0) {
        // data_size is now the sum of the model's parameter sizes: bounded by the model.
        data = malloc(r.data_size);
        if (data == NULL) {
            status = ckpt_fail(path, "out of memory for %" PRIu64 " bytes of data", r.data_size);
        } else {
            int err = read_exact(r.fd, data, r.data_size, 8 + r.header_length);
            if (err != 0) status = hw_fail_errno(err, "cannot read the data of checkpoint '%s'", path);
        }
    }
    if (status == HW_OK) {
        for (int i = 0; i < n; i++) {
            const hw_param *param = &model->params[entries[i].param];
            memcpy(weights + param->offset, data + entries[i].begin, entries[i].end - entries[i].begin);
        }
        if (meta != NULL) *meta = file_meta;
    }
    free(data);
    free(entries);
    reader_close(&r);
    return status;
}

int hw_ckpt_load_model_text(const char *path, char **text) {
    *text = NULL;
    ckpt_reader r;
    if (reader_open(&r, path) != HW_OK) return HW_ERR;
    const hw_json *v = hw_json_get(r.metadata, "hogwild_model");
    if (v != NULL) {
        *text = malloc(v->length + 1);
        if (*text == NULL) {
            reader_close(&r);
            return ckpt_fail(path, "out of memory for the model text");
        }
        memcpy(*text, v->string, v->length + 1);
    }
    reader_close(&r);
    return HW_OK;
}
