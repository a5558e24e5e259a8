/*
 * Kernel 2: shared-memory tiles. One thread block per (batch, head, Q tile of BR = 64 rows); K and V walked in tiles
 * of BC = 64 rows, each loaded ONCE into shared memory and used by all 64 query rows of the block.
 *
 * Extends kernel 1 (kernel01_transcription.cu). The idea: in kernel 1 each of the 128 threads of a block (one query
 * row each) reads every k_j and v_j itself (128 reads of each K/V row per block); here the block loads a K/V tile once
 * (1 read per row tile: the "IO-aware" point of the chapter, with the tile in the SM's SRAM) and 256 threads compute
 * the [BR, BC] score tile together, each thread a 4 x 4 block of it, kept in registers. Each row of the tile belongs
 * to 16 threads (a half warp), so the row max and row sum are 4 shuffles.
 *
 * The update is the chapter's, written the way FlashAttention-2 does it: p = e^(s - m_new) directly, which is
 * beta * e^(s - m_tile) with beta folded in; alpha = e^(m - m_new) rescales l and o. l is kept per thread (the sum of
 * its own columns) and summed across the half warp only once, at the end, because alpha is the same for every column
 * of a row.
 *
 * Tile sizes: the chapter's B_c = ceil(M / 4d) (003, with M the shared memory per block) is printed by describe(); on
 * an H100 it gives ~900 rows at D = 64, far more than a register-blocked tile can use, so the kernel rounds down to
 * BR = BC = 64 (a 4 x 4 register block per thread, 256 threads).
 *
 * Why: kernel 1's per-thread K/V reads are its cost; a tile read once serves 64 rows.
 *
 * What it costs: shared memory, Q, K, V tiles [64][D+1] and P [64][65] floats, 66 KB at D = 64 and 116 KB at
 * D = 128, above the default 48 KB: asked for with cudaFuncSetAttribute and checked against the device limit.
 *
 * For the backward (bwd01_transcription.cu) it can also write L = m + log l, one float per row (launch_l, L != NULL):
 * the row's m and l are already in registers at the end, so that is one store per row and one logf, behind a branch
 * on L that is the same for the whole grid (measured: +0.1%). A score modifier (question 5), launch_alibi: ALiBi's
 * -slope |i - j| added to s_tile where the causal mask goes, before m_tile, with the absolute row and column; behind a
 * branch on the slope pointer, the same for the whole grid (measured: +5.0% with ALiBi). The L store and this branch
 * are in the plain kernel's code too and moved ptxas's register allocation (spills at some D; the counts:
 * RESULTS.md#kernel-2); kernel 3's compile-time flag (kernel03_mma.cu) leaves the plain kernel as it was.
 *
 * Measured: H100, fp32, B = 2, H = 8, N = 4096, D = 64: 25.74 TFLOP/s, 9.7x kernel 1 and 1.11x the naive cuBLAS
 * baseline in the same run; the run, L's and ALiBi's costs: RESULTS.md#kernel-2.
 */
#include <cmath>

#include "gpu.cuh"
#include "../kernels.h"
#include "../primitives/tile_order.cuh"

// --- the kernel ------------------------------------------------------------------

constexpr int K2_BR = 64, K2_BC = 64, K2_THREADS = 256;

/* Shared memory layout, in floats. Rows padded by one float: the 16 threads
 * of a half warp read 16 different K rows at the same column, and with a
 * row stride of D+1 (odd) they fall in 16 different banks. */
template <int D, bool PK = false> struct K2Smem {
    static constexpr int LD = D + 1, LDP = K2_BC + 1;
    static constexpr size_t floats = (size_t)3 * K2_BR * LD + (PK ? 0 : (size_t)K2_BR * LDP);
    static constexpr size_t bytes = floats * sizeof(float);
};

/* PK: p_tile written over K_j, for a GPU whose blocks may have less shared memory (64 KB on Turing, where the
 * 66 KB of D = 64 do not fit; 99 KB on the RTX 30/40/50, where the 116 KB of D = 128 do not). Once s_tile is in
 * registers K_j is dead, and its [BC][D+1] floats hold the [BR][BC+1] of p_tile from D = 64 on. The price: one
 * more barrier per K/V tile (every thread's last read of K_j before anyone writes p). 49 KB at D = 64, 97 KB at
 * D = 128. The launcher takes it only when the plain layout does not fit. */
