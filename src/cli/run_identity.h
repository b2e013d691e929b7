// run_identity: the setup hash and the settings text of a training run's metrics (src/cli/run_identity.c), from the
// options given and the table's defaults: what compare groups runs by, beside the seed, the mode,
// the workers and the model.
#ifndef HW_CLI_RUN_IDENTITY_H
#define HW_CLI_RUN_IDENTITY_H

#include "cli/options.h"

#include <stdint.h>

// A 64-bit FNV-1a hash of the training settings of `given` (parsed against `command`, the training
// table): each option's name and its value in one spelling ("0.010" and "0.01" alike) where that
// value differs from the option's default, in the table's order. Left out: the seed, the mode and
// the workers and replicas (the metrics' own columns), and what changes no result: where the
// outputs go (--metrics, --save, --overwrite, --resume, --quiet) and the process runtime's options.
// An option at its default is left out whether given or not, so that an option added to hogwild
// later, at its default, leaves the hash of a setup as it was.
// The settings text, into settings[cap] (HW_METRICS_SETTINGS_CAP): the same settings as the hash,
// each "name=value" with the value in its one spelling, joined by blanks ("epochs=10
// lr-schedule=cosine"), escaped for a CSV field (a comma as %2C); "" when every setting is at its
// default. Settings past cap are left out and the text ends with "...". Returns the hash.
uint64_t cli_run_setup(const cli_command *command, const cli_parsed *given, char *settings, size_t cap);

#endif
