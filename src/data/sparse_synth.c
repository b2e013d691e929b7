// sparse_synth: synthetic sparse data with a known truth (include/hw/sparse_data.h): classification
// with Zipf-distributed feature frequencies and a planted weight vector, and low-rank ratings.
//
// The RCV1-shaped preset's Zipf exponent was chosen by measuring the exact rho of its training set
// (hw_sparse_stats_compute) over exponents: s = 0.30 gave rho 0.205 (Delta 0.030), 0.45 gave 0.440
// (0.107), 0.55 gave 0.719 (0.238), 0.73 gave 0.997 (0.700).
#include "sparse_io.h"

#include "hw/data.h"
#include "hw/err.h"
#include "hw/rng.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Streams of the generator: the permutation and the planted weights; then one stream per example
// (train from TRAIN_STREAM, test from TEST_STREAM), or per user and the factors for ratings.
#define PLANT_STREAM  1ull
#define FACTOR_STREAM 2ull
#define TRAIN_STREAM  (1ull << 32)
#define TEST_STREAM   (1ull << 40)
#define RCV1_ZIPF     0.45

void hw_sparse_synth_defaults(hw_sparse_synth_params *p) {
    *p = (hw_sparse_synth_params){
        .n_train = 20000, .n_test = 5000, .dim = 1000, .nnz = 20, .zipf = 0.5, .noise = 0.01, .seed = 1};
}

void hw_sparse_synth_rcv1(hw_sparse_synth_params *p) {
    *p = (hw_sparse_synth_params){
        .n_train = 20242, .n_test = 10000, .dim = 47236, .nnz = 76, .zipf = RCV1_ZIPF, .noise = 0.03, .seed = 1};
}

static int check_params(const hw_sparse_synth_params *p) {
    if (p->n_train < 1 || p->n_test < 1) {
        return hw_fail("synthetic sparse data: the training and test sets need at least one example each, got %lld "
                       "and %lld",
                       (long long)p->n_train, (long long)p->n_test);
    }
    if (p->dim < 1 || p->dim > INT32_MAX) {
        return hw_fail("synthetic sparse data: the dimension must be 1 to %d, got %lld", INT32_MAX, (long long)p->dim);
    }
    if (p->nnz < 1 || p->nnz > p->dim) {
        return hw_fail("synthetic sparse data: the nonzeros per example must be 1 to the dimension %lld, got %d",
                       (long long)p->dim, p->nnz);
    }
    if (!(p->zipf >= 0 && p->zipf <= 100)) {
        return hw_fail("synthetic sparse data: the Zipf exponent must be 0 to 100, got %g", p->zipf);
    }
    if (!(p->noise >= 0 && p->noise <= 0.5)) {
        return hw_fail("synthetic sparse data: the label noise must be a probability of 0 to 0.5, got %g", p->noise);
    }
    if ((double)(p->n_train > p->n_test ? p->n_train : p->n_test) * p->nnz > 4e9) {
        return hw_fail("synthetic sparse data: %lld examples of %d nonzeros are more than this generator makes "
                       "(4e9 nonzeros per set)",
                       (long long)(p->n_train > p->n_test ? p->n_train : p->n_test), p->nnz);
    }
    return HW_OK;
}

// ---- the Zipf law: Walker's alias table ----
typedef struct {
    int64_t dim;
    double *accept;  // a column k draws k when the uniform is below accept[k], else alias[k]
    int32_t *alias;
    double *p;       // p_k, the probability of rank k
    float *weight;   // log(1 + 1 / p_k), the idf-like weight of rank k
    int32_t *id_of;  // the feature id of rank k
} zipf_law;

static void zipf_free(zipf_law *z) {
    free(z->accept);
    free(z->alias);
    free(z->p);
    free(z->weight);
    free(z->id_of);
}

