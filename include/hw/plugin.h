// plugin: the parts of hogwild built as shared objects beside the binary (libhogwild-cuda.so, the
// GPU part; libhogwild-mpi.so, the MPI part), loaded with dlopen() only when a run needs them, so
// that a plain CPU run maps none of their libraries (src/train/gpu_door.c, src/comm/door.c).
#ifndef HW_PLUGIN_H
#define HW_PLUGIN_H

#include <stddef.h>

// dlopen()s `file` from the folder of the running binary (/proc/self/exe) with dlopen `flags`,
// writing its path into path[0..size). NULL after hw_fail naming the path and what went wrong:
// "cannot load the <part> of hogwild, <path>: <dlerror> (it is built by `make` with <built_with>
// and must stay beside the hogwild binary)". Never unloaded: neither CUDA nor MPI supports it.
void *hw_plugin_open(char *path, size_t size, const char *file, const char *part, const char *built_with, int flags);

#endif
