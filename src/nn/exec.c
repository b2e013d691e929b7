// exec: the executor. One training step on the CPU is in this file, calling out only to the layer
// math of src/nn/<kind>.c (and hw_sgemm). A trainer makes three calls:
//
//   hw_cpu_forward    the walk forward over the layers (hw_exec_forward), then the loss (hw_nll_loss)
//   hw_cpu_backward   the loss's gradient (hw_nll_loss_backward), then the walk backward (hw_exec_backward)
//   hw_sgd_step...    the update of the weights (torch.optim.SGD)
//
// The file is in C's order, each part before its first use: the CPU backend, the walk, the loss,
// hw_cpu_forward and hw_cpu_backward, the update.
//
// The walk is the same for every backend: it decides what each call works on (hw_layer_io): the
// layer's activations, its parameters' views into the flat buffers, which gradients are wanted.
// A backend (hw_backend) passes those buffers to the function of the layer's kind: the CPU's,
// first below, to the math of src/nn/<kind>.c; the GPU's (src/cuda/backend.c) to its kernels.
// (The GPU runner, src/cuda/runner.cu, fuses the loss into its log_softmax, and its SGD kernel
// runs the same rule, include/hw/sgd_update.h.)
#include "cpu_layers.h"
#include "cpu/kernels.h"

#include "hw/err.h"
#include "hw/optim.h"
#include "hw/sgd_update.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// ---- the CPU backend: which of the call's buffers is which argument of each kind's math ----

// Values per call of an elementwise layer (in and out have the same shape).
static size_t numel_of(const hw_layer *layer, const hw_layer_io *io) {
    return (size_t)io->batch * (size_t)hw_shape_numel(layer->in_shape);
}

// conv2d keeps the batch's column matrices from a training forward for backward; after an
// evaluation forward, backward builds them again.
static float *conv2d_cols(const hw_layer_io *io) { return io->training ? (float *)io->saved : NULL; }

// The forward of `layer`'s kind on the CPU, with the call's buffers as its arguments. The CPU's
// layers cannot fail: HW_ERR only for a layer of no kind.
static int cpu_forward(const hw_layer *layer, const hw_layer_io *io) {
    switch (layer->kind) {
    case HW_LINEAR: linear_forward(io->out, io->in, io->weight, io->bias, &layer->dims.linear, io->batch); return HW_OK;
    case HW_CONV2D:
        conv2d_forward(io->out, conv2d_cols(io), io->scratch, io->in, io->weight, io->bias, NULL, &layer->dims.conv2d,
                       io->batch);
        return HW_OK;
    case HW_MAXPOOL2D:
        maxpool2d_forward(io->out, (int32_t *)io->saved, io->in, &layer->dims.maxpool2d, io->batch);
        return HW_OK;
    case HW_RELU: relu_forward(io->out, io->in, numel_of(layer, io)); return HW_OK;
    case HW_DROPOUT:
        dropout_forward(io->out, io->saved, io->rng, io->in, &layer->dims.dropout, io->batch, io->training);
        return HW_OK;
    case HW_DROPOUT2D:
        dropout2d_forward(io->out, io->saved, io->rng, io->in, &layer->dims.dropout, io->batch, io->training);
        return HW_OK;
    case HW_FLATTEN: flatten_forward(io->out, io->in, numel_of(layer, io)); return HW_OK;
    case HW_LOG_SOFTMAX:
        log_softmax_forward(io->out, io->in, io->batch, (int)hw_shape_numel(layer->in_shape));
        return HW_OK;
    case HW_LAYER_KINDS: break;
    }
    return hw_fail("no layer of kind %d", (int)layer->kind);
}