// Vose's construction, in O(dim); the ranks' ids are a permutation drawn from rng.
static int zipf_open(zipf_law *z, int64_t dim, double s, hw_rng *rng) {
    memset(z, 0, sizeof *z);
    z->dim = dim;
    z->accept = malloc((size_t)dim * sizeof *z->accept);
    z->alias = malloc((size_t)dim * sizeof *z->alias);
    z->p = malloc((size_t)dim * sizeof *z->p);
    z->weight = malloc((size_t)dim * sizeof *z->weight);
    z->id_of = malloc((size_t)dim * sizeof *z->id_of);
    int32_t *small = malloc((size_t)dim * sizeof *small), *large = malloc((size_t)dim * sizeof *large);
    if (!z->accept || !z->alias || !z->p || !z->weight || !z->id_of || !small || !large) {
        free(small);
        free(large);
        return hw_fail("synthetic sparse data: out of memory for %lld features", (long long)dim);
    }
    double total = 0;
    for (int64_t k = 0; k < dim; k++) total += pow((double)(k + 1), -s);
    int64_t n_small = 0, n_large = 0;
    for (int64_t k = 0; k < dim; k++) {
        double p = z->p[k] = pow((double)(k + 1), -s) / total;
        z->weight[k] = (float)log(1 + 1 / p);
        z->accept[k] = p * (double)dim;
        z->alias[k] = (int32_t)k;
        if (z->accept[k] < 1) small[n_small++] = (int32_t)k;
        else large[n_large++] = (int32_t)k;
    }
    while (n_small > 0 && n_large > 0) {
        int32_t lo = small[--n_small], hi = large[n_large - 1];
        z->alias[lo] = hi;
        z->accept[hi] -= 1 - z->accept[lo];
        if (z->accept[hi] < 1) {
            n_large--;
            small[n_small++] = hi;
        }
    }
    while (n_large > 0) z->accept[large[--n_large]] = 1;  // rounding left them a hair off 1
    while (n_small > 0) z->accept[small[--n_small]] = 1;
    free(small);
    free(large);
    for (int64_t k = 0; k < dim; k++) z->id_of[k] = (int32_t)k;
    for (int64_t k = dim - 1; k > 0; k--) {
        int64_t j = (int64_t)hw_rng_below(rng, (uint32_t)(k + 1));
        int32_t t = z->id_of[k];
        z->id_of[k] = z->id_of[j];
        z->id_of[j] = t;
    }
    return HW_OK;
}

static int64_t zipf_draw(const zipf_law *z, hw_rng *rng) {
    int64_t k = (int64_t)hw_rng_below(rng, (uint32_t)z->dim);
    double u = hw_rng_u32(rng) * (1.0 / 4294967296.0);
    return u < z->accept[k] ? k : z->alias[k];
}

// What drawing the features of an example needs besides the law: the ranks drawn so far by the
// rejection path (seen[k] == stamp), the Fenwick tree of the remaining weights for the other.
typedef struct {
    int64_t *seen;  // dim
    int64_t stamp;
    double *tree;  // dim + 1
    int64_t top;   // the largest power of two <= dim
    int use_tree;  // the Fenwick tree costs less than drawing again (choose_path)
} draw_scratch;

// Whether the Fenwick tree costs less than drawing repeats again, for every example of a set: the
// rejection path's expected draws are at most sum_j 1 / (1 - m_j), m_j the mass of the j most
// likely ranks (ranks are in decreasing probability), against dim + 2 nnz log2(dim) for the tree.
static int choose_path(const zipf_law *z, int nnz) {
    double mass = 0, draws = 0, tree = (double)z->dim + 2.0 * nnz * log2((double)z->dim + 1);
    for (int j = 0; j < nnz && draws <= tree; j++) {
        draws += mass < 1 - 1e-12 ? 1 / (1 - mass) : INFINITY;
        mass += z->p[j];
    }
    return draws > tree;
}

// A uniform double in [0, 1) with 53 bits.
static double uniform53(hw_rng *rng) {
    uint64_t bits = ((uint64_t)hw_rng_u32(rng) << 21) ^ (hw_rng_u32(rng) >> 11);
    return (double)bits * (1.0 / 9007199254740992.0);
}

