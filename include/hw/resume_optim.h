// resume_optim: the optimizer state a checkpoint keeps beside the weights, so that --resume goes
// on where the run stopped, bit for bit with one worker (src/train/resume_optim.c): the momentum
// buffers (velocities) and the dropout generators of CPU Hogwild's workers (one each) or of CPU
// DataParallel (one velocity, a generator per replica).
//
// In the file: tensors optim.velocity.worker<K>.<param> (Hogwild) or optim.velocity.<param>
// (DataParallel), laid out as the weights, when the momentum is above 0; metadata optim_trainer
// ("hogwild", "dataparallel"), optim_workers (workers, or replicas), optim_momentum, and
// dropout_rng, each generator as "<state>:<increment>" in 16 hex digits, comma-separated, in the
// workers' or replicas' order. Every reader of weights skips the tensors (HW_CKPT_STATE_PREFIX).
#ifndef HW_RESUME_OPTIM_H
#define HW_RESUME_OPTIM_H

#include "hw/ckpt.h"
#include "hw/nn.h"
#include "hw/train.h"

#include <stddef.h>

typedef struct hw_optim_state {
    hw_mode trainer;
    int workers;        // Hogwild workers, or DataParallel replicas: one generator each
    float momentum;     // the run's
    size_t n_weights;   // floats in each velocity
    int n_velocities;   // workers (Hogwild) or 1 (DataParallel); 0 when momentum is 0
    float *velocities;  // n_velocities buffers of n_weights, one after another
    hw_rng *dropout;    // `workers` generators
    int restored;       // the state was read from --resume's checkpoint
    int valid;          // it is the state at the weights the next save writes (not after a stop mid-epoch)
} hw_optim_state;

// Whether the run's trainer keeps its optimizer state in its checkpoints: CPU Hogwild and CPU
// DataParallel in one process. The GPU trainers, the simulator and mpirun ranks do not.
int hw_optim_kept(const hw_train_config *config);
// The state of a run that starts fresh: velocities zero, each generator seeded as the trainer
// seeds its workspaces (hw_workspace_seed with `seed_of(config, k)`); valid. HW_ERR when out of
// memory, naming the bytes.
int hw_optim_state_open(hw_optim_state *state, const hw_train_config *config, size_t n_weights,
                        uint64_t (*seed_of)(const hw_train_config *config, int k));
void hw_optim_state_close(hw_optim_state *state);
// With --resume: the checkpoint's state replaces the fresh one when it was saved by the same
// trainer, worker (replica) count and momentum (state->restored = 1). Otherwise the weights
// resume alone and stderr says in one line why the optimizer state restarts (rank 0; not when the
// run has no state to lose: momentum 0 and no dropout layer, and the file keeps none). HW_ERR only
// for a file whose state is malformed, naming it.
int hw_optim_state_resume(hw_optim_state *state, const hw_train_config *config, const hw_model *model);
// For a trainer that keeps no state (hw_optim_kept 0) resumed: the one line saying that its
// optimizer state restarts, unless the run has none (momentum 0, no dropout layer). Rank 0 only.
void hw_optim_note_not_kept(const hw_train_config *config, const hw_model *model);
// Saves `weights` with `meta` and, when `state` is valid (NULL: none), the state beside them
// (hw_ckpt_save_extra).
int hw_optim_checkpoint_save(const char *path, const hw_model *model, const float *weights, const hw_ckpt_meta *meta,
                             const hw_optim_state *state);

#endif
