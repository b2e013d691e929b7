// options: the one mechanism behind every command's options (src/cli/options.c). A command is a
// table of options, each with its name, the kind of its value, its default, its help and the field
// it sets; the help text, the parser (getopt_long) and the defaults all come from that table. The
// tables themselves are in the files of their commands: train_options.c (./hogwild's training
// flags), data_commands.c, synth_command.c and stats_command.c (hogwild download, synth, stats),
// compare_command.c (hogwild compare).
// Only src/cli/ knows flag names.
#ifndef HW_CLI_OPTIONS_H
#define HW_CLI_OPTIONS_H

#include "hw/option.h"

#include <stddef.h>
#include <stdio.h>

// Exit statuses of the command line: 0 ok, 1 failure, 2 bad usage, 128 + signal when interrupted.
enum { HW_EXIT_OK = 0, HW_EXIT_FAILURE = 1, HW_EXIT_USAGE = 2 };

// The kind of an option's value, which is also the C type of the field it sets.
typedef enum {
    CLI_SWITCH,  // no value; sets an int field to 1 (or only records that it was given)
    CLI_INT,     // an integer in [min, max], into an int
    CLI_INT64,   // an integer in [min, max], into an int64_t
    CLI_UINT64,  // an integer in [min, max], into a uint64_t
    CLI_FLOAT,   // a decimal number from least to 1e9, into a float
    CLI_DOUBLE,  // a decimal number from least to 1e9, into a double
    CLI_TEXT,    // the text itself, into a const char *
    CLI_CUSTOM,  // the option's own parse function reads it into the target
} cli_kind;

enum { CLI_NO_FIELD = (size_t)-1 };

typedef struct cli_option cli_option;

// Reads `value` into `target` (the command's struct). HW_EXIT_OK, or HW_EXIT_USAGE with the
// message in error[0..cap) (cli_refuse).
typedef int (*cli_parse_fn)(const cli_option *option, const char *value, void *target, char *error, size_t cap);

struct cli_option {
    const char *section;  // the help's heading this option starts (NULL: the previous one's)
    const char *name;     // without the dashes: "workers"
    char short_name;      // '\0', or 'h' for -h
    const char *metavar;  // the value's name in the help, "N"; NULL for a switch
    cli_kind kind;
    size_t field;          // offsetof the field in the target, or CLI_NO_FIELD
    long long min, max;    // CLI_INT, CLI_INT64, CLI_UINT64: the range
    double least;          // CLI_FLOAT, CLI_DOUBLE: the smallest value (the largest is 1e9)
    const char *fallback;  // the default, as text, read as a given value would be (NULL: zero)
    cli_parse_fn parse;    // CLI_CUSTOM
    const char *missing;   // the message when the value is missing (a format of the flag), or NULL
    const char *help;      // the help text, a printf format of the default's text; NULL: not listed
    int stops;             // 1: given, the command does only this (--help, --version), cli_parsed.stop
    hw_option id;          // its name in the code (hw/option.h): in a module's messages and in the
                           // command line's own rules; HW_OPTION_NONE in the small commands' tables
};

typedef struct {
    const cli_option *options;
    int n_options;
    const char *missing;  // the message when an option's value is missing (a format of the flag)
    const char *empty;    // the message when it is empty (a format of the flag), NULL: allowed
    int operands;         // 1: arguments that are not options are the command's (files, anywhere)
    int help_column;      // where the help text of an option starts in cli_print_options
} cli_command;

// The options given, in order, each with its value (NULL for a switch; an option with a value given
// twice is refused, a switch given twice is listed twice; more than CLI_MAX_GIVEN are refused);
// `stop` is the first option given that stops the command (.stops: --help, --version), else NULL.
enum { CLI_MAX_GIVEN = 128 };
typedef struct {
    const cli_option *given[CLI_MAX_GIVEN];
    const char *values[CLI_MAX_GIVEN];
    int n_given;
    const cli_option *stop;
    char **operands;  // the command's other arguments (operands = 1), in order
    int n_operands;
    char error[768];  // the usage error, when cli_parse returns HW_EXIT_USAGE
} cli_parsed;

// Sets every field of `target` that an option with a default names, from the default's text.
void cli_defaults(const cli_command *command, void *target);

// Parses argv[1..argc) (argv[0] is the command's name) into `target`: HW_EXIT_OK, or HW_EXIT_USAGE
// with parsed->error set. An option that stops the command (parsed->stop) does not end the parse:
// the other arguments are still read and checked, so a bad one beside it is refused.
// parsed->operands points into an array the caller frees with cli_parsed_free.
int cli_parse(const cli_command *command, int argc, char **argv, void *target, cli_parsed *parsed);
void cli_parsed_free(cli_parsed *parsed);

// Names every option of the table that has an id by its flag (hw_option_hint_set), so that a module's
// message about it ends with " (--flag)": the one mapping from the code's terms to the flags.
void cli_name_options(const cli_command *command);

// Reads `value` into `target` as option `o` given with it would: HW_EXIT_OK, or HW_EXIT_USAGE with
// the message in error[0..cap).
int cli_option_apply(const cli_option *o, const char *value, void *target, char *error, size_t cap);
// The row of `command` whose name (without the dashes) is `name`, or NULL.
const cli_option *cli_option_named(const cli_command *command, const char *name);
// The row of `command` whose .id is `id`, or NULL when none is (always for HW_OPTION_NONE, which
// names no row): the one way from the code's term for an option to its row, its flag's name.
const cli_option *cli_option_of(const cli_command *command, hw_option id);

// Whether the option of id `option` (its row's .id) was given.
int cli_given(const cli_parsed *parsed, hw_option option);

// The options' help: per section a heading, then "  --name VALUE   help" lines, help wrapped as
// written (a '\n' in it continues under the help's column).
void cli_print_options(const cli_command *command, FILE *out);

// Writes the message into error[0..cap) and returns HW_EXIT_USAGE.
__attribute__((format(printf, 3, 4))) int cli_refuse(char *error, size_t cap, const char *fmt, ...);

#endif
