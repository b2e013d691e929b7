// preflight_limits: the limits a run must fit in, checked before it starts: the batch sizes against
// the data, the stack size limit, and the address space a run needs against RLIMIT_AS (ulimit -v).
//
// Why up front: OpenBLAS maps its work buffer (128 MiB in Debian's builds) on the first call of a
// thread, and when that mmap fails under a limit it retries forever at 100% CPU instead of
// returning (seen in the serial and the pthread builds). Nothing after that point can report
// the failure, so a run that would not fit is refused before it trains or evaluates.
//
// The estimate, per process (the limit is per process; a Hogwild worker is a fork of the parent
// and starts with the parent's whole address space):
//   what is mapped now (/proc/self/statm: code, libraries, the loaded data)
//   + the weights' copies (shared, snapshot, a worker's local copy, gradients, momentum)
//   + one workspace per training thread or worker, and one for evaluation
//   + per thread that calls the BLAS: HW_BLAS_BUFFER_BYTES for OpenBLAS's buffer, plus a thread's
//     stack and its malloc arena (glibc reserves 64 MiB of address space per arena)
//   + HW_MEMORY_MARGIN_BYTES for everything smaller.
#include "preflight.h"

#include "hw/err.h"
#include "hw/procfs.h"
#include "hw/resume_optim.h"

#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

#define MIB (1024.0 * 1024.0)

enum {
    HW_BLAS_BUFFER_BYTES = 128 << 20,  // OpenBLAS's BUFFER_SIZE on x86-64 (Debian: 128 MiB)
    HW_THREAD_BYTES = (64 + 8) << 20,  // a malloc arena and a stack
    HW_MEMORY_MARGIN_BYTES = 64 << 20,
};

// What one workspace of `batch` samples holds: activations and their gradients, the masks and
// argmaxes kept for backward, the largest scratch, and a flat gradient buffer.
static double workspace_bytes(const hw_model *model, int batch) {
    double floats = (double)model->n_weights + (double)batch * (double)hw_shape_numel(model->input);
    double bytes = 0, scratch = 0;
    for (int i = 0; i < model->n_layers; i++) {
        const hw_layer *layer = &model->layers[i];
        floats += 2.0 * (double)batch * (double)hw_shape_numel(layer->out_shape);
        if (layer->type->saved_bytes) bytes += (double)layer->type->saved_bytes(layer, batch);
        if (layer->type->scratch_floats) {
            double s = (double)layer->type->scratch_floats(layer, batch);
            if (s > scratch) scratch = s;
        }
    }
    return bytes + 4.0 * (floats + scratch);
}

// The optimizer state a checkpoint keeps (include/hw/resume_optim.h), in every process: the
// parent's copy of every velocity (a Hogwild worker's fork maps it too) and, for Hogwild with
// --save, the shared slots the workers publish theirs in.
static double optim_state_bytes(const hw_train_config *config, double weights) {
    if (!hw_optim_kept(config) || (!config->resume_path && !config->save_path) || !(config->momentum > 0)) return 0;
    double velocities = config->mode == HW_MODE_HOGWILD ? (double)config->workers * weights : weights;
    int published = config->mode == HW_MODE_HOGWILD && config->save_path;
    return velocities * (published ? 2 : 1);
}

double preflight_memory_estimate(const hw_train_config *config, const hw_train_inputs *in, int eval_only) {
    const hw_model *model = &in->model;
    double weights = 4.0 * (double)model->n_weights;
    double eval = workspace_bytes(model, config->test_batch_size) + weights + HW_BLAS_BUFFER_BYTES;
    double need = hw_process_mapped_bytes() + HW_MEMORY_MARGIN_BYTES;
    if (eval_only) return need + eval;
    // The CPU trainers; a GPU run keeps its big buffers on the device.
    int gpu = config->device.type == HW_DEVICE_CUDA;
    if (config->simulate) {
        // One process: the weights, K old copies of them, gradients and momentum, one workspace,
        // the epoch's order, the snapshot and the evaluation.
        return need + (3.0 + config->delay.max) * weights + workspace_bytes(model, config->batch_size) +
               8.0 * (double)in->train.n + HW_BLAS_BUFFER_BYTES + weights + eval;
    }
    if (config->mode == HW_MODE_HOGWILD) {
        // The parent: shared weights, snapshot, evaluation. A worker (a fork of it): its local
        // copy, gradients, momentum, its shard and its workspace. One BLAS buffer per process, the
        // evaluation's in `eval`: the parent evaluates in one thread, a worker steps in one, and a
        // worker forked after the parent's first evaluation reuses the buffer it inherits.
        double worker = gpu ? 0
                            : 3.0 * weights + workspace_bytes(model, config->batch_size) +
                                  8.0 * (double)in->train.n / config->workers;
        if (config->prefetch) worker += HW_THREAD_BYTES;
        return need + 2.0 * weights + eval + worker + optim_state_bytes(config, weights);
    }
    int replicas = config->replicas;
    double per_replica = gpu ? HW_THREAD_BYTES
                             : 3.0 * weights + workspace_bytes(model, config->batch_size / replicas + 1) +
                                   HW_BLAS_BUFFER_BYTES + HW_THREAD_BYTES;
    return need + 2.0 * weights + 8.0 * (double)in->train.n + eval + replicas * per_replica +
           optim_state_bytes(config, weights);
}

