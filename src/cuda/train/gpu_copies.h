// gpu_copies: the parent's side of Hogwild on several GPUs (private to src/cuda/train/). One copy of
// the weights per entry of --gpus, each in its GPU's memory and written lock-free by that GPU's
// workers (through CUDA IPC), coupled from the parent's watch loop by THE rule of the nodes
// (hw_couple_step, hw/couple_step.h), on the GPUs: the workers never wait for it. One copy
// (--device cuda:N) is the same object with no rounds.
#ifndef HW_GPU_COPIES_H
#define HW_GPU_COPIES_H

#include "cuda/allreduce.h"
#include "cuda/device.h"
#include "hw/comm.h"
#include "hw/train.h"

#include <stddef.h>
#include <stdint.h>

enum { HW_GPU_COPIES_MAX = HW_MAX_GPUS };  // as many as the GPU list holds

typedef struct {
    int copies;                      // K
    int devices[HW_GPU_COPIES_MAX];  // copy c lives on cuda:devices[c] (a device may hold several)
    hw_couple_rule rule;             // --sync-rule
    double every_ms;                 // a round every every_ms milliseconds ...
    int64_t every_samples;           // ... or every every_samples samples of all the workers (0: by time)
    int64_t most_samples;            // by time: also a round once most_samples samples came (0: none)
    int mirror;                      // keep a host mirror of copy 0 for the ranks' coupling (GPU ranks)
} gpu_copies_plan;

typedef struct {
    int copies;
    size_t n;
    int devices[HW_GPU_COPIES_MAX];
    float *live[HW_GPU_COPIES_MAX];      // device: copy c, exported to its workers
    float *delta[HW_GPU_COPIES_MAX];     // device: a round's sum of the copies' changes (K > 1); the mirror's add
    float *sent[HW_GPU_COPIES_MAX];      // device: copy c's change in the round (K > 1)
    float *agreed[HW_GPU_COPIES_MAX];    // device: the agreed weights, a replica on each copy's device (K > 1)
    float *velocity[HW_GPU_COPIES_MAX];  // device: the rule's velocity, likewise
    hw_cuda_stream stream[HW_GPU_COPIES_MAX];
    hw_cuda_allreduce *reduce;           // sums delta over the copies (K > 1): NCCL, or peer copies and a kernel
    float *host[HW_GPU_COPIES_MAX];      // pinned: copy c read back (a snapshot), a settle's upload
    float *rule_agreed, *rule_velocity;  // host: copy 0's device's agreed weights and velocity, as last read
    int ahead;               // the rule's: agreed holds its look-ahead (hw_couple_rule_settle); 0: every copy is agreed
    float *mirror, *pulled;  // plan.mirror: copy 0 as the ranks' coupling sees and changes it, and as last read
    gpu_copies_plan plan;
    double last_round;                          // when the last round started (seconds, hw_now)
    int64_t last_samples;                       // the workers' samples then
    int64_t rounds;                             // the report
    double opened;                              // when the copies were made (the report's mean interval)
    int64_t interval_rounds, interval_samples;  // the rounds of the interval (not settles), the last one's samples
    double interval_time;                       // and its time
    double busy, busy_max;                      // seconds the parent spent in rounds, and the longest
} gpu_copies;

// Allocates the K copies, each on its device, with `weights` (n floats, host) uploaded into every
// one, and the round's buffers. Fails naming the copy and its device; frees what it made.
int gpu_copies_open(gpu_copies *g, const gpu_copies_plan *plan, const float *weights, size_t n);
// Only once no process maps the copies any more (every worker reaped).
void gpu_copies_close(gpu_copies *g);
// Copy c's weights into g->host[c] (waits): while workers write them, a Hogwild read.
int gpu_copies_download(gpu_copies *g, int c);
// The weights an evaluation or a save reads, into g->host[0] (host). One copy: that copy, read
// while its workers write it. Several: the rounds' weights W, what the copies agree on
// (hw_couple_rule_weights on the agreed weights, neither they nor any copy changed); at an epoch
// end, settled, every copy is them bit for bit. Runs in the thread that makes the rounds.
int gpu_copies_snapshot(gpu_copies *g);
// K > 1: the agreed weights and the rule's velocity of copy 0's device into g->rule_agreed and
// g->rule_velocity (waits). Every device holds the same.
int gpu_copies_read_rule(gpu_copies *g);
// One round, on the GPUs: every copy's change since the agreed weights, their sum over the copies
// (the all-reduce), the rule's step of the agreed weights on every device, and to each copy the
// step less its own change added (a plain read-modify-write on the device, racing the workers'
// steps as they race each other). Waits for it to end.
int gpu_copies_round(gpu_copies *g);
// The watch loop's pass (K > 1): a round when one is due. `settle` (every worker waits at the
// epoch barrier, or is stopped): a round, then every copy set to the rounds' weights W
// (hw_couple_rule_settle), so that every copy holds every change of the epoch and they are
// equal; nothing when they are settled already and no worker has stepped since. `samples`: the
// workers' count, read after they stopped.
int gpu_copies_poll(gpu_copies *g, int settle, int64_t samples);
// How long the watch loop may wait before its next pass, in seconds: until the next round is
// due, 10 ms at most; 1 ms with an interval in samples.
double gpu_copies_wait(const gpu_copies *g);
// GPU ranks (plan.mirror): the ranks' coupling (src/comm/mpi/hogwild_coupling.c) reads and writes
// host memory, g->mirror. Pull reads copy 0 into it before the coupling's poll; push adds to copy 0
// what the poll changed in it since (the round's step less this node's change; nothing, most
// passes), or, `settled` (the epoch's agreed weights, the workers waiting), uploads it whole.
int gpu_copies_pull(gpu_copies *g);
int gpu_copies_push(gpu_copies *g, int settled);
// "coupling of 2 copies (cuda:0, cuda:1): 812 rounds, rule momentum, ..." for the summary.
void gpu_copies_report(const gpu_copies *g, char *text, size_t cap);

#endif
