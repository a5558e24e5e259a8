/*
 * Backward kernel 5: the backward on Hopper's wgmma and TMA, warp-specialised.
 *
 * Extends backward kernel 4 (bwd04_one_barrier.cu). The idea: the forward's kernels 10-12 applied to the backward
 * (FlashAttention-3's scheme): the five products read their tiles straight from swizzled shared memory, a producer
 * warpgroup feeds them, and the consumers get the registers. A consumer warpgroup owns 64 keys (wgmma's M) and each
 * product is one wgmma per k step, from shared memory the TMA filled; the copies run in a producer warpgroup, ahead
 * by a 2-stage ring; p^T and ds^T stay in registers as A operands, as in kernel 4; the consumer threads write only
 * ds^T (for dQ) to shared memory, and read L_i and Delta_i from the ring's stage, where the producer's warp 1 put
 * them. dQ leaves by red.global.add.v2, as in kernels 2-4. fp16/bf16, D = 64 or 128, causal or not, any N; built
 * only for sm_90a. This file holds the body that backward kernels 6-19 reuse: they change its policy (B5Policy).
 * Why: kernel 4's warps each own 16 keys and read the whole Q_i and dO_i tile through ldmatrix for every 16 keys,
 * twice (straight for s^T and dp^T, transposed for dK and dV): 1.8 mma per ldmatrix, 240-255 registers, one block
 * of 8 warps per SM and a block-wide barrier per row tile. Here the tensor cores read each tile from shared memory
 * once per 64 keys and product, and no ldmatrix is left.
 * What it costs: setmaxnreg 24 (producer) / 240 (consumers); ptxas (sm_90a) reports the launch's 168 and spills 4
 * bytes at D = 128, 20 at D = 64 (where the row tile is BR = 128: s^T and dp^T take 128 registers). 167.0 KB of
 * shared memory at D = 64, 165.9 KB at D = 128: one block per SM. The masks are computed in every row tile (kernel
 * 7 removes that, 7%).
 * Measured: H100, fp16, N = 4096: 333.5 TFLOP/s at D = 64 and 370.4 at D = 128, +56% and +76% over kernel 4 (causal
 * 293.5 and 325.9, +48% and +63%); 124% and 128% of FlashAttention-2, 78% and 76% of cuDNN; the runs, and the three
 * ways of bringing L_i and Delta_i that were measured: RESULTS.md#bwd-5.
 */
#ifndef RUNG
#define RUNG 5          // this file is the one compiled: its launcher and registry entry (the end) are built
#endif

#include <cmath>

#include "bwd.cuh"
#include "gpu.cuh"
#include "../kernels.h"
#include "../primitives/tc.cuh"
#include "../primitives/tma_map.cuh"
#include "../primitives/wgmma.cuh"

// --- the idea ----------------------------------------------------------------------

/*
 * One block owns a K/V tile of BC = 128 keys and walks the row tiles, as
 * kernels 2-4 do (flash_backward.c's loops: K/V tile outside, row tiles
 * inside). It has three warpgroups:
 *   - a producer: its thread 0 issues the copies, K_j and V_j once, then
 *     Q_i and dO_i by tensor map (forward kernel 11's TMA, 128-byte swizzle)
 *     into a 2-stage ring on mbarriers full/empty (forward kernel 12's ring); its warp 1
 *     stores L_i and Delta_i into the same stage with ordinary loads and
 *     stores (the consumers' loop says why not the TMA); warps 2-3 idle
 *     (kernel 10: each sends one consumer's dQ parts);
 *   - two consumers, 64 keys each (wgmma's M = 64 rows), that only compute.
 * setmaxnreg gives the producer 24 registers and each consumer 240 (forward
 * kernel 12's split of the block's 384 x 168).
 *
 * A consumer warpgroup's five products per row tile, each one wgmma per k step
 * (wgmma.cuh: SS = both operands from shared memory, RS = A from registers):
 *
 *     s^T  = K_w Q_i^T       SS  A = K_w, B = Q_i, both K-major (k = head dim)  [64 keys x BR]
 *     dp^T = V_w dO_i^T      SS  A = V_w, B = dO_i                              [64 keys x BR]
 *     p^T  = 2^(s^T scale_log2 - L_i log2 e),  ds^T = p^T o (dp^T - Delta_i)   (registers, fp32)
 *     dV_w += p^T dO_i       RS  A = p^T, B = dO_i MN-major (k = queries)      [64 keys x D]
 *     dK_w += ds^T Q_i       RS  A = ds^T, B = Q_i MN-major
 *     dQ_i += ds K_j         SS  A = ds^T in shared memory read MN-major (so it is ds),
 *                                B = K_j MN-major (k = keys); a 64 x 64 part per warpgroup
 *
 * Key-major, as in kernel 2: p^T and ds^T come out of the first two
 * products as accumulators whose layout is that of an A operand (wgmma.cuh),
 * so they feed dV and dK from registers; dK_w and dV_w stay in registers for
 * the whole walk. The same swizzled tile of Q_i (dO_i, K_j) is a K-major
 * operand in one product and an MN-major one in another: only the descriptor
 * differs, as K_j and V_j in the forward.
 *
 * Row tiles: BR = 128 queries at D = 64, where dQ_i's [128 x 64] splits into
 * two 64-query halves (warpgroup w: queries 64 w.., the ds^T column block w);
 * BR = 64 at D = 128, where dK_w and dV_w already hold 128 registers and
 * dQ_i's [64 x 128] splits into two 64-column halves (warpgroup w: columns
 * 64 w.., K_j's column block w). Either way each warpgroup's dQ part is one
 * 64 x 64 product over the 128 keys.
 *
 * ds^T goes to shared memory in the swizzled layout the tensor cores read
 * (keys down, 64 queries per 128-byte row), and both warpgroups' halves must
 * be in before either reads it for dQ: one named barrier (bar.sync 1, 256:
 * the consumers only) per row tile, and ds^T double-buffered as in kernel 4,
 * so that it is the only one.
 *
 * dQ: the part is added into an fp32 accumulator that other blocks add into
 * at the same time (kernel 2's notes say why atomics and not a second pass,
 * and that dQ is then not bit-identical run to run), with red.global.add.v2
 * from registers (add_dq below). Kernel 6 sends it through shared memory and
 * the copy engine's bulk reduce-add, kernel 9 orders the additions, kernel 10
 * hands one bulk reduce-add of the whole part to a producer warp.
 *
 * Order: blocks go head by head (the head's K/V tiles in order), causal too,
 * where kernels 2-4, causal, go K/V tile by K/V tile across all heads (tile
 * 0, the longest, first everywhere). Head by head, the blocks that run together
 * share their head's Q_i, dO_i and dQ_i rows in L2; the longest tile of each
 * head still starts first among its head's. Measured causal (kernel 6 both
 * ways, in its first version, H100): +28% at N = 4096, D = 64 (300.4 against
 * 234.5 TFLOP/s), +41% at N = 2048, D = 128 (298.2 against 211.6); -1% to -4%
 * at N >= 8192, D = 128.
 *
 * Masks as in kernel 2: keys past N arrive as zero rows (the TMA's fill)
 * and get p = 0; queries past N arrive as zeros with L = +inf (bwd_prep.cu),
 * so p = 0; the causal mask only in the row tiles that cross this warpgroup's
 * diagonal, and row tiles before the one holding key j0 skipped.
 */

