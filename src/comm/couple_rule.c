// rule: THE rule that couples Hogwild copies of the weights (include/hw/comm.h): what one round's
// sum of the copies' changes does to the weights they agreed on and to each copy's live weights.
// Plain arithmetic, no MPI: the ranks' rounds (hogwild_coupling.c) apply it, and the tests run it on
// copies of their own. One weight's step is hw_couple_step (hw/couple_step.h), which the rounds of
// the copies on several GPUs run on the devices (src/cuda/kernels.cuh, couple_round_element). The
// measurements behind it: bench/RESULTS.md, "Hogwild across nodes" (issue 22).
//
// A round: every copy sends its change since the agreed weights, sent = live - agreed; the sum
// over the R copies lands on every copy, which takes one step of the agreed weights, the same on
// every copy (agreed += step), and moves its live weights by the step less its own change, which
// they already hold (live += step - sent).
//
// The rule kept, block momentum with Nesterov's look-ahead (BMUF, Chen and Huo, ICASSP 2016;
// the outer step of SlowMo, Wang et al., ICLR 2020, is the same family), on the copies' mean
// change g = sum / R and a momentum of the rounds v, zero at the start:
//
//     v' = beta v + g        step = (1 + beta) v' - beta v        beta = 1 - 1/R
//
// (the copies train on from the look-ahead point W + beta v of the rounds' weights W). Why:
//
// - The sum (step = sum, --sync-rule sum, the baseline the default is measured against) counts every sample's
//   step once, as one node with all R x N workers would, but only along directions where the
//   copies' changes add up. Along a steep direction of the loss each copy corrects the same
//   error of the agreed weights on its own within a round, and the sum corrects it R times:
//   the agreed weights overshoot by R - 1 times the error. With 2 copies the error comes back
//   mirrored every round and never decays (3-epoch MLP on 2 ranks: every epoch end, where the
//   live weights become the agreed ones, lost 1 to 12 points; finals 82.4 to 94.5% against one
//   node's 95.1%); with 4 it grows 3 times a round (21.4 to 93.9%).
// - The mean (model averaging, local SGD; elastic averaging, EASGD, pulls each copy towards it)
//   corrects a common error once, but moves the weights by one copy's change a round where the
//   changes add up: R times less progress per sample than one node (4 ranks: 91.9% for 95.1%).
// - Momentum over the rounds tells the two apart by their history: changes that keep their sign
//   round after round build the step up to R times the mean, the sum's (the gain 1/(1 - beta)
//   is R), while corrections of one error alternate in sign and cancel. Nesterov's look-ahead
//   rather than plain (heavy-ball) momentum: a round lands while the next is in flight, so a
//   copy's reaction to it reaches the others a round late, and plain momentum with beta = 0.75
//   (4 copies) then oscillates: in a model of the rounds (each copy a stream of SGD steps on a
//   noisy quadratic, its sends a round late) it grew without bound where the look-ahead stayed
//   within 2.8 times one node's noise (1.5 on 2 copies), and the MLP on 4 ranks ended at 88.9
//   and 91.7% against 93.2 to 93.5%. When the copies react at once, the look-ahead settles a
//   steep direction in two rounds. beta = 1 - 1/R and the unit step of the mean are BMUF's
//   recommendation: in the model, a larger step of the mean with a smaller beta (the same gain)
//   grew without bound on 4 copies, and a smaller step with a larger beta trails further.
// - Spreading the others' change over the next interval instead of adding it at once (tried,
//   not kept) keeps the sum's overshoot: the 3-epoch MLP on 2 ranks ended 0.1 to 1.2 points below
//   one node, with the same drops at epoch ends, smaller.
//
// Where the copies stop and become one (an epoch end, the end of a run; an interrupt of GPU
// copies), what is evaluated and saved is the rounds' weights W, not the look-ahead W + beta v the
// copies train on from (hw_couple_rule_settle): the look-ahead is where the next round is expected
// to lead, and evaluated it adds beta v more than the rounds made. Where rounds are few and long, v
// is a large part of an epoch's change: the MLP on 2 simulated GPUs under ASan (2000 samples, 4
// rounds an epoch, a run resumed for one epoch) ended 52.8 to 89.4% with the look-ahead, a drop of
// up to 31 points from the epoch before, and 78.4 to 89.6% without (bench/RESULTS.md, issue 23).
// The momentum is kept: the next round's step omits the - beta v that withdraws the look-ahead it
// would have held (`ahead`), so the rounds' weights go on as if no settle had happened.
//
// Its cost: a copy gets the others' progress over a few rounds instead of at once; against the
// sum, the agreed weights trail by (R - 1)^2 / R rounds of all the copies' changes, which
// frequent rounds (--sync-every, 20 ms by default) keep to tens of milliseconds. With it, LeNet
// and the MLP on 2 and 4 ranks of one machine ended every run within 0.8 points of one node with
// the same workers (5 runs each), and the MLP across 2 hosts within 0.6 in 19 runs of 20 (1.15
// in one over 100 Mbit/s, with the fewest rounds). With the rounds' changes in bfloat16 (the
// wire, at the end of this file), 55 runs of 55 in those settings within 0.79, and the 25 over
// 100 Mbit/s, with twice the rounds, within 0.69.
#include "hw/comm.h"

