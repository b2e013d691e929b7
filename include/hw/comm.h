// comm: training across machines. Every coupling between ranks of an mpirun job is here, on Open
// MPI (src/comm/); nothing else in hogwild calls MPI. A plain ./hogwild, not started by mpirun,
// calls none of it: no MPI_Init, no MPI threads, no MPI library loaded.
//
// The core's side, in src/comm/ (in every build):
//   world.c           who this process is, from mpirun's environment, before any MPI call
//   mpi_plugin.c      the way in: loads the MPI side (libhogwild-mpi.so beside the binary) at
//                     hw_comm_init, and forwards every call below to it; without MPI, fails naming
//                     the build
//   mpirun_cleanup.c  the first rank of each host forks a process that removes the job's MPI files
//                     on that host (session folder, shared memory) if mpirun dies first (SIGKILL)
//   couple_rule.c     THE rule of Hogwild's rounds (block momentum; the sum, the rule before it, on
//                     request), with the reason it was chosen: plain arithmetic, no MPI
// The MPI side, src/comm/mpi/ (libhogwild-mpi.so; mpi_side.h):
//   init.c               MPI_Init, MPI_Finalize, and ending the whole job on a failure (MPI_Abort)
//   settings.c           the check at start-up that every rank was given the same settings
//   dataparallel_sum.c   DataParallel across ranks: the gradient sum (MPI_Allreduce) and the check
//                        that every rank holds the same weights (a hash reduced with MIN and MAX); on
//                        GPU ranks, the broadcast of NCCL's unique id (NCCL then sums the gradients:
//                        src/cuda/ranks.cu)
//   hogwild_coupling.c   Hogwild across ranks: the asynchronous rounds of the parent's watch loop
//                        (MPI_Iallreduce polled with MPI_Test) that add the other nodes' changes into
//                        the node's live shared weights, by the rule of couple_rule.c
//   entry.c              the MPI side's table of these calls, which mpi_plugin.c looks up
#ifndef HW_COMM_H
#define HW_COMM_H

#include "hw/bf16.h"
#include "hw/couple_step.h"

#include <stddef.h>
#include <stdint.h>

// This process in the job. size 1 (rank 0) when it was not started by mpirun.
typedef struct {
    int rank;
    int size;
    int local_rank;  // among the ranks on this host
} hw_world;

// Reads OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK, which mpirun sets before the process starts:
// no MPI call, so a Hogwild rank can fork its workers before MPI_Init starts its threads.
// A malformed value is an error naming the variable.
int hw_world_detect(hw_world *world);
// Whether this build has MPI (make MPI=0 builds without).
int hw_comm_built(void);

// The first rank of each host (local rank 0) of a job of several forks a janitor: when this rank
// has exited and the MPI daemon of this host (its parent: mpirun, or orted on another host) is
// gone too, it removes the job's Open MPI session folder and shared-memory segments on this host
// and any stale hogwild shared memory. main() calls it first thing in a rank, while the process
// has one thread (it checks: a fork beside other threads could copy a lock they hold).
int hw_mpirun_cleanup_start(const hw_world *world);

// MPI_Init (thread level FUNNELED: only the calling thread calls MPI) and a check that MPI's rank
// and size are the ones hw_world_detect read. Call once, after any fork. `timeout_s`
// (--sync-timeout) bounds every later wait for the other ranks that takes no timeout of its own
// (the checks of settings and weights, the broadcast, the MIN reduce).
int hw_comm_init(const hw_world *world, double timeout_s);
void hw_comm_finalize(void);
// Ends every rank of the job with exit status `code` (MPI_Abort): a failed rank must not leave
// the others waiting in a collective. Does nothing when MPI was not initialised.
void hw_comm_abort(int code);

// ---- what every rank must share (mpi/settings.c) ----
// One setting that every rank of a job must have the same: what it is, as a message names it ("the
// learning rate (--lr)", hw/option.h), the value compared (byte for byte) and the value shown in a
// message (e.g. a dataset's path, for a key that is a hash of its contents).
enum { HW_SETTING_NAME_CAP = 64, HW_SETTING_KEY_CAP = 48, HW_SETTING_SHOWN_CAP = 88 };
typedef struct {
    char name[HW_SETTING_NAME_CAP];
    char key[HW_SETTING_KEY_CAP];
    char shown[HW_SETTING_SHOWN_CAP];
} hw_comm_setting;
// Gathers every rank's `settings` (n of them, the same list on every rank) and fails, on every rank
// alike, at the first one whose key differs between ranks, naming it and each rank's value.
// A collective, bounded by the job's timeout (hw_comm_init).
int hw_comm_settings_agree(const hw_comm_setting *settings, int n);

