// sparse_stats: the HOGWILD! paper's sparsity statistics of a set (Omega, Delta, rho), the
// nonzeros per example and per feature (include/hw/sparse_data.h defines each and the estimator).
//
// rho needs, for an example e, the size of the union of the posting lists (the examples that touch
// a feature) of e's features. Each union is marked in a bitset of n bits: a feature touched by at
// least n/64 examples (a "hot" one) has its posting list as a bitset made once, ORed in n/64 words
// at a time; a rarer one has its list's bits set one by one (and cleared again the same way when
// no hot feature filled the bitset). An example then costs at most (its hot features + 2) * n/64
// words plus its rare features' list lengths, instead of the sum of all its lists' lengths.
#include "hw/err.h"
#include "hw/rng.h"
#include "hw/sparse_data.h"

#include <stdlib.h>
#include <string.h>

// The hot features' bitsets may take this much, or as much as the posting lists, whichever is more.
#define HOT_BUDGET_BYTES (64ll << 20)

typedef struct {
    const hw_sparse_set *set;
    const int64_t *degree;
    int64_t *col_start;  // dim + 1: feature v's examples are rows[col_start[v] .. col_start[v + 1])
    uint32_t *rows;      // nnz
    int32_t *hot_of;     // dim: the feature's bitset among `hot`, or -1
    uint64_t *hot;       // n_hot bitsets of `words` words
    uint64_t *marks;     // the union being counted
    int64_t words;
} conflict_counter;

static void counter_free(conflict_counter *c) {
    free(c->col_start);
    free(c->rows);
    free(c->hot_of);
    free(c->hot);
    free(c->marks);
}

static int cmp_degree_desc(const void *a, const void *b, void *degree) {
    int64_t da = ((const int64_t *)degree)[*(const int32_t *)a], db = ((const int64_t *)degree)[*(const int32_t *)b];
    return da < db ? 1 : da > db ? -1 : 0;
}

// The posting lists, and the bitsets of the hot features within the budget, busiest first.
static int counter_open(conflict_counter *c, const hw_sparse_set *set, const int64_t *degree) {
    memset(c, 0, sizeof *c);
    c->set = set;
    c->degree = degree;
    int64_t n = set->n, dim = set->dim;
    c->words = (n + 63) / 64;
    c->col_start = calloc((size_t)dim + 1, sizeof *c->col_start);
    c->rows = malloc((size_t)(set->nnz > 0 ? set->nnz : 1) * sizeof *c->rows);
    c->hot_of = malloc((size_t)(dim > 0 ? dim : 1) * sizeof *c->hot_of);
    c->marks = calloc((size_t)c->words + 1, sizeof *c->marks);
    if (!c->col_start || !c->rows || !c->hot_of || !c->marks) return HW_ERR;
    for (int64_t v = 0; v < dim; v++) c->col_start[v + 1] = c->col_start[v] + degree[v];
    int64_t *fill = malloc((size_t)(dim > 0 ? dim : 1) * sizeof *fill);
    if (!fill) return HW_ERR;
    memcpy(fill, c->col_start, (size_t)dim * sizeof *fill);
    for (int64_t e = 0; e < n; e++) {
        for (int64_t k = set->row_start[e]; k < set->row_start[e + 1]; k++)
            c->rows[fill[set->index[k]]++] = (uint32_t)e;
    }
    free(fill);

    int64_t threshold = n / 64 > 1 ? n / 64 : 1, n_candidates = 0;
    int32_t *candidates = malloc((size_t)(dim > 0 ? dim : 1) * sizeof *candidates);
    if (!candidates) return HW_ERR;
    for (int64_t v = 0; v < dim; v++) {
        c->hot_of[v] = -1;
        if (degree[v] >= threshold) candidates[n_candidates++] = (int32_t)v;
    }
    qsort_r(candidates, (size_t)n_candidates, sizeof *candidates, cmp_degree_desc, (void *)degree);
    int64_t budget = HOT_BUDGET_BYTES > set->nnz * 4 ? HOT_BUDGET_BYTES : set->nnz * 4;
    int64_t n_hot = c->words > 0 ? budget / (c->words * 8) : 0;
    if (n_hot > n_candidates) n_hot = n_candidates;
    // n_hot * words * 8 is within the budget, by the choice of n_hot.
    uint64_t hot_words = n_hot > 0 ? (uint64_t)n_hot * (uint64_t)c->words : 1;
    c->hot = hot_words <= (uint64_t)budget ? calloc((size_t)hot_words, sizeof *c->hot) : NULL;
    if (!c->hot) {
        free(candidates);
        return HW_ERR;
    }
    for (int64_t h = 0; h < n_hot; h++) {
        int32_t v = candidates[h];
        c->hot_of[v] = (int32_t)h;
        uint64_t *bits = c->hot + h * c->words;
        for (int64_t k = c->col_start[v]; k < c->col_start[v + 1]; k++)
            bits[c->rows[k] >> 6] |= 1ull << (c->rows[k] & 63);
    }
    free(candidates);
    return HW_OK;
}