/* The block's tiles and shared memory, per head dim D; the policy adds shared memory for dQ's way out (kernels 6,
 * 10: P::DQ_SMEM), for dK and dV's (kernel 13: P::DKV_SMEM<D>) and for the persistent kernels' ring of items (kernel
 * 11: P::ITEM_SMEM). */
template <int D_, class P> struct BwdWg {
    static constexpr int D = D_;
    static constexpr int NWG = 2, BC = 64 * NWG;          // consumer warpgroups, 64 keys each
    static constexpr int BR = D == 64 ? 128 : 64;          // queries per row tile
    static constexpr int STAGES = 2;
    static constexpr int THREADS = 128 * (NWG + 1);        // + the producer warpgroup
    static constexpr int REG_PRODUCER = 24, REG_CONSUMER = 240;
    static constexpr int KV_TILE = BC * D * 2;             // K_j or V_j, bytes: [D/64][BC][64], 128-byte swizzle
    static constexpr int ROW_TILE = BR * D * 2;            // Q_i or dO_i: [D/64][BR][64]
    static constexpr int DS_TILE = BC * BR * 2;            // ds^T: [BR/64][BC][64] (keys down, queries along)
    static constexpr int VEC = BR * 4;                     // L_i log2 e or Delta_i, bytes
    /* offsets from the 1024-aligned base */
    static constexpr int OFF_K = 0, OFF_V = KV_TILE, OFF_Q = 2 * KV_TILE;     // Q stage s at OFF_Q + 2 s ROW_TILE, dO after it
    static constexpr int OFF_DS = OFF_Q + 2 * STAGES * ROW_TILE;                // ds^T buffer b at OFF_DS + b DS_TILE
    static constexpr int OFF_VEC = OFF_DS + 2 * DS_TILE;                        // stage s's L_i at OFF_VEC + 2 s VEC, Delta_i after it
    static constexpr int OFF_DQ = OFF_VEC + 2 * 2 * VEC;                        // kernels 6, 10: dQ's part on its way out
    static constexpr int OFF_DKV = OFF_DQ + P::DQ_SMEM;                         // kernel 13: dK's way out
    static constexpr int OFF_BAR = OFF_DKV + P::template DKV_SMEM<D_>;          // kv_full, full[STAGES], empty[STAGES]
    /* then kernel 11's mbarriers and tickets (P::ITEM_SMEM) */
    static constexpr size_t bytes = OFF_BAR + 8 * (1 + 2 * STAGES) + P::ITEM_SMEM + 1024;   /* + alignment */
    static_assert(128 * REG_PRODUCER + 128 * NWG * REG_CONSUMER <= THREADS * ((65536 / THREADS) & ~7), "more than the block holds");
};

/* What the hooks read: the kernel's arguments and the block's shared memory (the same for every thread), and the
 * types of this instance (the policy P, to call a later kernel's hook from an earlier kernel's). */
template <int D_, typename T_, class P_> struct BwdWgArgs {
    static constexpr int D = D_;
    using T = T_;
    using P = P_;
    using C = BwdWg<D_, P_>;
    const float *lse2, *delta;                    // [B, H, Npad] L log2(e), Delta
    float *dq_acc;                                // [B, H, N, D] fp32, summed into
    T *dK, *dV;                                   // [B, H, N, D]
    long N, Npad, kv_tiles;
    int causal;
    float scale_log2, scale;
    const CUtensorMap *tm_k, *tm_v, *tm_q, *tm_do;
    unsigned items, slot;                         // kernel 11: B H kv_tiles, and this launch's ticket counter
    const CUtensorMap *tm_dk, *tm_dv;             // kernel 13: dK, dV in boxes of 64 keys
    uint32_t base;                                // shared memory, 1024-aligned, as an address ...
    unsigned char *base_ptr;                      // ... and as a pointer
    uint32_t kv_full, full, empty;                // the mbarriers: K_j, V_j landed; stage s full; stage s free
};

/* A walk: K/V tile jt of head bh over its steps i_begin, i_begin + BR, ... below i_end, the rows the producer loads
 * and the writers add into. Kernels 5-19 walk a K/V tile whole, to N; kernel 20 splits the last round's walks into
 * parts (part: which one, -1 for a whole walk). The consumers see only steps: first_step. */
struct BwdWalk {
    long bh, jt, i_begin, i_end;
    int part;
};

/* A consumer thread: where it is in the block, and the item (head, K/V tile) it walks. */
struct BwdWgThread {
    int wg, wiw, lane, g, t;                      // consumer warpgroup 0-1, its warp 0-3, lane = 4 g + t
    int qblk, dblk;                               // its warpgroup's 64 x 64 part of dQ_i: query block, head-dim block
    uint32_t k_w, v_w;                            // K_w, V_w: its warpgroup's 64 keys of K_j, V_j
    long bh, jt, i_begin;                         // the item: (batch, head), K/V tile, its walk's first step (first_step)
    long kw0, key0;                               // its warpgroup's first key; this lane's: key0 (rows g) and key0 + 8
    float *dq_part;                               // kernels 10-20: its warpgroup's buffer for dQ's part (shared memory)
};

