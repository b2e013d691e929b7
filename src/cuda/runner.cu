// runner: an hw_model description run on one GPU by one worker: forward, backward, SGD step.
//
// Everything is allocated in hw_cuda_runner_create; the training loop only queues copies and
// kernels. Two streams: `copy` carries the input batches from two pinned host slots to two device
// slots, `compute` runs the layers. Events order them: a forward waits for its slot's copy
// (copy_done), and the next upload into a slot waits until the forward has read it (slot_free).
#include "backend.h"
#include "check.cuh"
#include "hw/sgd_update.h"
#include "launch.h"
#include "runner_state.h"

#include <stdlib.h>
#include <string.h>

// The trainable parameters as ranges of the flat buffer, adjacent ones merged: the SGD step is
// one kernel per range (usually one for the whole buffer).
static void collect_ranges(hw_cuda_runner *r, const hw_model *model) {
    flat_range all[HW_MAX_PARAMS];
    int n = 0;
    for (int i = 0; i < model->n_params; i++) {
        const hw_param *p = &model->params[i];
        int layer_frozen = 0;
        for (int l = 0; l < model->n_layers; l++) {
            const hw_layer *layer = &model->layers[l];
            if (layer->first_param >= 0 && i >= layer->first_param && i < layer->first_param + layer->n_params) {
                layer_frozen = layer->frozen;
            }
        }
        if (p->frozen || layer_frozen) continue;
        flat_range range = {p->offset, (size_t)hw_shape_numel(p->shape)};
        int at = n++;
        while (at > 0 && all[at - 1].offset > range.offset) {  // insertion sort by offset
            all[at] = all[at - 1];
            at--;
        }
        all[at] = range;
    }
    r->n_ranges = 0;
    for (int i = 0; i < n; i++) {
        flat_range *last = r->n_ranges ? &r->ranges[r->n_ranges - 1] : NULL;
        if (last && last->offset + last->count == all[i].offset) {
            last->count += all[i].count;
        } else {
            r->ranges[r->n_ranges++] = all[i];
        }
    }
}

// Makes the runner's device current for the calling thread (every entry point does, first).
static int use_device(const hw_cuda_runner *r) {
    HW_CHECK(cudaSetDevice(r->device.index));
    return HW_OK;
}

// Frees a captured training step (the CUDA graph section below).
static void graph_drop(step_graph *g) {
    if (g->exec) cudaGraphExecDestroy((cudaGraphExec_t)g->exec);
    if (g->graph) cudaGraphDestroy((cudaGraph_t)g->graph);
    g->exec = g->graph = NULL;
    g->n_dropout = 0;
}

extern "C" void hw_cuda_runner_free(hw_cuda_runner *r) {
    if (!r) return;
    if (!r->selected) {
        free(r);
        return;
    }
    cudaSetDevice(r->device.index);
    if (r->copy) cudaStreamSynchronize(r->copy);
    if (r->compute) cudaStreamSynchronize(r->compute);
    for (int s = 0; s < 2; s++) graph_drop(&r->graphs[s]);
    hw_cublas_destroy(r->blas);
    hw_cuda_stream_destroy(r->copy);
    hw_cuda_stream_destroy(r->compute);
    for (int s = 0; s < 2; s++) {
        hw_cuda_event_destroy(r->copy_start[s]);
        hw_cuda_event_destroy(r->copy_done[s]);
        hw_cuda_event_destroy(r->slot_free[s]);
        hw_cuda_host_free(r->host_x[s]);
        hw_cuda_host_free(r->host_labels[s]);
        hw_cuda_free(r->dev_x[s]);
        hw_cuda_free(r->dev_labels[s]);
    }
    hw_cuda_event_destroy(r->compute_start);
    hw_cuda_event_destroy(r->compute_end);
    hw_cuda_host_free(r->host_scalar);
    hw_cuda_free(r->arena);
    hw_cuda_free(r->argmax_arena);
    hw_cuda_free(r->labels_dev);
    hw_cuda_free(r->correct_dev);
    hw_cuda_free(r->train_loss_sum_dev);
    hw_cuda_free(r->grads);
    hw_cuda_free(r->velocity);
    if (r->owns_weights) hw_cuda_free(r->weights);
    cudaGetLastError();
    free(r);
}

static size_t round_up(size_t n) { return (n + 63) & ~(size_t)63; }  // keeps every carve 256-byte aligned

// Floats of one sample's output of `layer`.
static size_t out_numel(const hw_layer *layer) { return (size_t)hw_shape_numel(layer->out_shape); }