// nnz distinct ranks into ranks[], drawn one after another from the law restricted to the ranks
// not drawn yet (successive sampling without replacement). Either draws from the whole law, a
// repeat drawn again, or a Fenwick tree of the remaining weights, built per example in O(dim),
// each draw a descent of it in O(log dim): the same law, at the cost choose_path says is lower.
static void draw_ranks(const zipf_law *z, int nnz, hw_rng *rng, draw_scratch *d, int64_t *ranks) {
    int64_t dim = z->dim;
    if (nnz == dim) {
        for (int j = 0; j < nnz; j++) ranks[j] = j;
        return;
    }
    if (!d->use_tree) {
        d->stamp++;
        for (int j = 0; j < nnz; j++) {
            int64_t k;
            do {
                k = zipf_draw(z, rng);
            } while (d->seen[k] == d->stamp);
            d->seen[k] = d->stamp;
            ranks[j] = k;
        }
        return;
    }
    double *t = d->tree;
    for (int64_t i = 1; i <= dim; i++) t[i] = z->p[i - 1];
    for (int64_t i = 1; i <= dim; i++) {
        int64_t up = i + (i & -i);
        if (up <= dim) t[up] += t[i];
    }
    double remaining = 0;
    for (int64_t i = dim; i > 0; i -= i & -i) remaining += t[i];
    for (int j = 0; j < nnz; j++) {
        int64_t k;
        do {
            double u = uniform53(rng) * remaining;
            int64_t pos = 0;
            for (int64_t step = d->top; step > 0; step >>= 1) {
                if (pos + step <= dim && t[pos + step] <= u) {
                    pos += step;
                    u -= t[pos];
                }
            }
            k = pos;  // rank pos (0-based): the first whose prefix sum exceeds the uniform
            // Rounding can land past the end or on a rank already drawn (weight 0 now): again.
        } while (k >= dim || d->seen[k] == -1);
        d->seen[k] = -1;
        ranks[j] = k;
        remaining -= z->p[k];
        for (int64_t i = k + 1; i <= dim; i += i & -i) t[i] -= z->p[k];
    }
    for (int j = 0; j < nnz; j++) d->seen[ranks[j]] = 0;
}

typedef struct {
    int32_t id;
    float value;
} nonzero;

static int by_id(const void *a, const void *b) {
    int32_t x = ((const nonzero *)a)->id, y = ((const nonzero *)b)->id;
    return (x > y) - (x < y);
}

// An example into b: its nonzeros and label. `ranks` and `row` hold nnz each.
static void draw_example(sparse_build *b, const zipf_law *z, const float *planted, const hw_sparse_synth_params *p,
                         hw_rng *rng, nonzero *row, int64_t *ranks, draw_scratch *d) {
    draw_ranks(z, p->nnz, rng, d, ranks);
    for (int j = 0; j < p->nnz; j++) {
        float t = 0.5f + hw_rng_uniform(rng);
        row[j] = (nonzero){.id = z->id_of[ranks[j]], .value = t * z->weight[ranks[j]]};
    }
    qsort(row, (size_t)p->nnz, sizeof *row, by_id);
    double norm = 0, margin = 0;
    for (int j = 0; j < p->nnz; j++) norm += (double)row[j].value * row[j].value;
    float scale = (float)(1 / sqrt(norm));
    for (int j = 0; j < p->nnz; j++) {
        row[j].value *= scale;
        margin += (double)planted[row[j].id] * row[j].value;
        sparse_build_push(b, row[j].id, row[j].value);
    }
    float label = margin >= 0 ? 1.0f : -1.0f;
    if (hw_rng_uniform(rng) < p->noise) label = -label;
    sparse_build_end_row(b, label, "synthetic sparse data");  // rows reserved: cannot fail
}

