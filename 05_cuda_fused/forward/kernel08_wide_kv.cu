/*
 * Kernel 8: kernel 7 with a K/V tile of 128 keys instead of 64 at D = 64.
 *
 * Extends kernel 7 (kernel07_two_rowblocks.cu). The idea: spread each K/V tile's fixed costs over more keys. Every
 * K/V tile costs the same whatever its width: one __syncthreads and one cp.async wait, the max across the quad (two
 * shuffles per row), alpha = 2^(m - m_new) per row, and the rescale o = alpha o of the warp's whole O accumulator
 * (32 rows x D). With BC = 128 the same multiplications, the same barrier and the same shuffles serve 128
 * exponentials and twice the mma. FlashAttention-2 picks the same tile at this D (kBlockN = 128 for head dim 64).
 *
 * Why: at D = 64 the rescale is 64 multiplications per thread against 64 exponentials when BC = 64, one for one.
 *
 * What it costs: registers again. The score tile s doubles to 2 x 16 x 4 = 128 fp32 per thread, so Q's 32 registers
 * of fragments no longer fit beside it: Q_i is re-read from shared memory for every K/V tile, as kernel 7 already did
 * at D = 128 (one ldmatrix per m16 block and 16 dims: at D = 64 with BC = 128 an eighth more shared memory reads than
 * K and V alone). Shared memory: (128 + 4 x 128) x 72 x 2 = 92,160 bytes, two blocks per SM still fit in the H100's
 * 228 KB. At D = 128 the O accumulators (128 registers) leave no room for a wider tile: there kernel 8 is kernel 7.
 * Everything else is kernel 7's, repeated on purpose so the file reads alone.
 *
 * Measured: H100, fp16, N = 4096, interleaved with kernel 7: +9% at D = 64 (287.8 TFLOP/s); at D = 128 the same
 * program timed twice (315.8 against 317.0); the run: RESULTS.md#kernel-8.
 */
#include <cmath>

#include "gpu.cuh"
#include "../kernels.h"
#include "launch_tc.cuh"
#include "../primitives/tc.cuh"
#include "../primitives/tile_order.cuh"

// --- the kernel ------------------------------------------------------------------

constexpr int K8_BR = 128, K8_WARPS = 4, K8_MB = 2;   // K8_MB m16 blocks of rows per warp

template <int D, int BCX = 0> struct K8Smem {   /* BCX: a narrower K/V tile (launch_tc.cuh), 0: the kernel's own */
    static constexpr int BC = BCX ? BCX : D == 64 ? 128 : 64;  /* the K/V tile: 128 keys at D = 64 (the idea of this kernel) */
    static constexpr int LD = D + 8;  /* 16-byte pad per row: conflict-free ldmatrix */
    static constexpr size_t bytes = (size_t)(K8_BR + 4 * BC) * LD * 2; /* Q, and K, V twice */
};

