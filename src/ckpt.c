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

#include "hw/bf16.h"

#include "hw/err.h"
#include "hw/file.h"
#include "hw/shm.h"

#include <jansson.h>

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
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

static int save(const char *path, const hw_model *model, const float *weights, const hw_ckpt_meta *meta,
                const hw_ckpt_extra *extra);

// Length of the valid UTF-8 sequence at s[0] (a byte >= 0x80) within avail bytes, or 0 when it
// is not one (bad lead byte, missing continuation, overlong form, surrogate, beyond U+10FFFF).
static size_t utf8_sequence_length(const unsigned char *s, size_t avail) {
    size_t n = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 ? 2 : 0;
    if (n == 0 || s[0] > 0xf4 || n > avail) return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
    }
    if (n == 3 && s[0] == 0xe0 && s[1] < 0xa0) return 0;   // overlong
    if (n == 3 && s[0] == 0xed && s[1] >= 0xa0) return 0;  // surrogate
    if (n == 4 && s[0] == 0xf0 && s[1] < 0x90) return 0;   // overlong
    if (n == 4 && s[0] == 0xf4 && s[1] >= 0x90) return 0;  // beyond U+10FFFF
    return n;
}

// A JSON string of the text s: bytes that are not valid UTF-8 (JSON text must be UTF-8, and
// Python's and Rust's readers refuse anything else) become U+FFFD. NULL when out of memory.
static json_t *utf8_string(const char *s) {
    size_t n = strlen(s);
    char *clean = malloc(3 * n + 1);  // each byte at most becomes the 3 bytes of U+FFFD
    if (clean == NULL) return NULL;
    size_t used = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t len = c < 0x80 ? 1 : utf8_sequence_length((const unsigned char *)s + i, n - i);
        if (len == 0) {
            memcpy(clean + used, "\xef\xbf\xbd", 3);
            used += 3;
            i++;
        } else {
            memcpy(clean + used, s + i, len);
            used += len;
            i += len;
        }
    }
    json_t *string = json_stringn(clean, used);
    free(clean);
    return string;
}

