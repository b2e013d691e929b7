// resume_settings: what --resume restores besides the weights (src/cli/resume_settings.c): the
// seed, the learning-rate schedule and the model text the checkpoint was trained with.
#ifndef HW_CLI_RESUME_SETTINGS_H
#define HW_CLI_RESUME_SETTINGS_H

#include "cli/options.h"
#include "hw/train.h"

// With --resume (and not --eval-only, which trains nothing): reads the checkpoint's metadata and
// sets each setting it records that the command line did not give: the seed (--seed), the
// schedule (--lr-schedule), its warm-up (--warmup) and the model (--model: the checkpoint's own
// text, as --eval-only takes it), so that the run goes on as the one that
// saved it would have. A setting given that differs from the recorded one wins, and stderr says
// so (rank 0 only); a recorded value this build cannot read is refused, never replaced by a
// default. HW_EXIT_OK, or HW_EXIT_FAILURE with the message printed.
int cli_resume_settings(hw_train_config *config, const cli_parsed *given);

// After cli_resume_settings: adds to `as_run` (a copy of the options given, against `command`, the
// training table) the rate, the schedule and the warm-up the run trains with, each that was not
// given, as if given: a resumed run's setup hash and settings text name what it trains as, not the
// defaults (a run resumed at a recorded --lr 0.05 would otherwise group with runs at 0.01). Nothing
// without --resume or with --eval-only.
void cli_resume_as_given(const hw_train_config *config, const cli_command *command, cli_parsed *as_run);

#endif
