// sparse_nn: the models of sparse data on the CPU (src/nn/fm.c, sparse_loss.c, sparse_grad.c): a
// factorization machine over sparse features (Rendle 2010), which is a linear model at rank 0 (a
// logistic regression or a linear SVM by its loss) and matrix factorisation with user and item
// biases on ratings (whose examples are the two features user and n_users + item, hw/sparse_data.h);
// the losses of those models; and a gradient that holds only the features a batch touched, with
// the SGD step that writes only them.
//
// The parameters are one flat buffer, per feature a row of 1 + rank floats (its weight w_j, then
// its factors v_j), the global bias w0 last: a step writes the rows of the batch's features and w0,
// each row one or two cache lines, never a pass over the whole buffer.
#ifndef HW_SPARSE_NN_H
#define HW_SPARSE_NN_H

#include "hw/optim.h"

#include <stddef.h>
#include <stdint.h>

// A batch of sparse examples: examples rows[0 .. batch) of compressed rows (row_start, index,
// value, as hw_sparse_set holds them, indices < the model's dim).
typedef struct {
    int batch;
    const int64_t *rows;
    const int64_t *row_start;
    const int32_t *index;
    const float *value;
} hw_sparse_batch;

// The factorization machine's sizes: dim features, each with a weight and `rank` factors.
typedef struct {
    int64_t dim;
    int rank;  // 0: a linear model
} hw_fm_dims;

// Floats of the flat parameters: dim * (1 + rank) + 1.
size_t hw_fm_n_weights(const hw_fm_dims *d);
// Floats of the scratch a forward keeps for its backward: batch * rank.
size_t hw_fm_scratch_floats(const hw_fm_dims *d, int batch);
// Initialises the parameters: weights and the bias 0, factors N(0, sigma^2) drawn from `seed`
// (libFM's init; a zero factor would keep every factor's gradient zero).
void hw_fm_init(float *weights, const hw_fm_dims *d, float sigma, uint64_t seed);

// z[e] = w0 + sum_j w_j x_j + sum_{j < l} <v_j, v_l> x_j x_l for each example e of the batch,
// computed as w0 + sum_j w_j x_j + 1/2 sum_f ((sum_j v_jf x_j)^2 - sum_j v_jf^2 x_j^2): O(rank
// nnz). s[e * rank + f] = sum_j v_jf x_j is kept for the backward.
void hw_fm_forward(float *z, float *s, const float *weights, const hw_sparse_batch *x, const hw_fm_dims *d);

// ---- the gradient of the features a batch touched ----
// `rows` is a dense buffer of dim * (1 + rank) floats that is zero except on the touched
// features' rows, `touched` their list in the order first seen, `mark` a byte per feature (1:
// touched); dbias the gradient of w0. Kept zero between steps by the step itself, which zeroes
// exactly the rows it wrote: allocation zeroes the buffer once, and nothing after that passes
// over it whole.
typedef struct {
    hw_fm_dims dims;
    float *rows;
    int32_t *touched;
    int64_t n_touched;
    uint8_t *mark;
    double dbias;
    int64_t cap;  // of touched: dim
} hw_sparse_grad;
int hw_sparse_grad_alloc(hw_sparse_grad *g, const hw_fm_dims *d);
void hw_sparse_grad_free(hw_sparse_grad *g);

// Adds the gradient of sum_e dz[e] * z[e] (dz the loss's gradient, hw_sparse_loss_backward) to
// g: dw0 += dz, dw_j += dz x_j, dv_jf += dz x_j (s_ef - v_jf x_j), over the batch's features,
// each listed once in g->touched. s is the forward's.
void hw_fm_backward(hw_sparse_grad *g, const float *dz, const float *s, const float *weights, const hw_sparse_batch *x);

// Adds src's gradient to dst's (dst's touched list grows by src's features it lacked) and leaves
// src zero: DataParallel's sum of its replicas' gradients, over the touched rows only.
void hw_sparse_grad_add(hw_sparse_grad *dst, hw_sparse_grad *src);

// The SGD step (hw_sgd_update, the dense layers' rule) on the touched rows and w0, read once and
// written once each (the Hogwild race on shared weights is the dense step's); `copy`, when not
// NULL, gets the same values (a worker's private copy). Then g is zero again. Weight decay is
// the paper's (Niu et al. 2011, section 5): only the coordinates the batch touched decay, at each
// step that touches them, so a rare feature is shrunk less often than a frequent one; the same
// holds for momentum, whose velocity moves only when its weight is touched. With `applied`, each
// weight's increment (double)written - (double)read is added to applied[i] (--measure's count).
void hw_sparse_grad_step(hw_sparse_grad *g, const hw_sgd *opt, float *weights, float *copy, double *applied);
// The same step with every write an atomic add of the weight's increment (--update atomic, as
// hw_sgd_step_atomic): a concurrent worker's write of the same weight is never overwritten.
void hw_sparse_grad_step_atomic(hw_sparse_grad *g, const hw_sgd *opt, float *weights, double *applied);

// ---- the losses, on one prediction z per example against its label y ----
typedef enum {
    HW_LOSS_LOGISTIC = 1,  // log(1 + exp(-y z)), y in {-1, +1}
    HW_LOSS_HINGE,         // max(0, 1 - y z), y in {-1, +1}: the linear SVM
    HW_LOSS_SQUARED,       // (z - y)^2: ratings and regression; the mean is the MSE
} hw_sparse_loss;
// The mean loss over the batch, summed in double.
double hw_sparse_loss_forward(hw_sparse_loss loss, const float *z, const float *y, int batch);
// dz[e] = d(mean loss) / d z[e] (the hinge's gradient at the kink y z = 1 is taken as 0).
void hw_sparse_loss_backward(hw_sparse_loss loss, float *dz, const float *z, const float *y, int batch);
// The examples predicted right: sign(z) == y (z >= 0 as +1) for the binary losses; 0 for squared.
int hw_sparse_loss_correct(hw_sparse_loss loss, const float *z, const float *y, int batch);

#endif
