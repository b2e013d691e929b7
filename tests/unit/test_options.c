// The command line's table of options (src/cli/options.c, src/cli/train_options.c): the defaults,
// the parser and the help all come from one table.
#include "cli/options.h"
#include "cli/train_options.h"
#include "hw/err.h"
#include "hw/shm.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// argv is NULL-terminated and starts with the command's name.
static int parse(hw_train_config *config, cli_parsed *parsed, const char **argv) {
    int argc = 0;
    while (argv[argc]) argc++;
    cli_train_defaults(config);
    int status = cli_parse(&cli_train_command, argc, (char **)argv, config, parsed);
    cli_parsed_free(parsed);
    return status;
}

Test(options, defaults_are_pytorchs_mnist_hogwild) {
    hw_train_config c;
    cli_train_defaults(&c);
    cr_expect_eq(c.mode, HW_MODE_HOGWILD);
    cr_expect_eq(c.workers, 2);
    cr_expect_eq(c.replicas, 2);
    cr_expect_eq(c.epochs, 1);
    cr_expect_eq(c.batch_size, 64);
    cr_expect_eq(c.test_batch_size, 1000);
    cr_expect_eq(c.lr, 0.01f);
    cr_expect_eq(c.momentum, 0.5f);
    cr_expect_eq(c.seed, 1u);
    cr_expect_eq(c.norm.mean, HW_MNIST_MEAN);
    cr_expect_eq(c.norm.std, HW_MNIST_STD);
    cr_expect_eq(c.sync_every_ms, 20.0);
    cr_expect_eq(c.sync_timeout, 60.0);
    cr_expect_eq(c.world.size, 1);
    cr_expect_str_eq(c.model_path, "models/lenet.model");
    cr_expect_str_eq(c.data_dir, "data/mnist");
}

Test(options, values_land_in_their_fields) {
    hw_train_config c;
    cli_parsed p;
    const char *argv[] = {"hogwild", "--workers",    "4",   "--lr=0.5", "--seed",        "7", "--quiet", "--eval-every",
                          "100",     "--sync-every", "300", "--save",   "x.safetensors", NULL};
    cr_assert_eq(parse(&c, &p, argv), HW_EXIT_OK, "%s", p.error);
    cr_expect_eq(c.workers, 4);
    cr_expect_eq(c.lr, 0.5f);
    cr_expect_eq(c.seed, 7u);
    cr_expect_eq(c.quiet, 1);
    cr_expect_eq(c.eval_every, 100);
    cr_expect_eq(c.sync_every_samples, 300);
    cr_expect_eq(c.sync_every_ms, 0.0);
    cr_expect_str_eq(c.save_path, "x.safetensors");
    cr_expect(cli_given(&p, HW_OPTION_WORKERS) && cli_given(&p, HW_OPTION_QUIET) && !cli_given(&p, HW_OPTION_EPOCHS));
}

// getopt_long takes an unambiguous prefix; hogwild does not (a typo must not pick a flag).
Test(options, a_prefix_is_an_unknown_option) {
    hw_train_config c;
    cli_parsed p;
    cr_expect_eq(parse(&c, &p, (const char *[]){"hogwild", "--epoch", "3", NULL}), HW_EXIT_USAGE);
    cr_expect_str_eq(p.error, "unknown option '--epoch'");
    cr_expect_eq(parse(&c, &p, (const char *[]){"hogwild", "--seed", NULL}), HW_EXIT_USAGE);
    cr_expect_str_eq(p.error, "option '--seed' needs a value");
    cr_expect_eq(parse(&c, &p, (const char *[]){"hogwild", "--save", "", NULL}), HW_EXIT_USAGE);
    cr_expect_str_eq(p.error, "option '--save' needs a value, got an empty one");
    cr_expect_eq(parse(&c, &p, (const char *[]){"hogwild", "stray", NULL}), HW_EXIT_USAGE);
    cr_expect_str_eq(p.error, "unexpected argument 'stray'");
    cr_expect_eq(parse(&c, &p, (const char *[]){"hogwild", "--workers", "0", NULL}), HW_EXIT_USAGE);
    cr_expect_str_eq(p.error, "--workers expects an integer from 1 to 1024, got '0'");
}