// The backward of `layer`'s kind on the CPU, likewise: it overwrites the gradients io asks for.
static int cpu_backward(const hw_layer *layer, const hw_layer_io *io) {
    switch (layer->kind) {
    case HW_LINEAR:
        linear_backward(io->din, io->dweight, io->dbias, io->dout, io->in, io->weight, &layer->dims.linear, io->batch);
        return HW_OK;
    case HW_CONV2D:
        conv2d_backward(io->din, io->dweight, io->dbias, io->scratch, io->dout, io->in, io->weight, conv2d_cols(io),
                        &layer->dims.conv2d, io->batch);
        return HW_OK;
    case HW_MAXPOOL2D:
        maxpool2d_backward(io->din, io->dout, (const int32_t *)io->saved, &layer->dims.maxpool2d, io->batch);
        return HW_OK;
    case HW_RELU: relu_backward(io->din, io->dout, io->out, numel_of(layer, io)); return HW_OK;
    case HW_DROPOUT:
        dropout_backward(io->din, io->dout, io->saved, &layer->dims.dropout, io->batch, io->training);
        return HW_OK;
    case HW_DROPOUT2D:
        dropout2d_backward(io->din, io->dout, io->saved, &layer->dims.dropout, io->batch, io->training);
        return HW_OK;
    case HW_FLATTEN: flatten_backward(io->din, io->dout, numel_of(layer, io)); return HW_OK;
    case HW_LOG_SOFTMAX:
        log_softmax_backward(io->din, io->dout, io->out, io->batch, (int)hw_shape_numel(layer->in_shape));
        return HW_OK;
    case HW_LAYER_KINDS: break;
    }
    return hw_fail("no layer of kind %d", (int)layer->kind);
}

// In training, a dropout2d after a convolution zeroes whole output channels of each sample (half
// of LeNet's conv2). Its mask is drawn first, and the convolution's kernels compute only the
// channels it keeps (a cheaper algorithm: the FLOPs counted stay the dense ones). The same
// draws from the RNG in the same order as the two calls, and the same outputs: a kept channel is
// the same sums, a dropped one +0.0 either way (dropout2d_apply does not read it).
static int cpu_pairs(const hw_layer *layer, const hw_layer *next, int training) {
    return training && layer->kind == HW_CONV2D && next->kind == HW_DROPOUT2D;
}

// The pair's forward: the dropout2d's mask, the convolution of the channels it keeps, the dropout2d.
static int cpu_forward_pair(const hw_layer *layer, const hw_layer_io *io, const hw_layer *next,
                            const hw_layer_io *next_io) {
    const hw_dropout_dims *drop = &next->dims.dropout;
    dropout2d_draw(next_io->saved, next_io->rng, drop, next_io->batch);
    conv2d_forward(io->out, conv2d_cols(io), io->scratch, io->in, io->weight, io->bias, next_io->saved,
                   &layer->dims.conv2d, io->batch);
    dropout2d_apply(next_io->out, next_io->saved, next_io->in, drop, next_io->batch);
    return HW_OK;
}

const hw_backend hw_cpu_backend = {
    .forward = cpu_forward, .backward = cpu_backward, .pairs = cpu_pairs, .forward_pair = cpu_forward_pair};

// ---- the walk ----

// Parameter i of `layer` in `base` (weights or gradients); NULL where the layer has none.
static float *param_in(const hw_model *model, const hw_layer *layer, int i, float *base) {
    if (i >= layer->n_params) return NULL;
    return base + model->params[layer->first_param + i].offset;
}

// The gradient of parameter i of `layer`; NULL where it has none or it is frozen.
static float *grad_in(const hw_model *model, const hw_layer *layer, int i, float *grads) {
    if (i >= layer->n_params || model->params[layer->first_param + i].frozen) return NULL;
    return grads + model->params[layer->first_param + i].offset;
}

// What layer i's forward works on: its input and output activations, its parameters' views into
// the weights, its saved state and scratch (backward adds the gradients).
static hw_layer_io io_of(const hw_model *model, const hw_exec_buffers *b, int i, int batch, int training) {
    const hw_layer *layer = &model->layers[i];
    return (hw_layer_io){
        .batch = batch,
        .training = training,
        .index = i,
        .in = b->acts[i],
        .out = b->acts[i + 1],
        .weight = param_in(model, layer, 0, b->weights),
        .bias = param_in(model, layer, 1, b->weights),
        .scratch = b->scratch,
        .saved = b->saved ? b->saved[i] : NULL,
        .rng = b->rng,
        .backend = b->backend,
    };
}

