/*
 * Kernel 3: tensor cores. fp16 / bf16 inputs, the two matrix products of the tile loop on mma.sync m16n8k16, fp32
 * softmax state and fp32 accumulation.
 *
 * Extends kernel 2 (kernel02_smem_tiles.cu). The idea: let the tensor cores do both products, and keep everything
 * else where the tensor cores want it:
 *   - 4 warps per block, each warp owns 16 query rows (BR = 64 in all) and does all of their work itself: no
 *     __syncthreads around the softmax.
 *   - Q_i's fragments are loaded once with ldmatrix and stay in registers.
 *   - s_tile = Q_i K_j^T: per warp a 16 x 64 tile of fp32 accumulators (8 mma n-tiles), the K fragments read from
 *     shared memory with ldmatrix.
 *   - the softmax works on those accumulators in place; each row's 64 values live in the 4 lanes of a quad, so a row
 *     max or sum is 2 shuffles. e^(s - m) is computed as 2^(s * scale * log2 e - m'), m' in the same units: the
 *     scores multiplied by scale * log2 e as they are masked (an FMUL each), then one FADD and one EX2 per
 *     probability (kernel 9 folds the FMUL and the FADD into one FFMA).
 *   - p_tile is packed to 16 bits straight from the accumulator registers and used as the A operand of O += P V
 *     (tc.cuh: the C layout of m16n8 is the A layout of the next mma), V's fragments via ldmatrix.trans: P never
 *     touches shared memory.
 *   - shared rows padded by 16 bytes, so the 8 rows each ldmatrix reads fall in 8 different 4-bank groups (no bank
 *     conflicts).
 *
 * Why: the two products are almost all of the flops, and kernel 2 runs them on the fp32 units; the tensor cores do
 * them in 16 bits many times faster (the H100 SXM5: 989 TFLOP/s of fp16 matrix products, the FlashAttention-3
 * paper's figure).
 *
 * What it costs: 16-bit inputs (fp32 kernels stop at kernel 2). K and V tiles are still loaded synchronously (load,
 * __syncthreads, compute): kernel 4 overlaps the next tile's load with this tile's math.
 *
 * A score modifier (question 5), launch_alibi: the same kernel compiled with ALiBi's -slope |i - j| added to the score
 * accumulators beside the mask, before the row max (kernel3_alibi; kernel3_mma is compiled without it, and its
 * machine code is the same as before ALiBi existed). It costs 37%: the bias is computed per score (an integer
 * distance, a convert, a multiply-add) where a tuned kernel would step it along the row.
 *
 * Measured: H100, fp16, N = 4096, FlashAttention's shapes: 169.9 TFLOP/s at D = 64 (56% of FlashAttention-2's 302),
 * 187.2 at D = 128 (56% of its 335); the run and ALiBi's: RESULTS.md#kernel-3.
 */
#include <cmath>

#include "gpu.cuh"
#include "../kernels.h"
#include "launch_tc.cuh"
#include "../primitives/tile_order.cuh"
#include "../primitives/tc.cuh"

// --- the kernel ------------------------------------------------------------------

constexpr int K3_BR = 64, K3_BC = 64, K3_WARPS = 4;

template <int D> struct K3Smem {
    static constexpr int LD = D + 8;  /* 16-byte pad per row: conflict-free ldmatrix */
    static constexpr size_t bytes = (size_t)(K3_BR + 2 * K3_BC) * LD * 2;
};

/* rows x D tile of a [N, D] matrix into shared memory [rows][LD]; rows past N are zeros. */
template <int D, int ROWS, int LD, typename T>
__device__ __forceinline__ void load_tile(T *dst, const T *src, long row0, long N)
{
    constexpr int CHUNKS = ROWS * D / 8;  /* 16-byte chunks of 8 halves */
    for (int c = threadIdx.x; c < CHUNKS; c += K3_WARPS * 32) {
        const int r = c / (D / 8), col = (c % (D / 8)) * 8;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (row0 + r < N) v = *reinterpret_cast<const uint4 *>(src + (row0 + r) * D + col);
        *reinterpret_cast<uint4 *>(dst + r * LD + col) = v;
    }
}

/* The kernel's body, a device function: kernel3_mma below is it as a __global__ kernel. */
template <int D, typename T,
          bool ALIBI>                               // aside: ALiBi (step 06) from the same body, plain kernel unchanged
