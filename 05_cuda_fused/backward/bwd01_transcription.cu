/*
 * Backward kernel 1: the transcription.
 *
 * The backward ladder's first rung: 06_causal/flash_backward.c, the CPU FlashAttention-2 backward, moved onto the GPU
 * in fp32, loop for loop and with its names: p_tile rebuilt as e^(s_tile - L_i), Delta_i = dO_i . O_i,
 * dp_tile = dO_i V_j^T, ds_tile = p o (dp - Delta_i), then
 *     dV_j += p_tile^T dO_i,  dQ_i += ds_tile K_j / sqrt(D),  dK_j += ds_tile^T Q_i / sqrt(D).
 * Where it differs from the CPU loop, and why:
 *  - the loop over heads and K/V tiles (`for h`, `for j0`) is the grid: one block per (batch, head, K/V tile of
 *    BC = 32 keys), the first K/V tiles first when causal (they meet the most row tiles: longest first);
 *  - Delta and dQ = 0 come from a launch before this one (bwd_prep.cu): every block needs every row's Delta, and only
 *    a launch boundary waits for all;
 *  - the tiles live in shared memory: K_j, V_j loaded once per block, Q_i, dO_i, L_i, Delta_i once per row tile,
 *    p_tile and ds_tile [BR][BC] as on the CPU;
 *  - each double loop over (r, c) is cut by what it writes: the first (p and ds) hands one (r, c) to each thread; the
 *    second, which adds into three different arrays, is split in three so that each thread owns the elements it adds
 *    into: (c, d) of dV_j and dK_j, kept in registers for the whole row-tile walk, and (r, d) of this tile's part of
 *    dQ_i;
 *  - that part of dQ_i is added into dQ with atomicAdd: the blocks of all K/V tiles add into the same dQ_i at the same
 *    time, where the CPU's j0 loop runs them one after the other. So dQ is not bit-identical run to run (fp32 sums in
 *    the order the atomics arrive); dK and dV are.
 * Why: to be read beside the CPU code, and to be the fp32 reference of the GPU backward (fp32 accumulation
 * everywhere).
 * What it costs: every score is two dot products of length D read from shared memory (q_i . k_c and dO_i . v_c), one
 * float of shared memory read per multiply-add, as in the forward's kernel 2 before its register blocking; no tensor
 * cores. Registers (ptxas, sm_90a): 80 at D = 64, 126 at D = 128, no spill.
 * Measured: H100, fp32, B = 2, H = 8, N = 4096, D = 64: 22.310 ms, 7.70 TFLOP/s, 0.23x the naive cuBLAS backward
 * (cuBLAS's fp32 GEMMs near the FMA peak), 134.7 MB of peak memory against naive's 2.28 GB, errors against float64
 * as naive's; the run: RESULTS.md#bwd-1.
 */
#include <cmath>

#include "bwd.cuh"
#include "gpu.cuh"
#include "../kernels.h"

// --- the kernel ------------------------------------------------------------------

constexpr int B1_BR = 32, B1_BC = 32, B1_THREADS = 256;

/* Shared memory, in floats; rows padded by one float so that the 32 threads
 * of a warp that read 32 different rows at one column hit 32 banks. */
template <int D> struct B1Smem {
    static constexpr int LD = D + 1, LDT = B1_BC + 1;
    static constexpr size_t floats = (size_t)2 * B1_BC * LD + (size_t)2 * B1_BR * LD + (size_t)2 * B1_BR * LDT + 2 * B1_BR;
    static constexpr size_t bytes = floats * sizeof(float);
};

