// Tests of the sparse models (include/hw/sparse_nn.h): the factorization machine's gradient and
// each loss's against central differences of the loss summed in double, at rank 0 (the linear
// models) and above; its agreement with the dense `linear` layer where every feature is present;
// the step that writes only the touched rows and leaves the gradient zero; matrix factorisation's
// prediction; and SGD on planted data learning what was planted.
#include "../src/nn/cpu_layers.h"
#include "hw/err.h"
#include "hw/rng.h"
#include "hw/sparse_data.h"
#include "hw/sparse_nn.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

TestSuite(sparse_nn, .timeout = 120);

// A random batch of `batch` examples over dim features, nnz distinct features each.
typedef struct {
    int64_t row_start[65], rows[64];
    int32_t index[64 * 16];
    float value[64 * 16], label[64];
    hw_sparse_batch x;
} small_batch;

static void batch_make(small_batch *b, int batch, int64_t dim, int nnz, hw_sparse_loss loss, uint64_t seed) {
    hw_rng rng;
    hw_rng_seed(&rng, seed, 3);
    b->row_start[0] = 0;
    for (int e = 0; e < batch; e++) {
        int64_t at = b->row_start[e];
        int64_t j = hw_rng_below(&rng, (uint32_t)(dim - nnz + 1) / 2);
        for (int k = 0; k < nnz; k++) {  // increasing, distinct
            b->index[at + k] = (int32_t)j;
            b->value[at + k] = 0.5f + hw_rng_uniform(&rng);
            j += 1 + hw_rng_below(&rng, (uint32_t)((dim - j - 1) / (nnz - k) > 1 ? (dim - j - 1) / (nnz - k) : 1));
            if (j >= dim) j = dim - 1;
        }
        b->row_start[e + 1] = at + nnz;
        b->rows[e] = batch - 1 - e;  // the batch in another order than the rows'
        b->label[batch - 1 - e] = loss == HW_LOSS_SQUARED ? 2 * hw_rng_normal(&rng) : hw_rng_below(&rng, 2) ? 1 : -1;
    }
    b->x = (hw_sparse_batch){
        .batch = batch, .rows = b->rows, .row_start = b->row_start, .index = b->index, .value = b->value};
}

// The labels in the batch's order.
static void labels_of(const small_batch *b, float *y) {
    for (int e = 0; e < b->x.batch; e++) y[e] = b->label[b->rows[e]];
}

static double loss_at(hw_sparse_loss loss, const float *w, const small_batch *b, const hw_fm_dims *d, float *z,
                      float *s) {
    float y[64];
    labels_of(b, y);
    hw_fm_forward(z, s, w, &b->x, d);
    return hw_sparse_loss_forward(loss, z, y, b->x.batch);
}

static int hinge_active(const float *z, const small_batch *b, int e) { return b->label[b->rows[e]] * z[e] < 1.0f; }

// Every weight's analytic gradient against (L(w + h) - L(w - h)) / 2h; the untouched features'
// gradients zero and unlisted. The hinge's weights whose step moves an example across its kink
// are skipped (the derivative does not exist there).
static void gradient_check(hw_sparse_loss loss, int rank, uint64_t seed) {
    hw_fm_dims d = {.dim = 40, .rank = rank};
    size_t n = hw_fm_n_weights(&d);
    float *w = malloc(n * sizeof *w), z[64], zu[64], zd[64], s[64 * 8], dz[64], y[64];
    hw_fm_init(w, &d, 0.3f, seed);
    hw_rng rng;
    hw_rng_seed(&rng, seed, 9);
    for (int64_t j = 0; j < d.dim; j++) w[j * (1 + rank)] = 0.3f * hw_rng_normal(&rng);
    w[n - 1] = 0.1f;
    small_batch b;
    batch_make(&b, 12, d.dim, 5, loss, seed);
    hw_sparse_grad g;
    cr_assert_eq(hw_sparse_grad_alloc(&g, &d), HW_OK);
    loss_at(loss, w, &b, &d, z, s);
    labels_of(&b, y);
    hw_sparse_loss_backward(loss, dz, z, y, b.x.batch);
    hw_fm_backward(&g, dz, s, w, &b.x);
    double worst = 0, scale = 1e-6;
    int checked = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t j = (int64_t)(i / (size_t)(1 + rank));
        double analytic = i == n - 1 ? g.dbias : g.rows[i];
        if (i < n - 1 && !g.mark[j]) {
            cr_assert_eq(analytic, 0.0, "feature %lld is untouched: no gradient", (long long)j);
            continue;
        }
        float keep = w[i], h = 1e-2f;
        w[i] = keep + h;
        double up = loss_at(loss, w, &b, &d, zu, s);
        w[i] = keep - h;
        double down = loss_at(loss, w, &b, &d, zd, s);
        w[i] = keep;
        int kink = 0;
        for (int e = 0; loss == HW_LOSS_HINGE && e < b.x.batch; e++) {
            kink |=
                hinge_active(zu, &b, e) != hinge_active(z, &b, e) || hinge_active(zd, &b, e) != hinge_active(z, &b, e);
        }
        if (kink) continue;
        double numeric = (up - down) / ((double)(keep + h) - (double)(keep - h));
        worst = fmax(worst, fabs(numeric - analytic));
        scale = fmax(scale, fabs(analytic));
        checked++;
    }
    cr_expect_gt(checked, 20, "loss %d rank %d: %d weights checked", (int)loss, rank, checked);
    cr_expect_lt(worst / scale, 2e-3, "loss %d rank %d: max error %g against gradients up to %g", (int)loss, rank,
                 worst, scale);
    int64_t listed = 0;
    for (int64_t j = 0; j < d.dim; j++) listed += g.mark[j];
    cr_expect_eq(listed, g.n_touched, "each touched feature listed once");
    hw_sparse_grad_free(&g);
    free(w);
}

