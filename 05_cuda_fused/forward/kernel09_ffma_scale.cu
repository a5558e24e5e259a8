/*
 * Kernel 9: kernel 8 with the softmax scale folded into the exponent's FFMA.
 *
 * Extends kernel 8 (kernel08_wide_kv.cu). The idea: one floating-point instruction per score fewer on the way to the
 * exponential unit. Kernels 3 to 8 scale every score first, s' = s scale_log2 (one FMUL), take the max of s', then
 * form p = 2^(s' - m_new) (one FADD and one MUFU.EX2). Scaling is monotonic (scale_log2 = log2(e)/sqrt(D) > 0), so the
 * max of the raw scores, times scale_log2, is the max of the scaled ones: take the max on the raw s, scale that one
 * number per row, and form each p as 2^(fmaf(s, scale_log2, -m_new)), one FFMA and one MUFU.EX2. Per score that is
 * one FP32 instruction instead of two; FlashAttention-2 does the same (scale_softmax_log2 in its softmax). A masked
 * score is set to -inf raw, and fmaf(-inf, scale_log2, -m_new) = -inf, 2^-inf = 0, as before.
 *
 * Why: the FMUL sat between the two mma phases of every tile. Kernel 6 tried the same fold and gained nothing
 * (RESULTS.md#kernel-9): there the shared-memory reads, not the FP32 pipe, held it back; here they are halved
 * (kernel 7).
 *
 * What it costs: nothing in registers or memory. The rounding differs from kernel 8 by one step (a fused multiply-add
 * instead of a rounded product and a rounded difference), well inside the accuracy rule step05 --check applies.
 * Everything else is kernel 8's, repeated on purpose so the file reads alone.
 *
 * For the backward (bwd02_mma.cu and after) it also writes, when asked (launch_l, L != NULL), L = m + log l per row in
 * natural-log units: m is kept in log2 units here, so L = m ln 2 + log l. One store and one logf per row, after the
 * loop, behind a branch on L that is the same for the whole grid (measured: within 0.1%).
 *
 * Measured: H100, fp16, N = 4096, interleaved with kernel 8: +3% at D = 128 (326.7 TFLOP/s), nothing at D = 64
 * (289.0); the run and L's cost: RESULTS.md#kernel-9.
 */
#include <cmath>

#include "gpu.cuh"
#include "../kernels.h"
#include "launch_tc.cuh"
#include "../primitives/tc.cuh"
#include "../primitives/tile_order.cuh"

// --- the kernel ------------------------------------------------------------------

constexpr int K9_BR = 128, K9_WARPS = 4, K9_MB = 2;   // K9_MB m16 blocks of rows per warp

template <int D, int BCX = 0> struct K9Smem {   /* BCX: a narrower K/V tile (launch_tc.cuh), 0: the kernel's own */
    static constexpr int BC = BCX ? BCX : D == 64 ? 128 : 64;  /* the K/V tile: 128 keys at D = 64 (kernel 8) */
    static constexpr int LD = D + 8;  /* 16-byte pad per row: conflict-free ldmatrix */
    static constexpr size_t bytes = (size_t)(K9_BR + 4 * BC) * LD * 2; /* Q, and K, V twice */
};

