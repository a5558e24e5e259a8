/*
 * overlap.cuh: the forward of kernels 13, 14 and 18-23 written once (as
 * bwd_mma.cuh is the backward of kernels 2-4): kernel 12's producer and
 * consumer warpgroups with the softmax of tile j under the product
 * P_{j-1} V_{j-1} (kernel 13's idea, its header says it), with PINGPONG the
 * two consumer warpgroups taking turns at the tensor cores (kernel 14's), with
 * PERSIST one block per SM walking row tiles handed out by a counter, Q
 * brought by the copy engine (kernel 18's), with WIDE_O O stored 16 bytes
 * a lane (kernel 19's), with CARRY the next row tile's first S issued
 * behind this one's last P V (kernel 20's), and with HALF_PV the causal diagonal's
 * masked half left out of warpgroup 0's last P V (kernel 21's), with DESC_ADD
 * each k step's wgmma descriptor made by one add (kernel 22's), and with
 * BITMASK the mask as one 32-bit word a row (kernel 23's). Built only for
 * sm_90a, like kernels 10-12.
 */
#ifndef OVERLAP_CUH
#define OVERLAP_CUH

#include <cmath>

#include "gpu.cuh"
#include "../kernels.h"
#include "launch_tc.cuh"
#include "../primitives/tc.cuh"
#include "../primitives/tile_order.cuh"
#include "../primitives/tma_map.cuh"
#include "../primitives/wgmma.cuh"

// --- the kernel ------------------------------------------------------------------

template <int D> struct K13 {
    static constexpr int NWG = 2;                         // consumer warpgroups, 64 rows each (D = 64 too: kernel13_overlap.cu says why)
    static constexpr int BR = 64 * NWG, BC = 128, STAGES = 2;
    static constexpr int THREADS = 128 * (NWG + 1);       // + the producer warpgroup
    static constexpr int REG_PRODUCER = 24, REG_CONSUMER = 240;  // 128 x 24 + 256 x 240 = 384 x 168
    static constexpr int TILE = BC * D * 2;               // one K or V tile, bytes
    static constexpr int QTILE = BR * D * 2;              // kernel 18's Q tile in shared memory, bytes
    static constexpr size_t bytes = 2 * STAGES * (size_t)TILE + 4 * 8 * STAGES + 1024; /* K, V; mbarriers; alignment */
    /* kernel 18 (PERSIST): + Q; the mbarriers full_q, empty_q, full_t[2], empty_t[2]; two tickets */
    static constexpr size_t bytes_persist = bytes + QTILE + 6 * 8 + 2 * 4;
    /* setmaxnreg moves registers inside the block's own allocation, fixed at launch: THREADS x (65536 / THREADS,
     * rounded down to 8): 384 x 168 = 64512 at both D */
    static_assert(128 * REG_PRODUCER + 128 * NWG * REG_CONSUMER <= THREADS * ((65536 / THREADS) & ~7), "more than the block holds");
};

/* Kernel 18's tickets: a counter in global memory that never goes back to zero. A launch of kernel 18 takes exactly
 * items + grid numbers from it (each block takes tickets until one is past the last item, which tells it to stop),
 * so the launcher knows where the next launch's tickets start (ticket0) without a memset in front of every launch.
 * The cost: two launches of kernel 18 must not run at the same time (one stream: every caller here). */
static __device__ unsigned g_tickets;

/* The body of the kernels below, PERSIST or not (tm_q, BH, G and ticket0 are read only when PERSIST); WIDE_O: kernel
 * 19's store of O; CARRY: kernel 20's early start of the next row tile (PERSIST only); HALF_PV: kernel 21's causal
 * diagonal; DESC_ADD: kernel 22's descriptors; BITMASK: kernel 23's mask. */
template <int D, typename T, bool PINGPONG, bool PERSIST, bool WIDE_O = false, bool CARRY = false, bool HALF_PV = false,
          bool DESC_ADD = false, bool BITMASK = false>
