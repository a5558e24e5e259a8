/*
 * Kernel 4: kernel 3 with the K/V tiles loaded by cp.async, double-buffered: tile j+1 travels from global memory to
 * shared memory while the tensor cores work on tile j.
 *
 * Extends kernel 3 (kernel03_mma.cu). The idea: overlap the loads with the math. In kernel 3 each iteration is load
 * K_j, V_j (every warp waits on memory), __syncthreads, compute. Here shared memory holds two K/V buffers; before
 * computing on buffer j % 2 the block issues cp.async for tile j+1 into the other one (16-byte copies that skip the
 * registers; rows past N are zero-filled by the copy itself), and only waits for them after its math. Everything else
 * (mma.sync, ldmatrix, P in registers, exp2) is kernel 3's, repeated here on purpose so the file reads alone: diff it
 * against kernel03_mma.cu to see exactly the idea.
 *
 * Why: in kernel 3 the tensor cores idle while every warp waits for its tile to arrive.
 *
 * What it costs: 2x the K/V shared memory (87 KB at D = 128), so fewer blocks per SM.
 *
 * Measured: H100, fp16, N = 4096, FlashAttention's shapes: 189.8 TFLOP/s at D = 64 (63% of FlashAttention-2's 302),
 * 202.9 at D = 128 (61% of its 335); the run: RESULTS.md#kernel-4.
 */
#include <cmath>

#include "gpu.cuh"
#include "../kernels.h"
#include "launch_tc.cuh"
#include "../primitives/tile_order.cuh"
#include "../primitives/tc.cuh"

// --- the kernel ------------------------------------------------------------------

constexpr int K4_BR = 64, K4_BC = 64, K4_WARPS = 4;

template <int D, int BCX = 0> struct K4Smem {   /* BCX: a narrower K/V tile (launch_tc.cuh), 0: K4_BC */
    static constexpr int BC = BCX ? BCX : K4_BC;
    static constexpr int LD = D + 8;  /* 16-byte pad per row: conflict-free ldmatrix */
    static constexpr size_t bytes = (size_t)(K4_BR + 4 * BC) * LD * 2; /* Q, and K, V twice */
};