__device__ __forceinline__ void kernel3_tile(const T *__restrict__ Q,  // [B, H, N, D]
                                             const T *__restrict__ K,  // [B, H, N, D]
                                             const T *__restrict__ V,  // [B, H, N, D]
                                             T *__restrict__ O,        // [B, H, N, D]
                                             const float *__restrict__ slope, // aside: [B*H], ALIBI only
                                             long N, long row_tiles, int causal, float scale_log2)
{
    constexpr int LD = K3Smem<D>::LD;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    T *q_s = reinterpret_cast<T *>(smem_raw);     // [BR][LD]
    T *k_s = q_s + K3_BR * LD;                    // [BC][LD]
    T *v_s = k_s + K3_BC * LD;                    // [BC][LD]

    long bh, tile;                                // which (batch, head), which row tile
    block_tile(row_tiles, causal, &bh, &tile);    // causal: longest first (tile_order.cuh)
    const long i0 = tile * K3_BR;
    const T *Qh = Q + bh * N * D, *Kh = K + bh * N * D, *Vh = V + bh * N * D;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const long row_g = i0 + warp * 16 + g, row_g8 = row_g + 8;   // this lane's two query rows

    load_tile<D, K3_BR, LD>(q_s, Qh, i0, N);
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

    const long last_row = (i0 + K3_BR < N ? i0 + K3_BR : N) - 1;
    const long jend = causal ? last_row + 1 : N;  // causal: skip K/V tiles above the diagonal
    for (long j0 = 0; j0 < jend; j0 += K3_BC) {
        __syncthreads();                          // the previous K_j, V_j are no longer read
        load_tile<D, K3_BC, LD>(k_s, Kh, j0, N);
        load_tile<D, K3_BC, LD>(v_s, Vh, j0, N);
        __syncthreads();

        float s[K3_BC / 8][4];                    // s_tile, 16 x 64 per warp, fp32
#pragma unroll
        for (int n = 0; n < K3_BC / 8; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
        for (int ks = 0; ks < D / 16; ks++)
#pragma unroll
            for (int n2 = 0; n2 < K3_BC / 16; n2++) {         // two n-tiles of 8 keys per ldmatrix.x4
                uint32_t kf[4];
                ldmatrix_x4(kf, k_s + (n2 * 16 + (lane % 8) + 8 * (lane / 16)) * LD + ks * 16 + 8 * ((lane / 8) % 2));
                mma16816<T>(s[2 * n2], qf[ks], kf);           // s_tile = Q_i K_j^T
                mma16816<T>(s[2 * n2 + 1], qf[ks], kf + 2);
            }

        /* Softmax on the accumulators. Masked entries (past N, or causal
         * j > i by absolute index) become -inf before the row max. */
        float mt0 = -INFINITY, mt1 = -INFINITY;
#pragma unroll
        for (int n = 0; n < K3_BC / 8; n++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const long col = j0 + n * 8 + 2 * t + e;
                s[n][e] = (col >= N || (causal && col > row_g)) ? -INFINITY : s[n][e] * scale_log2;
                s[n][2 + e] = (col >= N || (causal && col > row_g8)) ? -INFINITY : s[n][2 + e] * scale_log2;
                if constexpr (ALIBI) {                        // aside: ALiBi's -slope |i - j| goes with the mask,
                    const float sl = slope[bh] * LOG2E;                                           // aside: in log2 units
                    s[n][e] -= sl * (float)(row_g > col ? row_g - col : col - row_g);             // aside
                    s[n][2 + e] -= sl * (float)(row_g8 > col ? row_g8 - col : col - row_g8);      // aside
                }                                                                                 // aside
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
        uint32_t pf[K3_BC / 16][4];                                           // p_tile as A fragments
#pragma unroll
        for (int n = 0; n < K3_BC / 8; n++) {
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
        for (int ks = 0; ks < K3_BC / 16; ks++)                              // ... + p_tile V_j
#pragma unroll
            for (int n2 = 0; n2 < D / 16; n2++) {
                uint32_t vf[4];
                ldmatrix_x4_trans(vf, v_s + (ks * 16 + (lane % 8) + 8 * ((lane / 8) % 2)) * LD + n2 * 16 + 8 * (lane / 16));
                mma16816<T>(o[2 * n2], pf[ks], vf);
                mma16816<T>(o[2 * n2 + 1], pf[ks], vf + 2);
            }
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

template <int D, typename T>
__global__ void __launch_bounds__(K3_WARPS * 32)
kernel3_mma(const T *__restrict__ Q, const T *__restrict__ K, const T *__restrict__ V, T *__restrict__ O, long N,
            long row_tiles, int causal, float scale_log2)
{
    kernel3_tile<D, T, false>(Q, K, V, O, nullptr, N, row_tiles, causal, scale_log2);
}

template <int D, typename T>                                                          // aside: ALiBi's build
__global__ void __launch_bounds__(K3_WARPS * 32)                                      // aside
kernel3_alibi(const T *__restrict__ Q, const T *__restrict__ K, const T *__restrict__ V, T *__restrict__ O, // aside
              const float *__restrict__ slope, long N, long row_tiles, int causal, float scale_log2) // aside
{                                                                                     // aside
    kernel3_tile<D, T, true>(Q, K, V, O, slope, N, row_tiles, causal, scale_log2);    // aside
}                                                                                     // aside

// --- the launcher -------------------------------------------------------------------

template <int D, typename T, int BC = 0> struct K3Launch { /* bc = 0: its tiles fit every GPU (52 KB at D = 128) */
    static constexpr size_t bytes = K3Smem<D>::bytes;
    static constexpr int br = K3_BR, threads = K3_WARPS * 32, bc = 0;
    static constexpr TcKernel<T> fn = kernel3_mma<D, T>;
};
template <int D, typename T, int BC = 0> struct K3LaunchAlibi : K3Launch<D, T> {
    static constexpr TcKernelA<T> fn = kernel3_alibi<D, T>;
};

static int k3_launch(const void *q, const void *k, const void *v, void *o, long B, long H, long N, long D, int dtype,
                     int causal, void *stream)
{
    return tc_launch<K3Launch>(3, q, k, v, o, B, H, N, D, dtype, causal, stream);
}

static int k3_launch_alibi(const void *q, const void *k, const void *v, void *o, const float *slope, long B, long H,
                           long N, long D, int dtype, int causal, void *stream)
{
    return tc_launch<K3LaunchAlibi>(3, q, k, v, o, B, H, N, D, dtype, causal, stream, nullptr, slope);
}

static void k3_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    snprintf(buf, n, "mma.sync m16n8k16, BR=%d (4 warps x 16 rows) BC=%d, P in registers, %zu bytes of shared memory",
             K3_BR, K3_BC, D == 64 ? K3Smem<64>::bytes : K3Smem<128>::bytes);
}

static const FusedKernel kernel3 = {
    .id = 3, .extends = 2, .name = "mma.sync",
    .idea = "tensor cores for Q K^T and P V, P kept in registers",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = tc_supports, .launch = k3_launch,
    .describe = k3_describe, .launch_alibi = k3_launch_alibi,
};
FUSED_REGISTER(kernel3);