Test(sparse_nn, gradients_of_each_loss_and_rank) {
    hw_sparse_loss losses[] = {HW_LOSS_LOGISTIC, HW_LOSS_HINGE, HW_LOSS_SQUARED};
    for (int l = 0; l < 3; l++) {
        for (int rank = 0; rank <= 4; rank += 2) gradient_check(losses[l], rank, 10 + (uint64_t)(l * 5 + rank));
    }
}

// The losses' values at known points.
Test(sparse_nn, loss_values) {
    float z[3] = {0.0f, 2.0f, -0.5f}, y[3] = {1.0f, -1.0f, -1.0f};
    cr_expect_float_eq(hw_sparse_loss_forward(HW_LOSS_LOGISTIC, z, y, 3),
                       (log(2.0) + log1p(exp(2.0)) + log1p(exp(-0.5))) / 3, 1e-12);
    cr_expect_float_eq(hw_sparse_loss_forward(HW_LOSS_HINGE, z, y, 3), (1.0 + 3.0 + 0.5) / 3, 1e-12);
    cr_expect_float_eq(hw_sparse_loss_forward(HW_LOSS_SQUARED, z, y, 3), (1.0 + 9.0 + 0.25) / 3, 1e-12);
    cr_expect_eq(hw_sparse_loss_correct(HW_LOSS_LOGISTIC, z, y, 3), 2, "z = 0 is +1; 2 is not -1; -0.5 is");
    float big[1] = {-200.0f}, one[1] = {1.0f};
    cr_expect_float_eq(hw_sparse_loss_forward(HW_LOSS_LOGISTIC, big, one, 1), 200.0, 1e-9, "no overflow");
}

