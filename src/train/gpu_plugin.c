// gpu_plugin: the core's one way into the GPU trainers.
//
// In a CUDA build the GPU part (src/cuda/: the backend and, in src/cuda/train/, the GPU trainers,
// with cuBLAS, the CUDA runtime and NCCL) is a separate object, libhogwild-cuda.so beside the
// hogwild binary, entered through its entry table (hw_gpu_plugin, include/hw/gpu_train.h) with
// hw_plugin_entry, only when a run asks for a GPU: a CPU run maps no CUDA library (they take
// ~780 MB of address space, and need not even be installed). The plugin holds no copy of the core:
// its calls into the core resolve to the executable's own symbols (./hogwild exports the hw_ ones
// the plugins call), so there is one error message, one shm name table, one of every global.
//
// A binary that links the GPU code itself (the test binary; the simulated build, where the
// trainers come with the library) enters the same table without loading anything. A build
// without CUDA (make CUDA=0, or no nvcc) has no GPU part: hw_gpu_train_hogwild and
// hw_gpu_train_dataparallel refuse, naming the build.
#include "hw/train.h"
#include "hw/gpu_train.h"

#include "hw/err.h"
#include "hw/option.h"

#include <stdio.h>
#include <string.h>

#ifndef HW_WITHOUT_CUDA
#include "hw/plugin.h"

#include <dlfcn.h>

#ifdef HW_CUDA_PLUGIN
// Set where the binary links the GPU part itself (the test binary), else NULL: then loaded.
extern const hw_gpu_plugin hw_cuda_plugin __attribute__((weak));
#else
// The simulated build links the GPU part into the library.
extern const hw_gpu_plugin hw_cuda_plugin;
#endif

static const hw_gpu_plugin *gpu_part(void) {
    // RTLD_LOCAL: the CUDA libraries' symbols stay the plugin's. Never unloaded: the CUDA runtime
    // does not support it.
    return hw_plugin_entry("libhogwild-cuda.so", "GPU part", "CUDA", RTLD_NOW | RTLD_LOCAL, "hw_cuda_plugin",
                           &hw_cuda_plugin);
}

int hw_gpu_train_hogwild(const hw_train_config *config, hw_train_inputs *in, hw_train_result *result) {
    const hw_gpu_plugin *gpu = gpu_part();
    return gpu ? gpu->train_hogwild(config, in, result) : HW_ERR;
}

int hw_gpu_train_dataparallel(const hw_train_config *config, hw_train_inputs *in, hw_train_result *result) {
    const hw_gpu_plugin *gpu = gpu_part();
    return gpu ? gpu->train_dataparallel(config, in, result) : HW_ERR;
}

#else

static int without_cuda(const char *what, hw_train_result *result) {
    memset(result, 0, sizeof *result);
    return hw_fail("%s: hogwild was built without CUDA (make CUDA=0, or no nvcc was found); train on the CPU%s, or "
                   "rebuild where nvcc is installed",
                   what, hw_option_hint(HW_OPTION_DEVICE));
}

int hw_gpu_train_hogwild(const hw_train_config *config, hw_train_inputs *in, hw_train_result *result) {
    (void)in;
    char name[32], what[64];
    hw_device_format(config->device, name, sizeof name);
    snprintf(what, sizeof what, "the device %s", name);
    return without_cuda(what, result);
}

int hw_gpu_train_dataparallel(const hw_train_config *config, hw_train_inputs *in, hw_train_result *result) {
    (void)config, (void)in;
    return without_cuda("DataParallel on GPUs", result);
}

#endif