/* A consumer's row tile: its queries, its stage of the ring, and ds^T's buffer. */
struct BwdWgRow {
    long i0, it;                                  // the row tile's first query; the ring's count (across items)
    int st, use;                                  // the stage it is in, and that stage's parity
    uint32_t q_s, do_s, ds_s;                     // Q_i, dO_i (the stage); ds^T's buffer (it % 2)
    const float *lse_s, *dl_s;                    // L_i log2 e, Delta_i (the stage)
    /* kernel 17: this lane's first pair of each (queries 2 t, 2 t + 1), read as soon as the stage has landed, ahead of
     * the waits for the products; filled by its stage_landed (kernel 12's scores), which holds the row tile by const
     * reference, hence mutable, and read by its lse_pair and dl_pair (kernel 8's p_ds), after it */
    mutable float2 lse0 = {}, dl0 = {};
};

/* The descriptor of a k step's operand, `off` bytes into the tile at `tile` (stride offset 1024): made afresh
 * (make_desc), or, when the policy says DESC_ADD (backward kernel 15), the tile's descriptor plus the offset
 * (desc_add, forward kernel 22's idea): the tile's is the same for every step, one add a step. */
template <bool DESC_ADD> __device__ __forceinline__ uint64_t bwd_desc(uint32_t tile, uint32_t off, uint32_t lbo)
{
    if constexpr (DESC_ADD) return desc_add(make_desc(tile, lbo, 1024), off);
    else return make_desc(tile + off, lbo, 1024);
}

/* s^T = K_w Q_i^T (or dp^T = V_w dO_i^T): k = the head dim, 4 steps per 64 columns (32 bytes each), issued, not
 * committed. */
template <class A> __device__ __forceinline__ void bwd_wg_scores(float *acc, uint32_t kv_w, uint32_t rows)
{
    using C = typename A::C;
    constexpr int D = A::D, BC = C::BC, BR = C::BR;
    constexpr bool ADD = A::P::DESC_ADD;
#pragma unroll
    for (int ks = 0; ks < D / 16; ks++) {
        const int off_kv = (ks / 4) * BC * 128 + (ks % 4) * 32, off_q = (ks / 4) * BR * 128 + (ks % 4) * 32;
        wgmma_ss<typename A::T, BR, 0, 0>(acc, bwd_desc<ADD>(kv_w, off_kv, 16), bwd_desc<ADD>(rows, off_q, 16), ks > 0);
    }
}

/* The policy of backward kernel 5: the hooks where kernels 6-19 change the body (each later kernel derives its
 * policy from its predecessor's and replaces what its idea changes), with kernel 5's code in each.
 *
 * Hooks and the machine code. Every kernel here compiles to the instructions it had when the seven kernels were one
 * template with flags, and a hook is a function, which nvcc optimises on its own (its loops unrolled) before it
 * inlines it into the kernel. So the body keeps what would otherwise change in a hook: the arrays the hooks fill
 * (dq, dq_end: in the kernel, as before, their registers are carried round the loop); the loop over a product's k
 * steps (the hook is one step: dv_dk_step); kernel 5's p^T, ds^T loop (the one place with no B5Policy hook: a later
 * policy's p_ds replaces it); the test that picks a branch sits beside the branch (need_mask in kernels 7 and 8's
 * p_ds); and each warpgroup's dQ buffer is handed in (BwdWgThread::dq_part), not computed from base_ptr in a hook. */
struct B5Policy {
    static constexpr int DQ_SMEM = 0;             /* shared memory for dQ's part on its way out: none, it leaves from registers */
    static constexpr int DQ_PART = 0;             /* floats of it per consumer warpgroup */
    template <int D> static constexpr int DKV_SMEM = 0;   /* shared memory for dK's way out: none, from registers */
    static constexpr bool DKV_MAPS = false;       /* dK and dV as tensor maps: not needed */
    static constexpr bool DESC_ADD = false;       /* a k step's descriptor made afresh (kernel 15: by one add) */
    static constexpr int ITEM_SMEM = 0;           /* shared memory for a ring of items: none, one item a block */
    static constexpr bool ITEM_LOOP = false;      /* the consumers' walk runs once: the block's one item */

    // The producer warpgroup.

    /* Thread 0, after the ring's mbarriers: nothing more to set up. */
    template <class A> static __device__ __forceinline__ void init_barriers(const A &a) { (void)a; }
    /* Thread 0: the copies of the block's item (produce: one item's K_j, V_j and row tiles). */
    template <class A, class F>
    static __device__ __forceinline__ void produce_items(const A &a, F &produce, long bh, long j0, long i_begin,
                                                         long i_end, long &it)
    {
        (void)a;
        produce(bh, j0, i_begin, i_end, it);
    }
    /* Warp 1 (and kernel 10's writer warps): f's work on the block's item, f(bh, j0, i_begin, i_end, x...). */
    template <class A, class F, class... X>
    static __device__ __forceinline__ void each_item(const A &a, F &f, long bh, long j0, long i_begin, long i_end, X &...x)
    {
        (void)a;
        f(bh, j0, i_begin, i_end, x...);
    }
    /* Warps 2-3 (and lanes 1-31 of warp 0): idle. */
    template <class A>
    static __device__ __forceinline__ void other_warps(const A &a, long bh, long j0, long i_begin, long i_end)
    {
        (void)a, (void)bh, (void)j0, (void)i_begin, (void)i_end;
    }
    /* The producer's roles and the writers: the row tile that step i0 of the walk of the K/V tile from key j0 loads and
     * adds into: the step itself (kernel 19: the walk rotated). The consumers see only the steps. */
    template <class A> static __device__ __forceinline__ long row_at(const A &a, long i0, long j0)
    {
        (void)a, (void)j0;
        return i0;
    }

    // The consumer warpgroups.

