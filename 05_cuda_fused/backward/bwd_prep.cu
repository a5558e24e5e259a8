/*
 * bwd_prep.cu: the two small passes around every backward kernel's main loop (bwd.cuh says why they are separate
 * launches): before it, Delta = rowsum(dO o O), L in log2 units and dQ's accumulator zeroed; after it, dQ converted
 * from the fp32 accumulator.
 *
 * The preprocessing is flash_backward.c's line
 *     for (long i = 0; i < N; i++) delta[i] = dot_f32(dOh + i * D, oh + i * D, D); // Delta_i = dO_i . O_i
 * and its dQ = 0, with L_i log2(e) beside it: the tensor-core kernels compute p = 2^(s log2(e) / sqrt(D) - L log2(e))
 * with one FFMA and one ex2, so they read L already in those units (+inf on the rows that pad the last row tile, so
 * that their p = 2^(-inf) = 0 with no test).
 * What it costs: the preprocessing reads O and dO once (2 B H N D elements) and writes O(B H N) floats, plus the fp32
 * dQ accumulator's zeroing for the kernels that add into it (B H N D floats; backward kernels 10-12: B H Npad D, their
 * tiled accumulator's padding rows too); the conversion reads the accumulator and writes dQ. Both are memory-bound
 * and small next to the main loop's O(N^2 D) work (./step05 --backward times the whole backward, these included, as
 * FlashAttention-2's benchmark does). The measured cost of the two designs of the pass: RESULTS.md#bwd-prep.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>

#include "bwd.cuh"
#include "gpu.cuh"
#include "../kernels.h"

// --- the kernels -------------------------------------------------------------------

template <typename T> __device__ __forceinline__ float bwd_to_f(T x);
template <> __device__ __forceinline__ float bwd_to_f<float>(float x) { return x; }
template <> __device__ __forceinline__ float bwd_to_f<__half>(__half x) { return __half2float(x); }
template <> __device__ __forceinline__ float bwd_to_f<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }

constexpr int PREP_WARPS = 8;

template <typename T>
__global__ void __launch_bounds__(PREP_WARPS * 32)
bwd_preprocess_kernel(const T *__restrict__ O,      // [BH, N, D]
                      const T *__restrict__ dO,     // [BH, N, D]
                      const float *__restrict__ L,  // [BH, N]
                      float *__restrict__ delta,    // [BH, Npad]
                      float *__restrict__ lse2,     // [BH, Npad] or NULL
                      float *__restrict__ dq_zero,  // [BH, zrows, D] or NULL
                      long N, long Npad, long zrows, int D, long rows)
{
    const long row = (long)blockIdx.x * PREP_WARPS + threadIdx.x / 32;   // one warp per row of [BH, Npad]
    const int lane = threadIdx.x % 32;
    if (row >= rows) return;
    const long bh = row / Npad, i = row % Npad;
    float acc = 0.0f;
    if (i < N) {
        const T *o = O + (bh * N + i) * D, *d = dO + (bh * N + i) * D;
        for (int x = lane; x < D; x += 32) acc += bwd_to_f(d[x]) * bwd_to_f(o[x]);   // the warp reads the row coalesced
    }
    if (dq_zero && i < zrows)
        for (int x = lane; x < D; x += 32) dq_zero[(bh * zrows + i) * D + x] = 0.0f;   // dQ is summed into from every K/V tile
#pragma unroll
    for (int off = 16; off > 0; off /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if (lane == 0) {
        delta[row] = acc;                                                             // Delta_i = dO_i . O_i (0 past N)
        if (lse2) lse2[row] = i < N ? L[bh * N + i] * LOG2E : INFINITY;               // L_i log2(e); +inf past N
    }
}

/* The same for 16-bit O and dO at D = 64 and 128 (every tensor-core backward): each lane reads 16 bytes of O_i and of
 * dO_i (8 elements), LPR = D / 8 lanes a row, 32 / LPR rows a warp. The warp-per-row kernel above reads 2 bytes a lane
 * and spends a shuffle tree, a load of L and two stores per 64 elements at D = 64: its time per byte was twice that at
 * D = 128 (Nsight Compute, H100: 120.5 us at D = 64 against 59.0 at D = 128 for the same 134 MB, which 4.4 TB/s reads
 * in about 30 us), 17% of the whole backward at N = 512. This one made backward kernel 11 timed whole 4-13% faster at
 * D = 64 from N = 512 to 2048 (H200). One head per grid row (blockIdx.y: no 64-bit division by Npad a lane), and the
 * zeroing of kernels 10-12's tiled dQ accumulator in this pass rather than a memset of its own: one pass and one
 * launch fewer. */
