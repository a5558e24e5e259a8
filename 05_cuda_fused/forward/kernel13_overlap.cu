/*
 * Kernel 13: kernel 12 with the softmax of tile j run under the product of tile j-1.
 *
 * Extends kernel 12 (kernel12_warp_specialized.cu). The idea: software-pipeline the consumer's loop so that the
 * tensor cores and the exponentials work at the same time. In kernel 12 a consumer warpgroup does, per K/V tile,
 * S_j = Q_i K_j^T, wait, softmax, O += P_j V_j, wait: while the softmax runs (max, exp2, sums, the rescale: FP32 and
 * MUFU work, no tensor core) its tensor cores idle, and while the products run its FP32 units do. wgmma is
 * asynchronous, so reorder the loop by half a tile (FlashAttention-3's intra-warpgroup overlap):
 *     issue S_j = Q_i K_j^T;  issue O += P_{j-1} V_{j-1};
 *     wait for S_j only (wgmma.wait_group 1): the P V product is still running;
 *     softmax of S_j: m_j, alpha_j, p_j (kept in S_j's registers as floats);
 *     wait for P V; O *= alpha_j; pack p_j into the A fragments of the next P V.
 * The algebra is the chapter's, unchanged: O still holds sum_{k<j} e^(m_k - m_j) P_k V_k when alpha_j rescales it,
 * because P_{j-1} V_{j-1} has landed by then (the second wait comes before the rescale). The first tile has no P V
 * before it and the last P V no S after it: a prologue and an epilogue (OverlapBody::tile_loop, Overlap::items).
 *
 * Why: the softmax is the part of a tile the tensor cores cannot do; run after the products, its time adds to
 * theirs.
 *
 * What it costs: registers, P_{j-1} (as A fragments, BC/16 x 4) must live while S_j does, so a thread holds S_j,
 * P_{j-1}, O and Q_i at once: 192 values at D = 128 of the 240 setmaxnreg gives. K_j's stage is now done before
 * V_j's (K_j is read in iteration j, V_j in j+1), so the ring gets a release barrier each: empty_k[s] after S_j,
 * empty_v[s] after P_j V_j, and the producer waits on each before refilling K or V of that stage. The three
 * consumer warpgroups kernel 12 runs at D = 64 get 160 registers each, too few for this (ptxas spills 104 bytes and
 * serialises the wgmma, C7512): kernel 13 runs two at both D, BR = 128. Built only for sm_90a, like kernels 10-12.
 *
 * This file is also the body of kernels 14, 18-23, 26, 36, 39 and 52: OverlapBody below is the kernel, written once,
 * with named hooks where a later rung changes it. A hook is a static member of a policy struct; Overlap (below) holds kernel
 * 13's code for each, and each later rung's file includes the file of the rung it extends and derives its policy
 * from that rung's, overriding the hooks its idea changes (14: the turns; 18: the scheduler; 19: the store of O;
 * 20: the loop over items; 21: the last P V; 22: the descriptors; 23: the mask; 26: the head groups; 36: O at an
 * item's start; 39: the store of O again, by the copy engine).
 *
 * Measured: H100, fp16, N = 4096: +14% over kernel 12 at D = 128 (causal +8%), -6% at D = 64 (causal -10%); the
 * runs and the guess at D = 64: RESULTS.md#kernel-13.
 */
#ifndef RUNG
#define RUNG 13 // this file is the one compiled: its launcher and registry entry (the end) are built
#endif

#include <cmath>

#include "gpu.cuh"
#include "../kernels.h"
#include "launch_tc.cuh"
#include "../primitives/tc.cuh"
#include "../primitives/tile_order.cuh"
#include "../primitives/tma_map.cuh"
#include "../primitives/wgmma.cuh"

// --- the idea --------------------------------------------------------------------------------------------------

