// Tests of the ckpt module: safetensors round trip, layout, refusal of damaged or mismatched
// files, atomic save under a full disk, and (when Debian's torch is installed) PyTorch interop.
#include "data_util.h"
#include "hw/bf16.h"
#include "hw/ckpt.h"
#include "hw/err.h"
#include "hw/nn.h"
#include "hw/rng.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

// ---- fixtures ----

// A scratch directory per test (Criterion runs tests in parallel processes).
typedef struct {
    char dir[64];
} scratch;

static void scratch_open(scratch *s) {
    snprintf(s->dir, sizeof s->dir, "/tmp/hw_ckpt_test_XXXXXX");
    cr_assert_not_null(mkdtemp(s->dir), "mkdtemp: %s", strerror(errno));
}

static const char *scratch_path(const scratch *s, const char *name, char *buf, size_t cap) {
    snprintf(buf, cap, "%s/%s", s->dir, name);
    return buf;
}

// Names of the entries in the scratch directory, newline separated, and how many.
static int scratch_list(const scratch *s, char *names, size_t cap) {
    DIR *d = opendir(s->dir);
    cr_assert_not_null(d);
    int n = 0;
    names[0] = '\0';
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        n++;
        size_t used = strlen(names);
        snprintf(names + used, cap - used, "%s\n", e->d_name);
    }
    closedir(d);
    return n;
}

static void scratch_close(scratch *s) {
    DIR *d = opendir(s->dir);
    if (d == NULL) return;
    struct dirent *e;
    char path[512];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        unlink(scratch_path(s, e->d_name, path, sizeof path));
    }
    closedir(d);
    rmdir(s->dir);
}

static void add_param(hw_model *m, const char *name, int ndim, const int64_t *dims) {
    hw_param *p = &m->params[m->n_params++];
    snprintf(p->name, sizeof p->name, "%s", name);
    p->shape = hw_shape_make(ndim, dims);
    p->offset = m->n_weights;
    m->n_weights += (size_t)hw_shape_numel(p->shape);
}

// The mnist_hogwild Net as a hand-filled description (nn's parser is not needed here).
// fc1_rows lets a test build a variant with another fc1 shape.
static hw_model *lenet(int fc1_rows) {
    hw_model *m = calloc(1, sizeof *m);
    cr_assert_not_null(m);
    snprintf(m->path, sizeof m->path, "models/lenet.model");
    add_param(m, "conv1.weight", 4, (int64_t[]){10, 1, 5, 5});
    add_param(m, "conv1.bias", 1, (int64_t[]){10});
    add_param(m, "conv2.weight", 4, (int64_t[]){20, 10, 5, 5});
    add_param(m, "conv2.bias", 1, (int64_t[]){20});
    add_param(m, "fc1.weight", 2, (int64_t[]){fc1_rows, 320});
    add_param(m, "fc1.bias", 1, (int64_t[]){fc1_rows});
    add_param(m, "fc2.weight", 2, (int64_t[]){10, fc1_rows});
    add_param(m, "fc2.bias", 1, (int64_t[]){10});
    return m;
}

static float *random_weights(size_t n, uint64_t seed) {
    float *w = malloc(n * sizeof *w);
    cr_assert_not_null(w);
    hw_rng rng;
    hw_rng_seed(&rng, seed, 3);
    for (size_t i = 0; i < n; i++) w[i] = hw_rng_normal(&rng) * 0.1f;
    return w;
}

// A buffer filled with a pattern, to see whether a failed load wrote into it.
static float *pattern_buffer(size_t n) {
    float *w = malloc(n * sizeof *w);
    cr_assert_not_null(w);
    memset(w, 0xab, n * sizeof *w);
    return w;
}

static int is_pattern(const float *w, size_t n) {
    const unsigned char *b = (const unsigned char *)w;
    for (size_t i = 0; i < n * sizeof *w; i++) {
        if (b[i] != 0xab) return 0;
    }
    return 1;
}

static uint64_t header_length_of(const unsigned char *bytes) {
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | bytes[i];
    return n;
}

// A safetensors file from a header text and raw data, written by hand.
static void write_raw(const char *path, const char *header, const void *data, size_t data_bytes) {
    size_t n = strlen(header);
    unsigned char *buf = malloc(8 + n + data_bytes + 1);
    cr_assert_not_null(buf);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)n >> (8 * i));
    memcpy(buf + 8, header, n);
    if (data_bytes) memcpy(buf + 8 + n, data, data_bytes);
    write_bytes(path, buf, 8 + n + data_bytes);
    free(buf);
}

// The model text in a checkpoint's __metadata__ (malloc'ed), or NULL in *text when it has none.
static int model_text_of(const char *path, char **text) {
    *text = NULL;
    size_t size;
    unsigned char *bytes = read_bytes(path, &size);
    uint64_t n = header_length_of(bytes);
    cr_assert_leq(8 + n, size);
    json_error_t error;
    json_t *header = json_loadb((const char *)bytes + 8, n, JSON_REJECT_DUPLICATES, &error);
    free(bytes);
    if (!header) return HW_ERR;
    const char *value = json_string_value(json_object_get(json_object_get(header, "__metadata__"), "hogwild_model"));
    if (value) *text = strdup(value);
    json_decref(header);
    return HW_OK;
}

static const char *const lenet_text =
    "# LeNet as in mnist_hogwild: \"quotes\", back\\slashes,\ttabs, a \x01 control byte\n"
    "conv1 conv2d 10 5\r\n"
    "fc2 linear 10   # unicode: \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\n";

// ---- round trip and layout ----

