// sparse_set: a sparse set's arrays while it is read (grown, then shrunk once), freeing it, its
// size, and the rule that gives its labels a kind (include/hw/sparse_data.h, src/data/sparse_io.h).
#include "sparse_io.h"

#include "hw/err.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { FIRST_ROWS = 1 << 12, FIRST_NNZ = 1 << 16 };

void hw_sparse_set_free(hw_sparse_set *set) {
    if (!set) return;
    free(set->row_start);
    free(set->index);
    free(set->value);
    free(set->label);
    memset(set, 0, sizeof *set);
}

int64_t hw_sparse_set_bytes(const hw_sparse_set *set) {
    return (set->n + 1) * (int64_t)sizeof *set->row_start +
           set->nnz * (int64_t)(sizeof *set->index + sizeof *set->value) + set->n * (int64_t)sizeof *set->label;
}

void sparse_build_init(sparse_build *b) { memset(b, 0, sizeof *b); }

void sparse_build_free(sparse_build *b) {
    hw_sparse_set_free(&b->set);
    b->row_cap = b->nnz_cap = 0;
}

// Resizes *p to `count` elements of `size` bytes; HW_ERR (no message) when realloc fails.
static int resize(void *p, int64_t count, size_t size) {
    void *bigger = realloc(*(void **)p, (size_t)(count > 0 ? count : 1) * size);
    if (!bigger) return HW_ERR;
    *(void **)p = bigger;
    return HW_OK;
}

// A capacity of at least `need`, half again as large as `cap` (which starts at `first`).
static int64_t grown(int64_t cap, int64_t need, int64_t first) {
    int64_t next = cap ? cap + cap / 2 : first;
    return next > need ? next : need;
}

int sparse_build_reserve_nnz(sparse_build *b, int64_t more, const char *path) {
    if (b->set.nnz + more <= b->nnz_cap) return HW_OK;
    int64_t cap = grown(b->nnz_cap, b->set.nnz + more, FIRST_NNZ);
    if (resize(&b->set.index, cap, sizeof *b->set.index) != HW_OK ||
        resize(&b->set.value, cap, sizeof *b->set.value) != HW_OK) {
        return hw_fail("%s: out of memory for %lld nonzeros", path, (long long)cap);
    }
    b->nnz_cap = cap;
    return HW_OK;
}

int sparse_build_end_row(sparse_build *b, float label, const char *path) {
    if (b->set.n + 1 >= b->row_cap) {
        int64_t cap = grown(b->row_cap, b->set.n + 2, FIRST_ROWS);
        if (resize(&b->set.row_start, cap, sizeof *b->set.row_start) != HW_OK ||
            resize(&b->set.label, cap, sizeof *b->set.label) != HW_OK) {
            return hw_fail("%s: out of memory for %lld examples", path, (long long)cap);
        }
        if (b->row_cap == 0) b->set.row_start[0] = 0;
        b->row_cap = cap;
    }
    b->set.label[b->set.n] = label;
    b->set.n++;
    b->set.row_start[b->set.n] = b->set.nnz;
    return HW_OK;
}

int sparse_build_finish(sparse_build *b, hw_sparse_set *out, const char *path) {
    hw_sparse_set *s = &b->set;
    if (b->row_cap == 0 && resize(&s->row_start, 1, sizeof *s->row_start) != HW_OK) {
        return hw_fail("%s: out of memory", path);
    }
    s->row_start[s->n] = s->nnz;
    // A shrink that fails keeps the larger block; an array never grown (no nonzeros) gets one
    // element, so that every pointer of a set is valid.
    resize(&s->row_start, s->n + 1, sizeof *s->row_start);
    resize(&s->label, s->n, sizeof *s->label);
    resize(&s->index, s->nnz, sizeof *s->index);
    resize(&s->value, s->nnz, sizeof *s->value);
    if (!s->label || !s->index || !s->value) return hw_fail("%s: out of memory", path);
    snprintf(s->source, sizeof s->source, "%s", path);
    *out = *s;
    sparse_build_init(b);
    return HW_OK;
}

// ---- labels ----

void label_summary_init(label_summary *s) {
    s->all_pm1 = s->all_01 = s->all_class = 1;
    s->max = -INFINITY;
}

void label_summary_merge(label_summary *into, const label_summary *other) {
    into->all_pm1 &= other->all_pm1;
    into->all_01 &= other->all_01;
    into->all_class &= other->all_class;
    if (other->max > into->max) into->max = other->max;
}

void label_summary_apply(const label_summary *s, hw_sparse_set *sets, int count) {
    hw_label_kind kind = s->all_pm1 || s->all_01 ? HW_LABEL_BINARY : s->all_class ? HW_LABEL_CLASSES : HW_LABEL_REAL;
    int from_01 = !s->all_pm1 && s->all_01;
    for (int i = 0; i < count; i++) {
        hw_sparse_set *set = &sets[i];
        set->label_kind = kind;
        set->n_classes = kind == HW_LABEL_BINARY ? 2 : kind == HW_LABEL_CLASSES ? (int)s->max + 1 : 0;
        if (!from_01) continue;
        for (int64_t e = 0; e < set->n; e++) {
            if (set->label[e] == 0.0f) set->label[e] = -1.0f;
        }
    }
}