template <typename T, int LPR>
__global__ void __launch_bounds__(256)
bwd_preprocess_vec_kernel(const T *__restrict__ O, const T *__restrict__ dO, const float *__restrict__ L,
                          float *__restrict__ delta, float *__restrict__ lse2, float *__restrict__ dq_zero, long BH,
                          long N, long Npad, long zrows)
{
    constexpr int D = 8 * LPR;
    const long i = ((long)blockIdx.x * 256 + threadIdx.x) / LPR;           // LPR consecutive lanes per row
    const int part = threadIdx.x % LPR;
    /* one head per grid row (no division by Npad), striding by the grid's at most 65535 rows past that many heads */
    for (long bh = blockIdx.y; bh < BH; bh += gridDim.y) {
        const long row = bh * Npad + i;
        float acc = 0.0f;
        if (i < N) {
            const size_t off = (size_t)(bh * N + i) * D + 8 * part;
            const uint4 a = *reinterpret_cast<const uint4 *>(O + off), b = *reinterpret_cast<const uint4 *>(dO + off);
            const T *oa = reinterpret_cast<const T *>(&a), *db = reinterpret_cast<const T *>(&b);
#pragma unroll
            for (int x = 0; x < 8; x++) acc += bwd_to_f(db[x]) * bwd_to_f(oa[x]);
        }
        if (dq_zero && i < zrows) {                                                     // dQ is summed into from every K/V tile
            float4 *z = reinterpret_cast<float4 *>(dq_zero + (size_t)(bh * zrows + i) * D + 8 * part);
            z[0] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            z[1] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
#pragma unroll
        for (int off = LPR / 2; off > 0; off /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, off);   // inside the row's lanes
        if (i < Npad && part == 0) {
            delta[row] = acc;                                                         // Delta_i = dO_i . O_i (0 past N)
            if (lse2) lse2[row] = i < N ? L[bh * N + i] * LOG2E : INFINITY;   // L_i log2(e); +inf past N
        }
    }
}

template <typename T> __device__ __forceinline__ void bwd_store4(T *p, float4 x);
template <> __device__ __forceinline__ void bwd_store4<__half>(__half *p, float4 x)
{
    __half2 a = __floats2half2_rn(x.x, x.y), b = __floats2half2_rn(x.z, x.w);
    uint2 u = {*reinterpret_cast<uint32_t *>(&a), *reinterpret_cast<uint32_t *>(&b)};
    *reinterpret_cast<uint2 *>(p) = u;
}
template <> __device__ __forceinline__ void bwd_store4<__nv_bfloat16>(__nv_bfloat16 *p, float4 x)
{
    __nv_bfloat162 a = __floats2bfloat162_rn(x.x, x.y), b = __floats2bfloat162_rn(x.z, x.w);
    uint2 u = {*reinterpret_cast<uint32_t *>(&a), *reinterpret_cast<uint32_t *>(&b)};
    *reinterpret_cast<uint2 *>(p) = u;
}

/* dQ = dQ_acc / sqrt(D), four elements per thread (16-byte loads). */
template <typename T>
__global__ void bwd_convert_kernel(const float *__restrict__ acc, T *__restrict__ dq, size_t n4, float scale)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x) {
        float4 x = reinterpret_cast<const float4 *>(acc)[i];
        x.x *= scale, x.y *= scale, x.z *= scale, x.w *= scale;
        bwd_store4<T>(dq + 4 * i, x);
    }
}

/* The same from backward kernel 10's tiled accumulator (bwd.cuh): thread j
 * of head blockIdx.y writes dq's four elements 4 j .. 4 j + 3 of the head's
 * [N, D], read as one float4 of their block (c % 4 = 0, so the four are one
 * chunk). */
