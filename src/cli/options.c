// options: the table-driven command line of every command (src/cli/options.h): defaults, getopt_long
// and the help, all from one table of options.
#include "cli/options.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int cli_refuse(char *error, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error, cap, fmt, ap);
    va_end(ap);
    return HW_EXIT_USAGE;
}

// ---- one value into its field: strict, the whole text must be the value ----

static int read_integer(const cli_option *o, const char *text, long long *out, char *error, size_t cap) {
    char *end = NULL;
    errno = 0;
    long long value = strtoll(text, &end, 10);
    // strtoll skips leading blanks; the whole text must be the number, so " 3" is refused as "3 " is.
    if (errno || end == text || *end != '\0' || isspace((unsigned char)text[0]) || value < o->min || value > o->max) {
        return cli_refuse(error, cap, "--%s expects an integer from %lld to %lld, got '%s'", o->name, o->min, o->max,
                          text);
    }
    *out = value;
    return HW_EXIT_OK;
}

static int read_number(const cli_option *o, const char *text, double *out, char *error, size_t cap) {
    char *end = NULL;
    errno = 0;
    double value = strtod(text, &end);
    // strtod also reads hexadecimal ("0x10" is 16): a number here is decimal, as the integers are.
    if (errno || end == text || *end != '\0' || isspace((unsigned char)text[0]) || strpbrk(text, "xX") ||
        !(value >= o->least) || value > 1e9) {
        return cli_refuse(error, cap, "--%s expects a decimal number from %g to 1e9, got '%s'", o->name, o->least,
                          text);
    }
    *out = value;
    return HW_EXIT_OK;
}

int cli_option_apply(const cli_option *o, const char *value, void *target, char *error, size_t cap) {
    void *field = o->field == CLI_NO_FIELD ? NULL : (char *)target + o->field;
    long long n = 0;
    double x = 0;
    int status = HW_EXIT_OK;
    switch (o->kind) {
    case CLI_SWITCH:
        if (field) *(int *)field = 1;
        break;
    case CLI_INT:
    case CLI_INT64:
    case CLI_UINT64:
        status = read_integer(o, value, &n, error, cap);
        if (status == HW_EXIT_OK && field && o->kind == CLI_INT) *(int *)field = (int)n;
        if (status == HW_EXIT_OK && field && o->kind == CLI_INT64) *(int64_t *)field = (int64_t)n;
        if (status == HW_EXIT_OK && field && o->kind == CLI_UINT64) *(uint64_t *)field = (uint64_t)n;
        break;
    case CLI_FLOAT:
    case CLI_DOUBLE:
        status = read_number(o, value, &x, error, cap);
        if (status == HW_EXIT_OK && field && o->kind == CLI_FLOAT) *(float *)field = (float)x;
        if (status == HW_EXIT_OK && field && o->kind == CLI_DOUBLE) *(double *)field = x;
        break;
    case CLI_TEXT:
        if (field) *(const char **)field = value;
        break;
    case CLI_CUSTOM: status = o->parse(o, value, target, error, cap); break;
    }
    return status;
}

void cli_defaults(const cli_command *command, void *target) {
    for (int i = 0; i < command->n_options; i++) {
        const cli_option *o = &command->options[i];
        if (!o->fallback) continue;
        char error[512];
        if (cli_option_apply(o, o->fallback, target, error, sizeof error) != HW_EXIT_OK) {
            // A default the option's own parser refuses is a mistake in the table.
            fprintf(stderr, "hogwild: the default of --%s is refused: %s\n", o->name, error);
            abort();
        }
    }
}

// ---- the parse ----

// Whether `text`, as given on the command line, names `o` exactly: getopt_long also takes an
// unambiguous prefix ("--epoch" for --epochs), which hogwild refuses as an unknown option.
static int names_exactly(const cli_option *o, const char *text) {
    if (o->short_name && text[0] == '-' && text[1] == o->short_name && text[2] == '\0') return 1;
    size_t len = strlen(o->name);
    return strncmp(text, "--", 2) == 0 && strncmp(text + 2, o->name, len) == 0 &&
           (text[2 + len] == '\0' || text[2 + len] == '=');
}

