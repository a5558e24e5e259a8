/*
 * gpu.cuh: the error macros for .cu files (NVIDIA cuda-samples' habit): the
 * failing expression, file:line and the error's name, then exit 1.
 */
#ifndef GPU_CUH
#define GPU_CUH

#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#include "common.h"
#include "gpu.h"

#define CUDA_CHECK(call)                                                                 \
    do {                                                                                 \
        cudaError_t err_ = (call);                                                       \
        if (err_ != cudaSuccess) {                                                       \
            fprintf(stderr, "%s: CUDA error %s (%s) at %s:%d: %s\n", g_prog,             \
                    cudaGetErrorName(err_), cudaGetErrorString(err_), __FILE__, __LINE__, \
                    #call);                                                              \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

/* After every launch: a bad configuration shows here, a fault in the kernel
 * shows at the next synchronising call (also checked). */
#define CUDA_CHECK_LAST() CUDA_CHECK(cudaGetLastError())

#ifdef CUBLAS_API_H_
#define CUBLAS_CHECK(call)                                                               \
    do {                                                                                 \
        cublasStatus_t st_ = (call);                                                     \
        if (st_ != CUBLAS_STATUS_SUCCESS) {                                              \
            fprintf(stderr, "%s: cuBLAS error %s at %s:%d: %s\n", g_prog,                \
                    cublasGetStatusName(st_), __FILE__, __LINE__, #call);                \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)
#endif

#endif
