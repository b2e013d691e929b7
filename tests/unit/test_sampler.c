// Tests of the sharding sampler: DistributedSampler semantics without padding.
#include "hw/data.h"
#include "hw/err.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

TestSuite(sampler, .timeout = 30);

Test(sampler, every_index_once_per_epoch_across_ranks) {
    const int64_t sizes[] = {1, 2, 7, 100, 1001};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int64_t n = sizes[s];
        int *seen = malloc((size_t)n * sizeof *seen);
        int64_t *shard = malloc((size_t)n * sizeof *shard);
        for (int replicas = 1; replicas <= 7; replicas++) {
            for (int epoch = 0; epoch < 3; epoch++) {
                memset(seen, 0, (size_t)n * sizeof *seen);
                int64_t total = 0, smallest = n, largest = 0;
                for (int rank = 0; rank < replicas; rank++) {
                    int64_t size = hw_sampler_shard_size(n, replicas, rank);
                    cr_assert_eq(hw_sampler_shard(shard, n, replicas, rank, epoch, 42), HW_OK, "%s", hw_error());
                    for (int64_t i = 0; i < size; i++) {
                        cr_assert(shard[i] >= 0 && shard[i] < n);
                        seen[shard[i]]++;
                    }
                    total += size;
                    if (size < smallest) smallest = size;
                    if (size > largest) largest = size;
                }
                cr_assert_eq(total, n);
                cr_assert_leq(largest - smallest, 1, "n %lld replicas %d", (long long)n, replicas);
                for (int64_t i = 0; i < n; i++) {
                    cr_assert_eq(seen[i], 1, "n %lld replicas %d epoch %d: index %lld seen %d times", (long long)n,
                                 replicas, epoch, (long long)i, seen[i]);
                }
            }
        }
        free(seen);
        free(shard);
    }
}

Test(sampler, new_order_every_epoch_same_for_the_same_seed) {
    enum { N = 1000 };
    int64_t a[N], b[N], c[N];
    cr_assert_eq(hw_sampler_shard(a, N, 1, 0, 0, 7), HW_OK);
    cr_assert_eq(hw_sampler_shard(b, N, 1, 0, 1, 7), HW_OK);
    cr_assert_eq(hw_sampler_shard(c, N, 1, 0, 0, 7), HW_OK);
    cr_expect_eq(memcmp(a, c, sizeof a), 0, "same seed and epoch: same order");
    int same = 0, in_place = 0;
    for (int i = 0; i < N; i++) {
        same += a[i] == b[i];
        in_place += a[i] == i;
    }
    // A random permutation agrees with another in about one position, and fixes about one.
    cr_expect_lt(same, 10, "epochs 0 and 1 share %d positions", same);
    cr_expect_lt(in_place, 10, "%d indices in their own place: not shuffled", in_place);
    cr_assert_eq(hw_sampler_shard(c, N, 1, 0, 0, 8), HW_OK);
    cr_expect_neq(memcmp(a, c, sizeof a), 0, "another seed: another order");
}

Test(sampler, shard_is_round_robin_of_one_permutation) {
    enum { N = 23 };
    int64_t full[N], shard[N];
    cr_assert_eq(hw_sampler_shard(full, N, 1, 0, 5, 99), HW_OK);
    for (int rank = 0; rank < 4; rank++) {
        cr_assert_eq(hw_sampler_shard(shard, N, 4, rank, 5, 99), HW_OK);
        for (int64_t k = 0; k < hw_sampler_shard_size(N, 4, rank); k++) cr_expect_eq(shard[k], full[rank + 4 * k]);
    }
}

Test(sampler, bad_arguments) {
    int64_t out[4];
    cr_expect_eq(hw_sampler_shard(out, 4, 0, 0, 0, 1), HW_ERR);
    cr_expect(strstr(hw_error(), "replicas") != NULL, "%s", hw_error());
    cr_expect_eq(hw_sampler_shard(out, 4, 2, 2, 0, 1), HW_ERR);
    cr_expect(strstr(hw_error(), "rank 2") != NULL, "%s", hw_error());
    cr_expect_eq(hw_sampler_shard_size(4, 2, 5), 0);
    cr_expect_eq(hw_sampler_shard_size(5, 2, 0), 3);
    cr_expect_eq(hw_sampler_shard_size(5, 2, 1), 2);
    cr_expect_eq(hw_sampler_shard(out, 0, 3, 1, 0, 1), HW_OK, "an empty dataset has empty shards");
}
