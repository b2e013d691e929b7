// host_device: HW_HOST_DEVICE marks a function that nvcc compiles for the device as well as the
// host, where the same arithmetic must run on both (the dropout masks, the rule of the rounds).
// Outside nvcc it is empty, so the header stays plain C11.
#ifndef HW_HOST_DEVICE_H
#define HW_HOST_DEVICE_H

#if defined(__CUDACC__)
#define HW_HOST_DEVICE __host__ __device__
#else
#define HW_HOST_DEVICE
#endif

#endif