static int unknown(const cli_command *command, const char *text, cli_parsed *parsed) {
    // Without operands, an argument that is no long option is "unexpected" (a stray word, "-x").
    if (!command->operands && strncmp(text, "--", 2) != 0) {
        return cli_refuse(parsed->error, sizeof parsed->error, "unexpected argument '%s'", text);
    }
    return cli_refuse(parsed->error, sizeof parsed->error, "unknown option '%s'", text);
}

// Whether `arg` is a cluster of short options ("-hx") that holds `c`.
static int in_cluster(const char *arg, char c) {
    return arg[0] == '-' && arg[1] != '\0' && arg[1] != '-' && strchr(arg + 1, c) != NULL;
}

// "--nesterov=1": the switch named before the '=', which takes no value; NULL when `text` is not that.
static const cli_option *switch_given_a_value(const cli_command *command, const char *text) {
    const char *equals = strchr(text, '=');
    if (strncmp(text, "--", 2) != 0 || !equals) return NULL;
    for (int i = 0; i < command->n_options; i++) {
        const cli_option *o = &command->options[i];
        if (o->kind == CLI_SWITCH && strlen(o->name) == (size_t)(equals - text - 2) &&
            strncmp(text + 2, o->name, strlen(o->name)) == 0) {
            return o;
        }
    }
    return NULL;
}

// The value `o` was given earlier in this parse, or NULL.
static const char *given_value(const cli_parsed *parsed, const cli_option *o) {
    for (int i = 0; i < parsed->n_given; i++) {
        if (parsed->given[i] == o) return parsed->values[i];
    }
    return NULL;
}

// getopt_long's tables of `command`: a struct option per option, its value 256 + its index, into
// longs[0..n_options] (the last one zeros); the short options into shorts[0..cap).
static void getopt_tables(const cli_command *command, struct option *longs, char *shorts, size_t cap) {
    // "+": without operands the first argument that is no option ends the options (it is refused
    // with the operands, in its place); ":": a missing value is told apart from an unknown option.
    size_t n_shorts = 0;
    if (!command->operands) shorts[n_shorts++] = '+';
    shorts[n_shorts++] = ':';
    for (int i = 0; i < command->n_options; i++) {
        const cli_option *o = &command->options[i];
        longs[i] = (struct option){o->name, o->kind == CLI_SWITCH ? no_argument : required_argument, NULL, 256 + i};
        if (o->short_name && n_shorts + 2 < cap) shorts[n_shorts++] = o->short_name;
    }
    shorts[n_shorts] = '\0';
}

// getopt_long found no more options; argv[before] was the argument it looked at last. "--" ends
// the options: a command with operands takes what follows as operands; the others have no use for
// it, and refuse it.
static int options_ended(const cli_command *command, int argc, char **argv, int before, cli_parsed *parsed) {
    if (!command->operands && before < argc && optind > before && strcmp(argv[before], "--") == 0) {
        return cli_refuse(parsed->error, sizeof parsed->error,
                          "unexpected argument '--': it ends the options, and this command takes no other "
                          "arguments (give every option before it, or drop it)");
    }
    return HW_EXIT_OK;
}

// getopt_long's '?', refused: an unknown long option, or a switch given a value ("--nesterov=1"),
// which getopt has stepped past; an unknown short one, rebuilt ("-x"), or its whole argument
// (argv[before]) for a command without operands.
static int refuse_unknown(const cli_command *command, char **argv, int before, cli_parsed *parsed) {
    char text[8];
    const char *given = argv[optind - 1];
    const cli_option *valued = optopt == 0 || optopt >= 256 ? switch_given_a_value(command, given) : NULL;
    if (valued) {
        return cli_refuse(parsed->error, sizeof parsed->error, "option '--%s' takes no value, got '%s'", valued->name,
                          given);
    }
    if (optopt > 0 && optopt < 256) {
        snprintf(text, sizeof text, "-%c", optopt);
        given = command->operands ? text : argv[before];
    }
    // A long option is named without its value ("--bogus=3": '--bogus'), as a prefix is in take_option.
    char name[256];
    snprintf(name, sizeof name, "%.*s", strncmp(given, "--", 2) == 0 ? (int)strcspn(given, "=") : 255, given);
    return unknown(command, name, parsed);
}

