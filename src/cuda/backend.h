// backend: the GPU backend of the executor (src/nn/exec.c), defined in backend.c: one forward and
// one backward per layer kind, on device pointers. The runner (runner.cu) walks its model with it.
#ifndef HW_CUDA_BACKEND_H
#define HW_CUDA_BACKEND_H

#ifdef __cplusplus
extern "C" {
#endif
#include "hw/nn.h"

extern const hw_backend hw_cuda_backend;
#ifdef __cplusplus
}
#endif

#endif
