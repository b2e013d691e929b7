// lr_schedule: the step size as a function of the samples a run has seen (src/nn/lr_schedule.c),
// the schedules of torch.optim.lr_scheduler and of the Hogwild literature. Each formula is written
// once, in hw_lr_at, which every trainer calls: a Hogwild worker with the samples all workers have
// seen together (the shared count, as word2vec's word_count_actual), DataParallel once per step,
// ranks with the world's samples.
#ifndef HW_LR_SCHEDULE_H
#define HW_LR_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    HW_LR_CONSTANT,     // lr
    HW_LR_STEP,         // lr * gamma^floor(epoch / every)            torch's StepLR
    HW_LR_EXPONENTIAL,  // lr * gamma^epoch                           ExponentialLR; HOGWILD!'s beta
    HW_LR_LINEAR,       // lr * (1 - s / S), to 0 at the run's end    LinearLR(1, 0); word2vec's decay
    HW_LR_COSINE,       // lr * (1 + cos(pi s / S)) / 2               CosineAnnealingLR(T_max = S)
} hw_lr_kind;

// `epoch` is the whole epochs seen, floor(s / samples per epoch): the step and exponential
// schedules change at epoch boundaries, as torch's do when stepped once per epoch. The linear and
// cosine ones are continuous in s, as torch's are when stepped once per batch; S is the samples of
// the whole run, every epoch of it (a resumed run included), so that a run resumed mid-schedule
// goes on where the checkpoint stopped.
typedef struct {
    hw_lr_kind kind;
    int every;       // HW_LR_STEP: epochs between two multiplications by gamma
    double gamma;    // HW_LR_STEP, HW_LR_EXPONENTIAL
    int64_t warmup;  // samples of linear warm-up from 0 before the schedule's full rate (0: none);
                     // the rate is the schedule's times min(1, s / warmup)
} hw_lr_schedule;

// Reads "constant", "step:EVERY:GAMMA", "exponential:GAMMA", "linear" or "cosine" (EVERY a whole
// number >= 1, GAMMA a decimal in (0, 1]) into *out (warmup 0). HW_ERR, naming what is wrong,
// otherwise.
int hw_lr_schedule_parse(const char *text, hw_lr_schedule *out);

// Writes the schedule as hw_lr_schedule_parse reads it ("step:2:0.5"), without the warm-up.
void hw_lr_schedule_format(const hw_lr_schedule *schedule, char *out, size_t size);

// The rate at `samples` seen, for the base rate `lr`, `epoch_samples` samples per epoch and
// `run_samples` in the whole run (both > 0). Past the run's end the linear and cosine schedules
// stay at 0.
double hw_lr_at(const hw_lr_schedule *schedule, double lr, int64_t samples, int64_t epoch_samples, int64_t run_samples);

// Whether the rate never changes (constant, no warm-up): a trainer then reads no shared count.
static inline int hw_lr_is_constant(const hw_lr_schedule *schedule) {
    return schedule->kind == HW_LR_CONSTANT && schedule->warmup == 0;
}

#endif
