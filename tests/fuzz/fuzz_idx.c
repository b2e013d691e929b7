// fuzz_idx: feeds the IDX reader a few thousand damaged files, built with ASan + UBSan.
//
// From one valid image/label pair (plain and gzipped) it makes mutants: bit flips, truncations,
// header fields set to awkward values (0, 1, 2^31, 2^32 - 1, off by one, ...), inserted, deleted
// and overwritten bytes, appended garbage, and valid gzip around a damaged IDX. Each mutant goes
// through hw_idx_load; an accepted one is read end to end and checked (shape, labels in range).
// A sanitizer report or a crash kills the run with a non-zero exit and names the case; a clean
// run prints "fuzz_idx: N files, M rejected, 0 crashes". Deterministic: the seed is fixed.
//
//   make build/fuzz_idx && build/fuzz_idx [cases]
#include "hw/data.h"
#include "hw/err.h"
#include "hw/rng.h"

#include <sanitizer/common_interface_defs.h>
#include <sanitizer/lsan_interface.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

enum { N_IMAGES = 12, ROWS = 6, COLS = 5, MAX_FILE = 4096 };

typedef struct {
    uint8_t bytes[MAX_FILE];
    size_t len;
} blob;

static char work_dir[256], images_path[512], labels_path[512];
static char current_case[256];

static void on_death(void) {
    fprintf(stderr, "fuzz_idx: CRASH in case %s; the files are kept: %s, %s\n", current_case, images_path, labels_path);
}

static void write_blob(const char *path, const blob *b) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b->bytes, 1, b->len, f) != b->len || fclose(f) != 0) {
        fprintf(stderr, "fuzz_idx: cannot write %s\n", path);
        exit(2);
    }
}

// Gzips `in` into `out` (through a file, as zlib's gzip writer is file based).
static void gzip_blob(const blob *in, blob *out) {
    char path[600];
    snprintf(path, sizeof path, "%s/gz.tmp", work_dir);
    gzFile f = gzopen(path, "wb6");
    if (!f || gzwrite(f, in->bytes, (unsigned)in->len) != (int)in->len || gzclose(f) != Z_OK) {
        fprintf(stderr, "fuzz_idx: cannot gzip into %s\n", path);
        exit(2);
    }
    FILE *r = fopen(path, "rb");
    out->len = fread(out->bytes, 1, MAX_FILE, r);
    fclose(r);
    unlink(path);
}

static void put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static uint32_t get_be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint32_t awkward_value(hw_rng *rng, uint32_t original) {
    const uint32_t values[] = {0,           1,           2,           3,           9,     10,    11,
                               255,         256,         28,          32767,       32768, 32769, 65535,
                               0x7fffffffu, 0x80000000u, 0xfffffffeu, 0xffffffffu, 0x803, 0x801, 0x802};
    switch (hw_rng_below(rng, 4)) {
    case 0: return original + 1;
    case 1: return original - 1;
    case 2: return hw_rng_u32(rng);
    default: return values[hw_rng_below(rng, sizeof values / sizeof values[0])];
    }
}

// One mutation of b in place; writes what it did into `what`.
static void mutate(blob *b, hw_rng *rng, int header_fields, char *what, size_t cap) {
    uint32_t kind = hw_rng_below(rng, 7);
    if (kind == 2 && header_fields == 0) kind = 0;  // a gzip stream has no IDX header to aim at
    if (b->len == 0) kind = 5;
    switch (kind) {
    case 0: {  // bit flips
        int flips = 1 + (int)hw_rng_below(rng, 4);
        for (int i = 0; i < flips; i++) {
            b->bytes[hw_rng_below(rng, (uint32_t)b->len)] ^= (uint8_t)(1u << hw_rng_below(rng, 8));
        }
        snprintf(what, cap, "%d bit flips", flips);
        break;
    }
    case 1: {  // truncation
        b->len = hw_rng_below(rng, (uint32_t)b->len);
        snprintf(what, cap, "truncated to %zu bytes", b->len);
        break;
    }
    case 2: {  // a header field
        uint32_t field = hw_rng_below(rng, (uint32_t)header_fields);
        if (b->len >= 4 * (field + 1)) {
            uint32_t v = awkward_value(rng, get_be32(b->bytes + 4 * field));
            put_be32(b->bytes + 4 * field, v);
            snprintf(what, cap, "header field %u = %u", field, v);
        } else {
            snprintf(what, cap, "header field %u out of reach", field);
        }
        break;
    }
    case 3: {  // overwrite a run of bytes
        size_t at = hw_rng_below(rng, (uint32_t)b->len), n = 1 + hw_rng_below(rng, 16);
        for (size_t i = at; i < at + n && i < b->len; i++) b->bytes[i] = (uint8_t)hw_rng_u32(rng);
        snprintf(what, cap, "%zu bytes overwritten at %zu", n, at);
        break;
    }
    case 4: {  // delete a run of bytes
        size_t at = hw_rng_below(rng, (uint32_t)b->len), n = 1 + hw_rng_below(rng, 16);
        if (at + n > b->len) n = b->len - at;
        memmove(b->bytes + at, b->bytes + at + n, b->len - at - n);
        b->len -= n;
        snprintf(what, cap, "%zu bytes deleted at %zu", n, at);
        break;
    }
    case 5: {  // append garbage
        size_t n = 1 + hw_rng_below(rng, 64);
        if (b->len + n > MAX_FILE) n = MAX_FILE - b->len;
        for (size_t i = 0; i < n; i++) b->bytes[b->len + i] = (uint8_t)hw_rng_u32(rng);
        b->len += n;
        snprintf(what, cap, "%zu bytes appended", n);
        break;
    }
    default: {  // insert bytes
        size_t at = hw_rng_below(rng, (uint32_t)b->len), n = 1 + hw_rng_below(rng, 16);
        if (b->len + n > MAX_FILE) n = MAX_FILE - b->len;
        memmove(b->bytes + at + n, b->bytes + at, b->len - at);
        for (size_t i = 0; i < n; i++) b->bytes[at + i] = (uint8_t)hw_rng_u32(rng);
        b->len += n;
        snprintf(what, cap, "%zu bytes inserted at %zu", n, at);
        break;
    }
    }
}

