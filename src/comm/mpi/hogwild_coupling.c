// couple: Hogwild across nodes (include/hw/comm.h). Each rank is a node whose workers write one
// set of shared weights without a lock; the rank's parent couples its node to the others from
// its watch loop, asynchronously, and the workers never wait for the network.
//
// The rounds: every rank keeps `agreed`, the weights all ranks agreed on after the last completed
// round (the same bits on every rank). A round sends the node's change since then, send = live -
// agreed, in bfloat16 (hw_couple_pack, src/comm/couple_rule.c: half the bytes, what rounding keeps back goes with
// the next round), and sums it over the ranks (MPI_Iallreduce with a bfloat16 sum of our own). When the sum lands, THE rule (hw_couple_rule_apply,
// src/comm/couple_rule.c) turns it into one step of the agreed weights, the same on every rank: agreed += step,
// and live += step - send (the node's own change is already in its live weights). The others'
// changes are stale when they land: by the round's time in flight plus the interval they were
// gathered over; --sync-every bounds the interval, and a round starts only once the last one has
// landed, so on a slow link the rounds grow to what the link carries.
//
// The add is a plain read-modify-write of weights the workers are writing: a worker's step can
// overwrite it, or it a worker's step, as two Hogwild workers' steps can. Either way `agreed`
// stays the same on every rank, so the next round's change (live - agreed) carries the loss on,
// and no rank drifts apart from the others beyond the changes not yet sent.
//
// MPI progresses a non-blocking collective only inside MPI calls (Open MPI 4.1 over TCP and
// shared memory): the watch loop's MPI_Test every pass is what moves the round, and the loop
// passes every millisecond while one is in flight (hw_couple_wait), which halves its time in
// flight against the loop's 10 ms (bench/RESULTS.md, issue 22).
#include "hw/comm.h"

#include "mpi_side.h"
#include "hw/err.h"
#include "hw/option.h"

#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// The counters that travel with a round, summed over the ranks (doubles: exact for counts), then
// two per rank, each rank filling its own (its samples, and its state, HW_COUPLE_*): how an
// epoch end's wait tells a rank that is slow from one that is stuck.
enum { COUNT_SAMPLES, COUNT_LOSS_SUM, COUNT_AT_BARRIER, N_COUNTS };
enum { RANK_SAMPLES, RANK_STATE, RANK_STOP, PER_RANK };

struct hw_couple {
    float *live;                     // the node's shared weights, written by its workers
    float *agreed;                   // the weights every rank agreed on at the last completed round
    float *send;                     // the round in flight: this node's change, as it went ...
    float *sum;                      // ... and its sum over the ranks
    uint16_t *send_wire, *sum_wire;  // the same two in bfloat16, as MPI carries them
    MPI_Op wire_sum;                 // hw_couple_wire_add as an MPI reduction
    float *velocity;                 // the rule's state (hw_couple_rule_apply), the same on every rank
    int ahead;                       // the rule's too: agreed holds its look-ahead (hw_couple_rule_settle)
    size_t n;
    hw_couple_plan plan;
    hw_world world;
    double *count_send, *count_sum;  // N_COUNTS + PER_RANK * world.size
    int n_counts;
    // While this node waits at the barrier: when each rank was last seen making progress.
    int64_t *rank_samples;
    double *rank_progress;
    double last_landed;  // when the last round's sum landed
    MPI_Request request[2];
    int in_flight;
    double round_started;   // when the round in flight took its change
    int64_t round_samples;  // this node's samples when it did
    int64_t last_samples;   // at the start of the last round
    double last_start;      // the start of the last round
    int all_at_barrier;     // the last completed round had every rank at the epoch barrier
    hw_couple_view view;
    // The report.
    int64_t rounds;
    double flight_sum, flight_max;  // seconds from a round's change to its sum landing
    double busy;                    // seconds in comm_mpi_couple_poll: the watch loop's cost of coupling ...
    double busy_cpu;                // ... and its thread's CPU time in it (the rest: waiting for a core)
    double opened;
};

