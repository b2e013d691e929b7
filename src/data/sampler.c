// sampler: torch's DistributedSampler(shuffle=True, drop_last=False) without the padding.
//
// Every rank draws the same permutation of [0, n) from (seed, epoch) and keeps positions
// rank, rank + replicas, ... So the shards are disjoint and cover every index once; their sizes
// differ by at most one (torch pads the short ones with repeats instead, so that every rank takes
// the same number of steps; Hogwild workers need no lockstep, so nothing is repeated here).
#include "hw/data.h"
#include "hw/err.h"
#include "hw/rng.h"

#include <stdlib.h>

int64_t hw_sampler_shard_size(int64_t n, int replicas, int rank) {
    if (n <= 0 || replicas < 1 || rank < 0 || rank >= replicas) return 0;
    return n / replicas + (rank < n % replicas ? 1 : 0);
}

int hw_sampler_shard(int64_t *out, int64_t n, int replicas, int rank, int epoch, uint64_t seed) {
    if (n < 0) return hw_fail("sampler: negative dataset size %lld", (long long)n);
    if (replicas < 1) return hw_fail("sampler: replicas must be at least 1, got %d", replicas);
    if (rank < 0 || rank >= replicas) return hw_fail("sampler: rank %d is outside 0..%d", rank, replicas - 1);
    if (n == 0) return HW_OK;
    int64_t *perm = malloc((size_t)n * sizeof *perm);
    if (!perm) return hw_fail("sampler: out of memory for a permutation of %lld indices", (long long)n);
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    // Fisher-Yates, one stream per epoch: the same order in every run and on every rank.
    hw_rng rng;
    hw_rng_seed(&rng, seed, (uint64_t)(uint32_t)epoch);
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)hw_rng_below64(&rng, (uint64_t)i + 1);
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    int64_t k = 0;
    for (int64_t pos = rank; pos < n; pos += replicas) out[k++] = perm[pos];
    free(perm);
    return HW_OK;
}
