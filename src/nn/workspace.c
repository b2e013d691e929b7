// workspace: what one CPU worker or replica needs to run a model (hw_workspace), allocated once.
// The executor (src/nn/exec.c) runs the model in it.
#include "hw/nn.h"

#include "hw/err.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

// Workspace buffers come straight from mmap: 64-byte aligned and zero, and a page costs memory
// only once it is touched. So buffers a workspace never uses cost nothing: an evaluation
// workspace (test batch 1000) never touches its activation gradients nor the column matrices
// conv2d keeps for backward. The mapping's length sits in the 64 bytes before the block.
static void *alloc_zeroed(size_t bytes) {
    size_t length = 64 + (bytes + 63) / 64 * 64;
    char *base = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) return NULL;
    memcpy(base, &length, sizeof length);
    return base + 64;
}

static void free_zeroed(void *block) {
    if (!block) return;
    char *base = (char *)block - 64;
    size_t length;
    memcpy(&length, base, sizeof length);
    munmap(base, length);
}

// The mapping of a block from alloc_zeroed is not inherited by processes forked later.
static int dont_fork(void *block) {
    if (!block) return 0;
    char *base = (char *)block - 64;
    size_t length;
    memcpy(&length, base, sizeof length);
    return madvise(base, length, MADV_DONTFORK);
}

// A flatten layer's output is a view: acts[i + 1] and grad_acts[i + 1] are the pointers of its
// input's, acts[i] and grad_acts[i] (the same floats in the same order), so its forward and backward
// copy nothing. ws->view[i + 1] records it at allocation: the workspace owns no view (a view of
// acts[0] is the caller's x), and hw_workspace_buffers points each at what is below it.

// What a workspace must agree with: the layers' kinds and output sizes, and the input's (FNV-1a).
static uint64_t model_key(const hw_model *model) {
    uint64_t key = 1469598103934665603ull;
    int64_t words[2 * HW_MAX_LAYERS + 2] = {model->n_layers, hw_shape_numel(model->input)};
    int n = 2;
    for (int i = 0; i < model->n_layers && i < HW_MAX_LAYERS; i++) {
        words[n++] = model->layers[i].kind;
        words[n++] = hw_shape_numel(model->layers[i].out_shape);
    }
    const unsigned char *bytes = (const unsigned char *)words;
    for (size_t b = 0; b < sizeof(int64_t) * (size_t)n; b++) key = (key ^ bytes[b]) * 1099511628211ull;
    return key;
}

int hw_workspace_fits(const hw_workspace *ws, const hw_model *model) {
    return ws->n_layers == model->n_layers && ws->model_key == model_key(model);
}

int hw_workspace_keep_from_children(hw_workspace *ws) {
    int failed = dont_fork(ws->grads) || dont_fork(ws->scratch);
    for (int i = 1; i <= ws->n_layers; i++) {
        if (ws->view[i]) continue;
        failed = failed || dont_fork(ws->acts[i]) || dont_fork(ws->grad_acts[i]) || dont_fork(ws->saved[i - 1]);
    }
    return failed ? hw_fail("workspace: madvise(MADV_DONTFORK): %s", strerror(errno)) : HW_OK;
}

void hw_workspace_free(hw_workspace *ws) {
    // the workspace does not own acts[0] (the caller's input), grad_acts[0] (never allocated)
    // nor a flatten's views
    for (int i = 1; i <= ws->n_layers; i++) {
        if (ws->view && ws->view[i]) continue;
        if (ws->acts) free_zeroed(ws->acts[i]);
        if (ws->grad_acts) free_zeroed(ws->grad_acts[i]);
        if (ws->saved) free_zeroed(ws->saved[i - 1]);
    }
    free(ws->view);
    free(ws->acts);
    free(ws->grad_acts);
    free(ws->saved);
    free_zeroed(ws->grads);
    free_zeroed(ws->scratch);
    memset(ws, 0, sizeof *ws);
}

int hw_workspace_alloc(hw_workspace *ws, const hw_model *model, int max_batch, uint64_t seed) {
    memset(ws, 0, sizeof *ws);
    if (max_batch < 1) return hw_fail("workspace: batch size must be at least 1, got %d", max_batch);
    int n = model->n_layers;
    ws->max_batch = max_batch;
    ws->n_layers = n;
    ws->acts = calloc((size_t)n + 1, sizeof *ws->acts);
    ws->grad_acts = calloc((size_t)n + 1, sizeof *ws->grad_acts);
    ws->saved = calloc((size_t)n + 1, sizeof *ws->saved);
    ws->view = calloc((size_t)n + 1, sizeof *ws->view);
    ws->grads = alloc_zeroed(model->n_weights * sizeof(float));
    int ok = ws->acts && ws->grad_acts && ws->saved && ws->view && ws->grads;
    size_t scratch = 0;
    for (int i = 0; ok && i < n; i++) {
        const hw_layer *layer = &model->layers[i];
        size_t floats = (size_t)max_batch * (size_t)hw_shape_numel(layer->out_shape);
        if (layer->kind == HW_FLATTEN) {  // a view (above)
            ws->view[i + 1] = 1;
            ws->acts[i + 1] = ws->acts[i];
            ws->grad_acts[i + 1] = ws->grad_acts[i];
            continue;
        }
        ws->acts[i + 1] = alloc_zeroed(floats * sizeof(float));
        ws->grad_acts[i + 1] = alloc_zeroed(floats * sizeof(float));
        ok = ws->acts[i + 1] && ws->grad_acts[i + 1];
        if (ok && layer->type->saved_bytes) {
            ws->saved[i] = alloc_zeroed(layer->type->saved_bytes(layer, max_batch));
            ok = ws->saved[i] != NULL;
        }
        if (layer->type->scratch_floats) {
            size_t s = layer->type->scratch_floats(layer, max_batch);
            if (s > scratch) scratch = s;
        }
    }
    if (ok && scratch) {
        ws->scratch = alloc_zeroed(scratch * sizeof(float));
        ok = ws->scratch != NULL;
    }
    if (!ok) {
        hw_workspace_free(ws);
        return hw_fail("workspace for %s: out of memory (batch %d)", model->path, max_batch);
    }
    hw_rng_seed(&ws->rng, seed, 0x64726f70 /* "drop" */);
    ws->first_trainable = 0;
    ws->model_key = model_key(model);
    return HW_OK;
}
