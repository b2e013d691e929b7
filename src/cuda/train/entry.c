// entry: the GPU part's entry table, the one symbol libhogwild-cuda.so exports (the version script
// src/cuda/plugin.map hides every other), which src/train/gpu_plugin.c looks up.
#include "hw/gpu_train.h"

const hw_gpu_plugin hw_cuda_plugin = {
    .train_hogwild = hw_train_hogwild_cuda,
    .train_dataparallel = hw_train_dataparallel_cuda,
};
