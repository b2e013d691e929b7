// ratings: user-item ratings in MovieLens's three layouts (tab, "::", comma), read into sparse sets
// in the factorization-machine encoding, with one id map shared by the training and test files
// (include/hw/sparse_data.h has the rules).
#include "sparse_io.h"

#include "hw/err.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- raw id (text) -> dense index, in first-seen order ----
// Open addressing on a 64-bit hash of the id's bytes, the bytes themselves in one growing arena.
typedef struct {
    uint64_t hash;
    int64_t key;  // offset of the id's bytes in `keys`; -1: an empty slot
    int64_t id;   // the dense index
    size_t len;
} id_slot;

typedef struct {
    id_slot *slots;
    int64_t cap, count;  // cap a power of two, at most half full
    char *keys;
    size_t keys_len, keys_cap;
} id_map;

static void id_map_free(id_map *m) {
    free(m->slots);
    free(m->keys);
    memset(m, 0, sizeof *m);
}

// FNV-1a, 64 bits.
static uint64_t id_hash(const char *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
    return h;
}

static int id_map_grow(id_map *m) {
    int64_t cap = m->cap ? m->cap * 2 : 1024;
    id_slot *slots = malloc((size_t)cap * sizeof *slots);
    if (!slots) return HW_ERR;
    for (int64_t i = 0; i < cap; i++) slots[i].key = -1;
    for (int64_t i = 0; i < m->cap; i++) {
        if (m->slots[i].key < 0) continue;
        int64_t j = (int64_t)(m->slots[i].hash & (uint64_t)(cap - 1));
        while (slots[j].key >= 0) j = (j + 1) & (cap - 1);
        slots[j] = m->slots[i];
    }
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return HW_OK;
}

// The dense index of the id p[0 .. n): the one it has, or the next one. -1 when out of memory.
static int64_t id_map_index(id_map *m, const char *p, size_t n) {
    if ((m->count + 1) * 2 > m->cap && id_map_grow(m) != HW_OK) return -1;
    uint64_t h = id_hash(p, n);
    int64_t j = (int64_t)(h & (uint64_t)(m->cap - 1));
    for (; m->slots[j].key >= 0; j = (j + 1) & (m->cap - 1)) {
        id_slot *s = &m->slots[j];
        if (s->hash == h && s->len == n && memcmp(m->keys + s->key, p, n) == 0) return s->id;
    }
    if (m->keys_len + n > m->keys_cap) {
        size_t cap = m->keys_cap ? m->keys_cap * 2 : 1 << 16;
        while (cap < m->keys_len + n) cap *= 2;
        char *keys = realloc(m->keys, cap);
        if (!keys) return -1;
        m->keys = keys;
        m->keys_cap = cap;
    }
    memcpy(m->keys + m->keys_len, p, n);
    m->slots[j] = (id_slot){.hash = h, .key = (int64_t)m->keys_len, .id = m->count, .len = n};
    m->keys_len += n;
    return m->count++;
}

// ---- one file ----

typedef struct {
    text_place at;    // the file and the line being parsed, for messages
    const char *sep;  // the separator and its length
    size_t sep_len;
    const char *sep_name;  // for messages
    int header_possible;   // no data line read yet: a first line that is not data is the header
} ratings_reader;

// The next separator at or after p, or end.
static const char *find_separator(const ratings_reader *r, const char *p, const char *end) {
    for (;;) {
        const char *q = memchr(p, r->sep[0], (size_t)(end - p));
        if (!q) return end;
        if ((size_t)(end - q) >= r->sep_len && memcmp(q, r->sep, r->sep_len) == 0) return q;
        p = q + 1;
    }
}

enum { MAX_FIELDS = 4 };

typedef struct {
    const char *start, *end;  // blanks around the field removed
} field;

// Whether the field is a decimal number and nothing else ("7", "07", "1.5").
static int is_number(field f) {
    float value;
    return f.start < f.end && text_parse_float(f.start, f.end, &value) == f.end;
}