/* The tile configuration of kernels 13-23, per head dim. */
template <int D> struct K13 {
    static constexpr int NWG = 2;                         // consumer warpgroups, 64 rows each (D = 64 too: the header says why)
    static constexpr int BR = 64 * NWG, BC = 128, STAGES = 2;
    static constexpr int THREADS = 128 * (NWG + 1);       // + the producer warpgroup
    static constexpr int REG_PRODUCER = 24, REG_CONSUMER = 240;  // 128 x 24 + 256 x 240 = 384 x 168
    static constexpr int TILE = BC * D * 2;               // one K or V tile, bytes
    static constexpr int QTILE = BR * D * 2;              // kernel 18's Q tile in shared memory, bytes
    static constexpr size_t bytes = 2 * STAGES * (size_t)TILE + 4 * 8 * STAGES + 1024; /* K, V; mbarriers; alignment */
    /* kernel 18: + Q; the mbarriers full_q, empty_q, full_t[2], empty_t[2]; two tickets */
    static constexpr size_t bytes_persist = bytes + QTILE + 6 * 8 + 2 * 4;
    /* setmaxnreg moves registers inside the block's own allocation, fixed at launch: THREADS x (65536 / THREADS,
     * rounded down to 8): 384 x 168 = 64512 at both D */
    static_assert(128 * REG_PRODUCER + 128 * NWG * REG_CONSUMER <= THREADS * ((65536 / THREADS) & ~7), "more than the block holds");
};

extern __shared__ unsigned char smem_raw[];

/* The kernel, for any rung's policy P: kernel 12's producer and consumer warpgroups, the consumers' loop reordered
 * (tile_loop). Its hooks are P's static members; Overlap, below, holds kernel 13's code for each:
 *     Sched, q_bytes, setup, init_barriers,    the scheduler, its state and barriers, the producer's loop, Q's way in
 *       produce, load_q                        (kernel 18)
 *     items                                    the loop over a consumer warp's items (kernels 18 and 20)
 *     turn_wait, turn_pass                     the turns at the tensor cores (kernel 14)
 *     quad_store, lane_store                   the store of O (kernels 19 and 39)
 *     last_pv                                  an item's last P V (kernel 21)
 *     step_desc                                a k step's wgmma descriptor (kernel 22)
 *     mask_max                                 a masked tile's scores and row maxima (kernel 23)
 *     clear_o, pv_adds, rescale_o              O at an item's start (kernel 36)
 *     launch, describe                         the launch (kernel 18) and the describe line (each rung adds its words)
 *     smem_bytes, o_box_rows, o_written        kernel 18's launch: its shared memory; O's tensor map and O marked
 *                                              as written for initcheck (kernel 39) */