template <int D, typename T, int BCK = K4_BC>
__global__ void __launch_bounds__(K4_WARPS * 32)
kernel4_async(const T *__restrict__ Q,  // [B, H, N, D]
            const T *__restrict__ K,  // [B, H, N, D]
            const T *__restrict__ V,  // [B, H, N, D]
            T *__restrict__ O,        // [B, H, N, D]
            long N, long row_tiles, int causal, float scale_log2)
{
    constexpr int LD = K4Smem<D>::LD, K4_BC = BCK; /* the K/V tile: the kernel's own, or narrowed to fit */
    extern __shared__ __align__(16) unsigned char smem_raw[];
    T *q_s = reinterpret_cast<T *>(smem_raw);     // [BR][LD]
    T *k_buf = q_s + K4_BR * LD;                  // [2][BC][LD]: K_j in buffer j % 2
    T *v_buf = k_buf + 2 * K4_BC * LD;            // [2][BC][LD]

    long bh, tile;                                // which (batch, head), which row tile
    block_tile(row_tiles, causal, &bh, &tile);    // causal: longest first (tile_order.cuh)
    const long i0 = tile * K4_BR;
    const T *Qh = Q + bh * N * D, *Kh = K + bh * N * D, *Vh = V + bh * N * D;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const long row_g = i0 + warp * 16 + g, row_g8 = row_g + 8;   // this lane's two query rows

    const long last_row = (i0 + K4_BR < N ? i0 + K4_BR : N) - 1;
    const long jend = causal ? last_row + 1 : N;  // causal: skip K/V tiles above the diagonal
    load_tile_async<D, K4_BR, LD, K4_WARPS * 32>(q_s, Qh, i0, N);
    load_tile_async<D, K4_BC, LD, K4_WARPS * 32>(k_buf, Kh, 0, N);   // tile 0 into buffer 0
    load_tile_async<D, K4_BC, LD, K4_WARPS * 32>(v_buf, Vh, 0, N);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    uint32_t qf[D / 16][4];                       // Q_i fragments, this warp's 16 rows, in registers
#pragma unroll
    for (int ks = 0; ks < D / 16; ks++)
        ldmatrix_x4(qf[ks], q_s + (warp * 16 + (lane % 8) + 8 * ((lane / 8) % 2)) * LD + ks * 16 + 8 * (lane / 16));

    float o[D / 8][4];                            // O accumulators: 16 rows x D per warp
#pragma unroll
    for (int n = 0; n < D / 8; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    float m0 = -INFINITY, m1 = -INFINITY;         // running max (in log2 units) of rows g, g+8
    float l0 = 0.0f, l1 = 0.0f;                   // running sums, this lane's columns only

    for (long j0 = 0, buf = 0; j0 < jend; j0 += K4_BC, buf ^= 1) {
        const T *k_s = k_buf + buf * K4_BC * LD, *v_s = v_buf + buf * K4_BC * LD;
        if (j0 + K4_BC < jend) {                  // start tile j+1 into the other buffer, do not wait
            load_tile_async<D, K4_BC, LD, K4_WARPS * 32>(k_buf + (buf ^ 1) * K4_BC * LD, Kh, j0 + K4_BC, N);
            load_tile_async<D, K4_BC, LD, K4_WARPS * 32>(v_buf + (buf ^ 1) * K4_BC * LD, Vh, j0 + K4_BC, N);
        }
        cp_async_commit();                        // (an empty group on the last tile: harmless)

        float s[K4_BC / 8][4];                    // s_tile, 16 x 64 per warp, fp32
#pragma unroll
        for (int n = 0; n < K4_BC / 8; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
        for (int ks = 0; ks < D / 16; ks++)
#pragma unroll
            for (int n2 = 0; n2 < K4_BC / 16; n2++) {         // two n-tiles of 8 keys per ldmatrix.x4
                uint32_t kf[4];
                ldmatrix_x4(kf, k_s + (n2 * 16 + (lane % 8) + 8 * (lane / 16)) * LD + ks * 16 + 8 * ((lane / 8) % 2));
                mma16816<T>(s[2 * n2], qf[ks], kf);           // s_tile = Q_i K_j^T
                mma16816<T>(s[2 * n2 + 1], qf[ks], kf + 2);
            }

        /* Softmax on the accumulators. Masked entries (past N, or causal
         * j > i by absolute index) become -inf before the row max. */
        float mt0 = -INFINITY, mt1 = -INFINITY;
#pragma unroll
        for (int n = 0; n < K4_BC / 8; n++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const long col = j0 + n * 8 + 2 * t + e;
                s[n][e] = (col >= N || (causal && col > row_g)) ? -INFINITY : s[n][e] * scale_log2;
                s[n][2 + e] = (col >= N || (causal && col > row_g8)) ? -INFINITY : s[n][2 + e] * scale_log2;
                mt0 = fmaxf(mt0, s[n][e]);
                mt1 = fmaxf(mt1, s[n][2 + e]);
            }
#pragma unroll
        for (int off = 1; off <= 2; off *= 2) {               // the row's max across its quad
            mt0 = fmaxf(mt0, __shfl_xor_sync(0xffffffffu, mt0, off));
            mt1 = fmaxf(mt1, __shfl_xor_sync(0xffffffffu, mt1, off));
        }
        const float mn0 = fmaxf(m0, mt0), mn1 = fmaxf(m1, mt1);               // m_new = max(m, m_tile)
        /* A row with nothing visible yet keeps m = -inf: use 0 as its base so
         * that 2^(-inf - 0) = 0 instead of 2^(-inf + inf) = NaN. */
        const float b0 = mn0 == -INFINITY ? 0.0f : mn0, b1 = mn1 == -INFINITY ? 0.0f : mn1;
        const float alpha0 = ex2(m0 - b0), alpha1 = ex2(m1 - b1);            // alpha = e^(m - m_new)
        m0 = mn0;
        m1 = mn1;
        float ls0 = 0.0f, ls1 = 0.0f;
        uint32_t pf[K4_BC / 16][4];                                           // p_tile as A fragments
#pragma unroll
        for (int n = 0; n < K4_BC / 8; n++) {
            const float p0 = ex2(s[n][0] - b0), p1 = ex2(s[n][1] - b0);      // p = e^(s - m_new) = beta e^(s - m_tile)
            const float p2 = ex2(s[n][2] - b1), p3 = ex2(s[n][3] - b1);
            ls0 += p0 + p1;
            ls1 += p2 + p3;
            pf[n / 2][(n % 2) * 2 + 0] = pack2<T>(p0, p1);                   // row g:   a0 (n even) / a2 (n odd)
            pf[n / 2][(n % 2) * 2 + 1] = pack2<T>(p2, p3);                   // row g+8: a1 / a3
        }
        l0 = alpha0 * l0 + ls0;                                              // l = alpha l + rowsum(p)
        l1 = alpha1 * l1 + ls1;
#pragma unroll
        for (int n = 0; n < D / 8; n++) {                                    // o = alpha o ...
            o[n][0] *= alpha0; o[n][1] *= alpha0;
            o[n][2] *= alpha1; o[n][3] *= alpha1;
        }
#pragma unroll
        for (int ks = 0; ks < K4_BC / 16; ks++)                              // ... + p_tile V_j
#pragma unroll
            for (int n2 = 0; n2 < D / 16; n2++) {
                uint32_t vf[4];
                ldmatrix_x4_trans(vf, v_s + (ks * 16 + (lane % 8) + 8 * ((lane / 8) % 2)) * LD + n2 * 16 + 8 * (lane / 16));
                mma16816<T>(o[2 * n2], pf[ks], vf);
                mma16816<T>(o[2 * n2 + 1], pf[ks], vf + 2);
            }
        cp_async_wait<0>();                       // tile j+1 has landed ...
        __syncthreads();                          // ... for every thread, and nobody reads buffer j any more
    }

#pragma unroll
    for (int off = 1; off <= 2; off *= 2) {                                  // the rows' l across the quad
        l0 += __shfl_xor_sync(0xffffffffu, l0, off);
        l1 += __shfl_xor_sync(0xffffffffu, l1, off);
    }
    const float inv0 = l0 > 0.0f ? 1.0f / l0 : 0.0f, inv1 = l1 > 0.0f ? 1.0f / l1 : 0.0f;
    T *Oh = O + bh * N * D;
#pragma unroll
    for (int n = 0; n < D / 8; n++) {                                        // O_i = o / l
        const int col = n * 8 + 2 * t;
        if (row_g < N) *reinterpret_cast<uint32_t *>(Oh + row_g * D + col) = pack2<T>(o[n][0] * inv0, o[n][1] * inv0);
        if (row_g8 < N) *reinterpret_cast<uint32_t *>(Oh + row_g8 * D + col) = pack2<T>(o[n][2] * inv1, o[n][3] * inv1);
    }
}

// --- the launcher -------------------------------------------------------------------

template <int D, typename T, int BC = 0> struct K4Launch {
    static constexpr size_t bytes = K4Smem<D, BC>::bytes;
    static constexpr int br = K4_BR, threads = K4_WARPS * 32, bc = K4Smem<D, BC>::BC;
    static constexpr TcKernel<T> fn = kernel4_async<D, T, bc>;
};

static int k4_launch(const void *q, const void *k, const void *v, void *o, long B, long H, long N, long D, int dtype,
                     int causal, void *stream)
{
    return tc_launch<K4Launch>(4, q, k, v, o, B, H, N, D, dtype, causal, stream);
}

static void k4_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    int bc;
    size_t bytes;
    const char *fit = tc_fit_desc<K4Launch>(D, &bc, &bytes);
    snprintf(buf, n, "kernel 3 + cp.async double-buffered K/V, BR=%d BC=%d, %zu bytes of shared memory%s", K4_BR, bc,
             bytes, fit);
}

static const FusedKernel kernel4 = {
    .id = 4, .extends = 3, .name = "cp.async x2",
    .idea = "K/V tiles by cp.async, double-buffered: the next load overlaps this tile's math",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = tc_supports, .launch = k4_launch,
    .describe = k4_describe,
};
FUSED_REGISTER(kernel4);