__device__ __forceinline__ void overlap_body(const T *__restrict__ Q, T *__restrict__ O, float *__restrict__ L, long N,
                                             long row_tiles, int causal, float scale_log2, const CUtensorMap &tm_k,
                                             const CUtensorMap &tm_v, const CUtensorMap &tm_q, long BH, long G, unsigned ticket0)
{
    static_assert(!CARRY || PERSIST, "kernel 20's carried S_0 takes the next item's ticket: kernel 18's ring");
    static_assert(!HALF_PV || CARRY, "kernel 21 extends kernel 20");
    static_assert(!DESC_ADD || HALF_PV, "kernel 22 extends kernel 21");
    static_assert(!BITMASK || DESC_ADD, "kernel 23 extends kernel 22");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using C = K13<D>;
    constexpr int BC = C::BC, TILE = C::TILE, STAGES = C::STAGES;
    extern __shared__ unsigned char smem_raw[];
    const uint32_t raw_addr = (uint32_t)__cvta_generic_to_shared(smem_raw);  // 1024-aligned for the swizzle
    const uint32_t smem_addr = (raw_addr + 1023) & ~1023u;
    /* [K stage 0 .. STAGES-1][V stage 0 .. STAGES-1], TILE bytes each, (kernel 18: then Q, QTILE bytes,) then
     * the mbarriers full_k, full_v, empty_k, empty_v [STAGES], 8 bytes each */
    const uint32_t q_addr = smem_addr + 2 * STAGES * TILE;
    const uint32_t full_k = q_addr + (PERSIST ? C::QTILE : 0), full_v = full_k + 8 * STAGES;
    const uint32_t empty_k = full_v + 8 * STAGES, empty_v = empty_k + 8 * STAGES;
    /* kernel 18: Q's two mbarriers, then the two-slot ring of tickets the producer passes to the consumers */
    const uint32_t full_q = empty_v + 8 * STAGES, empty_q = full_q + 8, full_t = empty_q + 8, empty_t = full_t + 16;
    volatile unsigned *tickets = reinterpret_cast<volatile unsigned *>(smem_raw + (empty_t + 16 - raw_addr));
    const unsigned items = (unsigned)(BH * row_tiles);

    auto kv_tiles = [&](long tile) {              // the K/V tiles row tile `tile` visits
        const long last_row = (tile * C::BR + C::BR < N ? tile * C::BR + C::BR : N) - 1;
        const long jend = causal ? last_row + 1 : N;
        return (jend + BC - 1) / BC;
    };
    long bh = 0, tile = 0, ntiles = 0;            // kernel 18: per ticket, below
    if constexpr (!PERSIST) {
        block_tile(row_tiles, causal, &bh, &tile);    // causal: longest first (tile_order.cuh)
        ntiles = kv_tiles(tile);
    }

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) {
            mbar_init(full_k + 8 * s, 1);
            mbar_init(full_v + 8 * s, 1);
            mbar_init(empty_k + 8 * s, 4 * C::NWG);  // one arrival per consumer warp
            mbar_init(empty_v + 8 * s, 4 * C::NWG);
        }
        if constexpr (PERSIST) {
            mbar_init(full_q, 1);
            mbar_init(empty_q, 4 * C::NWG);
            for (int s = 0; s < 2; s++) {
                mbar_init(full_t + 8 * s, 1);
                mbar_init(empty_t + 8 * s, 128 * C::NWG);  // one arrival per consumer thread (below: racecheck)
            }
        }
        fence_mbar_init();
    }
    __syncthreads();                              // the last block-wide barrier of the kernel

    if (threadIdx.x < 128) {
        /* The producer warpgroup: registers back to the pool, then one thread
         * walks the K/V tiles. K_j goes to stage j % STAGES once every
         * consumer warp has released K_{j-STAGES} (after its S), V_j once
         * they have released V_{j-STAGES} (after its P V, an iteration later).
         * Kernel 18 counts on across its items (jb: the tiles of its items before this one), so the ring runs on
         * unbroken: the next item's first K/V tiles load while this item's last are in use. */
        setmaxnreg_dec<C::REG_PRODUCER>();
        if (threadIdx.x == 0) {
            auto load_kv = [&](long bh, long ntiles, long jb) {
                for (long j = 0; j < ntiles; j++) {
                    const int s = (int)((jb + j) % STAGES), use = (int)(((jb + j) / STAGES) & 1);
                    const uint32_t k_dst = smem_addr + s * TILE, v_dst = smem_addr + (STAGES + s) * TILE;
                    mbar_wait(empty_k + 8 * s, use ^ 1);   // first use of a stage: passes at once
                    mbar_expect_tx(full_k + 8 * s, TILE);
#pragma unroll
                    for (int blk = 0; blk < D / 64; blk++)
                        tma_load_3d(k_dst + blk * BC * 128, &tm_k, blk * 64, (int)(j * BC), (int)bh, full_k + 8 * s);
                    mbar_wait(empty_v + 8 * s, use ^ 1);
                    mbar_expect_tx(full_v + 8 * s, TILE);
#pragma unroll
                    for (int blk = 0; blk < D / 64; blk++)
                        tma_load_3d(v_dst + blk * BC * 128, &tm_v, blk * 64, (int)(j * BC), (int)bh, full_v + 8 * s);
                }
            };
            if constexpr (PERSIST) {
                /* Kernel 18: take a ticket, hand it to the consumers through the ring, then load its Q (once they
                 * have read the last one into registers) and its K/V tiles; the next ticket is taken before the
                 * loads, so the atomic's round trip to L2 hides under them. */
                unsigned ticket = atomicAdd(&g_tickets, 1u) - ticket0;
                long jb = 0;
                for (long it = 0;; it++) {
                    const int slot = (int)(it % 2);
                    mbar_wait(empty_t + 8 * slot, (int)((it / 2) & 1) ^ 1);
                    tickets[slot] = ticket;
                    mbar_arrive(full_t + 8 * slot);        // release: the ticket is visible to whoever waits
                    if (ticket >= items) break;            // past the last item: this block is done
                    const unsigned next = atomicAdd(&g_tickets, 1u) - ticket0;
                    ticket_tile(ticket, BH, row_tiles, causal, G, &bh, &tile);
                    mbar_wait(empty_q, (int)(it & 1) ^ 1);
                    mbar_expect_tx(full_q, C::QTILE);
#pragma unroll
                    for (int blk = 0; blk < D / 64; blk++)
                        tma_load_3d(q_addr + blk * C::BR * 128, &tm_q, blk * 64, (int)(tile * C::BR), (int)bh, full_q);
                    ntiles = kv_tiles(tile);
                    load_kv(bh, ntiles, jb);
                    jb += ntiles;
                    ticket = next;
                }
            } else {
                load_kv(bh, ntiles, 0);
            }
        }
        return;
    }
    setmaxnreg_inc<C::REG_CONSUMER>();

    /* A consumer warp: kernel 12's work on its 16 rows, reordered. */
    const int warp = threadIdx.x / 32 - 4, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    auto release = [&](uint32_t bar) {            // this warp is done with a K or V stage (kernel 18: Q, a ticket)
        __syncwarp();
        if (lane == 0) mbar_arrive(bar);
    };

    /* PINGPONG (kernel 14): the two consumer warpgroups take turns issuing
     * their products; warpgroup wg waits on named barrier 1 + wg and hands
     * over on the other's. Without it (kernel 13) the turns compile to nothing. */
    const int wg = warp / 4;
    auto my_turn = [&]() {
        if constexpr (PINGPONG) asm volatile("bar.sync %0, 256;\n" ::"r"(1 + wg) : "memory");
    };
    auto your_turn = [&]() {
        if constexpr (PINGPONG) asm volatile("bar.arrive %0, 256;\n" ::"r"(1 + (wg ^ 1)) : "memory");
    };
    if (wg == 1) your_turn();                     // warpgroup 0 goes first

    long jb = 0;                                  // kernel 18: the K/V tiles of this block's items before this one
    long warp_row0 = 0, row_g = 0, row_g8 = 0;    // the item's rows: this warp's first, this lane's two
    uint32_t qf[D / 16][4];                       // Q_i's A fragments, rows past N as zeros
    float o[D / 2];
    float m[2], l[2];                             // rows g and g + 8, log2 units
    float s[BC / 2];                              // S_j, then p_j as floats
    uint32_t pf[BC / 16][4];                      // p_{j-1} as A fragments of O += P V

    /* Kernel 18: the block's next item, ticket `it` from the ring; false past the last. */
    auto take_ticket = [&](long it, long *nbh, long *ntile) {
        const int slot = (int)(it % 2);
        mbar_wait(full_t + 8 * slot, (int)((it / 2) & 1));
        /* Every lane reads the ticket and every thread arrives on empty_t itself: compute-sanitizer's racecheck
         * follows an mbarrier between the threads that arrive and wait on it, not a __syncwarp before one lane's
         * arrival (one arrival per warp: it reported the producer's next write to the slot against these reads).
         * The shuffle from lane 0 changes no value; it tells the compiler the ticket is the same on every lane,
         * so the tile loop below keeps its addresses and barrier phases in uniform registers, as kernel 14's does
         * (without it, counted in the machine code at D = 64: 958 per-thread instructions per tile iteration
         * instead of 849; kernel 14: 832). */
        const unsigned ticket = __shfl_sync(0xffffffffu, tickets[slot], 0);
        mbar_arrive(empty_t + 8 * slot);
        if (ticket >= items) return false;
        ticket_tile(ticket, BH, row_tiles, causal, G, nbh, ntile);
        return true;
    };
    /* An item's start: its rows (row tile rt), Q_i's fragments (kernel 18: item it's Q tile from shared memory) */
    auto start_item = [&](long it, long rt) {
        warp_row0 = rt * C::BR + warp * 16;        // consumer warpgroup warp/4, its warp warp%4
        row_g = warp_row0 + g, row_g8 = row_g + 8;
        if constexpr (PERSIST) {
            /* Kernel 18: from the Q tile the copy engine left in shared memory (128-byte swizzle: row r's 16-byte
             * chunk c at c ^ (r % 8); rows past N arrived as zeros), then the tile is released for the next item's. */
            mbar_wait(full_q, (int)(it & 1));
            const unsigned char *qs = smem_raw + (q_addr - raw_addr);
#pragma unroll
            for (int ks = 0; ks < D / 16; ks++)
#pragma unroll
                for (int r = 0; r < 4; r++) {
                    const int row = warp * 16 + g + 8 * (r % 2), col = (ks % 4) * 16 + 2 * t + 8 * (r / 2);
                    qf[ks][r] = *reinterpret_cast<const uint32_t *>(qs + (ks / 4) * C::BR * 128 + row * 128 +
                                                                     (((col / 8) ^ (row % 8)) * 16) + (col % 8) * 2);
                }
            release(empty_q);
        } else {
            (void)it;
            const T *Qh = Q + bh * N * D;
#pragma unroll
            for (int ks = 0; ks < D / 16; ks++)
#pragma unroll
                for (int r = 0; r < 4; r++) {
                    const long row = (r % 2) ? row_g8 : row_g;
                    const int col = ks * 16 + 2 * t + 8 * (r / 2);
                    qf[ks][r] = row < N ? *reinterpret_cast<const uint32_t *>(Qh + row * D + col) : 0u;
                }
        }
    };
    auto clear = [&]() {                          // O, m and l before an item's first tile
#pragma unroll
        for (int n = 0; n < D / 2; n++) o[n] = 0.0f;
        m[0] = m[1] = -INFINITY;
        l[0] = l[1] = 0.0f;
    };

    /* The three pieces of a tile's work, in the order kernel 12 does them;
     * the loop below interleaves them across tiles. */
    auto stage = [&](long j, uint32_t base) { return base + 8 * (uint32_t)((jb + j) % STAGES); };
    auto parity = [&](long j) { return (int)(((jb + j) / STAGES) & 1); };
    auto issue_s = [&](long j) {                  // S_j = Q_i K_j^T, issued, not waited for
        const uint32_t k_addr = smem_addr + (uint32_t)((jb + j) % STAGES) * TILE;
        const uint64_t k_desc = make_desc(k_addr, 16, 1024);
        mbar_wait(stage(j, full_k), parity(j));   // K_j has landed
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < D / 16; ks++) {
            const uint32_t at = (ks / 4) * BC * 128 + (ks % 4) * 32;  // k step ks's first byte in the tile
            const uint64_t desc = DESC_ADD ? desc_add(k_desc, at) : make_desc(k_addr + at, 16, 1024);
            wgmma_m64n128k16<T, 0>(s, qf[ks], desc, ks > 0);
        }
        wgmma_commit();
    };
    auto issue_pv = [&](long j, int k_steps = K13<D>::BC / 16) {  // O += P_j V_j, issued, not waited for (kernel 21: fewer k_steps)
        const uint32_t v_addr = smem_addr + (uint32_t)(STAGES + (jb + j) % STAGES) * TILE;
        const uint64_t v_desc = make_desc(v_addr, BC * 128, 1024);
        mbar_wait(stage(j, full_v), parity(j));   // V_j has landed
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < k_steps; ks++) {
            const uint64_t desc = DESC_ADD ? desc_add(v_desc, ks * 2048) : make_desc(v_addr + ks * 2048, BC * 128, 1024);
            if constexpr (D == 64) wgmma_m64n64k16<T, 1>(o, pf[ks], desc, 1);
            else wgmma_m64n128k16<T, 1>(o, pf[ks], desc, 1);
        }
        wgmma_commit();
    };
    /* Kernel 9's softmax of S_j on this warp's 16 rows: m, l updated, p_j
     * left in s as floats, alpha_j returned for O (not touched here: a P V
     * may still be accumulating into it). */
    auto softmax = [&](long j, float alpha[2]) {
        const long j0 = j * BC;
        const bool need_mask = j0 + BC > N || (causal && j0 + BC - 1 > warp_row0);
        const int lim = (int)(N - j0 < BC ? N - j0 : BC);
        float mt[2] = {-INFINITY, -INFINITY};
        if (need_mask && BITMASK) {
            /* Kernel 23: the mask as one 32-bit word a row. This lane holds, of each of its two rows, the keys
             * c = 8n + 2t + b (n < BC / 8, b = 0, 1): number them k = 2n + b, 0 ... 31. Key c is seen when
             * c < vis (vis: the row's visible keys in this tile, the causal diagonal's d + 1, the sequence's end lim),
             * that is when 8n + b < vis - 2t, when k < 2 floor(v / 8) + min(v mod 8, 2) with v = vis - 2t: the
             * first `keep` bits of the word are set. Each score then costs a bit test with a constant (the compiler
             * turns two at a time into predicates, R2P) and a select, not kernel 22's column, compares and or. */
            static_assert(BC / 4 == 32, "a row's keys on this lane fill one 32-bit word");
            uint32_t word[2];
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int d = (int)((h == 0 ? row_g : row_g8) - j0);      // keys 0 ... d of this tile: at or left of the diagonal
                const int vis = causal && d + 1 < lim ? d + 1 : lim;       // keys 0 ... vis - 1 visible in this row
                const int v = vis - 2 * t < 0 ? 0 : vis - 2 * t;           // at most BC
                const int keep = (v / 8) * 2 + (v % 8 < 2 ? v % 8 : 2);    // bits 0 ... keep - 1
                word[h] = keep >= 32 ? 0xffffffffu : (1u << keep) - 1u;
            }
#pragma unroll
            for (int n = 0; n < BC / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    if (!((word[e / 2] >> (2 * n + e % 2)) & 1u)) s[4 * n + e] = -INFINITY;
                    mt[e / 2] = fmaxf(mt[e / 2], s[4 * n + e]);
                }
        } else if (need_mask) {
#pragma unroll
            for (int n = 0; n < BC / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int c = n * 8 + 2 * t + (e % 2), d = (int)((e < 2 ? row_g : row_g8) - j0);
                    if (c >= lim || (causal && c > d)) s[4 * n + e] = -INFINITY;
                    mt[e / 2] = fmaxf(mt[e / 2], s[4 * n + e]);
                }
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
    };
    auto rescale_and_pack = [&](const float alpha[2]) {  // O *= alpha_j; p_j into pf
#pragma unroll
        for (int n = 0; n < D / 8; n++) {
            o[4 * n + 0] *= alpha[0]; o[4 * n + 1] *= alpha[0];
            o[4 * n + 2] *= alpha[1]; o[4 * n + 3] *= alpha[1];
        }
#pragma unroll
        for (int n = 0; n < BC / 8; n++) {
            pf[n / 2][(n % 2) * 2 + 0] = pack2<T>(s[4 * n + 0], s[4 * n + 1]);
            pf[n / 2][(n % 2) * 2 + 1] = pack2<T>(s[4 * n + 2], s[4 * n + 3]);
        }
    };

    /* Kernel 21 (HALF_PV): the last K/V tile of a causal row tile is its diagonal (j0 = i0: BR = BC), and warpgroup
     * 0's 64 rows see only its first 64 keys; the other 64 have p = 0 in every row (masked, e^-inf), so their half of
     * the last P V adds exact zeros: warpgroup 0 leaves it out, 4 of its 8 k steps (BC / 16). The branch is on a
     * warp-uniform value (the shuffle tells the compiler so) and outside the tile loop: a wgmma shape chosen at run
     * time inside the loop cost the whole loop (RESULTS.md, the half-width diagonal). */
    auto issue_last_pv = [&](long j) {
        if constexpr (HALF_PV) {
            if (causal && __shfl_sync(0xffffffffu, wg, 0) == 0) issue_pv(j, BC / 32);
            else issue_pv(j);
        } else {
            issue_pv(j);
        }
    };

    /* The item's end: V's last stage released, O = o / l and L stored (kernel 20: before the item's rows move on) */
    auto store_o = [&]() {
        release(stage(ntiles - 1, empty_v));
        T *Oh = O + bh * N * D;
        const long orow_g = CARRY ? (tile * C::BR + warp * 16 + g) : row_g;  // start_item moved row_g on (kernel 20)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            float lr = l[h];
#pragma unroll
            for (int off = 1; off <= 2; off *= 2) lr += __shfl_xor_sync(0xffffffffu, lr, off);
            const float inv = lr > 0.0f ? 1.0f / lr : 0.0f;
            const long row = orow_g + 8 * h;
            if constexpr (WIDE_O) {
                /* Kernel 19: lane t of a quad holds 4 bytes (columns 2t, 2t+1) of each 16-byte column block n of
                 * its row; a 4 x 4 transpose inside the quad, two rounds of shuffles on 4 blocks n0..n0+3, leaves
                 * lane t all 16 bytes of block n0 + t: one 16-byte store where there were four of 4 bytes. Round 1
                 * (lanes t, t^1): the pair's words of blocks n0 + (t & 1) and n0 + 2 + (t & 1), 8 bytes each, columns
                 * 4 (t >> 1)..; round 2 (lanes t, t^2): the other 8 bytes of one of them. The shuffles run in every
                 * lane (rows past N too): __shfl_xor_sync names the whole warp. */
                const bool odd = t & 1, hi = t >> 1;
#pragma unroll
                for (int n0 = 0; n0 < D / 8; n0 += 4) {
                    uint32_t w[4];
#pragma unroll
                    for (int b = 0; b < 4; b++) w[b] = pack2<T>(o[4 * (n0 + b) + 2 * h] * inv, o[4 * (n0 + b) + 2 * h + 1] * inv);
                    const uint32_t r0 = __shfl_xor_sync(0xffffffffu, odd ? w[0] : w[1], 1);
                    const uint32_t r1 = __shfl_xor_sync(0xffffffffu, odd ? w[2] : w[3], 1);
                    const uint32_t a0 = odd ? r0 : w[0], a1 = odd ? w[1] : r0;   // block n0 + odd, columns 4 hi..4 hi + 3
                    const uint32_t c0 = odd ? r1 : w[2], c1 = odd ? w[3] : r1;   // block n0 + 2 + odd, the same columns
                    const uint32_t s0 = __shfl_xor_sync(0xffffffffu, hi ? a0 : c0, 2);
                    const uint32_t s1 = __shfl_xor_sync(0xffffffffu, hi ? a1 : c1, 2);
                    const uint4 v = hi ? make_uint4(s0, s1, c0, c1) : make_uint4(a0, a1, s0, s1);
                    if (row < N) *reinterpret_cast<uint4 *>(Oh + row * D + (n0 + t) * 8) = v;
                }
            }
            if (row < N) {
                if constexpr (!WIDE_O)
#pragma unroll
                    for (int n = 0; n < D / 8; n++)
                        *reinterpret_cast<uint32_t *>(Oh + row * D + n * 8 + 2 * t) = pack2<T>(o[4 * n + 2 * h] * inv, o[4 * n + 2 * h + 1] * inv);
                if (L != nullptr && t == 0)   // the quad's four lanes hold the same m and l
                    L[bh * N + row] = lr > 0.0f ? m[h] * 0.69314718055994531f + logf(lr) : -INFINITY; // L = m + log l
            }
        }
    };

    float alpha[2];
    /* Kernel 20 (CARRY): an item's S_0 is issued at the end of the item before (below), so the first item's is issued
     * here, before the loop, and a block with no item leaves at once. ptxas must never see two ways meet where an S
     * is running on one and not on the other (an S_0 under a branch): it then serialises every wgmma (C7515). */
    if constexpr (CARRY) {
        if (!take_ticket(0, &bh, &tile)) {        // every ticket taken before this block's first
            if (wg == 0) my_turn();               // the turn warpgroup 1 handed over at the start
            return;
        }
        ntiles = kv_tiles(tile);
        start_item(0, tile);
        my_turn();
        issue_s(0);
        your_turn();
    }
    for (long it = 0; PERSIST || it < 1; it++) {  // kernels 13, 14: one item, the block's; kernels 18-23: until a break
        if constexpr (!CARRY) {
            if constexpr (PERSIST) {
                if (!take_ticket(it, &bh, &tile)) break;
                ntiles = kv_tiles(tile);
            }
            start_item(it, tile);
            clear();
            my_turn();
            issue_s(0);                           // prologue: tile 0 has no P V before it
            your_turn();
        }
        wgmma_wait<0>();
        if constexpr (CARRY) clear();             // kernel 20: after S_0's wait, not under it (O is a wgmma accumulator)
        release(stage(0, empty_k));
        softmax(0, alpha);
        rescale_and_pack(alpha);
        for (long j = 1; j < ntiles; j++) {
            my_turn();
            issue_s(j);                               // S_j ...
            issue_pv(j - 1);                          // ... and O += P_{j-1} V_{j-1} behind it
            your_turn();                              // ping-pong: the other warpgroup's products start under this softmax
            wgmma_wait<1>();                          // S_j is in; P V still running
            release(stage(j, empty_k));
            softmax(j, alpha);                        // under P_{j-1} V_{j-1}
            wgmma_wait<0>();
            release(stage(j - 1, empty_v));
            rescale_and_pack(alpha);
        }
        /* Kernel 20 (CARRY): the next item's ticket and Q are taken now, and its S_0 goes to the tensor cores right
         * behind this item's last P V (it is tile jb + ntiles of the K ring, which the producer loads without a break
         * between items), so it runs under O's store and the next item starts at its softmax. Kernels 13, 14, 18 and
         * 19 issue it after the store. The block's last item ends apart, with a break: an S_0 issued under a branch
         * and waited for after it, the two ways meeting, made ptxas serialise every wgmma (C7515). */
        if constexpr (CARRY) {
            long nbh = 0, ntile = 0;
            if (!take_ticket(it + 1, &nbh, &ntile)) { // the ticket past the last: this was the block's last item
                my_turn();
                issue_last_pv(ntiles - 1);
                your_turn();
                wgmma_wait<0>();
                store_o();
                break;
            }
            start_item(it + 1, ntile);                // qf is free: S_{ntiles-1} has been waited for
            my_turn();
            issue_last_pv(ntiles - 1);                // the last P V ...
            issue_s(ntiles);                          // ... and the next item's S_0 behind it
            your_turn();
            wgmma_wait<1>();                          // the P V is in; S_0 still running
            store_o();
            jb += ntiles;
            bh = nbh, tile = ntile, ntiles = kv_tiles(tile);
        } else {
            my_turn();
            issue_pv(ntiles - 1);                     // epilogue: the last P V
            if (wg == 0 || PERSIST) your_turn();      // kernel 14: warpgroup 1's last turn needs no hand-over, none follows
            wgmma_wait<0>();
            store_o();
            jb += ntiles;
        }
    }
    if constexpr (PERSIST)
        if (wg == 0) my_turn();                   // kernel 18: the turn warpgroup 1 handed over after its last item
