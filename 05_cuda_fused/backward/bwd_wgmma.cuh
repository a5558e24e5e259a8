/*
 * bwd_wgmma.cuh: the Hopper backward of backward kernels 5-12
 * (FlashAttention-3's scheme: wgmma, the TMA, warp specialisation), written
 * once; the files set its seven parameters and say what each changes: BULK
 * (kernel 6: how dQ's part leaves the block), MASK_BRANCH (kernel 7: the
 * masks only in the row tiles that need them), OVERLAP (kernel 8: p^T
 * computed while dp^T is on the tensor cores), DET (kernel 9: dQ's parts
 * added in a fixed order), WRITER (kernel 10: dQ's additions sent by the
 * producer's idle warps), PERSIST (kernel 11: one block per SM taking K/V
 * tiles from a counter), LATE_DQ (kernel 12: each row tile's dQ product
 * issued at the next tile's start, with its s^T). Built only for sm_90a,
 * like forward kernels 10-23.
 *
 * One block owns a K/V tile of BC = 128 keys and walks the row tiles, as
 * bwd_mma.cuh's kernels do (flash_backward.c's loops: K/V tile outside, row
 * tiles inside). It has three warpgroups:
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
 * Key-major, as in bwd_mma.cuh: p^T and ds^T come out of the first two
 * products as accumulators whose layout is that of an A operand (wgmma.cuh),
 * so they feed dV and dK from registers; dK_w and dV_w stay in registers for
 * the whole walk. The same swizzled tile of Q_i (dO_i, K_j) is a K-major
 * operand in one product and an MN-major one in another: only the descriptor
 * differs, as K_j and V_j in the forward. No ldmatrix is left: kernels 2-4
 * re-read the whole Q_i and dO_i tile through ldmatrix for every 16 keys,
 * twice; here the tensor cores read each tile from shared memory once per
 * 64 keys and product.
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
 * at the same time (bwd_mma.cuh says why atomics and not a second pass, and
 * that dQ is then not bit-identical run to run): BULK = false (kernels 5,
 * 7-9) with red.global.add.v2 from registers, BULK = true (kernel 6)
 * through shared memory and the copy engine's bulk reduce-add; DET = true
 * (kernel 9) orders the additions, and dQ is bit-identical; WRITER = true
 * (kernel 10): the part to shared memory, and one bulk reduce-add of all of
 * it sent by a producer warp, into an accumulator laid out in 64 x 64
 * blocks (bwd.cuh).
 *
 * Order: blocks go head by head (the head's K/V tiles in order), causal too,
 * where kernels 2-4, causal, go K/V tile by K/V tile across all heads (tile
 * 0, the longest, first everywhere). Head by head, the blocks that run together
 * share their head's Q_i, dO_i and dQ_i rows in L2; the longest tile of each
 * head still starts first among its head's. Measured causal (kernel 6 both
 * ways, in the first version, L and Delta by the TMA, ./step05 --bench
 * --backward --dtype fp16 --causal, one run, H100):
 * +28% at N = 4096, D = 64 (300.4 against 234.5 TFLOP/s), +41% at N = 2048,
 * D = 128 (298.2 against 211.6); -1% to -4% at N >= 8192, D = 128.
 *
 * Masks as in bwd_mma.cuh: keys past N arrive as zero rows (the TMA's fill)
 * and get p = 0; queries past N arrive as zeros with L = +inf (bwd_prep.cu),
 * so p = 0; the causal mask only in the row tiles that cross this warpgroup's
 * diagonal, and row tiles before the one holding key j0 skipped.
 */
#ifndef BWD_WGMMA_CUH
#define BWD_WGMMA_CUH

#include <cmath>

#include "bwd.cuh"
#include "gpu.cuh"
#include "../kernels.h"
#include "../primitives/tc.cuh"
#include "../primitives/tma_map.cuh"
#include "../primitives/wgmma.cuh"

// --- the kernel ------------------------------------------------------------------

template <int D, bool BULK, bool WRITER = false, bool PERSIST = false> struct BwdWg {
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
    static constexpr int DQ_LD = 72;                                            // dQ part's row pitch in floats (conflict-free float2 stores)
    static constexpr int OFF_DQ = OFF_VEC + 2 * 2 * VEC;                        // BULK: [NWG][64][DQ_LD] fp32; WRITER: [NWG][64 x 64] tiled
    static constexpr int OFF_BAR = OFF_DQ + (BULK ? NWG * 64 * DQ_LD * 4 : WRITER ? NWG * 64 * 64 * 4 : 0);  // kv_full, full[STAGES], empty[STAGES]
    /* kernel 11 (PERSIST): then kv_empty, full_t[2], empty_t[2] and the two-slot ring of tickets (4 bytes each) */
    static constexpr int TICKET_READERS = 128 * NWG + 32 + 32 * NWG;              // consumers, warp 1, the writer warps
    static constexpr size_t bytes = OFF_BAR + 8 * (1 + 2 * STAGES) + (PERSIST ? 8 * 5 + 8 : 0) + 1024;   /* + alignment */
    static_assert(128 * REG_PRODUCER + 128 * NWG * REG_CONSUMER <= THREADS * ((65536 / THREADS) & ~7), "more than the block holds");
};

/* dQ_i's part of consumer warpgroup (qblk, dblk): this warpgroup's 64 x 64 of ds K_j, k = the BC keys (ds^T read
 * MN-major from its buffer, K_j MN-major), issued, not committed. Kernel 12's loop: ONE_STEP_IF_NOT_WHOLE, only
 * the first k step when !whole (below: why), with the fences ptxas would otherwise add itself, and say so as it
 * builds ("warpgroup.arrive is injected"), where the branch leaves the products and where the paths meet again. */