// Reads an accepted dataset end to end, so that ASan sees any short buffer, and checks it.
static int check_accepted(const hw_dataset *ds) {
    size_t bytes = (size_t)ds->n * (size_t)ds->height * (size_t)ds->width;
    unsigned sum = 0;
    for (size_t i = 0; i < bytes; i++) sum += ds->images[i];
    for (int64_t i = 0; i < ds->n; i++) {
        if (ds->labels[i] >= ds->n_classes) return 0;
    }
    return ds->n > 0 && ds->height > 0 && ds->width > 0 && ds->channels == 1 && sum < 0xffffffffu;
}

int main(int argc, char **argv) {
    int cases = argc > 1 ? atoi(argv[1]) : 5000;
    __sanitizer_set_death_callback(on_death);
    snprintf(work_dir, sizeof work_dir, "%s/hw-fuzz-idx-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (cases < 1 || !mkdtemp(work_dir)) {
        perror("fuzz_idx: mkdtemp");
        return 2;
    }

    // The valid pair, with standard names so that the 0-9 label check runs too.
    blob images = {.len = 16 + N_IMAGES * ROWS * COLS}, labels = {.len = 8 + N_IMAGES};
    put_be32(images.bytes, 0x803);
    put_be32(images.bytes + 4, N_IMAGES);
    put_be32(images.bytes + 8, ROWS);
    put_be32(images.bytes + 12, COLS);
    for (int i = 0; i < N_IMAGES * ROWS * COLS; i++) images.bytes[16 + i] = (uint8_t)(i * 37);
    put_be32(labels.bytes, 0x801);
    put_be32(labels.bytes + 4, N_IMAGES);
    for (int i = 0; i < N_IMAGES; i++) labels.bytes[8 + i] = (uint8_t)(i % 10);
    blob images_gz, labels_gz;
    gzip_blob(&images, &images_gz);
    gzip_blob(&labels, &labels_gz);

    hw_rng rng;
    hw_rng_seed(&rng, 20240601, 1);
    int rejected = 0, accepted = 0;
    for (int c = 0; c < cases; c++) {
        snprintf(current_case, sizeof current_case, "%d (while mutating)", c);
        int target_labels = (int)hw_rng_below(&rng, 3) == 0;  // images twice as often: more to get wrong
        int gz = (int)hw_rng_below(&rng, 2);
        int damage_inside_gzip = gz && hw_rng_below(&rng, 3) == 0;
        const char *suffix = gz ? ".gz" : "";
        snprintf(images_path, sizeof images_path, "%s/train-images-idx3-ubyte%s", work_dir, suffix);
        snprintf(labels_path, sizeof labels_path, "%s/train-labels-idx1-ubyte%s", work_dir, suffix);
        blob mutant = target_labels ? labels : images;
        char what[128];
        int rounds = 1 + (int)hw_rng_below(&rng, 3);
        if (!gz || damage_inside_gzip) {
            for (int r = 0; r < rounds; r++) mutate(&mutant, &rng, target_labels ? 2 : 4, what, sizeof what);
        }
        if (gz) {
            blob zipped;
            gzip_blob(&mutant, &zipped);
            if (!damage_inside_gzip) {
                for (int r = 0; r < rounds; r++) mutate(&zipped, &rng, 0, what, sizeof what);
            }
            mutant = zipped;
        }
        snprintf(current_case, sizeof current_case, "%d (%s%s, %d rounds, last: %s)", c,
                 target_labels ? "labels" : "images",
                 gz ? (damage_inside_gzip ? ", gz of damaged idx" : ", damaged gz") : "", rounds, what);
        write_blob(target_labels ? labels_path : images_path, &mutant);
        write_blob(target_labels ? images_path : labels_path,
                   target_labels ? (gz ? &images_gz : &images) : (gz ? &labels_gz : &labels));

        hw_dataset ds;
        if (hw_idx_load(&ds, images_path, labels_path) == HW_OK) {
            if (!check_accepted(&ds)) {
                fprintf(stderr, "fuzz_idx: case %s accepted an inconsistent dataset\n", current_case);
                return 1;
            }
            accepted++;
            hw_dataset_free(&ds);
        } else {
            // Every refusal must say which file and why.
            const char *msg = hw_error();
            if (!strstr(msg, work_dir) || strlen(msg) < strlen(work_dir) + 10) {
                fprintf(stderr, "fuzz_idx: case %s: message names no file: %s\n", current_case, msg);
                return 1;
            }
            rejected++;
        }
        unlink(images_path);
        unlink(labels_path);
    }
    rmdir(work_dir);
    (void)accepted;  // the rest: e.g. a flipped pixel bit is still a valid file
    snprintf(current_case, sizeof current_case, "none: the leak check after the last case");
    if (__lsan_do_recoverable_leak_check()) {
        printf("fuzz_idx: %d files, %d rejected, 0 crashes, but memory LEAKED (report above)\n", cases, rejected);
        return 1;
    }
    printf("fuzz_idx: %d files, %d rejected, 0 crashes\n", cases, rejected);
    return 0;
}
