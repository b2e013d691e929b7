// gpu_copies: the copies of the weights of Hogwild on several GPUs, and the rounds that couple
// them (gpu_copies.h). Why one copy per GPU and not one copy for all: docs/ARCHITECTURE.md, "GPU
// Hogwild on several GPUs".
//
// A round, in the parent (the workers never wait for it), all of it on the GPUs: on each copy's
// device a kernel takes the copy's change since the agreed weights, sent_c = live_c - agreed; the
// all-reduce of DataParallel (src/cuda/allreduce.cu: ncclAllReduce where the copies are on
// distinct GPUs, else peer copies to copy 0's GPU and a sum kernel) sums them over the copies, the
// same sum on every device; and a kernel on each device takes THE rule's step (hw_couple_step, the
// arithmetic of the ranks' rounds, hw/couple_step.h) of the agreed weights, and adds the step less
// sent_c to the copy: its own change is already in it. Each device keeps its own replica of the
// agreed weights and of the rule's velocity; as every device takes the same step from the same sum,
// they stay equal. The changes are summed in float, not in the ranks' bfloat16: nothing travels
// over a network. The add is a read-modify-write of weights that the copy's workers are writing: a
// worker's step can overwrite it, or it a worker's step, as two workers' steps can; `agreed` is the
// parent's alone, so what a race loses only changes the next round's sent_c.
#include "gpu_copies.h"

#include "cuda/layer_ops.h"

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
    // live; with rounds also the round's sum, sent, agreed and velocity; the ranks' mirror a delta.
    // Copy 0's GPU also holds the sum's staging buffer where another copy is on another GPU
    // (hw_cuda_allreduce_create, after every copy): counted here, so that a GPU short of it is
    // refused with what it needs, not by the all-reduce's allocation after everything else.
    const int with_delta = coupled || g->plan.mirror;
    int buffers = coupled ? 5 : with_delta ? 2 : 1;
    for (int k = 1; coupled && c == 0 && k < g->copies; k++) {
        if (g->devices[k] != g->devices[0]) {
            buffers++;
            break;
        }
    }
    if (status == HW_OK && hw_cuda_check_free(bytes * (size_t)buffers) != HW_OK) {
        status = hw_error_prefix("the shared weights");
    }
    if (status == HW_OK) status = hw_cuda_malloc((void **)&g->live[c], bytes);
    if (status == HW_OK && with_delta) status = hw_cuda_malloc((void **)&g->delta[c], bytes);
    if (status == HW_OK && coupled) status = hw_cuda_malloc((void **)&g->sent[c], bytes);
    if (status == HW_OK && coupled) status = hw_cuda_malloc((void **)&g->agreed[c], bytes);
    if (status == HW_OK && coupled) status = hw_cuda_malloc((void **)&g->velocity[c], bytes);
    if (status == HW_OK) status = hw_cuda_stream_create(&g->stream[c]);
    if (status == HW_OK) status = hw_cuda_host_alloc((void **)&g->host[c], bytes);
    if (status == HW_OK) {
        memcpy(g->host[c], weights, bytes);  // initialised or loaded before the fork
        status = hw_cuda_memcpy_h2d(g->live[c], g->host[c], bytes, g->stream[c]);
    }
    // The agreed weights start as the weights, the rule's velocity at zero.
    if (status == HW_OK && coupled) status = hw_cuda_memcpy_d2d(g->agreed[c], g->live[c], bytes, g->stream[c]);
    if (status == HW_OK && coupled) status = hw_cuda_memset(g->velocity[c], 0, bytes, g->stream[c]);
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
        g->rule_agreed = malloc(sizeof(float) * n);
        g->rule_velocity = malloc(sizeof(float) * n);
        if (!g->rule_agreed || !g->rule_velocity) {
            gpu_copies_close(g);
            return hw_fail("out of memory for the coupling's 2 host copies of %zu weights", n);
        }
        if (hw_cuda_allreduce_create(&g->reduce, g->devices, g->copies, n, getenv("HOGWILD_NO_NCCL") == NULL) !=
            HW_OK) {
            hw_error_prefix("the sum of the copies' changes");
            gpu_copies_close(g);
            return HW_ERR;
        }
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
    hw_cuda_allreduce_free(g->reduce);
    for (int c = 0; c < g->copies; c++) {
        if (!g->live[c] && !g->stream[c] && !g->host[c]) continue;  // nothing made on that device
        if (hw_cuda_select(device_of(g, c)) != HW_OK) continue;
        hw_cuda_stream_destroy(g->stream[c]);
        hw_cuda_host_free(g->host[c]);
        hw_cuda_free(g->live[c]);
        hw_cuda_free(g->delta[c]);
        hw_cuda_free(g->sent[c]);
        hw_cuda_free(g->agreed[c]);
        hw_cuda_free(g->velocity[c]);
    }
    free(g->rule_agreed);
    free(g->rule_velocity);
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