template <typename T, int BC, bool ONE_STEP_IF_NOT_WHOLE = false>
__device__ __forceinline__ void bwd_issue_dq(float *dq, uint32_t ds_buf, uint32_t k_tile, int qblk, int dblk, bool whole = true)
{
    auto step = [&](int ks) {
        wgmma_ss<T, 64, 1, 1>(dq, make_desc(ds_buf + qblk * BC * 128 + ks * 2048, BC * 128, 1024),
                              make_desc(k_tile + dblk * BC * 128 + ks * 2048, BC * 128, 1024), ks > 0);
    };
    if constexpr (!ONE_STEP_IF_NOT_WHOLE) {
#pragma unroll
        for (int ks = 0; ks < BC / 16; ks++) step(ks);
    } else {
        step(0);
        if (whole) {
            wgmma_fence();
#pragma unroll
            for (int ks = 1; ks < BC / 16; ks++) step(ks);
        }
        wgmma_fence();
    }
}

/* Kernels 10-12 (WRITER): warpgroup wg's dQ part into shared memory in the accumulator's tiled layout, once its
 * writer warp has sent the last one (named barrier 6 + wg), then handed to it (4 + wg). Row 16 wiw + g + 8 h,
 * column 8 n + 2 t. */
__device__ __forceinline__ void bwd_put_dq(float *dq_s, const float *dq, int wg, int wiw, int g, int t)
{
    asm volatile("bar.sync %0, 160;\n" ::"r"(6 + wg) : "memory");   // the buffer is free
#pragma unroll
    for (int h = 0; h < 2; h++)
#pragma unroll
        for (int n = 0; n < 8; n++)
            *reinterpret_cast<float2 *>(dq_s + bwd_dq_tiled_off(16 * wiw + g + 8 * h, 8 * n + 2 * t)) =
                make_float2(dq[4 * n + 2 * h], dq[4 * n + 2 * h + 1]);
    fence_proxy_async();                          // the stores, read next by the copy engine
    asm volatile("bar.arrive %0, 160;\n" ::"r"(4 + wg) : "memory");  // the part is in
}

/* Backward kernel 11 (PERSIST): the tickets, one per (head, K/V tile), from one counter for every launch of the
 * file's instances (the launcher knows where each launch's start: ticket0); as kernel 18's g_tickets. */
static __device__ unsigned g_bwd_tickets;

template <int D, typename T, bool BULK, bool MASK_BRANCH, bool OVERLAP, bool DET, bool WRITER, bool PERSIST = false,
          bool LATE_DQ = false>
