// run_identity: the setup hash and settings text of a run's metrics (src/cli/run_identity.h).
#include "cli/run_identity.h"

#include "hw/metrics.h"

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

// A float's text for a person (the settings text): its shortest spelling that reads back as the
// same float ("0.02", where the hash's spelling is "0.0199999996"). Other kinds as the hash has them.
static void readable(cli_kind kind, const char *canonical_text, char *buf, size_t cap) {
    snprintf(buf, cap, "%s", canonical_text);
    if (kind != CLI_FLOAT) return;
    float value = strtof(canonical_text, NULL);
    for (int digits = 1; digits <= 9; digits++) {
        snprintf(buf, cap, "%.*g", digits, (double)value);
        if (strtof(buf, NULL) == value) return;
    }
}

static uint64_t fnv1a(uint64_t hash, const char *text) {
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        hash ^= *p;
        hash *= 1099511628211ULL;
    }
    return hash;
}

// Appends `text` to token[*used..cap), each byte that a CSV field or a list split at blanks cannot
// hold (a comma, a blank, a quote, '%', control and non-ASCII bytes) as %XX. Returns 0 when it did
// not fit.
static int escape_append(char *token, size_t cap, size_t *used, const char *text) {
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        int plain = *p > ' ' && *p < 0x7f && *p != ',' && *p != '"' && *p != '%';
        if (*used + 4 > cap) return 0;  // the longest escape and the NUL
        *used += (size_t)(plain ? snprintf(token + *used, cap - *used, "%c", *p)
                                : snprintf(token + *used, cap - *used, "%%%02X", *p));
    }
    return 1;
}

// Appends " name=value" (no blank before the first) to the settings text, escaped. A setting that
// does not fit whole is left out, and so is every one after it: *cut is set.
static void settings_append(char *settings, size_t cap, const char *name, const char *value, int *cut) {
    char token[HW_METRICS_SETTINGS_CAP];
    size_t used = 0;
    int fits = !*cut && escape_append(token, sizeof token, &used, name) &&
               escape_append(token, sizeof token, &used, "=") && escape_append(token, sizeof token, &used, value);
    size_t len = strlen(settings);
    if (!fits || len + (len ? 1 : 0) + used + 1 > cap) {
        *cut = 1;
        return;
    }
    snprintf(settings + len, cap - len, "%s%s", len ? " " : "", token);
}

uint64_t cli_run_setup(const cli_command *command, const cli_parsed *given, char *settings, size_t cap) {
    uint64_t hash = 14695981039346656037ULL;
    int cut = 0;
    if (cap > 0) settings[0] = '\0';
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
        char shown[1024];
        readable(o->kind, value, shown, sizeof shown);
        settings_append(settings, cap, o->name, shown, &cut);
    }
    // The settings that did not fit are in the hash alone: the text ends with "..." to say so.
    if (cut) {
        size_t len = strlen(settings);
        while (len > 0 && len + 5 > cap) {                      // " ..." and the NUL
            while (len > 0 && settings[len - 1] != ' ') len--;  // whole settings only
            if (len > 0) len--;                                 // and the blank before the last one
        }
        if (cap >= 5) snprintf(settings + len, cap - len, "%s...", len ? " " : "");
    }
    return hash;
}