// hw_cuda_runner_create's work on a zeroed runner: the checks, then every allocation; on failure
// the caller frees what was made (hw_cuda_runner_free).
static int runner_init(hw_cuda_runner *r, const hw_model *model, const hw_cuda_runner_config *c) {
    if (c->max_batch < 1) return hw_fail("GPU runner: max_batch %d must be at least 1", c->max_batch);
    if (!(c->std > 0.0f)) return hw_fail("GPU runner: input std %g must be > 0", (double)c->std);
    if (model->n_layers < 1 || model->n_layers > HW_MAX_LAYERS) {
        return hw_fail("%s: the GPU runner needs 1 to %d layers, the model has %d", model->path, HW_MAX_LAYERS,
                       model->n_layers);
    }
    r->device = c->device;
    r->max_batch = c->max_batch;
    r->n_layers = model->n_layers;
    r->n_weights = model->n_weights;
    r->in_numel = hw_shape_numel(model->input);
    r->seed = c->seed;
    r->mean = c->mean;
    r->std = c->std;
    r->timing = c->timing;
    r->graph = c->graph;
    r->model = *model;  // the layers and parameter views; not the text nor the weights, which it does not own
    r->model.text = NULL;
    r->model.weights = NULL;
    r->model.owns_weights = 0;
    r->first_trainable = hw_exec_first_trainable(model);
    size_t scratch_floats = 0, argmax_ints = 0;
    for (int i = 0; i < model->n_layers; i++) {
        const hw_layer *layer = &model->layers[i];
        if (layer->kind == HW_CONV2D) {
            size_t need = hw_cuda_conv2d_scratch_floats(runner_conv_dims(&layer->dims.conv2d, c->max_batch));
            if (need > scratch_floats) scratch_floats = need;
        }
        if (layer->kind == HW_MAXPOOL2D) argmax_ints += round_up((size_t)c->max_batch * out_numel(layer));
    }
    r->n_classes = (int)out_numel(&model->layers[model->n_layers - 1]);
    collect_ranges(r, model);

    // Everything the runner allocates, checked against the free memory first.
    size_t B = (size_t)c->max_batch;
    size_t arena_floats = round_up(B * (size_t)r->in_numel);  // acts[0]
    for (int i = 0; i < r->n_layers; i++) {
        if (model->layers[i].kind != HW_FLATTEN) arena_floats += 2 * round_up(B * out_numel(&model->layers[i]));
    }
    arena_floats += round_up(scratch_floats) + round_up(B) + 64;  // scratch, row losses, the loss
    r->slot_bytes = B * (size_t)r->in_numel * sizeof(float);
    int own = c->weights_dev == NULL && !(model->device.type == HW_DEVICE_CUDA && model->weights);
    size_t bytes = arena_floats * sizeof(float) + argmax_ints * sizeof(int32_t) + 2 * r->n_weights * sizeof(float) +
                   (own ? r->n_weights * sizeof(float) : 0) + 2 * (r->slot_bytes + B) + B + 256;
    if (hw_cuda_select(c->device) != HW_OK) return HW_ERR;
    r->selected = 1;
    if (hw_cuda_check_free(bytes) != HW_OK) {
        return hw_error_prefix("GPU runner for %s at batch %d", model->path, c->max_batch);
    }

    if (c->weights_dev) {
        r->weights = c->weights_dev;
    } else if (model->device.type == HW_DEVICE_CUDA && model->weights) {
        if (model->device.index != c->device.index) {
            return hw_fail("GPU runner: the model's weights are on cuda:%d, the runner is for cuda:%d",
                           model->device.index, c->device.index);
        }
        r->weights = model->weights;
    } else {
        if (hw_cuda_malloc((void **)&r->weights, r->n_weights * sizeof(float)) != HW_OK) return HW_ERR;
        r->owns_weights = 1;
    }
    if (hw_cuda_malloc((void **)&r->grads, r->n_weights * sizeof(float)) != HW_OK) return HW_ERR;
    if (hw_cuda_malloc((void **)&r->velocity, r->n_weights * sizeof(float)) != HW_OK) return HW_ERR;
    if (hw_cuda_malloc((void **)&r->arena, arena_floats * sizeof(float)) != HW_OK) return HW_ERR;
    if (argmax_ints && hw_cuda_malloc((void **)&r->argmax_arena, argmax_ints * sizeof(int32_t)) != HW_OK) return HW_ERR;
    if (hw_cuda_malloc((void **)&r->labels_dev, B) != HW_OK) return HW_ERR;
    if (hw_cuda_malloc((void **)&r->correct_dev, sizeof(int32_t)) != HW_OK) return HW_ERR;
    if (hw_cuda_malloc((void **)&r->train_loss_sum_dev, sizeof(double)) != HW_OK) return HW_ERR;
    if (hw_cuda_host_alloc((void **)&r->host_scalar, 64) != HW_OK) return HW_ERR;
    for (int s = 0; s < 2; s++) {
        if (hw_cuda_host_alloc(&r->host_x[s], r->slot_bytes) != HW_OK) return HW_ERR;
        if (hw_cuda_host_alloc((void **)&r->host_labels[s], B) != HW_OK) return HW_ERR;
        if (hw_cuda_malloc(&r->dev_x[s], r->slot_bytes) != HW_OK) return HW_ERR;
        if (hw_cuda_malloc((void **)&r->dev_labels[s], B) != HW_OK) return HW_ERR;
        if (hw_cuda_event_create(&r->copy_start[s], 1) != HW_OK) return HW_ERR;
        if (hw_cuda_event_create(&r->copy_done[s], r->timing) != HW_OK) return HW_ERR;
        if (hw_cuda_event_create(&r->slot_free[s], 0) != HW_OK) return HW_ERR;
    }
    if (hw_cuda_event_create(&r->compute_start, 1) != HW_OK) return HW_ERR;
    if (hw_cuda_event_create(&r->compute_end, 1) != HW_OK) return HW_ERR;
    if (hw_cuda_stream_create(&r->copy) != HW_OK) return HW_ERR;
    if (hw_cuda_stream_create(&r->compute) != HW_OK) return HW_ERR;
    if (hw_cublas_create(&r->blas, r->compute) != HW_OK) return HW_ERR;

    // Carve the arena. A flatten layer is a view: its output and gradient are its input's.
    float *next = r->arena;
    r->acts[0] = next;
    r->grad_acts[0] = NULL;  // nobody needs the gradient of the input
    next += round_up(B * (size_t)r->in_numel);
    int32_t *next_argmax = r->argmax_arena;
    for (int i = 0; i < r->n_layers; i++) {
        const hw_layer *layer = &model->layers[i];
        if (layer->kind == HW_FLATTEN) {
            r->acts[i + 1] = r->acts[i];
            r->grad_acts[i + 1] = r->grad_acts[i];
            continue;
        }
        size_t n = round_up(B * out_numel(layer));
        r->acts[i + 1] = next;
        r->grad_acts[i + 1] = next + n;
        next += 2 * n;
        if (layer->kind == HW_MAXPOOL2D) {
            r->saved[i] = (uint8_t *)next_argmax;
            next_argmax += round_up(B * out_numel(layer));
        }
    }
    // A flatten right after the input aliases grad_acts[0] (NULL); backward never writes it
    // because layer 0 computes no input gradient.
    r->scratch = next;
    next += round_up(scratch_floats);
    r->row_loss = next;
    next += round_up(B);
    r->loss_dev = next;

    // Frozen parameters keep a zero gradient; the trainable ones are overwritten by backward.
    if (hw_cuda_memset(r->grads, 0, r->n_weights * sizeof(float), r->compute) != HW_OK) return HW_ERR;
    if (hw_cuda_memset(r->velocity, 0, r->n_weights * sizeof(float), r->compute) != HW_OK) return HW_ERR;
    if (hw_cuda_memset(r->train_loss_sum_dev, 0, sizeof(double), r->compute) != HW_OK) return HW_ERR;
    if (r->owns_weights) {
        if (model->weights) {
            if (hw_cuda_memcpy_h2d(r->weights, model->weights, r->n_weights * sizeof(float), r->compute) != HW_OK) {
                return HW_ERR;
            }
        } else if (hw_cuda_memset(r->weights, 0, r->n_weights * sizeof(float), r->compute) != HW_OK) {
            return HW_ERR;
        }
    }
    HW_CHECK(cudaStreamSynchronize(r->compute));
    return HW_OK;
}