template <int D, typename T, class P> struct OverlapBody {
    using C = K13<D>;
    static constexpr int BC = C::BC, TILE = C::TILE, STAGES = C::STAGES;

    const T *__restrict__ Q;                      // [B, H, N, D]
    T *__restrict__ O;                            // [B, H, N, D]
    float *__restrict__ L;                        // [B, H, N] or NULL: L = m + log l per row, for the backward
    const long N, row_tiles;
    const int causal;
    const float scale_log2;
    const CUtensorMap &tm_k, &tm_v;               // K, V as [B*H][N][D] for the copy engine
    typename P::Sched sched;                      // the scheduler's own (kernel 18: the ticket counter's)

    /* shared memory: [K stage 0 .. STAGES-1][V stage 0 .. STAGES-1], TILE bytes each, (kernel 18: then Q; kernel 39:
     * then the consumer warps' tiles of O,) then the mbarriers full_k, full_v, empty_k, empty_v [STAGES], 8 bytes each */
    uint32_t raw_addr, smem_addr, q_addr, full_k, full_v, empty_k, empty_v;
    long bh = 0, tile = 0, ntiles = 0;            // the item: its head, its row tile, the K/V tiles it visits

    /* a consumer warp: kernel 12's work on its 16 rows */
    int warp, lane, g, t, wg;
    long jb;                                      // the K/V tiles of this block's items before this one (kernel 18)
    long warp_row0, row_g, row_g8;                // the item's rows: this warp's first, this lane's two
    /* its registers, each array a variable of its own (run_overlap, below, says why) */
    uint32_t (&qf)[D / 16][4];                    // Q_i's A fragments, rows past N as zeros
    float (&o)[D / 2];
    float (&m)[2], (&l)[2];                       // rows g and g + 8, log2 units
    float (&s)[BC / 2];                           // S_j, then p_j as floats
    uint32_t (&pf)[BC / 16][4];                   // p_{j-1} as A fragments of O += P V

    __device__ __forceinline__ OverlapBody(const T *__restrict__ Q_, T *__restrict__ O_, float *__restrict__ L_, long N_,
                                           long row_tiles_, int causal_, float scale_log2_, const CUtensorMap &tm_k_,
                                           const CUtensorMap &tm_v_, typename P::Sched sched_, uint32_t (&qf_)[D / 16][4],
                                           float (&o_)[D / 2], float (&m_)[2], float (&l_)[2], float (&s_)[BC / 2], uint32_t (&pf_)[BC / 16][4])
        : Q(Q_), O(O_), L(L_), N(N_), row_tiles(row_tiles_), causal(causal_), scale_log2(scale_log2_), tm_k(tm_k_),
          tm_v(tm_v_), sched(sched_), qf(qf_), o(o_), m(m_), l(l_), s(s_), pf(pf_)
    {
    }

    __device__ long kv_tiles(long rt) const   // the K/V tiles row tile rt visits
    {
        const long last_row = (rt * C::BR + C::BR < N ? rt * C::BR + C::BR : N) - 1;
        const long jend = causal ? last_row + 1 : N;
        return (jend + BC - 1) / BC;
    }

    __device__ __forceinline__ void run()
    {
        raw_addr = (uint32_t)__cvta_generic_to_shared(smem_raw);  // 1024-aligned for the swizzle
        smem_addr = (raw_addr + 1023) & ~1023u;
        q_addr = smem_addr + 2 * STAGES * TILE;
        full_k = q_addr + P::q_bytes, full_v = full_k + 8 * STAGES;
        empty_k = full_v + 8 * STAGES, empty_v = empty_k + 8 * STAGES;
        P::setup(*this);

        if (threadIdx.x == 0) {
            for (int s = 0; s < STAGES; s++) {
                mbar_init(full_k + 8 * s, 1);
                mbar_init(full_v + 8 * s, 1);
                mbar_init(empty_k + 8 * s, 4 * C::NWG);  // one arrival per consumer warp
                mbar_init(empty_v + 8 * s, 4 * C::NWG);
            }
            P::init_barriers(*this);
            fence_mbar_init();
        }
        __syncthreads();                          // the last block-wide barrier of the kernel

        if (threadIdx.x < 128) {
            /* The producer warpgroup: registers back to the pool, then one thread walks the K/V tiles. */
            setmaxnreg_dec<C::REG_PRODUCER>();
            if (threadIdx.x == 0) P::produce(*this);
            return;
        }
        setmaxnreg_inc<C::REG_CONSUMER>();

        warp = threadIdx.x / 32 - 4, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
        wg = warp / 4;                            // consumer warpgroup wg, its warp warp % 4
        if (wg == 1) your_turn();                 // warpgroup 0 goes first (kernel 14)
        jb = 0;
        warp_row0 = 0, row_g = 0, row_g8 = 0;
        P::items(*this);
    }

    /* The producer: K_j goes to stage j % STAGES once every consumer warp has released K_{j-STAGES} (after its S),
     * V_j once they have released V_{j-STAGES} (after its P V, an iteration later). jb0: the tiles loaded before
     * these (kernel 18 counts on across its items, so the ring runs on unbroken: the next item's first K/V tiles
     * load while this item's last are in use). */
    __device__ void load_kv(long head, long tiles, long jb0)
    {
        for (long j = 0; j < tiles; j++) {
            const int s = (int)((jb0 + j) % STAGES), use = (int)(((jb0 + j) / STAGES) & 1);
            const uint32_t k_dst = smem_addr + s * TILE, v_dst = smem_addr + (STAGES + s) * TILE;
            mbar_wait(empty_k + 8 * s, use ^ 1);  // first use of a stage: passes at once
            mbar_expect_tx(full_k + 8 * s, TILE);
#pragma unroll
            for (int blk = 0; blk < D / 64; blk++)
                tma_load_3d(k_dst + blk * BC * 128, &tm_k, blk * 64, (int)(j * BC), (int)head, full_k + 8 * s);
            mbar_wait(empty_v + 8 * s, use ^ 1);
            mbar_expect_tx(full_v + 8 * s, TILE);
#pragma unroll
            for (int blk = 0; blk < D / 64; blk++)
                tma_load_3d(v_dst + blk * BC * 128, &tm_v, blk * 64, (int)(j * BC), (int)head, full_v + 8 * s);
        }
    }

    __device__ void release(uint32_t bar)   // this warp is done with a K or V stage (kernel 18: Q)
    {
        __syncwarp();
        if (lane == 0) mbar_arrive(bar);
    }
    __device__ void my_turn() { P::turn_wait(wg); }
    __device__ void your_turn() { P::turn_pass(wg); }

    /* An item's start: its rows (row tile rt), Q_i's fragments (kernel 18: item it's Q tile from shared memory) */
    __device__ void start_item(long it, long rt)
    {
        warp_row0 = rt * C::BR + warp * 16;
        row_g = warp_row0 + g, row_g8 = row_g + 8;
        P::load_q(*this, it);
    }
    __device__ void clear()       // O, m and l before an item's first tile
    {
        P::clear_o(*this);
        m[0] = m[1] = -INFINITY;
        l[0] = l[1] = 0.0f;
    }

    /* The three pieces of a tile's work, in the order kernel 12 does them; tile_loop interleaves them across tiles. */
    __device__ uint32_t stage(long j, uint32_t base) const { return base + 8 * (uint32_t)((jb + j) % STAGES); }
    __device__ int parity(long j) const { return (int)(((jb + j) / STAGES) & 1); }
    __device__ void issue_s(long j)   // S_j = Q_i K_j^T, issued, not waited for
    {
        const uint32_t k_addr = smem_addr + (uint32_t)((jb + j) % STAGES) * TILE;
        const uint64_t k_desc = make_desc(k_addr, 16, 1024);
        mbar_wait(stage(j, full_k), parity(j));   // K_j has landed
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < D / 16; ks++) {
            const uint32_t at = (ks / 4) * BC * 128 + (ks % 4) * 32;  // k step ks's first byte in the tile
            wgmma_m64n128k16<T, 0>(s, qf[ks], P::step_desc(k_addr, k_desc, at, 16), ks > 0);
        }
        wgmma_commit();
    }
    __device__ void issue_pv(long j, int k_steps = BC / 16)  // O += P_j V_j, issued, not waited for
    {
        const uint32_t v_addr = smem_addr + (uint32_t)(STAGES + (jb + j) % STAGES) * TILE;
        const uint64_t v_desc = make_desc(v_addr, BC * 128, 1024);
        mbar_wait(stage(j, full_v), parity(j));   // V_j has landed
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < k_steps; ks++) {
            const uint64_t desc = P::step_desc(v_addr, v_desc, ks * 2048, BC * 128);
            const int add = ks > 0 || P::pv_adds(j);  // the first k step of tile j: O + P V, or P V alone
            if constexpr (D == 64) wgmma_m64n64k16<T, 1>(o, pf[ks], desc, add);
            else wgmma_m64n128k16<T, 1>(o, pf[ks], desc, add);
        }
        wgmma_commit();
    }
    __device__ void issue_last_pv(long j) { P::last_pv(*this, j); }  // the item's last P V (a hook: kernel 21)
    /* Kernel 9's softmax of S_j on this warp's 16 rows: m, l updated, p_j left in s as floats, alpha_j returned for O
     * (not touched here: a P V may still be accumulating into it). */
    __device__ void softmax(long j, float alpha[2])
    {
        const long j0 = j * BC;
        const bool need_mask = j0 + BC > N || (causal && j0 + BC - 1 > warp_row0);
        const int lim = (int)(N - j0 < BC ? N - j0 : BC);
        float mt[2] = {-INFINITY, -INFINITY};
        if (need_mask) {
            P::mask_max(*this, j0, lim, mt);
        } else {
#pragma unroll
            for (int n = 0; n < BC / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) mt[e / 2] = fmaxf(mt[e / 2], s[4 * n + e]);
        }
        float bse[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
#pragma unroll
            for (int off = 1; off <= 2; off *= 2) mt[h] = fmaxf(mt[h], __shfl_xor_sync(0xffffffffu, mt[h], off));
            const float mn = fmaxf(m[h], mt[h] * scale_log2);   // m_new = max(m, m_tile), log2 units
            bse[h] = mn == -INFINITY ? 0.0f : mn;                // nothing visible yet: 2^(-inf - 0) = 0
            alpha[h] = ex2(m[h] - bse[h]);                       // alpha = e^(m - m_new)
            m[h] = mn;
        }
        float ls[2] = {0.0f, 0.0f};
#pragma unroll
        for (int n = 0; n < BC / 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                s[4 * n + e] = ex2(fmaf(s[4 * n + e], scale_log2, -bse[e / 2]));
                ls[e / 2] += s[4 * n + e];
            }
#pragma unroll
        for (int h = 0; h < 2; h++) l[h] = alpha[h] * l[h] + ls[h];
    }
    __device__ void rescale_and_pack(const float alpha[2], long j)  // O *= alpha_j (tile j of the item); p_j into pf
    {
        P::rescale_o(*this, alpha, j);
#pragma unroll
        for (int n = 0; n < BC / 8; n++) {
            pf[n / 2][(n % 2) * 2 + 0] = pack2<T>(s[4 * n + 0], s[4 * n + 1]);
            pf[n / 2][(n % 2) * 2 + 1] = pack2<T>(s[4 * n + 2], s[4 * n + 3]);
        }
    }

    /* Kernel 13's idea, an item's tiles from the moment S_0 has landed: the softmax of tile j under P_{j-1} V_{j-1}.
     * Leaves the last P V to issue. */
    __device__ __forceinline__ void tile_loop(float alpha[2])
    {
        release(stage(0, empty_k));
        softmax(0, alpha);
        rescale_and_pack(alpha, 0);
        for (long j = 1; j < ntiles; j++) {
            my_turn();
            issue_s(j);                           // S_j ...
            issue_pv(j - 1);                      // ... and O += P_{j-1} V_{j-1} behind it
            your_turn();                          // ping-pong: the other warpgroup's products start under this softmax
            wgmma_wait<1>();                      // S_j is in; P V still running
            release(stage(j, empty_k));
            softmax(j, alpha);                    // under P_{j-1} V_{j-1}
            wgmma_wait<0>();
            release(stage(j - 1, empty_v));
            rescale_and_pack(alpha, j);
        }
    }

    /* The item's end: V's last stage released, O = o / l and L stored; orow_g: this lane's first row of the item
     * (kernel 20 has moved row_g on to the next item by then). */
    __device__ void store_o(long orow_g)
    {
        release(stage(ntiles - 1, empty_v));
        T *Oh = O + bh * N * D;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            float lr = l[h];
#pragma unroll
            for (int off = 1; off <= 2; off *= 2) lr += __shfl_xor_sync(0xffffffffu, lr, off);
            const float inv = lr > 0.0f ? 1.0f / lr : 0.0f;
            const long row = orow_g + 8 * h;
            P::quad_store(*this, h, inv, Oh, row);
            if (row < N) {
                P::lane_store(*this, h, inv, Oh, row);
                if (L != nullptr && t == 0)   // the quad's four lanes hold the same m and l
                    L[bh * N + row] = lr > 0.0f ? m[h] * 0.69314718055994531f + logf(lr) : -INFINITY; // L = m + log l
            }
        }
    }
};

