// gpu_copies: the copies of the weights of Hogwild on several GPUs, and the rounds that couple
// them (gpu_copies.h). Why one copy per GPU and not one copy for all: docs/ARCHITECTURE.md, "GPU
// Hogwild on several GPUs".
//
// A round, in the parent (the workers never wait for it): every copy c is read back (D2H on the
// parent's stream for that copy), its change since the agreed weights is sent_c = live_c -
// agreed, their sum goes to THE rule (hw_couple_rule_step, the same arithmetic as the ranks'
// rounds), which moves the agreed weights by one step, and each copy gets step - sent_c added on
// its device (H2D, then the add kernel): its own change is already in it. The copies' changes are
// summed in float, not in the ranks' bfloat16: nothing travels over a network, and the bytes that
// cross PCIe per round (two copies of the weights per copy) are few against a round's interval.
// The add is a read-modify-write of weights that the copy's workers are writing: a worker's step
// can overwrite it, or it a worker's step, as two workers' steps can; `agreed` is the parent's
// alone, so what a race loses only changes the next round's sent_c.
#include "gpu_copies.h"

#include "hw/clock.h"
#include "hw/err.h"
#include "hw/option.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static hw_device device_of(const gpu_copies *g, int c) { return (hw_device){HW_DEVICE_CUDA, g->devices[c]}; }

static int copy_open(gpu_copies *g, int c, const float *weights) {
    const size_t bytes = sizeof(float) * g->n;
    const int coupled = g->copies > 1;
    hw_device device = device_of(g, c);
    int status = hw_cuda_select(device);
    if (status == HW_OK) status = hw_cuda_check_shared_use(device);
    const int with_delta = coupled || g->plan.mirror;
    if (status == HW_OK && hw_cuda_check_free(bytes * (with_delta ? 2 : 1)) != HW_OK) {
        status = hw_error_prefix("the shared weights");
    }
    if (status == HW_OK) status = hw_cuda_malloc((void **)&g->live[c], bytes);
    if (status == HW_OK && with_delta) status = hw_cuda_malloc((void **)&g->delta[c], bytes);
    if (status == HW_OK) status = hw_cuda_stream_create(&g->stream[c]);
    if (status == HW_OK) status = hw_cuda_host_alloc((void **)&g->host[c], bytes);
    if (status == HW_OK) {
        memcpy(g->host[c], weights, bytes);  // initialised or loaded before the fork
        status = hw_cuda_memcpy_h2d(g->live[c], g->host[c], bytes, g->stream[c]);
    }
    if (status == HW_OK) status = hw_cuda_stream_sync(g->stream[c]);
    return status;
}

int gpu_copies_open(gpu_copies *g, const gpu_copies_plan *plan, const float *weights, size_t n) {
    memset(g, 0, sizeof *g);
    if (plan->copies < 1 || plan->copies > HW_GPU_COPIES_MAX) {
        return hw_fail("%d copies of the weights: 1 to %d", plan->copies, HW_GPU_COPIES_MAX);
    }
    g->copies = plan->copies;
    g->n = n;
    g->plan = *plan;
    memcpy(g->devices, plan->devices, sizeof g->devices);
    // Every device exists before anything is allocated on any of them.
    for (int c = 0; c < g->copies; c++) {
        if (hw_cuda_select(device_of(g, c)) != HW_OK) {
            if (g->copies > 1)
                hw_error_prefix("copy %d of the weights, entry %d of the GPU list%s", c, c + 1,
                                hw_option_hint(HW_OPTION_GPUS));
            return HW_ERR;
        }
    }
    for (int c = 0; c < g->copies; c++) {
        if (copy_open(g, c, weights) != HW_OK) {
            if (g->copies > 1) hw_error_prefix("copy %d of the weights on cuda:%d", c, g->devices[c]);
            gpu_copies_close(g);
            return HW_ERR;
        }
    }
    if (g->copies > 1) {
        g->agreed = malloc(sizeof(float) * n);
        g->velocity = calloc(n, sizeof(float));
        g->sum = malloc(sizeof(float) * n);
        g->step = malloc(sizeof(float) * n);
        if (!g->agreed || !g->velocity || !g->sum || !g->step) {
            gpu_copies_close(g);
            return hw_fail("out of memory for the coupling's 4 host copies of %zu weights", n);
        }
        memcpy(g->agreed, weights, sizeof(float) * n);
    }
    if (plan->mirror) {
        g->mirror = malloc(sizeof(float) * n);
        g->pulled = malloc(sizeof(float) * n);
        if (!g->mirror || !g->pulled) {
            gpu_copies_close(g);
            return hw_fail("out of memory for the host mirror of %zu weights", n);
        }
        memcpy(g->mirror, weights, sizeof(float) * n);
    }
    g->last_round = g->opened = hw_now();
    return HW_OK;
}