static double clock_seconds(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double now_seconds(void) { return clock_seconds(CLOCK_MONOTONIC); }

// MPI's reduction of the rounds' bfloat16 changes (carried as MPI_UINT16_T).
static void wire_sum(void *in, void *inout, int *len, MPI_Datatype *type) {
    (void)type;
    hw_couple_wire_add(in, inout, (size_t)*len);
}

int comm_mpi_couple_open(hw_couple **out, float *live, size_t n, const hw_couple_plan *plan, const hw_world *world) {
    *out = NULL;
    if (n > INT_MAX) return hw_fail("Hogwild across ranks: %zu weights is more than one MPI message holds", n);
    hw_couple *c = calloc(1, sizeof *c);
    if (!c) return hw_fail("out of memory for the coupling of the ranks");
    c->live = live;
    c->n = n;
    c->plan = *plan;
    c->world = *world;
    c->agreed = malloc(sizeof(float) * n);
    c->send = malloc(sizeof(float) * n);
    c->sum = malloc(sizeof(float) * n);
    c->velocity = calloc(n, sizeof(float));
    c->send_wire = malloc(sizeof(uint16_t) * n);
    c->sum_wire = malloc(sizeof(uint16_t) * n);
    c->wire_sum = MPI_OP_NULL;
    c->n_counts = N_COUNTS + PER_RANK * world->size;
    c->count_send = calloc((size_t)c->n_counts, sizeof(double));
    c->count_sum = calloc((size_t)c->n_counts, sizeof(double));
    c->rank_samples = calloc((size_t)world->size, sizeof(int64_t));
    c->rank_progress = calloc((size_t)world->size, sizeof(double));
    if (!c->agreed || !c->send || !c->sum || !c->velocity || !c->send_wire || !c->sum_wire || !c->count_send ||
        !c->count_sum || !c->rank_samples || !c->rank_progress) {
        comm_mpi_couple_close(c);
        return hw_fail("out of memory for the coupling's 5 copies of %zu weights", n);
    }
    int code = MPI_Op_create(wire_sum, 1, &c->wire_sum);
    if (code != MPI_SUCCESS) {
        comm_mpi_couple_close(c);
        return comm_mpi_failed(code, "creating the coupling's bfloat16 sum (MPI_Op_create)");
    }
    memcpy(c->agreed, live, sizeof(float) * n);
    c->opened = c->last_start = now_seconds();
    for (int r = 0; r < world->size; r++) c->rank_progress[r] = c->opened;
    c->last_landed = c->opened;
    *out = c;
    return HW_OK;
}

static int round_start(hw_couple *c, int state, int64_t samples, double loss_sum, double now) {
    const int stop = state / HW_COUPLE_STOP;
    state %= HW_COUPLE_STOP;
    hw_couple_pack(c->send_wire, c->send, c->live, c->agreed, c->n);
    c->count_send[COUNT_SAMPLES] = (double)samples;
    c->count_send[COUNT_LOSS_SUM] = loss_sum;
    c->count_send[COUNT_AT_BARRIER] = state == HW_COUPLE_AT_BARRIER ? 1 : 0;
    double *mine = c->count_send + N_COUNTS + PER_RANK * c->world.rank;
    mine[RANK_SAMPLES] = (double)samples;
    mine[RANK_STATE] = state;
    mine[RANK_STOP] = stop;
    int code =
        MPI_Iallreduce(c->send_wire, c->sum_wire, (int)c->n, MPI_UINT16_T, c->wire_sum, MPI_COMM_WORLD, &c->request[0]);
    if (code == MPI_SUCCESS) {
        code = MPI_Iallreduce(c->count_send, c->count_sum, c->n_counts, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD,
                              &c->request[1]);
    }
    if (code != MPI_SUCCESS) return comm_mpi_failed(code, "starting a coupling round (MPI_Iallreduce)");
    c->in_flight = c->view.in_flight = 1;
    c->round_started = c->last_start = now;
    c->round_samples = c->last_samples = samples;
    return HW_OK;
}

// The round's sum has landed: the rule moves the agreed weights, and the live ones without a lock.
static void round_apply(hw_couple *c, double now) {
    hw_couple_unpack(c->sum, c->sum_wire, c->n);
    hw_couple_rule_apply(c->plan.rule, c->world.size, c->velocity, &c->ahead, c->sum, c->send, c->agreed, c->live,
                         c->plan.applied, c->n);
    c->view.others_samples = (int64_t)c->count_sum[COUNT_SAMPLES] - c->round_samples;
    c->view.others_loss_sum = c->count_sum[COUNT_LOSS_SUM] - c->count_send[COUNT_LOSS_SUM];
    c->all_at_barrier = (int)c->count_sum[COUNT_AT_BARRIER] == c->world.size;
    c->last_landed = now;
    // A rank progresses while its samples grow, or while it waits at the barrier or evaluates.
    for (int r = 0; r < c->world.size; r++) {
        const double *theirs = c->count_sum + N_COUNTS + PER_RANK * r;
        int64_t rank_samples = (int64_t)theirs[RANK_SAMPLES];
        if (rank_samples != c->rank_samples[r] || (int)theirs[RANK_STATE] != HW_COUPLE_TRAINING) {
            c->rank_progress[r] = now;
        }
        c->rank_samples[r] = rank_samples;
        if (theirs[RANK_STOP] > 0 && !c->view.stop_signal) {
            c->view.stop_signal = (int)theirs[RANK_STOP];
            c->view.stop_rank = r;
        }
    }
    c->in_flight = c->view.in_flight = 0;
    double flight = now - c->round_started;
    c->rounds++;
    c->flight_sum += flight;
    if (flight > c->flight_max) c->flight_max = flight;
}

// While this node waits at the barrier, rounds keep landing (every node's parent is alive); but
// a node whose worker is stopped (SIGSTOP) never reaches the barrier, and the wait for it had no
// end. The first rank seen neither progressing nor at the barrier nor evaluating for --sync-timeout
// ends the job, named.
// Measured between landed rounds (a round that does not land is the round's own timeout).
static int check_others_progress(const hw_couple *c) {
    for (int r = 0; r < c->world.size; r++) {
        if (r == c->world.rank || c->plan.timeout_s <= 0 || c->last_landed - c->rank_progress[r] <= c->plan.timeout_s) {
            continue;
        }
        return hw_fail("rank %d: waited the ranks' timeout of %g s%s at an epoch end for rank %d, which is not at the "
                       "end of its epoch and has made no progress since (its samples stay at %lld): a worker of rank "
                       "%d is stuck or gone",
                       c->world.rank, c->plan.timeout_s, hw_option_hint(HW_OPTION_SYNC_TIMEOUT), r,
                       (long long)c->rank_samples[r], r);
    }
    return HW_OK;
}

int comm_mpi_couple_poll(hw_couple *c, int state, int64_t samples, double loss_sum) {
    const int at_barrier = state % HW_COUPLE_STOP == HW_COUPLE_AT_BARRIER, stopping = state >= HW_COUPLE_STOP;
    double entered = now_seconds(), cpu_entered = clock_seconds(CLOCK_THREAD_CPUTIME_ID);
    int status = HW_OK;
    if (c->in_flight) {
        int done = 0;
        int code = MPI_Testall(2, c->request, &done, MPI_STATUSES_IGNORE);
        if (code != MPI_SUCCESS) {
            status = comm_mpi_failed(code, "a coupling round (MPI_Testall)");
        } else if (done) {
            round_apply(c, now_seconds());
        } else if (c->plan.timeout_s > 0 && entered - c->round_started > c->plan.timeout_s) {
            status = hw_fail("rank %d: coupling round %lld has not completed within the ranks' timeout of %g s%s: "
                             "another rank is stuck or gone",
                             c->world.rank, (long long)c->rounds + 1, c->plan.timeout_s,
                             hw_option_hint(HW_OPTION_SYNC_TIMEOUT));
        }
    }
    if (status == HW_OK && !c->in_flight) {
        // At the barrier, rounds go back to back until one has every rank there. Otherwise one
        // round per --sync-every, counted in this node's samples or in time. None once a round
        // has had every rank at the barrier, until the epoch is agreed: every other rank's next
        // collective is then the weights check. (Rank 0 polls with at_barrier 0 while it
        // evaluates, and an evaluation begun just before that round landed once started a round
        // here that met the others' weights check: mismatched collectives, a rank's stack
        // overwritten by the round's floats, SIGSEGV.) A stop goes at once, and once one has landed
        // no rank starts another round: every rank stops after that one.
        int due = c->view.stop_signal || c->all_at_barrier ? 0
                  : at_barrier || stopping                 ? 1
                  : c->plan.every_samples > 0              ? samples - c->last_samples >= c->plan.every_samples
                                                           : (entered - c->last_start) * 1000 >= c->plan.every_ms;
        if (due) status = round_start(c, state, samples, loss_sum, now_seconds());
    }
    if (status == HW_OK && at_barrier && !c->all_at_barrier) status = check_others_progress(c);
    c->busy += now_seconds() - entered;
    c->busy_cpu += clock_seconds(CLOCK_THREAD_CPUTIME_ID) - cpu_entered;
    return status;
}

int comm_mpi_couple_epoch_agreed(hw_couple *c, const char *when, int *agreed) {
    *agreed = 0;
    if (c->in_flight || !c->all_at_barrier) return HW_OK;
    // Every rank's workers wait at the barrier and every change is in `agreed` (but for what the
    // last round's bfloat16 kept back, at most 2^-8 of its change, dropped here): the live weights
    // become exactly the agreed ones, the same on every rank, which is checked: the rounds' weights,
    // without the rule's look-ahead (hw_couple_rule_settle; the velocity is the same on every rank).
    hw_couple_rule_settle(c->plan.rule, c->world.size, c->velocity, &c->ahead, c->agreed, c->n);
    if (c->plan.applied) {
        for (size_t i = 0; i < c->n; i++) c->plan.applied[i] += (double)c->agreed[i] - (double)c->live[i];
    }
    memcpy(c->live, c->agreed, sizeof(float) * c->n);
    c->all_at_barrier = 0;
    if (comm_mpi_weights_agree_within(c->agreed, c->n, when, c->plan.timeout_s) != HW_OK) return HW_ERR;
    *agreed = 1;
    return HW_OK;
}

void comm_mpi_couple_view_read(const hw_couple *c, hw_couple_view *view) { *view = c->view; }

void comm_mpi_couple_weights(const hw_couple *c, float *weights) {
    hw_couple_rule_weights(c->plan.rule, c->world.size, c->velocity, c->ahead, c->agreed, weights, c->n);
}

double comm_mpi_couple_wait(const hw_couple *c) {
    if (c->in_flight) return 0.001;
    if (c->all_at_barrier) return 0.01;
    if (c->plan.every_samples > 0) return 0.001;  // an interval in samples is seen only when the loop looks
    double left = c->last_start + c->plan.every_ms / 1000 - now_seconds();
    return left < 0.001 ? 0.001 : left > 0.01 ? 0.01 : left;
}

void comm_mpi_couple_report(const hw_couple *c, char *text, size_t cap) {
    double wall = now_seconds() - c->opened;
    char every[64];
    if (c->plan.every_samples > 0) snprintf(every, sizeof every, "%lld samples", (long long)c->plan.every_samples);
    else snprintf(every, sizeof every, "%g ms", c->plan.every_ms);
    snprintf(text, cap,
             "coupling (rank %d of %d): %lld rounds, rule %s, at most one every %s; a round is in flight %.1f ms on "
             "average, %.1f ms at most: the other nodes' changes land that long after they were taken, and this node "
             "trains without those of the last round in flight and the interval being gathered (staleness: 1 to 2 "
             "rounds); the watch loop spent %.3f s coupling (%.1f%% of %.1f s), %.3f s of it on a CPU\n",
             c->world.rank, c->world.size, (long long)c->rounds, hw_couple_rule_name(c->plan.rule), every,
             c->rounds ? 1000 * c->flight_sum / (double)c->rounds : 0.0, 1000 * c->flight_max, c->busy,
             wall > 0 ? 100 * c->busy / wall : 0.0, wall, c->busy_cpu);
}

// A coupling closed with a round in flight, kept: see comm_mpi_couple_close.
static hw_couple *abandoned;

void comm_mpi_couple_close(hw_couple *c) {
    if (!c) return;
    if (c->in_flight) {
        // An error ended the run with a round in flight; the job is being aborted (MPI_Abort), and
        // MPI may still write into its buffers: they are kept, reachable, until the process ends.
        abandoned = c;
        return;
    }
    free(c->agreed);
    free(c->send);
    free(c->sum);
    free(c->velocity);
    free(c->send_wire);
    free(c->sum_wire);
    if (c->wire_sum != MPI_OP_NULL) MPI_Op_free(&c->wire_sum);
    free(c->count_send);
    free(c->count_sum);
    free(c->rank_samples);
    free(c->rank_progress);
    free(c);
}