// Where every example holds every feature, the rank-0 model is the dense linear layer with one
// output: the same predictions, gradients and step, to float rounding.
Test(sparse_nn, rank_zero_agrees_with_the_dense_linear_layer) {
    enum { DIM = 16, BATCH = 8 };
    hw_fm_dims d = {.dim = DIM, .rank = 0};
    float w[DIM + 1], dense_x[BATCH * DIM], z[BATCH], zd[BATCH], s[1], dz[BATCH], y[BATCH];
    int64_t row_start[BATCH + 1], rows[BATCH];
    int32_t index[BATCH * DIM];
    hw_rng rng;
    hw_rng_seed(&rng, 4, 0);
    for (int j = 0; j <= DIM; j++) w[j] = hw_rng_normal(&rng);
    for (int e = 0; e < BATCH; e++) {
        row_start[e] = e * DIM;
        rows[e] = e;
        y[e] = e % 2 ? 1.0f : -1.0f;
        for (int j = 0; j < DIM; j++) {
            index[e * DIM + j] = j;
            dense_x[e * DIM + j] = hw_rng_normal(&rng);
        }
    }
    row_start[BATCH] = BATCH * DIM;
    hw_sparse_batch x = {.batch = BATCH, .rows = rows, .row_start = row_start, .index = index, .value = dense_x};
    hw_fm_forward(z, s, w, &x, &d);
    hw_linear_dims ld = {.in = DIM, .out = 1};
    linear_forward(zd, dense_x, w, &w[DIM], &ld, BATCH);
    for (int e = 0; e < BATCH; e++) cr_expect(fabsf(z[e] - zd[e]) <= 1e-5f * (1 + fabsf(zd[e])), "%g %g", z[e], zd[e]);
    hw_sparse_loss_backward(HW_LOSS_LOGISTIC, dz, z, y, BATCH);
    hw_sparse_grad g;
    cr_assert_eq(hw_sparse_grad_alloc(&g, &d), HW_OK);
    hw_fm_backward(&g, dz, s, w, &x);
    float dw[DIM], db[1];
    linear_backward(NULL, dw, db, dz, dense_x, w, &ld, BATCH);
    for (int j = 0; j < DIM; j++) cr_expect(fabsf(g.rows[j] - dw[j]) <= 1e-6f + 1e-5f * fabsf(dw[j]));
    cr_expect(fabs(g.dbias - db[0]) <= 1e-6 + 1e-5 * fabs(db[0]));
    hw_sgd opt;
    cr_assert_eq(hw_sgd_init(&opt, DIM + 1, 0.5f, 0.0f, 0.0f, 0), HW_OK);
    float want[DIM + 1];
    for (int j = 0; j < DIM; j++) want[j] = w[j] - 0.5f * dw[j];
    want[DIM] = w[DIM] - 0.5f * db[0];
    hw_sparse_grad_step(&g, &opt, w, NULL, NULL);
    for (int j = 0; j <= DIM; j++) cr_expect(fabsf(w[j] - want[j]) <= 1e-6f * (1 + fabsf(want[j])));
    hw_sparse_grad_free(&g);
}

// The step writes the touched rows and the bias and nothing else, copies them, sums the applied
// increments exactly, and leaves the gradient zero for the next batch.
Test(sparse_nn, the_step_writes_only_the_touched_rows) {
    hw_fm_dims d = {.dim = 200, .rank = 3};
    size_t n = hw_fm_n_weights(&d);
    float *w = malloc(n * sizeof *w), *before = malloc(n * sizeof *w), *copy = calloc(n, sizeof *w);
    double *applied = calloc(n, sizeof *applied);
    hw_fm_init(w, &d, 0.5f, 2);
    memcpy(before, w, n * sizeof *w);
    small_batch b;
    batch_make(&b, 4, d.dim, 3, HW_LOSS_SQUARED, 8);
    float z[4], s[12], dz[4], y[4];
    hw_fm_forward(z, s, w, &b.x, &d);
    labels_of(&b, y);
    hw_sparse_loss_backward(HW_LOSS_SQUARED, dz, z, y, 4);
    hw_sparse_grad g;
    cr_assert_eq(hw_sparse_grad_alloc(&g, &d), HW_OK);
    hw_fm_backward(&g, dz, s, w, &b.x);
    uint8_t touched[200];
    memcpy(touched, g.mark, sizeof touched);
    hw_sgd opt;
    cr_assert_eq(hw_sgd_init(&opt, n, 0.1f, 0.9f, 0.01f, 0), HW_OK);
    hw_sparse_grad_step(&g, &opt, w, copy, applied);
    int changed = 0;
    for (size_t i = 0; i < n - 1; i++) {
        int64_t j = (int64_t)(i / 4);
        if (!touched[j]) {
            cr_assert_eq(memcmp(&w[i], &before[i], sizeof *w), 0, "untouched weight %zu written", i);
            cr_assert_eq(copy[i], 0.0f, "and not copied");
        } else {
            changed += w[i] != before[i];
            cr_assert_eq(copy[i], w[i]);
            cr_assert_eq(applied[i], (double)w[i] - (double)before[i]);
        }
        cr_assert_eq(g.rows[i], 0.0f, "the gradient is zero again");
    }
    cr_expect_gt(changed, 0);
    cr_expect_eq(g.n_touched, 0);
    cr_expect_eq(g.dbias, 0.0);
    for (int64_t j = 0; j < d.dim; j++) cr_assert_eq(g.mark[j], 0);
    hw_sgd_free(&opt);
    hw_sparse_grad_free(&g);
    free(w), free(before), free(copy), free(applied);
}