#else
    (void)Q, (void)O, (void)L, (void)N, (void)row_tiles, (void)causal, (void)scale_log2, (void)tm_k, (void)tm_v, (void)tm_q,
        (void)BH, (void)G, (void)ticket0;
#endif
}

template <int D, typename T, bool PINGPONG>
__global__ void __launch_bounds__(K13<D>::THREADS, 1)
wgmma_overlap(const T *__restrict__ Q,  // [B, H, N, D]
               T *__restrict__ O,        // [B, H, N, D]
               float *__restrict__ L,    // [B, H, N] or NULL: L = m + log l per row, for the backward
               long N, long row_tiles, int causal, float scale_log2,
               const __grid_constant__ CUtensorMap tm_k,  // K, V as [B*H][N][D] for the copy engine
               const __grid_constant__ CUtensorMap tm_v)
{
    overlap_body<D, T, PINGPONG, false>(Q, O, L, N, row_tiles, causal, scale_log2, tm_k, tm_v, tm_k, 0, 0, 0);
}

/* Kernel 18: one block per SM (gridDim.x <= BH * row_tiles), Q as a tensor map too, the tickets from ticket0 on, causal
 * row tiles in groups of G heads (tile_order.cuh). Kernel 19: WIDE_O. Kernel 20: WIDE_O and CARRY. Kernel 21: HALF_PV
 * too. Kernel 22: DESC_ADD too. Kernel 23: BITMASK too. */