template <int D, bool PK>
__global__ void __launch_bounds__(K2_THREADS)
kernel2_smem_tiles(const float *__restrict__ Q,  // [B, H, N, D]
                   const float *__restrict__ K,  // [B, H, N, D]
                   const float *__restrict__ V,  // [B, H, N, D]
                   float *__restrict__ O,        // [B, H, N, D]
                   float *__restrict__ L,        // aside: [B, H, N] or NULL: L = m + log l per row, for the backward
                   const float *__restrict__ slope, // aside: [B*H] or NULL: ALiBi, -slope |i - j| on the scores
                   long N, long row_tiles, int causal)
{
    using SM = K2Smem<D, PK>;
    static_assert(!PK || K2_BC * (D + 1) >= K2_BR * (K2_BC + 1), "p_tile fits over K_j from D = 64 on");
    extern __shared__ float smem[];
    float *q_s = smem;                             // [BR][D+1]  Q_i, pre-scaled by 1/sqrt(D)
    float *k_s = q_s + K2_BR * SM::LD;             // [BC][D+1]  K_j
    float *v_s = k_s + K2_BC * SM::LD;             // [BC][D+1]  V_j
    float *p_s = PK ? k_s : v_s + K2_BC * SM::LD;  // [BR][BC+1] p_tile (PK: over K_j)

    long bh, tile;                                                // which (batch, head), which row tile
    block_tile(row_tiles, causal, &bh, &tile);                    // causal: longest first (tile_order.cuh)
    const long i0 = tile * K2_BR;                                // first query row of this tile
    const float *Qh = Q + bh * N * D, *Kh = K + bh * N * D, *Vh = V + bh * N * D;
    const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;   // rows 4ty..4ty+3; columns tx + 16c
    const float scale = 1.0f / sqrtf((float)D);

    /* Q_i once; rows past N are zero (their scores are finite, their output never written). */
    for (int e = tid; e < K2_BR * D; e += K2_THREADS) {
        const int r = e / D, d = e % D;
        q_s[r * SM::LD + d] = i0 + r < N ? Qh[(i0 + r) * D + d] * scale : 0.0f;
    }

    constexpr int OC = D / 16;                    // output columns per thread: tx + 16c, c < OC
    float o[4][OC], m[4], l[4];                   // running state of this thread's 4 rows
#pragma unroll
    for (int r = 0; r < 4; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
#pragma unroll
        for (int c = 0; c < OC; c++) o[r][c] = 0.0f;
    }

    /* Causal: tiles starting past this Q tile's last row are wholly masked; skip them. */
    const long last_row = (i0 + K2_BR < N ? i0 + K2_BR : N) - 1;
    const long jend = causal ? last_row + 1 : N;
    for (long j0 = 0; j0 < jend; j0 += K2_BC) {
        __syncthreads();                          // everyone is done with the previous K_j, V_j, P
        for (int e = tid; e < K2_BC * D; e += K2_THREADS) {      // K_j, V_j: coalesced, once per block
            const int r = e / D, d = e % D;
            const bool in = j0 + r < N;
            k_s[r * SM::LD + d] = in ? Kh[(j0 + r) * D + d] : 0.0f;
            v_s[r * SM::LD + d] = in ? Vh[(j0 + r) * D + d] : 0.0f;
        }
        __syncthreads();

        float s[4][4];                            // s_tile[4ty + r][tx + 16c]
#pragma unroll
        for (int r = 0; r < 4; r++)
#pragma unroll
            for (int c = 0; c < 4; c++) s[r][c] = 0.0f;
#pragma unroll 8
        for (int d = 0; d < D; d++) {
            float qv[4], kv[4];
#pragma unroll
            for (int r = 0; r < 4; r++) qv[r] = q_s[(4 * ty + r) * SM::LD + d];   // broadcast in the half warp
#pragma unroll
            for (int c = 0; c < 4; c++) kv[c] = k_s[(tx + 16 * c) * SM::LD + d];   // 16 banks, no conflict
#pragma unroll
            for (int r = 0; r < 4; r++)
#pragma unroll
                for (int c = 0; c < 4; c++) s[r][c] += qv[r] * kv[c];          // s_tile = Q_i K_j^T / sqrt(D)
        }
        if (PK) __syncthreads();                  // PK: every thread is done with K_j before p_tile overwrites it

#pragma unroll
        for (int r = 0; r < 4; r++) {
            const long row = i0 + 4 * ty + r;
            float m_tile = -INFINITY;
#pragma unroll
            for (int c = 0; c < 4; c++) {
                const long col = j0 + tx + 16 * c;
                if (slope) s[r][c] -= slope[bh] * (float)(row > col ? row - col : col - row); // aside: ALiBi's score
                if (col >= N || (causal && col > row)) s[r][c] = -INFINITY;   // modifier goes beside the mask
                m_tile = fmaxf(m_tile, s[r][c]);
            }
#pragma unroll
            for (int off = 8; off > 0; off /= 2)                              // max over the half warp's 64 columns
                m_tile = fmaxf(m_tile, __shfl_xor_sync(0xffffffffu, m_tile, off));
            const float m_new = fmaxf(m[r], m_tile);                          // m_new = max(m, m_tile)
            /* A row with every column masked so far has m_new = -inf: keep its
             * state as it is (alpha = 1, p = 0) instead of e^(-inf + inf) = NaN. */
            const float alpha = m_new == -INFINITY ? 1.0f : __expf(m[r] - m_new); // alpha = e^(m - m_new)
            float l_part = 0.0f;
#pragma unroll
            for (int c = 0; c < 4; c++) {
                const float p = m_new == -INFINITY ? 0.0f : __expf(s[r][c] - m_new); // p = beta e^(s - m_tile)
                p_s[(4 * ty + r) * SM::LDP + tx + 16 * c] = p;
                l_part += p;
            }
            l[r] = alpha * l[r] + l_part;                                     // l = alpha l + rowsum(p) (this thread's part)
#pragma unroll
            for (int c = 0; c < OC; c++) o[r][c] *= alpha;                    // o = alpha o ...
            m[r] = m_new;
        }
        __syncthreads();                          // the whole p_tile is in shared memory

#pragma unroll 4
        for (int jj = 0; jj < K2_BC; jj++) {                                  // ... + p_tile V_j
            float vv[OC];
#pragma unroll
            for (int c = 0; c < OC; c++) vv[c] = v_s[jj * SM::LD + tx + 16 * c];
#pragma unroll
            for (int r = 0; r < 4; r++) {
                const float p = p_s[(4 * ty + r) * SM::LDP + jj];
#pragma unroll
                for (int c = 0; c < OC; c++) o[r][c] += p * vv[c];
            }
        }
    }

#pragma unroll
    for (int r = 0; r < 4; r++) {
        float lr = l[r];
#pragma unroll
        for (int off = 8; off > 0; off /= 2) lr += __shfl_xor_sync(0xffffffffu, lr, off); // the row's l
        const long row = i0 + 4 * ty + r;
        if (row < N) {
            const float inv_l = 1.0f / lr;
#pragma unroll
            for (int c = 0; c < OC; c++) O[(bh * N + row) * D + tx + 16 * c] = o[r][c] * inv_l; // O_i = o / l
            if (L != nullptr && tx == 0)                                      // aside: the backward's L = m + log l
                L[bh * N + row] = lr > 0.0f ? m[r] + logf(lr) : -INFINITY;   // aside: (each thread of the half warp has m, l)
        }
    }
}