extern "C" int hw_cuda_runner_create(hw_cuda_runner **runner, const hw_model *model,
                                     const hw_cuda_runner_config *config) {
    *runner = NULL;
    hw_cuda_runner *r = (hw_cuda_runner *)calloc(1, sizeof *r);
    if (!r) return hw_fail("GPU runner: out of host memory");
    if (runner_init(r, model, config) != HW_OK) {
        hw_cuda_runner_free(r);
        return HW_ERR;
    }
    *runner = r;
    return HW_OK;
}

// ---- input ----

static int upload(hw_cuda_runner *r, const void *x, size_t x_bytes, int is_u8, const uint8_t *labels, int batch) {
    if (batch < 1 || batch > r->max_batch) {
        return hw_fail("GPU runner: batch %d is outside 1..%d (max_batch)", batch, r->max_batch);
    }
    if (r->queued == 2) return hw_fail("GPU runner: two batches are queued already; run forward first");
    if (labels) {
        for (int b = 0; b < batch; b++) {
            if (labels[b] >= r->n_classes) {
                return hw_fail("GPU runner: label %d of sample %d is out of range for %d classes", labels[b], b,
                               r->n_classes);
            }
        }
    }
    if (use_device(r) != HW_OK) return HW_ERR;
    int s = r->next_upload;
    // The forward that read this slot last must be done with it before the pinned memory and the
    // device slot are overwritten (immediately true for a never recorded event).
    HW_CHECK(cudaEventSynchronize(r->slot_free[s]));
    if (r->copy_timed[s]) {
        float ms = 0.0f;
        HW_CHECK(cudaEventElapsedTime(&ms, r->copy_start[s], r->copy_done[s]));
        r->copy_ms += ms;
        r->copy_timed[s] = 0;
    }
    memcpy(r->host_x[s], x, x_bytes);
    if (labels) memcpy(r->host_labels[s], labels, (size_t)batch);
    if (r->timing) HW_CHECK(cudaEventRecord(r->copy_start[s], r->copy));
    HW_CHECK(cudaMemcpyAsync(r->dev_x[s], r->host_x[s], x_bytes, cudaMemcpyHostToDevice, r->copy));
    if (labels) {
        HW_CHECK(cudaMemcpyAsync(r->dev_labels[s], r->host_labels[s], (size_t)batch, cudaMemcpyHostToDevice, r->copy));
    }
    HW_CHECK(cudaEventRecord(r->copy_done[s], r->copy));
    r->copy_timed[s] = r->timing;
    r->slot_batch[s] = batch;
    r->slot_u8[s] = is_u8;
    r->slot_has_labels[s] = labels != NULL;
    r->next_upload = 1 - s;
    r->queued++;
    return HW_OK;
}

