/*
 * kernels.h: the registry of step 05's fused kernels.
 *
 * Each kernelN_*.cu file defines one FusedKernel and registers it with
 * FUSED_REGISTER(k) at file scope, so adding a kernel is adding a file: no
 * list to edit. Step 05 (and step 06, which runs the same kernels causally)
 * walks the registry in id order.
 */
#ifndef KERNELS_H
#define KERNELS_H

#include <stddef.h>

#include "common.h"

typedef struct FusedKernel {
    int id;                 /* the N of --kernel N and of kernelN_*.cu */
    const char *name;       /* "transcription", "smem tiles", ... */
    const char *idea;       /* one line: the one idea this kernel adds */
    unsigned dtypes;        /* 1u << DT_FP32 | 1u << DT_FP16 | 1u << DT_BF16 it accepts */
    /* 1 if this kernel is built for head dim D (others: a usage error upstream). */
    int (*supports_dim)(long D);
    /* O = softmax(Q K^T / sqrt(D)) V on device pointers, all [B, H, N, D]
     * contiguous in the kernel's dtype (float, __half or __nv_bfloat16; O in
     * the same dtype). causal != 0: key index <= query index, with absolute
     * indices and K/V tiles wholly above the diagonal skipped. Launches on
     * stream s (a cudaStream_t, void * so that C can include this header),
     * checks the launch (CUDA_CHECK_LAST), does not synchronise.
     * Returns 0, or -1 after printing one line if it cannot run this case
     * (shared memory over the device limit, say). */
    int (*launch)(const void *q, const void *k, const void *v, void *o, long B, long H, long N, long D,
                  int dtype, int causal, void *s);
    /* Tile sizes and launch shape for this D, for the output ("BR=64 BC=64, 128 threads"). */
    void (*describe)(long D, int dtype, char *buf, size_t n);
    /* NULL for a kernel that runs on any CUDA GPU; else returns NULL when it
     * runs on this one, or one line saying why not (kernels 10, 11: Hopper only).
     * Callers skip an unavailable kernel and print the line once. */
    const char *(*unavailable)(void);
} FusedKernel;

/* The line why kernel k cannot run on this device, or NULL if it can. */
#define FUSED_UNAVAILABLE(k) ((k)->unavailable ? (k)->unavailable() : (const char *)0)

#ifdef __cplusplus
extern "C" {
#endif

/* Registration (C++ static initialisation; the .cu files are C++). */
int fused_register(const FusedKernel *k);
#define FUSED_REGISTER(k) [[maybe_unused]] static const int fused_registered_##k = fused_register(&(k))

/* The registered kernels in id order; n_out gets the count. */
const FusedKernel *const *fused_kernels(int *n_out);
const FusedKernel *fused_kernel(int id); /* NULL if no such id */

#ifdef __cplusplus
}
#endif

#endif