// --- the launcher -------------------------------------------------------------------

template <int D, bool PK>
static int launch_pk(const float *q, const float *k, const float *v, float *o, float *Lp, const float *slope, long B,
                     long H, long N, int causal, cudaStream_t s)
{
    using SM = K2Smem<D, PK>;
    if (smem_opt_in(kernel2_smem_tiles<D, PK>, SM::bytes, "kernel", 2, D)) return -1;
    const long row_tiles = (N + K2_BR - 1) / K2_BR;
    kernel2_smem_tiles<D, PK><<<(unsigned)(B * H * row_tiles), K2_THREADS, SM::bytes, s>>>(q, k, v, o, Lp, slope, N,
                                                                                           row_tiles, causal);
    CUDA_CHECK_LAST();
    return 0;
}

/* p_tile over K_j only where the plain layout does not fit this GPU (and p_tile fits over K_j: D >= 64). */
template <int D> static bool k2_pk() { return D >= 64 && K2Smem<D>::bytes > (size_t)gpu_smem_block(); }

template <int D>
static int launch_d(const float *q, const float *k, const float *v, float *o, float *Lp, const float *slope, long B,
                    long H, long N, int causal, cudaStream_t s)
{
    if (k2_pk<D>()) return launch_pk<D, (D >= 64)>(q, k, v, o, Lp, slope, B, H, N, causal, s);
    return launch_pk<D, false>(q, k, v, o, Lp, slope, B, H, N, causal, s);
}