template <typename T, int D, int SWZ>
__global__ void bwd_convert_tiled_kernel(const float *__restrict__ acc, T *__restrict__ dq, long BH, long N, long Npad, float scale)
{
    /* one head per grid row (blockIdx.y), so the row and column come from shifts, not 64-bit divisions by N */
    constexpr int row4 = D / 4, dblocks = D / 64;
    const long n4 = N * row4;
    for (long bh = blockIdx.y; bh < BH; bh += gridDim.y) {   // past 65535 heads (the grid's rows), a stride over them
        const float *acc_h = acc + bh * Npad * D;
        T *dq_h = dq + bh * N * D;
        for (long j = blockIdx.x * (long)blockDim.x + threadIdx.x; j < n4; j += (long)gridDim.x * blockDim.x) {
            const int r = (int)(j / row4), c = (int)(j % row4) * 4;   // row4 a power of two: a shift and a mask
            const float *blk = acc_h + ((long)(r / 64) * dblocks + c / 64) * 4096;
            float4 x = *reinterpret_cast<const float4 *>(blk + bwd_dq_tiled_off<SWZ>(r % 64, c % 64));
            x.x *= scale, x.y *= scale, x.z *= scale, x.w *= scale;
            bwd_store4<T>(dq_h + 4 * j, x);
        }
    }
}

// --- the launchers ------------------------------------------------------------------

int bwd_preprocess(const void *o, const void *dout, const float *L, float *delta, float *lse2, float *dq_zero, long zrows,
                   long BH, long N, long Npad, long D, int dtype, cudaStream_t s)
{
    if (dq_zero && (zrows < N || zrows > Npad)) {
        fprintf(stderr, "%s: bwd_preprocess zeroes dQ's N = %ld to Npad = %ld rows a head, not %ld\n", g_prog, N, Npad, zrows);
        return -1;
    }
    const long rows = BH * Npad;
    const bool aligned = ((uintptr_t)o | (uintptr_t)dout | (uintptr_t)dq_zero) % 16 == 0;   // rows of D = 64, 128 keep it
    if ((dtype == DT_FP16 || dtype == DT_BF16) && (D == 64 || D == 128) && aligned) {   // 16 bytes a lane
        const dim3 vgrid((unsigned)((Npad * (D / 8) + 255) / 256), (unsigned)(BH < 65535 ? BH : 65535));
        if (dtype == DT_FP16 && D == 64)
            bwd_preprocess_vec_kernel<__half, 8><<<vgrid, 256, 0, s>>>((const __half *)o, (const __half *)dout, L, delta,
                                                                       lse2, dq_zero, BH, N, Npad, zrows);
        else if (dtype == DT_FP16)
            bwd_preprocess_vec_kernel<__half, 16><<<vgrid, 256, 0, s>>>((const __half *)o, (const __half *)dout, L, delta,
                                                                        lse2, dq_zero, BH, N, Npad, zrows);
        else if (D == 64)
            bwd_preprocess_vec_kernel<__nv_bfloat16, 8><<<vgrid, 256, 0, s>>>(
                (const __nv_bfloat16 *)o, (const __nv_bfloat16 *)dout, L, delta, lse2, dq_zero, BH, N, Npad, zrows);
        else
            bwd_preprocess_vec_kernel<__nv_bfloat16, 16><<<vgrid, 256, 0, s>>>(
                (const __nv_bfloat16 *)o, (const __nv_bfloat16 *)dout, L, delta, lse2, dq_zero, BH, N, Npad, zrows);
        CUDA_CHECK_LAST();
        return 0;
    }
    const unsigned grid = (unsigned)((rows + PREP_WARPS - 1) / PREP_WARPS);
    if (dtype == DT_FP32)
        bwd_preprocess_kernel<float><<<grid, PREP_WARPS * 32, 0, s>>>((const float *)o, (const float *)dout, L, delta, lse2,
                                                                      dq_zero, N, Npad, zrows, (int)D, rows);
    else if (dtype == DT_FP16)
        bwd_preprocess_kernel<__half><<<grid, PREP_WARPS * 32, 0, s>>>((const __half *)o, (const __half *)dout, L, delta,
                                                                       lse2, dq_zero, N, Npad, zrows, (int)D, rows);
    else
        bwd_preprocess_kernel<__nv_bfloat16><<<grid, PREP_WARPS * 32, 0, s>>>(
            (const __nv_bfloat16 *)o, (const __nv_bfloat16 *)dout, L, delta, lse2, dq_zero, N, Npad, zrows, (int)D, rows);
    CUDA_CHECK_LAST();
    return 0;
}