Test(ckpt, round_trip_is_bit_exact) {
    scratch s;
    scratch_open(&s);
    char path[256];
    scratch_path(&s, "lenet.safetensors", path, sizeof path);
    hw_model *m = lenet(50);
    cr_assert_eq(m->n_weights, 21840);
    m->text = (char *)lenet_text;
    float *w = random_weights(m->n_weights, 1);
    // Values that a text or rounding path would change: -0, a denormal, infinities, NaN payloads.
    uint32_t specials[] = {0x80000000u, 0x00000001u, 0x7f800000u, 0xff800000u, 0x7fc12345u, 0xffa00001u, 0x7f7fffffu};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) memcpy(&w[100 + 37 * i], &specials[i], 4);
    hw_ckpt_meta meta = {.epoch = 7, .samples_seen = 123456789012LL, .seed = UINT64_MAX - 1};
    cr_assert_eq(hw_ckpt_save(path, m, w, &meta), HW_OK, "%s", hw_error());

    float *back = pattern_buffer(m->n_weights);
    hw_ckpt_meta meta_back = {.epoch = -1, .samples_seen = -1, .seed = 1};
    cr_assert_eq(hw_ckpt_load(path, m, back, &meta_back), HW_OK, "%s", hw_error());
    cr_expect_eq(memcmp(back, w, m->n_weights * sizeof *w), 0, "weights differ after the round trip");
    cr_expect_eq(meta_back.epoch, 7);
    cr_expect_eq(meta_back.samples_seen, 123456789012LL);
    cr_expect_eq(meta_back.seed, UINT64_MAX - 1);
    char *text = NULL;
    cr_assert_eq(hw_ckpt_load_model_text(path, &text), HW_OK, "%s", hw_error());
    cr_assert_not_null(text);
    cr_expect_str_eq(text, lenet_text);
    free(text);
    cr_assert_eq(model_text_of(path, &text), HW_OK);
    cr_expect_str_eq(text, lenet_text, "the header itself holds it");
    free(text);
    // meta may be NULL on load.
    cr_expect_eq(hw_ckpt_load(path, m, back, NULL), HW_OK, "%s", hw_error());
    char names[256];
    cr_expect_eq(scratch_list(&s, names, sizeof names), 1, "only the checkpoint is left:\n%s", names);
    free(w), free(back), free(m);
    scratch_close(&s);
}

// A bf16 run's checkpoint (meta.bf16): BF16 tensors, 2 bytes a weight, each the weight rounded to
// the nearest bfloat16, so bfloat16 weights round-trip exactly and float ones load as their
// nearest; the file reads back as bf16 (meta and header alone). The data is not 4-aligned for a
// tensor of odd size: the load must not assume it is.
Test(ckpt, bf16_tensors_round_trip) {
    scratch s;
    scratch_open(&s);
    char path[256];
    scratch_path(&s, "lenet.safetensors", path, sizeof path);
    hw_model *m = lenet(51);
    float *w = random_weights(m->n_weights, 3);
    uint16_t *h = malloc(sizeof *h * m->n_weights);
    hw_bf16_from_floats(h, w, m->n_weights);
    hw_ckpt_meta meta = {.epoch = 2, .bf16 = 1};
    cr_assert_eq(hw_ckpt_save(path, m, w, &meta), HW_OK, "%s", hw_error());
    size_t size;
    unsigned char *bytes = read_bytes(path, &size);
    uint64_t n = header_length_of(bytes);
    cr_assert_eq(size, 8 + n + m->n_weights * sizeof(uint16_t), "file size: 2 bytes a weight");
    cr_expect_eq(memcmp(bytes + 8 + n, h, m->n_weights * sizeof *h), 0, "data: the nearest bfloat16, in order");
    json_error_t error;
    json_t *header = json_loadb((const char *)bytes + 8, n, JSON_REJECT_DUPLICATES, &error);
    cr_assert_not_null(header, "%s", error.text);
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(header, m->params[0].name), "dtype")), "BF16");
    json_decref(header);
    free(bytes);
    float *back = pattern_buffer(m->n_weights);
    hw_ckpt_meta meta_back;
    cr_assert_eq(hw_ckpt_load(path, m, back, &meta_back), HW_OK, "%s", hw_error());
    cr_expect_eq(meta_back.bf16, 1);
    for (size_t i = 0; i < m->n_weights; i++) {
        cr_assert_eq(back[i], hw_bf16_to_float(h[i]), "weight %zu: %a loaded, %a saved", i, (double)back[i],
                     (double)hw_bf16_to_float(h[i]));
    }
    // Saved again from what it loaded (bfloat16 values now): the same bytes, and as F32 the same values.
    cr_assert_eq(hw_ckpt_save(path, m, back, &meta), HW_OK, "%s", hw_error());
    float *again = pattern_buffer(m->n_weights);
    cr_assert_eq(hw_ckpt_load(path, m, again, NULL), HW_OK, "%s", hw_error());
    cr_expect_eq(memcmp(again, back, sizeof *back * m->n_weights), 0, "bfloat16 weights round-trip exactly");
    hw_ckpt_meta f32 = {.epoch = 2};
    cr_assert_eq(hw_ckpt_save(path, m, back, &f32), HW_OK, "%s", hw_error());
    cr_assert_eq(hw_ckpt_load_meta(path, &meta_back), HW_OK, "%s", hw_error());
    cr_expect_eq(meta_back.bf16, 0, "an F32 file");
    cr_assert_eq(hw_ckpt_load(path, m, again, NULL), HW_OK, "%s", hw_error());
    cr_expect_eq(memcmp(again, back, sizeof *back * m->n_weights), 0);
    free(w), free(h), free(back), free(again), free(m);
    scratch_close(&s);
}

