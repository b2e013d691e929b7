// order: when the host may know that asynchronous work is done, for the simulated CUDA device.
//
// The simulator runs every call at once, but a program may only rely on what CUDA promises: a
// copy between the device and pinned host memory on a stream is done once the host has waited for
// that stream, for an event recorded after it (directly, or through events other streams waited
// for), or for the whole device. Each stream carries a vector clock (how much of every stream's
// work comes before its next work); an event takes its stream's clock when recorded; the host's
// clock grows with each wait. Two kinds of copies are held until the host's clock covers them:
//   device to pinned host: the data is taken at once (the device's state at that point of the
//     stream) but lands in host memory only then; until then the destination's pages are
//     inaccessible (pinned allocations have pages of their own), so a host read or write before
//     the wait crashes with a refusal that says so;
//   pinned host to device: the data is copied at once, and the source is compared then with what
//     was copied: a host write into it meanwhile, which a GPU could have copied instead, is refused.
// Pageable host memory needs none of this: CUDA copies it before the call returns.
//
// The same clocks order the device's own work: every copy, memset, kernel and GEMM is an
// operation on its stream, and each device allocation keeps the last write and the last read of
// every stream. An operation that writes what another stream read or wrote, or reads what another
// stream wrote, must come after that access (an event wait, or a host wait before it was queued):
// otherwise a GPU could run the two in either order, and the simulator refuses it. Allocations
// are the unit: two streams touching disjoint parts of one allocation count as a conflict.
#include "sim.h"

#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static sim_clock clocks[SIM_MAX_STREAMS];  // clocks[id]: what stream id's next work comes after
static int n_ids = SIM_MAX_DEVICES;        // ids below SIM_MAX_DEVICES: the devices' legacy streams
static sim_clock host;                     // what the host knows is done

typedef struct {
    int id;
    uint32_t seq;   // its place on stream id
    int from_host;  // 1: pinned host to device (check the source), 0: device to pinned host
    char *host;
    char *data;  // what the copy took
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

// ---- the pages of held device-to-host destinations: no access until the host waited ----

static uintptr_t page_floor(const void *p) { return (uintptr_t)p & ~((uintptr_t)sysconf(_SC_PAGESIZE) - 1); }

static uintptr_t page_ceil(const void *p, size_t bytes) {
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    return ((uintptr_t)p + bytes + page - 1) & ~(page - 1);
}

static void set_access(const held_copy *c, int prot) {
    uintptr_t begin = page_floor(c->host), end = page_ceil(c->host, c->bytes);
    mprotect((void *)begin, end - begin, prot);
}

void sim_order_unprotect(void) {
    for (int i = 0; i < n_held; i++) {
        if (!held[i].from_host) set_access(&held[i], PROT_READ | PROT_WRITE);
    }
}

void sim_order_protect(void) {
    for (int i = 0; i < n_held; i++) {
        if (!held[i].from_host) set_access(&held[i], PROT_NONE);
    }
}

static char refusals_path[512];  // $HW_SIM_REFUSALS, read before any fault

static void say(int fd, const char *text) {
    ssize_t written = write(fd, text, strlen(text));
    (void)written;
}

// A fault on a held destination: say why (async-signal-safe calls only), then crash as it would.
static void on_fault(int sig, siginfo_t *info, void *context) {
    (void)context;
    if (info->si_code <= 0) {
        // Sent by a process (kill -SEGV), not a fault: no access to run again, so the default
        // action now: swallowed, it would leave a worker running that a real GPU's run would lose.
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    uintptr_t at = (uintptr_t)info->si_addr;
    int ours = 0;
    for (int i = 0; i < n_held && !ours; i++) {
        ours = !held[i].from_host && at >= page_floor(held[i].host) && at < page_ceil(held[i].host, held[i].bytes);
    }
    if (ours) {
        const char *text = "hogwild simulated CUDA: refused a host access: the host touched pinned memory that a "
                           "device-to-host copy it has not waited for yet is still to write\n";
        say(STDERR_FILENO, text);
        int fd = refusals_path[0] ? open(refusals_path, O_WRONLY | O_CREAT | O_APPEND, 0644) : -1;
        if (fd >= 0) {
            say(fd, text);
            close(fd);
        }
    }
    signal(sig, SIG_DFL);  // the access runs again and crashes the process, as any bad access does
}

static void install_fault_handler(void) {
    static int installed;
    if (installed) return;
    installed = 1;
    const char *path = getenv("HW_SIM_REFUSALS");
    if (path) strncpy(refusals_path, path, sizeof refusals_path - 1);
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_fault;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, NULL);
}

// Lands or checks, in the order they were queued, every held copy the host now knows is done.
static void complete_known(void) {
    sim_order_unprotect();
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
    sim_order_protect();
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

uint32_t sim_order_op(int id) {
    if (id < 0) return 0;
    merge(&clocks[id], &host);  // queued after the host's waits: after what they waited for
    return ++clocks[id].at[id];
}

cudaError_t sim_order_access(const char *call, int id, uint32_t seq, const sim_region *r, int writes) {
    if (id < 0 || !r->accesses) return cudaSuccess;
    const uint32_t *last_write = r->accesses, *last_read = r->accesses + SIM_MAX_STREAMS;
    for (int other = 0; other < n_ids; other++) {
        if (other == id) continue;
        int after_write = last_write[other] <= clocks[id].at[other];
        int after_read = !writes || last_read[other] <= clocks[id].at[other];
        if (!after_write || !after_read) {
            return sim_refuse(cudaErrorInvalidValue, call,
                              "it %s a %zu-byte allocation of cuda:%d that stream #%d %s, and nothing orders the two "
                              "(stream #%d did not wait for an event recorded after that, nor the host for it): a GPU "
                              "may run them in either order",
                              writes ? "writes" : "reads", r->size, r->device, other, !after_write ? "wrote" : "read",
                              id);
        }
    }
    r->accesses[writes ? id : SIM_MAX_STREAMS + id] = seq;
    return cudaSuccess;
}

static void hold(int id, uint32_t seq, int from_host, void *host_ptr, const void *data, size_t bytes) {
    if (n_held == held_cap) {
        held_cap = held_cap ? 2 * held_cap : 16;
        held_copy *grown = realloc(held, sizeof *held * (size_t)held_cap);
        if (!grown) abort();
        held = grown;
    }
    char *copy = malloc(bytes);
    if (!copy) abort();
    memcpy(copy, data, bytes);
    held[n_held++] = (held_copy){id, seq, from_host, host_ptr, copy, bytes};
}

void sim_order_copy_to_host(int id, uint32_t seq, void *host_ptr, const void *device, size_t bytes) {
    if (id < 0) {
        memmove(host_ptr, device, bytes);
        return;
    }
    install_fault_handler();
    sim_order_unprotect();
    memset(host_ptr, 0xff, bytes);
    hold(id, seq, 0, host_ptr, device, bytes);
    sim_order_protect();
}

void sim_order_copy_from_host(int id, uint32_t seq, const void *host_ptr, size_t bytes) {
    if (id >= 0) hold(id, seq, 1, (void *)host_ptr, host_ptr, bytes);
}
