// plugin: loading a part of hogwild built beside the binary (include/hw/plugin.h).
#include "hw/plugin.h"

#include "hw/err.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void *hw_plugin_open(char *path, size_t size, const char *file, const char *part, const char *built_with, int flags) {
    size_t file_len = strlen(file);
    if (size < file_len + 2) {
        hw_fail("no room for the path of %s", file);
        return NULL;
    }
    ssize_t n = readlink("/proc/self/exe", path, size - file_len - 1);
    if (n <= 0) {
        hw_fail_errno(errno, "cannot find the hogwild binary's folder (/proc/self/exe) to load %s", file);
        return NULL;
    }
    path[n] = '\0';
    char *slash = strrchr(path, '/');
    char *name = slash ? slash + 1 : path;
    snprintf(name, size - (size_t)(name - path), "%s", file);
    void *plugin = dlopen(path, flags);
    if (!plugin) {
        hw_fail("cannot load the %s of hogwild, %s: %s (it is built by `make` with %s and must stay beside the "
                "hogwild binary)",
                part, path, dlerror(), built_with);
    }
    return plugin;
}
