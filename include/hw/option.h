// option: what a user sets, as the rest of the code names it in an error. Only src/cli/ knows the
// command line's flags: a module's message says what is wrong in its own terms ("the learning
// rate") and, where the user must know which setting to change, adds hw_option_hint(HW_OPTION_LR),
// which is " (--lr)" once the command line has named its options (hw_option_hint_set, from its
// table of options, src/cli/options.c), and "" in a program that has none (the tests of one module).
// Every row of ./hogwild's table of options has its id, by which the command line's own rules find
// it too (cli_given): a misspelt option is then a name that does not compile, not a lookup that fails.
#ifndef HW_OPTION_H
#define HW_OPTION_H

typedef enum {
    HW_OPTION_NONE,  // no option: a table row that no message is about
    HW_OPTION_MODE,
    HW_OPTION_WORKERS,
    HW_OPTION_REPLICAS,
    HW_OPTION_GPUS,
    HW_OPTION_DEVICE,
    HW_OPTION_MODEL,
    HW_OPTION_DATA,
    HW_OPTION_RESIZE,
    HW_OPTION_EPOCHS,
    HW_OPTION_BATCH_SIZE,
    HW_OPTION_LR,
    HW_OPTION_LR_SCHEDULE,
    HW_OPTION_WARMUP,
    HW_OPTION_MOMENTUM,
    HW_OPTION_WEIGHT_DECAY,
    HW_OPTION_NESTEROV,
    HW_OPTION_SEED,
    HW_OPTION_NORMALIZE,
    HW_OPTION_FREEZE,
    HW_OPTION_EVAL_EVERY,
    HW_OPTION_METRICS,
    HW_OPTION_RESUME,
    HW_OPTION_MEASURE,
    HW_OPTION_SIMULATE,
    HW_OPTION_DELAY,
    HW_OPTION_UPDATE,
    HW_OPTION_WEIGHTS,
    HW_OPTION_MAX_STALENESS,
    HW_OPTION_SYNC_EVERY,
    HW_OPTION_SYNC_RULE,
    HW_OPTION_SYNC_TIMEOUT,
    HW_OPTION_TEST_BATCH_SIZE,
    HW_OPTION_PREFETCH,
    HW_OPTION_SAVE,
    HW_OPTION_OVERWRITE,
    HW_OPTION_EVAL_ONLY,
    HW_OPTION_QUIET,
    HW_OPTION_SHARING_STRATEGY,
    HW_OPTION_LIST_SHARING_STRATEGIES,
    HW_OPTION_CLEAN_SHM,
    HW_OPTION_HELP,
    HW_OPTION_VERSION,
    HW_OPTION_SUMMARY,
    HW_OPTION_COUNT
} hw_option;

// Sets the hint of `option`, the command line's name for it (" (--lr)"), copied. Called by the
// command line before anything runs (no lock: workers and threads only read the hints).
void hw_option_hint_set(hw_option option, const char *hint);

// " (--lr)" for HW_OPTION_LR once named, "" before: the end of a phrase in a message, e.g.
// hw_fail("the learning rate %g made the loss diverge; try a lower one%s", lr, hw_option_hint(HW_OPTION_LR)).
const char *hw_option_hint(hw_option option);

#endif