Test(ckpt, file_layout_is_safetensors) {
    scratch s;
    scratch_open(&s);
    char path[256];
    scratch_path(&s, "lenet.safetensors", path, sizeof path);
    hw_model *m = lenet(50);
    m->text = (char *)lenet_text;
    float *w = random_weights(m->n_weights, 2);
    hw_ckpt_meta meta = {.epoch = 3, .samples_seen = 180000, .seed = 42};
    cr_assert_eq(hw_ckpt_save(path, m, w, &meta), HW_OK, "%s", hw_error());
    size_t size;
    unsigned char *bytes = read_bytes(path, &size);
    uint64_t n = header_length_of(bytes);
    cr_expect_eq((8 + n) % 8, 0, "the data starts 8-aligned");
    cr_assert_eq(size, 8 + n + m->n_weights * sizeof(float), "file size");
    cr_expect_eq(memcmp(bytes + 8 + n, w, m->n_weights * sizeof(float)), 0, "data: the flat buffer, in order");
    cr_expect(n > 0 && bytes[8] == '{', "header starts with '{'");
    json_error_t error;
    json_t *header = json_loadb((const char *)bytes + 8, n, JSON_REJECT_DUPLICATES, &error);
    cr_assert_not_null(header, "%s", error.text);
    const json_t *md = json_object_get(header, "__metadata__");
    cr_assert_not_null(md);
    cr_expect_str_eq(json_string_value(json_object_get(md, "format")), "pt");
    cr_expect_str_eq(json_string_value(json_object_get(md, "epoch")), "3");
    cr_expect_str_eq(json_string_value(json_object_get(md, "samples_seen")), "180000");
    cr_expect_str_eq(json_string_value(json_object_get(md, "seed")), "42");
    cr_expect_str_eq(json_string_value(json_object_get(md, "hogwild_model")), lenet_text);
    cr_assert_eq(json_object_size(header), 1 + (size_t)m->n_params);
    uint64_t at = 0;
    int p = -1;  // the metadata first, then the parameters in the model's order
    const char *key;
    json_t *t;
    json_object_foreach(header, key, t) {
        if (p < 0) {
            cr_expect_str_eq(key, "__metadata__", "the metadata first");
            p++;
            continue;
        }
        cr_expect_str_eq(key, m->params[p].name, "tensors in the model's order");
        cr_expect_str_eq(json_string_value(json_object_get(t, "dtype")), "F32");
        const json_t *shape = json_object_get(t, "shape"), *off = json_object_get(t, "data_offsets");
        cr_assert_eq(json_array_size(shape), (size_t)m->params[p].shape.ndim);
        for (int d = 0; d < m->params[p].shape.ndim; d++) {
            cr_expect_eq(json_integer_value(json_array_get(shape, d)), m->params[p].shape.dims[d]);
        }
        uint64_t bytes_p = (uint64_t)hw_shape_numel(m->params[p].shape) * 4;
        cr_expect_eq((uint64_t)json_integer_value(json_array_get(off, 0)), at);
        cr_expect_eq((uint64_t)json_integer_value(json_array_get(off, 1)), at + bytes_p);
        at += bytes_p;
        p++;
    }
    cr_expect_eq(p, m->n_params);
    json_decref(header);
    free(bytes), free(w), free(m);
    scratch_close(&s);
}

Test(ckpt, no_text_and_no_meta) {
    scratch s;
    scratch_open(&s);
    char path[256];
    scratch_path(&s, "plain.safetensors", path, sizeof path);
    hw_model *m = lenet(50);
    float *w = random_weights(m->n_weights, 3);
    cr_assert_eq(hw_ckpt_save(path, m, w, NULL), HW_OK, "%s", hw_error());
    hw_ckpt_meta meta = {.epoch = 9, .samples_seen = 9, .seed = 9};
    float *back = pattern_buffer(m->n_weights);
    cr_assert_eq(hw_ckpt_load(path, m, back, &meta), HW_OK, "%s", hw_error());
    cr_expect_eq(meta.epoch, 0);
    cr_expect_eq(meta.samples_seen, 0);
    cr_expect_eq(meta.seed, 0);
    char *text = (char *)"not null";
    cr_assert_eq(hw_ckpt_load_model_text(path, &text), HW_OK, "%s", hw_error());
    cr_expect_null(text);
    free(w), free(back), free(m);
    scratch_close(&s);
}

Test(ckpt, overwrite_replaces_the_previous_file) {
    scratch s;
    scratch_open(&s);
    char path[256];
    scratch_path(&s, "ck.safetensors", path, sizeof path);
    hw_model *m = lenet(50);
    float *a = random_weights(m->n_weights, 4), *b = random_weights(m->n_weights, 5);
    cr_assert_eq(hw_ckpt_save(path, m, a, &(hw_ckpt_meta){.epoch = 1, .samples_seen = 10, .seed = 0}), HW_OK, "%s",
                 hw_error());
    cr_assert_eq(hw_ckpt_save(path, m, b, &(hw_ckpt_meta){.epoch = 2, .samples_seen = 20, .seed = 0}), HW_OK, "%s",
                 hw_error());
    float *back = pattern_buffer(m->n_weights);
    hw_ckpt_meta meta;
    cr_assert_eq(hw_ckpt_load(path, m, back, &meta), HW_OK, "%s", hw_error());
    cr_expect_eq(memcmp(back, b, m->n_weights * sizeof *b), 0);
    cr_expect_eq(meta.epoch, 2);
    char names[256];
    cr_expect_eq(scratch_list(&s, names, sizeof names), 1, "no temporary file left:\n%s", names);
    free(a), free(b), free(back), free(m);
    scratch_close(&s);
}

// ---- damaged files ----

static void expect_refused(const char *path, const hw_model *m, const char *needle, const char *why) {
    float *back = pattern_buffer(m->n_weights);
    hw_ckpt_meta meta = {.epoch = 5, .samples_seen = 5, .seed = 5};
    hw_error_clear();
    cr_expect_eq(hw_ckpt_load(path, m, back, &meta), HW_ERR, "%s: accepted", why);
    cr_expect(strstr(hw_error(), path) != NULL, "%s: the message names the file: %s", why, hw_error());
    if (needle) cr_expect(strstr(hw_error(), needle) != NULL, "%s: '%s' not in: %s", why, needle, hw_error());
    cr_expect(is_pattern(back, m->n_weights), "%s: a refused load wrote into the weights", why);
    cr_expect(meta.epoch == 5 && meta.samples_seen == 5 && meta.seed == 5, "%s: meta changed", why);
    free(back);
}

Test(ckpt, truncated_files_refused) {
    scratch s;
    scratch_open(&s);
    char path[256], cut[256];
    scratch_path(&s, "good.safetensors", path, sizeof path);
    scratch_path(&s, "cut.safetensors", cut, sizeof cut);
    hw_model *m = lenet(50);
    m->text = (char *)lenet_text;
    float *w = random_weights(m->n_weights, 6);
    cr_assert_eq(hw_ckpt_save(path, m, w, NULL), HW_OK, "%s", hw_error());
    size_t size;
    unsigned char *bytes = read_bytes(path, &size);
    size_t n = (size_t)header_length_of(bytes);
    size_t cuts[] = {0, 1, 7, 8, 9, 8 + n / 2, 8 + n - 1, 8 + n, 8 + n + 1, 8 + n + 4, size / 2, size - 4, size - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        write_bytes(cut, bytes, cuts[i]);
        char why[64];
        snprintf(why, sizeof why, "cut at %zu of %zu bytes", cuts[i], size);
        expect_refused(cut, m, NULL, why);
    }
    write_bytes(cut, bytes, 5);
    expect_refused(cut, m, "shorter than the 8-byte header length", "5 bytes");
    write_bytes(cut, bytes, 8 + n / 2);
    expect_refused(cut, m, "runs past the end of the file", "cut in the header");
    write_bytes(cut, bytes, size - 1);
    expect_refused(cut, m, "fc2.bias", "cut in the last tensor");
    free(bytes), free(w), free(m);
    scratch_close(&s);
}