__global__ void __launch_bounds__(BwdWg<D, BULK, WRITER, PERSIST>::THREADS, 1)
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
          unsigned items, unsigned ticket0)           // kernel 11: B H kv_tiles, and this launch's first ticket
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using C = BwdWg<D, BULK, WRITER, PERSIST>;
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
    /* kernel 11: the consumers are done with K_j, V_j; the ring of tickets (full_t, empty_t: 2 slots each) */
    const uint32_t kv_empty = empty + 8 * STAGES, full_t = kv_empty + 8, empty_t = full_t + 16;
    volatile unsigned *tickets = reinterpret_cast<volatile unsigned *>(base_ptr + (empty_t + 16 - base));

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
    auto first_row = [&](long j0) { return causal ? j0 / BR * BR : 0L; };   // kernel 11: i_begin of each item

    /* Kernels 5-10: one item per block, (bh, jt) from blockIdx.x, as above.
     * Kernel 11: one block per SM; its item `item` is the ticket in slot
     * item % 2 of a ring in shared memory, which the producer's thread 0
     * fills from the counter (below); every other thread takes its items
     * from there, in order, each arriving on empty_t itself (racecheck
     * follows an mbarrier between the threads that arrive and wait, as
     * kernel 18 found). The tickets go in the order of kernel 10's blocks, so
     * a block that ends early takes the next longest causal tile left, as the
     * hardware's block scheduler does for kernel 10. The producer's roles
     * keep their work on one item in a lambda (produce, vecs, send), called
     * once by kernels 5-10 and in a loop by kernel 11; the consumers' walk is
     * the body of a do-while loop that kernels 5-10 run once (below). So the
     * machine code of kernels 5-10 is what it was before kernel 11: the .text
     * of each of their 24 instances compared byte for byte. */
    auto take_item = [&](long item, long &tbh, long &tjt) -> bool {   // false past the last
        const int slot = (int)(item % 2);
        mbar_wait(full_t + 8 * slot, (int)((item / 2) & 1));
        const unsigned ticket = __shfl_sync(0xffffffffu, tickets[slot], 0);   // uniform: see kernel 18's note
        mbar_arrive(empty_t + 8 * slot);
        tbh = (long)(ticket / kv_tiles), tjt = (long)(ticket % kv_tiles);
        return ticket < items;
    };

    if (threadIdx.x == 0) {
        mbar_init(kv_full, 1);
        for (int s = 0; s < STAGES; s++) {
            mbar_init(full + 8 * s, 1 + 32);         // the TMA thread's expect_tx + warp 1's 32 lanes (L, Delta)
            mbar_init(empty + 8 * s, 128 * C::NWG);  // one arrival per consumer thread (why: below)
        }
        if constexpr (PERSIST) {
            mbar_init(kv_empty, 128 * C::NWG);
            for (int s = 0; s < 2; s++) {
                mbar_init(full_t + 8 * s, 1);
                mbar_init(empty_t + 8 * s, C::TICKET_READERS);
            }
        }
        fence_mbar_init();
    }
    __syncthreads();                              // the only block-wide barrier

    if (threadIdx.x < 128) {
        /* The producer: K_j and V_j once, then the row tiles into the ring. */
        setmaxnreg_dec<C::REG_PRODUCER>();
        if (threadIdx.x == 0) {
            /* one item: K_j and V_j, then its row tiles into the ring (it: the ring's count, on across kernel 11's items) */
            auto produce = [&](long bh, long j0, long i_begin, long &it) {
                mbar_expect_tx(kv_full, 2 * C::KV_TILE);
#pragma unroll
                for (int blk = 0; blk < D / 64; blk++) {
                    tma_load_3d(base + C::OFF_K + blk * BC * 128, &tm_k, blk * 64, (int)j0, (int)bh, kv_full);
                    tma_load_3d(base + C::OFF_V + blk * BC * 128, &tm_v, blk * 64, (int)j0, (int)bh, kv_full);
                }
                for (long i0 = i_begin; i0 < N; i0 += BR, it++) {
                    const int s = (int)(it % STAGES), use = (int)((it / STAGES) & 1);
                    mbar_wait(empty + 8 * s, use ^ 1);   // first use of a stage: passes at once
                    const uint32_t q_dst = base + C::OFF_Q + 2 * s * C::ROW_TILE;
                    mbar_expect_tx(full + 8 * s, 2 * C::ROW_TILE);
#pragma unroll
                    for (int blk = 0; blk < D / 64; blk++) {
                        tma_load_3d(q_dst + blk * BR * 128, &tm_q, blk * 64, (int)i0, (int)bh, full + 8 * s);
                        tma_load_3d(q_dst + C::ROW_TILE + blk * BR * 128, &tm_do, blk * 64, (int)i0, (int)bh, full + 8 * s);
                    }
                }
            };
            long it = 0;
            if constexpr (!PERSIST) produce(bh, j0, i_begin, it);
            else {                                // kernel 11: item after item, from the counter
                unsigned ticket = atomicAdd(&g_bwd_tickets, 1u) - ticket0;
                for (long item = 0;; item++) {
                    const int slot = (int)(item % 2);     // hand the ticket to the others
                    mbar_wait(empty_t + 8 * slot, (int)((item / 2) & 1) ^ 1);
                    tickets[slot] = ticket;
                    mbar_arrive(full_t + 8 * slot);
                    if (ticket >= items) break;
                    const long tbh = (long)(ticket / kv_tiles), tjt = (long)(ticket % kv_tiles);
                    if (item > 0) mbar_wait(kv_empty, (int)((item - 1) & 1));   // the consumers are done with the last K_j, V_j
                    produce(tbh, tjt * BC, first_row(tjt * BC), it);
                    /* The next item, taken once this one's copies are all issued, while the consumers still have its
                     * last two row tiles to do (the atomic's round trip hides there). Taken at the item's start, as
                     * kernel 18 takes its row tiles, a block held its next K/V tile for a whole walk (up to 256 row
                     * tiles at N = 16384), and the causal tiles, long first, balanced worse than kernel 10's blocks:
                     * causal D = 128 -3% at N = 4096 and -7% at 16384 against kernel 10 (H100, the first version). */
                    ticket = atomicAdd(&g_bwd_tickets, 1u) - ticket0;
                }
            }
        } else if (threadIdx.x / 32 == 1) {
            /* Warp 1: L_i log2 e and Delta_i (BR floats each) into the same
             * stage, by ordinary loads and stores, 16 bytes a lane; each lane
             * then arrives on full[s] (release: its stores before the
             * arrival), and the consumers' wait on full[s] (acquire) makes
             * them visible. Why not the TMA, and what it is worth: README.md
             * and the note above the consumers' loop. */
            const int lane = threadIdx.x % 32;
            float4 *vec_s = reinterpret_cast<float4 *>(base_ptr + C::OFF_VEC);
            auto vecs = [&](long bh, long i_begin, long &it) {
                const float *lse_h = lse2 + bh * Npad, *dl_h = delta + bh * Npad;
                for (long i0 = i_begin; i0 < N; i0 += BR, it++) {
                    const int s = (int)(it % STAGES), use = (int)((it / STAGES) & 1);
                    mbar_wait(empty + 8 * s, use ^ 1);   // the consumers are done with the stage's L, Delta too
                    const float4 *src_l = reinterpret_cast<const float4 *>(lse_h + i0), *src_d = reinterpret_cast<const float4 *>(dl_h + i0);
#pragma unroll 1   /* 24 registers: one float4 in flight, not a spill */
                    for (int x = lane; x < BR / 2; x += 32)   // [L_i | Delta_i] as BR / 2 float4
                        vec_s[s * BR / 2 + x] = x < BR / 4 ? src_l[x] : src_d[x - BR / 4];
                    mbar_arrive(full + 8 * s);
                }
            };
            long it = 0;
            if constexpr (!PERSIST) vecs(bh, i_begin, it);
            else                                  // kernel 11: the items in the ticket ring's order
                for (long item = 0;; item++) {
                    long tbh, tjt;
                    if (!take_item(item, tbh, tjt)) break;
                    vecs(tbh, first_row(tjt * BC), it);
                }
        } else if (WRITER && threadIdx.x / 32 >= 2) {
            /* Kernel 10: warp 2 + w sends consumer warpgroup w's dQ parts.
             * Named barriers 4 + w (the part is in shared memory) and 6 + w
             * (the engine has read it: the buffer is free), 160 threads each:
             * the warpgroup's 128 and this warp's 32. The consumers arrive on
             * the first without waiting and wait on the second only when
             * their next part is ready, a row tile later. */
            const int w = threadIdx.x / 32 - 2, lane = threadIdx.x % 32;
            const uint32_t buf = base + C::OFF_DQ + w * 64 * 64 * 4;
            auto send = [&](long bh, long i_begin) {
                asm volatile("bar.arrive %0, 160;\n" ::"r"(6 + w) : "memory");     // the buffer starts free
                for (long i0 = i_begin; i0 < N; i0 += BR) {
                    asm volatile("bar.sync %0, 160;\n" ::"r"(4 + w) : "memory");   // the part is in
                    if (lane == 0) {
                        const long blk = (bh * (Npad / 64) + i0 / 64 + (QB == 2 ? w : 0)) * DB + (DB == 2 ? w : 0);
                        bulk_reduce_add_f32(dq_acc + blk * 4096, buf, 64 * 64 * 4);   // dQ_i += part, 16 KB in one piece
                        bulk_commit();
                        bulk_wait_read();                                              // the engine has read the buffer
                    }
                    __syncwarp();
                    if (i0 + BR < N) asm volatile("bar.arrive %0, 160;\n" ::"r"(6 + w) : "memory");   // free for the next part
                }
            };
            if constexpr (!PERSIST) send(bh, i_begin);
            else                                  // kernel 11: the items in the ticket ring's order
                for (long item = 0;; item++) {
                    long tbh, tjt;
                    if (!take_item(item, tbh, tjt)) break;
                    send(tbh, first_row(tjt * BC));
                }
            if (lane == 0) bulk_wait_all();      // the sums done before the block ends
        }
        return;
    }
    setmaxnreg_inc<C::REG_CONSUMER>();

    const int wg = threadIdx.x / 128 - 1, wiw = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const uint32_t k_w = base + C::OFF_K + 64 * wg * 128, v_w = base + C::OFF_V + 64 * wg * 128;  // K_w, V_w: rows 64 wg..
    const int qblk = QB == 2 ? wg : 0, dblk = DB == 2 ? wg : 0;

    /* Item after item (kernel 11) or the block's one (kernels 5-10: `while (PERSIST)` ends it), the walk of K/V tile
     * jt of head bh over its row tiles; it: the ring's count, on across kernel 11's items. Not a lambda, as the
     * producer's roles are: with the walk a lambda called once, nvcc compiled kernels 5 and 6 differently (128 to
     * 384 bytes more code each, the same instructions scheduled otherwise) and kernel 5 ran 14% and 5% slower (D = 64,
     * 128) beside kernel 7 than before kernel 11 (H200, the seventh session's race against the third's); written as
     * this loop they are again byte for byte what they were, and kernel 11 what it was as a lambda in a loop. */
    long it = 0, item = 0;
    do {
        long item_bh = bh, item_jt = jt;
        if constexpr (PERSIST) {
            if (!take_item(item, item_bh, item_jt)) break;   // past the last ticket
        }
        const long bh = item_bh, jt = item_jt;           // this item's (kernels 5-10: the block's, as above)
        const int kv_phase = (int)(item & 1);             // K_j, V_j's phase on kv_full
        const long j0 = jt * BC, i_begin = causal ? j0 / BR * BR : 0;
        const long kw0 = j0 + 64 * wg;                // this warpgroup's 64 keys
        const long key0 = kw0 + 16 * wiw + g;         // this lane's keys: key0 (accumulator rows g) and key0 + 8

        /* dK_w, dV_w: 64 keys x D per warpgroup, fp32, for the whole walk; flat
         * (the wgmma wrappers take D/2 floats), element 4 n + e is bwd_mma.cuh's dk[n][e] */
        float dk[D / 2], dv[D / 2];
#pragma unroll
        for (int n = 0; n < D / 2; n++) dk[n] = dv[n] = 0.0f;

        /* L_i log2 e and Delta_i (BR floats each) arrive in the ring's stage with
         * Q_i and dO_i, stored there by the producer's warp 1 (above), so the
         * consumers touch no global memory until dQ. Two designs came before,
         * both measured (kernel 5, fp16, N = 4096, H100):
         *   - the TMA brought them too (two more copies on full[s]): 291.1 TFLOP/s
         *     at D = 64, 380.6 at D = 128; but the consumers read them with
         *     ordinary loads, ordered after the copy engine's writes only by the
         *     mbarrier, which compute-sanitizer's racecheck does not follow: it
         *     reported a race on every read. Not shipped.
         *   - each consumer thread loaded one float a row tile ahead and stored it
         *     behind the named barrier (racecheck clean): 241.9 at D = 64, 350.1
         *     at D = 128.
         * This one, in the same run as the second: 331.7 and 357.0 (+37%, +2%;
         * causal 290.6 and 313.3 against 221.3 and 304.0); in the final run
         * (every consumer thread arriving on empty[s], below) 333.5 and 370.4.
         * Racecheck follows an mbarrier between threads (release by arrive,
         * acquire by wait) when every thread whose accesses it orders arrives or
         * waits itself: clean. Why the second cost so much at D = 64 was not
         * profiled; a guess: a consumer's global load in flight across the s^T,
         * dp^T products, where s^T and dp^T hold 128 of its registers (ptxas
         * spilled 40 bytes there; 20 here, 28 in kernel 6). */
        const float *vec_s = reinterpret_cast<const float *>(base_ptr + C::OFF_VEC);

        mbar_wait(kv_full, kv_phase);                     // K_j, V_j have landed
        /* Kernel 8 (OVERLAP): p^T is computed while dp^T is on the tensor cores;
         * dV_w += p^T dO_i goes to them before ds^T is computed at D = 128 only:
         * p^T's A registers are then live beside s^T and dp^T, and at D = 64,
         * where those two take 128 registers, ptxas has not the room (it
         * serialised every wgmma of the kernel, "insufficient register
         * resources"). */
        static_assert(!OVERLAP || MASK_BRANCH, "kernel 8 extends kernel 7");
        static_assert(!LATE_DQ || (OVERLAP && WRITER), "kernel 12 extends kernel 11");
        constexpr bool EARLY_DV = OVERLAP && D == 128;
        /* Kernel 12 (LATE_DQ): dQ_i += ds K_j goes to the tensor cores at the start of row tile i + 1, with its s^T and
         * dp^T, and its part is stored while they run (kernels 10-11: dQ's product waited for at the end of tile i,
         * its part stored, the barriers passed and the next stage waited for with the tensor cores idle). */
        for (long i0 = i_begin; i0 < N; i0 += BR, it++) {
            const int st = (int)(it % STAGES), use = (int)((it / STAGES) & 1);
            const uint32_t q_s = base + C::OFF_Q + 2 * st * C::ROW_TILE, do_s = q_s + C::ROW_TILE;
            const uint32_t ds_s = base + C::OFF_DS + (int)(it & 1) * C::DS_TILE;
            const float *lse_s = vec_s + st * 2 * BR, *dl_s = lse_s + BR;
            if constexpr (!LATE_DQ) mbar_wait(full + 8 * st, use);   // Q_i, dO_i, L_i, Delta_i have landed

            /* s^T = K_w Q_i^T and dp^T = V_w dO_i^T: k = the head dim, 4 steps per 64 columns (32 bytes each).
             * Kernel 8 commits them as two groups, so that it can wait for s^T alone. */
            float s[BR / 2], dp[BR / 2];
            float dq_last[LATE_DQ ? 32 : 1];           // kernel 12: the last row tile's dQ part
            wgmma_fence();
            if constexpr (LATE_DQ) {
                /* Kernel 12: the last row tile's dQ first (it needs no new stage). In the walk's first row tile there
                 * is none: one k step of it still runs, on whatever ds^T buffer holds, and is thrown away, so that
                 * dq_last is written by the tensor cores on every path (written conditionally, ptxas serialised
                 * every wgmma of the kernel: "insufficient register resources"). 1/8 of a product per walk. */
                bwd_issue_dq<T, BC, true>(dq_last, base + C::OFF_DS + (int)((it - 1) & 1) * C::DS_TILE, base + C::OFF_K, qblk, dblk,
                                    i0 > i_begin);
                wgmma_commit();
                mbar_wait(full + 8 * st, use);        // Q_i, dO_i, L_i, Delta_i have landed
                wgmma_fence();
            }
#pragma unroll
            for (int ks = 0; ks < D / 16; ks++) {
                const int off_kv = (ks / 4) * BC * 128 + (ks % 4) * 32, off_q = (ks / 4) * BR * 128 + (ks % 4) * 32;
                wgmma_ss<T, BR, 0, 0>(s, make_desc(k_w + off_kv, 16, 1024), make_desc(q_s + off_q, 16, 1024), ks > 0);
            }
            if constexpr (OVERLAP) wgmma_commit();
            if constexpr (LATE_DQ) {                   // the last tile's dQ is in: its part to the writer, under s^T
                /* (This wait comes before this tile's named barrier, so ds^T[(it - 1) % 2] is read before the next
                 * tile overwrites it: the double buffer's argument below holds.) */
                wgmma_wait<1>();
                if (i0 > i_begin) bwd_put_dq(reinterpret_cast<float *>(base_ptr + C::OFF_DQ) + wg * 64 * 64, dq_last, wg, wiw, g, t);
                wgmma_fence();
            }
#pragma unroll
            for (int ks = 0; ks < D / 16; ks++) {
                const int off_kv = (ks / 4) * BC * 128 + (ks % 4) * 32, off_q = (ks / 4) * BR * 128 + (ks % 4) * 32;
                wgmma_ss<T, BR, 0, 0>(dp, make_desc(v_w + off_kv, 16, 1024), make_desc(do_s + off_q, 16, 1024), ks > 0);
            }
            wgmma_commit();
            if constexpr (OVERLAP) wgmma_wait<1>();   // s^T is in; dp^T still running
            else wgmma_wait<0>();

            /* p^T and ds^T: element 4 n + e is key key0 + 8 (e / 2), query i0 + 8 n + 2 t + e % 2. */
            const bool need_mask = kw0 + 64 > N || (causal && i0 < kw0 + 63);
            uint32_t pa[BR / 16][4], dsa[BR / 16][4];  // p^T, ds^T as A fragments (k = queries)
            /* Kernels 7 and 8 (MASK_BRANCH): the loop twice, with the masks and
             * without, and need_mask choosing once per row tile. With need_mask a
             * value inside one loop (kernels 5 and 6), nvcc computes the mask of
             * every element of every row tile, masked or not, and does it before
             * issuing s^T and dp^T, on the way to the tensor cores: some 260
             * integer instructions per thread and row tile at D = 64. Kernels 5
             * and 6 keep their loop as it was, written out again below: called
             * through the lambda with need_mask, it compiled to other machine
             * code than the one measured. */
            if constexpr (OVERLAP) {
                /* p^T under dp^T's product, in place in s (fp32, for ds^T). */
                auto p_tile = [&](bool masked) {
#pragma unroll
                    for (int n = 0; n < BR / 8; n++) {
                        const float2 lse = *reinterpret_cast<const float2 *>(lse_s + 8 * n + 2 * t);
                        bwd_p4(s + 4 * n, lse, scale_log2, masked, key0, i0 + 8 * n + 2 * t, N, causal);
                        if constexpr (EARLY_DV) bwd_pack4<T>(s + 4 * n, &pa[n / 2][(n % 2) * 2]);
                    }
                };
                if (need_mask) p_tile(true);
                else p_tile(false);
                if constexpr (EARLY_DV) {             // dV_w += p^T dO_i now: it runs under ds^T's arithmetic
                    wgmma_fence();
#pragma unroll
                    for (int ks = 0; ks < BR / 16; ks++) wgmma_rs<T, D, 1>(dv, pa[ks], make_desc(do_s + ks * 2048, BR * 128, 1024), 1);
                    wgmma_commit();
                    wgmma_wait<1>();                  // dp^T is in; dV still running
                } else {
                    wgmma_wait<0>();                  // dp^T is in
                }
#pragma unroll
                for (int n = 0; n < BR / 8; n++) {
                    const float2 dl = *reinterpret_cast<const float2 *>(dl_s + 8 * n + 2 * t);
                    if constexpr (!EARLY_DV) bwd_pack4<T>(s + 4 * n, &pa[n / 2][(n % 2) * 2]);
                    bwd_ds4<T>(s + 4 * n, dp + 4 * n, dl, &dsa[n / 2][(n % 2) * 2]);
                }
            } else if constexpr (MASK_BRANCH) {        // kernel 7: p^T and ds^T together, as kernel 5
                auto p_ds_tile = [&](bool masked) {
#pragma unroll
                    for (int n = 0; n < BR / 8; n++) {
                        const float2 lse = *reinterpret_cast<const float2 *>(lse_s + 8 * n + 2 * t);
                        const float2 dl = *reinterpret_cast<const float2 *>(dl_s + 8 * n + 2 * t);
                        bwd_p_ds4<T>(s + 4 * n, dp + 4 * n, lse, dl, scale_log2, masked, key0, i0 + 8 * n + 2 * t, N, causal,
                                     &pa[n / 2][(n % 2) * 2], &dsa[n / 2][(n % 2) * 2]);
                    }
                };
                if (need_mask) p_ds_tile(true);
                else p_ds_tile(false);
            } else {                                    // kernels 5 and 6: the same loop, need_mask a value
#pragma unroll
                for (int n = 0; n < BR / 8; n++) {
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

            /* dV_w += p^T dO_i (kernel 8 at D = 128: issued above), dK_w += ds^T Q_i: k = the BR queries, 16 rows (2048 bytes) per step. */
            wgmma_fence();
#pragma unroll
            for (int ks = 0; ks < BR / 16; ks++) {
                if constexpr (!EARLY_DV) wgmma_rs<T, D, 1>(dv, pa[ks], make_desc(do_s + ks * 2048, BR * 128, 1024), 1);
                wgmma_rs<T, D, 1>(dk, dsa[ks], make_desc(q_s + ks * 2048, BR * 128, 1024), 1);
            }
            wgmma_commit();

            /* Named barrier 1, the 256 consumer threads. After it: both halves
             * of ds^T[it % 2] are visible to all; and every consumer has finished
             * tile it - 1's dQ (wgmma_wait<0>), so tile it + 1 may overwrite
             * ds^T[(it + 1) % 2]. */
            asm volatile("bar.sync 1, 256;\n" ::: "memory");
            if constexpr (LATE_DQ) {                   // dQ_i at the next tile's start, or after the walk
                wgmma_wait<0>();                      // dV, dK in: this thread is done with stage st (as below)
                mbar_arrive(empty + 8 * st);
                continue;
            }

            /* dQ_i += ds_tile K_j, this warpgroup's 64 x 64 of it: k = the BC keys. */
            float dq[32];
            wgmma_fence();
#pragma unroll
            for (int ks = 0; ks < BC / 16; ks++)
                wgmma_ss<T, 64, 1, 1>(dq, make_desc(ds_s + qblk * BC * 128 + ks * 2048, BC * 128, 1024),
                                      make_desc(base + C::OFF_K + dblk * BC * 128 + ks * 2048, BC * 128, 1024), ks > 0);
            wgmma_commit();
            wgmma_wait<0>();
            /* This thread is done with stage st (Q, dO, L, Delta): the producer
             * may refill it. Every consumer thread arrives (256 arrivals, where
             * forward kernel 12 has one per warp after __syncwarp): warp 1's stores of
             * the next L, Delta would otherwise follow lanes 1-31's reads of these
             * through the __syncwarp alone, which racecheck does not follow (it
             * reported each such pair; one arrival per thread: clean, at no
             * measured cost). */
            mbar_arrive(empty + 8 * st);

            float *dq_h = dq_acc + bh * N * D;
            if constexpr (WRITER) {
                /* Kernel 10: the part into shared memory in the accumulator's
                 * tiled layout, once the writer warp has sent the last one; the
                 * writer sends it. */
                bwd_put_dq(reinterpret_cast<float *>(base_ptr + C::OFF_DQ) + wg * 64 * 64, dq, wg, wiw, g, t);
            } else if constexpr (BULK) {
                /* This warp's 16 rows of the part to shared memory, then one bulk
                 * reduce-add per row (64 floats, 256 bytes) by lanes 0-15. */
                float *dq_s = reinterpret_cast<float *>(base_ptr + C::OFF_DQ) + (64 * wg + 16 * wiw) * C::DQ_LD;
                if (lane < 16) bulk_wait_read();          // the previous row tile's adds have read the buffer
                __syncwarp();
#pragma unroll
                for (int h = 0; h < 2; h++)
#pragma unroll
                    for (int n = 0; n < 8; n++)
                        *reinterpret_cast<float2 *>(dq_s + (g + 8 * h) * C::DQ_LD + 8 * n + 2 * t) = make_float2(dq[4 * n + 2 * h], dq[4 * n + 2 * h + 1]);
                fence_proxy_async();
                __syncwarp();
                const long row = i0 + 64 * qblk + 16 * wiw + lane;
                if (lane < 16 && row < N) {
                    bulk_reduce_add_f32(dq_h + row * D + 64 * dblk, (uint32_t)__cvta_generic_to_shared(dq_s + lane * C::DQ_LD), 256);
                    bulk_commit();
                }
            } else {
                /* Kernel 9 (DET): this warpgroup's part goes in after K/V tiles
                 * 0 .. jt - 1 have added theirs to the same part of dQ_i, and
                 * before tile jt + 1's: one counter per row tile and warpgroup
                 * (after dQ's accumulator in the workspace, zeroed by the launch),
                 * which thread 0 of the warpgroup waits to see equal jt, and sets
                 * to jt + 1 once the 128 threads' additions are done. Every
                 * element of dQ then receives its parts in the order of j, run
                 * after run. The tiles of one row tile are 0 .. some J, causal
                 * too (a K/V tile's walk starts at the row tile holding its first
                 * key), and tile jt - 1's block starts no later than this one's
                 * (the grid goes in order), so the wait ends. */
                unsigned *sem = nullptr;
                if constexpr (DET) {
                    const long row_tiles = (N + BR - 1) / BR;
                    sem = reinterpret_cast<unsigned *>(dq_acc + (long)(gridDim.x / kv_tiles) * N * D) +
                          (bh * row_tiles + i0 / BR) * 2 + wg;
                    if (threadIdx.x % 128 == 0)
                        while (ld_acquire_gpu(sem) != (unsigned)jt) {
                        }
                    asm volatile("bar.sync %0, 128;\n" ::"r"(2 + wg) : "memory");   // the warpgroup's 128 threads, after the wait
                }
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const long row = i0 + 64 * qblk + 16 * wiw + g + 8 * h;
                    if (row < N) {
#pragma unroll
                        for (int n = 0; n < 8; n++)            // dQ_i += ..., with the other K/V blocks
                            red_add2(dq_h + row * D + 64 * dblk + 8 * n + 2 * t, dq[4 * n + 2 * h], dq[4 * n + 2 * h + 1]);
                    }
                }
                if constexpr (DET) {
                    __threadfence();                  // this thread's additions performed before the counter moves
                    asm volatile("bar.sync %0, 128;\n" ::"r"(2 + wg) : "memory");
                    if (threadIdx.x % 128 == 0) st_release_gpu(sem, (unsigned)jt + 1);
                }
            }
        }

        if constexpr (LATE_DQ) {                       // the walk's last dQ
            if (i_begin < N) {
                float dq[32];
                wgmma_fence();
                bwd_issue_dq<T, BC>(dq, base + C::OFF_DS + (int)((it - 1) & 1) * C::DS_TILE, base + C::OFF_K, qblk, dblk);
                wgmma_commit();
                wgmma_wait<0>();
                bwd_put_dq(reinterpret_cast<float *>(base_ptr + C::OFF_DQ) + wg * 64 * 64, dq, wg, wiw, g, t);
            }
        }
        if constexpr (PERSIST) mbar_arrive(kv_empty);   // kernel 11: K_j, V_j read for the last time; the next item's may load
        if constexpr (BULK) bulk_wait_all();          // the engine's adds all done (and so its reads of shared memory)
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
        item++;
    } while (PERSIST);
#else
    (void)lse2, (void)delta, (void)dq_acc, (void)dK, (void)dV, (void)N, (void)Npad, (void)kv_tiles, (void)causal;
    (void)scale_log2, (void)scale, (void)tm_k, (void)tm_v, (void)tm_q, (void)tm_do, (void)items, (void)ticket0;
#endif
}

