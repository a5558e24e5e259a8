/*
 * Backward kernel 2: the backward's five products on mma.sync, key-major.
 *
 * Extends backward kernel 1 (bwd01_transcription.cu). The idea: the five products of a (row tile, K/V tile) pair
 * become mma.sync m16n8k16 on 16-bit inputs with fp32 accumulators; the softmax recompute stays fp32. A warp owns 16
 * keys of the K/V tile and computes its part of s_tile^T, dp_tile^T, dV_j and dK_j as 16 x 8 x 16 products, keys as
 * rows: p^T and ds^T come out of the first two as accumulators laid out as the A operand of the next two, so they
 * never leave registers, and dK_j, dV_j stay in registers for the whole walk over the row tiles. Only ds^T goes
 * through shared memory, for the fifth product, dQ_i += ds_tile K_j, whose part the block adds into dQ with fp32
 * atomics (the notes above the kernel say why, and what it costs). fp16/bf16, D = 64 or 128, causal or not, any N.
 * This file holds the body that backward kernels 3 and 4 reuse: they change its policy (B2Policy below).
 * Why: kernel 1's threads each own output elements and read every operand from shared memory, one float per
 * multiply-add, with no tensor cores; here each multiply-add of the five products is on them.
 * What it costs: 4 warps, a K/V tile of BC = 64 keys, row tiles of BR = 64 queries, Q_i and dO_i double-buffered by
 * cp.async; 65.5 KB of shared memory at D = 64 (K_w and V_w fragments kept in registers), 114.7 KB at D = 128 (they
 * are re-read from shared memory: two blocks per SM still fit, 2 x 115.7 KB with the 1 KB each block reserves, of
 * the SM's 228 KB). Registers (ptxas, sm_90a): 240 at D = 64, no spill; 255 at D = 128 with 28 bytes of spill (dK_w
 * and dV_w alone take 128). dQ is not bit-identical run to run (dK and dV are).
 * Measured: H100, fp16, N = 4096: 204.3 TFLOP/s at D = 64, 197.2 at D = 128, 2.1x and 1.04x the naive cuBLAS
 * backward (FlashAttention-2: 270 and 290); the runs: RESULTS.md#bwd-2.
 */
#ifndef RUNG
#define RUNG 2          // this file is the one compiled: its launcher and registry entry (the end) are built
#endif

#include <cmath>

#include "bwd.cuh"
#include "gpu.cuh"
#include "../kernels.h"
#include "../primitives/tc.cuh"

// --- the idea ----------------------------------------------------------------------

/*
 * One block owns a K/V tile of BC = 16 x WARPS keys and walks the row tiles
 * of BR = 64 queries, as flash_backward.c's loops do (K/V tile outside,
 * row tiles inside). Each warp owns 16 keys of the tile, and computes the
 * TRANSPOSED score tile of its keys against the row tile, key-major:
 *
 *     s_tile^T  = K_w Q_i^T              [16 keys x BR]   A = K_w, B = Q_i
 *     dp_tile^T = V_w dO_i^T             [16 keys x BR]   A = V_w, B = dO_i
 *     p^T  = 2^(s^T scale_log2 - L_i log2 e)     (the forward's p, rebuilt)
 *     ds^T = p^T o (dp^T - Delta_i)
 *     dV_w += p^T dO_i                   [16 keys x D]    A = p^T (registers), B = dO_i
 *     dK_w += ds^T Q_i                   [16 keys x D]    A = ds^T (registers), B = Q_i
 *
 * Why key-major: the accumulator layout of an mma (rows g, g+8 of the warp's
 * 16, columns 2t, 2t+1) is, pair by pair, the layout of its A operand (tc.cuh),
 * so p^T and ds^T, computed as accumulators with keys as rows, are already the
 * A operands of dV_w and dK_w: they never leave registers, exactly like P in
 * the forward's O = P V. dK_w and dV_w stay in registers for the whole walk
 * and are written once. With query-major tiles (FlashAttention-2's choice on
 * sm_80) p and ds go through shared memory to be transposed.
 *
 * The fifth product, dQ_i += ds_tile K_j / sqrt(D), sums over the keys, which
 * are spread over the warps: ds^T goes to shared memory ([BC][BR], 16-bit),
 * and after a barrier the warps split dQ_i's [BR x D] between them, each
 * reading ds through ldmatrix.trans (which gives ds, not ds^T) and K_j from
 * shared memory. Other blocks (other K/V tiles) add into the same dQ_i at the
 * same time: the part is added with fp32 atomics (red.global.add, two floats
 * per instruction on sm_90) into an fp32 accumulator [B, H, N, D] that
 * bwd_prep.cu zeroed, and converted to dQ (times 1/sqrt(D)) after the loop.
 * Why atomics and not a second pass that owns Q tiles and walks the K/V
 * tiles: that pass would recompute s_tile and dp_tile, two of the five
 * products again (7 instead of 5); atomics cost BR x D additions per (row
 * tile, K/V tile) pair against 5 x 2 BR BC D FLOPs, 1 per 10 BC FLOPs. The
 * price: dQ's fp32 sums are added in the order the blocks arrive, so dQ is
 * not bit-identical run to run (dK and dV are), and the accumulator is
 * B H N D floats of memory, twice dQ's own in fp16.
 *
 * Masks: keys past N are hidden in the last K/V tile (their K, V rows are
 * zeros, and p is set to 0 so that nothing of them reaches dQ); queries past
 * N get L = +inf from bwd_prep.cu, so p = 2^(-inf) = 0 with no test; the
 * causal mask (key > query, absolute indices) only in the row tiles that
 * cross the diagonal of this warp's keys, and row tiles before the one
 * holding row j0 are skipped (flash_backward.c's q_begin).
 *
 * Loads: K_j and V_j once per block; Q_i, dO_i and L_i, Delta_i of the next
 * row tile by cp.async into the other of two buffers while this one is used.
 * Barriers: two per row tile, one between writing ds^T and reading it, one at
 * the end (the next tile's buffers are in, nobody reads ds^T any more).
 * Kernel 4 changes that schedule (its policy's hooks: prologue, rows_ahead, ds_slot,
 * ds_ready, row_end).
 */

