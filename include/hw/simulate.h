// simulate: Hogwild's staleness without its machine. One process trains N virtual workers in a
// seeded interleaving; each step's gradient is computed on the weights as they were D updates
// earlier, D drawn from a delay model (src/train/simulate_delay.c), and the step lands on the
// current weights (src/train/simulate.c). What staleness does to convergence is then separated
// from what the cores, caches and races of a real run do, and every run replays bit for bit.
//
// The delay models, as --delay names them:
//   fixed:K        always K
//   uniform:K      uniform in 0..K
//   geometric:P    P(D = d) = (1 - P)^d P (mean (1 - P) / P), 0 < P <= 1, cut where the tail
//                  P(D > d) falls below HW_DELAY_TAIL and drawn again beyond it
//   measured:FILE  the staleness histogram of a metrics CSV that a --measure run wrote (its last
//                  row: the whole run's): a bin drawn by its count, then a delay uniformly within
//                  the bin; the open last bin, 1024 and more, is HW_DELAY_MAX
// Every model's largest delay is at most HW_DELAY_MAX: the simulator keeps that many old copies
// of the weights.
#ifndef HW_SIMULATE_H
#define HW_SIMULATE_H

#include "hw/rng.h"

#include <stdint.h>

// The largest delay a model may draw, and the longest --delay text and its NUL.
enum { HW_DELAY_MAX = 1024, HW_DELAY_SPEC_CAP = 256 };
// The tail at which geometric:P is cut.
#define HW_DELAY_TAIL 1e-4
// The bins of a measured histogram: [0], [1], [2,4), ..., [512,1024), [1024, inf) (hw/metrics.h's).
enum { HW_DELAY_BINS = 12 };

typedef enum { HW_DELAY_FIXED, HW_DELAY_UNIFORM, HW_DELAY_GEOMETRIC, HW_DELAY_MEASURED } hw_delay_kind;

typedef struct {
    hw_delay_kind kind;
    int max;   // the largest delay it draws (fixed's and uniform's K; geometric's cut; measured's top bin)
    double p;  // geometric: the chance of delay 0
    int64_t hist[HW_DELAY_BINS];   // measured: the counts of each bin
    int64_t total;                 // measured: their sum (> 0)
    char spec[HW_DELAY_SPEC_CAP];  // as given ("uniform:8", "measured:runs/hw4.csv"): what checkpoints record
} hw_delay;

// Reads a --delay text into *delay. Fails naming what is wrong: an unknown model, a malformed or
// out-of-range number (K from 0 to HW_DELAY_MAX; P in (0, 1] and not so small that the tail
// reaches past HW_DELAY_MAX), a text longer than HW_DELAY_SPEC_CAP - 1, and for measured:FILE a
// file that cannot be read as a metrics CSV or has no staleness histogram (no --measure columns,
// or all counts zero).
int hw_delay_parse(const char *text, hw_delay *delay);
// One delay in 0..delay->max, from `rng`.
int hw_delay_draw(const hw_delay *delay, hw_rng *rng);
// The mean delay the model draws (exact, from its distribution).
double hw_delay_mean(const hw_delay *delay);

#endif