static json_t *decimal_string(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static json_t *decimal_string(const char *fmt, ...) {
    char buf[32];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return json_string(buf);
}

// The header JSON (malloc'ed into *text, *length bytes), padded with spaces so that 8 + its
// length is a multiple of 8. Members keep the order they are set in: metadata, then the
// parameters in the model's order.
static int build_header(const char *path, const hw_model *model, const hw_ckpt_meta *meta, const hw_ckpt_extra *extra,
                        char **text, size_t *length) {
    json_t *header = json_object(), *metadata = json_object();
    int ok = header && metadata && json_object_set(header, "__metadata__", metadata) == 0;
    ok = ok && json_object_set_new(metadata, "format", json_string("pt")) == 0;
    if (model->text != NULL) ok = ok && json_object_set_new(metadata, "hogwild_model", utf8_string(model->text)) == 0;
    ok = ok && json_object_set_new(metadata, "epoch", decimal_string("%d", meta->epoch)) == 0;
    ok = ok && json_object_set_new(metadata, "samples_seen", decimal_string("%" PRId64, meta->samples_seen)) == 0;
    ok = ok && json_object_set_new(metadata, "seed", decimal_string("%" PRIu64, meta->seed)) == 0;
    // %.9g: the float's shortest text that reads back as the same float.
    if (meta->lr > 0) ok = ok && json_object_set_new(metadata, "lr", decimal_string("%.9g", (double)meta->lr)) == 0;
    if (meta->lr_schedule[0]) {
        ok = ok && json_object_set_new(metadata, "lr_schedule", json_string(meta->lr_schedule)) == 0;
        ok = ok && json_object_set_new(metadata, "lr_warmup", decimal_string("%" PRId64, meta->lr_warmup)) == 0;
    }
    if (meta->simulate > 0) {
        ok = ok && json_object_set_new(metadata, "simulate", decimal_string("%d", meta->simulate)) == 0;
        ok = ok && json_object_set_new(metadata, "delay", utf8_string(meta->delay)) == 0;
    }
    if (meta->update[0]) ok = ok && json_object_set_new(metadata, "update", json_string(meta->update)) == 0;
    if (meta->has_max_staleness) {
        ok = ok && json_object_set_new(metadata, "max_staleness", decimal_string("%d", meta->max_staleness)) == 0;
    }
    for (int t = 0; ok && t < extra->n_texts; t++) {
        ok = json_object_set_new(metadata, extra->texts[t].key, utf8_string(extra->texts[t].value)) == 0;
    }
    json_decref(metadata);
    uint64_t data_bytes = 0;
    // The model's parameters, then each state's (-1: the weights), every one F32 but a bf16 run's weights.
    for (int q = 0; ok && q < (extra->n_states + 1) * model->n_params; q++) {
        int p = q % model->n_params, state = q / model->n_params - 1;
        const hw_param *param = &model->params[p];
        int half = meta->bf16 && state < 0;
        char name[HW_NAME_CAP + 128];
        snprintf(name, sizeof name, "%s%s", state < 0 ? "" : extra->states[state].prefix, param->name);
        int64_t numel = hw_shape_numel(param->shape);
        if (numel < 0 || param->offset > model->n_weights || (uint64_t)numel > model->n_weights - param->offset) {
            json_decref(header);
            return ckpt_fail(path,
                             "model parameter '%s' (offset %zu, %" PRId64 " floats) lies outside the %zu floats "
                             "of the parameter buffer",
                             param->name, param->offset, numel, model->n_weights);
        }
        uint64_t bytes = (uint64_t)numel * (half ? sizeof(uint16_t) : sizeof(float));
        json_t *shape = json_array();
        for (int d = 0; shape && d < param->shape.ndim; d++) {
            if (json_array_append_new(shape, json_integer(param->shape.dims[d])) != 0) json_decref(shape), shape = NULL;
        }
        json_t *tensor = json_pack("{s:s, s:o*, s:[I,I]}", "dtype", half ? "BF16" : "F32", "shape", shape,
                                   "data_offsets", (json_int_t)data_bytes, (json_int_t)(data_bytes + bytes));
        ok = tensor && shape && json_object_set_new(header, name, tensor) == 0;
        data_bytes += bytes;
    }
    char *compact = ok ? json_dumps(header, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(header);
    size_t n = compact ? strlen(compact) : 0;
    size_t padded = (8 + n + 7) / 8 * 8 - 8;
    *text = compact ? realloc(compact, padded + 1) : NULL;
    if (*text == NULL) {
        free(compact);
        return ckpt_fail(path, "out of memory while building the header");
    }
    memset(*text + n, ' ', padded - n);
    (*text)[padded] = '\0';
    *length = padded;
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

// Writes header and data into the open temporary file and syncs it; returns 0 or an errno. With
// `bf16` (model->n_weights bfloat16, or NULL) the tensors are written from it, else from `weights`.
static int write_contents(int fd, const hw_model *model, const float *weights, const uint16_t *bf16,
                          const hw_ckpt_extra *extra, const char *header, size_t n) {
    unsigned char length_field[8];
    for (int i = 0; i < 8; i++) length_field[i] = (unsigned char)((uint64_t)n >> (8 * i));
    int err = write_all(fd, length_field, sizeof length_field);
    if (err == 0) err = write_all(fd, header, n);
    for (int p = 0; p < model->n_params && err == 0; p++) {
        const hw_param *param = &model->params[p];
        size_t numel = (size_t)hw_shape_numel(param->shape);
        err = bf16 ? write_all(fd, bf16 + param->offset, numel * sizeof(uint16_t))
                   : write_all(fd, weights + param->offset, numel * sizeof(float));
    }
    for (int q = 0; q < extra->n_states * model->n_params && err == 0; q++) {
        const hw_param *param = &model->params[q % model->n_params];
        size_t numel = (size_t)hw_shape_numel(param->shape);
        err = write_all(fd, extra->states[q / model->n_params].buffer + param->offset, numel * sizeof(float));
    }
    if (err == 0 && fsync(fd) != 0) err = errno;
    return err;
}

// ---- the descriptor kept for the saves ----

// A run opens descriptors as it goes (a worker's pidfd and pipe, MPI's sockets, the GPU's): under a
// low `ulimit -n` the first save, an epoch later, found none left. One is kept from the start
// (hw_ckpt_keep_descriptor) and given up for each save, which opens its files one at a time.
static int spare_fd = -1;

int hw_ckpt_keep_descriptor(void) {
    if (spare_fd >= 0) return HW_OK;
    spare_fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (spare_fd < 0) {
        int err = errno;
        struct rlimit rl;
        long limit = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? (long)rl.rlim_cur : -1;
        return hw_fail_errno(err, "no file descriptor left to keep for saving the checkpoint (ulimit -n is %ld)",
                             limit);
    }
    return HW_OK;
}

static void give_up_spare(void) {
    if (spare_fd >= 0) close(spare_fd);
    spare_fd = -1;
}

// After a save: the descriptor is kept again for the next one (if it cannot be, the next save
// opens what it can, as without one).
static void take_spare_back(int had_one) {
    if (had_one) hw_ckpt_keep_descriptor();
}

int hw_ckpt_save(const char *path, const hw_model *model, const float *weights, const hw_ckpt_meta *meta) {
    return hw_ckpt_save_extra(path, model, weights, meta, NULL);
}

int hw_ckpt_save_extra(const char *path, const hw_model *model, const float *weights, const hw_ckpt_meta *meta,
                       const hw_ckpt_extra *extra) {
    int had_spare = spare_fd >= 0;
    give_up_spare();
    int status = save(path, model, weights, meta, extra);
    take_spare_back(had_spare);
    return status;
}

static int save(const char *path, const hw_model *model, const float *weights, const hw_ckpt_meta *meta,
                const hw_ckpt_extra *extra) {
    hw_ckpt_meta zero = {0};
    hw_ckpt_extra none = {0};
    if (meta == NULL) meta = &zero;
    if (extra == NULL) extra = &none;
    if (weights == NULL && model->n_weights > 0) return ckpt_fail(path, "no weights to save");
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp) {
        return ckpt_fail(path, "path too long");
    }
    char *header = NULL;
    size_t header_length = 0;
    if (build_header(path, model, meta, extra, &header, &header_length) != HW_OK) return HW_ERR;
    // BF16 tensors: the weights rounded to the nearest bfloat16, exact for a bf16 run's (which are
    // bfloat16 already).
    uint16_t *bf16 = NULL;
    if (meta->bf16) {
        bf16 = malloc(sizeof(uint16_t) * (model->n_weights ? model->n_weights : 1));
        if (!bf16) {
            free(header);
            return ckpt_fail(path, "out of memory for the bfloat16 weights");
        }
        hw_bf16_from_floats(bf16, weights, model->n_weights);
    }
    // Noted first: every exit that runs code removes it, and --clean-shm finds it after a SIGKILL.
    if (hw_shm_temp_note(tmp) != HW_OK) {
        free(header);
        free(bf16);
        return hw_error_prefix("cannot save checkpoint '%s'", path);
    }
    // O_EXCL: never write through a file or link that is already there; a leftover of a killed
    // run with the same pid is removed first.
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno == EEXIST && unlink(tmp) == 0) fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
        int err = errno;
        free(header);
        free(bf16);
        hw_shm_temp_forget();
        return hw_fail_errno(err, "cannot save checkpoint '%s': cannot create '%s'", path, tmp);
    }
    int err = write_contents(fd, model, weights, bf16, extra, header, header_length);
    free(header);
    free(bf16);
    if (close(fd) != 0 && err == 0) err = errno;
    if (err == 0 && rename(tmp, path) != 0) err = errno;
    if (err != 0) unlink(tmp);
    hw_shm_temp_forget();
    if (err != 0) {
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
    uint64_t data_size;  // bytes after the header
    json_t *header;      // an object
    json_t *metadata;    // its __metadata__ object, or NULL
} ckpt_reader;

// One tensor entry of the header, validated against the data section.
typedef struct {
    const char *name;     // its key in the header
    const json_t *shape;  // the JSON array, for messages
    uint64_t begin, end;
    int param;  // index of the model parameter it fills, or -1
    int bf16;   // its dtype: BF16 (1) or F32 (0)
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
    json_decref(r->header);
    r->header = NULL;
}

// The name of a JSON value's type, for messages.
static const char *type_name(const json_t *value) {
    switch (json_typeof(value)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER:
    case JSON_REAL: return "number";
    case JSON_TRUE:
    case JSON_FALSE: return "boolean";
    default: return "null";
    }
}

// The header is an object; __metadata__, if there, is an object of strings.
static int check_header_shape(ckpt_reader *r) {
    if (!json_is_object(r->header)) {
        return ckpt_fail(r->path, "the header is a JSON %s, not an object", type_name(r->header));
    }
    json_t *metadata = json_object_get(r->header, "__metadata__");
    if (metadata == NULL) return HW_OK;
    if (!json_is_object(metadata)) {
        return ckpt_fail(r->path, "__metadata__ is a JSON %s, not an object", type_name(metadata));
    }
    const char *key;
    json_t *value;
    json_object_foreach(metadata, key, value) {
        if (!json_is_string(value)) {
            return ckpt_fail(r->path, "__metadata__ value '%s' is a JSON %s; safetensors metadata values are strings",
                             key, type_name(value));
        }
    }
    // The model text is a model file's text, with a model file's limit: more is no file hogwild wrote.
    const json_t *text = json_object_get(metadata, "hogwild_model");
    if (text != NULL && json_string_length(text) > HW_MODEL_FILE_MAX_BYTES) {
        return ckpt_fail(r->path,
                         "__metadata__ 'hogwild_model' holds %zu bytes of model text, more than the limit of %llu "
                         "bytes for a model file",
                         json_string_length(text), (unsigned long long)HW_MODEL_FILE_MAX_BYTES);
    }
    r->metadata = metadata;
    return HW_OK;
}

// Checks the header length against the file size and parses the header (r->fd is open). The
// JSON is strict: jansson reads exactly header_length bytes, valid UTF-8 only, and refuses a key
// that appears twice, which would make the file mean two things.
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
        return ckpt_fail(path,
                         "the header length %" PRIu64 " runs past the end of the file (%" PRIu64 " bytes): "
                         "truncated, or not a safetensors file",
                         r->header_length, r->file_size);
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
    json_error_t error;
    r->header = json_loadb(text, r->header_length, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &error);
    free(text);
    if (r->header == NULL) {
        return ckpt_fail(path, "the header is not valid JSON%s: %s at byte %d",
                         json_error_code(&error) == json_error_duplicate_key ? " (a key appears twice)" : "",
                         error.text, error.position);
    }
    return check_header_shape(r);
}

