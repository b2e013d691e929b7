// main: the command line of ./hogwild. It reads the arguments and hands each command to the file
// that runs it, and does no work of its own: download, synth and stats (data_commands.c), compare
// (compare_command.c), sweep (sweep_command.c), --version, --summary and the process runtime's
// options (info_commands.c), training and --eval-only (train_command.c) once their flags keep the
// rules (train_rules.c).
#include "cli/compare_command.h"
#include "cli/data_commands.h"
#include "cli/info_commands.h"
#include "cli/options.h"
#include "cli/resume_settings.h"
#include "cli/run_identity.h"
#include "cli/sweep_command.h"
#include "cli/train_command.h"
#include "cli/train_options.h"
#include "cli/train_rules.h"
#include "cli/usage.h"
#include "hw/comm.h"
#include "hw/err.h"
#include "hw/metrics.h"
#include "hw/std_streams.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

static int compare_run(int argc, char **argv) { return cli_compare_run(argc - 1, argv + 1, stdout, stderr); }
static int sweep_main(int argc, char **argv) { return cli_sweep_run(argc - 1, argv + 1); }

// The subcommands: the first argument names one, and the rest of the line is its own.
static const struct {
    const char *word;
    int (*run)(int argc, char **argv);  // argv[0] is the word
} subcommands[] = {
    {"download", cli_download_run}, {"synth", cli_synth_run}, {"stats", cli_stats_run},
    {"compare", compare_run},       {"sweep", sweep_main},
};

// Runs subcommand k on argv[1..argc). It runs in one process: under mpirun every rank would run
// it, two downloads, two syntheses, two comparisons writing the same plot at once.
static int subcommand_run(size_t k, int argc, char **argv) {
    hw_world world;
    if (hw_world_detect(&world) == HW_OK && world.size > 1) {
        return cli_usage_error("hogwild %s runs in one process: start it without mpirun", subcommands[k].word);
    }
    return subcommands[k].run(argc - 1, argv + 1);
}

// ./hogwild's own options: what one of them asks alone (--help, --version, --summary, ...), else a
// training run or --eval-only, once the flags keep the rules between them.
static int train_main(int argc, char **argv) {
    hw_train_config config;
    cli_train_defaults(&config);
    cli_parsed given;
    int parsed = cli_parse(&cli_train_command, argc, argv, &config, &given);
    cli_parsed_free(&given);  // no operands: the options given are all that is used
    if (parsed != HW_EXIT_OK) return cli_usage_error("%s", given.error);
    if (given.stop && given.stop->id == HW_OPTION_HELP) {
        cli_usage_print(stdout, 1);
        return HW_EXIT_OK;
    }
    if (given.stop) return cli_version_print();
    if (cli_given(&given, HW_OPTION_LIST_SHARING_STRATEGIES)) return cli_strategies_print();
    if (cli_given(&given, HW_OPTION_CLEAN_SHM)) return cli_shm_clean_run();
    if (cli_given(&given, HW_OPTION_SUMMARY)) return cli_summary_print(&config, &given);
    static char settings[HW_METRICS_SETTINGS_CAP];  // the run's: config.settings points here
    config.setup_hash = cli_run_setup(&cli_train_command, &given, settings, sizeof settings);
    config.settings = settings;
    int status = cli_train_rules_check(&config, &given);
    if (status != HW_EXIT_OK) return status;
    // A resumed run is hashed as it trains, with the rate and schedule its checkpoint restored.
    cli_parsed as_run = given;
    cli_resume_as_given(&config, &cli_train_command, &as_run);
    config.setup_hash = cli_run_setup(&cli_train_command, &as_run, settings, sizeof settings);
    if (config.eval_only) return cli_eval_only_run(&config, cli_given(&given, HW_OPTION_MODEL));
    return cli_train_run(&config);
}

// The command the arguments name, run.
static int command_run(int argc, char **argv) {
    for (size_t k = 0; argc > 1 && k < sizeof subcommands / sizeof subcommands[0]; k++) {
        if (strcmp(argv[1], subcommands[k].word) == 0) return subcommand_run(k, argc, argv);
    }
    return train_main(argc, argv);
}

int main(int argc, char **argv) {
    // Before any file is opened: a closed stdout must not become the shared memory's descriptor.
    hw_std_streams_open();
    // A closed stdout (`hogwild ... | head -1`) must not kill a run: writes then fail with EPIPE,
    // hw_progress_message stops printing, and training goes on to its checkpoint.
    signal(SIGPIPE, SIG_IGN);
    // A write beyond the file size limit (ulimit -f) then fails with EFBIG, which the checkpoint and
    // metrics writers report, instead of killing the run.
    signal(SIGXFSZ, SIG_IGN);
    // The flags of the options the other rooms' messages are about (hw/option.h).
    cli_name_options(&cli_train_command);
    // Output lost on stdout (disk full, /dev/full) is a failure, not exit 0.
    return hw_std_streams_finish("hogwild", command_run(argc, argv));
}