// ---- DataParallel (mpi/dataparallel_sum.c) ----
// Sums buf[0..n) over the ranks, in place (an all-reduce). Every rank gets the same bits. Not
// complete after timeout_s seconds (0: no limit) is an error: a rank stuck or gone (--sync-timeout).
int hw_comm_sum(float *buf, size_t n, double timeout_s);
// The same sum, non-blocking and polled: not complete after timeout_s seconds is an error naming
// `what`. For a sum that waits on the others' work rather than on a step (an evaluation's share).
int hw_comm_sum_polled(float *buf, size_t n, double timeout_s, const char *what);
// The smallest of `value` over the ranks (a collective every rank calls, within the job's timeout).
int hw_comm_min_int(int *value);
// Checks that every rank holds bit-for-bit the same n weights: their FNV-1a hash, reduced with
// MIN and MAX, must agree. A mismatch is an error naming `when` (e.g. "the end of epoch 2"), and
// so is a check not complete within the job's timeout.
int hw_comm_weights_agree(const float *weights, size_t n, const char *when);
// Copies rank `root`'s `bytes` at buf to every other rank's buf (MPI_Ibcast, within the job's
// timeout): how GPU ranks share rank 0's NCCL unique id (src/cuda/train/dataparallel_gpu.c).
int hw_comm_bcast(void *buf, size_t bytes, int root);

// ---- The rule that couples Hogwild copies of the weights (couple_rule.c) ----
// What a completed round does on one copy (a rank's node): `sum` is the copies' changes since the
// agreed weights summed over the `copies`, `sent` this copy's own part of it. The agreed weights
// take one step, the same on every copy; the live weights take it too, less `sent`, which they
// already hold. `velocity`, n floats, is the rule's state (zeros at the start, the same on every
// copy); `ahead` its flag (0 at the start), kept by the rule (hw_couple_rule_settle). `applied`
// (NULL: not measured) adds each change made to `live` as --measure counts it
// (hw_couple_plan.applied). Why the default is block momentum and not the sum: couple_rule.c.
// hw_couple_rule and the arithmetic of one weight: hw/couple_step.h.
void hw_couple_rule_apply(hw_couple_rule rule, int copies, float *velocity, int *ahead, const float *sum,
                          const float *sent, float *agreed, float *live, double *applied, size_t n);
// Where the copies stop and become one: the agreed weights become the rounds' weights W, without
// the look-ahead beta v that block momentum keeps in them (the copies train on from there), so
// that what is evaluated and saved is where the rounds led. `ahead` (the caller's, 0 at the start)
// records it for the next round's step, which keeps the momentum; the sum has no look-ahead.
void hw_couple_rule_settle(hw_couple_rule rule, int copies, const float *velocity, int *ahead, float *agreed, size_t n);
// The rounds' weights W that a settle would give, written into `weights` (n floats; may be
// `agreed`), with the rule's state and the agreed weights left as they are: what the copies agree
// on while they train on (a mid-epoch evaluation of the copies on several GPUs, gpu_copies.c).
void hw_couple_rule_weights(hw_couple_rule rule, int copies, const float *velocity, int ahead, const float *agreed,
                            float *weights, size_t n);
const char *hw_couple_rule_name(hw_couple_rule rule);
// "momentum" or "sum"; anything else is an error naming it.
int hw_couple_rule_parse(const char *name, hw_couple_rule *rule);

// What the ranks exchange, as one number that changes whenever it does (1: float rounds; 2: the
// rounds in bfloat16; 3: the settings' names 64 bytes): the ranks of a job check they agree on it at start-up, so that hosts with
// different builds of hogwild end with an error naming it instead of summing each other's bytes.
enum { HW_COMM_PROTOCOL = 3 };

// The wire (couple_rule.c): a round's changes travel as bfloat16, half the bytes of float, so that a
// slow link carries twice the rounds. hw_couple_pack rounds this copy's change live - agreed to
// bfloat16 (`wire`) and writes in `sent` the value that went (what the rule then subtracts from
// live): what rounding kept back stays in live - agreed and goes with the next round. The sum over
// the copies is taken in bfloat16 (hw_couple_wire_add, MPI's reduction) and hw_couple_unpack turns
// it back into floats.
void hw_couple_pack(uint16_t *wire, float *sent, const float *live, const float *agreed, size_t n);
void hw_couple_unpack(float *sum, const uint16_t *wire, size_t n);
void hw_couple_wire_add(const uint16_t *in, uint16_t *inout, size_t n);  // inout += in, rounded
// (The conversions, hw_bf16_from_float and hw_bf16_to_float, are include/hw/bf16.h's.)