template <int D, typename T, int BCK = K8Smem<D>::BC>
__global__ void __launch_bounds__(K8_WARPS * 32, 2)
kernel8_wide_kv(const T *__restrict__ Q,  // [B, H, N, D]
                      const T *__restrict__ K,  // [B, H, N, D]
                      const T *__restrict__ V,  // [B, H, N, D]
                      T *__restrict__ O,        // [B, H, N, D]
                      long N, long row_tiles, int causal, float scale_log2)
{
    constexpr int LD = K8Smem<D>::LD, K8_BC = BCK; /* the K/V tile: the kernel's own, or narrowed to fit */
    extern __shared__ __align__(16) unsigned char smem_raw[];
    T *q_s = reinterpret_cast<T *>(smem_raw);     // [BR][LD]
    T *k_buf = q_s + K8_BR * LD;                  // [2][BC][LD]: K_j in buffer j % 2
    T *v_buf = k_buf + 2 * K8_BC * LD;            // [2][BC][LD]

    long bh, tile;                                // which (batch, head), which row tile
    block_tile(row_tiles, causal, &bh, &tile);    // causal: longest first (tile_order.cuh)
    const long i0 = tile * K8_BR;
    const T *Qh = Q + bh * N * D, *Kh = K + bh * N * D, *Vh = V + bh * N * D;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const long warp_row0 = i0 + warp * 16 * K8_MB;
    /* This lane's four query rows: row_of(mb, h) = warp_row0 + 16 mb + 8 h + g. */

    const long last_row = (i0 + K8_BR < N ? i0 + K8_BR : N) - 1;
    const long jend = causal ? last_row + 1 : N;  // causal: skip K/V tiles above the diagonal
    load_tile_async<D, K8_BR, LD, K8_WARPS * 32>(q_s, Qh, i0, N);
    load_tile_async<D, K8_BC, LD, K8_WARPS * 32>(k_buf, Kh, 0, N);   // tile 0 into buffer 0
    load_tile_async<D, K8_BC, LD, K8_WARPS * 32>(v_buf, Vh, 0, N);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    /* Where this lane's ldmatrix reads Q_i's A fragments: re-read for every K/V
     * tile at both D (the registers went to the wider score tile). */
    const T *q_lane = q_s + (warp * 16 * K8_MB + (lane % 8) + 8 * ((lane / 8) % 2)) * LD + 8 * (lane / 16);

    float o[K8_MB][D / 8][4];                     // O accumulators: 32 rows x D per warp
#pragma unroll
    for (int mb = 0; mb < K8_MB; mb++)
#pragma unroll
        for (int n = 0; n < D / 8; n++) o[mb][n][0] = o[mb][n][1] = o[mb][n][2] = o[mb][n][3] = 0.0f;
    float m[K8_MB][2], l[K8_MB][2];               // running max (log2 units) and sum of rows (mb, h)
#pragma unroll
    for (int mb = 0; mb < K8_MB; mb++) m[mb][0] = m[mb][1] = -INFINITY, l[mb][0] = l[mb][1] = 0.0f;

    for (long j0 = 0, buf = 0; j0 < jend; j0 += K8_BC, buf ^= 1) {
        const T *k_s = k_buf + buf * K8_BC * LD, *v_s = v_buf + buf * K8_BC * LD;
        if (j0 + K8_BC < jend) {                  // start tile j+1 into the other buffer, do not wait
            load_tile_async<D, K8_BC, LD, K8_WARPS * 32>(k_buf + (buf ^ 1) * K8_BC * LD, Kh, j0 + K8_BC, N);
            load_tile_async<D, K8_BC, LD, K8_WARPS * 32>(v_buf + (buf ^ 1) * K8_BC * LD, Vh, j0 + K8_BC, N);
        }
        cp_async_commit();                        // (an empty group on the last tile: harmless)

        float s[K8_MB][K8_BC / 8][4];             // s_tile, 32 x BC per warp, fp32
#pragma unroll
        for (int mb = 0; mb < K8_MB; mb++)
#pragma unroll
            for (int n = 0; n < K8_BC / 8; n++) s[mb][n][0] = s[mb][n][1] = s[mb][n][2] = s[mb][n][3] = 0.0f;
#pragma unroll
        for (int ks = 0; ks < D / 16; ks++) {
            uint32_t qa[K8_MB][4];
#pragma unroll
            for (int mb = 0; mb < K8_MB; mb++) ldmatrix_x4(qa[mb], q_lane + mb * 16 * LD + ks * 16);
#pragma unroll
            for (int n2 = 0; n2 < K8_BC / 16; n2++) {         // two n-tiles of 8 keys per ldmatrix.x4
                uint32_t kf[4];
                ldmatrix_x4(kf, k_s + (n2 * 16 + (lane % 8) + 8 * (lane / 16)) * LD + ks * 16 + 8 * ((lane / 8) % 2));
#pragma unroll
                for (int mb = 0; mb < K8_MB; mb++) {          // ... and each K fragment for both m16 blocks
                    mma16816<T>(s[mb][2 * n2], qa[mb], kf);   // s_tile = Q_i K_j^T
                    mma16816<T>(s[mb][2 * n2 + 1], qa[mb], kf + 2);
                }
            }
        }

        /* Softmax on the accumulators, in log2 units, as in kernel 6, once per
         * m16 block. Only a tile that holds keys past N, or (causal) keys after
         * this warp's first row, can have a masked entry (a warp-uniform branch). */
        const bool need_mask = j0 + K8_BC > N || (causal && j0 + K8_BC - 1 > warp_row0);
        const int lim = (int)(N - j0 < K8_BC ? N - j0 : K8_BC);  // keys c >= lim are past N
        uint32_t pf[K8_MB][K8_BC / 16][4];                        // p_tile as A fragments
        float alpha[K8_MB][2];
#pragma unroll
        for (int mb = 0; mb < K8_MB; mb++) {
            float mt[2] = {-INFINITY, -INFINITY};
            if (need_mask) {
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int d = (int)(warp_row0 + 16 * mb + 8 * h + g - j0); // causal: keys c > d are in the future
#pragma unroll
                    for (int n = 0; n < K8_BC / 8; n++)
#pragma unroll
                        for (int e = 0; e < 2; e++) {
                            const int c = n * 8 + 2 * t + e;
                            float &x = s[mb][n][2 * h + e];
                            x = (c >= lim || (causal && c > d)) ? -INFINITY : x * scale_log2;
                            mt[h] = fmaxf(mt[h], x);
                        }
                }
            } else {
#pragma unroll
                for (int n = 0; n < K8_BC / 8; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        s[mb][n][e] *= scale_log2;
                        mt[e / 2] = fmaxf(mt[e / 2], s[mb][n][e]);
                    }
            }
            float bse[2];
#pragma unroll
            for (int h = 0; h < 2; h++) {
#pragma unroll
                for (int off = 1; off <= 2; off *= 2)                 // the row's max across its quad
                    mt[h] = fmaxf(mt[h], __shfl_xor_sync(0xffffffffu, mt[h], off));
                const float mn = fmaxf(m[mb][h], mt[h]);              // m_new = max(m, m_tile)
                /* A row with nothing visible yet keeps m = -inf: use 0 as its base so
                 * that 2^(-inf - 0) = 0 instead of 2^(-inf + inf) = NaN. */
                bse[h] = mn == -INFINITY ? 0.0f : mn;
                alpha[mb][h] = ex2(m[mb][h] - bse[h]);                // alpha = e^(m - m_new)
                m[mb][h] = mn;
            }
            float ls[2] = {0.0f, 0.0f};
#pragma unroll
            for (int n = 0; n < K8_BC / 8; n++) {
                const float p0 = ex2(s[mb][n][0] - bse[0]), p1 = ex2(s[mb][n][1] - bse[0]); // p = e^(s - m_new)
                const float p2 = ex2(s[mb][n][2] - bse[1]), p3 = ex2(s[mb][n][3] - bse[1]);
                ls[0] += p0 + p1;
                ls[1] += p2 + p3;
                pf[mb][n / 2][(n % 2) * 2 + 0] = pack2<T>(p0, p1);   // row g:   a0 (n even) / a2 (n odd)
                pf[mb][n / 2][(n % 2) * 2 + 1] = pack2<T>(p2, p3);   // row g+8: a1 / a3
            }
#pragma unroll
            for (int h = 0; h < 2; h++) l[mb][h] = alpha[mb][h] * l[mb][h] + ls[h]; // l = alpha l + rowsum(p)
#pragma unroll
            for (int n = 0; n < D / 8; n++) {                                        // o = alpha o ...
                o[mb][n][0] *= alpha[mb][0]; o[mb][n][1] *= alpha[mb][0];
                o[mb][n][2] *= alpha[mb][1]; o[mb][n][3] *= alpha[mb][1];
            }
        }
#pragma unroll
        for (int ks = 0; ks < K8_BC / 16; ks++)                                      // ... + p_tile V_j
#pragma unroll
            for (int n2 = 0; n2 < D / 16; n2++) {
                uint32_t vf[4];
                ldmatrix_x4_trans(vf, v_s + (ks * 16 + (lane % 8) + 8 * ((lane / 8) % 2)) * LD + n2 * 16 + 8 * (lane / 16));
#pragma unroll
                for (int mb = 0; mb < K8_MB; mb++) {                                 // each V fragment, both m16 blocks
                    mma16816<T>(o[mb][2 * n2], pf[mb][ks], vf);
                    mma16816<T>(o[mb][2 * n2 + 1], pf[mb][ks], vf + 2);
                }
            }
        cp_async_wait<0>();                       // tile j+1 has landed ...
        __syncthreads();                          // ... for every thread, and nobody reads buffer j any more
    }

    T *Oh = O + bh * N * D;
