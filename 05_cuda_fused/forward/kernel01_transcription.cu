/*
 * Kernel 1: the transcription. Step 04's loop moved onto the GPU almost line for line, fp32, one thread per query
 * row.
 *
 * Extends step 04's CPU forward (04_online_softmax/flash.c); it is the first rung. The idea: the loop over row tiles
 * becomes the grid (one thread per query row i, so a row tile is a block of threads), and everything a row owns lives
 * in that thread's registers: m, l and o[D], written to O once at the end. The K/V loop and the update lines are the
 * chapter's, with the same names: s_tile, m_tile, p_tile, l_tile, m_new, alpha, beta.
 *
 * Why: the chapter's algorithm on the GPU before any change to it, so that every later kernel is this one plus one
 * idea at a time.
 *
 * What it costs: nothing is shared between threads. Every thread reads every row of K and V from memory itself (the
 * 32 threads of a warp read the same k_j at the same time, so the hardware broadcasts it from L1, which is what keeps
 * this kernel from being hopeless), and the work per thread is a serial chain of 4 N D flops. Kernel 2 loads each K/V
 * tile once per block into shared memory instead.
 *
 * Measured: H100, fp32, B = 2, H = 8, N = 4096, D = 64: 2.66 TFLOP/s, 0.12x the naive cuBLAS baseline, below the 5
 * TFLOP/s this step aimed for: the per-thread K/V reads are the cost; the run: RESULTS.md#kernel-1.
 */
#include <cmath>

#include "gpu.cuh"
#include "../kernels.h"
#include "../primitives/tile_order.cuh"

// --- the kernel ------------------------------------------------------------------

/* K/V are walked BC keys at a time, as in step 04; s_tile[BC] is in registers. */
constexpr int K1_BC = 16;
constexpr int K1_THREADS = 128;