extern "C" int hw_cuda_runner_upload_u8(hw_cuda_runner *r, const uint8_t *x, const uint8_t *labels, int batch) {
    return upload(r, x, (size_t)batch * (size_t)r->in_numel, 1, labels, batch);
}

extern "C" int hw_cuda_runner_upload_f32(hw_cuda_runner *r, const float *x, const uint8_t *labels, int batch) {
    return upload(r, x, (size_t)batch * (size_t)r->in_numel * sizeof(float), 0, labels, batch);
}

// ---- forward, backward, step ----

// Adds the last timed compute span (when there is one) to compute_ms; waits for its end.
static int take_compute_time(hw_cuda_runner *r) {
    if (!r->compute_timed) return HW_OK;
    float ms = 0.0f;
    HW_CHECK(cudaEventSynchronize(r->compute_end));
    HW_CHECK(cudaEventElapsedTime(&ms, r->compute_start, r->compute_end));
    r->compute_ms += ms;
    r->compute_timed = 0;
    return HW_OK;
}

// With timing on, records the end of the compute queued so far.
static int mark_compute_end(hw_cuda_runner *r) {
    if (r->timing) HW_CHECK(cudaEventRecord(r->compute_end, r->compute));
    return HW_OK;
}

// The runner's device buffers as the executor (src/nn/exec.c) walks them with hw_cuda_backend.
static hw_exec_buffers buffers_of(hw_cuda_runner *r) {
    hw_exec_buffers b = {};
    b.weights = r->weights;
    b.grads = r->grads;
    b.acts = r->acts;
    b.grad_acts = r->grad_acts;
    b.saved = r->saved;
    b.scratch = r->scratch;
    b.backend = r;
    return b;
}

// The start of a forward over the oldest queued batch, slot *slot: the compute stream waits for
// its copy, and the timing (when on) starts after that wait, so waiting for a copy is not compute.
static int begin_forward(hw_cuda_runner *r, int training, int *slot) {
    if (r->queued == 0) return hw_fail("GPU runner: forward without a batch (upload one first)");
    if (use_device(r) != HW_OK) return HW_ERR;
    int s = r->next_forward;
    r->batch = r->slot_batch[s];
    r->has_labels = r->slot_has_labels[s];
    r->training = training;
    if (training) r->step++;  // a new dropout mask for every training batch
    HW_CHECK(cudaStreamWaitEvent(r->compute, r->copy_done[s], 0));
    if (r->timing) {
        if (take_compute_time(r) != HW_OK) return HW_ERR;
        HW_CHECK(cudaEventRecord(r->compute_start, r->compute));
        r->compute_timed = 1;
    }
    *slot = s;
    return HW_OK;
}

