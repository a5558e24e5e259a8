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

/* A wait on the GPU under gpu.cu's watchdog (FA_WATCHDOG_S): past the deadline the program prints one FAIL line
 * naming `what` and exits 1, so a kernel that never ends is a failed check, not a hung one. gpu.cu's own waits
 * (uploads, downloads, syncs, the timer) and the steps' .cu files' (step 06's model, step 01's naive sync, step 02's
 * timed samples, the registry's fit runs) use it. */
extern "C" void gpu_wait_begin(const char *what);
extern "C" void gpu_wait_end(void);
#define CUDA_WAITED(what, call) do { gpu_wait_begin(what); CUDA_CHECK(call); gpu_wait_end(); } while (0)

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

/* Opts the kernel fn in to `bytes` of dynamic shared memory (above 48 KB a
 * kernel must ask for it): 0, or -1 after gpu_refuse's line when the device
 * (or the --gpu-as GPU) allows less per block; what, id and D name the kernel
 * in it ("kernel", 11, 64). */
template <typename F> static inline int smem_opt_in(F fn, size_t bytes, const char *what, int id, long D)
{
    const int limit = gpu_smem_block();
    if (bytes > (size_t)limit) {
        gpu_refuse("%s %d at D=%ld needs %zu bytes of shared memory per block, this GPU allows %d", what, id, D, bytes,
                   limit);
        return -1;
    }
    CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    return 0;
}

/* What a one-thread probe kernel, compiled as the kernels it stands for are, writes to *ok (1 where this binary
 * holds their code for this GPU): wgmma's availability (kernel 10) and the copy engine's (decode kernel 8). */
template <typename P> static inline int gpu_probe(P probe)
{
    int *d_ok = NULL, ok = 0;
    CUDA_CHECK(cudaMalloc(&d_ok, sizeof *d_ok));
    probe<<<1, 1>>>(d_ok);
    CUDA_CHECK_LAST();
    CUDA_CHECK(cudaMemcpy(&ok, d_ok, sizeof ok, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaFree(d_ok));
    return ok;
}

#endif