    /* The walk to take: the block's (wk is set); false past the last. */
    template <class A> static __device__ __forceinline__ bool take_item(const A &a, long item, BwdWalk &wk)
    {
        (void)a, (void)item, (void)wk;
        return true;
    }
    /* The consumers' first step of walk wk, which they walk to N: its first row tile (kernel 20: a part's steps). */
    template <class A> static __device__ __forceinline__ long first_step(const A &a, const BwdWalk &wk)
    {
        (void)a;
        return wk.i_begin;
    }
    /* Pair n of L_i log2 e and of Delta_i for this lane's queries 8 n + 2 t and 8 n + 2 t + 1, read from the stage
     * where they are used (kernel 17 reads the first pair ahead: stage_landed). Called by kernels 8-20's p_ds. */
    template <class A> static __device__ __forceinline__ float2 lse_pair(const BwdWgRow &rt, int n, int t)
    {
        return *reinterpret_cast<const float2 *>(rt.lse_s + 8 * n + 2 * t);
    }
    template <class A> static __device__ __forceinline__ float2 dl_pair(const BwdWgRow &rt, int n, int t)
    {
        return *reinterpret_cast<const float2 *>(rt.dl_s + 8 * n + 2 * t);
    }
    /* Once the stage has landed, before s^T is issued (kernels 12-20's scores): nothing here. */
    template <class A> static __device__ __forceinline__ void stage_landed(const BwdWgRow &rt, int t) { (void)rt, (void)t; }
    /* In kernels 12-20's scores, once the last row tile's dQ part is issued: nothing here (end_row waited for that
     * tile's dV and dK and freed its stage; kernel 18 does both here). */
    template <class A>
    static __device__ __forceinline__ void dq_issued(const A &a, const BwdWgThread &w, const BwdWgRow &rt)
    {
        (void)a, (void)w, (void)rt;
    }
    /* s^T and dp^T, issued once the stage has landed, and waited for. */
    template <class A>
    static __device__ __forceinline__ void scores(const A &a, const BwdWgThread &w, const BwdWgRow &rt, float *s, float *dp,
                                                  float *dq)
    {
        (void)dq;
        mbar_wait(a.full + 8 * rt.st, rt.use);      // Q_i, dO_i, L_i, Delta_i have landed
        wgmma_fence();
        bwd_wg_scores<A>(s, w.k_w, rt.q_s);
        bwd_wg_scores<A>(dp, w.v_w, rt.do_s);
        wgmma_commit();
        wgmma_wait<0>();
    }
    /* Step ks of dV_w += p^T dO_i, dK_w += ds^T Q_i (k = the BR queries, 16 rows, 2048 bytes, a step). */
    template <class A>
    static __device__ __forceinline__ void dv_dk_step(const A &a, const BwdWgRow &rt, int ks, const uint32_t *pa,
                                                      const uint32_t *dsa, float *dv, float *dk)
    {
        (void)a;
        using T = typename A::T;
        constexpr int D = A::D, BR = A::C::BR;
        wgmma_rs<T, D, 1>(dv, pa, bwd_desc<A::P::DESC_ADD>(rt.do_s, ks * 2048, BR * 128), 1);
        wgmma_rs<T, D, 1>(dk, dsa, bwd_desc<A::P::DESC_ADD>(rt.q_s, ks * 2048, BR * 128), 1);
    }
    /* After the named barrier: dQ_i += ds_tile K_j, this warpgroup's 64 x 64 of it (k = the BC keys) into dq, then
     * the stage freed and the part sent (add_dq). */
    template <class A>
    static __device__ __forceinline__ void end_row(const A &a, const BwdWgThread &w, const BwdWgRow &rt, float *dq)
    {
        using C = typename A::C;
        constexpr int BC = C::BC;
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < BC / 16; ks++)
            wgmma_ss<typename A::T, 64, 1, 1>(dq, make_desc(rt.ds_s + w.qblk * BC * 128 + ks * 2048, BC * 128, 1024),
                                              make_desc(a.base + C::OFF_K + w.dblk * BC * 128 + ks * 2048, BC * 128, 1024), ks > 0);
        wgmma_commit();
        wgmma_wait<0>();
        /* This thread is done with stage st (Q, dO, L, Delta): the producer
         * may refill it. Every consumer thread arrives (256 arrivals, where
         * forward kernel 12 has one per warp after __syncwarp): warp 1's stores of
         * the next L, Delta would otherwise follow lanes 1-31's reads of these
         * through the __syncwarp alone, which racecheck does not follow (one
         * arrival per thread: clean, at no measured cost). */
        mbar_arrive(a.empty + 8 * rt.st);
        A::P::add_dq(a, w, rt, dq);
    }
    /* dQ_i += the part (element 4 n + e: row 16 wiw + g + 8 (e / 2), column 8 n + 2 t + e % 2 of the warpgroup's
     * 64 x 64), with the other K/V blocks: red.global.add.v2 from registers, 16 a thread. */
    template <class A>
    static __device__ __forceinline__ void add_dq(const A &a, const BwdWgThread &w, const BwdWgRow &rt, const float *dq)
    {
        constexpr int D = A::D;
        float *dq_h = a.dq_acc + w.bh * a.N * D;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const long row = rt.i0 + 64 * w.qblk + 16 * w.wiw + w.g + 8 * h;
            if (row < a.N) {
#pragma unroll
                for (int n = 0; n < 8; n++)            // dQ_i += ..., with the other K/V blocks
                    red_add2(dq_h + row * D + 64 * w.dblk + 8 * n + 2 * w.t, dq[4 * n + 2 * h], dq[4 * n + 2 * h + 1]);
            }
        }
    }
    /* After the walk, before dK_j and dV_j are stored (it: the ring's count): nothing. */
    template <class A>
    static __device__ __forceinline__ void end_walk(const A &a, const BwdWgThread &w, long it, float *dq)
    {
        (void)a, (void)w, (void)it, (void)dq;
    }

    // The launcher.

    /* Delta and L log2 e padded to whole row tiles of 128 ([B, H, Npad] floats each), the dQ accumulator ([B, H, N, D]
     * floats). */
    static size_t workspace(long B, long H, long N, long D, int dtype);
    /* The rows a head of dQ's accumulator has (the preprocessing pass zeroes them). */
    static long dq_rows(long N, long Npad)
    {
        (void)Npad;
        return N;
    }
    /* Before the main kernel, after the preprocessing pass: nothing. */
    static void before_main(float *dq_acc, long BH, long N, long D, int BR, cudaStream_t s)
    {
        (void)dq_acc, (void)BH, (void)N, (void)D, (void)BR, (void)s;
    }
    /* The grid: one block per item (head, K/V tile); -1 after a line if it cannot run. */
    static long grid(long items, const char *who)
    {
        (void)who;
        return items;
    }
    static unsigned slot() { return 0u; }
    /* After the main kernel's launch: nothing. */
    static void launched(long items, long grid) { (void)items, (void)grid; }
    /* After it too: dK and dV (`bytes` each) are written by plain stores, which the tools see (kernel 13: by TMA stores). */
    static void dkdv_written(void *dk, void *dv, size_t bytes, cudaStream_t s) { (void)dk, (void)dv, (void)bytes, (void)s; }
    /* dQ = dQ_acc / sqrt(D). */
    static int convert_dq(const float *dq_acc, void *dq, long BH, long N, long Npad, long D, float scale, int dtype,
                          cudaStream_t s)
    {
        (void)Npad;
        return bwd_convert_dq(dq_acc, dq, (size_t)BH * N * D, scale, dtype, s);   // dQ = dQ_acc / sqrt(D)
    }
    /* The words describe() puts in its sentence. */
    static const char *desc_items() { return ""; }
    static const char *desc_mask() { return ""; }
    static const char *desc_overlap(long D)
    {
        (void)D;
        return "";
    }
    static const char *desc_late() { return ""; }
    static const char *desc_dq() { return "fp32 red.global.add"; }
};

