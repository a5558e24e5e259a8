/*
 * launch_tc.cuh: the launch of the tensor-core kernels 3 to 10, written once (and tc_supports, the head dims of every
 * 16-bit kernel).
 *
 * Extends nothing: not a rung but the part kernels 3-10 share. The idea: each kernel file says only what is its own:
 * the kernel, its shared memory, its rows per block and its threads, in a small traits struct
 *     template <int D, typename T, int BC = 0> struct KnLaunch {
 *         static constexpr size_t bytes = ...;                     // dynamic shared memory
 *         static constexpr int br = ..., threads = ..., bc = ...;  // query rows, threads, keys per K/V tile
 *         static constexpr TcKernel<T> fn = kernelN<D, T, bc>;
 *     };
 * and its launcher is tc_launch<KnLaunch>(N, q, k, v, o, ...) with N its number. A kernel that writes L for the
 * backward (kernel 9) has fn of type TcKernelL<T> and passes L as tc_launch's last argument. The traits' third
 * parameter, BC, is 0 for the kernel's own K/V tile, else that many keys, with bc the tile it gives (0: a kernel whose
 * tile does not change, kernels 3 and 10). Where a block may have less shared memory than the kernel's tiles take
 * (64 KB on Turing, 99 KB on the RTX 30/40/50 and the L4: kernels 4-9 at D = 128 take 87-104 KB), the launch halves
 * BC until they fit, down to 16 keys at D = 128 (one k-step of P V) and 64 at D = 64 (which fit 64 KB in every
 * kernel), as FlashAttention-2 narrows its K/V tile on sm_86 and sm_89. describe() names the tile run.
 *
 * Why: the launch (the shared-memory opt-in, the grid, the dtype and D dispatch, the narrowing) is the same for eight
 * kernels; written in each file it would bury the lines that differ. Every other line of the kernel is its own: the
 * double buffer, the row tile, the registers, the one idea it adds.
 *
 * What it costs: on a narrowed tile, each tile's fixed work (a barrier, the row max's shuffles, alpha and the rescale
 * of o) is spread over fewer keys.
 *
 * Measured: checked, not timed: kernels 4-9 on narrowed K/V tiles pass step05's and step06's --check on an emulated T4
 * (H200, --gpu-as t4); the runs: RESULTS.md#launch-tc.
 */
#ifndef LAUNCH_TC_CUH
#define LAUNCH_TC_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdio>

#include "gpu.cuh"
#include "../kernels.h"

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

/* One (D, dtype, BC) instance: shared memory over 48 KB asked for (and checked
 * against the device's opt-in limit), one block per (batch, head, row tile). */
template <int D, typename T, class C>
static int tc_launch_cfg(int id, const void *q, const void *k, const void *v, void *o, float *Lp, const float *slope,
                         long B, long H, long N, int causal, cudaStream_t s)
{
    const size_t bytes = C::bytes;
    if (smem_opt_in(C::fn, bytes, "kernel", id, D)) return -1;
    const long row_tiles = (N + C::br - 1) / C::br;
    const float scale_log2 = softmax_scale_log2(D);
    tc_call<T>(C::fn, (unsigned)(B * H * row_tiles), C::threads, bytes, s, (const T *)q, (const T *)k, (const T *)v,
               (T *)o, Lp, slope, N, row_tiles, causal, scale_log2);
    CUDA_CHECK_LAST();
    return 0;
}

/* The one rule of the narrowing, for the launch and its describe line alike: a configuration C whose K/V tile can
 * still be halved (to 64 keys at D = 64, which fit 64 KB already, kernels 8 and 9 taking 128; to 16 at D = 128) is
 * halved while its shared memory is over this GPU's per-block limit. */
template <int D, class C> constexpr bool tc_can_halve = C::bc > (D == 64 ? 64 : 16);
template <class C> static bool tc_over_limit() { return C::bytes > (size_t)gpu_smem_block(); }

/* The K/V tile a launch of L at (D, T) takes on this GPU: its own, or halved until the tiles fit. */
template <int D, typename T, template <int, typename, int> class L, int BC = 0> static void tc_fit(int *bc, size_t *bytes)
{
    using C = L<D, T, BC>;
    if constexpr (tc_can_halve<D, C>)
        if (tc_over_limit<C>()) return tc_fit<D, T, L, C::bc / 2>(bc, bytes);
    *bc = C::bc, *bytes = C::bytes;
}

template <int D, typename T, template <int, typename, int> class L, int BC = 0>
static int tc_launch_dt(int id, const void *q, const void *k, const void *v, void *o, float *Lp, const float *slope,
                        long B, long H, long N, int causal, cudaStream_t s)
{
    using C = L<D, T, BC>;
    if constexpr (tc_can_halve<D, C>)
        if (tc_over_limit<C>()) return tc_launch_dt<D, T, L, C::bc / 2>(id, q, k, v, o, Lp, slope, B, H, N, causal, s);
    return tc_launch_cfg<D, T, C>(id, q, k, v, o, Lp, slope, B, H, N, causal, s);
}

/* The FusedKernel launch of kernel `id`: fp16 or bf16, D = 64 or 128; Lp
 * (launch_l) only for a kernel whose traits' fn takes L. */
template <template <int, typename, int> class L>
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

/* For describe(): the K/V tile and the bytes a launch of L takes at D on this GPU (fp16 and bf16 alike), and
 * the words that say when the tile was narrowed to fit ("" when it is the kernel's own). */
template <template <int, typename, int> class L> static const char *tc_fit_desc(long D, int *bc, size_t *bytes)
{
    if (D == 64) tc_fit<64, __half, L>(bc, bytes);
    else tc_fit<128, __half, L>(bc, bytes);
    const int own = D == 64 ? L<64, __half, 0>::bc : L<128, __half, 0>::bc;
    return *bc == own ? "" : " (the K/V tile narrowed to fit this GPU's shared memory per block)";
}

#endif