/* Kernel 13's policy: its code for each hook of the body. B is the body (OverlapBody<D, T, P> with P the rung's
 * policy): a hook reads and calls the body's members through it, and calls another hook through the body (b.my_turn(),
 * b.issue_last_pv()), so that a later rung's override is the one that runs. */
template <int D, typename T> struct Overlap {
    using C = K13<D>;

    /* The scheduler: which items (a head bh and a row tile) a block runs. Kernel 13: one, its own, from blockIdx.x in
     * tile_order.cuh's order (causal: longest first); no state of its own, no bytes of shared memory before the
     * barriers. Kernel 18 hands items out from a counter. */
    struct Sched {};
    static constexpr uint32_t q_bytes = 0;
    template <class B> static __device__ __forceinline__ void setup(B &b)
    {
        block_tile(b.row_tiles, b.causal, &b.bh, &b.tile);
        b.ntiles = b.kv_tiles(b.tile);
    }
    template <class B> static __device__ __forceinline__ void init_barriers(B &) {}
    /* The producer thread: the item's K/V tiles into the ring. */
    template <class B> static __device__ __forceinline__ void produce(B &b) { b.load_kv(b.bh, b.ntiles, 0); }
    /* Q_i's A fragments from global memory, rows past N as zeros. */
    template <class B> static __device__ __forceinline__ void load_q(B &b, long it)
    {
        (void)it;
        const T *Qh = b.Q + b.bh * b.N * D;
#pragma unroll
        for (int ks = 0; ks < D / 16; ks++)
#pragma unroll
            for (int r = 0; r < 4; r++) {
                const long row = (r % 2) ? b.row_g8 : b.row_g;
                const int col = ks * 16 + 2 * b.t + 8 * (r / 2);
                b.qf[ks][r] = row < b.N ? *reinterpret_cast<const uint32_t *>(Qh + row * D + col) : 0u;
            }
    }

    /* The loop over a consumer warp's items: kernel 13's one item, S_0 issued alone (the prologue: tile 0 has no
     * P V before it), the tiles, the last P V alone (the epilogue), O stored. */
    template <class B> static __device__ __forceinline__ void items(B &b)
    {
        float alpha[2];
        for (long it = 0; it < 1; it++) {    // one item, the block's own (kernel 18: one per ticket, until none is left)
            b.start_item(it, b.tile);
            b.clear();
            b.my_turn();
            b.issue_s(0);                     // prologue: tile 0 has no P V before it
            b.your_turn();
            wgmma_wait<0>();
            b.tile_loop(alpha);
            b.my_turn();
            b.issue_pv(b.ntiles - 1);         // epilogue: the last P V
            if (b.wg == 0) b.your_turn();     // kernel 14: warpgroup 1's last turn needs no hand-over, none follows
            wgmma_wait<0>();
            b.store_o(b.row_g);
            b.jb += b.ntiles;
        }
    }

    /* The turns at the tensor cores (kernel 14): here none, every warpgroup issues when it is ready. */
    static __device__ __forceinline__ void turn_wait(int) {}
    static __device__ __forceinline__ void turn_pass(int) {}

    /* O before an item's first tile: zeros, which its first P V adds to (kernel 36: left as the last item left it). */
    template <class B> static __device__ __forceinline__ void clear_o(B &b)
    {
#pragma unroll
        for (int n = 0; n < D / 2; n++) b.o[n] = 0.0f;
    }
    /* Whether tile j's P V adds to O: always (kernel 36: not the item's first, j = 0, which writes O). */
    static __device__ __forceinline__ bool pv_adds(long j) { return (void)j, true; }
    /* O *= alpha_j after tile j's P V has landed (tile 0: zeros times alpha; kernel 36: not on tile 0, O holds nothing
     * of this item yet). */
    template <class B> static __device__ __forceinline__ void rescale_o(B &b, const float alpha[2], long j)
    {
        (void)j;
#pragma unroll
        for (int n = 0; n < D / 8; n++) {
            b.o[4 * n + 0] *= alpha[0]; b.o[4 * n + 1] *= alpha[0];
            b.o[4 * n + 2] *= alpha[1]; b.o[4 * n + 3] *= alpha[1];
        }
    }

    /* A row tile's last P V: the whole tile (kernel 21: half of it on the causal diagonal). */
    template <class B> static __device__ __forceinline__ void last_pv(B &b, long j) { b.issue_pv(j); }

    /* The descriptor of a K or V tile's k step `at` bytes into the tile (at tile_addr, whose descriptor is
     * tile_desc): built afresh, masked, shifted and ored (kernel 22: tile_desc plus the offset). */
    static __device__ __forceinline__ uint64_t step_desc(uint32_t tile_addr, uint64_t tile_desc, uint32_t at, uint32_t lbo)
    {
        (void)tile_desc;
        return make_desc(tile_addr + at, lbo, 1024);
    }

    /* A tile that needs a mask (the sequence's end, the causal diagonal): the hidden scores of s to -inf, and the
     * row maxima into mt. The keys a lane holds are c = 8n + 2t + b (b = 0, 1) of rows g and g + 8; key c is
     * visible when c < lim (the sequence's end) and, causal, c <= d (the diagonal). Kernel 23: as a word of bits. */
    template <class B> static __device__ __forceinline__ void mask_max(B &b, long j0, int lim, float mt[2])
    {
#pragma unroll
        for (int n = 0; n < C::BC / 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int c = n * 8 + 2 * b.t + (e % 2), d = (int)((e < 2 ? b.row_g : b.row_g8) - j0);
                if (c >= lim || (b.causal && c > d)) b.s[4 * n + e] = -INFINITY;
                mt[e / 2] = fmaxf(mt[e / 2], b.s[4 * n + e]);
            }
    }

    /* The store of this lane's h-th row of O (inv = 1 / l) in two parts: quad_store, run by every lane (a row past N
     * too: a shuffle needs the whole warp), and lane_store, run for a row < N only. Here each lane stores its own
     * words: lane t holds columns 2t and 2t+1 of each block of 8 columns, so D / 8 stores of 4 bytes, and nothing is
     * exchanged (kernel 19: the quad exchanges its words, then 16 bytes a lane). */
    template <class B> static __device__ __forceinline__ void quad_store(B &, int, float, T *, long) {}
    template <class B> static __device__ __forceinline__ void lane_store(B &b, int h, float inv, T *Oh, long row)
    {
#pragma unroll
        for (int n = 0; n < D / 8; n++)
            *reinterpret_cast<uint32_t *>(Oh + row * D + n * 8 + 2 * b.t) = pack2<T>(b.o[4 * n + 2 * h] * inv, b.o[4 * n + 2 * h + 1] * inv);
    }

    /* The launch: one block per (batch, head, row tile), K and V as tensor maps for the copy engine. Self: the rung's
     * policy, whose kernel this launches (a later rung inherits this hook). */
    template <class Self>
    static int launch(int id, const void *q, const void *k, const void *v, void *o, float *Lp, long B, long H, long N,
                      int dtype, int causal, cudaStream_t s);
    /* The describe line's words for this D. */
    static void describe(char *buf, size_t n)
    {
        snprintf(buf, n, "1 producer + %d consumer warpgroups (%d/%d registers), BR=%d BC=%d, %d-stage K/V ring, %zu bytes of "
                 "shared memory", C::NWG, C::REG_PRODUCER, C::REG_CONSUMER, 64 * C::NWG, C::BC, C::STAGES, C::bytes);
    }
};