template <int D, typename T, bool WIDE_O, bool CARRY, bool HALF_PV, bool DESC_ADD, bool BITMASK>
__global__ void __launch_bounds__(K13<D>::THREADS, 1)
wgmma_persist(const T *__restrict__ Q, T *__restrict__ O, float *__restrict__ L, long N, long row_tiles, int causal,
              float scale_log2, const __grid_constant__ CUtensorMap tm_k, const __grid_constant__ CUtensorMap tm_v,
              const __grid_constant__ CUtensorMap tm_q, long BH, long G, unsigned ticket0)
{
    overlap_body<D, T, true, true, WIDE_O, CARRY, HALF_PV, DESC_ADD, BITMASK>(Q, O, L, N, row_tiles, causal, scale_log2, tm_k, tm_v, tm_q, BH, G, ticket0);
}


// --- the launcher -------------------------------------------------------------------

template <int D, typename T, bool PINGPONG>
static int overlap_launch_dt(int id, const void *q, const void *k, const void *v, void *o, float *Lp, long B, long H, long N,
                             int dtype, int causal, cudaStream_t s)
{
    using C = K13<D>;
    char who[16];
    snprintf(who, sizeof who, "kernel %d", id);
    static KvMaps maps;                           // K and V for the copy engine (tma_map.cuh)
    if (maps.get(k, v, B * H, N, D, C::BC, dtype, who)) return -1;
    if (smem_opt_in(wgmma_overlap<D, T, PINGPONG>, C::bytes, "kernel", id, D)) return -1;
    const long row_tiles = (N + C::BR - 1) / C::BR;
    const float scale_log2 = 1.4426950408889634f / sqrtf((float)D); /* log2(e) / sqrt(D) */
    wgmma_overlap<D, T, PINGPONG><<<(unsigned)(B * H * row_tiles), C::THREADS, C::bytes, s>>>(
        (const T *)q, (T *)o, Lp, N, row_tiles, causal, scale_log2, maps.k, maps.v);
    CUDA_CHECK_LAST();
    return 0;
}

