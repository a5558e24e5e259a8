/*
 * bwd_mma.cuh: the tensor-core backward of backward kernels 2, 3 and 4
 * (FlashAttention-2's scheme on mma.sync), written once; the files set its
 * two parameters (the number of warps; one barrier per row tile or two) and
 * say what each changes.
 *
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
 * Barriers (ONE_SYNC = false, kernels 2 and 3): two per row tile, one between
 * writing ds^T and reading it, one at the end (the next tile's buffers are in,
 * nobody reads ds^T any more). ONE_SYNC = true (kernel 4): ds^T has two
 * buffers too, and the one barrier between writing ds^T and reading it also
 * says that the next row tile has landed and that this one's Q_i, dO_i are
 * read by nobody (dQ needs only ds^T and K_j), so the copy of the row tile
 * after next goes into this one's buffer right after it.
 */
#ifndef BWD_MMA_CUH
#define BWD_MMA_CUH

#include <cmath>

#include "bwd.cuh"
#include "gpu.cuh"
#include "../kernels.h"
#include "../primitives/tc.cuh"

// --- the kernel ------------------------------------------------------------------

template <int D, int WARPS, bool ONE_SYNC = false> struct BwdMma {
    static constexpr int BC = 16 * WARPS;  /* keys per block: 16 per warp */
    static constexpr int BR = 64;          /* queries per row tile */
    static constexpr int THREADS = 32 * WARPS;
    static constexpr int LD = D + 8;       /* row pitch of K, V, Q, dO tiles: 16-byte pad, conflict-free ldmatrix */
    static constexpr int LDS = BR + 8;     /* row pitch of ds^T [BC][BR] */
    /* K_w and V_w A fragments in registers at D = 64 (32 registers); at D = 128
     * they would take 64, with dK_w and dV_w's 128: read from shared memory. */
    static constexpr bool KV_REGS = D == 64;
    static constexpr int DS_BUFS = ONE_SYNC ? 2 : 1;
    static constexpr size_t bytes =
        ((size_t)2 * BC * LD + (size_t)4 * BR * LD + (size_t)DS_BUFS * BC * LDS) * 2 + 4 * BR * sizeof(float);
};

template <int D, typename T, int WARPS, bool ONE_SYNC>
__global__ void __launch_bounds__(32 * WARPS)
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
    using C = BwdMma<D, WARPS, ONE_SYNC>;
    constexpr int BC = C::BC, BR = C::BR, LD = C::LD, LDS = C::LDS, THREADS = C::THREADS;
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
    if constexpr (ONE_SYNC) {                     // the second row tile, now: the loop issues the one after next
        if (i_begin + BR < N) load_rows(i_begin + BR, 1);
        cp_async_commit();
    }

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
        T *ds_s = ds_buf + (ONE_SYNC ? buf : 0) * BC * LDS;
        if constexpr (!ONE_SYNC) {
            if (i0 + BR < N) load_rows(i0 + BR, (int)(buf ^ 1));   // the next row tile, into the other buffer
            cp_async_commit();
        }

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
        if constexpr (ONE_SYNC) {
            cp_async_wait<0>();                   // the next row tile has landed (this thread's copies) ...
            __syncthreads();                      // ... everyone's; ds_tile^T complete; Q_i, dO_i, L_i, Delta_i read by all
            if (i0 + 2 * BR < N) load_rows(i0 + 2 * BR, (int)buf);   // the row tile after next, into this one's buffer
            cp_async_commit();
        } else {
            __syncthreads();                      // ds_tile^T complete: all BC keys
        }

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
        if constexpr (!ONE_SYNC) {
            cp_async_wait<0>();                   // the next row tile has landed ...
            __syncthreads();                      // ... for every thread, and nobody reads ds^T or this buffer any more
        }
        /* ONE_SYNC: no barrier here. A warp may start the next row tile while
         * others still read this ds^T: it writes the other ds^T buffer, and it
         * cannot come back to this one before everyone has passed the next
         * barrier, after their dQ of this tile. */
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

template <int D, typename T, int WARPS, bool ONE_SYNC>
static int bwd_mma_launch_dt(int id, const void *q, const void *k, const void *v, const void *o, const void *dout,
                             const float *L, void *dq, void *dk, void *dv, void *ws, long B, long H, long N, int dtype,
                             int causal, cudaStream_t s)
{
    using C = BwdMma<D, WARPS, ONE_SYNC>;
    if (smem_opt_in(bwd_mma<D, T, WARPS, ONE_SYNC>, C::bytes, "backward kernel", id, D)) return -1;
    const long Npad = bwd_mma_npad(N), BH = B * H;
    float *delta = (float *)ws, *lse2 = delta + BH * Npad, *dq_acc = lse2 + BH * Npad;
    if (bwd_preprocess(o, dout, L, delta, lse2, dq_acc, N, BH, N, Npad, D, dtype, s) != 0) return -1;
    const long kv_tiles = (N + C::BC - 1) / C::BC;
    const float scale = 1.0f / sqrtf((float)D), scale_log2 = 1.4426950408889634f * scale;
    bwd_mma<D, T, WARPS, ONE_SYNC><<<(unsigned)(BH * kv_tiles), C::THREADS, C::bytes, s>>>(
        (const T *)q, (const T *)k, (const T *)v, (const T *)dout, lse2, delta, dq_acc, (T *)dk, (T *)dv, N, Npad, kv_tiles,
        causal, scale_log2, scale);
    CUDA_CHECK_LAST();
    return bwd_convert_dq(dq_acc, dq, (size_t)BH * N * D, scale, dtype, s);   // dQ = dQ_acc / sqrt(D)
}

template <int WARPS, bool ONE_SYNC = false>
static int bwd_mma_launch(int id, const void *q, const void *k, const void *v, const void *o, const void *dout,
                          const float *L, void *dq, void *dk, void *dv, void *ws, long B, long H, long N, long D,
                          int dtype, int causal, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (dtype == DT_FP16 && D == 64)
        return bwd_mma_launch_dt<64, __half, WARPS, ONE_SYNC>(id, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, dtype, causal, s);
    if (dtype == DT_FP16 && D == 128)
        return bwd_mma_launch_dt<128, __half, WARPS, ONE_SYNC>(id, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, dtype, causal, s);
    if (dtype == DT_BF16 && D == 64)
        return bwd_mma_launch_dt<64, __nv_bfloat16, WARPS, ONE_SYNC>(id, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, dtype, causal, s);
    if (dtype == DT_BF16 && D == 128)
        return bwd_mma_launch_dt<128, __nv_bfloat16, WARPS, ONE_SYNC>(id, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, dtype, causal, s);
    fprintf(stderr, "%s: backward kernel %d takes fp16/bf16 and D = 64 or 128, not %s D=%ld\n", g_prog, id, dtype_name(dtype), D);
    return -1;
}

template <int WARPS, bool ONE_SYNC = false>
static void bwd_mma_describe(long D, char *buf, size_t n, const char *what)
{
    const size_t bytes = D == 64 ? BwdMma<64, WARPS, ONE_SYNC>::bytes : BwdMma<128, WARPS, ONE_SYNC>::bytes;
    snprintf(buf, n, "%s: %d warps x 16 keys (BC=%d), row tiles of BR=64, %s per row tile, dK/dV in registers, "
             "dQ by fp32 atomics, %zu bytes of shared memory", what, WARPS, 16 * WARPS, ONE_SYNC ? "1 barrier" : "2 barriers",
             bytes);
}

static int bwd_mma_supports(long D) { return D == 64 || D == 128; }

#endif
