// order: when the host may know that asynchronous work is done, for the simulated CUDA device.
//
// The simulator runs every call at once, but a program may only rely on what CUDA promises: a
// copy between the device and pinned host memory on a stream is done once the host has waited for
// that stream, for an event recorded after it (directly, or through events other streams waited
// for), or for the whole device. Each stream carries a vector clock (how much of every stream's
// work comes before its next work); an event takes its stream's clock when recorded; the host's
// clock grows with each wait. Two kinds of copies are held until the host's clock covers them:
//   device to pinned host: the data is taken at once (the device's state at that point of the
//     stream) but lands in host memory only then; until then the host buffer holds NaN bytes, so
//     a read before the wait shows;
//   pinned host to device: the data is copied at once, and the source is compared then with what
//     was copied: a host write into it meanwhile, which a GPU could have copied instead, is refused.
// Pageable host memory needs none of this: CUDA copies it before the call returns.
#include "sim.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static sim_clock clocks[SIM_MAX_STREAMS];  // clocks[id]: what stream id's next work comes after
static int n_ids = SIM_MAX_DEVICES;        // ids below SIM_MAX_DEVICES: the devices' legacy streams
static sim_clock host;                     // what the host knows is done

typedef struct {
    int id;
    uint32_t seq;     // its place on stream id
    int from_host;    // 1: pinned host to device (check the source), 0: device to pinned host
    char *host;
    char *data;       // what the copy took
    size_t bytes;
} held_copy;

static held_copy *held;
static int n_held, held_cap;

int sim_order_new_stream(void) { return n_ids < SIM_MAX_STREAMS ? n_ids++ : -1; }

int sim_order_legacy(int device) { return device; }

void sim_order_event_record(int id, sim_clock *event) {
    if (id >= 0) *event = clocks[id];
    else memset(event, 0, sizeof *event);
}

static void merge(sim_clock *into, const sim_clock *from) {
    for (int i = 0; i < SIM_MAX_STREAMS; i++) {
        if (from->at[i] > into->at[i]) into->at[i] = from->at[i];
    }
}

void sim_order_stream_wait(int id, const sim_clock *event) {
    if (id >= 0) merge(&clocks[id], event);
}

// Lands or checks, in the order they were queued, every held copy the host now knows is done.
static void complete_known(void) {
    int kept = 0;
    for (int i = 0; i < n_held; i++) {
        held_copy *c = &held[i];
        if (c->seq > host.at[c->id]) {
            held[kept++] = *c;
            continue;
        }
        if (!c->from_host) {
            memcpy(c->host, c->data, c->bytes);
        } else if (memcmp(c->host, c->data, c->bytes) != 0) {
            sim_refuse(cudaErrorInvalidValue, "cudaMemcpyAsync",
                       "the host wrote the pinned source of a %zu-byte host-to-device copy at %p before it waited for "
                       "that copy: a GPU could have copied the new bytes",
                       c->bytes, (void *)c->host);
        }
        free(c->data);
    }
    n_held = kept;
}

void sim_order_learn_stream(int id) {
    if (id < 0) return;
    merge(&host, &clocks[id]);
    complete_known();
}

void sim_order_learn(const sim_clock *event) {
    merge(&host, event);
    complete_known();
}

void sim_order_learn_all(void) {
    for (int id = 0; id < n_ids; id++) merge(&host, &clocks[id]);
    complete_known();
}

static void hold(int id, int from_host, void *host_ptr, const void *data, size_t bytes) {
    if (n_held == held_cap) {
        held_cap = held_cap ? 2 * held_cap : 16;
        held_copy *grown = realloc(held, sizeof *held * (size_t)held_cap);
        if (!grown) abort();
        held = grown;
    }
    char *copy = malloc(bytes);
    if (!copy) abort();
    memcpy(copy, data, bytes);
    held[n_held++] = (held_copy){id, ++clocks[id].at[id], from_host, host_ptr, copy, bytes};
}

void sim_order_copy_to_host(int id, void *host_ptr, const void *device, size_t bytes) {
    if (id < 0) {
        memmove(host_ptr, device, bytes);
        return;
    }
    hold(id, 0, host_ptr, device, bytes);
    memset(host_ptr, 0xff, bytes);
}

void sim_order_copy_from_host(int id, const void *host_ptr, size_t bytes) {
    if (id >= 0) hold(id, 1, (void *)host_ptr, host_ptr, bytes);
}