// Every single-byte change in the length field or the header is either refused, or (when the
// JSON stays valid and consistent, e.g. a changed digit in the model text) loads the very same
// weights: a damaged header never yields wrong weights silently.
Test(ckpt, corrupted_header_bytes_refused_or_harmless) {
    scratch s;
    scratch_open(&s);
    char path[256], bad[256];
    scratch_path(&s, "good.safetensors", path, sizeof path);
    scratch_path(&s, "bad.safetensors", bad, sizeof bad);
    hw_model *m = lenet(50);
    m->text = (char *)"conv1 conv2d 10 5\n";
    float *w = random_weights(m->n_weights, 7);
    cr_assert_eq(hw_ckpt_save(path, m, w, &(hw_ckpt_meta){.epoch = 1, .samples_seen = 2, .seed = 3}), HW_OK, "%s",
                 hw_error());
    size_t size;
    unsigned char *bytes = read_bytes(path, &size);
    size_t end = 8 + (size_t)header_length_of(bytes);
    const unsigned char values[] = {'x', '7', '}', 0xff};
    float *back = pattern_buffer(m->n_weights);
    int refused = 0, loaded = 0;
    for (size_t at = 0; at < end; at++) {
        for (size_t v = 0; v < sizeof values; v++) {
            if (bytes[at] == values[v]) continue;
            unsigned char saved = bytes[at];
            bytes[at] = values[v];
            write_bytes(bad, bytes, size);
            bytes[at] = saved;
            memset(back, 0xab, m->n_weights * sizeof *back);
            hw_error_clear();
            if (hw_ckpt_load(bad, m, back, NULL) == HW_OK) {
                loaded++;
                cr_assert_eq(memcmp(back, w, m->n_weights * sizeof *w), 0,
                             "byte %zu set to 0x%02x: loaded, with different weights", at, values[v]);
            } else {
                refused++;
                cr_assert(strstr(hw_error(), bad) != NULL, "byte %zu: message without the path: %s", at, hw_error());
                cr_assert(is_pattern(back, m->n_weights), "byte %zu: refused but wrote weights", at);
            }
        }
    }
    cr_expect_gt(refused, 0);
    cr_expect_gt(loaded, 0, "a digit of the model text or of the metadata changes nothing that is checked");
    free(back), free(bytes), free(w), free(m);
    scratch_close(&s);
}

// A two-tensor model for hand-written headers: a [2, 3] and b [4], 40 bytes of data.
static hw_model *small_model(void) {
    hw_model *m = calloc(1, sizeof *m);
    cr_assert_not_null(m);
    add_param(m, "a", 2, (int64_t[]){2, 3});
    add_param(m, "b", 1, (int64_t[]){4});
    return m;
}

static const float small_data[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};