/* The policy of backward kernel 2: the block's warps, ds^T's buffers, and the hooks where kernels 3 and 4 change
 * the body (each later kernel derives its policy from its predecessor's and replaces what its idea changes). */
struct B2Policy {
    static constexpr int WARPS = 4;       /* 16 keys a warp: BC = 64 */
    static constexpr int DS_BUFS = 1;     /* ds^T, [BC][BR], one buffer */
    static constexpr const char *BARRIERS = "2 barriers";   /* per row tile (describe) */

    /* After the first row tile (rows i_begin.., buffer 0) has landed: nothing more to start. */
    template <class F> static __device__ __forceinline__ void prologue(F &load_rows, long i_begin, long N, int BR)
    {
        (void)load_rows, (void)i_begin, (void)N, (void)BR;
    }
    /* At the start of row tile i0 (in buffer buf): the next row tile, into the other buffer. */
    template <class F> static __device__ __forceinline__ void rows_ahead(F &load_rows, long i0, long buf, long N, int BR)
    {
        if (i0 + BR < N) load_rows(i0 + BR, (int)(buf ^ 1));
        cp_async_commit();
    }
    /* Which buffer of ds^T the row tile in Q/dO buffer buf writes: the one. */
    static __device__ __forceinline__ long ds_slot(long buf)
    {
        (void)buf;
        return 0;
    }
    /* ds^T of row tile i0 written: the barrier before dQ reads all the block's keys of it. */
    template <class F> static __device__ __forceinline__ void ds_ready(F &load_rows, long i0, long buf, long N, int BR)
    {
        (void)load_rows, (void)i0, (void)buf, (void)N, (void)BR;
        __syncthreads();                      // ds_tile^T complete: all BC keys
    }
    /* The row tile's end, after its dQ. */
    static __device__ __forceinline__ void row_end()
    {
        cp_async_wait<0>();                   // the next row tile has landed ...
        __syncthreads();                      // ... for every thread, and nobody reads ds^T or this buffer any more
    }
};

/* The block's tiles, from the policy's warps and ds^T buffers. */
template <int D, class P> struct BwdMma {
    static constexpr int WARPS = P::WARPS;
    static constexpr int BC = 16 * WARPS;  /* keys per block: 16 per warp */
    static constexpr int BR = 64;          /* queries per row tile */
    static constexpr int THREADS = 32 * WARPS;
    static constexpr int LD = D + 8;       /* row pitch of K, V, Q, dO tiles: 16-byte pad, conflict-free ldmatrix */
    static constexpr int LDS = BR + 8;     /* row pitch of ds^T [BC][BR] */
    /* K_w and V_w A fragments in registers at D = 64 (32 registers); at D = 128
     * they would take 64, with dK_w and dV_w's 128: read from shared memory. */
    static constexpr bool KV_REGS = D == 64;
    static constexpr int DS_BUFS = P::DS_BUFS;
    static constexpr size_t bytes =
        ((size_t)2 * BC * LD + (size_t)4 * BR * LD + (size_t)DS_BUFS * BC * LDS) * 2 + 4 * BR * sizeof(float);
};

