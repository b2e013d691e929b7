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

static int apply(const cli_option *o, const char *value, void *target, char *error, size_t cap) {
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
        if (apply(o, o->fallback, target, error, sizeof error) != HW_EXIT_OK) {
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

static int stops(const cli_option *o, const char *const *stop_at) {
    for (int i = 0; stop_at && stop_at[i]; i++) {
        if (strcmp(o->name, stop_at[i]) == 0) return 1;
    }
    return 0;
}

int cli_parse(const cli_command *command, int argc, char **argv, void *target, const char *const *stop_at,
              cli_parsed *parsed) {
    memset(parsed, 0, sizeof *parsed);
    parsed->operands = calloc((size_t)(argc > 0 ? argc : 1), sizeof *parsed->operands);
    struct option *longs = calloc((size_t)command->n_options + 1, sizeof *longs);
    if (!parsed->operands || !longs) {
        free(longs);
        return cli_refuse(parsed->error, sizeof parsed->error, "out of memory reading the command line");
    }
    // "+": without operands the first argument that is no option ends the options (it is refused
    // below, in its place); ":": a missing value is told apart from an unknown option.
    char shorts[32] = "";
    size_t n_shorts = 0;
    if (!command->operands) shorts[n_shorts++] = '+';
    shorts[n_shorts++] = ':';
    for (int i = 0; i < command->n_options; i++) {
        const cli_option *o = &command->options[i];
        longs[i] = (struct option){o->name, o->kind == CLI_SWITCH ? no_argument : required_argument, NULL, 256 + i};
        if (o->short_name && n_shorts + 2 < sizeof shorts) shorts[n_shorts++] = o->short_name;
    }
    opterr = 0;  // the messages are hogwild's own
    optind = 0;  // GNU getopt starts afresh (a second parse in one process: the tests)
    int status = HW_EXIT_OK;
    while (status == HW_EXIT_OK) {
        int before = optind ? optind : 1;
        int c = getopt_long(argc, argv, shorts, longs, NULL);
        if (c == -1) {
            // "--" ends the options: a command with operands takes what follows as operands; the
            // others have no use for it.
            if (!command->operands && before < argc && optind > before && strcmp(argv[before], "--") == 0) {
                status = cli_refuse(parsed->error, sizeof parsed->error,
                                    "unexpected argument '--': it ends the options, and this command takes no "
                                    "other arguments (give every option before it, or drop it)");
            }
            break;
        }
        if (c == '?') {
            // An unknown long option (or one given a value it does not take): getopt has stepped past
            // it. An unknown short one: rebuilt, or its whole argument.
            char text[8];
            const char *given = argv[optind - 1];
            const cli_option *valued = optopt == 0 || optopt >= 256 ? switch_given_a_value(command, given) : NULL;
            if (valued) {
                status = cli_refuse(parsed->error, sizeof parsed->error, "option '--%s' takes no value, got '%s'",
                                    valued->name, given);
                break;
            }
            if (optopt > 0 && optopt < 256) {
                snprintf(text, sizeof text, "-%c", optopt);
                given = command->operands ? text : argv[before];
            }
            // A long option is named without its value ("--bogus=3": '--bogus'), as a prefix is below.
            char name[256];
            snprintf(name, sizeof name, "%.*s", strncmp(given, "--", 2) == 0 ? (int)strcspn(given, "=") : 255, given);
            status = unknown(command, name, parsed);
            break;
        }
        const cli_option *o = NULL;
        if (c == ':') {
            // The value is missing: the option was the last argument.
            for (int i = 0; i < command->n_options && !o; i++) {
                if (names_exactly(&command->options[i], argv[optind - 1])) o = &command->options[i];
            }
            if (!o) {
                status = unknown(command, argv[optind - 1], parsed);
            } else {
                const char *fmt = o->missing ? o->missing : command->missing;
                char flag[80];
                snprintf(flag, sizeof flag, "--%s", o->name);
                status = cli_refuse(parsed->error, sizeof parsed->error, fmt, flag);
            }
            break;
        }
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
            status = unknown(command, given, parsed);
            break;
        }
        // An option with a value given twice: which one was meant? (`--epochs 5 ... --epochs 1` trained
        // one epoch without a word.) A switch given twice means what it says once.
        const char *earlier = o->kind == CLI_SWITCH ? NULL : given_value(parsed, o);
        if (earlier) {
            status =
                cli_refuse(parsed->error, sizeof parsed->error,
                           "option '--%s' is given twice ('%s', then '%s'): give it once", o->name, earlier, optarg);
            break;
        }
        // Past the record's room an option given twice, or one --eval-only refuses, would pass unseen.
        if (parsed->n_given == CLI_MAX_GIVEN) {
            status = cli_refuse(parsed->error, sizeof parsed->error, "more than %d options given", CLI_MAX_GIVEN);
            break;
        }
        parsed->values[parsed->n_given] = optarg;
        parsed->given[parsed->n_given++] = o;
        // --help, --version: the command does only that, but the rest of the line is still read, so
        // that a bad option beside it is refused rather than passed over.
        if (stops(o, stop_at) && !parsed->stop) parsed->stop = o;
        if (o->kind != CLI_SWITCH && !optarg[0] && command->empty) {
            char flag[80];
            snprintf(flag, sizeof flag, "--%s", o->name);
            status = cli_refuse(parsed->error, sizeof parsed->error, command->empty, flag);
            break;
        }
        status = apply(o, o->kind == CLI_SWITCH ? NULL : optarg, target, parsed->error, sizeof parsed->error);
    }
    if (status == HW_EXIT_OK) {
        for (int i = optind ? optind : 1; i < argc; i++) {
            if (!command->operands) {
                status = unknown(command, argv[i], parsed);
                break;
            }
            parsed->operands[parsed->n_operands++] = argv[i];
        }
    }
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

int cli_given(const cli_parsed *parsed, const char *name) {
    for (int i = 0; i < parsed->n_given; i++) {
        if (strcmp(parsed->given[i]->name, name) == 0) return 1;
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
        // one of it ("--sync-rule momentum|sum Hogwild ..." read as one more word of the value).
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