// ---- Hogwild across nodes (mpi/hogwild_coupling.c) ----
// The rounds of one node: each round sends the node's change since the last agreed weights and
// the node's counters, and applies the rule to what comes back when it completes.
typedef struct hw_couple hw_couple;

typedef struct {
    double every_ms;        // start a round every every_ms milliseconds ...
    int64_t every_samples;  // ... or every every_samples training samples of this node (0: by time)
                            // (a round starts only once the last one has completed)
    double timeout_s;       // a round not complete after this long is an error (--sync-timeout)
    hw_couple_rule rule;    // --sync-rule
    // --measure (NULL: not measured): n doubles, zeroed, to which every change the coupling makes
    // to the live weights is added as (double)written - (double)read, as a worker's measured step
    // adds its own; so the lost updates count only what a race overwrote, not the other nodes'
    // changes added in (src/train/hogwild_measure.c).
    double *applied;
} hw_couple_plan;

// What the nodes' rounds have told this node, summed over the others (not this node).
typedef struct {
    int64_t others_samples;  // training samples the other nodes had done at their last round
    double others_loss_sum;  // the sum of those samples' training losses
    int in_flight;           // a round is in flight: the next poll may apply it, but starts none
                             // (a round reads the live weights only when it starts)
    int stop_signal;         // a round carried a rank's stop (its signal; 0: none): every rank stops
    int stop_rank;           // the lowest rank whose stop it carried
} hw_couple_view;

// The coupling of `live`, n weights written by this node's workers (shared memory). The agreed
// weights start as a copy of `live`, which must be the same on every rank.
int hw_couple_open(hw_couple **couple, float *live, size_t n, const hw_couple_plan *plan, const hw_world *world);
// What a node is doing, sent with its rounds. A node that stops adds HW_COUPLE_STOP times its stop
// signal to its state: its next round then starts at once and tells every rank, which all stop
// after that same round (hw_couple_view.stop_signal), and no round starts after it.
enum { HW_COUPLE_TRAINING = 0, HW_COUPLE_AT_BARRIER = 1, HW_COUPLE_EVALUATING = 2, HW_COUPLE_STOP = 16 };
// One pass of the watch loop: completes the round in flight when MPI has (MPI_Test: never
// waits), or starts the next one when it is due. `state`: HW_COUPLE_AT_BARRIER when every worker
// of this node has finished the epoch and waits; its rounds then go back to back until a round in
// which every rank was at the barrier has completed (hw_couple_epoch_agreed).
// HW_COUPLE_EVALUATING: rank 0 evaluates (its workers may wait at the barrier meanwhile).
// `samples` and `loss_sum`: this node's counters. An error names what ran past --sync-timeout: a
// round in flight, or, while this node waits at the barrier, another rank that is neither at the
// barrier nor evaluating and whose samples have not moved (a worker of it stuck or gone).
int hw_couple_poll(hw_couple *couple, int state, int64_t samples, double loss_sum);
// 1 once every rank's end-of-epoch changes are in: the live weights are then set to the agreed
// weights (the workers wait at the barrier), checked equal on every rank, and the flag is reset
// for the next epoch. A collective: every rank gets here after the same round.
int hw_couple_epoch_agreed(hw_couple *couple, const char *when, int *agreed);
void hw_couple_view_read(const hw_couple *couple, hw_couple_view *view);
// The rounds' weights W (hw_couple_rule_weights) into `weights`, n floats: what every rank agreed
// on at the last completed round, without block momentum's look-ahead and without this node's
// changes since. What a mid-epoch evaluation reads, as the GPU copies' does.
void hw_couple_weights(const hw_couple *couple, float *weights);
// How long the watch loop may wait before its next hw_couple_poll, in seconds: 1 ms while a round
// is in flight (MPI moves it only inside an MPI call) or with an interval in samples (seen only
// when the loop looks), else until the next round is due, 10 ms at most.
double hw_couple_wait(const hw_couple *couple);
// The coupling's numbers, printed by rank 0 at the end: rounds, their time in flight (how stale
// the others' changes are when they land), and the watch loop's time spent coupling.
void hw_couple_report(const hw_couple *couple, char *text, size_t cap);
void hw_couple_close(hw_couple *couple);  // NULL: nothing

#endif