static int k2_supports(long D) { return D >= 16 && D <= 128 && D % 16 == 0; }

/* The layout launch_d takes at D on this GPU: p_tile over K_j or not, and its bytes (the describe line's). */
template <int D> static size_t k2_layout_d(bool *pk)
{
    *pk = k2_pk<D>();
    return *pk ? K2Smem<D, (D >= 64)>::bytes : K2Smem<D>::bytes;
}
static size_t k2_layout(long D, bool *pk)
{
    *pk = false;
    switch (D) {
#define K2_CASE(d) case d: return k2_layout_d<d>(pk);
    K2_CASE(16) K2_CASE(32) K2_CASE(48) K2_CASE(64) K2_CASE(80) K2_CASE(96) K2_CASE(112) K2_CASE(128)
#undef K2_CASE
    }
    return 0;
}

static int k2_run(const void *q, const void *k, const void *v, void *o, float *Lp, const float *slope, long B, long H,
                  long N, long D, int dtype, int causal, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (dtype != DT_FP32 || !k2_supports(D)) {
        fprintf(stderr, "%s: kernel 2 takes fp32 and D in 16..128 (multiples of 16), not %s D=%ld\n", g_prog,
                dtype_name(dtype), D);
        return -1;
    }
    const float *Q = (const float *)q, *K = (const float *)k, *Vp = (const float *)v;
    float *Op = (float *)o;
    switch (D) {
#define K2_CASE(d) case d: return launch_d<d>(Q, K, Vp, Op, Lp, slope, B, H, N, causal, s);
    K2_CASE(16) K2_CASE(32) K2_CASE(48) K2_CASE(64) K2_CASE(80) K2_CASE(96) K2_CASE(112) K2_CASE(128)
#undef K2_CASE
    }
    return -1;
}

static int k2_launch(const void *q, const void *k, const void *v, void *o, long B, long H, long N, long D, int dtype,
                     int causal, void *stream)
{
    return k2_run(q, k, v, o, NULL, NULL, B, H, N, D, dtype, causal, stream);
}

static int k2_launch_l(const void *q, const void *k, const void *v, void *o, float *Lp, long B, long H, long N, long D,
                       int dtype, int causal, void *stream)
{
    return k2_run(q, k, v, o, Lp, NULL, B, H, N, D, dtype, causal, stream);
}

static int k2_launch_alibi(const void *q, const void *k, const void *v, void *o, const float *slope, long B, long H,
                           long N, long D, int dtype, int causal, void *stream)
{
    return k2_run(q, k, v, o, NULL, slope, B, H, N, D, dtype, causal, stream);
}

static void k2_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    const int M = gpu_smem_block();
    const long bc = (M + 4 * D - 1) / (4 * D);
    bool pk;
    const size_t bytes = k2_layout(D, &pk);
    snprintf(buf, n,
             "B_c = ceil(M / 4d) = ceil(%d / %ld) = %ld rows (003's formula, M = shared memory per block); "
             "rounded down to BR = BC = %d for a 4x4 register block per thread, %d threads, %zu bytes of shared memory%s",
             M, 4 * D, bc, K2_BC, K2_THREADS, bytes, pk ? " (p_tile over K_j: the plain layout does not fit this GPU)" : "");
}

static const FusedKernel kernel2 = {
    .id = 2, .extends = 1, .name = "smem tiles",
    .idea = "K/V tiles loaded once per block into shared memory, score tile computed cooperatively",
    .dtypes = 1u << DT_FP32, .supports_dim = k2_supports, .launch = k2_launch, .describe = k2_describe,
    .launch_l = k2_launch_l, .launch_alibi = k2_launch_alibi,
};
FUSED_REGISTER(kernel2);