// --- the launcher -------------------------------------------------------------------

/* Delta and L log2 e padded to whole row tiles of 128 ([B, H, Npad] floats each), the dQ accumulator ([B, H, N, D] floats). */
static inline long bwd_wgmma_npad(long N) { return (N + 127) / 128 * 128; }

static inline size_t bwd_wgmma_workspace(long B, long H, long N, long D, int dtype)
{
    (void)dtype;
    return ((size_t)2 * B * H * bwd_wgmma_npad(N) + (size_t)B * H * N * D) * sizeof(float);
}
/* Kernel 10: the dQ accumulator over whole row tiles of 64 ([B, H, Npad, D] floats, tiled: bwd.cuh). */
static inline size_t bwd_wgmma_workspace_tiled(long B, long H, long N, long D, int dtype)
{
    (void)dtype;
    return ((size_t)2 * B * H * bwd_wgmma_npad(N) + (size_t)B * H * bwd_wgmma_npad(N) * D) * sizeof(float);
}
/* Kernel 9: and after it, a counter per row tile (of 64 queries, the smaller BR) and consumer warpgroup. */
static inline size_t bwd_wgmma_workspace_det(long B, long H, long N, long D, int dtype)
{
    return bwd_wgmma_workspace(B, H, N, D, dtype) + (size_t)B * H * ((N + 63) / 64) * 2 * sizeof(unsigned);
}