// Opens the file and reads its header; on failure nothing is left open.
static int reader_open(ckpt_reader *r, const char *path) {
    memset(r, 0, sizeof *r);
    r->path = path;
    // O_NONBLOCK: a FIFO must not block the open; reader_read_header refuses anything not regular.
    r->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (r->fd < 0) return hw_fail_errno(errno, "cannot open checkpoint '%s'", path);
    fcntl(r->fd, F_SETFL, fcntl(r->fd, F_GETFL) & ~O_NONBLOCK);
    if (reader_read_header(r) != HW_OK) {
        reader_close(r);
        return HW_ERR;
    }
    return HW_OK;
}

// "[10, 1, 5, 5]" from a JSON shape array (already checked to hold integers).
static void format_json_shape(const json_t *shape, char *buf, size_t cap) {
    size_t used = (size_t)snprintf(buf, cap, "[");
    for (size_t i = 0; i < json_array_size(shape) && used < cap; i++) {
        used += (size_t)snprintf(buf + used, cap - used, "%s%" JSON_INTEGER_FORMAT, i ? ", " : "",
                                 json_integer_value(json_array_get(shape, i)));
    }
    if (used < cap) snprintf(buf + used, cap - used, "]");
}

// A non-negative JSON integer into *out; 0 when value is anything else.
static int non_negative_integer(const json_t *value, uint64_t *out) {
    if (!json_is_integer(value) || json_integer_value(value) < 0) return 0;
    *out = (uint64_t)json_integer_value(value);
    return 1;
}

