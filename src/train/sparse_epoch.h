// sparse_epoch: one epoch of a sparse model's training, Hogwild or DataParallel, private to
// src/train/ (src/train/sparse_train.c); the run around the epochs is sparse_run.c's.
#ifndef HW_TRAIN_SPARSE_EPOCH_H
#define HW_TRAIN_SPARSE_EPOCH_H

#include "hogwild_measure.h"
#include "hogwild_update.h"
#include "hw/sparse_train.h"

#include <stdatomic.h>
#include <stdint.h>

// What one worker (or the DataParallel trainer) trained in the epoch so far, on a cache line of
// its own in the shared mapping: the parent reads it after the join, or after a stop.
typedef struct {
    int64_t samples;  // examples stepped on
    double loss_sum;  // their training losses summed, each at the weights its step read
    char pad[48];
} sparse_tally;

// What the workers of one epoch share: the model, the data, the epoch's permutation, the weights,
// and each worker's momentum buffer, all in the shared mapping but the model, data and order.
typedef struct {
    const hw_train_config *config;
    const hw_sparse_model *model;
    const hw_sparse_set *train;
    const int64_t *order;
    float *weights;
    // The velocities: config->workers buffers (Hogwild; worker k's the k-th) or one (DataParallel)
    // of the model's n_weights floats each, NULL at momentum 0. In the shared mapping, so that a
    // worker forked at the next epoch goes on with the velocity its rank's worker left.
    float *velocities;
    atomic_llong *samples;  // the run's training samples so far, all workers, earlier runs' included
    sparse_tally *tally;    // config->workers of them (Hogwild), one (DataParallel)
    hw_measure *measure;    // --measure (Hogwild), else NULL
    hogwild_update update;  // --update: how a Hogwild step writes (its lock in the shared mapping)
} sparse_job;

// Trains one epoch over job->order, zeroing the tallies first. A stop signal (SIGINT, SIGTERM,
// SIGHUP) ends it early: *stopped_by gets the signal and the weights are what was trained by
// then (HW_OK). HW_ERR, with the message set, when a worker failed.
int sparse_epoch_train(sparse_job *job, int *stopped_by);

// The epoch's order of the n training examples: a permutation drawn from the seed and the epoch.
void sparse_order_draw(int64_t *order, int64_t n, uint64_t seed, int epoch);

#endif