/* Kernel 11: where the next launch's tickets start (g_bwd_tickets: every launch takes items + grid of them, each
 * block one past the end), as kernel 18's g_ticket0. Two launches of kernel 11 must not run at once. */
static unsigned g_bwd_ticket0;

template <int D, typename T, bool BULK, bool MASK_BRANCH, bool OVERLAP, bool DET, bool WRITER, bool PERSIST, bool LATE_DQ>
static int bwd_wgmma_launch_dt(int id, const void *q, const void *k, const void *v, const void *o, const void *dout,
                               const float *L, void *dq, void *dk, void *dv, void *ws, long B, long H, long N, int dtype,
                               int causal, cudaStream_t s)
{
    using C = BwdWg<D, BULK, WRITER, PERSIST>;
    char who[32];
    snprintf(who, sizeof who, "backward kernel %d", id);
    static KvMaps kv, qo;                         // K, V in boxes of BC rows; Q (.k), dO (.v) in boxes of BR (tma_map.cuh)
    if (kv.get(k, v, B * H, N, D, C::BC, dtype, who) || qo.get(q, dout, B * H, N, D, C::BR, dtype, who))
        return -1;
    auto kernel = bwd_wgmma<D, T, BULK, MASK_BRANCH, OVERLAP, DET, WRITER, PERSIST, LATE_DQ>;
    if (smem_opt_in(kernel, C::bytes, "backward kernel", id, D)) return -1;
    static int sms = 0;                           // kernel 11: one block per SM, asked once
    if (PERSIST && sms == 0) {
        int dev = 0;
        CUDA_CHECK(cudaGetDevice(&dev));
        CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    }
    const long Npad = bwd_wgmma_npad(N), BH = B * H;
    float *delta = (float *)ws, *lse2 = delta + BH * Npad, *dq_acc = lse2 + BH * Npad;
    if (bwd_preprocess(o, dout, L, delta, lse2, dq_acc, WRITER ? Npad : N, BH, N, Npad, D, dtype, s) != 0)   // tiled: its padding rows too
        return -1;
    if constexpr (DET) CUDA_CHECK(cudaMemsetAsync(dq_acc + BH * N * D, 0, (size_t)BH * ((N + C::BR - 1) / C::BR) * 2 * sizeof(unsigned), s));
    const long kv_tiles = (N + C::BC - 1) / C::BC;
    const float scale = 1.0f / sqrtf((float)D), scale_log2 = 1.4426950408889634f * scale;
    const long items = BH * kv_tiles;
    if (PERSIST && items > 0x7fffffffL) {
        fprintf(stderr, "%s: %s: %ld K/V tiles, more than its 32-bit tickets count\n", g_prog, who, items);
        return -1;
    }
    const long grid = PERSIST && items > sms ? sms : items;   // kernel 11: one block per SM
    kernel<<<(unsigned)grid, C::THREADS, C::bytes, s>>>(lse2, delta, dq_acc, (T *)dk, (T *)dv, N, Npad, kv_tiles, causal,
                                                         scale_log2, scale, kv.k, kv.v, qo.k, qo.v, (unsigned)items,
                                                         PERSIST ? g_bwd_ticket0 : 0u);
    CUDA_CHECK_LAST();
    if constexpr (PERSIST) g_bwd_ticket0 += (unsigned)(items + grid);
    if constexpr (WRITER) return bwd_convert_dq_tiled(dq_acc, dq, BH, N, Npad, D, scale, dtype, s);
    return bwd_convert_dq(dq_acc, dq, (size_t)BH * N * D, scale, dtype, s);   // dQ = dQ_acc / sqrt(D)
}