template <int D, typename T, class P>
__global__ void __launch_bounds__(BwdWg<D, P>::THREADS, 1)
bwd_wgmma(const float *__restrict__ lse2,    // [B, H, Npad] L log2(e), +inf past N (bwd_prep.cu)
          const float *__restrict__ delta,   // [B, H, Npad] Delta = dO . O, 0 past N
          float *__restrict__ dq_acc,        // [B, H, N, D] fp32, zeroed, summed into (kernel 10: [B, H, Npad, D], tiled)
          T *__restrict__ dK,                // [B, H, N, D]
          T *__restrict__ dV,                // [B, H, N, D]
          long N, long Npad, long kv_tiles, int causal, float scale_log2, float scale,
          const __grid_constant__ CUtensorMap tm_k,   // K, V: boxes of BC keys
          const __grid_constant__ CUtensorMap tm_v,
          const __grid_constant__ CUtensorMap tm_q,   // Q, dO: boxes of BR queries
          const __grid_constant__ CUtensorMap tm_do,
          unsigned items, unsigned slot,              // kernel 11: B H kv_tiles, and this launch's ticket counter
          const __grid_constant__ CUtensorMap tm_dk,  // kernel 13: dK, dV, boxes of 64 keys
          const __grid_constant__ CUtensorMap tm_dv)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using C = BwdWg<D, P>;
    constexpr int BC = C::BC, BR = C::BR, STAGES = C::STAGES;
    /* dQ_i's share of consumer warpgroup wg: 64 queries (D = 64: queries
     * 64 wg.., the ds^T column block wg) x 64 head-dim columns (D = 128:
     * columns 64 wg.., K_j's column block wg). */
    constexpr int QB = BR / 64, DB = D / 64;
    extern __shared__ unsigned char smem_raw[];
    const uint32_t raw_addr = (uint32_t)__cvta_generic_to_shared(smem_raw);
    const uint32_t base = (raw_addr + 1023) & ~1023u;           // 1024-aligned for the swizzle
    unsigned char *base_ptr = smem_raw + (base - raw_addr);     // the same, for the threads' own loads and stores
    const uint32_t kv_full = base + C::OFF_BAR, full = kv_full + 8, empty = full + 8 * STAGES;
    const BwdWgArgs<D, T, P> a = {lse2, delta, dq_acc, dK, dV, N, Npad, kv_tiles, causal, scale_log2, scale,
                                  &tm_k, &tm_v, &tm_q, &tm_do, items, slot, &tm_dk, &tm_dv, base, base_ptr, kv_full, full, empty};

    /* Head by head, causal or not (the head's K/V tiles in order, tile 0, the
     * longest when causal, first): the blocks running together share their
     * head's Q, dO and dQ rows in L2. Not kernels 2-4's causal order. */
    const long bh = blockIdx.x / kv_tiles, jt = blockIdx.x % kv_tiles;
    const long j0 = jt * BC;
    /* The row tile holding row j0; those before see none of these keys. Causal
     * at D = 128 (BR = 64), warpgroup 1's keys j0 + 64.. see nothing of the
     * first one, all masked; it still runs it: ds^T and the named barrier
     * need both warpgroups in every row tile (skipping it would deadlock). */
    const long i_begin = causal ? j0 / BR * BR : 0;

    if (threadIdx.x == 0) {
        mbar_init(kv_full, 1);
        for (int s = 0; s < STAGES; s++) {
            mbar_init(full + 8 * s, 1 + 32);         // the TMA thread's expect_tx + warp 1's 32 lanes (L, Delta)
            mbar_init(empty + 8 * s, 128 * C::NWG);  // one arrival per consumer thread (why: end_row; kernel 18: dq_issued, end_walk)
        }
        P::init_barriers(a);
        fence_mbar_init();
    }
    __syncthreads();                              // the only block-wide barrier

    if (threadIdx.x < 128) {
        /* The producer: K_j and V_j once, then the row tiles into the ring. Its
         * roles keep their work on one item in a lambda (produce, vecs),
         * which kernel 11's hooks call in a loop over items. */
        setmaxnreg_dec<C::REG_PRODUCER>();
        if (threadIdx.x == 0) {
            /* one item: K_j and V_j, then its row tiles into the ring (it: the ring's count, on across kernel 11's items) */
            auto produce = [&](long bh, long j0, long i_begin, long i_end, long &it) {
                mbar_expect_tx(kv_full, 2 * C::KV_TILE);
#pragma unroll
                for (int blk = 0; blk < D / 64; blk++) {
                    tma_load_3d(base + C::OFF_K + blk * BC * 128, &tm_k, blk * 64, (int)j0, (int)bh, kv_full);
                    tma_load_3d(base + C::OFF_V + blk * BC * 128, &tm_v, blk * 64, (int)j0, (int)bh, kv_full);
                }
                for (long i0 = i_begin; i0 < i_end; i0 += BR, it++) {
                    const int s = (int)(it % STAGES), use = (int)((it / STAGES) & 1);
                    mbar_wait(empty + 8 * s, use ^ 1);   // first use of a stage: passes at once
                    const uint32_t q_dst = base + C::OFF_Q + 2 * s * C::ROW_TILE;
                    mbar_expect_tx(full + 8 * s, 2 * C::ROW_TILE);
                    const int row = (int)P::row_at(a, i0, j0);   // the row tile of step i0 (kernel 19: rotated)
#pragma unroll
                    for (int blk = 0; blk < D / 64; blk++) {
                        tma_load_3d(q_dst + blk * BR * 128, &tm_q, blk * 64, row, (int)bh, full + 8 * s);
                        tma_load_3d(q_dst + C::ROW_TILE + blk * BR * 128, &tm_do, blk * 64, row, (int)bh, full + 8 * s);
                    }
                }
            };
            long it = 0;
            P::produce_items(a, produce, bh, j0, i_begin, N, it);
        } else if (threadIdx.x / 32 == 1) {
            /* Warp 1: L_i log2 e and Delta_i (BR floats each) into the same
             * stage, by ordinary loads and stores, 16 bytes a lane; each lane
             * then arrives on full[s] (release: its stores before the
             * arrival), and the consumers' wait on full[s] (acquire) makes
             * them visible. Why not the TMA: the note above the consumers' loop. */
            const int lane = threadIdx.x % 32;
            float4 *vec_s = reinterpret_cast<float4 *>(base_ptr + C::OFF_VEC);
            auto vecs = [&](long bh, long j0, long i_begin, long i_end, long &it) {
                const float *lse_h = lse2 + bh * Npad, *dl_h = delta + bh * Npad;
                for (long i0 = i_begin; i0 < i_end; i0 += BR, it++) {
                    const int s = (int)(it % STAGES), use = (int)((it / STAGES) & 1);
                    mbar_wait(empty + 8 * s, use ^ 1);   // the consumers are done with the stage's L, Delta too
                    const long row = P::row_at(a, i0, j0);
                    const float4 *src_l = reinterpret_cast<const float4 *>(lse_h + row), *src_d = reinterpret_cast<const float4 *>(dl_h + row);
#pragma unroll 1   /* 24 registers: one float4 in flight, not a spill */
                    for (int x = lane; x < BR / 2; x += 32)   // [L_i | Delta_i] as BR / 2 float4
                        vec_s[s * BR / 2 + x] = x < BR / 4 ? src_l[x] : src_d[x - BR / 4];
                    mbar_arrive(full + 8 * s);
                }
            };
            long it = 0;
            P::each_item(a, vecs, bh, j0, i_begin, N, it);
        } else {
            P::other_warps(a, bh, j0, i_begin, N);
        }
        return;
    }
    setmaxnreg_inc<C::REG_CONSUMER>();

    const int wg = threadIdx.x / 128 - 1, wiw = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const uint32_t k_w = base + C::OFF_K + 64 * wg * 128, v_w = base + C::OFF_V + 64 * wg * 128;  // K_w, V_w: rows 64 wg..
    const int qblk = QB == 2 ? wg : 0, dblk = DB == 2 ? wg : 0;

    /* The walk of K/V tile jt of head bh over its row tiles: the block's one item (the loop runs once), or kernel 11's
     * items one after the other; it: the ring's count, on across items. Not a lambda, as the producer's roles are:
     * written as a lambda called once, nvcc scheduled kernels 5 and 6 otherwise (128 to 384 bytes more code each)
     * and kernel 5 ran 14% and 5% slower (D = 64, 128); as this loop they keep their machine code. */
    long it = 0, item = 0;
    do {
        BwdWalk wk = {bh, jt, i_begin, N, -1};           // kernels 5-10: the block's, as above
        if (!P::take_item(a, item, wk)) break;            // past the last item
        const long bh = wk.bh, jt = wk.jt, i_begin = P::first_step(a, wk);   // this item's
        const int kv_phase = (int)(item & 1);             // K_j, V_j's phase on kv_full
        const long j0 = jt * BC;
        const long kw0 = j0 + 64 * wg;                // this warpgroup's 64 keys
        const long key0 = kw0 + 16 * wiw + g;         // this lane's keys: key0 (accumulator rows g) and key0 + 8
        const BwdWgThread w = {wg, wiw, lane, g, t, qblk, dblk, k_w, v_w, bh, jt, i_begin, kw0, key0,
                                 reinterpret_cast<float *>(base_ptr + C::OFF_DQ) + wg * P::DQ_PART};

        /* dK_w, dV_w: 64 keys x D per warpgroup, fp32, for the whole walk; flat
         * (the wgmma wrappers take D/2 floats), element 4 n + e is kernel 2's dk[n][e] */
        float dk[D / 2], dv[D / 2];
#pragma unroll
        for (int n = 0; n < D / 2; n++) dk[n] = dv[n] = 0.0f;

        /* L_i log2 e and Delta_i (BR floats each) arrive in the ring's stage with
         * Q_i and dO_i, stored there by the producer's warp 1 (above), so the
         * consumers touch no global memory until dQ. The TMA could bring them
         * too (two more copies on full[s]), but the consumers read them with
         * ordinary loads, ordered after the copy engine's writes only by the
         * mbarrier, which compute-sanitizer's racecheck does not follow: it
         * cannot tell that design from a race. Each consumer thread loading
         * one float a row tile ahead, behind the named barrier, is clean but
         * cost 27% at D = 64 (a global load in flight across the s^T and dp^T
         * products, where those take 128 of the thread's registers, is the
         * guess). Warp 1's stores are clean (RESULTS.md#bwd-5 has the three
         * designs, measured): racecheck follows an mbarrier between threads
         * (release by arrive, acquire by wait) when every thread whose accesses
         * it orders arrives or waits itself. */
        const float *vec_s = reinterpret_cast<const float *>(base_ptr + C::OFF_VEC);

        mbar_wait(kv_full, kv_phase);                     // K_j, V_j have landed
        for (long i0 = i_begin; i0 < N; i0 += BR, it++) {
            const int st = (int)(it % STAGES), use = (int)((it / STAGES) & 1);
            const uint32_t q_s = base + C::OFF_Q + 2 * st * C::ROW_TILE, do_s = q_s + C::ROW_TILE;
            const uint32_t ds_s = base + C::OFF_DS + (int)(it & 1) * C::DS_TILE;
            const float *lse_s = vec_s + st * 2 * BR, *dl_s = lse_s + BR;
            const BwdWgRow rt = {i0, it, st, use, q_s, do_s, ds_s, lse_s, dl_s};

            float s[BR / 2], dp[BR / 2];
            float dq[32];                             // dQ_i's part: end_row's (kernel 12: the last row tile's, scores')
            P::scores(a, w, rt, s, dp, dq);           // s^T = K_w Q_i^T, dp^T = V_w dO_i^T

            /* p^T and ds^T: element 4 n + e is key key0 + 8 (e / 2), query i0 + 8 n + 2 t + e % 2. Masks only where
             * this warpgroup's keys can be hidden: past N, or causal and the row tile crosses the diagonal. */
            uint32_t pa[BR / 16][4], dsa[BR / 16][4];  // p^T, ds^T as A fragments (k = queries)
            if constexpr (requires { P::p_ds(a, w, rt, s, dp, dv, pa, dsa); }) {
                P::p_ds(a, w, rt, s, dp, dv, pa, dsa);   // kernels 7, 8: their own loops
            } else {
                /* Kernel 5: need_mask is a value inside the one loop: nvcc computes the mask of every element of
                 * every row tile, masked or not (kernel 7 says what that costs). This loop is the hook that B5Policy
                 * does not hold: in a function of its own, nvcc unrolls it before it meets the row's pointers, and
                 * kernel 5's machine code changes (see the note above B5Policy). */
                const bool need_mask = kw0 + 64 > N || (causal && i0 < kw0 + 63);
#pragma unroll
                for (int n = 0; n < BR / 8; n++) {
                    /* B5Policy's lse_pair and dl_pair, written out: called here, they changed kernels 5 and 6's
                     * machine code (cubins compared) */
                    const float2 lse = *reinterpret_cast<const float2 *>(lse_s + 8 * n + 2 * t);
                    const float2 dl = *reinterpret_cast<const float2 *>(dl_s + 8 * n + 2 * t);
                    bwd_p_ds4<T>(s + 4 * n, dp + 4 * n, lse, dl, scale_log2, need_mask, key0, i0 + 8 * n + 2 * t, N, causal,
                                 &pa[n / 2][(n % 2) * 2], &dsa[n / 2][(n % 2) * 2]);
                }
            }

            /* ds^T to shared memory in the swizzled layout (keys down, 64 queries
             * per 128-byte row, 16-byte chunk c of row r at c ^ (r % 8)): key row
             * r = 64 wg + 16 wiw + g (+8), query 8 n + 2 t: column block n / 8,
             * chunk n % 8, bytes 4 t in it. The 32 lanes hit 32 banks. */
#pragma unroll
            for (int n = 0; n < BR / 8; n++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int r = 64 * wg + 16 * wiw + g + 8 * h;
                    const int off = (n / 8) * BC * 128 + r * 128 + (((n % 8) ^ (r % 8)) * 16) + 4 * t;
                    *reinterpret_cast<uint32_t *>(base_ptr + (ds_s - base) + off) = dsa[n / 2][(n % 2) * 2 + h];
                }
            fence_proxy_async();                      // the threads' stores, read next by the tensor cores

            /* dV_w += p^T dO_i, dK_w += ds^T Q_i: k = the BR queries, 16 rows (2048 bytes) per step. */
            wgmma_fence();
#pragma unroll
            for (int ks = 0; ks < BR / 16; ks++) P::dv_dk_step(a, rt, ks, pa[ks], dsa[ks], dv, dk);
            wgmma_commit();

            /* Named barrier 1, the 256 consumer threads. After it: both halves
             * of ds^T[it % 2] are visible to all; and every consumer has finished
             * tile it - 1's dQ (kernels 5-11: end_row's wait; 12-20: scores'),
             * so tile it + 1 may overwrite ds^T[(it + 1) % 2]. */
            asm volatile("bar.sync 1, 256;\n" ::: "memory");
            P::end_row(a, w, rt, dq);                 // kernels 5-11: dQ_i += ds K_j; the stage freed (kernel 18: later)
        }

        float dq_end[32];                             // kernel 12: the walk's last dQ part (end_walk)
        P::end_walk(a, w, it, dq_end);
        if constexpr (requires { P::store_dkdv(a, w, dk, dv); }) {
            P::store_dkdv(a, w, dk, dv);              // kernel 13: through shared memory, by the copy engine
        } else {
            T *dKh = dK + bh * N * D, *dVh = dV + bh * N * D;
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const long key = key0 + 8 * h;
                if (key < N) {
#pragma unroll
                    for (int n = 0; n < D / 8; n++) {            // dK_j, dV_j written once
                        *reinterpret_cast<uint32_t *>(dKh + key * D + 8 * n + 2 * t) = pack2<T>(dk[4 * n + 2 * h] * scale, dk[4 * n + 2 * h + 1] * scale);
                        *reinterpret_cast<uint32_t *>(dVh + key * D + 8 * n + 2 * t) = pack2<T>(dv[4 * n + 2 * h], dv[4 * n + 2 * h + 1]);
                    }
                }
            }
        }
        item++;
    } while (P::ITEM_LOOP);
