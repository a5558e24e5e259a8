/*
 * Decode kernel 1: the transcription.
 *
 * Extends no kernel: the first rung of the decode ladder, beside the forward's (kernel01_transcription.cu, whose loop
 * this one repeats on purpose, so that each file reads alone). The idea: step 04's decode loop
 * (04_online_softmax/flash.c: flash_decode_cpu with S = 1, its tile loop row_stream) moved onto the GPU line for line,
 * one thread per new query row, fp32 arithmetic whatever the storage (fp32, fp16, bf16). Here the rows are a
 * sequence's newest n positions, the keys its cache, and query head hq reads KV head hq / (Hq / Hkv); row i sits at
 * position len - n + i and sees the keys up to it.
 * Why: it is the check that the loop is right on the GPU (and the fp32 kernel that step 06's GPU generation runs: its
 * logits must match the CPU's), not a way to decode; decode kernel 2 onwards put the tensor cores and the whole GPU on
 * it.
 * What it costs: everything a row needs it reads alone. Each thread streams its sequence's whole cache, one key at a
 * time, and the threads of a warp are different rows (different heads, different sequences), so their loads do not
 * combine: the cache is read once per query row, in 4- or 2-byte pieces. With B = 1 and 32 heads the whole GPU runs
 * one warp.
 * Measured: H100, fp16, D = 128, B = 1, 32 heads, L = 1024 (16.8 MB): 15.6 ms, 1 GB/s, against kernel 3's 16.2 us;
 * the runs: RESULTS.md#decode-1.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>

#include "gpu.cuh"
#include "../kernels.h"

// --- the kernel ------------------------------------------------------------------

constexpr int DK1_BC = 16;        // keys per tile, as kernel 1 walks them
constexpr int DK1_THREADS = 128;

__device__ __forceinline__ float dk1_f(float x) { return x; }
__device__ __forceinline__ float dk1_f(__half x) { return __half2float(x); }
__device__ __forceinline__ float dk1_f(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T dk1_to(float x);
template <> __device__ __forceinline__ float dk1_to<float>(float x) { return x; }
template <> __device__ __forceinline__ __half dk1_to<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 dk1_to<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

template <int D, typename T>
__global__ void __launch_bounds__(DK1_THREADS)
decode1_transcription(const T *__restrict__ Q,   // [B, Hq, n, D]
                      const T *__restrict__ K,   // [B, Hkv, max_len, D]
                      const T *__restrict__ V,   // [B, Hkv, max_len, D]
                      T *__restrict__ O,         // [B, Hq, n, D]
                      const int *__restrict__ len, long B, long Hq, long Hkv, long n, long max_len)
{
    const long row = (long)blockIdx.x * DK1_THREADS + threadIdx.x;  // this thread's query row: (b, hq, i)
    if (row >= B * Hq * n) return;
    const long i = row % n, hq = row / n % Hq, b = row / n / Hq;
    const long hkv = hq / (Hq / Hkv);                                 // the KV head it shares
    const long last = len[b] - n + i;                                 // row i sits at position len - n + i
    const T *q = Q + row * D;
    const T *k = K + (b * Hkv + hkv) * max_len * D, *v = V + (b * Hkv + hkv) * max_len * D;
    const float scale = 1.0f / sqrtf((float)D);

    /* q and o in registers (D a compile-time constant); at D = 128 q is re-read from memory instead, as
     * kernel 1 does, so that the two do not take every register. */
    constexpr bool QREG = D <= 64;
    float qr[QREG ? D : 1], o[D];