template <int D, typename T, class P>
__global__ void __launch_bounds__(32 * P::WARPS)
bwd_mma(const T *__restrict__ Q,           // [B, H, N, D]
        const T *__restrict__ K,           // [B, H, N, D]
        const T *__restrict__ V,           // [B, H, N, D]
        const T *__restrict__ dO,          // [B, H, N, D]
        const float *__restrict__ lse2,    // [B, H, Npad] L log2(e), +inf past N (bwd_prep.cu)
        const float *__restrict__ delta,   // [B, H, Npad] Delta = dO . O, 0 past N
        float *__restrict__ dq_acc,        // [B, H, N, D] fp32, zeroed, summed into
        T *__restrict__ dK,                // [B, H, N, D]
        T *__restrict__ dV,                // [B, H, N, D]
        long N, long Npad, long kv_tiles, int causal, float scale_log2, float scale)
{
    using C = BwdMma<D, P>;
    constexpr int WARPS = C::WARPS, BC = C::BC, BR = C::BR, LD = C::LD, LDS = C::LDS, THREADS = C::THREADS;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    T *k_s = reinterpret_cast<T *>(smem_raw);     // [BC][LD]     K_j
    T *v_s = k_s + BC * LD;                       // [BC][LD]     V_j
    T *q_buf = v_s + BC * LD;                     // [2][BR][LD]  Q_i, in buffer i % 2
    T *do_buf = q_buf + 2 * BR * LD;              // [2][BR][LD]  dO_i
    T *ds_buf = do_buf + 2 * BR * LD;             // [DS_BUFS][BC][LDS] ds_tile^T
    float *lse_buf = reinterpret_cast<float *>(ds_buf + C::DS_BUFS * BC * LDS);   // [2][BR] L_i log2 e
    float *dl_buf = lse_buf + 2 * BR;                              // [2][BR] Delta_i

    long bh, jt;                                  // which (batch, head), which K/V tile
    if (causal) {                                 // K/V tile 0 meets every row tile: the longest first, across all heads
        const long heads = gridDim.x / kv_tiles;
        bh = blockIdx.x % heads, jt = blockIdx.x / heads;
    } else {
        bh = blockIdx.x / kv_tiles, jt = blockIdx.x % kv_tiles;
    }
    const long j0 = jt * BC;
    const T *Qh = Q + bh * N * D, *Kh = K + bh * N * D, *Vh = V + bh * N * D, *dOh = dO + bh * N * D;
    const float *lse_h = lse2 + bh * Npad, *dl_h = delta + bh * Npad;
    float *dq_h = dq_acc + bh * N * D;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const long key0 = j0 + 16 * warp + g;         // this lane's keys: key0 (accumulator rows g) and key0 + 8 (g + 8)

    /* Row tile i0 into buffer b: Q_i, dO_i (rows past N zero-filled by the
     * copy), and BR floats of L log2 e and of Delta (padded to Npad, so whole). */
    auto load_rows = [&](long i0, int b) {
        load_tile_async<D, BR, LD, THREADS>(q_buf + b * BR * LD, Qh, i0, N);
        load_tile_async<D, BR, LD, THREADS>(do_buf + b * BR * LD, dOh, i0, N);
        for (int c = threadIdx.x; c < 2 * BR / 4; c += THREADS) {
            const int which = c / (BR / 4), r = (c % (BR / 4)) * 4;
            cp_async16((which ? dl_buf : lse_buf) + b * BR + r, (which ? dl_h : lse_h) + i0 + r, 16);
        }
    };
    const long i_begin = causal ? j0 / BR * BR : 0;   // q_begin: the row tile holding row j0; those before see none of these keys
    load_tile_async<D, BC, LD, THREADS>(k_s, Kh, j0, N);   // K_j, V_j once (rows past N: zeros)
    load_tile_async<D, BC, LD, THREADS>(v_s, Vh, j0, N);
    load_rows(i_begin, 0);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    P::prologue(load_rows, i_begin, N, BR);

    /* This warp's 16 keys as A fragments (rows = keys, k = head dim): where
     * ldmatrix reads them, and at D = 64 the fragments themselves. */
    const T *k_lane = k_s + (16 * warp + (lane % 8) + 8 * ((lane / 8) % 2)) * LD + 8 * (lane / 16);
    const T *v_lane = v_s + (16 * warp + (lane % 8) + 8 * ((lane / 8) % 2)) * LD + 8 * (lane / 16);
    uint32_t kf[C::KV_REGS ? D / 16 : 1][4], vf[C::KV_REGS ? D / 16 : 1][4];
    if constexpr (C::KV_REGS) {
#pragma unroll
        for (int ks = 0; ks < D / 16; ks++) {
            ldmatrix_x4(kf[ks], k_lane + ks * 16);
            ldmatrix_x4(vf[ks], v_lane + ks * 16);
        }
    }

    float dk[D / 8][4], dv[D / 8][4];             // dK_w, dV_w: 16 keys x D per warp, fp32, for the whole walk
#pragma unroll
    for (int n = 0; n < D / 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) dk[n][e] = dv[n][e] = 0.0f;

    for (long i0 = i_begin, buf = 0; i0 < N; i0 += BR, buf ^= 1) {
        const T *q_s = q_buf + buf * BR * LD, *do_s = do_buf + buf * BR * LD;
        const float *lse_s = lse_buf + buf * BR, *dl_s = dl_buf + buf * BR;
        T *ds_s = ds_buf + P::ds_slot(buf) * BC * LDS;
        P::rows_ahead(load_rows, i0, buf, N, BR);

        /* s_tile^T = K_w Q_i^T and dp_tile^T = V_w dO_i^T, side by side: each
         * k step reads the two B fragments and feeds 2 x BR/8 mma. */
        float s[BR / 8][4], dp[BR / 8][4];
#pragma unroll
        for (int n = 0; n < BR / 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) s[n][e] = dp[n][e] = 0.0f;
#pragma unroll
        for (int ks = 0; ks < D / 16; ks++) {
            uint32_t ka[4], va[4];
            if constexpr (C::KV_REGS) {
#pragma unroll
                for (int r = 0; r < 4; r++) ka[r] = kf[ks][r], va[r] = vf[ks][r];
            } else {
                ldmatrix_x4(ka, k_lane + ks * 16);
                ldmatrix_x4(va, v_lane + ks * 16);
            }
#pragma unroll
            for (int n2 = 0; n2 < BR / 16; n2++) {            // 16 queries per ldmatrix.x4: B = Q_i^T, dO_i^T
                const int at = (n2 * 16 + (lane % 8) + 8 * (lane / 16)) * LD + ks * 16 + 8 * ((lane / 8) % 2);
                uint32_t qb[4], ob[4];
                ldmatrix_x4(qb, q_s + at);
                ldmatrix_x4(ob, do_s + at);
                mma16816<T>(s[2 * n2], ka, qb);                // s_tile^T = K_j Q_i^T (this warp's keys)
                mma16816<T>(s[2 * n2 + 1], ka, qb + 2);
                mma16816<T>(dp[2 * n2], va, ob);               // dp_tile^T = V_j dO_i^T
                mma16816<T>(dp[2 * n2 + 1], va, ob + 2);
            }
        }

        /* p^T and ds^T on the accumulators: element (n, e) is key key0 + 8 (e / 2),
         * query i0 + 8 n + 2 t + e % 2. Masks only where this warp's keys can
         * be hidden: past N (the last K/V tile) or, causal, a row tile that
         * reaches below this warp's last key. A warp-uniform branch. */
        const bool need_mask = j0 + 16 * warp + 16 > N || (causal && i0 < j0 + 16 * warp + 15);
        uint32_t pa[BR / 16][4], dsa[BR / 16][4];              // p^T, ds^T as A fragments (k = queries)
#pragma unroll
        for (int n = 0; n < BR / 8; n++) {
            const float2 lse = *reinterpret_cast<const float2 *>(lse_s + 8 * n + 2 * t);
            const float2 dl = *reinterpret_cast<const float2 *>(dl_s + 8 * n + 2 * t);
            /* key rows g, g+8: a0, a1 of the A fragment for n even, a2, a3 for n odd */
            bwd_p_ds4<T>(s[n], dp[n], lse, dl, scale_log2, need_mask, key0, i0 + 8 * n + 2 * t, N, causal,
                         &pa[n / 2][(n % 2) * 2], &dsa[n / 2][(n % 2) * 2]);
        }

        /* dV_w += p^T dO_i and dK_w += ds^T Q_i: k = the row tile's BR queries,
         * B = dO_i and Q_i read transposed (ldmatrix.trans), as V in the forward. */
#pragma unroll
        for (int ks = 0; ks < BR / 16; ks++)
#pragma unroll
            for (int n2 = 0; n2 < D / 16; n2++) {
                const int at = (ks * 16 + (lane % 8) + 8 * ((lane / 8) % 2)) * LD + n2 * 16 + 8 * (lane / 16);
                uint32_t ob[4], qb[4];
                ldmatrix_x4_trans(ob, do_s + at);
                ldmatrix_x4_trans(qb, q_s + at);
                mma16816<T>(dv[2 * n2], pa[ks], ob);              // dV_j += p_tile^T dO_i
                mma16816<T>(dv[2 * n2 + 1], pa[ks], ob + 2);
                mma16816<T>(dk[2 * n2], dsa[ks], qb);             // dK_j += ds_tile^T Q_i (/ sqrt(D) at the end)
                mma16816<T>(dk[2 * n2 + 1], dsa[ks], qb + 2);
            }

        /* ds^T to shared memory for dQ: 32-bit stores, lane (g, t) at word
         * 36 (g + 8 h) + t + ...: 32 banks, no conflict. */
        T *ds_w = ds_s + (16 * warp + g) * LDS + 2 * t;
#pragma unroll
        for (int ks = 0; ks < BR / 16; ks++) {
            *reinterpret_cast<uint32_t *>(ds_w + 16 * ks) = dsa[ks][0];
            *reinterpret_cast<uint32_t *>(ds_w + 8 * LDS + 16 * ks) = dsa[ks][1];
            *reinterpret_cast<uint32_t *>(ds_w + 16 * ks + 8) = dsa[ks][2];
            *reinterpret_cast<uint32_t *>(ds_w + 8 * LDS + 16 * ks + 8) = dsa[ks][3];
        }
        P::ds_ready(load_rows, i0, buf, N, BR);

        /* dQ_i += ds_tile K_j over this block's BC keys, [BR x D] split over the
         * warps: 16 queries (qr0) x DC columns (dc0) each. A = ds (16 queries x
         * 16 keys) by ldmatrix.trans of ds^T; B = K_j (k = keys) transposed. */
        constexpr int CW = WARPS / 4, DC = D / CW;               // warps per 16 query rows, head-dim columns per warp
        const int qr0 = 16 * (warp % 4), dc0 = (warp / 4) * DC;
        float dq[DC / 8][4];
#pragma unroll
        for (int n = 0; n < DC / 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) dq[n][e] = 0.0f;
#pragma unroll
        for (int ks = 0; ks < BC / 16; ks++) {
            uint32_t a[4];
            ldmatrix_x4_trans(a, ds_s + (ks * 16 + (lane % 8) + 8 * (lane / 16)) * LDS + qr0 + 8 * ((lane / 8) % 2));
#pragma unroll
            for (int n2 = 0; n2 < DC / 16; n2++) {
                uint32_t kb[4];
                ldmatrix_x4_trans(kb, k_s + (ks * 16 + (lane % 8) + 8 * ((lane / 8) % 2)) * LD + dc0 + n2 * 16 + 8 * (lane / 16));
                mma16816<T>(dq[2 * n2], a, kb);                   // (ds_tile K_j)_i: this block's share of dQ_i
                mma16816<T>(dq[2 * n2 + 1], a, kb + 2);
            }
        }
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const long row = i0 + qr0 + g + 8 * h;
            if (row < N) {
#pragma unroll
                for (int n = 0; n < DC / 8; n++)                 // dQ_i += ..., with the other K/V blocks
                    red_add2(dq_h + row * D + dc0 + 8 * n + 2 * t, dq[n][2 * h], dq[n][2 * h + 1]);
            }
        }
        P::row_end();
    }

    T *dKh = dK + bh * N * D, *dVh = dV + bh * N * D;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const long key = key0 + 8 * h;
        if (key < N) {
#pragma unroll
            for (int n = 0; n < D / 8; n++) {                    // dK_j, dV_j written once
                *reinterpret_cast<uint32_t *>(dKh + key * D + 8 * n + 2 * t) = pack2<T>(dk[n][2 * h] * scale, dk[n][2 * h + 1] * scale);
                *reinterpret_cast<uint32_t *>(dVh + key * D + 8 * n + 2 * t) = pack2<T>(dv[n][2 * h], dv[n][2 * h + 1]);
            }
        }
    }
}

