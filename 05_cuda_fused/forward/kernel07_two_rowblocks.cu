/*
 * Kernel 7: kernel 6 with 32 query rows per warp instead of 16.
 *
 * Extends kernel 6 (kernel06_occupancy.cu). The idea: reuse each fragment read from shared memory for two mma instead
 * of one. In kernel 6 a warp owns one m16 block of query rows, so every K fragment (ldmatrix of 16 keys x 16 dims) and
 * every V fragment it reads from shared memory feeds exactly two mma.m16n8k16: a warp reads the whole K_j and V_j
 * tile, 2 * BC * D * 2 bytes, for 2 * 2 * 16 * BC * D FLOPs, 1 byte per 16 FLOPs. Here each warp owns two m16 blocks
 * (rows warp*32 .. warp*32+31), and each K or V fragment is used by both: 1 byte per 32 FLOPs, the same shape as
 * FlashAttention-2's warps (kBlockM = 128 with 4 warps).
 *
 * Why: the SM's shared memory delivers 128 bytes per clock, so 1 byte per 16 FLOPs alone caps the SM at 128 * 16 =
 * 2048 FLOPs per clock: 535 TFLOP/s on 132 SMs at the 1980 MHz nvidia-smi showed during the bench (arithmetic, not a
 * measurement), before the exponentials, the max and the waits.
 *
 * What it costs: registers. A warp's O accumulators and score tile double (at D = 64: 64 + 64 fp32 per thread, plus 32
 * for Q's fragments), so the block is 4 warps (BR = 128 as before) and an SM holds fewer warps than kernel 6's 16. At
 * D = 128 the O accumulators alone are 128 registers: there Q is not kept in registers but re-read from shared memory
 * for each K/V tile (one ldmatrix per m16 block and 16 dims; it adds a quarter to the K/V reads, still 1 byte per 26
 * FLOPs). Everything else (cp.async double buffering, mask only where needed, exp2, P in registers) is kernel 6's,
 * repeated on purpose so the file reads alone.
 *
 * Measured: H100, fp16, N = 4096, interleaved with kernel 6: +4% at D = 64 (263.7 TFLOP/s), +25% at D = 128 (317.0);
 * the run: RESULTS.md#kernel-7.
 */
#include <cmath>

#include "gpu.cuh"
#include "../kernels.h"
#include "launch_tc.cuh"
#include "../primitives/tc.cuh"
#include "../primitives/tile_order.cuh"

// --- the kernel ------------------------------------------------------------------

constexpr int K7_BR = 128, K7_BC = 64, K7_WARPS = 4, K7_MB = 2;   // K7_MB m16 blocks of rows per warp

template <int D, int BCX = 0> struct K7Smem {   /* BCX: a narrower K/V tile (launch_tc.cuh), 0: K7_BC */
    static constexpr int BC = BCX ? BCX : K7_BC;
    static constexpr int LD = D + 8;  /* 16-byte pad per row: conflict-free ldmatrix */
    static constexpr size_t bytes = (size_t)(K7_BR + 4 * BC) * LD * 2; /* Q, and K, V twice */
};