int hw_exec_layer_forward(const hw_backend *backend, const hw_model *model, const hw_exec_buffers *b, int i, int batch,
                          int training) {
    hw_layer_io io = io_of(model, b, i, batch, training);
    if (backend->forward(&model->layers[i], &io) != HW_OK) return hw_error_prefix("forward, layer %d", i);
    return HW_OK;
}

int hw_exec_layer_backward(const hw_backend *backend, const hw_model *model, const hw_exec_buffers *b, int i, int batch,
                           int training, int first) {
    const hw_layer *layer = &model->layers[i];
    hw_layer_io io = io_of(model, b, i, batch, training);
    io.dout = b->grad_acts[i + 1];
    io.din = i > first ? b->grad_acts[i] : NULL;  // no gradient below the first trainable layer
    io.dweight = grad_in(model, layer, 0, b->grads);
    io.dbias = grad_in(model, layer, 1, b->grads);
    if (backend->backward(layer, &io) != HW_OK) return hw_error_prefix("backward, layer %d", i);
    return HW_OK;
}

int hw_exec_pairs(const hw_backend *backend, const hw_model *model, int i, int training) {
    return backend->pairs && i + 1 < model->n_layers &&
           backend->pairs(&model->layers[i], &model->layers[i + 1], training);
}

int hw_exec_pair_forward(const hw_backend *backend, const hw_model *model, const hw_exec_buffers *b, int i, int batch,
                         int training) {
    hw_layer_io io = io_of(model, b, i, batch, training), next_io = io_of(model, b, i + 1, batch, training);
    if (backend->forward_pair(&model->layers[i], &io, &model->layers[i + 1], &next_io) != HW_OK) {
        return hw_error_prefix("forward, layers %d and %d", i, i + 1);
    }
    return HW_OK;
}

int hw_exec_forward(const hw_backend *backend, const hw_model *model, const hw_exec_buffers *b, int batch,
                    int training) {
    for (int i = 0; i < model->n_layers; i++) {
        if (hw_exec_pairs(backend, model, i, training)) {  // layers i and i + 1 in one call
            if (hw_exec_pair_forward(backend, model, b, i, batch, training) != HW_OK) return HW_ERR;
            i++;
            continue;
        }
        if (hw_exec_layer_forward(backend, model, b, i, batch, training) != HW_OK) return HW_ERR;
    }
    return HW_OK;
}

int hw_exec_backward(const hw_backend *backend, const hw_model *model, const hw_exec_buffers *b, int batch,
                     int training, int first) {
    for (int i = model->n_layers - 1; i >= first; i--) {
        if (hw_exec_layer_backward(backend, model, b, i, batch, training, first) != HW_OK) return HW_ERR;
    }
    return HW_OK;
}

int hw_exec_first_trainable(const hw_model *model) {
    for (int i = 0; i < model->n_layers; i++) {
        const hw_layer *layer = &model->layers[i];
        for (int j = 0; j < layer->n_params; j++) {
            if (!model->params[layer->first_param + j].frozen) return i;
        }
    }
    return model->n_layers;
}

// ---- the loss: the mean negative log-likelihood of the labels (F.nll_loss, reduction 'mean') ----

float hw_nll_loss(const float *logp, const uint8_t *labels, int batch, int n_classes) {
    double sum = 0.0;
    for (int b = 0; b < batch; b++) {
        if (labels[b] >= n_classes) return NAN;  // a label the model has no class for
        sum -= logp[(size_t)b * n_classes + labels[b]];
    }
    return (float)(sum / batch);
}