template <int D>
__global__ void __launch_bounds__(B1_THREADS)
bwd1_transcription(const float *__restrict__ Q,      // [B, H, N, D]
                   const float *__restrict__ K,      // [B, H, N, D]
                   const float *__restrict__ V,      // [B, H, N, D]
                   const float *__restrict__ dO,     // [B, H, N, D]
                   const float *__restrict__ L,      // [B, H, N]  L = m + log l from the forward
                   const float *__restrict__ Delta,  // [B, H, N]  dO_i . O_i (bwd_prep.cu)
                   float *__restrict__ dQ,           // [B, H, N, D] zeroed before, summed into
                   float *__restrict__ dK,           // [B, H, N, D]
                   float *__restrict__ dV,           // [B, H, N, D]
                   long N, long kv_tiles, int causal)
{
    using SM = B1Smem<D>;
    extern __shared__ float smem[];
    float *k_s = smem;                          // [BC][D+1] K_j
    float *v_s = k_s + B1_BC * SM::LD;          // [BC][D+1] V_j
    float *q_s = v_s + B1_BC * SM::LD;          // [BR][D+1] Q_i
    float *do_s = q_s + B1_BR * SM::LD;         // [BR][D+1] dO_i
    float *p = do_s + B1_BR * SM::LD;           // [BR][BC+1] p_tile, rebuilt from L
    float *ds = p + B1_BR * SM::LDT;            // [BR][BC+1] dp_tile, then ds_tile
    float *L_s = ds + B1_BR * SM::LDT;          // [BR] L_i
    float *delta = L_s + B1_BR;                 // [BR] Delta_i

    long h, jt;                                 // which (batch, head), which K/V tile
    if (causal) {                               // the first K/V tiles meet the most row tiles: start them first
        const long heads = gridDim.x / kv_tiles;
        h = blockIdx.x % heads, jt = blockIdx.x / heads;
    } else {
        h = blockIdx.x / kv_tiles, jt = blockIdx.x % kv_tiles;
    }
    const float scale = 1.0f / sqrtf((float)D);
    const size_t off = (size_t)h * N * D;
    const float *qh = Q + off, *kh = K + off, *vh = V + off, *dOh = dO + off;
    const float *Lh = L + (size_t)h * N, *dh = Delta + (size_t)h * N;
    float *dqh = dQ + off, *dkh = dK + off, *dvh = dV + off;
    const int tid = threadIdx.x;

    const long j0 = jt * B1_BC;                                   // K/V tile j0 .. j0+bc-1: this block
    const long bc = j0 + B1_BC <= N ? B1_BC : N - j0;
    for (int e = tid; e < B1_BC * D; e += B1_THREADS) {           // K_j, V_j once (rows past N: zeros)
        const int c = e / D, d = e % D;
        k_s[c * SM::LD + d] = c < bc ? kh[(j0 + c) * D + d] : 0.0f;
        v_s[c * SM::LD + d] = c < bc ? vh[(j0 + c) * D + d] : 0.0f;
    }
    /* dk_j, dv_j: the CPU's [BC, D] buffers, this thread's elements (c, d) = (e / D, e % D), e = tid + THREADS x. */
    constexpr int PER = B1_BC * D / B1_THREADS;
    float dk_j[PER], dv_j[PER];
#pragma unroll
    for (int x = 0; x < PER; x++) dk_j[x] = dv_j[x] = 0.0f;

    const long i_begin = causal ? j0 / B1_BR * B1_BR : 0;        // q_begin(mode, j0, BR): the row tile holding row j0
    for (long i0 = i_begin; i0 < N; i0 += B1_BR) {               // row tiles: inside
        const long br = i0 + B1_BR <= N ? B1_BR : N - i0;
        __syncthreads();                                          // everyone is done with the previous Q_i, dO_i, p, ds
        for (int e = tid; e < B1_BR * D; e += B1_THREADS) {
            const int r = e / D, d = e % D;
            q_s[r * SM::LD + d] = r < br ? qh[(i0 + r) * D + d] : 0.0f;
            do_s[r * SM::LD + d] = r < br ? dOh[(i0 + r) * D + d] : 0.0f;
        }
        if (tid < B1_BR) {
            L_s[tid] = tid < br ? Lh[i0 + tid] : 0.0f;
            delta[tid] = tid < br ? dh[i0 + tid] : 0.0f;
        }
        __syncthreads();

        /* The CPU's first (r, c) loop: one (r, c) per thread at a time. A warp
         * takes one row r and 32 keys c: q_i broadcast, k_c from 32 banks. */
        for (int e = tid; e < B1_BR * B1_BC; e += B1_THREADS) {
            const int r = e / B1_BC, c = e % B1_BC;
            const float *qr = q_s + r * SM::LD, *dOr = do_s + r * SM::LD;
            const float *kc = k_s + c * SM::LD, *vc = v_s + c * SM::LD;
            float s = 0.0f, dp = 0.0f;
#pragma unroll 8
            for (int d = 0; d < D; d++) {
                s += qr[d] * kc[d];                                      // s_tile = Q_i K_j^T ...
                dp += dOr[d] * vc[d];                                    // dp_tile = dO_i V_j^T
            }
            s *= scale;                                                  // ... / sqrt(D)
            /* The forward's mask with absolute indices, and the tile's tails
             * (rows past N, keys past N) as zeros, so the loops below need no test. */
            const bool hidden = r >= br || c >= bc || (causal && j0 + c > i0 + r);
            const float pw = hidden ? 0.0f : expf(s - L_s[r]);           // p_tile = e^(s_tile - L_i)
            p[r * SM::LDT + c] = pw;
            ds[r * SM::LDT + c] = pw * (dp - delta[r]);                  // ds_tile = p o (dp - Delta_i)
        }
        __syncthreads();                                                 // p_tile and ds_tile complete

        /* The CPU's second (r, c) loop, part 1 of 3 and 3 of 3: dV_j and dK_j,
         * summed over the tile's rows r, each thread its own (c, d). */
#pragma unroll
        for (int x = 0; x < PER; x++) {
            const int e = tid + B1_THREADS * x, c = e / D, d = e % D;
            for (long r = 0; r < br; r++) {
                const float pw = p[r * SM::LDT + c], sw = ds[r * SM::LDT + c] * scale;
                dv_j[x] += pw * do_s[r * SM::LD + d];                    // dV_j += p_tile^T dO_i
                dk_j[x] += sw * q_s[r * SM::LD + d];                     // dK_j += ds_tile^T Q_i / sqrt(D)
            }
        }
        /* Part 2 of 3: this tile's share of dQ_i, each thread its own (r, d),
         * added into dQ once per (r, d) and row tile. */
        for (int e = tid; e < B1_BR * D; e += B1_THREADS) {
            const int r = e / D, d = e % D;
            if (r >= br) continue;
            float acc = 0.0f;
            for (long c = 0; c < bc; c++) acc += ds[r * SM::LDT + c] * scale * k_s[c * SM::LD + d]; // ds_tile K_j / sqrt(D)
            atomicAdd(&dqh[(i0 + r) * D + d], acc);                      // dQ_i += (other K/V blocks add too)
        }
    }
#pragma unroll
    for (int x = 0; x < PER; x++) {                                      // dK_j, dV_j written once
        const int e = tid + B1_THREADS * x, c = e / D, d = e % D;
        if (c < bc) {
            dkh[(j0 + c) * D + d] = dk_j[x];
            dvh[(j0 + c) * D + d] = dv_j[x];
        }
    }
}