/* A consumer thread's registers, each array a variable of its own (not a member of the body: the compiler keeps an
 * object's members in registers only once every index into it is known, which for these is after the loops are
 * unrolled; as variables of their own the rest of the body's state is in registers from the start, and the machine
 * code is the one this kernel was measured with), then the body. */
template <int D, typename T, class P>
__device__ __forceinline__ void run_overlap(const T *__restrict__ Q, T *__restrict__ O, float *__restrict__ L, long N,
                                            long row_tiles, int causal, float scale_log2, const CUtensorMap &tm_k,
                                            const CUtensorMap &tm_v, typename P::Sched sched)
{
    uint32_t qf[D / 16][4];                       // Q_i's A fragments
    float o[D / 2], m[2], l[2];                   // O, and m and l of rows g and g + 8
    float s[K13<D>::BC / 2];                      // S_j, then p_j
    uint32_t pf[K13<D>::BC / 16][4];              // p_{j-1} as A fragments
    OverlapBody<D, T, P>(Q, O, L, N, row_tiles, causal, scale_log2, tm_k, tm_v, sched, qf, o, m, l, s, pf).run();
}

template <int D, typename T, class P>
__global__ void __launch_bounds__(K13<D>::THREADS, 1)
wgmma_overlap(const T *__restrict__ Q,  // [B, H, N, D]
              T *__restrict__ O,        // [B, H, N, D]
              float *__restrict__ L,    // [B, H, N] or NULL: L = m + log l per row, for the backward
              long N, long row_tiles, int causal, float scale_log2,
              const __grid_constant__ CUtensorMap tm_k,  // K, V as [B*H][N][D] for the copy engine
              const __grid_constant__ CUtensorMap tm_v)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    run_overlap<D, T, P>(Q, O, L, N, row_tiles, causal, scale_log2, tm_k, tm_v, {});