// The batch of slot s into the network's input (normalised), and its labels where the loss reads them.
static int queue_input(hw_cuda_runner *r, int s) {
    int64_t n = (int64_t)r->slot_batch[s] * r->in_numel;
    if (r->slot_u8[s]) {
        if (hw_cuda_normalize_u8(r->compute, r->acts[0], (const uint8_t *)r->dev_x[s], n, r->mean, r->std) != HW_OK) {
            return HW_ERR;
        }
    } else {
        HW_CHECK(
            cudaMemcpyAsync(r->acts[0], r->dev_x[s], (size_t)n * sizeof(float), cudaMemcpyDeviceToDevice, r->compute));
    }
    if (r->slot_has_labels[s]) {
        HW_CHECK(cudaMemcpyAsync(r->labels_dev, r->dev_labels[s], (size_t)r->slot_batch[s], cudaMemcpyDeviceToDevice,
                                 r->compute));
    }
    return HW_OK;
}

// Slot s may take the next upload once the compute stream is past this point.
static int end_input(hw_cuda_runner *r, int s) {
    HW_CHECK(cudaEventRecord(r->slot_free[s], r->compute));
    r->next_forward = 1 - s;
    r->queued--;
    return HW_OK;
}

// The layers' forward over acts[0], and the training loss summed on the device.
static int queue_forward(hw_cuda_runner *r) {
    hw_exec_buffers b = buffers_of(r);
    if (hw_exec_forward(&hw_cuda_backend, &r->model, &b, r->batch, r->training) != HW_OK) return HW_ERR;
    if (r->training && r->has_labels &&
        hw_cuda_accumulate_loss(r->compute, r->train_loss_sum_dev, r->loss_dev, r->batch) != HW_OK) {
        return HW_ERR;
    }
    return HW_OK;
}

extern "C" int hw_cuda_runner_forward(hw_cuda_runner *r, int training, float *loss) {
    int s = 0;
    if (begin_forward(r, training, &s) != HW_OK || queue_input(r, s) != HW_OK || end_input(r, s) != HW_OK) {
        return HW_ERR;
    }
    if (queue_forward(r) != HW_OK || mark_compute_end(r) != HW_OK) return HW_ERR;
    if (loss) {
        *loss = 0.0f;
        if (!r->has_labels) return HW_OK;
        HW_CHECK(cudaMemcpyAsync(r->host_scalar, r->loss_dev, sizeof(float), cudaMemcpyDeviceToHost, r->compute));
        HW_CHECK(cudaStreamSynchronize(r->compute));
        *loss = r->host_scalar[0];
    }
    return HW_OK;
}

// The layers' backward, queued on the compute stream, down to the first trainable layer.
static int queue_backward(hw_cuda_runner *r) {
    hw_exec_buffers b = buffers_of(r);
    return hw_exec_backward(&hw_cuda_backend, &r->model, &b, r->batch, r->training, r->first_trainable);
}

extern "C" int hw_cuda_runner_backward(hw_cuda_runner *r) {
    if (!r->training || !r->has_labels || r->batch == 0) {
        return hw_fail("GPU runner: backward needs a training forward with labels before it");
    }
    if (use_device(r) != HW_OK) return HW_ERR;
    if (queue_backward(r) != HW_OK) return HW_ERR;
    return mark_compute_end(r);
}

// The SGD kernels, one per trainable range; `started`: the momentum buffer holds a first step.
static int queue_sgd(hw_cuda_runner *r, float lr, float momentum, float weight_decay, int nesterov, int started) {
    for (int k = 0; k < r->n_ranges; k++) {
        size_t off = r->ranges[k].offset;
        if (hw_cuda_sgd_step(r->compute, r->weights + off, r->grads + off, r->velocity + off,
                             (int64_t)r->ranges[k].count, lr, momentum, weight_decay, nesterov, started) != HW_OK) {
            return HW_ERR;
        }
    }
    return HW_OK;
}

extern "C" int hw_cuda_runner_sgd_step(hw_cuda_runner *r, float lr, float momentum, float weight_decay, int nesterov) {
    if (hw_sgd_check(lr, momentum, weight_decay, nesterov) != HW_OK) return HW_ERR;
    if (use_device(r) != HW_OK) return HW_ERR;
    if (queue_sgd(r, lr, momentum, weight_decay, nesterov, r->sgd_started) != HW_OK) return HW_ERR;
    if (momentum != 0.0f) r->sgd_started = 1;
    return mark_compute_end(r);
}