// Found by the hostile pass of issue 27: each of these was taken without a word, or refused in
// words that did not say what was wrong.
Test(options, values_are_decimal_in_range_and_given_once) {
    hw_train_config c;
    cli_parsed p;
    // strtod read "0x10" as 16: a learning rate of 16 from what looks like a typo.
    cr_expect_eq(parse(&c, &p, (const char *[]){"hogwild", "--lr=0x10", NULL}), HW_EXIT_USAGE);
    cr_expect_str_eq(p.error, "--lr expects a decimal number from 0 to 1e9, got '0x10'");
    // 1e10 is >= 0: the refusal said "expects a number >= 0" and left out the upper bound.
    cr_expect_eq(parse(&c, &p, (const char *[]){"hogwild", "--momentum", "1e10", NULL}), HW_EXIT_USAGE);
    cr_expect_str_eq(p.error, "--momentum expects a decimal number from 0 to 1e9, got '1e10'");
    cr_expect_eq(parse(&c, &p, (const char *[]){"hogwild", "--sync-timeout=0", NULL}), HW_EXIT_USAGE);
    cr_expect_str_eq(p.error, "--sync-timeout expects a decimal number from 0.001 to 1e9, got '0'");
    cr_expect_eq(parse(&c, &p, (const char *[]){"hogwild", "--lr", "1e9", "--sync-timeout=2.5", NULL}), HW_EXIT_OK,
                 "%s", p.error);
    cr_expect_eq(c.lr, 1e9f);
    cr_expect_eq(c.sync_timeout, 2.5);
    // The last value won: `--epochs 5 ... --epochs 1` trained one epoch.
    cr_expect_eq(parse(&c, &p, (const char *[]){"hogwild", "--epochs", "5", "--lr=0.1", "--epochs=1", NULL}),
                 HW_EXIT_USAGE);
    cr_expect_str_eq(p.error, "option '--epochs' is given twice ('5', then '1'): give it once");
    cr_expect_eq(parse(&c, &p, (const char *[]){"hogwild", "--device", "cpu", "--device", "cpu", NULL}), HW_EXIT_USAGE);
    cr_expect_str_eq(p.error, "option '--device' is given twice ('cpu', then 'cpu'): give it once");
    // A switch twice says what it says once.
    cr_expect_eq(parse(&c, &p, (const char *[]){"hogwild", "--quiet", "--quiet", NULL}), HW_EXIT_OK, "%s", p.error);
    cr_expect_eq(c.quiet, 1);
    // A switch given a value was an "unknown option", though it is one.
    cr_expect_eq(parse(&c, &p, (const char *[]){"hogwild", "--nesterov=1", NULL}), HW_EXIT_USAGE);
    cr_expect_str_eq(p.error, "option '--nesterov' takes no value, got '--nesterov=1'");
    cr_expect_eq(parse(&c, &p, (const char *[]){"hogwild", "--nesterov-x=1", NULL}), HW_EXIT_USAGE);
    cr_expect_str_eq(p.error, "unknown option '--nesterov-x'");
    // A cluster with -h in it named the program's own path ("unexpected argument '/.../hogwild'").
    cr_expect_eq(parse(&c, &p, (const char *[]){"/usr/bin/hogwild", "-h=1", NULL}), HW_EXIT_USAGE);
    cr_expect_str_eq(p.error, "unexpected argument '-h=1'");
    cr_expect_eq(parse(&c, &p, (const char *[]){"/usr/bin/hogwild", "--quiet", "-hx", NULL}), HW_EXIT_USAGE);
    cr_expect_str_eq(p.error, "unexpected argument '-hx'");
    cr_expect_eq(parse(&c, &p, (const char *[]){"/usr/bin/hogwild", "--quiet", "-h", NULL}), HW_EXIT_OK, "%s", p.error);
    cr_expect_str_eq(p.stop->name, "help");
    // "0," was the list "0".
    cr_expect_eq(parse(&c, &p, (const char *[]){"hogwild", "--gpus=0,", NULL}), HW_EXIT_USAGE);
    cr_expect_str_eq(p.error, "--gpus expects a comma-separated list of GPU indices like 0,1, got '0,'");
    cr_expect_eq(parse(&c, &p, (const char *[]){"hogwild", "--gpus=0,1", NULL}), HW_EXIT_OK, "%s", p.error);
    cr_expect_eq(c.n_gpus, 2);
    // A well-formed list past the limits says which limit, not that the list is malformed.
    cr_expect_eq(parse(&c, &p, (const char *[]){"hogwild", "--gpus=0,1024", NULL}), HW_EXIT_USAGE);
    cr_expect_str_eq(p.error, "--gpus: GPU indices go from 0 to 1023, got 1024");
    cr_expect_eq(parse(&c, &p, (const char *[]){"hogwild", "--gpus=0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0", NULL}),
                 HW_EXIT_USAGE);
    cr_expect_str_eq(p.error, "--gpus lists at most 16 GPUs (an entry may repeat one), got "
                              "'0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0'");
    cr_expect_eq(parse(&c, &p, (const char *[]){"hogwild", "--gpus=0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0", NULL}), HW_EXIT_OK,
                 "%s", p.error);
    cr_expect_eq(c.n_gpus, 16);
}