#else
    (void)Q, (void)O, (void)L, (void)N, (void)row_tiles, (void)causal, (void)scale_log2, (void)tm_k, (void)tm_v;
#endif
}

// --- the launcher ------------------------------------------------------------------------------------------------

template <int D, typename T>
template <class Self>
int Overlap<D, T>::launch(int id, const void *q, const void *k, const void *v, void *o, float *Lp, long B, long H,
                          long N, int dtype, int causal, cudaStream_t s)
{
    char who[16];
    snprintf(who, sizeof who, "kernel %d", id);
    static KvMaps maps;                           // K and V for the copy engine (tma_map.cuh)
    if (maps.get(k, v, B * H, N, D, C::BC, dtype, who)) return -1;
    if (smem_opt_in(wgmma_overlap<D, T, Self>, C::bytes, "kernel", id, D)) return -1;
    const long row_tiles = (N + C::BR - 1) / C::BR;
    const float scale_log2 = softmax_scale_log2(D);
    wgmma_overlap<D, T, Self><<<(unsigned)(B * H * row_tiles), C::THREADS, C::bytes, s>>>(
        (const T *)q, (T *)o, Lp, N, row_tiles, causal, scale_log2, maps.k, maps.v);
    CUDA_CHECK_LAST();
    return 0;
}