// getopt_long's ':', refused: the option, the last argument, has no value.
static int refuse_missing_value(const cli_command *command, char **argv, cli_parsed *parsed) {
    const cli_option *o = NULL;
    for (int i = 0; i < command->n_options && !o; i++) {
        if (names_exactly(&command->options[i], argv[optind - 1])) o = &command->options[i];
    }
    if (!o) return unknown(command, argv[optind - 1], parsed);
    const char *fmt = o->missing ? o->missing : command->missing;
    char flag[80];
    snprintf(flag, sizeof flag, "--%s", o->name);
    return cli_refuse(parsed->error, sizeof parsed->error, fmt, flag);
}

// getopt_long's option `c` (256 + its index, or its short name), with optarg: recorded in parsed
// and its value applied to `target`, or refused: a prefix of a name, a value given twice, more
// than CLI_MAX_GIVEN options, an empty value where the command refuses one.
static int take_option(const cli_command *command, int c, int argc, char **argv, void *target, cli_parsed *parsed) {
    const cli_option *o = NULL;
    for (int i = 0; i < command->n_options && !o; i++) {
        if (c == 256 + i || (c < 256 && c == command->options[i].short_name)) o = &command->options[i];
    }
    // The text given for it: the argument before the value when the value is an argument of its own.
    const char *text = optarg && optind >= 2 && optarg == argv[optind - 1] ? argv[optind - 2] : argv[optind - 1];
    // A short option in a cluster ("-hx", "-h=1"): getopt is still inside that argument, at optind.
    if (c < 256 && optind < argc && in_cluster(argv[optind], (char)c)) text = argv[optind];
    if (!o || !names_exactly(o, text)) {
        char given[256];
        int long_option = strncmp(text, "--", 2) == 0;
        snprintf(given, sizeof given, "%.*s", long_option ? (int)strcspn(text, "=") : 255, text);
        return unknown(command, given, parsed);
    }
    // An option with a value given twice is refused: which one was meant? A switch given twice
    // means what it says once.
    const char *earlier = o->kind == CLI_SWITCH ? NULL : given_value(parsed, o);
    if (earlier) {
        return cli_refuse(parsed->error, sizeof parsed->error,
                          "option '--%s' is given twice ('%s', then '%s'): give it once", o->name, earlier, optarg);
    }
    // Past the record's room an option given twice, or one --eval-only refuses, would pass unseen.
    if (parsed->n_given == CLI_MAX_GIVEN) {
        return cli_refuse(parsed->error, sizeof parsed->error, "more than %d options given", CLI_MAX_GIVEN);
    }
    parsed->values[parsed->n_given] = optarg;
    parsed->given[parsed->n_given++] = o;
    // --help, --version: the command does only that, but the rest of the line is still read, so
    // that a bad option beside it is refused rather than passed over.
    if (o->stops && !parsed->stop) parsed->stop = o;
    if (o->kind != CLI_SWITCH && !optarg[0] && command->empty) {
        char flag[80];
        snprintf(flag, sizeof flag, "--%s", o->name);
        return cli_refuse(parsed->error, sizeof parsed->error, command->empty, flag);
    }
    return cli_option_apply(o, o->kind == CLI_SWITCH ? NULL : optarg, target, parsed->error, sizeof parsed->error);
}

// The arguments after the options, argv[optind..argc): the command's operands, or refused by a
// command that takes none.
static int take_operands(const cli_command *command, int argc, char **argv, cli_parsed *parsed) {
    for (int i = optind ? optind : 1; i < argc; i++) {
        if (!command->operands) return unknown(command, argv[i], parsed);
        parsed->operands[parsed->n_operands++] = argv[i];
    }
    return HW_EXIT_OK;
}

