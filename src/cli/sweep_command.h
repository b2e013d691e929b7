// sweep_command: `hogwild sweep --dir DIR --workers 1,2,4 --mode hogwild,dataparallel --seeds 1-5
// [--lr 0.01,0.05] -- TRAINING FLAGS` (src/cli/sweep_command.c): a grid of training runs, one after
// another, each into its own CSV in DIR, then compare over DIR (src/cli/sweep_run.c runs them).
#ifndef HW_CLI_SWEEP_COMMAND_H
#define HW_CLI_SWEEP_COMMAND_H

// Given the arguments after the word "sweep" (argv[0] is the first of them). Returns the exit
// status: 0; 1 when a run or compare failed; 2 on bad usage, a bad grid or training flags that a
// run would refuse, before any run; 128 + the signal when stopped.
int cli_sweep_run(int argc, char **argv);

#endif