Test(ckpt, hand_written_headers) {
    scratch s;
    scratch_open(&s);
    char path[256];
    scratch_path(&s, "hand.safetensors", path, sizeof path);
    hw_model *m = small_model();
    const char *A = "\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}";
    const char *B = "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[24,40]}";
    char header[1024];
    struct {
        const char *header;  // %s %s: A and B
        size_t data_bytes;
        const char *needle;
    } cases[] = {
        {"{%s,%s,\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}", 40, "a key appears twice"},
        {"{%s,%s,\"c\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[40,40]}}", 40, "'c'"},
        {"{%s}%.0s", 24, "'b'"},
        {"{%s,%s}", 44, "trailing bytes"},
        {"{%s,%s}", 36, "lie outside the data section"},
        {"{%s,%.0s\"b\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[24,32]}}", 32, "dtype 'F16'"},
        {"{%s,%.0s\"b\":{\"dtype\":\"F32\",\"shape\":[5],\"data_offsets\":[24,40]}}", 40,
         "shape [5] of float32 needs 20"},
        {"{%s,%.0s\"b\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[24,40]}}", 40,
         "[2, 2] in the file but [4]"},
        {"{%s,%.0s\"b\":{\"dtype\":\"F32\",\"shape\":[-4],\"data_offsets\":[24,40]}}", 40, "non-negative"},
        {"{%s,%.0s\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[20,36]}}", 40, "overlap"},
        {"{%s,%.0s\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[28,44]}}", 44, "belong to no tensor"},
        {"{%s,%.0s\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[40,24]}}", 40, "lie outside"},
        {"{%s,%.0s\"b\":{\"dtype\":\"F32\",\"shape\":[4]}}", 40, "lacks \"data_offsets\""},
        {"{%s,%.0s\"b\":[1,2]}", 40, "not an object"},
        {"{\"__metadata__\":{\"epoch\":3},%s,%s}", 40, "__metadata__ value 'epoch'"},
        {"{\"__metadata__\":{\"epoch\":\"three\"},%s,%s}", 40, "expected a whole number"},
        {"{\"__metadata__\":{\"seed\":\"-1\"},%s,%s}", 40, "'seed'"},
        {"{\"__metadata__\":{},\"__metadata__\":{},%s,%s}", 40, "a key appears twice"},
        {"{\"__metadata__\":[],%s,%s}", 40, "not an object"},
        {"[%s,%s]", 40, "not valid JSON"},
        {"[1,2]%.0s%.0s", 40, "not an object"},
        {"{%s,%s} x", 40, "not valid JSON"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(header, sizeof header, cases[i].header, A, B);
        unsigned char data[48] = {0};
        memcpy(data, small_data, sizeof small_data);
        write_raw(path, header, data, cases[i].data_bytes);
        expect_refused(path, m, cases[i].needle, header);
    }
    free(m);
    scratch_close(&s);
}

// safetensors.torch.save_file orders the data by dtype and name, not by the model: any order loads,
// with or without our metadata, and the header may be padded with spaces.
Test(ckpt, any_tensor_order_and_foreign_metadata) {
    scratch s;
    scratch_open(&s);
    char path[256];
    scratch_path(&s, "order.safetensors", path, sizeof path);
    hw_model *m = small_model();
    float data[10] = {6, 7, 8, 9, 0, 1, 2, 3, 4, 5};  // b first, then a
    write_raw(path,
              "{\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},\"__metadata__\":{\"format\":\"pt\","
              "\"epoch\":\"12\"},\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[16,40]}}      ",
              data, sizeof data);
    float *back = pattern_buffer(m->n_weights);
    hw_ckpt_meta meta = {.epoch = -1, .samples_seen = -1, .seed = 1};
    cr_assert_eq(hw_ckpt_load(path, m, back, &meta), HW_OK, "%s", hw_error());
    cr_expect_eq(memcmp(back, small_data, sizeof small_data), 0);
    cr_expect(meta.epoch == 12 && meta.samples_seen == 0 && meta.seed == 0);
    free(back), free(m);
    scratch_close(&s);
}

Test(ckpt, lenet_shape_mismatch_names_tensor_and_both_shapes) {
    scratch s;
    scratch_open(&s);
    char path[256];
    scratch_path(&s, "lenet.safetensors", path, sizeof path);
    hw_model *m = lenet(50);
    float *w = random_weights(m->n_weights, 8);
    cr_assert_eq(hw_ckpt_save(path, m, w, NULL), HW_OK, "%s", hw_error());
    hw_model *wider = lenet(60);
    expect_refused(path, wider,
                   "tensor 'fc1.weight' has shape [50, 320] in the file but [60, 320] in models/lenet.model",
                   "fc1 50 -> 60");
    // One parameter more in the model: named as missing.
    hw_model *more = lenet(50);
    add_param(more, "fc3.weight", 2, (int64_t[]){10, 10});
    expect_refused(path, more, "1 tensor that models/lenet.model needs is missing: 'fc3.weight'", "extra param");
    // One parameter fewer: the file's extra tensor is refused by name.
    hw_model *fewer = lenet(50);
    fewer->n_params--;
    fewer->n_weights -= 10;
    expect_refused(path, fewer, "1 tensor is not in models/lenet.model: 'fc2.bias'", "missing param");
    free(w), free(m), free(wider), free(more), free(fewer);
    scratch_close(&s);
}

Test(ckpt, open_errors_name_the_file) {
    scratch s;
    scratch_open(&s);
    char path[256];
    hw_model *m = small_model();
    expect_refused(scratch_path(&s, "absent.safetensors", path, sizeof path), m, "No such file or directory", "absent");
    expect_refused(s.dir, m, "not a regular file", "a directory");
    free(m);
    scratch_close(&s);
}

// ---- failed saves ----

// In a child whose file size limit is `limit` bytes (SIGXFSZ ignored, so write() fails with
// EFBIG as it would with ENOSPC), saves b over the good file; the parent then checks the good
// file is byte-identical and no temporary file is left.
static void failed_save_keeps_previous_file(rlim_t limit) {
    scratch s;
    scratch_open(&s);
    char path[256];
    scratch_path(&s, "ck.safetensors", path, sizeof path);
    hw_model *m = lenet(50);
    float *a = random_weights(m->n_weights, 9), *b = random_weights(m->n_weights, 10);
    cr_assert_eq(hw_ckpt_save(path, m, a, &(hw_ckpt_meta){.epoch = 1, .samples_seen = 1, .seed = 1}), HW_OK, "%s",
                 hw_error());
    size_t size_before;
    unsigned char *before = read_bytes(path, &size_before);
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {limit, limit};
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(3);
        int rc = hw_ckpt_save(path, m, b, &(hw_ckpt_meta){.epoch = 2, .samples_seen = 2, .seed = 2});
        const char *msg = hw_error();
        if (write(fds[1], msg, strlen(msg)) < 0) _exit(4);
        _exit(rc == HW_ERR ? 0 : 1);
    }
    close(fds[1]);
    char msg[1024] = "";
    size_t got = 0;
    ssize_t r;
    while ((r = read(fds[0], msg + got, sizeof msg - 1 - got)) > 0) got += (size_t)r;
    msg[got] = '\0';
    close(fds[0]);
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status), "the child died (status %d): was SIGXFSZ not ignored?", status);
    cr_assert_eq(WEXITSTATUS(status), 0, "limit %ld: the save did not fail (exit %d): %s", (long)limit,
                 WEXITSTATUS(status), msg);
    cr_expect(strstr(msg, path) != NULL, "the message names the path: %s", msg);
    cr_expect(strstr(msg, "File too large") != NULL, "the message names the cause: %s", msg);
    size_t size_after;
    unsigned char *after = read_bytes(path, &size_after);
    cr_expect(size_after == size_before && memcmp(before, after, size_before) == 0, "the good file changed");
    char names[512];
    cr_expect_eq(scratch_list(&s, names, sizeof names), 1, "a temporary file is left:\n%s", names);
    hw_ckpt_meta meta;
    float *back = pattern_buffer(m->n_weights);
    cr_expect_eq(hw_ckpt_load(path, m, back, &meta), HW_OK, "%s", hw_error());
    cr_expect_eq(memcmp(back, a, m->n_weights * sizeof *a), 0);
    cr_expect_eq(meta.epoch, 1);
    free(before), free(after), free(back), free(a), free(b), free(m);
    scratch_close(&s);
}

Test(ckpt, full_disk_in_the_header_keeps_previous_file) { failed_save_keeps_previous_file(16); }

Test(ckpt, full_disk_in_the_data_keeps_previous_file) { failed_save_keeps_previous_file(40000); }

Test(ckpt, save_into_missing_directory_fails_clearly) {
    scratch s;
    scratch_open(&s);
    char path[256];
    scratch_path(&s, "no/such/dir/ck.safetensors", path, sizeof path);
    hw_model *m = small_model();
    hw_error_clear();
    cr_expect_eq(hw_ckpt_save(path, m, small_data, NULL), HW_ERR);
    cr_expect(strstr(hw_error(), path) != NULL, "names the path: %s", hw_error());
    cr_expect(strstr(hw_error(), "No such file or directory") != NULL, "names the cause: %s", hw_error());
    char names[256];
    cr_expect_eq(scratch_list(&s, names, sizeof names), 0, "nothing created:\n%s", names);
    free(m);
    scratch_close(&s);
}

// ---- PyTorch interop (needs Debian's python3-torch; skipped with the reason otherwise) ----

#define TORCH_SCRIPT "tests/tools/check_safetensors_torch.py"