#else
    (void)lse2, (void)delta, (void)dq_acc, (void)dK, (void)dV, (void)N, (void)Npad, (void)kv_tiles, (void)causal;
    (void)scale_log2, (void)scale, (void)tm_k, (void)tm_v, (void)tm_q, (void)tm_do, (void)items, (void)slot;
    (void)tm_dk, (void)tm_dv;
#endif
}

// --- the launcher -------------------------------------------------------------------

static inline long bwd_wgmma_npad(long N) { return (N + 127) / 128 * 128; }

inline size_t B5Policy::workspace(long B, long H, long N, long D, int dtype)
{
    (void)dtype;
    return ((size_t)2 * B * H * bwd_wgmma_npad(N) + (size_t)B * H * N * D) * sizeof(float);
}

template <int D, typename T, class P>
static int wg_launch_dt(int id, const void *q, const void *k, const void *v, const void *o, const void *dout,
                        const float *L, void *dq, void *dk, void *dv, void *ws, long B, long H, long N, int dtype,
                        int causal, cudaStream_t s)
{
    using C = BwdWg<D, P>;
    char who[32];
    snprintf(who, sizeof who, "backward kernel %d", id);
    static KvMaps kv, qo, kvo;                    // K, V in boxes of BC rows; Q (.k), dO (.v) in boxes of BR (tma_map.cuh)
    if (kv.get(k, v, B * H, N, D, C::BC, dtype, who) || qo.get(q, dout, B * H, N, D, C::BR, dtype, who))
        return -1;
    if (P::DKV_MAPS && kvo.get(dk, dv, B * H, N, D, 64, dtype, who)) return -1;   // kernel 13: dK (.k), dV (.v), 64 keys a box
    auto kernel = bwd_wgmma<D, T, P>;
    if (smem_opt_in(kernel, C::bytes, "backward kernel", id, D)) return -1;
    const long Npad = bwd_wgmma_npad(N), BH = B * H;
    float *delta = (float *)ws, *lse2 = delta + BH * Npad, *dq_acc = lse2 + BH * Npad;
    if (bwd_preprocess(o, dout, L, delta, lse2, dq_acc, P::dq_rows(N, Npad), BH, N, Npad, D, dtype, s) != 0)
        return -1;
    P::before_main(dq_acc, BH, N, D, C::BR, s);
    const long kv_tiles = (N + C::BC - 1) / C::BC;
    const float scale = 1.0f / sqrtf((float)D), scale_log2 = LOG2E * scale;   // log2(e) / sqrt(D), as LOG2E * (1 / sqrt(D))
    const long items = BH * kv_tiles;
    const long grid = P::grid(items, who);
    if (grid < 0) return -1;
    kernel<<<(unsigned)grid, C::THREADS, C::bytes, s>>>(lse2, delta, dq_acc, (T *)dk, (T *)dv, N, Npad, kv_tiles, causal,
                                                         scale_log2, scale, kv.k, kv.v, qo.k, qo.v, (unsigned)items,
                                                         P::slot(), kvo.k, kvo.v);
    CUDA_CHECK_LAST();
    P::launched(items, grid);
    P::dkdv_written(dk, dv, (size_t)BH * N * D * sizeof(T), s);
    return P::convert_dq(dq_acc, dq, BH, N, Npad, D, scale, dtype, s);
}

