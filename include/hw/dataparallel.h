// dataparallel: the DataParallel step on CPU replicas, a team of threads (src/train/dataparallel.c),
// and how a batch is split among replicas, CPU or GPU (src/train/dataparallel_loop.c). The trainer
// itself, hw_train_dataparallel, is hw/train.h's.
#ifndef HW_DATAPARALLEL_H
#define HW_DATAPARALLEL_H

#include "hw/nn.h"

#include <stdint.h>

// A team of CPU replicas (threads of this process, src/train/dataparallel.c), exposed for the
// equivalence tests.
typedef struct hw_dp_team hw_dp_team;
// Chunk k (src/train/dataparallel_loop.c) of a batch of `batch` samples split over `replicas`:
// sizes differ by at most one; with replicas > batch some are empty. The one rule of both the CPU
// and the GPU replicas.
void hw_dp_chunk(int batch, int replicas, int k, int *offset, int *count);
// Opens `replicas` replicas (replica 0 is the caller's thread, 1.. are threads) with workspaces for
// chunks of max_batch / replicas. On failure it names the step and the replica, undoes what it did
// (no thread left behind) and sets *team to NULL. HOGWILD_FAIL_DP_SETUP (tests only, see
// dataparallel.c) makes one step of it fail.
int hw_dp_team_open(hw_dp_team **team, const hw_model *model, int replicas, int max_batch, uint64_t seed);
// The DataParallel step on the team: the batch is split into the replicas' chunks (hw_dp_chunk),
// each replica runs forward and backward on its chunk, and the chunk gradients, weighted by chunk
// size, are summed onto the primary's buffer (*grads): the gradient of the whole batch's mean
// loss, as one replica would compute it, up to float rounding. Returns the batch's mean loss. No
// SGD step: the caller takes it.
float hw_dp_team_step(hw_dp_team *team, const float *x, const uint8_t *y, int batch, const float **grads);
// After a step: the first replica whose chunk loss was not finite (NaN, inf), or -1.
int hw_dp_team_diverged(const hw_dp_team *team);
void hw_dp_team_close(hw_dp_team *team);  // NULL: nothing

#endif