// Our file is loaded by torch into the mnist_hogwild Net with load_state_dict(strict=True); torch
// writes its state_dict back (in safetensors' own name order) and we read it bit-exactly.
// $HW_TORCH_PYTHON overrides the interpreter (default: Debian's /usr/bin/python3).
Test(ckpt, torch_reads_ours_and_we_read_torchs) {
    const char *python = getenv("HW_TORCH_PYTHON") ? getenv("HW_TORCH_PYTHON") : "/usr/bin/python3";
    char cmd[1024];
    if (access(python, X_OK) != 0) cr_skip_test("%s is not installed (Debian's python3-torch)", python);
    if (access(TORCH_SCRIPT, R_OK) != 0) {
        cr_skip_test("%s not found: run the tests from the repository root", TORCH_SCRIPT);
    }
    snprintf(cmd, sizeof cmd, "'%s' -c 'import torch' >/dev/null 2>&1", python);
    if (system(cmd) != 0) cr_skip_test("torch is not importable by %s (apt-get install python3-torch)", python);
    scratch s;
    scratch_open(&s);
    char ours[256], theirs[256];
    scratch_path(&s, "ours.safetensors", ours, sizeof ours);
    scratch_path(&s, "theirs.safetensors", theirs, sizeof theirs);
    hw_model *m = lenet(50);
    m->text = (char *)lenet_text;
    float *w = random_weights(m->n_weights, 11);
    cr_assert_eq(hw_ckpt_save(ours, m, w, &(hw_ckpt_meta){.epoch = 4, .samples_seen = 240000, .seed = 1}), HW_OK, "%s",
                 hw_error());
    snprintf(cmd, sizeof cmd, "'%s' " TORCH_SCRIPT " --check %s --roundtrip %s >%s/out.txt 2>&1", python, ours, theirs,
             s.dir);
    int rc = system(cmd);
    char out_path[256];
    size_t out_size;
    unsigned char *out = read_bytes(scratch_path(&s, "out.txt", out_path, sizeof out_path), &out_size);
    out[out_size] = '\0';
    cr_assert_eq(rc, 0, "%s failed:\n%s", TORCH_SCRIPT, (char *)out);
    cr_expect(strstr((char *)out, "OK") != NULL, "%s", (char *)out);
    float *back = pattern_buffer(m->n_weights);
    hw_ckpt_meta meta;
    cr_assert_eq(hw_ckpt_load(theirs, m, back, &meta), HW_OK, "%s", hw_error());
    cr_expect_eq(memcmp(back, w, m->n_weights * sizeof *w), 0, "weights changed through torch");
    cr_expect(meta.epoch == 0 && meta.samples_seen == 0 && meta.seed == 0, "torch's file has no hogwild metadata");
    free(out), free(back), free(w), free(m);
    scratch_close(&s);
}

// The header is read as strict JSON (jansson, over exactly the header's bytes): anything that is
// not RFC 8259 text is refused, naming the byte, before a weight is touched.
Test(ckpt, header_must_be_strict_json) {
    scratch s;
    scratch_open(&s);
    char path[256];
    scratch_path(&s, "strict.safetensors", path, sizeof path);
    hw_model *m = small_model();
    const char *bad[] = {
        "",
        "   ",
        "{",
        "{\"a\" 1}",
        "{\"a\":1,}",
        "[1,]",
        "[1 2]",
        "{a:1}",
        "\"abc",
        "\"a\\x\"",
        "\"\\u12\"",
        "\"\\ud800\"",
        "\"\\udc00\"",
        "01",
        "-",
        "1.",
        "1e",
        "tru",
        "nul",
        "{} {}",
        "\"a\nb\"",
        "\"\xff\"",
        "\"\xc0\xaf\"",
        "\"\xed\xa0\x80\"",
        "[1]x",
        "{\"a\":}",
        "+1",
        "\"\\",
        "{\"ab\\u0000c\": {}}",
        "{\"huge\": 18446744073709551616}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_raw(path, bad[i], small_data, sizeof small_data);
        expect_refused(path, m, "not valid JSON", bad[i]);
        cr_expect(strstr(hw_error(), "at byte") != NULL, "%s: no byte offset in: %s", bad[i], hw_error());
    }
    // Nesting deep enough to exhaust a recursive reader's stack is refused, without a crash.
    size_t n = 200000;
    char *deep = malloc(2 * n + 1);
    cr_assert_not_null(deep);
    memset(deep, '[', n);
    memset(deep + n, ']', n);
    deep[2 * n] = '\0';
    write_raw(path, deep, NULL, 0);
    expect_refused(path, m, "not valid JSON", "200000 nested arrays");
    free(deep);
    free(m);
    scratch_close(&s);
}

// JSON text must be UTF-8 (Python's and Rust's readers refuse anything else): a model text that
// is not is stored with U+FFFD in place of each bad byte, and the file still loads.
Test(ckpt, model_text_that_is_not_utf8_is_stored_as_utf8) {
    scratch s;
    scratch_open(&s);
    char path[256];
    scratch_path(&s, "latin1.safetensors", path, sizeof path);
    hw_model *m = lenet(50);
    m->text = (char *)"# caf\xe9 \xc3\xa9 \xed\xa0\x80 \xf4\x90\x80\x80 \xe0\x80\xaf\nconv1 conv2d 10 5\n";
    float *w = random_weights(m->n_weights, 3);
    cr_assert_eq(hw_ckpt_save(path, m, w, NULL), HW_OK, "%s", hw_error());
    char *text = NULL;
    cr_assert_eq(model_text_of(path, &text), HW_OK);
    cr_expect_str_eq(text, "# caf\xef\xbf\xbd \xc3\xa9 \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd"
                           "\xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\nconv1 conv2d 10 5\n");
    float *back = pattern_buffer(m->n_weights);
    cr_expect_eq(hw_ckpt_load(path, m, back, NULL), HW_OK, "%s", hw_error());
    cr_expect_eq(memcmp(back, w, m->n_weights * sizeof *w), 0);
    free(text), free(back), free(w), free(m);
    scratch_close(&s);
}

// ---- the run's settings in the metadata ----