// A JSON value as the file spells it, for messages (cut to cap).
static void format_json_value(const json_t *value, char *buf, size_t cap) {
    char *text = value ? json_dumps(value, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
    snprintf(buf, cap, "%s", text ? text : "nothing");
    free(text);
}

// Checks one header entry: dtype, shape, offsets within the data section, size matching the shape.
static int check_entry(const ckpt_reader *r, const char *name, const json_t *tensor, tensor_entry *out) {
    if (!json_is_object(tensor)) {
        return ckpt_fail(r->path, "tensor '%s' is described by a JSON %s, not an object", name, type_name(tensor));
    }
    const json_t *dtype = json_object_get(tensor, "dtype");
    const json_t *shape = json_object_get(tensor, "shape");
    const json_t *offsets = json_object_get(tensor, "data_offsets");
    if (dtype == NULL || shape == NULL || offsets == NULL) {
        return ckpt_fail(r->path, "tensor '%s' lacks \"%s\"", name,
                         dtype == NULL   ? "dtype"
                         : shape == NULL ? "shape"
                                         : "data_offsets");
    }
    int is_f32 = json_is_string(dtype) && strcmp(json_string_value(dtype), "F32") == 0;
    int is_bf16 = json_is_string(dtype) && strcmp(json_string_value(dtype), "BF16") == 0;
    if (!is_f32 && !is_bf16) {
        return ckpt_fail(r->path, "tensor '%s' has dtype %s%s%s; only F32 (float32) and BF16 (bfloat16) are supported",
                         name, json_is_string(dtype) ? "'" : "a JSON ",
                         json_is_string(dtype) ? json_string_value(dtype) : type_name(dtype),
                         json_is_string(dtype) ? "'" : "");
    }
    if (!json_is_array(shape)) return ckpt_fail(r->path, "tensor '%s': \"shape\" is not an array", name);
    // numel <= 2^61 keeps numel * 4 within uint64; any real file is far below.
    const uint64_t numel_limit = (uint64_t)1 << 61;
    uint64_t numel = 1;
    for (size_t i = 0; i < json_array_size(shape); i++) {
        uint64_t dim;
        if (!non_negative_integer(json_array_get(shape, i), &dim)) {
            char value[64];
            format_json_value(json_array_get(shape, i), value, sizeof value);
            return ckpt_fail(r->path, "tensor '%s': shape entry %zu is %s, not a non-negative integer", name, i, value);
        }
        if (dim != 0 && numel > numel_limit / dim) {
            return ckpt_fail(r->path, "tensor '%s': the shape has too many elements", name);
        }
        numel *= dim;
    }
    if (!json_is_array(offsets) || json_array_size(offsets) != 2) {
        return ckpt_fail(r->path, "tensor '%s': \"data_offsets\" is not an array of two offsets", name);
    }
    for (size_t i = 0; i < 2; i++) {
        if (!non_negative_integer(json_array_get(offsets, i), i == 0 ? &out->begin : &out->end)) {
            char value[64];
            format_json_value(json_array_get(offsets, i), value, sizeof value);
            return ckpt_fail(r->path, "tensor '%s': its %s data offset is %s, not a non-negative integer", name,
                             i == 0 ? "first" : "second", value);
        }
    }
    out->name = name;
    out->shape = shape;
    out->param = -1;
    if (out->begin > out->end || out->end > r->data_size) {
        return ckpt_fail(r->path,
                         "tensor '%s': data offsets [%" PRIu64 ", %" PRIu64 "] lie outside the data section "
                         "(%" PRIu64 " bytes)%s",
                         name, out->begin, out->end, r->data_size, out->end > r->data_size ? ": truncated file?" : "");
    }
    out->bf16 = is_bf16;
    uint64_t element = is_bf16 ? sizeof(uint16_t) : sizeof(float);
    if (out->end - out->begin != numel * element) {
        char shape_text[128];
        format_json_shape(shape, shape_text, sizeof shape_text);
        return ckpt_fail(r->path,
                         "tensor '%s': data offsets [%" PRIu64 ", %" PRIu64 "] hold %" PRIu64 " bytes, but "
                         "shape %s of %s needs %" PRIu64,
                         name, out->begin, out->end, out->end - out->begin, shape_text,
                         is_bf16 ? "bfloat16" : "float32", numel * element);
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
            return ckpt_fail(r->path, "tensors '%s' and '%s' overlap in the data section", entries[i - 1].name,
                             entries[i].name);
        }
        if (entries[i].begin > at) {
            return ckpt_fail(r->path, "%" PRIu64 " bytes of the data section before tensor '%s' belong to no tensor",
                             entries[i].begin - at, entries[i].name);
        }
        at = entries[i].end;
    }
    if (at != r->data_size) {
        return ckpt_fail(r->path,
                         "the file is %" PRIu64 " bytes but the header accounts for %" PRIu64 " (8 + %" PRIu64
                         " header + %" PRIu64 " data): trailing bytes",
                         r->file_size, 8 + r->header_length + at, r->header_length, at);
    }
    return HW_OK;
}