template <int D>
__global__ void __launch_bounds__(K1_THREADS)
kernel1_transcription(const float *__restrict__ Q,  // [B, H, N, D]
                      const float *__restrict__ K,  // [B, H, N, D]
                      const float *__restrict__ V,  // [B, H, N, D]
                      float *__restrict__ O,        // [B, H, N, D]
                      long N, long row_tiles, int causal)
{
    long bh, tile;                                                // which (batch, head), which row tile
    block_tile(row_tiles, causal, &bh, &tile);                    // causal: longest first (tile_order.cuh)
    const long i = tile * K1_THREADS + threadIdx.x;               // this thread's query row
    if (i >= N) return;                                           // past the end: nothing to do
    const float *q = Q + (bh * N + i) * D;
    const float *k = K + bh * N * D, *v = V + bh * N * D;
    const float scale = 1.0f / sqrtf((float)D);

    /* o_i lives in registers (D is a compile-time constant, so o[d] never
     * goes to local memory). q_i does too up to D = 64; at D = 128, q and o
     * together would take all 255 registers and spill, so q_i is read from
     * memory (it stays in L1: 128 rows of 512 bytes per block). */
    constexpr bool QREG = D <= 64;
    float qr[QREG ? D : 1], o[D];
#pragma unroll
    for (int d = 0; d < D; d++) {
        if constexpr (QREG) qr[d] = q[d] * scale;                 // scale folded into q once
        o[d] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;                                // m starts below every score

    const long jend = causal ? i + 1 : N;                         // causal: keys j <= i only
    for (long j = 0; j < jend; j += K1_BC) {
        float s_tile[K1_BC];
        float m_tile = -INFINITY, l_tile = 0.0f;
#pragma unroll
        for (int c = 0; c < K1_BC; c++) {
            float acc = 0.0f;
            if (j + c < jend) {                                   // keys past N (or past i) do not exist
                /* k_j read 4 floats at a time (D % 8 == 0 and rows start
                 * 16-byte aligned): a quarter of the load instructions, which
                 * are what this kernel waits on. */
                const float4 *k4 = reinterpret_cast<const float4 *>(k + (j + c) * D);
#pragma unroll
                for (int d4 = 0; d4 < D / 4; d4++) {
                    const float4 kv = k4[d4];
                    if constexpr (QREG) {
                        acc += qr[4 * d4] * kv.x + qr[4 * d4 + 1] * kv.y + qr[4 * d4 + 2] * kv.z + qr[4 * d4 + 3] * kv.w;
                    } else {
                        const float4 qv = reinterpret_cast<const float4 *>(q)[d4];
                        acc += qv.x * kv.x + qv.y * kv.y + qv.z * kv.z + qv.w * kv.w;
                    }
                }
                s_tile[c] = QREG ? acc : acc * scale;             // s = q_i . k_j / sqrt(D)
            } else {
                s_tile[c] = -INFINITY;
            }
            m_tile = fmaxf(m_tile, s_tile[c]);                    // m_tile = max_c s_tile
        }
#pragma unroll
        for (int c = 0; c < K1_BC; c++) {
            s_tile[c] = __expf(s_tile[c] - m_tile);               // p_tile = e^(s_tile - m_tile)
            l_tile += s_tile[c];                                  // l_tile = sum_c p_tile
        }
        const float m_new = fmaxf(m, m_tile);                     // m_new = max(m, m_tile)
        const float alpha = __expf(m - m_new);                    // alpha = e^(m - m_new); m = -inf first: 0
        const float beta = __expf(m_tile - m_new);                // beta  = e^(m_tile - m_new)
        l = alpha * l + beta * l_tile;                            // l = alpha l + beta l_tile
#pragma unroll
        for (int d = 0; d < D; d++) o[d] *= alpha;               // o = alpha o ...
#pragma unroll
        for (int c = 0; c < K1_BC; c++) {                         // ... + beta p_tile V_j, one row of V at a time
            if (j + c >= jend) break;
            const float w = beta * s_tile[c];
            const float4 *v4 = reinterpret_cast<const float4 *>(v + (j + c) * D);
#pragma unroll
            for (int d4 = 0; d4 < D / 4; d4++) {
                const float4 vv = v4[d4];
                o[4 * d4] += w * vv.x; o[4 * d4 + 1] += w * vv.y; o[4 * d4 + 2] += w * vv.z; o[4 * d4 + 3] += w * vv.w;
            }
        }
        m = m_new;
    }
    float *out = O + (bh * N + i) * D;
    const float inv_l = 1.0f / l;                                 // l >= 1: the row's max contributes e^0
#pragma unroll
    for (int d = 0; d < D; d++) out[d] = o[d] * inv_l;            // O_i = o / l, written once
}

// --- the launcher -------------------------------------------------------------------

template <int D>
static void launch_d(const float *q, const float *k, const float *v, float *o, long B, long H, long N, int causal,
                     cudaStream_t s)
{
    const long row_tiles = (N + K1_THREADS - 1) / K1_THREADS;
    kernel1_transcription<D><<<(unsigned)(B * H * row_tiles), K1_THREADS, 0, s>>>(q, k, v, o, N, row_tiles, causal);
    CUDA_CHECK_LAST();
}

static int k1_supports(long D) { return D >= 8 && D <= 128 && D % 8 == 0; }

static int k1_launch(const void *q, const void *k, const void *v, void *o, long B, long H, long N, long D, int dtype,
                     int causal, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (dtype != DT_FP32 || !k1_supports(D)) {
        fprintf(stderr, "%s: kernel 1 takes fp32 and D in 8..128 (multiples of 8), not %s D=%ld\n", g_prog,
                dtype_name(dtype), D);
        return -1;
    }
    const float *Q = (const float *)q, *K = (const float *)k, *Vp = (const float *)v;
    float *Op = (float *)o;
    switch (D) { /* one instantiation per D, so that o[D] and q[D] stay in registers */
#define K1_CASE(d) case d: launch_d<d>(Q, K, Vp, Op, B, H, N, causal, s); break;
    K1_CASE(8) K1_CASE(16) K1_CASE(24) K1_CASE(32) K1_CASE(40) K1_CASE(48) K1_CASE(56) K1_CASE(64)
    K1_CASE(72) K1_CASE(80) K1_CASE(88) K1_CASE(96) K1_CASE(104) K1_CASE(112) K1_CASE(120) K1_CASE(128)
#undef K1_CASE
    }
    return 0;
}

static void k1_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    snprintf(buf, n, "one thread per query row, %d rows per block, K/V in tiles of BC=%d keys, o[%ld] in registers",
             K1_THREADS, K1_BC, D);
}

static const FusedKernel kernel1 = {
    .id = 1, .extends = 0, .name = "transcription",
    .idea = "step 04's loop, one thread per query row, state in registers",
    .dtypes = 1u << DT_FP32, .supports_dim = k1_supports, .launch = k1_launch, .describe = k1_describe,
};
FUSED_REGISTER(kernel1);