// The seed, the learning rate, the schedule and its warm-up come back from the header alone (hw_ckpt_load_meta) and
// with the weights; a file without them says so (has_seed 0, no schedule).
Test(ckpt, schedule_and_seed_round_trip) {
    scratch s;
    scratch_open(&s);
    char path[256], plain[256];
    scratch_path(&s, "sched.safetensors", path, sizeof path);
    scratch_path(&s, "plain.safetensors", plain, sizeof plain);
    hw_model *m = small_model();
    hw_ckpt_meta meta = {.epoch = 2, .samples_seen = 6000, .seed = 7, .lr_warmup = 500, .lr = 0.1f};
    snprintf(meta.lr_schedule, sizeof meta.lr_schedule, "step:3:0.25");
    cr_assert_eq(hw_ckpt_save(path, m, small_data, &meta), HW_OK, "%s", hw_error());
    hw_ckpt_meta back;
    cr_assert_eq(hw_ckpt_load_meta(path, &back), HW_OK, "%s", hw_error());
    cr_expect_eq(back.epoch, 2);
    cr_expect_eq(back.samples_seen, 6000);
    cr_expect_eq(back.seed, 7u);
    cr_expect(back.has_seed);
    cr_expect_str_eq(back.lr_schedule, "step:3:0.25");
    cr_expect_eq(back.lr_warmup, 500);
    cr_expect_eq(back.lr, 0.1f, "the float 0.1 exactly, read %.9g", (double)back.lr);
    float weights[10];
    cr_assert_eq(hw_ckpt_load(path, m, weights, &back), HW_OK, "%s", hw_error());
    cr_expect_str_eq(back.lr_schedule, "step:3:0.25");
    cr_assert_eq(hw_ckpt_save(plain, m, small_data, NULL), HW_OK, "%s", hw_error());
    write_raw(plain,
              "{\"__metadata__\":{\"format\":\"pt\"},\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
              "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[24,40]}}",
              small_data, sizeof small_data);
    cr_assert_eq(hw_ckpt_load_meta(plain, &back), HW_OK, "%s", hw_error());
    cr_expect(!back.has_seed);
    cr_expect_str_eq(back.lr_schedule, "");
    cr_expect_eq(back.lr, 0.0f);
    free(m);
    scratch_close(&s);
}