int bwd_convert_dq(const float *dq_acc, void *dq, size_t n, float scale, int dtype, cudaStream_t s)
{
    if (n % 4 != 0 || dtype == DT_FP32) {
        fprintf(stderr, "%s: bwd_convert_dq takes fp16/bf16 and a multiple of 4 elements, not %s and %zu\n", g_prog,
                dtype_name(dtype), n);
        return -1;
    }
    const size_t n4 = n / 4;
    const unsigned grid = (unsigned)(n4 / 256 + 1 < 65536 ? n4 / 256 + 1 : 65536);
    if (dtype == DT_FP16) bwd_convert_kernel<__half><<<grid, 256, 0, s>>>(dq_acc, (__half *)dq, n4, scale);
    else bwd_convert_kernel<__nv_bfloat16><<<grid, 256, 0, s>>>(dq_acc, (__nv_bfloat16 *)dq, n4, scale);
    CUDA_CHECK_LAST();
    return 0;
}

/* The tiled conversion's instance for the dtype, D and swizzle. */
template <int SWZ>
static void launch_convert_tiled(const float *dq_acc, void *dq, long BH, long N, long Npad, long D, float scale, int dtype,
                                 dim3 grid, cudaStream_t s)
{
    if (dtype == DT_FP16 && D == 64) bwd_convert_tiled_kernel<__half, 64, SWZ><<<grid, 256, 0, s>>>(dq_acc, (__half *)dq, BH, N, Npad, scale);
    else if (dtype == DT_FP16) bwd_convert_tiled_kernel<__half, 128, SWZ><<<grid, 256, 0, s>>>(dq_acc, (__half *)dq, BH, N, Npad, scale);
    else if (D == 64) bwd_convert_tiled_kernel<__nv_bfloat16, 64, SWZ><<<grid, 256, 0, s>>>(dq_acc, (__nv_bfloat16 *)dq, BH, N, Npad, scale);
    else bwd_convert_tiled_kernel<__nv_bfloat16, 128, SWZ><<<grid, 256, 0, s>>>(dq_acc, (__nv_bfloat16 *)dq, BH, N, Npad, scale);
}

int bwd_convert_dq_tiled(const float *dq_acc, void *dq, long BH, long N, long Npad, long D, float scale, int dtype,
                         cudaStream_t s, int swz)
{
    if (D % 64 != 0 || Npad % 64 != 0 || Npad < N || dtype == DT_FP32) {
        fprintf(stderr, "%s: bwd_convert_dq_tiled takes fp16/bf16, D and Npad multiples of 64, not %s, D=%ld, Npad=%ld\n",
                g_prog, dtype_name(dtype), D, Npad);
        return -1;
    }
    if ((D != 64 && D != 128) || (swz != DQ_SWZ_ROW8 && swz != DQ_SWZ_HALF)) {
        fprintf(stderr, "%s: bwd_convert_dq_tiled takes D = 64 or 128 and swizzle %d or %d, not D=%ld, %d\n", g_prog,
                DQ_SWZ_ROW8, DQ_SWZ_HALF, D, swz);
        return -1;
    }
    const size_t n4 = (size_t)N * D / 4;                                     // per head
    const dim3 grid((unsigned)(n4 / 256 + 1 < 4096 ? n4 / 256 + 1 : 4096), (unsigned)(BH < 65535 ? BH : 65535));
    if (swz == DQ_SWZ_HALF) launch_convert_tiled<DQ_SWZ_HALF>(dq_acc, dq, BH, N, Npad, D, scale, dtype, grid, s);
    else launch_convert_tiled<DQ_SWZ_ROW8>(dq_acc, dq, BH, N, Npad, D, scale, dtype, grid, s);
    CUDA_CHECK_LAST();
    return 0;
}