int preflight_stack(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_STACK, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= HW_MIN_STACK_BYTES) {
        return HW_OK;
    }
    return hw_fail("the stack size limit (ulimit -s) is %llu KiB; hogwild needs at least %d KiB for each process and "
                   "thread (a model's description alone takes 32 KiB of it; below that a worker dies of SIGSEGV)",
                   (unsigned long long)rl.rlim_cur / 1024, HW_MIN_STACK_BYTES / 1024);
}

int preflight_memory(const hw_train_config *config, const hw_train_inputs *in, int eval_only) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return HW_OK;
    double need = preflight_memory_estimate(config, in, eval_only);
    double limit = (double)rl.rlim_cur;
    if (need <= limit) return HW_OK;
    // What to lower is what this command takes: --eval-only refuses the workers and the batch size.
    char advice[160];
    if (eval_only) {
        snprintf(advice, sizeof advice, "a smaller test batch%s", hw_option_hint(HW_OPTION_TEST_BATCH_SIZE));
    } else if (config->mode == HW_MODE_HOGWILD) {
        snprintf(advice, sizeof advice, "a smaller batch%s or fewer workers%s", hw_option_hint(HW_OPTION_BATCH_SIZE),
                 hw_option_hint(HW_OPTION_WORKERS));
    } else {
        snprintf(advice, sizeof advice, "a smaller batch%s or fewer replicas%s", hw_option_hint(HW_OPTION_BATCH_SIZE),
                 hw_option_hint(HW_OPTION_REPLICAS));
    }
    return hw_fail("this %s needs about %.0f MiB of address space per process (of which %.0f MiB per thread for "
                   "OpenBLAS's buffer) but the address space limit (ulimit -v) is %.0f MiB; raise the limit, or "
                   "use %s",
                   eval_only ? "evaluation" : "run", need / MIB, HW_BLAS_BUFFER_BYTES / MIB, limit / MIB, advice);
}

void preflight_fit_batches(hw_train_config *config, const hw_train_inputs *in, char *note, size_t cap) {
    note[0] = '\0';
    // A Hogwild worker never has more than its shard in a batch; DataParallel's batch is the world's.
    int64_t sharers = config->mode == HW_MODE_HOGWILD ? (int64_t)config->workers * config->world.size : 1;
    int64_t most = (in->train.n + sharers - 1) / sharers;
    size_t used = 0;
    if (most >= 1 && config->batch_size > most) {
        used += (size_t)snprintf(
            note + used, cap - used,
            "--batch-size %d is more than %s (%lld samples): capped to %lld, which trains the same", config->batch_size,
            sharers > 1 ? "a worker's share of the training data" : "the training data", (long long)most,
            (long long)most);
        config->batch_size = (int)most;
    }
    if (in->test.n >= 1 && config->test_batch_size > in->test.n && used < cap) {
        snprintf(note + used, cap - used, "%s--test-batch-size %d is more than the %lld test samples: capped to %lld",
                 used ? "; " : "", config->test_batch_size, (long long)in->test.n, (long long)in->test.n);
        config->test_batch_size = (int)in->test.n;
    }
}

int preflight_warmup(const hw_train_config *config, int64_t train_n) {
    int64_t warmup = config->lr_schedule.warmup;
    int64_t run = (int64_t)config->epochs * train_n * (config->world.size > 1 ? config->world.size : 1);
    if (warmup <= 0 || warmup < run) return HW_OK;
    return hw_fail("the warm-up of %lld samples (--warmup) is as long as the whole run or longer (%d epoch(s) of %lld "
                   "samples: %lld): the rate would never reach --lr %g; give a shorter warm-up or more --epochs",
                   (long long)warmup, config->epochs, (long long)train_n, (long long)run, (double)config->lr);
}