static int generate_set(hw_sparse_set *out, int64_t n, uint64_t stream_base, const zipf_law *z, const float *planted,
                        const hw_sparse_synth_params *p, draw_scratch *d) {
    sparse_build b;
    sparse_build_init(&b);
    nonzero *row = malloc((size_t)p->nnz * sizeof *row);
    int64_t *ranks = malloc((size_t)p->nnz * sizeof *ranks);
    // Exact sizes up front: n rows of nnz each, so that nothing grows while generating.
    b.set.row_start = malloc((size_t)(n + 1) * sizeof *b.set.row_start);
    b.set.label = malloc((size_t)n * sizeof *b.set.label);
    if (!row || !ranks || !b.set.row_start || !b.set.label ||
        sparse_build_reserve_nnz(&b, n * p->nnz, "synthetic sparse data")) {
        free(row);
        free(ranks);
        sparse_build_free(&b);
        return hw_fail("synthetic sparse data: out of memory for %lld examples", (long long)n);
    }
    b.row_cap = n + 1;
    b.set.row_start[0] = 0;
    for (int64_t e = 0; e < n; e++) {
        hw_rng rng;
        hw_rng_seed(&rng, p->seed, stream_base + (uint64_t)e);
        draw_example(&b, z, planted, p, &rng, row, ranks, d);
    }
    free(row);
    free(ranks);
    if (sparse_build_finish(&b, out, "synthetic sparse data") != HW_OK) {
        sparse_build_free(&b);
        return HW_ERR;
    }
    out->dim = p->dim;
    out->label_kind = HW_LABEL_BINARY;
    out->n_classes = 2;
    snprintf(out->source, sizeof out->source, "synthetic sparse data (seed %llu)", (unsigned long long)p->seed);
    return HW_OK;
}

int hw_sparse_synth_generate(const hw_sparse_synth_params *p, hw_sparse_set *train, hw_sparse_set *test,
                             float *planted) {
    memset(train, 0, sizeof *train);
    memset(test, 0, sizeof *test);
    if (check_params(p) != HW_OK) return HW_ERR;
    hw_rng rng;
    hw_rng_seed(&rng, p->seed, PLANT_STREAM);
    zipf_law z = {0};
    float *w = malloc((size_t)p->dim * sizeof *w);
    draw_scratch d = {.seen = calloc((size_t)p->dim, sizeof *d.seen),
                      .tree = malloc((size_t)(p->dim + 1) * sizeof *d.tree)};
    for (d.top = 1; d.top * 2 <= p->dim; d.top *= 2) continue;
    int rc = HW_ERR;
    if (!w || !d.seen || !d.tree) {
        hw_fail("synthetic sparse data: out of memory for %lld features", (long long)p->dim);
    } else if (zipf_open(&z, p->dim, p->zipf, &rng) == HW_OK) {
        for (int64_t v = 0; v < p->dim; v++) w[v] = hw_rng_normal(&rng);
        d.use_tree = choose_path(&z, p->nnz);
        rc = generate_set(train, p->n_train, TRAIN_STREAM, &z, w, p, &d);
        if (rc == HW_OK) rc = generate_set(test, p->n_test, TEST_STREAM, &z, w, p, &d);
        if (rc != HW_OK) hw_sparse_set_free(train);
        if (rc == HW_OK && planted) memcpy(planted, w, (size_t)p->dim * sizeof *w);
    }
    zipf_free(&z);
    free(w);
    free(d.seen);
    free(d.tree);
    return rc;
}

// ---- files ----

static int write_planted(const char *path, const float *w, int64_t dim) {
    FILE *f = fopen(path, "wb");
    if (!f) return hw_fail_errno(errno, "cannot create %s", path);
    int ok = fprintf(f, "# planted weights w*: one per feature, feature 1 first (%lld features)\n", (long long)dim) > 0;
    for (int64_t v = 0; ok && v < dim; v++) ok = fprintf(f, "%.9g\n", (double)w[v]) > 0;
    int saved_errno = errno;
    if (fclose(f) != 0) ok = 0;
    if (!ok) return hw_fail_errno(saved_errno ? saved_errno : EIO, "cannot write %s", path);
    return HW_OK;
}