// --- the launcher -------------------------------------------------------------------

static inline long bwd_mma_npad(long N) { return (N + 63) / 64 * 64; }

/* Delta and L log2 e ([B, H, Npad] floats each) and the dQ accumulator ([B, H, N, D] floats). */
static inline size_t bwd_mma_workspace(long B, long H, long N, long D, int dtype)
{
    (void)dtype;
    return ((size_t)2 * B * H * bwd_mma_npad(N) + (size_t)B * H * N * D) * sizeof(float);
}

template <int D, typename T, class P>
static int mma_launch_dt(int id, const void *q, const void *k, const void *v, const void *o, const void *dout,
                         const float *L, void *dq, void *dk, void *dv, void *ws, long B, long H, long N, int dtype,
                         int causal, cudaStream_t s)
{
    using C = BwdMma<D, P>;
    if (smem_opt_in(bwd_mma<D, T, P>, C::bytes, "backward kernel", id, D)) return -1;
    const long Npad = bwd_mma_npad(N), BH = B * H;
    float *delta = (float *)ws, *lse2 = delta + BH * Npad, *dq_acc = lse2 + BH * Npad;
    if (bwd_preprocess(o, dout, L, delta, lse2, dq_acc, N, BH, N, Npad, D, dtype, s) != 0) return -1;
    const long kv_tiles = (N + C::BC - 1) / C::BC;
    const float scale = 1.0f / sqrtf((float)D), scale_log2 = LOG2E * scale;   // log2(e) / sqrt(D), as LOG2E * (1 / sqrt(D))
    bwd_mma<D, T, P><<<(unsigned)(BH * kv_tiles), C::THREADS, C::bytes, s>>>(
        (const T *)q, (const T *)k, (const T *)v, (const T *)dout, lse2, delta, dq_acc, (T *)dk, (T *)dv, N, Npad, kv_tiles,
        causal, scale_log2, scale);
    CUDA_CHECK_LAST();
    return bwd_convert_dq(dq_acc, dq, (size_t)BH * N * D, scale, dtype, s);   // dQ = dQ_acc / sqrt(D)
}