// Past the record of the options given (CLI_MAX_GIVEN), a value given twice passed unseen: 130
// --quiet, then --epochs 1 --epochs 2, trained 2 epochs.
Test(options, more_options_than_the_record_holds_are_refused) {
    hw_train_config c;
    cli_parsed p;
    const char *argv[CLI_MAX_GIVEN + 8] = {"hogwild"};
    int n = 1;
    while (n < CLI_MAX_GIVEN + 2) argv[n++] = "--quiet";
    argv[n++] = "--epochs=1";
    argv[n++] = "--epochs=2";
    argv[n] = NULL;
    cr_expect_eq(parse(&c, &p, argv), HW_EXIT_USAGE);
    cr_expect_str_eq(p.error, "more than 128 options given");
}

// --help and --version make the command do only that, but the rest of the line is still checked:
// `--help --bogus` printed the help and passed over the bad flag.
Test(options, help_is_what_is_done_and_the_line_is_still_checked) {
    hw_train_config c;
    cli_parsed p;
    cr_expect_eq(parse(&c, &p, (const char *[]){"hogwild", "-h", "--workers", "4", NULL}), HW_EXIT_OK);
    cr_assert_not_null(p.stop);
    cr_expect_str_eq(p.stop->name, "help");
    cr_expect_eq(parse(&c, &p, (const char *[]){"hogwild", "--version", "--help", NULL}), HW_EXIT_OK);
    cr_expect_str_eq(p.stop->name, "version");
    cr_expect_eq(parse(&c, &p, (const char *[]){"hogwild", "--help", "--bogus", NULL}), HW_EXIT_USAGE);
    cr_expect_str_eq(p.error, "unknown option '--bogus'");
    cr_expect_eq(parse(&c, &p, (const char *[]){"hogwild", "--version", "--bogus", NULL}), HW_EXIT_USAGE);
    cr_expect_str_eq(p.error, "unknown option '--bogus'");
    cr_expect_eq(parse(&c, &p, (const char *[]){"hogwild", "--help", "stray", NULL}), HW_EXIT_USAGE);
    cr_expect_str_eq(p.error, "unexpected argument 'stray'");
    // "--" ends the options; training takes nothing after them, and says so.
    cr_expect_eq(parse(&c, &p, (const char *[]){"hogwild", "--", "--lr", "1", NULL}), HW_EXIT_USAGE);
    cr_expect(strstr(p.error, "unexpected argument '--': it ends the options") != NULL, "%s", p.error);
}

