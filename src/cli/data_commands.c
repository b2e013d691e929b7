// data_commands: `hogwild download NAME` (src/cli/data_commands.h).
#include "cli/data_commands.h"

#include "cli/options.h"
#include "cli/usage.h"
#include "hw/data.h"
#include "hw/err.h"

#include <stdint.h>
#include <stdio.h>

// The usage text, then the table of options (data_commands.h).
int cli_command_help_print(const cli_command *command, const char *usage) {
    fputs(usage, stdout);
    cli_print_options(command, stdout);
    return HW_EXIT_OK;
}

// ---- download ----

typedef struct {
    const char *dir;
} download_args;

static const cli_option download_options[] = {
    {.name = "dir",
     .metavar = "DIR",
     .kind = CLI_TEXT,
     .field = offsetof(download_args, dir),
     .help = "where to write the four IDX files (default data/NAME)"},
    {.name = "help", .short_name = 'h', .kind = CLI_SWITCH, .field = CLI_NO_FIELD, .stops = 1, .help = "this text"},
};

static const cli_command download_command = {
    .options = download_options,
    .n_options = sizeof download_options / sizeof download_options[0],
    .missing = "option '%s' needs a folder",
    .empty = "option '%s' needs a folder",
    .operands = 1,
    .help_column = 19,
};

int cli_download_run(int argc, char **argv) {
    download_args args = {0};
    cli_defaults(&download_command, &args);
    cli_parsed parsed;
    int status = cli_parse(&download_command, argc, argv, &args, &parsed);
    if (status != HW_EXIT_OK) {
        cli_parsed_free(&parsed);
        return cli_usage_error("download: %s", parsed.error);
    }
    if (parsed.stop) {
        cli_parsed_free(&parsed);
        return cli_command_help_print(&download_command, "usage: hogwild download NAME [--dir DIR]\n"
                                                         "Gets mnist or fashion-mnist, md5-checked.\n\n");
    }
    const char *name;
    status = cli_one_operand(&parsed, "download", "dataset name", "mnist or fashion-mnist", &name);
    cli_parsed_free(&parsed);
    if (status != HW_EXIT_OK) return status;
    // A name it does not know is bad usage (exit 2), as a missing one is; KMNIST's files load with
    // --data once fetched by hand.
    if (!hw_download_known(name)) {
        return cli_usage_error("download: unknown dataset '%s': known are mnist and fashion-mnist (KMNIST and other "
                               "IDX datasets load with --data DIR once their four files are there)",
                               name);
    }
    char default_dir[512];
    const char *dir = args.dir;
    if (!dir) {
        snprintf(default_dir, sizeof default_dir, "data/%s", name);
        dir = default_dir;
    }
    if (hw_download(name, dir) != HW_OK) return cli_failure("hogwild download");
    return HW_EXIT_OK;
}