#include "hw/err.h"

#include <string.h>

static const char *const rule_names[] = {[HW_COUPLE_MOMENTUM] = "momentum", [HW_COUPLE_SUM] = "sum"};

const char *hw_couple_rule_name(hw_couple_rule rule) {
    return (unsigned)rule < sizeof rule_names / sizeof rule_names[0] ? rule_names[rule] : "?";
}

int hw_couple_rule_parse(const char *name, hw_couple_rule *rule) {
    for (unsigned i = 0; i < sizeof rule_names / sizeof rule_names[0]; i++) {
        if (strcmp(name, rule_names[i]) == 0) {
            *rule = (hw_couple_rule)i;
            return HW_OK;
        }
    }
    return hw_fail("expects momentum or sum, got '%s'", name);
}

// live[i] += delta, a plain read-modify-write (the workers write live too); with --measure, what it
// read and wrote goes into applied[i] as a measured worker step's does (src/train/hogwild_measure.c).
static inline void live_add(float *live, double *applied, size_t i, float delta) {
    float read = live[i], written = read + delta;
    live[i] = written;
    if (applied) applied[i] += (double)written - (double)read;
}

void hw_couple_rule_apply(hw_couple_rule rule, int copies, float *velocity, int *ahead, const float *sum,
                          const float *sent, float *agreed, float *live, double *applied, size_t n) {
    const float beta = hw_couple_beta(copies), mean = hw_couple_mean(copies), was_ahead = (float)*ahead;
    *ahead = 1;
    for (size_t i = 0; i < n; i++) {
        float step = hw_couple_step(rule, beta, mean, &velocity[i], sum[i], was_ahead);
        agreed[i] += step;
        live_add(live, applied, i, step - sent[i]);
    }
}

// The one place the look-ahead is taken out: W = agreed - beta v where the agreed weights hold it
// (`ahead`), the agreed weights themselves where they do not (bit for bit: a settled copy is them).
void hw_couple_rule_weights(hw_couple_rule rule, int copies, const float *velocity, int ahead, const float *agreed,
                            float *weights, size_t n) {
    if (rule == HW_COUPLE_SUM || !ahead) {
        if (weights != agreed) memcpy(weights, agreed, sizeof(float) * n);
        return;
    }
    const float beta = hw_couple_beta(copies);
    for (size_t i = 0; i < n; i++) weights[i] = agreed[i] - beta * velocity[i];
}

void hw_couple_rule_settle(hw_couple_rule rule, int copies, const float *velocity, int *ahead, float *agreed,
                           size_t n) {
    hw_couple_rule_weights(rule, copies, velocity, *ahead, agreed, agreed, n);
    *ahead = 0;
}

// ---- the wire: a round's changes in bfloat16 ----
//
// Why: over a slow link a round lasts as long as its bytes take (the 3-epoch MLP across 2 hosts at
// 100 Mbit/s: 407 KB of float changes, 73 ms in flight, 24 rounds in a 2 s run), and the copies
// trail one node by what the rounds leave stale (bench/RESULTS.md, issue 22). Half the bytes, twice
// the rounds. bfloat16 rather than float16: a change spans the range of the weights' steps (1e-9 to
// 1), which float16 cuts at 6e-5 (subnormals) and 65504, and bfloat16 keeps float's exponent. Its
// 8-bit significand loses up to 2^-8 of each value, but nothing is lost on the way: the rule
// subtracts from live what went (`sent`), so what rounding kept back stays in live - agreed and is
// sent with the next round (error feedback, as in 1-bit SGD, Seide et al. 2014). The sum over the
// copies is rounded to bfloat16 too, the same on every copy (each add is commutative, so every
// rank's reduction order gives the same bits): its rounding moves the agreed weights by at most
// 2^-8 of a step, on every copy alike, so they stay agreed.

void hw_couple_pack(uint16_t *wire, float *sent, const float *live, const float *agreed, size_t n) {
    for (size_t i = 0; i < n; i++) {
        wire[i] = hw_bf16_from_float(live[i] - agreed[i]);
        sent[i] = hw_bf16_to_float(wire[i]);
    }
}

void hw_couple_unpack(float *sum, const uint16_t *wire, size_t n) {
    for (size_t i = 0; i < n; i++) sum[i] = hw_bf16_to_float(wire[i]);
}

void hw_couple_wire_add(const uint16_t *in, uint16_t *inout, size_t n) {
    for (size_t i = 0; i < n; i++) inout[i] = hw_bf16_from_float(hw_bf16_to_float(inout[i]) + hw_bf16_to_float(in[i]));
}