template <int D, typename T, int BCK = K9Smem<D>::BC>
__global__ void __launch_bounds__(K9_WARPS * 32, 2)
kernel9_ffma_scale(const T *__restrict__ Q,  // [B, H, N, D]
                      const T *__restrict__ K,  // [B, H, N, D]
                      const T *__restrict__ V,  // [B, H, N, D]
                      T *__restrict__ O,        // [B, H, N, D]
                      float *__restrict__ L,    // aside: [B, H, N] or NULL: L = m + log l per row, for the backward
                      long N, long row_tiles, int causal, float scale_log2)
{
    constexpr int LD = K9Smem<D>::LD, K9_BC = BCK; /* the K/V tile: the kernel's own, or narrowed to fit */
    extern __shared__ __align__(16) unsigned char smem_raw[];
    T *q_s = reinterpret_cast<T *>(smem_raw);     // [BR][LD]
    T *k_buf = q_s + K9_BR * LD;                  // [2][BC][LD]: K_j in buffer j % 2
    T *v_buf = k_buf + 2 * K9_BC * LD;            // [2][BC][LD]

    long bh, tile;                                // which (batch, head), which row tile
    block_tile(row_tiles, causal, &bh, &tile);    // causal: longest first (tile_order.cuh)
    const long i0 = tile * K9_BR;
    const T *Qh = Q + bh * N * D, *Kh = K + bh * N * D, *Vh = V + bh * N * D;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const long warp_row0 = i0 + warp * 16 * K9_MB;
    /* This lane's four query rows: row_of(mb, h) = warp_row0 + 16 mb + 8 h + g. */

    const long last_row = (i0 + K9_BR < N ? i0 + K9_BR : N) - 1;
    const long jend = causal ? last_row + 1 : N;  // causal: skip K/V tiles above the diagonal
    load_tile_async<D, K9_BR, LD, K9_WARPS * 32>(q_s, Qh, i0, N);
    load_tile_async<D, K9_BC, LD, K9_WARPS * 32>(k_buf, Kh, 0, N);   // tile 0 into buffer 0
    load_tile_async<D, K9_BC, LD, K9_WARPS * 32>(v_buf, Vh, 0, N);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    /* Where this lane's ldmatrix reads Q_i's A fragments: re-read for every K/V
     * tile at both D (the registers went to the wider score tile). */
    const T *q_lane = q_s + (warp * 16 * K9_MB + (lane % 8) + 8 * ((lane / 8) % 2)) * LD + 8 * (lane / 16);

    float o[K9_MB][D / 8][4];                     // O accumulators: 32 rows x D per warp
#pragma unroll
    for (int mb = 0; mb < K9_MB; mb++)
#pragma unroll
        for (int n = 0; n < D / 8; n++) o[mb][n][0] = o[mb][n][1] = o[mb][n][2] = o[mb][n][3] = 0.0f;
    float m[K9_MB][2], l[K9_MB][2];               // running max (log2 units) and sum of rows (mb, h)
#pragma unroll
    for (int mb = 0; mb < K9_MB; mb++) m[mb][0] = m[mb][1] = -INFINITY, l[mb][0] = l[mb][1] = 0.0f;

    for (long j0 = 0, buf = 0; j0 < jend; j0 += K9_BC, buf ^= 1) {
        const T *k_s = k_buf + buf * K9_BC * LD, *v_s = v_buf + buf * K9_BC * LD;
        if (j0 + K9_BC < jend) {                  // start tile j+1 into the other buffer, do not wait
            load_tile_async<D, K9_BC, LD, K9_WARPS * 32>(k_buf + (buf ^ 1) * K9_BC * LD, Kh, j0 + K9_BC, N);
            load_tile_async<D, K9_BC, LD, K9_WARPS * 32>(v_buf + (buf ^ 1) * K9_BC * LD, Vh, j0 + K9_BC, N);
        }
        cp_async_commit();                        // (an empty group on the last tile: harmless)

        float s[K9_MB][K9_BC / 8][4];             // s_tile, 32 x BC per warp, fp32
#pragma unroll
        for (int mb = 0; mb < K9_MB; mb++)
#pragma unroll
            for (int n = 0; n < K9_BC / 8; n++) s[mb][n][0] = s[mb][n][1] = s[mb][n][2] = s[mb][n][3] = 0.0f;
#pragma unroll
        for (int ks = 0; ks < D / 16; ks++) {
            uint32_t qa[K9_MB][4];
#pragma unroll
            for (int mb = 0; mb < K9_MB; mb++) ldmatrix_x4(qa[mb], q_lane + mb * 16 * LD + ks * 16);
#pragma unroll
            for (int n2 = 0; n2 < K9_BC / 16; n2++) {         // two n-tiles of 8 keys per ldmatrix.x4
                uint32_t kf[4];
                ldmatrix_x4(kf, k_s + (n2 * 16 + (lane % 8) + 8 * (lane / 16)) * LD + ks * 16 + 8 * ((lane / 8) % 2));
#pragma unroll
                for (int mb = 0; mb < K9_MB; mb++) {          // ... and each K fragment for both m16 blocks
                    mma16816<T>(s[mb][2 * n2], qa[mb], kf);   // s_tile = Q_i K_j^T
                    mma16816<T>(s[mb][2 * n2 + 1], qa[mb], kf + 2);
                }
            }
        }

        /* Softmax on the accumulators, once per m16 block. The max is taken on
         * the raw scores and scaled once per row (scale_log2 > 0, so the max
         * commutes with it); each p is then one FFMA and one ex2 (the idea of
         * this kernel). Only a tile that holds keys past N, or (causal) keys after
         * this warp's first row, can have a masked entry (a warp-uniform branch). */
        const bool need_mask = j0 + K9_BC > N || (causal && j0 + K9_BC - 1 > warp_row0);
        const int lim = (int)(N - j0 < K9_BC ? N - j0 : K9_BC);  // keys c >= lim are past N
        uint32_t pf[K9_MB][K9_BC / 16][4];                        // p_tile as A fragments
        float alpha[K9_MB][2];
#pragma unroll
        for (int mb = 0; mb < K9_MB; mb++) {
            float mt[2] = {-INFINITY, -INFINITY};
            if (need_mask) {
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int d = (int)(warp_row0 + 16 * mb + 8 * h + g - j0); // causal: keys c > d are in the future
#pragma unroll
                    for (int n = 0; n < K9_BC / 8; n++)
#pragma unroll
                        for (int e = 0; e < 2; e++) {
                            const int c = n * 8 + 2 * t + e;
                            float &x = s[mb][n][2 * h + e];
                            if (c >= lim || (causal && c > d)) x = -INFINITY;
                            mt[h] = fmaxf(mt[h], x);
                        }
                }
            } else {
#pragma unroll
                for (int n = 0; n < K9_BC / 8; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) mt[e / 2] = fmaxf(mt[e / 2], s[mb][n][e]);
            }
            float bse[2];
#pragma unroll
            for (int h = 0; h < 2; h++) {
#pragma unroll
                for (int off = 1; off <= 2; off *= 2)                 // the row's max across its quad
                    mt[h] = fmaxf(mt[h], __shfl_xor_sync(0xffffffffu, mt[h], off));
                const float mn = fmaxf(m[mb][h], mt[h] * scale_log2); // m_new = max(m, m_tile), log2 units
                /* A row with nothing visible yet keeps m = -inf: use 0 as its base so
                 * that 2^(-inf - 0) = 0 instead of 2^(-inf + inf) = NaN. */
                bse[h] = mn == -INFINITY ? 0.0f : mn;
                alpha[mb][h] = ex2(m[mb][h] - bse[h]);                // alpha = e^(m - m_new)
                m[mb][h] = mn;
            }
            float ls[2] = {0.0f, 0.0f};
#pragma unroll
            for (int n = 0; n < K9_BC / 8; n++) {
                /* p = e^(s/sqrt(D) - m_new) = 2^(s scale_log2 - m_new): one FFMA, one ex2 */
                const float p0 = ex2(fmaf(s[mb][n][0], scale_log2, -bse[0])), p1 = ex2(fmaf(s[mb][n][1], scale_log2, -bse[0]));
                const float p2 = ex2(fmaf(s[mb][n][2], scale_log2, -bse[1])), p3 = ex2(fmaf(s[mb][n][3], scale_log2, -bse[1]));
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
        for (int ks = 0; ks < K9_BC / 16; ks++)                                      // ... + p_tile V_j
#pragma unroll
            for (int n2 = 0; n2 < D / 16; n2++) {
                uint32_t vf[4];
                ldmatrix_x4_trans(vf, v_s + (ks * 16 + (lane % 8) + 8 * ((lane / 8) % 2)) * LD + n2 * 16 + 8 * (lane / 16));
#pragma unroll
                for (int mb = 0; mb < K9_MB; mb++) {                                 // each V fragment, both m16 blocks
                    mma16816<T>(o[mb][2 * n2], pf[mb][ks], vf);
                    mma16816<T>(o[mb][2 * n2 + 1], pf[mb][ks], vf + 2);
                }
            }
        cp_async_wait<0>();                       // tile j+1 has landed ...
        __syncthreads();                          // ... for every thread, and nobody reads buffer j any more
    }

    T *Oh = O + bh * N * D;
#pragma unroll
    for (int mb = 0; mb < K9_MB; mb++)
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
                if (L != nullptr && t == 0)   // aside: the backward's L; the quad's four lanes hold the same m and l
                    L[bh * N + row] = lr > 0.0f ? m[mb][h] * 0.69314718055994531f + logf(lr) : -INFINITY; // aside: L = m + log l
            }
        }
}

