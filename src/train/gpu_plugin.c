// gpu_door: the core's one way into the GPU trainers.
//
// In a CUDA build the GPU part (src/cuda/ and src/cuda/train/, with cuBLAS, the CUDA runtime
// and NCCL) is a separate object, libhogwild-cuda.so beside the hogwild binary, loaded with
// dlopen() only when a run asks for a GPU: a CPU run maps no CUDA library (they take ~780 MB of
// address space, and need not even be installed). The plugin holds no copy of the core: its
// calls into the core resolve to the executable's own symbols (hogwild is linked -rdynamic with
// the whole core), so there is one error message, one shm name table, one of every global.
//
// A binary that links the GPU code itself (the test binary; the simulated build, where the
// trainers come with the library) calls it directly: the weak references below are then set.
// A build without CUDA (make CUDA=0, or no nvcc) has no GPU part: the door refuses, naming it.
#include "hw/train.h"

#include "hw/err.h"

#include <stdio.h>
#include <string.h>

#ifdef HW_CUDA_PLUGIN
#include "hw/plugin.h"

#include <dlfcn.h>
#include <limits.h>

typedef int (*train_fn)(const hw_train_config *, hw_train_inputs *, hw_train_result *);

extern int hw_train_hogwild_cuda(const hw_train_config *, hw_train_inputs *, hw_train_result *) __attribute__((weak));
extern int hw_train_dataparallel_cuda(const hw_train_config *, hw_train_inputs *, hw_train_result *)
    __attribute__((weak));

#define PLUGIN_NAME "libhogwild-cuda.so"

// The trainer `symbol` of the plugin beside this executable; NULL after hw_fail naming the path.
static train_fn load_trainer(const char *symbol) {
    char path[PATH_MAX];
    void *plugin = hw_plugin_open(path, sizeof path, PLUGIN_NAME, "GPU part", "CUDA", RTLD_NOW | RTLD_LOCAL);
    if (!plugin) return NULL;
    train_fn fn;
    *(void **)&fn = dlsym(plugin, symbol);  // POSIX: a function pointer through a void *
    if (!fn) hw_fail("the GPU part of hogwild, %s, has no %s: rebuild it with `make`", path, symbol);
    return fn;  // never unloaded: the CUDA runtime does not support it
}

int hw_gpu_train_hogwild(const hw_train_config *config, hw_train_inputs *in, hw_train_result *result) {
    train_fn fn = hw_train_hogwild_cuda ? hw_train_hogwild_cuda : load_trainer("hw_train_hogwild_cuda");
    return fn ? fn(config, in, result) : HW_ERR;
}

int hw_gpu_train_dataparallel(const hw_train_config *config, hw_train_inputs *in, hw_train_result *result) {
    train_fn fn =
        hw_train_dataparallel_cuda ? hw_train_dataparallel_cuda : load_trainer("hw_train_dataparallel_cuda");
    return fn ? fn(config, in, result) : HW_ERR;
}

#elif defined(HW_WITHOUT_CUDA)

static int without_cuda(const char *what, hw_train_result *result) {
    memset(result, 0, sizeof *result);
    return hw_fail("%s: hogwild was built without CUDA (make CUDA=0, or no nvcc was found); train with --device cpu, "
                   "or rebuild where nvcc is installed",
                   what);
}

int hw_gpu_train_hogwild(const hw_train_config *config, hw_train_inputs *in, hw_train_result *result) {
    (void)in;
    char name[32], what[64];
    hw_device_format(config->device, name, sizeof name);
    snprintf(what, sizeof what, "--device %s", name);
    return without_cuda(what, result);
}

int hw_gpu_train_dataparallel(const hw_train_config *config, hw_train_inputs *in, hw_train_result *result) {
    (void)config, (void)in;
    return without_cuda("DataParallel on GPUs", result);
}

#else

int hw_gpu_train_hogwild(const hw_train_config *config, hw_train_inputs *in, hw_train_result *result) {
    return hw_train_hogwild_cuda(config, in, result);
}

int hw_gpu_train_dataparallel(const hw_train_config *config, hw_train_inputs *in, hw_train_result *result) {
    return hw_train_dataparallel_cuda(config, in, result);
}

#endif
