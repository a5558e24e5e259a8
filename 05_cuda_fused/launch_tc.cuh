/*
 * launch_tc.cuh: the launch every tensor-core kernel (3 to 10) does, written
 * once. Each kernel file says only what is its own: the kernel, its shared
 * memory, its rows per block and its threads, in a small traits struct
 *     template <int D, typename T> struct KnLaunch {
 *         static constexpr size_t bytes = ...;            // dynamic shared memory
 *         static constexpr int br = ..., threads = ...;   // query rows and threads per block
 *         static constexpr TcKernel<T> fn = kernelN<D, T>;
 *     };
 * and its launcher is tc_launch<KnLaunch>(N, q, k, v, o, ...) with N its number.
 * A kernel that writes L for the backward (kernel 9) has fn of type
 * TcKernelL<T> and passes L as tc_launch's last argument.
 */
#ifndef LAUNCH_TC_CUH
#define LAUNCH_TC_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdio>

#include "gpu.cuh"
#include "kernels.h"

/* Every tensor-core kernel's signature: Q, K, V, O as [B, H, N, D], the row
 * tiles per head, the causal flag and the softmax scale in log2 units. */
template <typename T>
using TcKernel = void (*)(const T *__restrict__, const T *__restrict__, const T *__restrict__, T *__restrict__, long,
                          long, int, float);
/* The same with L [B, H, N] (or NULL) after O: the kernels the backward pairs
 * with, which write L = m + log l per row when asked (kernel 9). */
template <typename T>
using TcKernelL = void (*)(const T *__restrict__, const T *__restrict__, const T *__restrict__, T *__restrict__,
                           float *__restrict__, long, long, int, float);

/* The same with ALiBi's slopes [B*H] after O: a kernel with a score modifier (kernel 3's alibi build). */
template <typename T>
using TcKernelA = void (*)(const T *__restrict__, const T *__restrict__, const T *__restrict__, T *__restrict__,
                           const float *__restrict__, long, long, int, float);

/* One launch, overloaded on the kernel's type: a kernel without L (or slopes) is never handed one (its
 * FusedKernel has launch_l / launch_alibi = NULL, so Lp / slope is NULL here). */
template <typename T>
static void tc_call(TcKernel<T> fn, unsigned grid, int threads, size_t bytes, cudaStream_t s, const T *q, const T *k,
                    const T *v, T *o, float *Lp, const float *slope, long N, long row_tiles, int causal, float scale_log2)
{
    (void)Lp, (void)slope;
    fn<<<grid, threads, bytes, s>>>(q, k, v, o, N, row_tiles, causal, scale_log2);
}
template <typename T>
static void tc_call(TcKernelL<T> fn, unsigned grid, int threads, size_t bytes, cudaStream_t s, const T *q, const T *k,
                    const T *v, T *o, float *Lp, const float *slope, long N, long row_tiles, int causal, float scale_log2)
{
    (void)slope;
    fn<<<grid, threads, bytes, s>>>(q, k, v, o, Lp, N, row_tiles, causal, scale_log2);
}
template <typename T>
static void tc_call(TcKernelA<T> fn, unsigned grid, int threads, size_t bytes, cudaStream_t s, const T *q, const T *k,
                    const T *v, T *o, float *Lp, const float *slope, long N, long row_tiles, int causal, float scale_log2)
{
    (void)Lp;
    fn<<<grid, threads, bytes, s>>>(q, k, v, o, slope, N, row_tiles, causal, scale_log2);
}

/* One (D, dtype) instance: shared memory over 48 KB asked for (and checked
 * against the device's opt-in limit), one block per (batch, head, row tile). */
template <int D, typename T, template <int, typename> class L>
static int tc_launch_dt(int id, const void *q, const void *k, const void *v, void *o, float *Lp, const float *slope,
                        long B, long H, long N, int causal, cudaStream_t s)
{
    const size_t bytes = L<D, T>::bytes;
    if (smem_opt_in(L<D, T>::fn, bytes, "kernel", id, D)) return -1;
    const long row_tiles = (N + L<D, T>::br - 1) / L<D, T>::br;
    const float scale_log2 = 1.4426950408889634f / sqrtf((float)D); /* log2(e) / sqrt(D) */
    tc_call<T>(L<D, T>::fn, (unsigned)(B * H * row_tiles), L<D, T>::threads, bytes, s, (const T *)q, (const T *)k,
               (const T *)v, (T *)o, Lp, slope, N, row_tiles, causal, scale_log2);
    CUDA_CHECK_LAST();
    return 0;
}

/* The FusedKernel launch of kernel `id`: fp16 or bf16, D = 64 or 128; Lp
 * (launch_l) only for a kernel whose traits' fn takes L. */
template <template <int, typename> class L>
static int tc_launch(int id, const void *q, const void *k, const void *v, void *o, long B, long H,
                     long N, long D, int dtype, int causal, void *stream, float *Lp = nullptr,
                     const float *slope = nullptr)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (dtype == DT_FP16 && D == 64) return tc_launch_dt<64, __half, L>(id, q, k, v, o, Lp, slope, B, H, N, causal, s);
    if (dtype == DT_FP16 && D == 128) return tc_launch_dt<128, __half, L>(id, q, k, v, o, Lp, slope, B, H, N, causal, s);
    if (dtype == DT_BF16 && D == 64) return tc_launch_dt<64, __nv_bfloat16, L>(id, q, k, v, o, Lp, slope, B, H, N, causal, s);
    if (dtype == DT_BF16 && D == 128) return tc_launch_dt<128, __nv_bfloat16, L>(id, q, k, v, o, Lp, slope, B, H, N, causal, s);
    fprintf(stderr, "%s: kernel %d takes fp16/bf16 and D = 64 or 128, not %s D=%ld\n", g_prog, id, dtype_name(dtype), D);
    return -1;
}

static int tc_supports(long D) { return D == 64 || D == 128; }

#endif