template <bool BULK, bool MASK_BRANCH, bool OVERLAP, bool DET, bool WRITER = false, bool PERSIST = false, bool LATE_DQ = false>
static int bwd_wgmma_launch(int id, const void *q, const void *k, const void *v, const void *o, const void *dout,
                            const float *L, void *dq, void *dk, void *dv, void *ws, long B, long H, long N, long D,
                            int dtype, int causal, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (wgmma_refused()) return -1;
    if (dtype == DT_FP16 && D == 64)
        return bwd_wgmma_launch_dt<64, __half, BULK, MASK_BRANCH, OVERLAP, DET, WRITER, PERSIST, LATE_DQ>(id, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, dtype, causal, s);
    if (dtype == DT_FP16 && D == 128)
        return bwd_wgmma_launch_dt<128, __half, BULK, MASK_BRANCH, OVERLAP, DET, WRITER, PERSIST, LATE_DQ>(id, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, dtype, causal, s);
    if (dtype == DT_BF16 && D == 64)
        return bwd_wgmma_launch_dt<64, __nv_bfloat16, BULK, MASK_BRANCH, OVERLAP, DET, WRITER, PERSIST, LATE_DQ>(id, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, dtype, causal, s);
    if (dtype == DT_BF16 && D == 128)
        return bwd_wgmma_launch_dt<128, __nv_bfloat16, BULK, MASK_BRANCH, OVERLAP, DET, WRITER, PERSIST, LATE_DQ>(id, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, dtype, causal, s);
    fprintf(stderr, "%s: backward kernel %d takes fp16/bf16 and D = 64 or 128, not %s D=%ld\n", g_prog, id, dtype_name(dtype), D);
    return -1;
}