// ---- the training step as a CUDA graph (config.graph) ----
//
// A step of a small model is dozens of short kernels (LeNet: about 40), and launched one by one
// the host's cost per launch can exceed the kernel's own time. A graph is the step captured once
// and replayed with one launch: the same kernels on the same buffers. A capture is per input slot
// (the slot's device buffers are baked in) and per step_key (the scalars baked in). Two arguments
// change between steps without a new capture: the dropout step, set on the graph's dropout nodes
// before each replay, and the learning rate of a schedule, set on its SGD nodes when it differs
// from the one they hold.

// Turns graphs off for this runner, saying why; the steps run launch by launch from then on.
static void graph_give_up(hw_cuda_runner *r, const char *why) {
    snprintf(r->graph_off_text, sizeof r->graph_off_text, "%s", why);
    r->graph_off = r->graph_off_text;
    r->graph = 0;
    for (int s = 0; s < 2; s++) graph_drop(&r->graphs[s]);
    cudaGetLastError();
}

// The dropout and SGD kernels of the captured graph: their nodes, so that a replay can set the
// dropout step and the learning rate.
static int graph_find_nodes(step_graph *g) {
    size_t count = 0;
    HW_CHECK(cudaGraphGetNodes((cudaGraph_t)g->graph, NULL, &count));
    cudaGraphNode_t nodes[1024];
    if (count > sizeof nodes / sizeof nodes[0]) return hw_fail("a captured step has %zu nodes, over 1024", count);
    HW_CHECK(cudaGraphGetNodes((cudaGraph_t)g->graph, nodes, &count));
    g->n_dropout = 0;
    g->n_sgd = 0;
    for (size_t i = 0; i < count; i++) {
        cudaGraphNodeType type;
        HW_CHECK(cudaGraphNodeGetType(nodes[i], &type));
        if (type != cudaGraphNodeTypeKernel) continue;
        cudaKernelNodeParams params;
        // cuBLAS's own kernels may not answer through the runtime: they are not dropout anyway.
        if (cudaGraphKernelNodeGetParams(nodes[i], &params) != cudaSuccess) {
            cudaGetLastError();
            continue;
        }
        if (params.func == sgd_kernel()) {
            if (g->n_sgd == (int)(sizeof g->sgd_nodes / sizeof g->sgd_nodes[0])) {
                return hw_fail("a captured step has more than %d SGD kernels", g->n_sgd);
            }
            g->sgd_nodes[g->n_sgd++] = nodes[i];
            continue;
        }
        if (params.func != dropout_kernel()) continue;
        if (g->n_dropout == (int)(sizeof g->dropout_nodes / sizeof g->dropout_nodes[0])) {
            return hw_fail("a captured step has more than %d dropout kernels", g->n_dropout);
        }
        g->dropout_nodes[g->n_dropout++] = nodes[i];
    }
    return HW_OK;
}

// The dropout kernels a training step launches: forward's, and backward's where it reaches them.
static int dropout_launches(const hw_cuda_runner *r) {
    int n = 0;
    for (int i = 0; i < r->n_layers; i++) {
        hw_layer_kind kind = r->model.layers[i].kind;
        if (kind == HW_DROPOUT || kind == HW_DROPOUT2D) n += 1 + (i > r->first_trainable);
    }
    return n;
}

// Captures slot s's step: its input, forward, loss, backward and SGD kernels, without running them.
static int graph_capture(hw_cuda_runner *r, int s, const step_key *key, float lr) {
    step_graph *g = &r->graphs[s];
    graph_drop(g);
    HW_CHECK(cudaStreamBeginCapture(r->compute, cudaStreamCaptureModeThreadLocal));
    int rc = queue_input(r, s);
    if (rc == HW_OK) rc = queue_forward(r);
    if (rc == HW_OK) rc = queue_backward(r);
    if (rc == HW_OK) rc = queue_sgd(r, lr, key->momentum, key->weight_decay, key->nesterov, key->started);
    cudaGraph_t graph = NULL;
    cudaError_t ended = cudaStreamEndCapture(r->compute, &graph);
    g->graph = graph;
    if (rc != HW_OK) return HW_ERR;
    if (ended != cudaSuccess) return hw_fail("cudaStreamEndCapture: %s", cudaGetErrorString(ended));
    cudaGraphExec_t exec = NULL;
    HW_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    g->exec = exec;
    g->key = *key;
    g->lr = lr;
    if (graph_find_nodes(g) != HW_OK) return HW_ERR;
    if (g->n_dropout != dropout_launches(r)) {
        return hw_fail("the captured step has %d dropout kernels, the model launches %d", g->n_dropout,
                       dropout_launches(r));
    }
    if (g->n_sgd != r->n_ranges) {
        return hw_fail("the captured step has %d SGD kernels, the model's trainable ranges are %d", g->n_sgd,
                       r->n_ranges);
    }
    return HW_OK;
}