int cli_parse(const cli_command *command, int argc, char **argv, void *target, cli_parsed *parsed) {
    memset(parsed, 0, sizeof *parsed);
    parsed->operands = calloc((size_t)(argc > 0 ? argc : 1), sizeof *parsed->operands);
    struct option *longs = calloc((size_t)command->n_options + 1, sizeof *longs);
    if (!parsed->operands || !longs) {
        free(longs);
        return cli_refuse(parsed->error, sizeof parsed->error, "out of memory reading the command line");
    }
    char shorts[32];
    getopt_tables(command, longs, shorts, sizeof shorts);
    opterr = 0;  // the messages are hogwild's own
    optind = 0;  // GNU getopt starts afresh (a second parse in one process: the tests)
    int status = HW_EXIT_OK, ended = 0;
    while (status == HW_EXIT_OK && !ended) {
        int before = optind ? optind : 1;
        int c = getopt_long(argc, argv, shorts, longs, NULL);
        if (c == -1) {
            ended = 1;
            status = options_ended(command, argc, argv, before, parsed);
        } else if (c == '?') {
            status = refuse_unknown(command, argv, before, parsed);
        } else if (c == ':') {
            status = refuse_missing_value(command, argv, parsed);
        } else {
            status = take_option(command, c, argc, argv, target, parsed);
        }
    }
    if (status == HW_EXIT_OK) status = take_operands(command, argc, argv, parsed);
    free(longs);
    return status;
}

void cli_parsed_free(cli_parsed *parsed) {
    free(parsed->operands);
    parsed->operands = NULL;
}

void cli_name_options(const cli_command *command) {
    for (int i = 0; i < command->n_options; i++) {
        const cli_option *o = &command->options[i];
        if (o->id == HW_OPTION_NONE) continue;
        char hint[64];
        snprintf(hint, sizeof hint, " (--%s)", o->name);
        hw_option_hint_set(o->id, hint);
    }
}

const cli_option *cli_option_named(const cli_command *command, const char *name) {
    for (int i = 0; i < command->n_options; i++) {
        if (strcmp(command->options[i].name, name) == 0) return &command->options[i];
    }
    return NULL;
}

const cli_option *cli_option_of(const cli_command *command, hw_option id) {
    for (int i = 0; id != HW_OPTION_NONE && i < command->n_options; i++) {
        if (command->options[i].id == id) return &command->options[i];
    }
    return NULL;
}

int cli_given(const cli_parsed *parsed, hw_option option) {
    for (int i = 0; i < parsed->n_given; i++) {
        if (parsed->given[i]->id == option) return 1;
    }
    return 0;
}

// ---- the help ----

void cli_print_options(const cli_command *command, FILE *out) {
    for (int i = 0; i < command->n_options; i++) {
        const cli_option *o = &command->options[i];
        if (o->section) fprintf(out, "\n%s:\n", o->section);
        if (!o->help) continue;
        char label[128];
        int len = o->short_name ? snprintf(label, sizeof label, "  -%c, --%s", o->short_name, o->name)
                                : snprintf(label, sizeof label, "  --%s", o->name);
        if (o->metavar) len += snprintf(label + len, sizeof label - (size_t)len, " %s", o->metavar);
        // The help starts at its column, or two blanks after a label that reaches it or comes within
        // one of it ("--sync-rule momentum|sum Hogwild ..." would read as one more word of the value).
        fprintf(out, "%s%*s", label, len <= command->help_column - 2 ? command->help_column - len : 2, "");
        char help[1024];
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
        snprintf(help, sizeof help, o->help, o->fallback ? o->fallback : "");
#pragma GCC diagnostic pop
        for (const char *p = help; *p; p++) {
            fputc(*p, out);
            if (*p == '\n') fprintf(out, "%*s", command->help_column, "");
        }
        fputc('\n', out);
    }
}