template <bool BULK, bool MASK_BRANCH, bool OVERLAP, bool DET, bool WRITER = false, bool PERSIST = false, bool LATE_DQ = false>
static void bwd_wgmma_describe(long D, char *buf, size_t n)
{
    using C64 = BwdWg<64, BULK, WRITER, PERSIST>;
    using C128 = BwdWg<128, BULK, WRITER, PERSIST>;
    snprintf(buf, n, "%s1 producer + 2 consumer warpgroups (%d/%d registers) x 64 keys (BC=%d), row tiles of BR=%d by TMA in a "
             "2-stage ring, the 5 products on wgmma%s%s%s, dQ by %s, %zu bytes of shared memory",
             PERSIST ? "one block per SM taking K/V tiles from a counter, the next one loading under this one's end; " : "",
             C64::REG_PRODUCER,
             C64::REG_CONSUMER, C64::BC, D == 64 ? C64::BR : C128::BR,
             MASK_BRANCH ? ", the masks only in the row tiles that need them" : "",
             !OVERLAP ? "" : D == 128 ? " (p^T under dp^T's product, ds^T under dV's)" : " (p^T under dp^T's product)",
             LATE_DQ ? "; each row tile's dQ issued with the next one's s^T and dp^T" : "",
             BULK ? "the copy engine's bulk reduce-add"
             : WRITER ? "one bulk reduce-add per 64 x 64 part, sent by a producer warp (2 writer warps)"
             : DET ? "fp32 red.global.add in the order of the K/V tiles (a counter per row tile): deterministic"
                   : "fp32 red.global.add",
             D == 64 ? C64::bytes : C128::bytes);
}

static int bwd_wgmma_supports(long D) { return D == 64 || D == 128; }

#endif