// One line: a rating appended to b, its user and item in the maps; a blank line or the header adds nothing.
static int parse_line(ratings_reader *r, sparse_build *b, id_map *users, id_map *items, const char *line, size_t len) {
    r->at.line = line;
    const char *end = line + len, *p = line;
    while (p < end && text_is_blank(*p)) p++;
    if (p == end) return HW_OK;
    field f[MAX_FIELDS];
    int n = 0;
    for (p = line;; n++) {
        const char *q = find_separator(r, p, end);
        if (n == MAX_FIELDS) {
            return text_fail_at(
                &r->at, p - r->sep_len,
                "more than %d fields: expected user, item, rating and an optional timestamp separated by %s",
                MAX_FIELDS, r->sep_name);
        }
        f[n].start = p;
        f[n].end = q;
        while (f[n].start < q && text_is_blank(*f[n].start)) f[n].start++;
        while (f[n].end > f[n].start && text_is_blank(f[n].end[-1])) f[n].end--;
        if (q == end) break;
        p = q + r->sep_len;
    }
    n++;
    float rating = 0;
    int rating_width = n >= 3 ? (int)(f[2].end - f[2].start < 40 ? f[2].end - f[2].start : 40) : 0;
    const char *rating_end = n >= 3 ? text_parse_float(f[2].start, f[2].end, &rating) : NULL;
    int is_data = n >= 3 && rating_end == f[2].end;
    // Only a first line that names its columns is the header: one whose user or item is not a
    // number either ("userId,movieId,rating"). Numeric ids with a bad rating are a bad first rating,
    // refused below as any other line's would be, not silently dropped as a header.
    int header = r->header_possible && !is_data && n >= 3 && (!is_number(f[0]) || !is_number(f[1]));
    int first = r->header_possible;
    r->header_possible = 0;
    if (header) return HW_OK;
    if (n < 3) {
        return text_fail_at(&r->at, line,
                            "%d field%s: expected user, item, rating and an optional timestamp separated by %s", n,
                            n == 1 ? "" : "s", r->sep_name);
    }
    if (f[0].start == f[0].end) return text_fail_at(&r->at, f[0].start, "empty user id");
    if (f[1].start == f[1].end) return text_fail_at(&r->at, f[1].start, "empty item id");
    if (!is_data) {
        const char *what = text_is_nonfinite_word(f[2].start, f[2].end) ? "non-finite" : "malformed";
        return text_fail_at(&r->at, f[2].start, "%s rating '%.*s': expected a finite decimal number%s", what,
                            rating_width, f[2].start,
                            first ? " (a first line is the header only when its user or item is not a number)" : "");
    }
    if (!isfinite(rating)) {
        return text_fail_at(&r->at, f[2].start, "rating '%.*s' is out of the range of a float", rating_width,
                            f[2].start);
    }
    int64_t user = id_map_index(users, f[0].start, (size_t)(f[0].end - f[0].start));
    int64_t item = id_map_index(items, f[1].start, (size_t)(f[1].end - f[1].start));
    if (user < 0 || item < 0) return hw_fail("%s: out of memory for the user and item ids", r->at.path);
    if (user >= INT32_MAX || item >= INT32_MAX) return text_fail_at(&r->at, line, "more than 2^31 - 1 users or items");
    if (sparse_build_reserve_nnz(b, 2, r->at.path) != HW_OK) return HW_ERR;
    sparse_build_push(b, (int32_t)user, 1.0f);
    sparse_build_push(b, (int32_t)item, 1.0f);  // made n_users + item once every user is known
    return sparse_build_end_row(b, rating, r->at.path);
}

static int read_ratings(hw_sparse_set *set, const char *path, hw_ratings_layout layout, id_map *users, id_map *items) {
    static const char *const separators[] = {[HW_RATINGS_TSV] = "\t", [HW_RATINGS_DAT] = "::", [HW_RATINGS_CSV] = ","};
    static const char *const names[] = {
        [HW_RATINGS_TSV] = "tabs", [HW_RATINGS_DAT] = "'::'", [HW_RATINGS_CSV] = "commas"};
    memset(set, 0, sizeof *set);
    if (layout < HW_RATINGS_TSV || layout > HW_RATINGS_CSV)
        return hw_fail("%s: unknown ratings layout %d", path, (int)layout);
    text_stream *in;
    if (text_stream_open(&in, path, "ratings file") != HW_OK) return HW_ERR;
    ratings_reader r = {.at.path = path,
                        .sep = separators[layout],
                        .sep_len = strlen(separators[layout]),
                        .sep_name = names[layout],
                        .header_possible = 1};
    sparse_build b;
    sparse_build_init(&b);
    const char *line;
    size_t len;
    int got;
    while ((got = text_stream_line(in, &line, &len, &r.at.line_no)) == 1) {
        if (parse_line(&r, &b, users, items, line, len) != HW_OK) break;
    }
    text_stream_close(in);
    if (got == 0 && b.set.n == 0) hw_fail("%s: no ratings (the file is empty, or holds only a header)", path);
    if (got != 0 || b.set.n == 0 || sparse_build_finish(&b, set, path) != HW_OK) {
        sparse_build_free(&b);
        return HW_ERR;
    }
    set->label_kind = HW_LABEL_REAL;
    return HW_OK;
}

// Items are features after the users: once both files are read, every item's index moves up by n_users.
static void place_items(hw_sparse_set *set, int64_t n_users, int64_t n_items) {
    for (int64_t e = 0; e < set->n; e++) set->index[2 * e + 1] += (int32_t)n_users;
    set->n_users = n_users;
    set->n_items = n_items;
    set->dim = n_users + n_items;
}

int hw_ratings_load(hw_sparse_set *train, hw_sparse_set *test, const char *train_path, const char *test_path,
                    hw_ratings_layout layout) {
    memset(train, 0, sizeof *train);
    if (test) memset(test, 0, sizeof *test);
    if (test_path && !test) return hw_fail("%s: a test file was given without a set to read it into", test_path);
    id_map users = {0}, items = {0};
    int rc = read_ratings(train, train_path, layout, &users, &items);
    if (rc == HW_OK && test_path) rc = read_ratings(test, test_path, layout, &users, &items);
    if (rc == HW_OK && users.count + items.count > INT32_MAX) {
        rc = hw_fail("%s: %lld users and %lld items are more features than the 2^31 - 1 an index holds", train_path,
                     (long long)users.count, (long long)items.count);
    }
    if (rc == HW_OK) {
        place_items(train, users.count, items.count);
        if (test_path) place_items(test, users.count, items.count);
    } else {
        hw_sparse_set_free(train);
        if (test) hw_sparse_set_free(test);
    }
    id_map_free(&users);
    id_map_free(&items);
    return rc;
}