// --- the launcher -------------------------------------------------------------------

static int b1_supports(long D) { return D >= 16 && D <= 128 && D % 16 == 0; }

/* Delta, [B, H, N] floats; dQ (fp32 here) is summed into directly. */
static size_t b1_workspace(long B, long H, long N, long D, int dtype)
{
    (void)D, (void)dtype;
    return (size_t)B * H * N * sizeof(float);
}

template <int D>
static int launch_d(const float *q, const float *k, const float *v, const float *o, const float *dO, const float *L,
                    float *dq, float *dk, float *dv, float *delta, long B, long H, long N, int causal, cudaStream_t s)
{
    using SM = B1Smem<D>;
    if (smem_opt_in(bwd1_transcription<D>, SM::bytes, "backward kernel", 1, D)) return -1;
    /* Delta_i = dO_i . O_i and dQ = 0, for every row, before the loop (bwd_prep.cu). */
    if (bwd_preprocess(o, dO, L, delta, NULL, dq, N, B * H, N, N, D, DT_FP32, s) != 0) return -1;
    const long kv_tiles = (N + B1_BC - 1) / B1_BC;
    bwd1_transcription<D><<<(unsigned)(B * H * kv_tiles), B1_THREADS, SM::bytes, s>>>(q, k, v, dO, L, delta, dq, dk, dv, N,
                                                                                     kv_tiles, causal);
    CUDA_CHECK_LAST();
    return 0;
}

static int b1_launch(const void *q, const void *k, const void *v, const void *o, const void *dout, const float *L,
                     void *dq, void *dk, void *dv, void *ws, long B, long H, long N, long D, int dtype, int causal,
                     void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (dtype != DT_FP32 || !b1_supports(D)) {
        fprintf(stderr, "%s: backward kernel 1 takes fp32 and D in 16..128 (multiples of 16), not %s D=%ld\n", g_prog,
                dtype_name(dtype), D);
        return -1;
    }
    const float *Q = (const float *)q, *K = (const float *)k, *Vp = (const float *)v, *O = (const float *)o;
    const float *dO = (const float *)dout;
    float *dQ = (float *)dq, *dK = (float *)dk, *dV = (float *)dv, *delta = (float *)ws;
    switch (D) {
#define B1_CASE(d) case d: return launch_d<d>(Q, K, Vp, O, dO, L, dQ, dK, dV, delta, B, H, N, causal, s);
    B1_CASE(16) B1_CASE(32) B1_CASE(48) B1_CASE(64) B1_CASE(80) B1_CASE(96) B1_CASE(112) B1_CASE(128)
#undef B1_CASE
    }
    return -1;
}

static void b1_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    snprintf(buf, n, "flash_backward.c's loop, block per K/V tile of BC=%d keys, row tiles of BR=%d, %d threads, "
             "dK_j and dV_j in registers, dQ by fp32 atomicAdd, %zu bytes of shared memory", B1_BC, B1_BR, B1_THREADS,
             (((size_t)2 * B1_BC + 2 * B1_BR) * (D + 1) + (size_t)2 * B1_BR * (B1_BC + 1) + 2 * B1_BR) * sizeof(float));
}

static const BackwardKernel bwd1 = {
    .id = 1, .extends = 0, .name = "transcription",
    .idea = "06_causal/flash_backward.c on the GPU, fp32, loop for loop",
    .dtypes = 1u << DT_FP32, .supports_dim = b1_supports, .workspace = b1_workspace, .launch = b1_launch,
    .describe = b1_describe,
};
BWD_REGISTER(bwd1);