/* Kernels 5-20's launch: the policy's instance for the dtype and D asked. */
template <class P>
static int wg_launch(int id, const void *q, const void *k, const void *v, const void *o, const void *dout,
                     const float *L, void *dq, void *dk, void *dv, void *ws, long B, long H, long N, long D, int dtype,
                     int causal, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (wgmma_refused()) return -1;
    if (dtype == DT_FP16 && D == 64)
        return wg_launch_dt<64, __half, P>(id, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, dtype, causal, s);
    if (dtype == DT_FP16 && D == 128)
        return wg_launch_dt<128, __half, P>(id, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, dtype, causal, s);
    if (dtype == DT_BF16 && D == 64)
        return wg_launch_dt<64, __nv_bfloat16, P>(id, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, dtype, causal, s);
    if (dtype == DT_BF16 && D == 128)
        return wg_launch_dt<128, __nv_bfloat16, P>(id, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, dtype, causal, s);
    fprintf(stderr, "%s: backward kernel %d takes fp16/bf16 and D = 64 or 128, not %s D=%ld\n", g_prog, id, dtype_name(dtype), D);
    return -1;
}

template <class P> static void wg_describe(long D, char *buf, size_t n)
{
    using C64 = BwdWg<64, P>;
    using C128 = BwdWg<128, P>;
    snprintf(buf, n, "%s1 producer + 2 consumer warpgroups (%d/%d registers) x 64 keys (BC=%d), row tiles of BR=%d by TMA in a "
             "2-stage ring, the 5 products on wgmma%s%s%s%s, dQ by %s, %zu bytes of shared memory",
             P::desc_items(), C64::REG_PRODUCER, C64::REG_CONSUMER, C64::BC, D == 64 ? C64::BR : C128::BR,
             P::DESC_ADD ? " (each k step's descriptor by one add)" : "", P::desc_mask(), P::desc_overlap(D), P::desc_late(),
             P::desc_dq(), D == 64 ? C64::bytes : C128::bytes);
}

static inline int bwd_wgmma_supports(long D) { return D == 64 || D == 128; }

#if RUNG == 5
static int b5_launch(const void *q, const void *k, const void *v, const void *o, const void *dout, const float *L,
                     void *dq, void *dk, void *dv, void *ws, long B, long H, long N, long D, int dtype, int causal,
                     void *stream)
{
    return wg_launch<B5Policy>(5, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, D, dtype, causal, stream);
}

static void b5_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    wg_describe<B5Policy>(D, buf, n);
}

static const BackwardKernel bwd5 = {
    .id = 5, .extends = 4, .name = "wgmma + TMA",
    .idea = "the five products on wgmma from swizzled shared memory, a TMA producer warpgroup, setmaxnreg",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = bwd_wgmma_supports,
    .workspace = B5Policy::workspace, .launch = b5_launch, .describe = b5_describe,
    .unavailable = wgmma_unavailable,
};
BWD_REGISTER(bwd5);
#endif
