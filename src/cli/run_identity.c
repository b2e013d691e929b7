// run_identity: the setup hash of a run's metrics (src/cli/run_identity.h).
#include "cli/run_identity.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The options that are the metrics' own columns, or change where a run writes but no result.
static int left_out(hw_option id) {
    switch (id) {
    case HW_OPTION_SEED:
    case HW_OPTION_MODE:
    case HW_OPTION_WORKERS:
    case HW_OPTION_REPLICAS:
    case HW_OPTION_METRICS:
    case HW_OPTION_SAVE:
    case HW_OPTION_OVERWRITE:
    case HW_OPTION_RESUME:
    case HW_OPTION_QUIET:
    case HW_OPTION_NONE: return 1;
    default: return 0;
    }
}

// `text` in one spelling for options of kind `kind`: numbers as strtod reads them, printed to
// round trip (a float's 9 digits), the rest as given. NULL text (not given, no default): "".
static void canonical(cli_kind kind, const char *text, char *buf, size_t cap) {
    if (!text) text = "";
    if (kind == CLI_INT || kind == CLI_INT64 || kind == CLI_UINT64) {
        snprintf(buf, cap, "%lld", strtoll(text, NULL, 10));
    } else if (kind == CLI_FLOAT) {
        snprintf(buf, cap, "%.9g", (double)strtof(text, NULL));
    } else if (kind == CLI_DOUBLE) {
        snprintf(buf, cap, "%.17g", strtod(text, NULL));
    } else {
        snprintf(buf, cap, "%s", text);
    }
}

static uint64_t fnv1a(uint64_t hash, const char *text) {
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        hash ^= *p;
        hash *= 1099511628211ULL;
    }
    return hash;
}

uint64_t cli_run_setup_hash(const cli_command *command, const cli_parsed *given) {
    uint64_t hash = 14695981039346656037ULL;
    for (int i = 0; i < command->n_options; i++) {
        const cli_option *o = &command->options[i];
        // The process runtime's options set no field of the run (.field NONE): no setting of it.
        if (left_out(o->id) || o->field == CLI_NO_FIELD) continue;
        const char *text = NULL;
        int was_given = 0;
        for (int g = 0; g < given->n_given; g++) {
            if (given->given[g] == o) text = given->values[g], was_given = 1;
        }
        char value[1024], fallback[1024];
        if (o->kind == CLI_SWITCH) {
            snprintf(value, sizeof value, "%d", was_given);
            snprintf(fallback, sizeof fallback, "0");
        } else {
            canonical(o->kind, was_given ? text : o->fallback, value, sizeof value);
            canonical(o->kind, o->fallback, fallback, sizeof fallback);
        }
        if (strcmp(value, fallback) == 0) continue;
        hash = fnv1a(hash, o->name);
        hash = fnv1a(hash, "=");
        hash = fnv1a(hash, value);
        hash = fnv1a(hash, "\n");
    }
    return hash;
}