// Argument `arg` of each of the n kernel nodes (of n_args arguments) set to *value in the
// instantiated graph `exec`: how a replay changes one scalar of the captured step without a new
// capture (the dropout kernels' step, the SGD kernels' learning rate).
static int graph_nodes_set_arg(void *exec, void *const *nodes, int n, int n_args, int arg, void *value) {
    void *args[(int)SGD_KERNEL_ARGS > (int)DROPOUT_KERNEL_ARGS ? (int)SGD_KERNEL_ARGS : (int)DROPOUT_KERNEL_ARGS];
    for (int i = 0; i < n; i++) {
        cudaGraphNode_t node = (cudaGraphNode_t)nodes[i];
        cudaKernelNodeParams params;
        HW_CHECK(cudaGraphKernelNodeGetParams(node, &params));
        memcpy(args, params.kernelParams, (size_t)n_args * sizeof args[0]);
        args[arg] = value;
        params.kernelParams = args;
        HW_CHECK(cudaGraphExecKernelNodeSetParams((cudaGraphExec_t)exec, node, &params));
    }
    return HW_OK;
}

// The learning rate `lr` set on slot s's SGD nodes, where they hold another one.
static int graph_set_lr(hw_cuda_runner *r, int s, float lr) {
    step_graph *g = &r->graphs[s];
    if (memcmp(&g->lr, &lr, sizeof lr) == 0) return HW_OK;
    if (graph_nodes_set_arg(g->exec, g->sgd_nodes, g->n_sgd, SGD_KERNEL_ARGS, SGD_LR_ARG, &lr) != HW_OK) return HW_ERR;
    g->lr = lr;
    return HW_OK;
}

// Slot s's graph replayed for this step: its dropout nodes take the runner's step, then one launch.
static int graph_replay(hw_cuda_runner *r, int s) {
    step_graph *g = &r->graphs[s];
    uint64_t step = r->step;
    if (graph_nodes_set_arg(g->exec, g->dropout_nodes, g->n_dropout, DROPOUT_KERNEL_ARGS, DROPOUT_STEP_ARG, &step) !=
        HW_OK) {
        return HW_ERR;
    }
    HW_CHECK(cudaGraphLaunch((cudaGraphExec_t)g->exec, r->compute));
    return HW_OK;
}

extern "C" const char *hw_cuda_runner_graph_off(const hw_cuda_runner *r) { return r->graph_off; }

extern "C" int hw_cuda_runner_train_step(hw_cuda_runner *r, float lr, float momentum, float weight_decay,
                                         int nesterov) {
    // Checked before a capture: a graph is never captured for settings the step refuses.
    if (hw_sgd_check(lr, momentum, weight_decay, nesterov) != HW_OK) return HW_ERR;
    if (r->queued == 0) return hw_fail("GPU runner: a training step without a batch (upload one first)");
    int s = r->next_forward;
    if (!r->slot_has_labels[s]) return hw_fail("GPU runner: a training step needs a batch with labels");
    if (r->graph) {
        if (use_device(r) != HW_OK) return HW_ERR;
        step_key key;
        memset(&key, 0, sizeof key);  // no padding bytes left unset: keys are compared with memcmp
        key.batch = r->slot_batch[s];
        key.u8 = r->slot_u8[s];
        key.momentum = momentum;
        key.weight_decay = weight_decay;
        key.nesterov = nesterov;
        key.started = r->sgd_started;
        step_graph *g = &r->graphs[s];
        if (!g->exec || memcmp(&g->key, &key, sizeof key) != 0) {
            r->batch = key.batch;  // what the layers' walk reads while it is captured
            r->has_labels = 1;
            r->training = 1;
            if (graph_capture(r, s, &key, lr) != HW_OK) {
                char why[256];
                snprintf(why, sizeof why, "the step could not be captured as a CUDA graph: %s", hw_error());
                graph_give_up(r, why);
            }
        }
    }
    if (!r->graph) {
        if (hw_cuda_runner_forward(r, 1, NULL) != HW_OK || hw_cuda_runner_backward(r) != HW_OK) return HW_ERR;
        return hw_cuda_runner_sgd_step(r, lr, momentum, weight_decay, nesterov);
    }
    if (graph_set_lr(r, s, lr) != HW_OK) return HW_ERR;
    if (begin_forward(r, 1, &s) != HW_OK || graph_replay(r, s) != HW_OK || end_input(r, s) != HW_OK) return HW_ERR;
    if (momentum != 0.0f) r->sgd_started = 1;
    return mark_compute_end(r);
}