// A schedule that is no schedule's text, a warm-up that is no whole number, a warm-up without a
// schedule, a learning rate that is no decimal number > 0 a float holds: refused, naming the key.
Test(ckpt, malformed_schedule_metadata_is_refused) {
    scratch s;
    scratch_open(&s);
    char path[256];
    scratch_path(&s, "bad.safetensors", path, sizeof path);
    hw_model *m = small_model();
    const char *tensors =
        "\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},\"b\":{\"dtype\":\"F32\",\"shape\":[4],"
        "\"data_offsets\":[24,40]}}";
    const struct {
        const char *metadata, *needle;
    } cases[] = {
        {"{\"__metadata__\":{\"lr_schedule\":\"cos ine\"},", "lr_schedule"},
        {"{\"__metadata__\":{\"lr_schedule\":\"\"},", "lr_schedule"},
        {"{\"__metadata__\":{\"lr_schedule\":\"cosine\",\"lr_warmup\":\"-5\"},", "lr_warmup"},
        {"{\"__metadata__\":{\"lr_schedule\":\"cosine\",\"lr_warmup\":\"1.5\"},", "lr_warmup"},
        {"{\"__metadata__\":{\"lr_warmup\":\"5\"},", "lr_warmup"},
        {"{\"__metadata__\":{\"lr\":\"0x1p-4\"},", "'lr'"},
        {"{\"__metadata__\":{\"lr\":\"-0.1\"},", "'lr'"},
        {"{\"__metadata__\":{\"lr\":\"1e39\"},", "'lr'"},
        {"{\"__metadata__\":{\"lr\":\" 0.1\"},", "'lr'"},
        {"{\"__metadata__\":{\"lr\":0.1},", "'lr'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char header[512];
        snprintf(header, sizeof header, "%s%s", cases[i].metadata, tensors);
        write_raw(path, header, small_data, sizeof small_data);
        expect_refused(path, m, cases[i].needle, header);
        hw_ckpt_meta meta;
        cr_expect_eq(hw_ckpt_load_meta(path, &meta), HW_ERR, "%s: accepted by hw_ckpt_load_meta", header);
    }
    free(m);
    scratch_close(&s);
}

// A simulation's record (its virtual workers and delay model) comes back; a real run's file has
// none; "delay" without "simulate", "simulate" without a delay, or one that is no whole number
// >= 1, are refused naming the key.
Test(ckpt, simulation_round_trips_and_malformed_is_refused) {
    scratch s;
    scratch_open(&s);
    char path[256];
    scratch_path(&s, "sim.safetensors", path, sizeof path);
    hw_model *m = small_model();
    hw_ckpt_meta meta = {.epoch = 1, .samples_seen = 10, .seed = 3, .simulate = 64};
    snprintf(meta.delay, sizeof meta.delay, "measured:runs/hw 4.csv");
    cr_assert_eq(hw_ckpt_save(path, m, small_data, &meta), HW_OK, "%s", hw_error());
    hw_ckpt_meta back;
    cr_assert_eq(hw_ckpt_load_meta(path, &back), HW_OK, "%s", hw_error());
    cr_expect_eq(back.simulate, 64);
    cr_expect_str_eq(back.delay, "measured:runs/hw 4.csv");
    meta.simulate = 0;
    cr_assert_eq(hw_ckpt_save(path, m, small_data, &meta), HW_OK, "%s", hw_error());
    cr_assert_eq(hw_ckpt_load_meta(path, &back), HW_OK, "%s", hw_error());
    cr_expect_eq(back.simulate, 0, "a real run records no simulation");
    cr_expect_str_eq(back.delay, "");
    const char *tensors =
        "\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},\"b\":{\"dtype\":\"F32\",\"shape\":[4],"
        "\"data_offsets\":[24,40]}}";
    const struct {
        const char *metadata, *needle;
    } cases[] = {
        {"{\"__metadata__\":{\"delay\":\"fixed:2\"},", "'delay' without 'simulate'"},
        {"{\"__metadata__\":{\"simulate\":\"4\"},", "'simulate' needs 'delay'"},
        {"{\"__metadata__\":{\"simulate\":\"4\",\"delay\":\"\"},", "'simulate' needs 'delay'"},
        {"{\"__metadata__\":{\"simulate\":\"0\",\"delay\":\"fixed:2\"},", "'simulate'"},
        {"{\"__metadata__\":{\"simulate\":\"x\",\"delay\":\"fixed:2\"},", "'simulate'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char header[512];
        snprintf(header, sizeof header, "%s%s", cases[i].metadata, tensors);
        write_raw(path, header, small_data, sizeof small_data);
        expect_refused(path, m, cases[i].needle, header);
    }
    free(m);
    scratch_close(&s);
}

// What a hand-written header gets wrong is named with the value the file holds: the tensor and
// its offset as written, a samples_seen no run reaches (beyond 2^53, where a resumed run's count
// would overflow), and model text beyond a model file's limit.
Test(ckpt, refusals_name_the_field_and_the_value) {
    scratch s;
    scratch_open(&s);
    char path[256];
    scratch_path(&s, "bad.safetensors", path, sizeof path);
    hw_model *m = small_model();
    const char *A = "\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}";
    struct {
        const char *b;  // tensor b's entry
        const char *metadata;
        const char *needle;
    } cases[] = {
        {"\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[407040.0,40]}", "{}",
         "'b': its first data offset is 407040.0"},
        {"\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[24,-4]}", "{}", "'b': its second data offset is -4"},
        {"\"b\":{\"dtype\":\"F32\",\"shape\":[\"4\"],\"data_offsets\":[24,40]}", "{}", "shape entry 0 is \"4\""},
        {"\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[24,40]}",
         "{\"samples_seen\":\"9223372036854775807\"}",
         "'samples_seen' is \"9223372036854775807\", expected a whole number in [0, 9007199254740992]"},
        {"\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[24,40]}", "{\"samples_seen\":\"9007199254740993\"}",
         "'samples_seen'"},
    };
    char header[1024];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(header, sizeof header, "{\"__metadata__\":%s,%s,%s}", cases[i].metadata, A, cases[i].b);
        write_raw(path, header, small_data, sizeof small_data);
        expect_refused(path, m, cases[i].needle, header);
    }
    // 2^53 itself is accepted.
    snprintf(header, sizeof header,
             "{\"__metadata__\":{\"samples_seen\":\"9007199254740992\"},%s,\"b\":{\"dtype\":\"F32\",\"shape\":[4],"
             "\"data_offsets\":[24,40]}}",
             A);
    write_raw(path, header, small_data, sizeof small_data);
    float back[10];
    hw_ckpt_meta meta;
    cr_expect_eq(hw_ckpt_load(path, m, back, &meta), HW_OK, "%s", hw_error());
    cr_expect_eq(meta.samples_seen, (int64_t)1 << 53);
    // Model text of 3 MiB, where a model file may hold 1 MiB.
    size_t text_bytes = 3u << 20;
    char *big = malloc(text_bytes + 4096);
    cr_assert_not_null(big);
    int n = snprintf(big, 4096, "{\"__metadata__\":{\"hogwild_model\":\"");
    memset(big + n, '#', text_bytes);
    snprintf(big + n + text_bytes, 4096, "\"},%s,\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[24,40]}}", A);
    write_raw(path, big, small_data, sizeof small_data);
    free(big);
    expect_refused(path, m, "more than the limit of 1048576 bytes for a model file", "3 MiB of model text");
    char *text = NULL;
    cr_expect_eq(hw_ckpt_load_model_text(path, &text), HW_ERR, "the model text of 3 MiB was read");
    free(text);
    free(m);
    scratch_close(&s);
}

// ---- a trainer's state beside the weights ----

// Two buffers saved as optim.* tensors after the weights, with text metadata: the weights' reader
// skips them (the weights read back exactly), hw_ckpt_load_states reads each back bit for bit in
// one call, a prefix the file does not hold is "not found" (buffers untouched), and asking for a
// saved prefix with one that is missing is a partial state, refused.
Test(ckpt, optimizer_state_round_trips_and_the_weights_reader_skips_it) {
    scratch s;
    scratch_open(&s);
    char path[256];
    scratch_path(&s, "state.safetensors", path, sizeof path);
    hw_model *m = lenet(50);
    float *w = random_weights(m->n_weights, 1), *v0 = random_weights(m->n_weights, 2);
    float *v1 = random_weights(m->n_weights, 3);
    hw_ckpt_state states[] = {{"optim.velocity.worker0.", v0}, {"optim.velocity.worker1.", v1}};
    hw_ckpt_text texts[] = {{"optim_trainer", "hogwild"}};
    hw_ckpt_extra extra = {states, 2, texts, 1};
    hw_ckpt_meta meta = {.epoch = 3, .seed = 9};
    cr_assert_eq(hw_ckpt_save_extra(path, m, w, &meta, &extra), HW_OK, "%s", hw_error());
    float *back = pattern_buffer(m->n_weights);
    cr_assert_eq(hw_ckpt_load(path, m, back, NULL), HW_OK, "%s", hw_error());
    cr_expect_eq(memcmp(back, w, m->n_weights * sizeof *w), 0, "the weights differ");
    float *b0 = pattern_buffer(m->n_weights), *b1 = pattern_buffer(m->n_weights);
    const char *prefixes[] = {"optim.velocity.worker0.", "optim.velocity.worker1."};
    float *buffers[] = {b0, b1};
    int found = 0;
    cr_assert_eq(hw_ckpt_load_states(path, m, prefixes, buffers, 2, &found), HW_OK, "%s", hw_error());
    cr_expect_eq(found, 1);
    cr_expect_eq(memcmp(b0, v0, m->n_weights * sizeof *w), 0, "worker 0's velocity differs");
    cr_expect_eq(memcmp(b1, v1, m->n_weights * sizeof *w), 0, "worker 1's velocity differs");
    char *value = NULL;
    cr_assert_eq(hw_ckpt_load_text(path, "optim_trainer", &value), HW_OK, "%s", hw_error());
    cr_expect_str_eq(value, "hogwild");
    free(value);
    const char *absent[] = {"optim.velocity."};
    float *untouched = pattern_buffer(m->n_weights), *pattern = pattern_buffer(m->n_weights);
    cr_assert_eq(hw_ckpt_load_states(path, m, absent, &untouched, 1, &found), HW_OK, "%s", hw_error());
    cr_expect_eq(found, 0);
    cr_expect_eq(memcmp(untouched, pattern, m->n_weights * sizeof *w), 0, "a state not found was written");
    const char *partial[] = {"optim.velocity.worker0.", "optim.velocity.worker2."};
    float *two[] = {untouched, pattern};
    cr_expect_eq(hw_ckpt_load_states(path, m, partial, two, 2, &found), HW_ERR, "a partial state was read");
    cr_expect(strstr(hw_error(), "partial state") != NULL, "%s", hw_error());
    free(w), free(v0), free(v1), free(back), free(b0), free(b1), free(untouched), free(pattern), free(m);
    scratch_close(&s);
}
