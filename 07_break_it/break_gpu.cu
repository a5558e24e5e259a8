/*
 * break_gpu.cu: BREAK IT on the GPU. Step 05's kernel 1 (one thread per
 * query row, the chapter's loop in registers) with the same tagged lines as
 * breaks.c, so a student can make each break by hand in CUDA too. T is the
 * type the tile arithmetic is kept in: float, or __half for the fp16 port
 * whose p, l and o overflow above 65504.
 */
#include <cuda_fp16.h>

#include <cmath>

#include "gpu.cuh"
#include "breaks.h"

template <typename T> __device__ __forceinline__ float st(float x);
template <> __device__ __forceinline__ float st<float>(float x) { return x; }
template <> __device__ __forceinline__ float st<__half>(float x) { return __half2float(__float2half_rn(x)); }

template <int D, typename T>
__global__ void break_kernel(const float *__restrict__ Q, const float *__restrict__ K,  // [bh, N, D]
                             const float *__restrict__ V, float *__restrict__ O,        // [bh, N, D]
                             long N, long row_tiles, int BC, int brk)
{
    const long bh = blockIdx.x / row_tiles, i = (blockIdx.x % row_tiles) * blockDim.x + threadIdx.x;
    if (i >= N) return;
    const float *q = Q + (bh * N + i) * D, *k = K + bh * N * D, *v = V + bh * N * D;
    const float scale = 1.0f / sqrtf((float)D);
    float o[D];
    for (int d = 0; d < D; d++) o[d] = 0.0f;
    float m = brk == BREAK_MAX_ZERO ? 0.0f : -INFINITY;                // BREAK-3: start at 0 instead of -inf
    float l = 0.0f;
    for (long j0 = 0; j0 < N; j0 += BC) {
        const long bc = j0 + BC <= N ? BC : N - j0;
        float m_tile = -INFINITY, l_tile = 0.0f;
        for (long c = 0; c < bc; c++) {                                  // pass 1 over the tile: m_tile
            float acc = 0.0f;
            for (int d = 0; d < D; d++) acc += q[d] * k[(j0 + c) * D + d];
            m_tile = fmaxf(m_tile, st<T>(acc * scale));
        }
        float pv[D];
        for (int d = 0; d < D; d++) pv[d] = 0.0f;
        for (long c = 0; c < bc; c++) {                                  // pass 2: p_tile, l_tile, p_tile V_j
            float acc = 0.0f;
            for (int d = 0; d < D; d++) acc += q[d] * k[(j0 + c) * D + d];
            const float s = st<T>(acc * scale);
            const float p = brk == BREAK_NO_MAX ? st<T>(__expf(s))       // BREAK-1: p = e^s, no max subtracted
                                                : st<T>(__expf(s - m_tile)); // p_tile = e^(s - m_tile)
            l_tile = st<T>(l_tile + p);
            for (int d = 0; d < D; d++) pv[d] = st<T>(pv[d] + p * v[(j0 + c) * D + d]);
        }
        float m_new = fmaxf(m, m_tile), alpha = 1.0f, beta = 1.0f;
        if (brk == BREAK_NONE || brk == BREAK_MAX_ZERO) {
            alpha = __expf(m - m_new);                                   // BREAK-1, BREAK-2: alpha = e^(m - m_new)
            beta = __expf(m_tile - m_new);                               // BREAK-1, BREAK-2: beta = e^(m_tile - m_new)
        }
        l = st<T>(alpha * l + beta * l_tile);                            // l = alpha l + beta l_tile
        for (int d = 0; d < D; d++) o[d] = st<T>(alpha * o[d] + beta * pv[d]); // o = alpha o + beta p_tile V_j
        if (brk == BREAK_NO_RESCALE) m_new = m_tile;                     // BREAK-2: m = m_tile
        m = m_new;
    }
    for (int d = 0; d < D; d++) O[(bh * N + i) * D + d] = st<T>(o[d] / l); // O_i = o / l
}

template <int D>
static void launch(const float *q, const float *k, const float *v, float *o, long bh, long N, long BC, int brk, int fp16)
{
    const int threads = 64;
    const long row_tiles = (N + threads - 1) / threads;
    if (fp16) break_kernel<D, __half><<<(unsigned)(bh * row_tiles), threads>>>(q, k, v, o, N, row_tiles, (int)BC, brk);
    else break_kernel<D, float><<<(unsigned)(bh * row_tiles), threads>>>(q, k, v, o, N, row_tiles, (int)BC, brk);
    CUDA_CHECK_LAST();
}

extern "C" int break_forward_gpu(const float *q, const float *k, const float *v, float *o, long bh, long N, long D, long BC,
                                 int brk, int fp16)
{
    if (D != 32 && D != 64 && D != 128) return -1;
    const size_t n = (size_t)bh * N * D;
    void *dq = dupload(q, n, DT_FP32, "Q"), *dk = dupload(k, n, DT_FP32, "K"), *dv = dupload(v, n, DT_FP32, "V");
    float *dout = (float *)dmalloc(n * 4, "O");
    dpoison(dout, n, DT_FP32);
    const float *Q = (const float *)dq, *K = (const float *)dk, *V = (const float *)dv;
    if (D == 32) launch<32>(Q, K, V, dout, bh, N, BC, brk, fp16);
    else if (D == 64) launch<64>(Q, K, V, dout, bh, N, BC, brk, fp16);
    else launch<128>(Q, K, V, dout, bh, N, BC, brk, fp16);
    gpu_sync_check();
    ddownload(o, dout, n, DT_FP32);
    dfree(dq); dfree(dk); dfree(dv); dfree(dout);
    return 0;
}