/* Kernel `id` of policy P (kernels 13-23): fp16 or bf16, D = 64 or 128, through P's launch hook. */
template <template <int, typename> class P>
static int overlap_launch(int id, const void *q, const void *k, const void *v, void *o, float *Lp, long B, long H, long N,
                          long D, int dtype, int causal, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (wgmma_refused()) return -1;
    if (dtype == DT_FP16 && D == 64) return P<64, __half>::template launch<P<64, __half>>(id, q, k, v, o, Lp, B, H, N, dtype, causal, s);
    if (dtype == DT_FP16 && D == 128) return P<128, __half>::template launch<P<128, __half>>(id, q, k, v, o, Lp, B, H, N, dtype, causal, s);
    if (dtype == DT_BF16 && D == 64)
        return P<64, __nv_bfloat16>::template launch<P<64, __nv_bfloat16>>(id, q, k, v, o, Lp, B, H, N, dtype, causal, s);
    if (dtype == DT_BF16 && D == 128)
        return P<128, __nv_bfloat16>::template launch<P<128, __nv_bfloat16>>(id, q, k, v, o, Lp, B, H, N, dtype, causal, s);
    fprintf(stderr, "%s: kernel %d takes fp16/bf16 and D = 64 or 128, not %s D=%ld\n", g_prog, id, dtype_name(dtype), D);
    return -1;
}

