/*
 * fp8_quantize.cu: fp8.c's quantizer of Q and K on the GPU, with the Walsh-Hadamard rotation fused in.
 *
 * The FP8 kernels read e4m3 bytes and one scale per block of rows; something has to make them from the
 * model's 16-bit Q and K, and that pass reads Q and K anyway. The idea: fuse the rotation (fwht) into it, where it is
 * nearly free: a row's D values sit in one warp's registers (D / 32 a lane), the butterflies of stride below D / 32
 * stay inside a lane and the others are one shuffle each, and no byte more crosses memory.
 * Why: without the fusion the rotation is a pass of its own (fwht_gpu in fp32: read and write Q and K once more).
 *
 * One block of 256 threads quantizes one scale block (ROWS = 64 rows of Q or 128 of K) of one head: each
 * warp takes rows w, w + 8, ...; the block's amax is a warp maximum then a shared-memory one; then every
 * value is divided by amax / 448 and rounded to e4m3. Each step is fp8.c's, in the same order, so the codes
 * and scales are fp8_quantize's bit for bit on the same 16-bit inputs (checked by ./step05 --dtype fp8 --check).
 * What it costs: not tuned: it moves about half of what the HBM can.
 * Measured: H100, Q and K at D = 128 (the bench's shapes): 0.112 ms per block, 0.135 ms with the rotation, where the
 * separate fp32 rotation took 0.48 ms; fp8/RESULTS.md#quantizer.
 */
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "fp8.h"
#include "gpu.cuh"

template <int D, int ROWS>
__global__ void __launch_bounds__(256) fp8_quantize_kernel(const __half *__restrict__ x, long N, int hadamard,
                                                           uint8_t *__restrict__ x8, float *__restrict__ sc)
{
    constexpr int E = D / 32, WARPS = 8, RPW = ROWS / WARPS;   // values a lane, rows a warp
    __shared__ float wmax[WARPS];
    const long nb = (N + ROWS - 1) / ROWS, h = blockIdx.x / nb, b = blockIdx.x % nb;
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    const long r0 = b * ROWS;
    float v[RPW][E];
    float amax = 0.0f;
#pragma unroll
    for (int i = 0; i < RPW; i++) {
        const long row = r0 + w + WARPS * i;
        const __half *xr = x + (h * N + row) * D + lane * E;
#pragma unroll
        for (int e = 0; e < E; e++) v[i][e] = row < N ? __half2float(xr[e]) : 0.0f;
        if (hadamard) {                            // fwht: butterflies of stride hs, (a, b) -> (a + b, a - b)
#pragma unroll
            for (int hs = 1; hs < E; hs *= 2)      // inside the lane: values lane*E + e
#pragma unroll
                for (int e = 0; e < E; e++)
                    if (!(e & hs)) {
                        const float a = v[i][e], c = v[i][e + hs];
                        v[i][e] = a + c;
                        v[i][e + hs] = a - c;
                    }
#pragma unroll
            for (int ls = 1; ls < 32; ls *= 2)     // across lanes: stride ls * E, the partner lane ^ ls
#pragma unroll
                for (int e = 0; e < E; e++) {
                    const float p = __shfl_xor_sync(0xffffffffu, v[i][e], ls);
                    v[i][e] = (lane & ls) ? p - v[i][e] : v[i][e] + p;   // the lower index is a
                }
            const float s = 1.0f / sqrtf((float)D);
#pragma unroll
            for (int e = 0; e < E; e++) v[i][e] *= s;
        }
#pragma unroll
        for (int e = 0; e < E; e++) amax = fmaxf(amax, fabsf(v[i][e]));
    }
#pragma unroll
    for (int off = 16; off > 0; off /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
    if (lane == 0) wmax[w] = amax;
    __syncthreads();
    amax = wmax[0];
#pragma unroll
    for (int i = 1; i < WARPS; i++) amax = fmaxf(amax, wmax[i]);
    const float s = amax > 0.0f ? amax / FP8_MAX : 1.0f;          // fp8.c's scale_for
    if (threadIdx.x == 0) sc[h * nb + b] = s;
#pragma unroll
    for (int i = 0; i < RPW; i++) {
        const long row = r0 + w + WARPS * i;
        if (row >= N) continue;
        uint8_t *dst = x8 + (h * N + row) * D + lane * E;
        uint32_t word = 0;
#pragma unroll
        for (int e = 0; e < E; e++)
            word |= (uint32_t)__nv_cvt_float_to_fp8(v[i][e] / s, __NV_SATFINITE, __NV_E4M3) << (8 * e);
        if (E == 4) *reinterpret_cast<uint32_t *>(dst) = word;
        else *reinterpret_cast<uint16_t *>(dst) = (uint16_t)word;
    }
}

extern "C" int fp8_quantize_gpu(const void *x, long bh, long N, long D, long rows, int hadamard, uint8_t *x8, float *s,
                                void *stream)
{
    const unsigned blocks = (unsigned)(bh * ((N + rows - 1) / rows));
    cudaStream_t st = (cudaStream_t)stream;
    const __half *xh = (const __half *)x;
    if (D == 64 && rows == FP8_QBLOCK) fp8_quantize_kernel<64, FP8_QBLOCK><<<blocks, 256, 0, st>>>(xh, N, hadamard, x8, s);
    else if (D == 64 && rows == FP8_KBLOCK) fp8_quantize_kernel<64, FP8_KBLOCK><<<blocks, 256, 0, st>>>(xh, N, hadamard, x8, s);
    else if (D == 128 && rows == FP8_QBLOCK) fp8_quantize_kernel<128, FP8_QBLOCK><<<blocks, 256, 0, st>>>(xh, N, hadamard, x8, s);
    else if (D == 128 && rows == FP8_KBLOCK) fp8_quantize_kernel<128, FP8_KBLOCK><<<blocks, 256, 0, st>>>(xh, N, hadamard, x8, s);
    else {
        fprintf(stderr, "%s: fp8_quantize_gpu takes D = 64 or 128 and blocks of %d or %d rows, not D = %ld, %ld rows\n",
                g_prog, FP8_QBLOCK, FP8_KBLOCK, D, rows);
        return -1;
    }
    CUDA_CHECK_LAST();
    return 0;
}
