// update_mode: the names of --update's modes (include/hw/optim.h says what each one does).
#include "hw/err.h"
#include "hw/optim.h"

#include <string.h>

static const char *const names[HW_UPDATE_MODES] = {"lockfree", "locked", "atomic"};

const char *hw_update_mode_name(hw_update_mode mode) {
    return (int)mode >= 0 && (int)mode < HW_UPDATE_MODES ? names[mode] : "unknown";
}

int hw_update_mode_parse(const char *text, hw_update_mode *mode) {
    for (int i = 0; i < HW_UPDATE_MODES; i++) {
        if (strcmp(text, names[i]) == 0) {
            *mode = (hw_update_mode)i;
            return HW_OK;
        }
    }
    return hw_fail("expects lockfree, locked or atomic, got '%s'", text);
}
