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
// copy nothing. ws->layers[i].view records it at allocation: the workspace owns no view (a view of
// acts[0] is the caller's x), and hw_workspace_buffers points each at what is below it.

// What layer i needs of a workspace for batches of up to max_batch samples; *scratch: the scratch
// floats it asks for.
static hw_workspace_layer layer_needs(const hw_layer *layer, int max_batch, size_t *scratch) {
    hw_workspace_layer need = {.view = layer->kind == HW_FLATTEN};
    if (!need.view) need.act_floats = (size_t)max_batch * (size_t)hw_shape_numel(layer->out_shape);
    if (layer->type->saved_bytes) need.saved_bytes = layer->type->saved_bytes(layer, max_batch);
    *scratch = layer->type->scratch_floats ? layer->type->scratch_floats(layer, max_batch) : 0;
    return need;
}

int hw_workspace_fits(const hw_workspace *ws, const hw_model *model) {
    if (ws->n_layers != model->n_layers || model->n_weights > ws->grad_floats) return 0;
    for (int i = 0; i < model->n_layers; i++) {
        size_t scratch;
        const hw_workspace_layer need = layer_needs(&model->layers[i], ws->max_batch, &scratch), *has = &ws->layers[i];
        if (need.view != has->view || need.act_floats > has->act_floats || need.saved_bytes > has->saved_bytes ||
            scratch > ws->scratch_floats) {
            return 0;
        }
    }
    return 1;
}

int hw_workspace_keep_from_children(hw_workspace *ws) {
    int failed = dont_fork(ws->grads) || dont_fork(ws->scratch);
    for (int i = 1; i <= ws->n_layers; i++) {
        if (ws->layers[i - 1].view) continue;
        failed = failed || dont_fork(ws->acts[i]) || dont_fork(ws->grad_acts[i]) || dont_fork(ws->saved[i - 1]);
    }
    return failed ? hw_fail("workspace: madvise(MADV_DONTFORK): %s", strerror(errno)) : HW_OK;
}

void hw_workspace_free(hw_workspace *ws) {
    // the workspace does not own acts[0] (the caller's input), grad_acts[0] (never allocated)
    // nor a flatten's views
    for (int i = 1; i <= ws->n_layers; i++) {
        if (ws->layers && ws->layers[i - 1].view) continue;
        if (ws->acts) free_zeroed(ws->acts[i]);
        if (ws->grad_acts) free_zeroed(ws->grad_acts[i]);
        if (ws->saved) free_zeroed(ws->saved[i - 1]);
    }
    free(ws->layers);
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
    ws->layers = calloc((size_t)n + 1, sizeof *ws->layers);
    ws->grads = alloc_zeroed(model->n_weights * sizeof(float));
    ws->grad_floats = model->n_weights;
    int ok = ws->acts && ws->grad_acts && ws->saved && ws->layers && ws->grads;
    size_t scratch = 0;
    for (int i = 0; ok && i < n; i++) {
        size_t layer_scratch;
        const hw_workspace_layer need = layer_needs(&model->layers[i], max_batch, &layer_scratch);
        ws->layers[i] = need;
        if (layer_scratch > scratch) scratch = layer_scratch;
        if (need.view) {  // (above)
            ws->acts[i + 1] = ws->acts[i];
            ws->grad_acts[i + 1] = ws->grad_acts[i];
            continue;
        }
        ws->acts[i + 1] = alloc_zeroed(need.act_floats * sizeof(float));
        ws->grad_acts[i + 1] = alloc_zeroed(need.act_floats * sizeof(float));
        ok = ws->acts[i + 1] && ws->grad_acts[i + 1];
        if (ok && need.saved_bytes) {
            ws->saved[i] = alloc_zeroed(need.saved_bytes);
            ok = ws->saved[i] != NULL;
        }
    }
    if (ok && scratch) {
        ws->scratch = alloc_zeroed(scratch * sizeof(float));
        ok = ws->scratch != NULL;
    }
    ws->scratch_floats = scratch;
    if (!ok) {
        hw_workspace_free(ws);
        return hw_fail("workspace for %s: out of memory (batch %d)", model->path, max_batch);
    }
    hw_workspace_seed(ws, seed);
    ws->first_trainable = 0;
    return HW_OK;
}

void hw_workspace_seed(hw_workspace *ws, uint64_t seed) { hw_rng_seed(&ws->rng, seed, 0x64726f70 /* "drop" */); }