// d(mean NLL)/d(log-probs): -1/batch at each sample's label, 0 elsewhere.
void hw_nll_loss_backward(float *dlogp, const uint8_t *labels, int batch, int n_classes) {
    memset(dlogp, 0, sizeof(float) * (size_t)batch * n_classes);
    for (int b = 0; b < batch; b++) {
        if (labels[b] < n_classes) dlogp[(size_t)b * n_classes + labels[b]] = -1.0f / (float)batch;
    }
}

int hw_model_count_correct(const hw_model *model, const hw_workspace *ws, const uint8_t *labels, int batch) {
    const float *logp = ws->acts[model->n_layers];
    int correct = 0;
    for (int b = 0; b < batch; b++) {
        const float *row = logp + (size_t)b * model->n_classes;
        int best = 0;
        for (int c = 1; c < model->n_classes; c++) {
            if (row[c] > row[best]) best = c;
        }
        correct += best == labels[b];
    }
    return correct;
}

const float *hw_model_output(const hw_model *model, const hw_workspace *ws) { return ws->acts[model->n_layers]; }

// ---- forward and backward on the CPU, in a workspace ----

hw_exec_buffers hw_workspace_buffers(const hw_model *model, hw_workspace *ws) {
    // A flatten's output is its input's buffer (src/nn/workspace.c): after the network input,
    // the caller's x of this walk.
    for (int i = 0; i < ws->n_layers; i++) {
        if (!ws->layers[i].view) continue;
        ws->acts[i + 1] = ws->acts[i];
        ws->grad_acts[i + 1] = ws->grad_acts[i];
    }
    return (hw_exec_buffers){
        .weights = model->weights,
        .grads = ws->grads,
        .acts = ws->acts,
        .grad_acts = ws->grad_acts,
        .saved = ws->saved,
        .scratch = ws->scratch,
        .rng = &ws->rng,
    };
}

float hw_cpu_forward(const hw_model *model, hw_workspace *ws, const float *x, const uint8_t *labels, int batch,
                     int training) {
    if (batch < 1 || batch > ws->max_batch) {
        hw_fail("forward: batch of %d outside [1, %d] (the workspace's max_batch)", batch, ws->max_batch);
        return NAN;
    }
    if (!model->weights || !hw_workspace_fits(ws, model)) {
        hw_fail("forward: %s", !model->weights ? "the model has no weights (hw_model_alloc_weights or _bind_weights)"
                                               : "the workspace cannot hold this model (allocated for another model)");
        return NAN;
    }
    // The input is read where it is; it must stay valid until backward.
    ws->acts[0] = (float *)x;
    ws->training = training;
    hw_exec_buffers bufs = hw_workspace_buffers(model, ws);
    hw_exec_forward(&hw_cpu_backend, model, &bufs, batch, training);  // the CPU's layers cannot fail
    if (!labels) return 0.0f;
    return hw_nll_loss(ws->acts[model->n_layers], labels, batch, model->n_classes);
}

int hw_cpu_backward(const hw_model *model, hw_workspace *ws, const uint8_t *labels, int batch) {
    // A bad call must not return quietly: the step after it would apply the previous gradients.
    if (batch < 1 || batch > ws->max_batch) {
        return hw_fail("backward: batch of %d outside [1, %d] (the workspace's max_batch)", batch, ws->max_batch);
    }
    if (!labels) return hw_fail("backward: no labels (the loss needs them)");
    if (!hw_workspace_fits(ws, model))
        return hw_fail("backward: the workspace cannot hold this model (allocated for another model)");
    int first = hw_exec_first_trainable(model);
    ws->first_trainable = first;
    if (first == model->n_layers) return HW_OK;  // nothing trains: no gradient to compute
    hw_nll_loss_backward(ws->grad_acts[model->n_layers], labels, batch, model->n_classes);
    hw_exec_buffers bufs = hw_workspace_buffers(model, ws);
    return hw_exec_backward(&hw_cpu_backend, model, &bufs, batch, ws->training, first);
}