#pragma unroll
    for (int mb = 0; mb < K8_MB; mb++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            float lr = l[mb][h];
#pragma unroll
            for (int off = 1; off <= 2; off *= 2) lr += __shfl_xor_sync(0xffffffffu, lr, off); // l across the quad
            const float inv = lr > 0.0f ? 1.0f / lr : 0.0f;
            const long row = warp_row0 + 16 * mb + 8 * h + g;
            if (row < N) {
#pragma unroll
                for (int n = 0; n < D / 8; n++)                                      // O_i = o / l
                    *reinterpret_cast<uint32_t *>(Oh + row * D + n * 8 + 2 * t) =
                        pack2<T>(o[mb][n][2 * h] * inv, o[mb][n][2 * h + 1] * inv);
            }
        }
}

// --- the launcher -------------------------------------------------------------------

template <int D, typename T, int BC = 0> struct K8Launch {
    static constexpr size_t bytes = K8Smem<D, BC>::bytes;
    static constexpr int br = K8_BR, threads = K8_WARPS * 32, bc = K8Smem<D, BC>::BC;
    static constexpr TcKernel<T> fn = kernel8_wide_kv<D, T, bc>;
};

static int k8_launch(const void *q, const void *k, const void *v, void *o, long B, long H, long N, long D, int dtype,
                     int causal, void *stream)
{
    return tc_launch<K8Launch>(8, q, k, v, o, B, H, N, D, dtype, causal, stream);
}

static void k8_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    int bc;
    size_t bytes;
    const char *fit = tc_fit_desc<K8Launch>(D, &bc, &bytes);
    snprintf(buf, n, "4 warps x 32 rows, BR=%d BC=%d, Q re-read from shared memory, %zu bytes of shared memory%s", K8_BR,
             bc, bytes, fit);
}

static const FusedKernel kernel8 = {
    .id = 8, .extends = 7, .name = "wide K/V tile",
    .idea = "kernel 7 with K/V tiles of 128 keys at D=64: per-tile costs over twice the keys",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = tc_supports, .launch = k8_launch,
    .describe = k8_describe,
};
FUSED_REGISTER(kernel8);
