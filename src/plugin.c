// plugin: loading a library at run time and entering it (include/hw/plugin.h).
#include "hw/plugin.h"

#include "hw/err.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

// `file` in the folder of the running binary, into path[0..cap).
static int path_beside_binary(char *path, size_t cap, const char *file) {
    size_t file_len = strlen(file);
    // (!path: never, but gcc -O1 with UBSan's null checks sees a path where it is, and -Wnonnull
    // refused the readlink below under make asan.)
    if (!path || cap < file_len + 2) return hw_fail("no room for the path of %s", file);
    ssize_t n = readlink("/proc/self/exe", path, cap - file_len - 1);
    if (n <= 0) {
        return hw_fail_errno(errno, "cannot find the hogwild binary's folder (/proc/self/exe) to load %s", file);
    }
    path[n] = '\0';
    char *slash = strrchr(path, '/');
    char *name = slash ? slash + 1 : path;
    snprintf(name, cap - (size_t)(name - path), "%s", file);
    return HW_OK;
}

int hw_plugin_load(const hw_plugin_spec *spec, void **out, hw_plugin_failure *failure) {
    memset(failure, 0, sizeof *failure);
    if (spec->beside_binary) {
        if (path_beside_binary(failure->path, sizeof failure->path, spec->file) != HW_OK) {
            snprintf(failure->why, sizeof failure->why, "%s", hw_error());
            return HW_ERR;
        }
    } else {
        snprintf(failure->path, sizeof failure->path, "%s", spec->file);
    }
    void *library = dlopen(failure->path, spec->flags);
    if (!library) {
        snprintf(failure->why, sizeof failure->why, "%s", dlerror());
        return HW_ERR;
    }
    for (int i = 0; spec->symbols[i]; i++) {
        out[i] = dlsym(library, spec->symbols[i]);
        if (!out[i]) {
            failure->missing = spec->symbols[i];
            return HW_ERR;
        }
    }
    return HW_OK;
}

const void *hw_plugin_entry(const char *file, const char *part, const char *built_with, int flags, const char *entry,
                            const void *linked_in) {
    if (linked_in) return linked_in;
    const char *const symbols[] = {entry, NULL};
    void *table = NULL;
    hw_plugin_failure failure;
    hw_plugin_spec spec = {.file = file, .beside_binary = 1, .flags = flags, .symbols = symbols};
    if (hw_plugin_load(&spec, &table, &failure) == HW_OK) return table;
    if (failure.missing) {
        hw_fail("the %s of hogwild, %s, has no %s: rebuild it with `make`", part, failure.path, failure.missing);
    } else {
        hw_fail("cannot load the %s of hogwild, %s: %s (it is built by `make` with %s and must stay beside the "
                "hogwild binary)",
                part, failure.path, failure.why, built_with);
    }
    return NULL;
}
