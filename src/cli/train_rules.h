// train_rules: the rules between ./hogwild's training flags (src/cli/train_rules.c), checked after
// the parse and before anything runs. A combination that cannot do what it says is refused as bad
// usage, naming the flags, rather than half obeyed; what one flag settles for another is set here
// (--gpus: the device, and DataParallel's replicas; under mpirun, what a rank other than 0 writes).
#ifndef HW_CLI_TRAIN_RULES_H
#define HW_CLI_TRAIN_RULES_H

#include "cli/options.h"
#include "hw/train.h"

// Checks the rules in their order (train_rules.c, `rules`), the first one broken refused, and
// detects the run's place in an mpirun job (config->world) on the way. HW_EXIT_OK, HW_EXIT_USAGE
// (the usage error printed) or HW_EXIT_FAILURE (the message printed).
int cli_train_rules_check(hw_train_config *config, const cli_parsed *given);

#endif