// How many examples share a feature with example e (e itself included).
static int64_t counter_conflicts(conflict_counter *c, int64_t e) {
    const hw_sparse_set *set = c->set;
    int64_t begin = set->row_start[e], end = set->row_start[e + 1];
    uint64_t *marks = c->marks;
    int filled = 0;  // a hot bitset was copied in: count and clear the whole bitset
    for (int64_t k = begin; k < end; k++) {
        int32_t h = c->hot_of[set->index[k]];
        if (h < 0) continue;
        const uint64_t *bits = c->hot + (int64_t)h * c->words;
        if (!filled) {
            memcpy(marks, bits, (size_t)c->words * sizeof *marks);
        } else {
            for (int64_t w = 0; w < c->words; w++) marks[w] |= bits[w];
        }
        filled = 1;
    }
    int64_t count = 0;
    for (int64_t k = begin; k < end; k++) {
        int32_t v = set->index[k];
        if (c->hot_of[v] >= 0) continue;
        for (int64_t p = c->col_start[v]; p < c->col_start[v + 1]; p++) {
            uint32_t r = c->rows[p];
            uint64_t bit = 1ull << (r & 63);
            count += (marks[r >> 6] & bit) == 0;
            marks[r >> 6] |= bit;
        }
    }
    if (filled) {
        count = 0;
        for (int64_t w = 0; w < c->words; w++) count += __builtin_popcountll(marks[w]);
        memset(marks, 0, (size_t)c->words * sizeof *marks);
        return count;
    }
    for (int64_t k = begin; k < end; k++) {
        int32_t v = set->index[k];
        for (int64_t p = c->col_start[v]; p < c->col_start[v + 1]; p++) marks[c->rows[p] >> 6] = 0;
    }
    return count;
}

// rho, exactly or over a stratified sample, into st (its Delta already set).
static int compute_rho(hw_sparse_stats *st, const hw_sparse_set *set, const int64_t *degree, int64_t rho_sample,
                       uint64_t seed) {
    conflict_counter c;
    if (counter_open(&c, set, degree) != HW_OK) {
        counter_free(&c);
        return hw_fail("%s: out of memory for the posting lists of %lld nonzeros", set->source, (long long)set->nnz);
    }
    int64_t n = set->n;
    int exact = rho_sample <= 0 || n <= rho_sample;
    int64_t m = exact ? n : rho_sample, best = -1, best_example = 0;
    hw_rng rng;
    hw_rng_seed(&rng, seed, 0x5250);
    for (int64_t s = 0; s < m; s++) {
        int64_t e = s;
        if (!exact) {
            int64_t lo = s * n / m, hi = (s + 1) * n / m;  // the s-th run of consecutive examples
            e = lo + (int64_t)hw_rng_below(&rng, (uint32_t)(hi - lo));
        }
        int64_t count = counter_conflicts(&c, e);
        if (count > best) {
            best = count;
            best_example = e;
        }
    }
    counter_free(&c);
    st->rho = (double)best / (double)n;
    st->rho_exact = exact;
    st->rho_examples = m;
    st->rho_example = best_example;
    st->rho_lower = st->rho > st->delta ? st->rho : st->delta;
    return HW_OK;
}

int hw_sparse_stats_compute(hw_sparse_stats *st, const hw_sparse_set *set, int64_t rho_sample, uint64_t seed) {
    memset(st, 0, sizeof *st);
    st->n = set->n;
    st->dim = set->dim;
    st->nnz = set->nnz;
    st->rho_exact = 1;
    if (set->n <= 0) return HW_OK;
    if (set->n > UINT32_MAX) {
        return hw_fail("%s: %lld examples are more than the statistics count (2^32 - 1)", set->source,
                       (long long)set->n);
    }
    int64_t *degree = calloc((size_t)(set->dim > 0 ? set->dim : 1), sizeof *degree);
    if (!degree)
        return hw_fail("%s: out of memory for the statistics of %lld features", set->source, (long long)set->dim);
    for (int64_t e = 0; e < set->n; e++) {
        int64_t count = set->row_start[e + 1] - set->row_start[e];
        if (count > st->omega) {
            st->omega = count;
            st->omega_example = e;
        }
        for (int64_t k = set->row_start[e]; k < set->row_start[e + 1]; k++) degree[set->index[k]]++;
    }
    for (int64_t v = 0; v < set->dim; v++) {
        if (degree[v] == 0) st->features_unused++;
        if (degree[v] > st->feature_max) {
            st->feature_max = degree[v];
            st->delta_feature = v;
        }
    }
    st->nnz_per_example_mean = (double)set->nnz / (double)set->n;
    st->nnz_per_feature_mean = set->dim > 0 ? (double)set->nnz / (double)set->dim : 0;
    st->delta = (double)st->feature_max / (double)set->n;
    // The union bound: e conflicts with itself and at most every other example of each of its lists.
    int64_t upper = 0;
    for (int64_t e = 0; e < set->n; e++) {
        if (set->row_start[e + 1] == set->row_start[e]) continue;
        int64_t bound = 1;
        for (int64_t k = set->row_start[e]; k < set->row_start[e + 1]; k++) bound += degree[set->index[k]] - 1;
        if (bound > upper) upper = bound;
    }
    st->rho_upper = (double)(upper < set->n ? upper : set->n) / (double)set->n;
    int rc = compute_rho(st, set, degree, rho_sample, seed);
    free(degree);
    return rc;
}
