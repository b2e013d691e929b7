// option: the hints, set by the command line, with which every module's messages name the flag of
// an option (include/hw/option.h). This file knows no flag.
#include "hw/option.h"

#include <stdio.h>

enum { HW_OPTION_HINT_CAP = 48 };

// Written once by the command line before any worker or thread starts, read by all of them.
static char hints[HW_OPTION_COUNT][HW_OPTION_HINT_CAP];

void hw_option_hint_set(hw_option option, const char *hint) {
    if (option <= HW_OPTION_NONE || option >= HW_OPTION_COUNT) return;
    snprintf(hints[option], sizeof hints[option], "%s", hint);
}

const char *hw_option_hint(hw_option option) {
    if (option <= HW_OPTION_NONE || option >= HW_OPTION_COUNT) return "";
    return hints[option];
}