template <int D, typename T, int BCK = K7_BC>
__global__ void __launch_bounds__(K7_WARPS * 32, 2)
kernel7_two_rowblocks(const T *__restrict__ Q,  // [B, H, N, D]
                      const T *__restrict__ K,  // [B, H, N, D]
                      const T *__restrict__ V,  // [B, H, N, D]
                      T *__restrict__ O,        // [B, H, N, D]
                      long N, long row_tiles, int causal, float scale_log2)
{
    constexpr int LD = K7Smem<D>::LD, K7_BC = BCK; /* the K/V tile: the kernel's own, or narrowed to fit */
    constexpr bool Q_IN_REGS = D == 64;           // D = 128: re-read Q's fragments from shared memory
    extern __shared__ __align__(16) unsigned char smem_raw[];
    T *q_s = reinterpret_cast<T *>(smem_raw);     // [BR][LD]
    T *k_buf = q_s + K7_BR * LD;                  // [2][BC][LD]: K_j in buffer j % 2
    T *v_buf = k_buf + 2 * K7_BC * LD;            // [2][BC][LD]

    long bh, tile;                                // which (batch, head), which row tile
    block_tile(row_tiles, causal, &bh, &tile);    // causal: longest first (tile_order.cuh)
    const long i0 = tile * K7_BR;
    const T *Qh = Q + bh * N * D, *Kh = K + bh * N * D, *Vh = V + bh * N * D;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const long warp_row0 = i0 + warp * 16 * K7_MB;
    /* This lane's four query rows: row_of(mb, h) = warp_row0 + 16 mb + 8 h + g. */

    const long last_row = (i0 + K7_BR < N ? i0 + K7_BR : N) - 1;
    const long jend = causal ? last_row + 1 : N;  // causal: skip K/V tiles above the diagonal
    load_tile_async<D, K7_BR, LD, K7_WARPS * 32>(q_s, Qh, i0, N);
    load_tile_async<D, K7_BC, LD, K7_WARPS * 32>(k_buf, Kh, 0, N);   // tile 0 into buffer 0
    load_tile_async<D, K7_BC, LD, K7_WARPS * 32>(v_buf, Vh, 0, N);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    /* Q_i's A fragments of this warp's two m16 blocks (D = 64 only). */
    const T *q_lane = q_s + (warp * 16 * K7_MB + (lane % 8) + 8 * ((lane / 8) % 2)) * LD + 8 * (lane / 16);
    uint32_t qf[K7_MB][Q_IN_REGS ? D / 16 : 1][4];
    if constexpr (Q_IN_REGS) {
#pragma unroll
        for (int mb = 0; mb < K7_MB; mb++)
#pragma unroll
            for (int ks = 0; ks < D / 16; ks++) ldmatrix_x4(qf[mb][ks], q_lane + mb * 16 * LD + ks * 16);
    }

    float o[K7_MB][D / 8][4];                     // O accumulators: 32 rows x D per warp
#pragma unroll
    for (int mb = 0; mb < K7_MB; mb++)
#pragma unroll
        for (int n = 0; n < D / 8; n++) o[mb][n][0] = o[mb][n][1] = o[mb][n][2] = o[mb][n][3] = 0.0f;
    float m[K7_MB][2], l[K7_MB][2];               // running max (log2 units) and sum of rows (mb, h)
#pragma unroll
    for (int mb = 0; mb < K7_MB; mb++) m[mb][0] = m[mb][1] = -INFINITY, l[mb][0] = l[mb][1] = 0.0f;

    for (long j0 = 0, buf = 0; j0 < jend; j0 += K7_BC, buf ^= 1) {
        const T *k_s = k_buf + buf * K7_BC * LD, *v_s = v_buf + buf * K7_BC * LD;
        if (j0 + K7_BC < jend) {                  // start tile j+1 into the other buffer, do not wait
            load_tile_async<D, K7_BC, LD, K7_WARPS * 32>(k_buf + (buf ^ 1) * K7_BC * LD, Kh, j0 + K7_BC, N);
            load_tile_async<D, K7_BC, LD, K7_WARPS * 32>(v_buf + (buf ^ 1) * K7_BC * LD, Vh, j0 + K7_BC, N);
        }
        cp_async_commit();                        // (an empty group on the last tile: harmless)

        float s[K7_MB][K7_BC / 8][4];             // s_tile, 32 x 64 per warp, fp32
#pragma unroll
        for (int mb = 0; mb < K7_MB; mb++)
#pragma unroll
            for (int n = 0; n < K7_BC / 8; n++) s[mb][n][0] = s[mb][n][1] = s[mb][n][2] = s[mb][n][3] = 0.0f;
#pragma unroll
        for (int ks = 0; ks < D / 16; ks++) {
            uint32_t qa[K7_MB][4];
#pragma unroll
            for (int mb = 0; mb < K7_MB; mb++) {
                if constexpr (Q_IN_REGS) {
#pragma unroll
                    for (int r = 0; r < 4; r++) qa[mb][r] = qf[mb][Q_IN_REGS ? ks : 0][r];
                } else {
                    ldmatrix_x4(qa[mb], q_lane + mb * 16 * LD + ks * 16);
                }
            }
#pragma unroll
            for (int n2 = 0; n2 < K7_BC / 16; n2++) {         // two n-tiles of 8 keys per ldmatrix.x4
                uint32_t kf[4];
                ldmatrix_x4(kf, k_s + (n2 * 16 + (lane % 8) + 8 * (lane / 16)) * LD + ks * 16 + 8 * ((lane / 8) % 2));
#pragma unroll
                for (int mb = 0; mb < K7_MB; mb++) {          // ... and each K fragment for both m16 blocks
                    mma16816<T>(s[mb][2 * n2], qa[mb], kf);   // s_tile = Q_i K_j^T
                    mma16816<T>(s[mb][2 * n2 + 1], qa[mb], kf + 2);
                }
            }
        }

        /* Softmax on the accumulators, in log2 units, as in kernel 6, once per
         * m16 block. Only a tile that holds keys past N, or (causal) keys after
         * this warp's first row, can have a masked entry (a warp-uniform branch). */
        const bool need_mask = j0 + K7_BC > N || (causal && j0 + K7_BC - 1 > warp_row0);
        const int lim = (int)(N - j0 < K7_BC ? N - j0 : K7_BC);  // keys c >= lim are past N
        uint32_t pf[K7_MB][K7_BC / 16][4];                        // p_tile as A fragments
        float alpha[K7_MB][2];
#pragma unroll
        for (int mb = 0; mb < K7_MB; mb++) {
            float mt[2] = {-INFINITY, -INFINITY};
            if (need_mask) {
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int d = (int)(warp_row0 + 16 * mb + 8 * h + g - j0); // causal: keys c > d are in the future
#pragma unroll
                    for (int n = 0; n < K7_BC / 8; n++)
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
                for (int n = 0; n < K7_BC / 8; n++)
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
            for (int n = 0; n < K7_BC / 8; n++) {
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
        for (int ks = 0; ks < K7_BC / 16; ks++)                                      // ... + p_tile V_j
#pragma unroll
            for (int n2 = 0; n2 < D / 16; n2++) {
                uint32_t vf[4];
                ldmatrix_x4_trans(vf, v_s + (ks * 16 + (lane % 8) + 8 * ((lane / 8) % 2)) * LD + n2 * 16 + 8 * (lane / 16));
#pragma unroll
                for (int mb = 0; mb < K7_MB; mb++) {                                 // each V fragment, both m16 blocks
                    mma16816<T>(o[mb][2 * n2], pf[mb][ks], vf);
                    mma16816<T>(o[mb][2 * n2 + 1], pf[mb][ks], vf + 2);
                }
            }
        cp_async_wait<0>();                       // tile j+1 has landed ...
        __syncthreads();                          // ... for every thread, and nobody reads buffer j any more
    }

    T *Oh = O + bh * N * D;
#pragma unroll
    for (int mb = 0; mb < K7_MB; mb++)
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

template <int D, typename T, int BC = 0> struct K7Launch {
    static constexpr size_t bytes = K7Smem<D, BC>::bytes;
    static constexpr int br = K7_BR, threads = K7_WARPS * 32, bc = K7Smem<D, BC>::BC;
    static constexpr TcKernel<T> fn = kernel7_two_rowblocks<D, T, bc>;
};

static int k7_launch(const void *q, const void *k, const void *v, void *o, long B, long H, long N, long D, int dtype,
                     int causal, void *stream)
{
    return tc_launch<K7Launch>(7, q, k, v, o, B, H, N, D, dtype, causal, stream);
}

static void k7_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    int bc;
    size_t bytes;
    const char *fit = tc_fit_desc<K7Launch>(D, &bc, &bytes);
    snprintf(buf, n, "4 warps x 32 rows, BR=%d BC=%d, Q %s, %zu bytes of shared memory%s", K7_BR, bc,
             D == 64 ? "in registers" : "re-read from shared memory", bytes, fit);
}

static const FusedKernel kernel7 = {
    .id = 7, .extends = 6, .name = "2 row blocks",
    .idea = "32 query rows per warp: each K/V fragment read from shared memory feeds two mma",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = tc_supports, .launch = k7_launch,
    .describe = k7_describe,
};
FUSED_REGISTER(kernel7);