void gpu_copies_close(gpu_copies *g) {
    // Called on the way out of a failure too: the failure's message outlives the clean-up.
    char message[1024];
    snprintf(message, sizeof message, "%s", hw_error());
    for (int c = 0; c < g->copies; c++) {
        if (!g->live[c] && !g->stream[c] && !g->host[c]) continue;  // nothing made on that device
        if (hw_cuda_select(device_of(g, c)) != HW_OK) continue;
        hw_cuda_stream_destroy(g->stream[c]);
        hw_cuda_host_free(g->host[c]);
        hw_cuda_free(g->live[c]);
        hw_cuda_free(g->delta[c]);
    }
    free(g->agreed);
    free(g->velocity);
    free(g->sum);
    free(g->step);
    free(g->mirror);
    free(g->pulled);
    memset(g, 0, sizeof *g);
    hw_fail("%s", message);
}

int gpu_copies_download(gpu_copies *g, int c) {
    if (hw_cuda_select(device_of(g, c)) != HW_OK) return HW_ERR;
    if (hw_cuda_memcpy_d2h(g->host[c], g->live[c], sizeof(float) * g->n, g->stream[c]) != HW_OK) return HW_ERR;
    return hw_cuda_stream_sync(g->stream[c]);
}

// Several copies: neither copy 0, which holds its own workers' changes since the last round and
// none of the others', nor the agreed weights as they stand, which hold block momentum's
// look-ahead beta v, where the next round is expected to lead (couple_rule.c), but the rounds'
// weights W. W has every round up to the last one, and none of what the copies did since: their
// unsent changes, the coupling's staleness, which frequent rounds (--sync-every) keep short.
// host[0] is the rounds' scratch, free between them: rounds and snapshots run in the watch loop's
// thread alone (an evaluation's thread reads the snapshot it was given, never host[0]).
int gpu_copies_snapshot(gpu_copies *g) {
    if (g->copies < 2) return gpu_copies_download(g, 0);
    hw_couple_rule_weights(g->plan.rule, g->copies, g->velocity, g->ahead, g->agreed, g->host[0], g->n);
    return HW_OK;
}

int gpu_copies_round(gpu_copies *g) {
    const size_t n = g->n, bytes = sizeof(float) * n;
    double started = hw_now();
    // Every copy read back at about the same time: the copies' D2H copies run together.
    for (int c = 0; c < g->copies; c++) {
        if (hw_cuda_select(device_of(g, c)) != HW_OK ||
            hw_cuda_memcpy_d2h(g->host[c], g->live[c], bytes, g->stream[c]) != HW_OK) {
            return hw_error_prefix("reading copy %d of the weights on cuda:%d", c, g->devices[c]);
        }
    }
    memset(g->sum, 0, bytes);
    for (int c = 0; c < g->copies; c++) {
        if (hw_cuda_select(device_of(g, c)) != HW_OK || hw_cuda_stream_sync(g->stream[c]) != HW_OK) {
            return hw_error_prefix("reading copy %d of the weights on cuda:%d", c, g->devices[c]);
        }
        float *sent = g->host[c];  // in place: the copy's change since the agreed weights
        for (size_t i = 0; i < n; i++) {
            sent[i] -= g->agreed[i];
            g->sum[i] += sent[i];
        }
    }
    hw_couple_rule_step(g->plan.rule, g->copies, g->velocity, &g->ahead, g->sum, g->agreed, g->step, n);
    for (int c = 0; c < g->copies; c++) {
        float *add = g->host[c];  // in place: the step less what the copy already holds
        for (size_t i = 0; i < n; i++) add[i] = g->step[i] - add[i];
        if (hw_cuda_select(device_of(g, c)) != HW_OK ||
            hw_cuda_memcpy_h2d(g->delta[c], add, bytes, g->stream[c]) != HW_OK ||
            hw_cuda_add(g->stream[c], g->live[c], g->delta[c], (int64_t)n) != HW_OK) {
            return hw_error_prefix("adding a round to copy %d of the weights on cuda:%d", c, g->devices[c]);
        }
    }
    // The pinned buffers are the adds' sources until they have run.
    for (int c = 0; c < g->copies; c++) {
        if (hw_cuda_select(device_of(g, c)) != HW_OK || hw_cuda_stream_sync(g->stream[c]) != HW_OK) {
            return hw_error_prefix("adding a round to copy %d of the weights on cuda:%d", c, g->devices[c]);
        }
    }
    g->rounds++;
    double took = hw_now() - started;
    g->busy += took;
    if (took > g->busy_max) g->busy_max = took;
    return HW_OK;
}

// Every copy set to the agreed weights (the workers wait, or are gone).
static int copies_settle(gpu_copies *g) {
    const size_t bytes = sizeof(float) * g->n;
    hw_couple_rule_settle(g->plan.rule, g->copies, g->velocity, &g->ahead, g->agreed, g->n);
    for (int c = 0; c < g->copies; c++) {
        memcpy(g->host[c], g->agreed, bytes);
        if (hw_cuda_select(device_of(g, c)) != HW_OK ||
            hw_cuda_memcpy_h2d(g->live[c], g->host[c], bytes, g->stream[c]) != HW_OK ||
            hw_cuda_stream_sync(g->stream[c]) != HW_OK) {
            return hw_error_prefix("setting copy %d of the weights on cuda:%d to the agreed ones", c, g->devices[c]);
        }
    }
    return HW_OK;
}

