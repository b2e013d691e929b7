// plugin: the one way hogwild enters a library it loads at run time, used by all three: the CPU
// BLAS (OpenBLAS, from the system: src/blas.c), the GPU part (libhogwild-cuda.so, src/cuda/:
// src/train/gpu_plugin.c) and the MPI part (libhogwild-mpi.so, src/comm/mpi/:
// src/comm/mpi_plugin.c). hw_plugin_load dlopen()s a library and resolves a list of symbols; each
// of hogwild's own plugins exports exactly one, its entry table (hw_cuda_plugin, hw_mpi_plugin),
// which hw_plugin_entry looks up, and hides every other symbol (a version script, Makefile). Nothing is ever unloaded: neither CUDA nor MPI
// supports it.
#ifndef HW_PLUGIN_H
#define HW_PLUGIN_H

#include <stddef.h>

typedef struct {
    const char *file;            // a path, or a file name (for the system's search, or beside_binary)
    int beside_binary;           // `file` is in the folder of the running binary (/proc/self/exe)
    int flags;                   // dlopen's
    const char *const *symbols;  // the names to resolve, NULL-terminated
} hw_plugin_spec;

// What a failed load tried and why, for the caller's message.
typedef struct {
    char path[4096];      // the library it tried to load
    const char *missing;  // the first symbol it lacks; NULL when the load itself failed
    char why[512];        // dlerror()'s text, when the load failed
} hw_plugin_failure;

// Loads spec->file and resolves its symbols into out[0..] in the order of spec->symbols. HW_OK, or
// HW_ERR with *failure filled (no message set: the caller words it).
int hw_plugin_load(const hw_plugin_spec *spec, void **out, hw_plugin_failure *failure);

// The entry table `entry` of hogwild's plugin `file` beside the binary, or `linked_in` when the
// binary links the plugin itself (the test binary, the simulated build: a weak reference to the
// table is then set). NULL after hw_fail naming the path and what went wrong: "cannot load the
// <part> of hogwild, <path>: <dlerror> (it is built by `make` with <built_with> and must stay
// beside the hogwild binary)", or "the <part> of hogwild, <path>, has no <entry>: rebuild it with
// `make`".
const void *hw_plugin_entry(const char *file, const char *part, const char *built_with, int flags, const char *entry,
                            const void *linked_in);

#endif