/* Kernels 2-4's launch: the policy's instance for the dtype and D asked. */
template <class P>
static int mma_launch(int id, const void *q, const void *k, const void *v, const void *o, const void *dout,
                      const float *L, void *dq, void *dk, void *dv, void *ws, long B, long H, long N, long D, int dtype,
                      int causal, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (dtype == DT_FP16 && D == 64)
        return mma_launch_dt<64, __half, P>(id, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, dtype, causal, s);
    if (dtype == DT_FP16 && D == 128)
        return mma_launch_dt<128, __half, P>(id, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, dtype, causal, s);
    if (dtype == DT_BF16 && D == 64)
        return mma_launch_dt<64, __nv_bfloat16, P>(id, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, dtype, causal, s);
    if (dtype == DT_BF16 && D == 128)
        return mma_launch_dt<128, __nv_bfloat16, P>(id, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, dtype, causal, s);
    fprintf(stderr, "%s: backward kernel %d takes fp16/bf16 and D = 64 or 128, not %s D=%ld\n", g_prog, id, dtype_name(dtype), D);
    return -1;
}

template <class P> static void mma_describe(long D, char *buf, size_t n, const char *what)
{
    const size_t bytes = D == 64 ? BwdMma<64, P>::bytes : BwdMma<128, P>::bytes;
    snprintf(buf, n, "%s: %d warps x 16 keys (BC=%d), row tiles of BR=64, %s per row tile, dK/dV in registers, "
             "dQ by fp32 atomics, %zu bytes of shared memory", what, P::WARPS, 16 * P::WARPS, P::BARRIERS, bytes);
}

static inline int bwd_mma_supports(long D) { return D == 64 || D == 128; }

#if RUNG == 2
static int b2_launch(const void *q, const void *k, const void *v, const void *o, const void *dout, const float *L,
                     void *dq, void *dk, void *dv, void *ws, long B, long H, long N, long D, int dtype, int causal,
                     void *stream)
{
    return mma_launch<B2Policy>(2, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, D, dtype, causal, stream);
}

static void b2_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    mma_describe<B2Policy>(D, buf, n, "mma.sync, key-major");
}

static const BackwardKernel bwd2 = {
    .id = 2, .extends = 1, .name = "mma.sync",
    .idea = "the five products on mma.sync, key-major: p and ds stay in registers",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = bwd_mma_supports, .workspace = bwd_mma_workspace,
    .launch = b2_launch, .describe = b2_describe,
};
BWD_REGISTER(bwd2);
#endif