// Every option with a value has a default or says in its help what happens without it; every
// default is read back by the option's own parser (cli_defaults aborts otherwise), and the help
// shows it.
Test(options, the_help_shows_each_default) {
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    cli_print_options(&cli_train_command, out);
    fclose(out);
    cr_expect(strstr(text, "  --workers N              Hogwild worker processes (default 2)\n") != NULL, "%s", text);
    cr_expect(strstr(text, "  --lr X                   learning rate (default 0.01)\n") != NULL, "%s", text);
    // A label one short of the help's column is followed by two blanks, as a longer one is.
    cr_expect(strstr(text, "  --sync-rule momentum|sum  Hogwild across ranks") != NULL, "%s", text);
    cr_expect(strstr(text, "  --list-sharing-strategies  list them") != NULL, "%s", text);
    cr_expect(strstr(text, "  --list-sharing-strategies  list them") != NULL, "%s", text);
    cr_expect(strstr(text, "--summary") == NULL, "--summary is in the usage lines, not among the options");
    free(text);
}

// A default is spelled once, in the table: the help of an option with one shows it through its
// format ("%s"), and no help of an option without one claims a default of its own words.
Test(options, every_default_shown_comes_from_the_table) {
    for (int i = 0; i < cli_train_command.n_options; i++) {
        const cli_option *o = &cli_train_command.options[i];
        if (!o->help) continue;
        if (o->fallback) {
            cr_expect(strstr(o->help, "%s") != NULL, "--%s has a default but its help does not show it", o->name);
        } else {
            cr_expect(strstr(o->help, "(default)") == NULL && strstr(o->help, "the default") == NULL,
                      "--%s's help names a default the table does not have", o->name);
        }
    }
}

// --sharing-strategy's default is the table's: the defaults set it, whatever was set before.
Test(options, the_sharing_strategy_default_comes_from_the_table) {
    cr_assert_eq(hw_sharing_strategy_set("file_system"), HW_OK);
    hw_train_config config;
    cli_train_defaults(&config);
    cr_expect_str_eq(hw_sharing_strategy_get(), "file_descriptor");
}

// The one mapping from the code's terms to the flags (include/hw/option.h): every option a module's
// message can be about is named by exactly one row of the table, and its hint is that row's flag.
Test(options, every_option_a_message_names_has_one_flag) {
    for (int id = HW_OPTION_NONE + 1; id < HW_OPTION_COUNT; id++) {
        cr_expect_str_empty(hw_option_hint((hw_option)id), "option %d has a hint before the table names it", id);
    }
    cli_name_options(&cli_train_command);
    for (int id = HW_OPTION_NONE + 1; id < HW_OPTION_COUNT; id++) {
        int rows = 0;
        const cli_option *row = NULL;
        for (int i = 0; i < cli_train_command.n_options; i++) {
            if (cli_train_command.options[i].id == (hw_option)id) rows++, row = &cli_train_command.options[i];
        }
        cr_assert_eq(rows, 1, "option %d is named by %d rows of the table", id, rows);
        char want[64];
        snprintf(want, sizeof want, " (--%s)", row->name);
        cr_expect_str_eq(hw_option_hint((hw_option)id), want);
    }
    cr_expect_str_eq(hw_option_hint(HW_OPTION_LR), " (--lr)");
    cr_expect_str_empty(hw_option_hint(HW_OPTION_NONE));
    cr_expect_str_empty(hw_option_hint(HW_OPTION_COUNT));
}

// cli_option_of is the way from an option's id to its row: each id's one row, and no row for
// HW_OPTION_NONE, which the small commands' rows all carry.
Test(options, an_id_finds_its_one_row) {
    for (int id = HW_OPTION_NONE + 1; id < HW_OPTION_COUNT; id++) {
        const cli_option *o = cli_option_of(&cli_train_command, (hw_option)id);
        cr_assert_not_null(o, "option %d has no row", id);
        cr_expect_eq(o->id, (hw_option)id);
        cr_expect_eq(cli_option_named(&cli_train_command, o->name), o, "--%s", o->name);
    }
    cr_expect_str_eq(cli_option_of(&cli_train_command, HW_OPTION_SEED)->name, "seed");
    cr_expect_null(cli_option_of(&cli_train_command, HW_OPTION_NONE));
}