// ---- the update: torch.optim.SGD over the flat buffer ----
//
// THE rule for one weight is hw_sgd_update (include/hw/sgd_update.h, which the GPU's kernel runs
// too). Here it runs over the trainable ranges of the flat buffer, in loops that the compiler
// vectorises: one loop per form of the rule (plain, momentum, Nesterov, and each of the three
// again for --measure), each with the form as a constant.
//
// The weights may be shared memory that other worker processes update at the same time (that is
// Hogwild). Each loop therefore reads every weight once into a register and writes it once, and
// takes no lock: a concurrent update that lands between our read and our write is overwritten,
// which is the lost-update race the algorithm tolerates.
//
// The velocity starts zeroed, so every step, the first included, is momentum * v + d (first = 0):
// one loop for all steps.

int hw_sgd_check(float lr, float momentum, float weight_decay, int nesterov) {
    // The negated comparisons also refuse NaN.
    if (!(lr >= 0.0f)) return hw_fail("SGD: the learning rate must be >= 0, got %g", (double)lr);
    if (!(momentum >= 0.0f)) return hw_fail("SGD: the momentum must be >= 0, got %g", (double)momentum);
    if (!(weight_decay >= 0.0f)) return hw_fail("SGD: the weight decay must be >= 0, got %g", (double)weight_decay);
    if (nesterov && momentum == 0.0f) {
        return hw_fail("SGD: Nesterov momentum needs a momentum > 0 (torch refuses nesterov with momentum 0)");
    }
    return HW_OK;
}

int hw_sgd_init(hw_sgd *opt, size_t n, float lr, float momentum, float weight_decay, int nesterov) {
    memset(opt, 0, sizeof *opt);
    if (hw_sgd_check(lr, momentum, weight_decay, nesterov) != HW_OK) return HW_ERR;
    opt->lr = lr;
    opt->momentum = momentum;
    opt->weight_decay = weight_decay;
    opt->nesterov = nesterov ? 1 : 0;
    if (momentum != 0.0f && n > 0) {
        opt->velocity = calloc(n, sizeof *opt->velocity);
        if (opt->velocity == NULL) {
            return hw_fail("cannot allocate the SGD momentum buffer (%zu floats, %zu bytes)", n, n * sizeof(float));
        }
    }
    return HW_OK;
}

void hw_sgd_free(hw_sgd *opt) {
    free(opt->velocity);
    opt->velocity = NULL;
}

// One pass of the rule in form `variant` over n weights: w[i] takes its new value (read once,
// written once), and so does copy[i] when `copy` is not NULL (the worker's private copy, see
// hw_sgd_step_and_copy). With `measured`, applied[i] also gets the increment written into the
// weight, (double)written - (double)read, exact: --measure sums them to find what concurrent
// writers overwrote (src/train/hogwild_measure.h). v is the velocity (NULL for HW_SGD_PLAIN).
// `variant` and `measured` are constants at every call, so each call inlines into a loop of its
// own with no branch on them; the test on `copy` is loop-invariant, and the compiler makes two
// loops of each (-funswitch-loops at -O3), every one vectorised.
static inline void sgd_pass(hw_sgd_variant variant, int measured, float *restrict w, float *restrict copy,
                            float *restrict v, const float *restrict g, double *restrict applied, size_t n, float lr,
                            float momentum, float wd) {
    for (size_t i = 0; i < n; i++) {
        float wi = w[i];
        float updated = hw_sgd_update(variant, wi, g[i], variant == HW_SGD_PLAIN ? NULL : &v[i], lr, momentum, wd, 0);
        w[i] = updated;
        if (copy) copy[i] = updated;
        if (measured) applied[i] += (double)updated - (double)wi;
    }
}

// The three forms of the step, and --measure's: the same three passes, which also sum `applied`,
// with the same float arithmetic, so that the weights come out bit-identical.
static void sgd_plain(float *restrict w, float *restrict copy, const float *restrict g, size_t n, float lr, float wd) {
    sgd_pass(HW_SGD_PLAIN, 0, w, copy, NULL, g, NULL, n, lr, 0.0f, wd);
}