static void append_name(char *list, size_t cap, const char *name) {
    size_t used = strlen(list);
    if (used < cap) snprintf(list + used, cap - used, "%s'%s'", used ? ", " : "", name);
}

static const char *model_label(const hw_model *model) { return model->path[0] ? model->path : "the model"; }

// Every entry names a parameter of the model (no unknown names; the reader refused repeated
// ones), with its shape; every parameter has an entry.
static int match_model(const ckpt_reader *r, const hw_model *model, tensor_entry *entries, int n) {
    char list[512] = "";
    int unknown = 0;
    for (int i = 0; i < n; i++) {
        entries[i].param = hw_model_find_param(model, entries[i].name);
        int state = strncmp(entries[i].name, HW_CKPT_STATE_PREFIX, strlen(HW_CKPT_STATE_PREFIX)) == 0;
        if (entries[i].param < 0 && !state) unknown++, append_name(list, sizeof list, entries[i].name);
    }
    if (unknown) {
        return ckpt_fail(r->path, "%d tensor%s not in %s: %s (a checkpoint of another network?)", unknown,
                         unknown == 1 ? " is" : "s are", model_label(model), list);
    }
    int *seen = calloc((size_t)model->n_params + 1, sizeof *seen);
    if (seen == NULL) return ckpt_fail(r->path, "out of memory");
    for (int i = 0; i < n; i++) {
        if (entries[i].param < 0) continue;  // a trainer's state (HW_CKPT_STATE_PREFIX): not the model's
        const hw_param *param = &model->params[entries[i].param];
        int64_t numel = hw_shape_numel(param->shape);
        if (numel < 0 || param->offset > model->n_weights || (uint64_t)numel > model->n_weights - param->offset) {
            free(seen);
            return ckpt_fail(r->path,
                             "model parameter '%s' (offset %zu, %" PRId64 " floats) lies outside the %zu "
                             "floats of the parameter buffer",
                             param->name, param->offset, numel, model->n_weights);
        }
        seen[entries[i].param] = 1;
        const json_t *shape = entries[i].shape;
        int same = json_array_size(shape) == (size_t)param->shape.ndim;
        for (int d = 0; same && d < param->shape.ndim; d++) {
            same = json_integer_value(json_array_get(shape, (size_t)d)) == param->shape.dims[d];
        }
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

// The most samples a checkpoint may say it has seen (2^53).
#define HW_CKPT_MAX_SAMPLES ((int64_t)1 << 53)

// A decimal metadata value into *out (within [min, max] as unsigned or signed); absent keys are 0.
static int metadata_number(const ckpt_reader *r, const char *key, int is_signed, int64_t min, int64_t max,
                           uint64_t *out) {
    *out = 0;
    const json_t *v = json_object_get(r->metadata, key);
    if (v == NULL) return HW_OK;
    const char *s = json_string_value(v);
    size_t length = json_string_length(v);
    int ok = length > 0 && length < 32;
    for (size_t i = 0; ok && i < length; i++) ok = (s[i] >= '0' && s[i] <= '9') || (i == 0 && is_signed && s[i] == '-');
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
    if (!ok && is_signed) {
        return ckpt_fail(r->path, "__metadata__ '%s' is \"%.40s\", expected a whole number in [%lld, %lld]", key,
                         s ? s : "(not a string)", (long long)min, (long long)max);
    }
    if (!ok) return ckpt_fail(r->path, "__metadata__ '%s' is \"%.40s\", expected a whole number", key, s ? s : "");
    return HW_OK;
}

// The schedule's text, if recorded: letters, digits, ':', '.', '-' and '+' only, shorter than
// HW_CKPT_SCHEDULE_CAP (what it means is the command line's to check).
static int metadata_schedule(const ckpt_reader *r, char *out) {
    out[0] = '\0';
    const json_t *v = json_object_get(r->metadata, "lr_schedule");
    if (v == NULL) return HW_OK;
    const char *s = json_string_value(v);
    size_t length = json_string_length(v);
    int ok = length > 0 && length < HW_CKPT_SCHEDULE_CAP;
    for (size_t i = 0; ok && i < length; i++) {
        ok = (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || strchr(":.-+eE", s[i]) != NULL;
    }
    if (!ok) return ckpt_fail(r->path, "__metadata__ 'lr_schedule' is \"%.40s\", not a learning-rate schedule", s);
    memcpy(out, s, length + 1);
    return HW_OK;
}

// The update mode's text, if recorded: lowercase letters only, shorter than HW_CKPT_UPDATE_CAP
// (which mode it names is the command line's to check).
static int metadata_update(const ckpt_reader *r, char *out) {
    out[0] = '\0';
    const json_t *v = json_object_get(r->metadata, "update");
    if (v == NULL) return HW_OK;
    const char *s = json_string_value(v);
    size_t length = json_string_length(v);
    int ok = s && length > 0 && length < HW_CKPT_UPDATE_CAP;
    for (size_t i = 0; ok && i < length; i++) ok = s[i] >= 'a' && s[i] <= 'z';
    if (!ok) return ckpt_fail(r->path, "__metadata__ 'update' is \"%.40s\", not an update mode", s ? s : "");
    memcpy(out, s, length + 1);
    return HW_OK;
}

// The learning rate, if recorded: a decimal number (no hex, no blanks, no inf or nan) > 0 that
// a float holds; 0 when absent.
static int metadata_lr(const ckpt_reader *r, float *out) {
    *out = 0;
    const json_t *v = json_object_get(r->metadata, "lr");
    if (v == NULL) return HW_OK;
    const char *s = json_string_value(v);
    size_t length = json_string_length(v);
    int ok = s && length > 0 && length < 32;
    for (size_t i = 0; ok && i < length; i++) ok = (s[i] >= '0' && s[i] <= '9') || strchr(".eE-+", s[i]) != NULL;
    char *end = NULL;
    errno = 0;
    double x = ok ? strtod(s, &end) : 0;
    if (!ok || errno || *end != '\0' || !(x > 0) || x > FLT_MAX) {
        return ckpt_fail(r->path, "__metadata__ 'lr' is \"%.40s\", expected a learning rate (a decimal number > 0)",
                         s ? s : "(not a string)");
    }
    *out = (float)x;
    return HW_OK;
}

// A simulation's record, if any: "simulate", a whole number of virtual workers >= 1, with "delay",
// text without control characters (a file name may hold blanks and UTF-8) shorter than HW_CKPT_DELAY_CAP (what it means is the command line's to check).
static int metadata_simulation(const ckpt_reader *r, hw_ckpt_meta *meta) {
    uint64_t workers;
    meta->simulate = 0;
    meta->delay[0] = '\0';
    if (metadata_number(r, "simulate", 1, 1, INT_MAX, &workers) != HW_OK) return HW_ERR;
    const json_t *v = json_object_get(r->metadata, "delay");
    if (workers == 0) {
        if (v != NULL) return ckpt_fail(r->path, "__metadata__ has 'delay' without 'simulate'");
        return HW_OK;
    }
    const char *s = json_string_value(v);
    size_t length = json_string_length(v);
    int ok = s && length > 0 && length < HW_CKPT_DELAY_CAP;
    for (size_t i = 0; ok && i < length; i++) ok = (unsigned char)s[i] >= ' ' && s[i] != 0x7f;
    if (!ok) return ckpt_fail(r->path, "__metadata__ 'simulate' needs 'delay', a delay model such as \"uniform:8\"");
    meta->simulate = (int)workers;
    memcpy(meta->delay, s, length + 1);
    return HW_OK;
}

// 1 when a tensor of the header has dtype BF16 (what hw_ckpt_load checks of each comes later).
static int tensors_bf16(const ckpt_reader *r) {
    const char *name;
    json_t *tensor;
    json_object_foreach(r->header, name, tensor) {
        if (strcmp(name, "__metadata__") == 0 || !json_is_object(tensor)) continue;
        const char *dtype = json_string_value(json_object_get(tensor, "dtype"));
        if (dtype && strcmp(dtype, "BF16") == 0) return 1;
    }
    return 0;
}

static int read_meta(const ckpt_reader *r, hw_ckpt_meta *meta) {
    uint64_t epoch, samples, seed, warmup;
    if (metadata_number(r, "epoch", 1, 0, INT_MAX, &epoch) != HW_OK) return HW_ERR;
    // At most 2^53: a count any run reaches by far, that a resumed run adds to without overflow and
    // the metrics CSV writes exactly. More is a corrupt file.
    if (metadata_number(r, "samples_seen", 1, 0, HW_CKPT_MAX_SAMPLES, &samples) != HW_OK) return HW_ERR;
    if (metadata_number(r, "seed", 0, 0, 0, &seed) != HW_OK) return HW_ERR;
    if (metadata_schedule(r, meta->lr_schedule) != HW_OK) return HW_ERR;
    if (metadata_lr(r, &meta->lr) != HW_OK) return HW_ERR;
    if (metadata_simulation(r, meta) != HW_OK) return HW_ERR;
    if (metadata_update(r, meta->update) != HW_OK) return HW_ERR;
    uint64_t staleness;
    if (metadata_number(r, "max_staleness", 1, 0, INT_MAX, &staleness) != HW_OK) return HW_ERR;
    meta->has_max_staleness = json_object_get(r->metadata, "max_staleness") != NULL;
    meta->max_staleness = (int)staleness;
    if (metadata_number(r, "lr_warmup", 1, 0, INT64_MAX, &warmup) != HW_OK) return HW_ERR;
    if (!meta->lr_schedule[0] && json_object_get(r->metadata, "lr_warmup") != NULL) {
        return ckpt_fail(r->path, "__metadata__ has 'lr_warmup' without 'lr_schedule'");
    }
    meta->epoch = (int)epoch;
    meta->samples_seen = (int64_t)samples;
    meta->seed = seed;
    meta->has_seed = json_object_get(r->metadata, "seed") != NULL;
    meta->lr_warmup = (int64_t)warmup;
    meta->bf16 = tensors_bf16(r);
    return HW_OK;
}

int hw_ckpt_load_meta(const char *path, hw_ckpt_meta *meta) {
    ckpt_reader r;
    if (reader_open(&r, path) != HW_OK) return HW_ERR;
    hw_ckpt_meta file_meta = {0};
    int status = read_meta(&r, &file_meta);
    if (status == HW_OK) *meta = file_meta;
    reader_close(&r);
    return status;
}

// Every tensor entry of the header checked (check_entry) and tiling the data section, into
// *entries (malloc'ed, *n of them; the caller frees it).
static int reader_entries(ckpt_reader *r, tensor_entry **entries, int *n) {
    *n = (int)json_object_size(r->header) - (r->metadata != NULL);
    *entries = calloc((size_t)*n + 1, sizeof **entries);
    if (*entries == NULL) return ckpt_fail(r->path, "out of memory for %d tensor entries", *n);
    int status = HW_OK, k = 0;
    const char *name;
    json_t *tensor;
    json_object_foreach(r->header, name, tensor) {
        if (status != HW_OK) break;
        if (strcmp(name, "__metadata__") == 0) continue;
        status = check_entry(r, name, tensor, &(*entries)[k++]);
    }
    return status;
}

// The tensor `entry` (checked) into dst, as floats (BF16 widened exactly); 0 or an errno.
static int read_tensor(const ckpt_reader *r, const tensor_entry *entry, float *dst) {
    size_t bytes = (size_t)(entry->end - entry->begin);
    if (!entry->bf16) return read_exact(r->fd, dst, bytes, 8 + r->header_length + entry->begin);
    uint16_t *half = malloc(bytes ? bytes : 1);
    if (half == NULL) return ENOMEM;
    int err = read_exact(r->fd, half, bytes, 8 + r->header_length + entry->begin);
    for (size_t k = 0; err == 0 && k < bytes / sizeof(uint16_t); k++) dst[k] = hw_bf16_to_float(half[k]);
    free(half);
    return err;
}

int hw_ckpt_load(const char *path, const hw_model *model, float *weights, hw_ckpt_meta *meta) {
    ckpt_reader r;
    if (reader_open(&r, path) != HW_OK) return HW_ERR;
    hw_ckpt_meta file_meta = {0};
    if (read_meta(&r, &file_meta) != HW_OK) {
        reader_close(&r);
        return HW_ERR;
    }
    tensor_entry *entries = NULL;
    int n = 0;
    int status = reader_entries(&r, &entries, &n);
    if (status == HW_OK) status = match_model(&r, model, entries, n);
    if (status == HW_OK) status = check_tiling(&r, entries, n);
    // The model's tensors only (a trainer's state is not read), into a staging copy of the weights.
    float *staging = status == HW_OK ? malloc(sizeof(float) * (model->n_weights ? model->n_weights : 1)) : NULL;
    if (status == HW_OK && staging == NULL) {
        status = ckpt_fail(path, "out of memory for %zu weights", model->n_weights);
    }
    for (int i = 0; status == HW_OK && i < n; i++) {
        if (entries[i].param < 0) continue;
        int err = read_tensor(&r, &entries[i], staging + model->params[entries[i].param].offset);
        if (err != 0) status = hw_fail_errno(err, "cannot read the data of checkpoint '%s'", path);
    }
    if (status == HW_OK) {
        for (int i = 0; i < n; i++) {
            if (entries[i].param < 0) continue;
            const hw_param *param = &model->params[entries[i].param];
            memcpy(weights + param->offset, staging + param->offset,
                   sizeof(float) * (size_t)hw_shape_numel(param->shape));
        }
        if (meta != NULL) *meta = file_meta;
    }
    free(staging);
    free(entries);
    reader_close(&r);
    return status;
}

// The entry named prefix + param's name among `entries`, checked to be F32 of the parameter's
// shape: its index, -1 when there is none, or -2 with a message when it does not fit.
static int state_entry(const ckpt_reader *r, const tensor_entry *entries, int n, const char *prefix,
                       const hw_param *param) {
    char name[HW_NAME_CAP + 128];
    snprintf(name, sizeof name, "%s%s", prefix, param->name);
    for (int i = 0; i < n; i++) {
        if (strcmp(entries[i].name, name) != 0) continue;
        int same = !entries[i].bf16 && json_array_size(entries[i].shape) == (size_t)param->shape.ndim;
        for (int d = 0; same && d < param->shape.ndim; d++) {
            same = json_integer_value(json_array_get(entries[i].shape, (size_t)d)) == param->shape.dims[d];
        }
        if (same) return i;
        ckpt_fail(r->path, "tensor '%s' is not F32 of the shape of parameter '%s'", name, param->name);
        return -2;
    }
    return -1;
}

int hw_ckpt_load_states(const char *path, const hw_model *model, const char *const *prefixes, float *const *buffers,
                        int n, int *found) {
    *found = 0;
    ckpt_reader r;
    if (reader_open(&r, path) != HW_OK) return HW_ERR;
    tensor_entry *entries = NULL;
    int count = 0;
    int status = reader_entries(&r, &entries, &count);
    if (status == HW_OK) status = check_tiling(&r, entries, count);
    int total = n * model->n_params, present = 0;
    int *at = status == HW_OK ? malloc(sizeof(int) * (size_t)(total ? total : 1)) : NULL;
    if (status == HW_OK && at == NULL) status = ckpt_fail(path, "out of memory");
    for (int q = 0; status == HW_OK && q < total; q++) {
        at[q] = state_entry(&r, entries, count, prefixes[q / model->n_params], &model->params[q % model->n_params]);
        if (at[q] == -2) status = HW_ERR;
        present += at[q] >= 0;
    }
    if (status == HW_OK && present > 0 && present < total) {
        status = ckpt_fail(path, "it holds %d of the %d tensors of the state '%s...': a partial state", present, total,
                           n > 0 ? prefixes[0] : "");
    }
    for (int q = 0; status == HW_OK && present > 0 && q < total; q++) {
        const hw_param *param = &model->params[q % model->n_params];
        int err = read_tensor(&r, &entries[at[q]], buffers[q / model->n_params] + param->offset);
        if (err != 0) status = hw_fail_errno(err, "cannot read the data of checkpoint '%s'", path);
    }
    if (status == HW_OK) *found = present > 0;
    free(at);
    free(entries);
    reader_close(&r);
    return status;
}

int hw_ckpt_load_text(const char *path, const char *key, char **value) {
    *value = NULL;
    ckpt_reader r;
    if (reader_open(&r, path) != HW_OK) return HW_ERR;
    const json_t *v = json_object_get(r.metadata, key);
    if (v != NULL && (*value = strdup(json_string_value(v))) == NULL) {
        reader_close(&r);
        return ckpt_fail(path, "out of memory for the metadata '%s'", key);
    }
    reader_close(&r);
    return HW_OK;
}

int hw_ckpt_load_model_text(const char *path, char **text) {
    *text = NULL;
    ckpt_reader r;
    if (reader_open(&r, path) != HW_OK) return HW_ERR;
    const json_t *v = json_object_get(r.metadata, "hogwild_model");
    if (v != NULL) {
        *text = strdup(json_string_value(v));
        if (*text == NULL) {
            reader_close(&r);
            return ckpt_fail(path, "out of memory for the model text");
        }
    }
    reader_close(&r);
    return HW_OK;
}