int hw_sparse_synth_write(const char *dir, const hw_sparse_synth_params *p) {
    hw_sparse_set train, test;
    float *planted = malloc((size_t)(p->dim > 0 ? p->dim : 1) * sizeof *planted);
    if (!planted) return hw_fail("synthetic sparse data: out of memory for %lld features", (long long)p->dim);
    if (hw_sparse_synth_generate(p, &train, &test, planted) != HW_OK) {
        free(planted);
        return HW_ERR;
    }
    file_set files = {0};
    static const char *const names[3] = {"train.libsvm", "test.libsvm", "planted.txt"};
    int rc = hw_mkdir_p(dir);
    for (int i = 0; rc == HW_OK && i < 3; i++) {
        char path[4096];
        int slot;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        rc = file_set_add(&files, path, &slot);
        if (rc == HW_OK) rc = file_set_begin(&files, slot);
        if (rc != HW_OK) break;
        rc = i == 2 ? write_planted(files.temp[slot], planted, p->dim)
                    : libsvm_write(i == 0 ? &train : &test, files.temp[slot], 0);
        file_set_end(&files, slot);
    }
    rc = file_set_commit(&files, rc);
    hw_sparse_set_free(&train);
    hw_sparse_set_free(&test);
    free(planted);
    return rc;
}

int hw_sparse_planted_load(const char *path, float **w, int64_t *dim) {
    *w = NULL;
    *dim = 0;
    text_stream *in;
    if (text_stream_open(&in, path, "planted weights file") != HW_OK) return HW_ERR;
    int64_t n = 0, cap = 0, line_no;
    float *values = NULL;
    const char *line;
    size_t len;
    int got;
    while ((got = text_stream_line(in, &line, &len, &line_no)) == 1) {
        if (len == 0 || line[0] == '#') continue;
        float v;
        const char *end = text_parse_float(line, line + len, &v);
        if (!end || end != line + len || !isfinite(v)) {
            got = hw_fail("%s:%lld:1: expected one finite weight per line", path, (long long)line_no);
            break;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 1024;
            float *bigger = realloc(values, (size_t)cap * sizeof *values);
            if (!bigger) {
                got = hw_fail("%s: out of memory for %lld weights", path, (long long)cap);
                break;
            }
            values = bigger;
        }
        values[n++] = v;
    }
    text_stream_close(in);
    if (got == 0 && n == 0) got = hw_fail("%s: no weights", path);
    if (got != 0) {
        free(values);
        return HW_ERR;
    }
    *w = values;
    *dim = n;
    return HW_OK;
}

// ---- low-rank ratings ----

void hw_ratings_synth_defaults(hw_ratings_synth_params *p) {
    *p = (hw_ratings_synth_params){
        .users = 2000, .items = 1000, .rank = 10, .density = 0.05, .sigma = 0.1, .test_share = 0.1, .seed = 1};
}

void hw_ratings_synth_netflix(hw_ratings_synth_params *p) {
    *p = (hw_ratings_synth_params){
        .users = 48019, .items = 1777, .rank = 10, .density = 0.0118, .sigma = 0.5, .test_share = 0.1, .seed = 1};
}

static int check_ratings_params(const hw_ratings_synth_params *p) {
    if (p->users < 1 || p->items < 1 || p->users > UINT32_MAX || p->items > UINT32_MAX) {
        return hw_fail("synthetic ratings: users and items must be 1 to 2^32 - 1, got %lld and %lld",
                       (long long)p->users, (long long)p->items);
    }
    if (p->rank < 1 || p->rank > 1000) return hw_fail("synthetic ratings: the rank must be 1 to 1000, got %d", p->rank);
    if (!(p->density > 0 && p->density <= 1)) {
        return hw_fail("synthetic ratings: the share of entries observed must be in (0, 1], got %g", p->density);
    }
    if (!(p->sigma >= 0 && isfinite(p->sigma))) {
        return hw_fail("synthetic ratings: the noise's standard deviation must be >= 0, got %g", p->sigma);
    }
    if (!(p->test_share > 0 && p->test_share < 1)) {
        return hw_fail("synthetic ratings: the test share must be in (0, 1), got %g", p->test_share);
    }
    if ((double)(p->users + p->items) * p->rank > 1e9) {
        return hw_fail("synthetic ratings: %lld users and %lld items of rank %d are more factors than this generator "
                       "holds (1e9)",
                       (long long)p->users, (long long)p->items, p->rank);
    }
    return HW_OK;
}