static void sgd_momentum(float *restrict w, float *restrict copy, float *restrict v, const float *restrict g, size_t n,
                         float lr, float wd, float momentum) {
    sgd_pass(HW_SGD_MOMENTUM, 0, w, copy, v, g, NULL, n, lr, momentum, wd);
}

static void sgd_nesterov(float *restrict w, float *restrict copy, float *restrict v, const float *restrict g, size_t n,
                         float lr, float wd, float momentum) {
    sgd_pass(HW_SGD_NESTEROV, 0, w, copy, v, g, NULL, n, lr, momentum, wd);
}

static void sgd_measured(hw_sgd_variant variant, const hw_sgd *opt, float *restrict w, float *restrict copy,
                         float *restrict v, const float *restrict g, double *restrict applied, size_t n) {
    const float lr = opt->lr, wd = opt->weight_decay, momentum = opt->momentum;
    switch (variant) {
    case HW_SGD_PLAIN: sgd_pass(HW_SGD_PLAIN, 1, w, copy, NULL, g, applied, n, lr, 0.0f, wd); return;
    case HW_SGD_MOMENTUM: sgd_pass(HW_SGD_MOMENTUM, 1, w, copy, v, g, applied, n, lr, momentum, wd); return;
    case HW_SGD_NESTEROV: sgd_pass(HW_SGD_NESTEROV, 1, w, copy, v, g, applied, n, lr, momentum, wd); return;
    }
}

// --update atomic's pass of the rule in form `variant` over n weights: each weight read once
// (atomically), its increment hw_sgd_update(w) - w computed on that value, the velocity moved on
// once, and the increment added by hw_atomic_add_float, which lands on whatever value the weight
// has by then. copy[i] (when `copy`) gets the value written, and applied[i] (when `applied`) the
// exact difference the add made, (double)written - (double)replaced. Scalar: a compare-and-swap
// per weight, which no vector instruction does.
static inline void sgd_atomic_pass(hw_sgd_variant variant, float *w, float *copy, float *v, const float *g,
                                   double *applied, size_t n, float lr, float momentum, float wd) {
    for (size_t i = 0; i < n; i++) {
        float wi;
        __atomic_load(&w[i], &wi, __ATOMIC_RELAXED);
        float delta =
            hw_sgd_update(variant, wi, g[i], variant == HW_SGD_PLAIN ? NULL : &v[i], lr, momentum, wd, 0) - wi;
        float replaced, written = hw_atomic_add_float(&w[i], delta, &replaced);
        if (copy) copy[i] = written;
        if (applied) applied[i] += (double)written - (double)replaced;
    }
}

static void sgd_atomic(hw_sgd_variant variant, const hw_sgd *opt, float *w, float *copy, float *v, const float *g,
                       double *applied, size_t n) {
    const float lr = opt->lr, wd = opt->weight_decay, momentum = opt->momentum;
    switch (variant) {
    case HW_SGD_PLAIN: sgd_atomic_pass(HW_SGD_PLAIN, w, copy, NULL, g, applied, n, lr, 0.0f, wd); return;
    case HW_SGD_MOMENTUM: sgd_atomic_pass(HW_SGD_MOMENTUM, w, copy, v, g, applied, n, lr, momentum, wd); return;
    case HW_SGD_NESTEROV: sgd_atomic_pass(HW_SGD_NESTEROV, w, copy, v, g, applied, n, lr, momentum, wd); return;
    }
}

// Where and how a step writes: onto float weights (`f32`), with atomic adds when `atomic`, or onto
// bfloat16 weights (`bf16`, rounded with `key`). One of f32 and bf16 is set.
typedef struct {
    float *f32;
    int atomic;
    uint16_t *bf16;
    uint64_t key;
} sgd_target;