int gpu_copies_read_rule(gpu_copies *g) {
    const size_t bytes = sizeof(float) * g->n;
    if (hw_cuda_select(device_of(g, 0)) != HW_OK ||
        hw_cuda_memcpy_d2h(g->rule_agreed, g->agreed[0], bytes, g->stream[0]) != HW_OK ||
        hw_cuda_memcpy_d2h(g->rule_velocity, g->velocity[0], bytes, g->stream[0]) != HW_OK ||
        hw_cuda_stream_sync(g->stream[0]) != HW_OK) {
        return hw_error_prefix("reading the agreed weights on cuda:%d", g->devices[0]);
    }
    return HW_OK;
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
    if (gpu_copies_read_rule(g) != HW_OK) return HW_ERR;
    hw_couple_rule_weights(g->plan.rule, g->copies, g->rule_velocity, g->ahead, g->rule_agreed, g->host[0], g->n);
    return HW_OK;
}

int gpu_copies_round(gpu_copies *g) {
    const int64_t n = (int64_t)g->n;
    double started = hw_now();
    // Every copy's change taken at about the same time: the kernels are queued back to back.
    for (int c = 0; c < g->copies; c++) {
        if (hw_cuda_select(device_of(g, c)) != HW_OK ||
            hw_cuda_couple_send(g->stream[c], g->sent[c], g->delta[c], g->live[c], g->agreed[c], n) != HW_OK) {
            return hw_error_prefix("reading copy %d of the weights on cuda:%d", c, g->devices[c]);
        }
    }
    if (hw_cuda_allreduce_sum(g->reduce, g->delta, g->stream) != HW_OK) {
        return hw_error_prefix("summing the changes of the %d copies of the weights", g->copies);
    }
    for (int c = 0; c < g->copies; c++) {
        if (hw_cuda_select(device_of(g, c)) != HW_OK ||
            hw_cuda_couple_round(g->stream[c], g->live[c], g->agreed[c], g->velocity[c], g->delta[c], g->sent[c], n,
                                 g->plan.rule, g->copies, g->ahead) != HW_OK) {
            return hw_error_prefix("adding a round to copy %d of the weights on cuda:%d", c, g->devices[c]);
        }
    }
    g->ahead = 1;  // a round puts the look-ahead in (hw_couple_rule_apply's flag)
    // Waited for: a failure is this round's, and the report times the whole round.
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

// Every copy and every device's agreed weights set to the rounds' weights W (the workers wait, or
// are gone), computed on the host from copy 0's device (hw_couple_rule_settle): a settle is rare.
static int copies_settle(gpu_copies *g) {
    const size_t bytes = sizeof(float) * g->n;
    if (gpu_copies_read_rule(g) != HW_OK) return HW_ERR;
    hw_couple_rule_settle(g->plan.rule, g->copies, g->rule_velocity, &g->ahead, g->rule_agreed, g->n);
    for (int c = 0; c < g->copies; c++) {
        memcpy(g->host[c], g->rule_agreed, bytes);
        if (hw_cuda_select(device_of(g, c)) != HW_OK ||
            hw_cuda_memcpy_h2d(g->agreed[c], g->host[c], bytes, g->stream[c]) != HW_OK ||
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
    const int64_t since = samples - g->last_samples;
    int due = settle;
    if (g->plan.every_samples > 0) {
        due = due || since >= g->plan.every_samples;
    } else {  // by time, and by samples too where most_samples says (the default's)
        due = due || (now - g->last_round) * 1000 >= g->plan.every_ms;
        due = due || (g->plan.most_samples > 0 && since >= g->plan.most_samples);
    }
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
    // round starts within a millisecond's samples of it (in 10 ms the workers pass several
    // intervals of a few hundred samples).
    if (g->plan.every_samples > 0 || g->plan.most_samples > 0) return 0.001;
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
    char asked[48], seen[64], every[128];
    if (g->plan.every_samples > 0) {
        snprintf(asked, sizeof asked, "%lld samples", (long long)g->plan.every_samples);
    } else if (g->plan.most_samples > 0) {
        snprintf(asked, sizeof asked, "%g ms or %lld samples", g->plan.every_ms, (long long)g->plan.most_samples);
    } else {
        snprintf(asked, sizeof asked, "%g ms", g->plan.every_ms);
    }
    const double rounds = (double)g->interval_rounds;
    if (g->interval_rounds == 0) {  // an average of no interval would read as 0
        snprintf(seen, sizeof seen, "none came due: only epoch ends");
    } else if (g->plan.every_samples > 0) {
        snprintf(seen, sizeof seen, "%.0f on average", (double)g->interval_samples / rounds);
    } else if (g->plan.most_samples > 0) {
        snprintf(seen, sizeof seen, "%.1f ms, %.0f samples on average", 1000 * (g->interval_time - g->opened) / rounds,
                 (double)g->interval_samples / rounds);
    } else {
        snprintf(seen, sizeof seen, "%.1f on average", 1000 * (g->interval_time - g->opened) / rounds);
    }
    snprintf(every, sizeof every, "%s (%s)", asked, seen);
    snprintf(text, cap,
             "coupling of %d copies of the weights (%s): %lld rounds, rule %s, at most one every %s; a round took "
             "%.2f ms on average, %.2f ms at most, in the parent (the workers do not wait for it); the changes summed "
             "by %s\n",
             g->copies, devices, (long long)g->rounds, hw_couple_rule_name(g->plan.rule), every,
             g->rounds ? 1000 * g->busy / (double)g->rounds : 0.0, 1000 * g->busy_max,
             g->reduce ? hw_cuda_allreduce_method(g->reduce) : "none");
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