/* Kernel 18's launch: one block per SM (fewer when there are fewer items), Q's tensor map beside K's and V's (KvMaps
 * makes pairs: Q's twice), the tickets from g_ticket0 on. The shared-memory opt-in and the SM count are asked on
 * the first launch of each instance only: a host call between the timer's start and the launch is in the time. */
static unsigned g_ticket0;                        // where the next launch's tickets start (g_tickets, above)

template <int D, typename T, bool WIDE_O, bool CARRY, bool HALF_PV, bool DESC_ADD, bool BITMASK>
static int persist_launch_dt(int id, const void *q, const void *k, const void *v, void *o, float *Lp, long B, long H, long N,
                             int dtype, int causal, cudaStream_t s)
{
    using C = K13<D>;
    char who[16];
    snprintf(who, sizeof who, "kernel %d", id);
    static KvMaps maps, qmaps;
    if (maps.get(k, v, B * H, N, D, C::BC, dtype, who) || qmaps.get(q, q, B * H, N, D, C::BR, dtype, who)) return -1;
    static int sms = 0, l2 = 0;
    if (sms == 0) {
        int dev = 0;
        if (smem_opt_in(wgmma_persist<D, T, WIDE_O, CARRY, HALF_PV, DESC_ADD, BITMASK>, C::bytes_persist, "kernel", id, D)) return -1;
        CUDA_CHECK(cudaGetDevice(&dev));
        CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
        CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    }
    const long row_tiles = (N + C::BR - 1) / C::BR, items = B * H * row_tiles;
    if (items > 0x7fffffffL) {
        fprintf(stderr, "%s: %s: %ld row tiles, more than its 32-bit tickets count\n", g_prog, who, items);
        return -1;
    }
    const long grid = items < sms ? items : sms;
    /* causal: heads per group, so that a group's K and V (4 N D bytes a head) fill half of L2, and at least two row
     * tiles per SM in a group (tile_order.cuh) */
    long G = (l2 / 2) / (4 * N * D);
    if (G * row_tiles < 2L * sms) G = (2L * sms + row_tiles - 1) / row_tiles;
    if (G > B * H) G = B * H;
    const float scale_log2 = 1.4426950408889634f / sqrtf((float)D); /* log2(e) / sqrt(D) */
    wgmma_persist<D, T, WIDE_O, CARRY, HALF_PV, DESC_ADD, BITMASK><<<(unsigned)grid, C::THREADS, C::bytes_persist, s>>>((const T *)q, (T *)o, Lp, N, row_tiles,
                                                                                      causal, scale_log2, maps.k, maps.v,
                                                                                      qmaps.k, B * H, G, g_ticket0);
    CUDA_CHECK_LAST();
    g_ticket0 += (unsigned)(items + grid);        // every item's ticket, and one past the end per block
    return 0;
}