extern "C" int hw_cuda_runner_count_correct(hw_cuda_runner *r, int *correct) {
    *correct = 0;
    if (!r->has_labels || r->batch == 0) return hw_fail("GPU runner: count_correct needs a forward with labels");
    if (use_device(r) != HW_OK) return HW_ERR;
    HW_CHECK(cudaMemsetAsync(r->correct_dev, 0, sizeof(int32_t), r->compute));
    if (hw_cuda_count_correct(r->compute, r->correct_dev, r->acts[r->n_layers], r->labels_dev, r->batch,
                              r->n_classes) != HW_OK) {
        return HW_ERR;
    }
    HW_CHECK(cudaMemcpyAsync(r->host_scalar, r->correct_dev, sizeof(int32_t), cudaMemcpyDeviceToHost, r->compute));
    HW_CHECK(cudaStreamSynchronize(r->compute));
    int32_t count;
    memcpy(&count, r->host_scalar, sizeof count);
    *correct = count;
    return HW_OK;
}

extern "C" int hw_cuda_runner_sync(hw_cuda_runner *r) {
    if (use_device(r) != HW_OK) return HW_ERR;
    HW_CHECK(cudaStreamSynchronize(r->copy));
    HW_CHECK(cudaStreamSynchronize(r->compute));
    return HW_OK;
}

// ---- weights and results ----

extern "C" float *hw_cuda_runner_weights(hw_cuda_runner *r) { return r->weights; }

extern "C" float *hw_cuda_runner_grads(hw_cuda_runner *r) { return r->grads; }

extern "C" hw_cuda_stream hw_cuda_runner_stream(hw_cuda_runner *r) { return r->compute; }

extern "C" int hw_cuda_runner_loss(hw_cuda_runner *r, float *loss) {
    *loss = 0.0f;
    if (!r->has_labels || r->batch == 0) return hw_fail("GPU runner: no forward with labels has run");
    if (use_device(r) != HW_OK) return HW_ERR;
    HW_CHECK(cudaMemcpyAsync(r->host_scalar, r->loss_dev, sizeof(float), cudaMemcpyDeviceToHost, r->compute));
    HW_CHECK(cudaStreamSynchronize(r->compute));
    *loss = r->host_scalar[0];
    return HW_OK;
}

extern "C" int hw_cuda_runner_train_loss_sum(hw_cuda_runner *r, double *sum) {
    *sum = 0.0;
    if (use_device(r) != HW_OK) return HW_ERR;
    HW_CHECK(
        cudaMemcpyAsync(r->host_scalar, r->train_loss_sum_dev, sizeof(double), cudaMemcpyDeviceToHost, r->compute));
    HW_CHECK(cudaStreamSynchronize(r->compute));
    memcpy(sum, r->host_scalar, sizeof *sum);
    return HW_OK;
}

extern "C" int hw_cuda_runner_weights_upload(hw_cuda_runner *r, const float *host) {
    if (use_device(r) != HW_OK) return HW_ERR;
    HW_CHECK(cudaMemcpyAsync(r->weights, host, r->n_weights * sizeof(float), cudaMemcpyHostToDevice, r->compute));
    HW_CHECK(cudaStreamSynchronize(r->compute));
    return HW_OK;
}

extern "C" int hw_cuda_runner_weights_download(hw_cuda_runner *r, float *host) {
    if (use_device(r) != HW_OK) return HW_ERR;
    HW_CHECK(cudaMemcpyAsync(host, r->weights, r->n_weights * sizeof(float), cudaMemcpyDeviceToHost, r->compute));
    HW_CHECK(cudaStreamSynchronize(r->compute));
    return HW_OK;
}

extern "C" int hw_cuda_runner_timing(hw_cuda_runner *r, double *copy_ms, double *compute_ms) {
    if (hw_cuda_runner_sync(r) != HW_OK) return HW_ERR;
    for (int s = 0; s < 2; s++) {
        if (!r->copy_timed[s]) continue;
        float ms = 0.0f;
        HW_CHECK(cudaEventElapsedTime(&ms, r->copy_start[s], r->copy_done[s]));
        r->copy_ms += ms;
        r->copy_timed[s] = 0;
    }
    if (take_compute_time(r) != HW_OK) return HW_ERR;
    *copy_ms = r->copy_ms;
    *compute_ms = r->compute_ms;
    return HW_OK;
}