int gpu_copies_poll(gpu_copies *g, int settle, int64_t samples) {
    if (g->copies < 2) return HW_OK;
    double now = hw_now();
    int due = settle || (g->plan.every_samples > 0 ? samples - g->last_samples >= g->plan.every_samples
                                                   : (now - g->last_round) * 1000 >= g->plan.every_ms);
    if (!due) return HW_OK;
    // Settled already, and no worker has taken a step since (Ctrl-C while the last epoch's end is
    // evaluated): the copies hold what was evaluated. A round of no change would still move the
    // rounds' weights by their momentum, and the save would not be what was evaluated.
    // (The copies are settled while the agreed weights hold no look-ahead: a round puts one in, of
    // either rule, a settle takes it out, and they start as the agreed weights.)
    if (settle && !g->ahead && samples == g->last_samples) return HW_OK;
    g->last_round = now;
    g->last_samples = samples;
    if (gpu_copies_round(g) != HW_OK) return HW_ERR;
    if (!settle) {  // a round of the interval, which the report averages (not the settles')
        g->interval_rounds++;
        g->interval_samples = samples;
        g->interval_time = now;
        return HW_OK;
    }
    return copies_settle(g);
}

double gpu_copies_wait(const gpu_copies *g) {
    if (g->copies < 2) return 0.01;
    // An interval in samples is seen only when the parent looks: every millisecond, so that a
    // round starts within a millisecond's samples of it (at 10 ms, --sync-every 256 gave 1429).
    if (g->plan.every_samples > 0) return 0.001;
    double left = g->last_round + g->plan.every_ms / 1000 - hw_now();
    return left < 0.001 ? 0.001 : left > 0.01 ? 0.01 : left;
}

void gpu_copies_report(const gpu_copies *g, char *text, size_t cap) {
    char devices[256] = "";  // 16 entries of "cuda:1023, "
    size_t used = 0;
    for (int c = 0; c < g->copies && used < sizeof devices; c++) {
        used += (size_t)snprintf(devices + used, sizeof devices - used, "%scuda:%d", c ? ", " : "", g->devices[c]);
    }
    // The rounds' real interval beside the one asked for: a round starts at the parent's first
    // look past it (gpu_copies_wait), and takes its time in the parent. Over the interval's rounds
    // only: an epoch end's settle makes one more, whenever the epoch ends.
    char every[128];
    const double rounds = g->interval_rounds ? (double)g->interval_rounds : 1.0;
    if (g->plan.every_samples > 0) {
        snprintf(every, sizeof every, "%lld samples (%.0f on average)", (long long)g->plan.every_samples,
                 (double)g->interval_samples / rounds);
    } else {
        snprintf(every, sizeof every, "%g ms (%.1f on average)", g->plan.every_ms,
                 g->interval_rounds ? 1000 * (g->interval_time - g->opened) / rounds : 0.0);
    }
    snprintf(text, cap,
             "coupling of %d copies of the weights (%s): %lld rounds, rule %s, at most one every %s; a round took "
             "%.2f ms on average, %.2f ms at most, in the parent (the workers do not wait for it)\n",
             g->copies, devices, (long long)g->rounds, hw_couple_rule_name(g->plan.rule), every,
             g->rounds ? 1000 * g->busy / (double)g->rounds : 0.0, 1000 * g->busy_max);
}

int gpu_copies_pull(gpu_copies *g) {
    if (gpu_copies_download(g, 0) != HW_OK) return hw_error_prefix("reading the device weights for the coupling");
    memcpy(g->mirror, g->host[0], sizeof(float) * g->n);
    memcpy(g->pulled, g->mirror, sizeof(float) * g->n);
    return HW_OK;
}

int gpu_copies_push(gpu_copies *g, int settled) {
    const size_t n = g->n, bytes = sizeof(float) * n;
    float *out = g->host[0];
    int changed = 0;
    for (size_t i = 0; i < n; i++) {
        out[i] = settled ? g->mirror[i] : g->mirror[i] - g->pulled[i];
        changed |= g->mirror[i] != g->pulled[i];
    }
    if (!changed && !settled) return HW_OK;
    int status = hw_cuda_select(device_of(g, 0));
    if (status == HW_OK && settled) status = hw_cuda_memcpy_h2d(g->live[0], out, bytes, g->stream[0]);
    if (status == HW_OK && !settled) status = hw_cuda_memcpy_h2d(g->delta[0], out, bytes, g->stream[0]);
    if (status == HW_OK && !settled) status = hw_cuda_add(g->stream[0], g->live[0], g->delta[0], (int64_t)n);
    if (status == HW_OK) status = hw_cuda_stream_sync(g->stream[0]);
    if (status != HW_OK) return hw_error_prefix("writing the coupling's round into the device weights");
    memcpy(g->pulled, g->mirror, bytes);
    return HW_OK;
}