// --- the launcher -------------------------------------------------------------------

template <int D, typename T, int BC = 0> struct K9Launch {
    static constexpr size_t bytes = K9Smem<D, BC>::bytes;
    static constexpr int br = K9_BR, threads = K9_WARPS * 32, bc = K9Smem<D, BC>::BC;
    static constexpr TcKernelL<T> fn = kernel9_ffma_scale<D, T, bc>;
};

static int k9_launch(const void *q, const void *k, const void *v, void *o, long B, long H, long N, long D, int dtype,
                     int causal, void *stream)
{
    return tc_launch<K9Launch>(9, q, k, v, o, B, H, N, D, dtype, causal, stream);
}

static int k9_launch_l(const void *q, const void *k, const void *v, void *o, float *L, long B, long H, long N, long D,
                       int dtype, int causal, void *stream)
{
    return tc_launch<K9Launch>(9, q, k, v, o, B, H, N, D, dtype, causal, stream, L);
}

static void k9_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    int bc;
    size_t bytes;
    const char *fit = tc_fit_desc<K9Launch>(D, &bc, &bytes);
    snprintf(buf, n, "kernel 8 with p = ex2(fmaf(s, scale_log2, -m)), BR=%d BC=%d, %zu bytes of shared memory%s", K9_BR,
             bc, bytes, fit);
}

static const FusedKernel kernel9 = {
    .id = 9, .extends = 8, .name = "FFMA scale",
    .idea = "kernel 8 with the softmax scale folded into the exponent: one FFMA per score, not FMUL + FADD",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = tc_supports, .launch = k9_launch,
    .describe = k9_describe, .launch_l = k9_launch_l,
};
FUSED_REGISTER(kernel9);