/* The describe line of policy P's kernel at D (its words chained through the rungs' describe hooks). */
template <template <int, typename> class P> static void overlap_describe(long D, char *buf, size_t n)
{
    if (D == 64) P<64, __half>::describe(buf, n);
    else P<128, __half>::describe(buf, n);
}

#if RUNG == 13
static int k13_launch_l(const void *q, const void *k, const void *v, void *o, float *Lp, long B, long H, long N, long D,
                        int dtype, int causal, void *stream)
{
    return overlap_launch<Overlap>(13, q, k, v, o, Lp, B, H, N, D, dtype, causal, stream);
}

static int k13_launch(const void *q, const void *k, const void *v, void *o, long B, long H, long N, long D, int dtype,
                      int causal, void *stream)
{
    return k13_launch_l(q, k, v, o, NULL, B, H, N, D, dtype, causal, stream);
}

static void k13_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    overlap_describe<Overlap>(D, buf, n);
}

static const FusedKernel kernel13 = {
    .id = 13, .extends = 12, .name = "softmax under P V",
    .idea = "kernel 12 with the softmax of tile j overlapping the P V product of tile j-1 (intra-warpgroup pipelining)",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = tc_supports, .launch = k13_launch,
    .describe = k13_describe, .unavailable = wgmma_unavailable, .launch_l = k13_launch_l,
};
FUSED_REGISTER(kernel13);
#endif