// On ratings' two features (user u, item n_users + i, value 1) the model is matrix factorisation
// with biases: w0 + b_u + b_i + <p_u, q_i>.
Test(sparse_nn, on_ratings_it_is_matrix_factorisation) {
    hw_fm_dims d = {.dim = 5 + 7, .rank = 4};
    float w[12 * 5 + 1];
    hw_fm_init(w, &d, 1.0f, 3);
    for (int j = 0; j < 12; j++) w[j * 5] = 0.1f * (float)j;
    w[60] = 3.5f;
    int64_t row_start[2] = {0, 2}, rows[1] = {0};
    int32_t index[2] = {2, 5 + 6};
    float value[2] = {1, 1}, z, s[4];
    hw_sparse_batch x = {.batch = 1, .rows = rows, .row_start = row_start, .index = index, .value = value};
    hw_fm_forward(&z, s, w, &x, &d);
    double want = 3.5 + w[2 * 5] + w[11 * 5];
    for (int f = 0; f < 4; f++) want += (double)w[2 * 5 + 1 + f] * w[11 * 5 + 1 + f];
    cr_expect(fabs(z - want) < 1e-5, "%g against %g", z, want);
}

// SGD over a planted problem, one example at a time in a fixed order, twice: bit for bit the same
// weights, which point along the planted ones and classify the test set as well as they do.
static void train_logistic(float *w, const hw_sparse_set *train, const hw_fm_dims *d, int epochs) {
    hw_sparse_grad g;
    cr_assert_eq(hw_sparse_grad_alloc(&g, d), HW_OK);
    hw_sgd opt;
    cr_assert_eq(hw_sgd_init(&opt, hw_fm_n_weights(d), 0.5f, 0.0f, 0.0f, 0), HW_OK);
    memset(w, 0, hw_fm_n_weights(d) * sizeof *w);
    for (int epoch = 0; epoch < epochs; epoch++) {
        for (int64_t e = 0; e + 10 <= train->n; e += 10) {
            int64_t rows[10];
            for (int k = 0; k < 10; k++) rows[k] = e + k;
            hw_sparse_batch x = {10, rows, train->row_start, train->index, train->value};
            float z[10], y[10], dz[10], s[1];
            for (int k = 0; k < 10; k++) y[k] = train->label[e + k];
            hw_fm_forward(z, s, w, &x, d);
            hw_sparse_loss_backward(HW_LOSS_LOGISTIC, dz, z, y, 10);
            hw_fm_backward(&g, dz, s, w, &x);
            hw_sparse_grad_step(&g, &opt, w, NULL, NULL);
        }
    }
    hw_sparse_grad_free(&g);
}

static double accuracy(const float *w, const hw_sparse_set *set, const hw_fm_dims *d) {
    int64_t correct = 0;
    for (int64_t e = 0; e < set->n; e++) {
        hw_sparse_batch x = {1, &e, set->row_start, set->index, set->value};
        float z, s[1];
        hw_fm_forward(&z, s, w, &x, d);
        correct += hw_sparse_loss_correct(HW_LOSS_LOGISTIC, &z, &set->label[e], 1);
    }
    return (double)correct / (double)set->n;
}

Test(sparse_nn, sgd_learns_the_planted_weights_bit_reproducibly) {
    hw_sparse_synth_params p;
    hw_sparse_synth_defaults(&p);
    p.n_train = 8000, p.n_test = 2000, p.dim = 200, p.nnz = 10, p.noise = 0.0;
    hw_sparse_set train, test;
    float *planted = malloc(200 * sizeof *planted);
    cr_assert_eq(hw_sparse_synth_generate(&p, &train, &test, planted), HW_OK, "%s", hw_error());
    hw_fm_dims d = {.dim = 200, .rank = 0};
    float *w = malloc(hw_fm_n_weights(&d) * sizeof *w), *w2 = malloc(hw_fm_n_weights(&d) * sizeof *w);
    train_logistic(w, &train, &d, 10);
    train_logistic(w2, &train, &d, 10);
    cr_expect_eq(memcmp(w, w2, hw_fm_n_weights(&d) * sizeof *w), 0, "the same run twice, bit for bit");
    double dot = 0, nw = 0, np = 0;
    for (int j = 0; j < 200; j++)
        dot += (double)w[j] * planted[j], nw += (double)w[j] * w[j], np += (double)planted[j] * planted[j];
    double cosine = dot / sqrt(nw * np), acc = accuracy(w, &test, &d);
    cr_expect_gt(cosine, 0.95, "the learned weights point along the planted ones: cosine %.3f", cosine);
    cr_expect_gt(acc, 0.93, "test accuracy %.3f on noiseless planted labels", acc);
    hw_sparse_set_free(&train);
    hw_sparse_set_free(&test);
    free(w), free(w2), free(planted);
}