// The step over weights [begin, begin + count): the loop of the optimizer's form and of the
// target's (bfloat16, atomic or plain float), decided once per range, never inside a loop.
static void sgd_range(hw_sgd *opt, const sgd_target *t, float *copy, const float *g, double *applied, size_t begin,
                      size_t count) {
    float *v = opt->velocity ? opt->velocity + begin : NULL;
    float *c = copy ? copy + begin : NULL;
    // No velocity is momentum 0 (hw_sgd_init allocates one for any other).
    hw_sgd_variant variant = v == NULL ? HW_SGD_PLAIN : opt->nesterov ? HW_SGD_NESTEROV : HW_SGD_MOMENTUM;
    if (t->bf16) {
        // The pass of the CPU kernels in use (src/nn/cpu/sgd_bf16.h): with AVX-512 it ran 2.5x faster.
        nn_kernels_in_use()->sgd_bf16(variant, t->bf16 + begin, c, v, g + begin, applied ? applied + begin : NULL,
                                      count, begin, t->key, opt->lr, opt->momentum, opt->weight_decay);
        return;
    }
    float *w = t->f32;
    if (t->atomic) {
        sgd_atomic(variant, opt, w + begin, c, v, g + begin, applied ? applied + begin : NULL, count);
        return;
    }
    if (applied != NULL) {
        sgd_measured(variant, opt, w + begin, c, v, g + begin, applied + begin, count);
        return;
    }
    switch (variant) {
    case HW_SGD_PLAIN: sgd_plain(w + begin, c, g + begin, count, opt->lr, opt->weight_decay); return;
    case HW_SGD_MOMENTUM:
        sgd_momentum(w + begin, c, v, g + begin, count, opt->lr, opt->weight_decay, opt->momentum);
        return;
    case HW_SGD_NESTEROV:
        sgd_nesterov(w + begin, c, v, g + begin, count, opt->lr, opt->weight_decay, opt->momentum);
        return;
    }
}

// The step over every trainable parameter of `model` (copy and applied as in sgd_pass; either
// may be NULL) onto the target `t`.
static void sgd_step(hw_sgd *opt, const sgd_target *t, const hw_model *model, const float *grads, float *copy,
                     double *applied) {
    // Consecutive trainable parameters that sit next to each other in the flat buffer (the usual
    // case: all of them) are merged into one range, so a model without frozen parts is one loop.
    size_t run_begin = 0, run_end = 0;
    int have_run = 0;
    for (int p = 0; p < model->n_params; p++) {
        const hw_param *param = &model->params[p];
        if (param->frozen) continue;
        size_t begin = param->offset;
        size_t end = begin + (size_t)hw_shape_numel(param->shape);
        if (have_run && begin == run_end) {
            run_end = end;
            continue;
        }
        if (have_run) sgd_range(opt, t, copy, grads, applied, run_begin, run_end - run_begin);
        run_begin = begin;
        run_end = end;
        have_run = 1;
    }
    if (have_run) sgd_range(opt, t, copy, grads, applied, run_begin, run_end - run_begin);
}

void hw_sgd_step_and_copy(hw_sgd *opt, const hw_model *model, float *weights, const float *grads, float *copy) {
    sgd_step(opt, &(sgd_target){.f32 = weights}, model, grads, copy, NULL);
}

void hw_sgd_step_measured(hw_sgd *opt, const hw_model *model, float *weights, const float *grads, float *copy,
                          double *applied) {
    sgd_step(opt, &(sgd_target){.f32 = weights}, model, grads, copy, applied);
}

void hw_sgd_step_atomic(hw_sgd *opt, const hw_model *model, float *weights, const float *grads, float *copy,
                        double *applied) {
    sgd_step(opt, &(sgd_target){.f32 = weights, .atomic = 1}, model, grads, copy, applied);
}

void hw_sgd_step_bf16(hw_sgd *opt, const hw_model *model, uint16_t *weights, const float *grads, float *copy,
                      double *applied, uint64_t key) {
    sgd_step(opt, &(sgd_target){.bf16 = weights, .key = key}, model, grads, copy, applied);
}

void hw_sgd_step(hw_sgd *opt, const hw_model *model, float *weights, const float *grads) {
    sgd_step(opt, &(sgd_target){.f32 = weights}, model, grads, NULL, NULL);
}