// User u's ratings: every item observed with probability `density` (geometric gaps between
// observed items, so the cost is the ratings made, not users x items), each written to the
// training or the test file.
static int write_user_ratings(FILE *train, FILE *test, const hw_ratings_synth_params *p, const float *users,
                              const float *items, int64_t u) {
    hw_rng rng;
    hw_rng_seed(&rng, p->seed, TRAIN_STREAM + (uint64_t)u);
    double log_miss = p->density < 1 ? log(1 - p->density) : 0;
    int ok = 1;
    for (int64_t i = -1; ok;) {
        if (p->density < 1) {
            double uniform = (hw_rng_u32(&rng) + 1.0) * (1.0 / 4294967296.0);  // (0, 1]
            double gap = floor(log(uniform) / log_miss);
            i += gap < (double)p->items ? (int64_t)gap + 1 : p->items + 1;
        } else {
            i++;
        }
        if (i >= p->items) break;
        double dot = 0;
        for (int k = 0; k < p->rank; k++) dot += (double)users[u * p->rank + k] * items[i * p->rank + k];
        double rating = dot + p->sigma * hw_rng_normal(&rng);
        FILE *to = hw_rng_uniform(&rng) < p->test_share ? test : train;
        ok = fprintf(to, "%lld\t%lld\t%.6g\n", (long long)u + 1, (long long)i + 1, rating) > 0;
    }
    return ok;
}

int hw_ratings_synth_write(const char *dir, const hw_ratings_synth_params *p) {
    if (check_ratings_params(p) != HW_OK) return HW_ERR;
    float *users = malloc((size_t)p->users * (size_t)p->rank * sizeof *users);
    float *items = malloc((size_t)p->items * (size_t)p->rank * sizeof *items);
    if (!users || !items) {
        free(users);
        free(items);
        return hw_fail("synthetic ratings: out of memory for the factors");
    }
    hw_rng rng;
    hw_rng_seed(&rng, p->seed, FACTOR_STREAM);
    float scale = (float)pow(p->rank, -0.25);
    for (int64_t k = 0; k < p->users * p->rank; k++) users[k] = scale * hw_rng_normal(&rng);
    for (int64_t k = 0; k < p->items * p->rank; k++) items[k] = scale * hw_rng_normal(&rng);

    file_set files = {0};
    char train_path[4096], test_path[4096];
    snprintf(train_path, sizeof train_path, "%s/train.tsv", dir);
    snprintf(test_path, sizeof test_path, "%s/test.tsv", dir);
    int a, b, rc = hw_mkdir_p(dir);
    if (rc == HW_OK) rc = file_set_add(&files, train_path, &a);
    if (rc == HW_OK) rc = file_set_add(&files, test_path, &b);
    // Both files are open at once: the train file is noted (a signal removes it), the test file,
    // of the same writer, is swept by the next writer if this one is killed.
    FILE *train = NULL, *test = NULL;
    if (rc == HW_OK) rc = file_set_begin(&files, a);
    if (rc == HW_OK && !(train = fopen(files.temp[a], "wb")))
        rc = hw_fail_errno(errno, "cannot create %s", files.temp[a]);
    if (rc == HW_OK && !(test = fopen(files.temp[b], "wb")))
        rc = hw_fail_errno(errno, "cannot create %s", files.temp[b]);
    int ok = rc == HW_OK;
    for (int64_t u = 0; ok && u < p->users; u++) ok = write_user_ratings(train, test, p, users, items, u);
    int saved_errno = errno;
    if (train && fclose(train) != 0) ok = 0;
    if (test && fclose(test) != 0) ok = 0;
    if (rc == HW_OK && !ok) rc = hw_fail_errno(saved_errno ? saved_errno : EIO, "cannot write %s", dir);
    file_set_end(&files, a);
    rc = file_set_commit(&files, rc);
    free(users);
    free(items);
    return rc;
}
