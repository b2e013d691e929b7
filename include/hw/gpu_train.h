// gpu_train: the GPU trainers, in libhogwild-cuda.so (src/cuda/train/), and the way the core
// reaches them (src/train/gpu_plugin.c).
#ifndef HW_GPU_TRAIN_H
#define HW_GPU_TRAIN_H

#include "hw/train.h"

// The same on GPUs (config->device is cuda:N); hw_train_hogwild and hw_train_dataparallel hand
// over to these. Hogwild: N worker processes on weights shared in one GPU's memory through CUDA IPC,
// or a copy per GPU of config->gpus, coupled (src/cuda/train/hogwild_gpu.c, gpu_copies.c). DataParallel: a replica per entry of config->gpus, or
// config->replicas replicas on config->device when no --gpus (src/cuda/train/dataparallel_gpu.c).
int hw_train_hogwild_cuda(const hw_train_config *config, hw_train_inputs *in, hw_train_result *result);
int hw_train_dataparallel_cuda(const hw_train_config *config, hw_train_inputs *in, hw_train_result *result);
// The GPU part's entry table (src/cuda/train/entry.c): the one symbol libhogwild-cuda.so exports,
// hw_cuda_plugin, which hw_plugin_entry finds (include/hw/plugin.h).
typedef struct {
    int (*train_hogwild)(const hw_train_config *config, hw_train_inputs *in, hw_train_result *result);
    int (*train_dataparallel)(const hw_train_config *config, hw_train_inputs *in, hw_train_result *result);
} hw_gpu_plugin;
// How the core reaches them (src/train/gpu_plugin.c): through the entry table of
// libhogwild-cuda.so beside the binary, loaded on first use, or of the GPU part the binary links
// itself; a build without CUDA refuses, naming the build.
int hw_gpu_train_hogwild(const hw_train_config *config, hw_train_inputs *in, hw_train_result *result);
int hw_gpu_train_dataparallel(const hw_train_config *config, hw_train_inputs *in, hw_train_result *result);

#endif