#pragma unroll
    for (int d = 0; d < D; d++) {
        if constexpr (QREG) qr[d] = dk1_f(q[d]);
        o[d] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;                                    // the row's state before any key

    for (long j = 0; j <= last; j += DK1_BC) {                        // K/V tile j .. j+BC-1 (keys past last: masked)
        float s_tile[DK1_BC];
        float m_tile = -INFINITY, l_tile = 0.0f;
#pragma unroll
        for (int c = 0; c < DK1_BC; c++) {
            float acc = 0.0f;
            if (j + c <= last) {
                /* D = 128: q read from memory, and this loop over d left rolled: unrolled under the loop over the
                 * tile's 16 keys it is 2048 loads of q and 2048 of K in one block, which took the compiler minutes a
                 * dtype and spilled, for the same loads in the same order */
#pragma unroll(QREG ? D : 1)
                for (int d = 0; d < D; d++) acc += (QREG ? qr[d] : dk1_f(q[d])) * dk1_f(k[(j + c) * D + d]);
                s_tile[c] = acc * scale;                              // s_tile = q K_j^T / sqrt(D)
            } else {
                s_tile[c] = -INFINITY;                                // causal: key after the row's position
            }
            m_tile = fmaxf(m_tile, s_tile[c]);                        // m_tile = max(s_tile)
        }
#pragma unroll
        for (int c = 0; c < DK1_BC; c++) {
            s_tile[c] = __expf(s_tile[c] - m_tile);                   // p_tile = exp(s_tile - m_tile)
            l_tile += s_tile[c];                                      // l_tile = sum(p_tile)
        }
        const float m_new = fmaxf(m, m_tile);                         // m_new = max(m, m_tile)
        const float alpha = __expf(m - m_new);                        // alpha = e^(m - m_new); m = -inf first: 0
        const float beta = __expf(m_tile - m_new);                    // beta  = e^(m_tile - m_new)
        l = alpha * l + beta * l_tile;                                // l = alpha l + beta l_tile
#pragma unroll
        for (int d = 0; d < D; d++) o[d] *= alpha;                   // o = alpha o ...
#pragma unroll
        for (int c = 0; c < DK1_BC; c++) {                            // ... + beta p_tile V_j
            if (j + c > last) break;
            const float w = beta * s_tile[c];
#pragma unroll
            for (int d = 0; d < D; d++) o[d] += w * dk1_f(v[(j + c) * D + d]);
        }
        m = m_new;
    }
    T *out = O + row * D;
    const float inv_l = 1.0f / l;                                     // l >= 1: the row's max contributes e^0
#pragma unroll
    for (int d = 0; d < D; d++) out[d] = dk1_to<T>(o[d] * inv_l);    // O = o / l
}

// --- the launcher -------------------------------------------------------------------

template <int D, typename T>
static void dk1_launch_d(const DecodeArgs *a, cudaStream_t s)
{
    const long rows = a->B * a->Hq * a->n;
    decode1_transcription<D, T><<<(unsigned)((rows + DK1_THREADS - 1) / DK1_THREADS), DK1_THREADS, 0, s>>>(
        (const T *)a->q, (const T *)a->k, (const T *)a->v, (T *)a->o, a->len, a->B, a->Hq, a->Hkv, a->n, a->max_len);
    CUDA_CHECK_LAST();
}

template <typename T> static int dk1_launch_t(const DecodeArgs *a, cudaStream_t s)
{
    switch (a->D) { /* one instantiation per D, so that o[D] stays in registers */
    case 16: dk1_launch_d<16, T>(a, s); return 0;
    case 32: dk1_launch_d<32, T>(a, s); return 0;
    case 64: dk1_launch_d<64, T>(a, s); return 0;
    case 128: dk1_launch_d<128, T>(a, s); return 0;
    }
    return -1;
}

static int dk1_supports(long D) { return D == 16 || D == 32 || D == 64 || D == 128; }

static int dk1_launch(const DecodeArgs *a, void *ws, void *stream)
{
    (void)ws;
    cudaStream_t s = (cudaStream_t)stream;
    int rc = -1;
    if (dk1_supports(a->D)) {
        if (a->dtype == DT_FP32) rc = dk1_launch_t<float>(a, s);
        else if (a->dtype == DT_FP16) rc = dk1_launch_t<__half>(a, s);
        else if (a->dtype == DT_BF16) rc = dk1_launch_t<__nv_bfloat16>(a, s);
    }
    if (rc) fprintf(stderr, "%s: decode kernel 1 takes D = 16, 32, 64 or 128, not %s D=%ld\n", g_prog, dtype_name(a->dtype), a->D);
    return rc;
}

static void dk1_describe(const DecodeArgs *a, char *buf, size_t n)
{
    const long rows = a->B * a->Hq * a->n;
    snprintf(buf, n, "one thread per query row: %ld threads in %ld blocks, K/V walked in tiles of %d keys", rows,
             (rows + DK1_THREADS - 1) / DK1_THREADS, DK1_BC);
}

static const DecodeKernel decode1 = {
    .id = 1, .extends = 0, .name = "transcription",
    .idea = "step 04's decode loop, one thread per new query row",
    .dtypes = (1u << DT_FP32) | (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = dk1_supports,
    .launch = dk1_launch, .describe = dk1_describe,
};
DECODE_REGISTER(decode1);