/* One (D, dtype) instance of kernel 13, 14 (PERSIST false), 18, 19 (WIDE_O), 20 (WIDE_O, CARRY), 21 (and HALF_PV), 22
 * (and DESC_ADD) or 23 (and BITMASK). */
template <int D, typename T, bool PINGPONG, bool PERSIST, bool WIDE_O, bool CARRY, bool HALF_PV, bool DESC_ADD, bool BITMASK>
static int overlap_launch_any(int id, const void *q, const void *k, const void *v, void *o, float *Lp, long B, long H, long N,
                              int dtype, int causal, cudaStream_t s)
{
    if constexpr (PERSIST) return persist_launch_dt<D, T, WIDE_O, CARRY, HALF_PV, DESC_ADD, BITMASK>(id, q, k, v, o, Lp, B, H, N, dtype, causal, s);
    else return overlap_launch_dt<D, T, PINGPONG>(id, q, k, v, o, Lp, B, H, N, dtype, causal, s);
}

template <bool PINGPONG, bool PERSIST = false, bool WIDE_O = false, bool CARRY = false, bool HALF_PV = false,
          bool DESC_ADD = false, bool BITMASK = false>
static int overlap_launch_l(int id, const void *q, const void *k, const void *v, void *o, float *Lp, long B, long H, long N,
                            long D, int dtype, int causal, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (wgmma_refused()) return -1;
    if (dtype == DT_FP16 && D == 64) return overlap_launch_any<64, __half, PINGPONG, PERSIST, WIDE_O, CARRY, HALF_PV, DESC_ADD, BITMASK>(id, q, k, v, o, Lp, B, H, N, dtype, causal, s);
    if (dtype == DT_FP16 && D == 128) return overlap_launch_any<128, __half, PINGPONG, PERSIST, WIDE_O, CARRY, HALF_PV, DESC_ADD, BITMASK>(id, q, k, v, o, Lp, B, H, N, dtype, causal, s);
    if (dtype == DT_BF16 && D == 64)
        return overlap_launch_any<64, __nv_bfloat16, PINGPONG, PERSIST, WIDE_O, CARRY, HALF_PV, DESC_ADD, BITMASK>(id, q, k, v, o, Lp, B, H, N, dtype, causal, s);
    if (dtype == DT_BF16 && D == 128)
        return overlap_launch_any<128, __nv_bfloat16, PINGPONG, PERSIST, WIDE_O, CARRY, HALF_PV, DESC_ADD, BITMASK>(id, q, k, v, o, Lp, B, H, N, dtype, causal, s);
    fprintf(stderr, "%s: kernel %d takes fp16/bf16 and D = 64 or 128, not %s D=%ld\n", g_prog, id, dtype_name(dtype), D);
    return -1;
}

static inline void overlap_describe(long D, char *buf, size_t n)
{
    const int nwg = D == 64 ? K13<64>::NWG : K13<128>::NWG;
    snprintf(buf, n, "1 producer + %d consumer warpgroups (%d/%d registers), BR=%d BC=%d, %d-stage K/V ring, %zu bytes of "
             "shared memory", nwg, D == 64 ? K13<64>::REG_PRODUCER : K13<128>::REG_PRODUCER,
             D == 64 ? K13<64>::REG_CONSUMER : K13<128>::REG_CONSUMER, 64 * nwg, K13<64>::BC, K13<64>::STAGES,
             D == 64 ? K13<64>::bytes : K13<128>::bytes);
}

#endif
