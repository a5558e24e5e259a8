/*
 * Kernel 16: kernel 15 on kernel 14's schedule; the body of kernels 17, 24, 28, 30 and 45-48.
 *
 * Extends kernel 15 (kernel15_fp8.cu). The idea: in FP8 the products take half the time, so the softmax, which does
 * not get faster, is an even larger share of each tile, and hiding it matters more than in 16 bits. Kernel 15 runs
 * each warpgroup's tile in order: S = Q K^T, wait, softmax, P V, wait; the tensor cores idle during every softmax.
 * Kernels 13 and 14 showed the two cures in 16 bits, and here they are with kernel 15's FP8 products:
 *   - inside a warpgroup (kernel 13's), S_j is issued together with P_{j-1} V_{j-1} and the softmax of S_j runs
 *     while the P V is still on the tensor cores (p_{j-1} kept in its own registers, pf, as FP8 A fragments);
 *   - between the two consumer warpgroups (kernel 14's), named barriers hand the tensor cores back and forth
 *     (ping-pong): one warpgroup's products run under the other's softmax.
 * Two consumer warpgroups at both D (BR = 128), as kernel 13: each holds S, O, p_{j-1} and Q at 240 registers.
 * Everything else is kernel 15's (its FP8 products, scales, V's permuted layout, 2^8 p) and kernel 14's loop,
 * repeated on purpose so that make idea K=16 reads as one idea.
 * Why: kernel 15's tensor cores wait out every softmax: on the H100 (Nsight Compute, D = 128, N = 8192) its tensor
 * pipe is busy 39% of the time, kernel 16's 43%.
 * What it costs: the registers of p_{j-1} (16 at BC = 128 in FP8, half of 16 bits' 32), one more mbarrier per stage
 * (K and V are released apart), the turns' barriers, and at D = 64 kernel 15's third consumer warpgroup (two here
 * at both D, as kernel 13 against kernel 12 in 16 bits). Built only for sm_90a.
 *
 * The body, fp8_pingpong<D, P>, is kernels 17, 24, 28, 30 and 45-48's too: it calls its policy P where they change it,
 * and Fp8PingPong holds kernel 16's code for each hook: init_smem (shared memory of the policy's own), exp2_score
 * (one score's exponential: kernel 17 computes some on the FMA pipes), RowSums (how l is kept: kernel 24 leaves it
 * to the tensor cores), consumers and Turns (how many warpgroups, and whether they take turns: kernel 28 runs three
 * at D = 64, each on its own), keys (a tile's width: kernel 30 takes 192 keys at D = 128, three 64-key groups),
 * PERSISTENT (a block per work item, or one per SM walking them: kernels 45 and 46 where rows are short), EARLY_START
 * (kernel 47: each item's S_0 issued behind the last P V of the item before), O_BY_TMA (kernel 48: O sent by the copy
 * engine).
 *
 * Measured: H200, D = 128, N = 4096 / 16384: +6% / +8% over kernel 15 (778.5 / 790.0 TFLOP/s); at D = 64 15% slower
 * (475.6 against 560.8 at N = 4096), where kernel 15 runs three consumer warpgroups; the runs and the profile:
 * fp8/RESULTS.md#kernel-16.
 */
#ifndef RUNG
#define RUNG 16          // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cmath>

#include "fp8.h"
#include "gpu.cuh"
#include "../primitives/tc.cuh"
#include "../primitives/tile_order.cuh"
#include "fp8.cuh"
#include "../primitives/tma_map.cuh"
#include "../primitives/wgmma.cuh"

// --- the kernel ------------------------------------------------------------------

/* The tiles at head dim D, the same for every policy P but for P's own shared memory (its hooks: below). */
template <int D, class P> struct Fp8PP {
    static constexpr int NWG = P::consumers(D);           // consumer warpgroups, 64 rows each (FP8_QBLOCK): P's
    static constexpr int BR = 64 * NWG, BC = P::keys(D), STAGES = 2;  // BC: P's, a K block (FP8_KBLOCK) unless wider
    static constexpr int VBOX = BC == 128 ? 128 : 64;     // keys a V^T box holds: one 128-byte-swizzled row, else 64
    static_assert(BC == FP8_KBLOCK || BC == 192, "a tile of one K block, or of three 64-key groups");
    static_assert(!P::EARLY_START || P::PERSISTENT, "the early start hands S_0 from one item to the next");
    static constexpr int THREADS = 128 * (NWG + 1);       // + the producer warpgroup
    static constexpr bool PERSISTENT = P::PERSISTENT;     // a block per work item, or one per SM looping over them
    static constexpr bool O_BY_TMA = P::O_BY_TMA;         // O stored by the threads, or sent by the copy engine
    /* kernel 15's registers; persistent, the producer's loop over items (its ring position, the item's head and
     * tiles) spills at 24, so it takes 16 or 24 more from the consumers */
    static constexpr int REG_PRODUCER = NWG == 2 ? (PERSISTENT ? 40 : 24) : (PERSISTENT ? 56 : 32);
    static constexpr int REG_CONSUMER = NWG == 2 ? (PERSISTENT ? 232 : 240) : (PERSISTENT ? 152 : 160);
    static constexpr int TILE = BC * D;                   // one K tile [BC][D] or V^T tile [D][BC], bytes
    static constexpr size_t bytes = 2 * STAGES * (size_t)TILE + P::SMEM + 4 * 8 * STAGES + 1024; /* K, V^T; P's; mbarriers; alignment */
    static_assert(128 * REG_PRODUCER + 128 * NWG * REG_CONSUMER <= THREADS * ((65536 / THREADS) & ~7), "more than the block holds");
};

/* Kernel 16's hooks, with kernel 16's code in them. Kernels 17, 24, 28, 30 and 45-48 derive their policies from
 * this one (17 from 16, 24 from 17, 28 from 24, 30 from 28, 45 from 30, 46 from 45, 47 from 46 and 45, 48 from 47)
 * and replace the hooks their idea changes; fp8_pingpong<D, P> below calls P's. */
struct Fp8PingPong {
    /* A block per work item (a head's row tile): the grid is the items. */
    static constexpr bool PERSISTENT = false;
    /* Persistent only: each item's S_0 issued at the end of the item before, behind its last P V (kernel 47). */
    static constexpr bool EARLY_START = false;
    /* O stored by each thread, 4 bytes at a time (store_o in the body), or, true, written to shared memory and sent
     * by the copy engine: P::store_o_tma (kernel 48). */
    static constexpr bool O_BY_TMA = false;
    /* Keys a tile at head dim D: one K block (FP8_KBLOCK), whose one scale then holds for the whole tile. */
    __host__ __device__ static constexpr int keys(int D) { return (void)D, FP8_KBLOCK; }
    /* Consumer warpgroups at head dim D: two at both D, taking turns (Turns). */
    __host__ __device__ static constexpr int consumers(int D) { return (void)D, 2; }
    /* The turns at the tensor cores, kernel 14's ping-pong: warpgroup wg issues its products between mine() and
     * yours(), named barriers 1 and 2 handing the tensor cores to the other; first() lets warpgroup 0 start, last()
     * gives the other its last turn. */
    template <int NWG> struct Turns {
        static_assert(NWG == 2, "the ping-pong is between two warpgroups");
        int wg;
        __device__ __forceinline__ void mine() const { asm volatile("bar.sync %0, 256;\n" ::"r"(1 + wg) : "memory"); }
        __device__ __forceinline__ void yours() const { asm volatile("bar.arrive %0, 256;\n" ::"r"(1 + (wg ^ 1)) : "memory"); }
        __device__ __forceinline__ void first() const { if (wg == 1) yours(); }
        __device__ __forceinline__ void last() const { if (wg == 0) yours(); }
    };
    /* Shared memory of the policy's own, bytes, after K's and V^T's stages (1024-aligned): none. */
    static constexpr int SMEM = 0;
    /* Every thread, before the loop: fill that shared memory (smem, the block's nthreads). Nothing here. */
    __device__ static __forceinline__ void init_smem(uint32_t smem, int nthreads) { (void)smem, (void)nthreads; }
    /* 2^8 p of the thread's score x (0 .. BC/2 - 1) from its exponent y = s sl2 - (m - 8): the MUFU's ex2. */
    __device__ static __forceinline__ float exp2_score(int x, float y)
    {
        (void)x;
        return ex2(y);
    }
    /* The row sums l of rows g and g + 8. Here the softmax adds them, score by score as it makes them (add), and
     * Fp8QuadSums (fp8.cuh) keeps them. */
    struct RowSums : Fp8QuadSums {
        __device__ __forceinline__ void begin() { ls[0] = 0.0f, ls[1] = 0.0f; }
        __device__ __forceinline__ void add(int x, float p) { ls[x % 4 / 2] += p; }
        __device__ __forceinline__ void end(const float alpha[2]) { fold(alpha); }
    };
};

template <int D, class P>
__global__ void __launch_bounds__(Fp8PP<D, P>::THREADS, 1)
fp8_pingpong(const uint8_t *__restrict__ Q,   // [B, H, N, D] e4m3
             __half *__restrict__ O,          // [B, H, N, D] fp16 or bf16
             const float *__restrict__ SQ,    // [B*H][nqb]
             const float *__restrict__ SK,    // [B*H][nkb]
             const float *__restrict__ SV,    // [B*H]
             long N, long nqb, long nkb, long row_tiles, int causal, int out_bf16, float scale_log2,
             const __grid_constant__ CUtensorMap tm_k,   // K as [B*H][N][D] bytes
             const __grid_constant__ CUtensorMap tm_v,   // V^T as [B*H][D][Npad] bytes, keys permuted
             long items,                                 // work items, B*H*row_tiles
             const __grid_constant__ CUtensorMap tm_o)   // O as [B*H][N][D], boxes of 16 rows: O_BY_TMA only
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using C = Fp8PP<D, P>;
    (void)items, (void)tm_o;                      // read only when persistent, and when P::O_BY_TMA
    constexpr int BC = C::BC, TILE = C::TILE, STAGES = C::STAGES;
    extern __shared__ unsigned char smem_raw[];
    const uint32_t raw_addr = (uint32_t)__cvta_generic_to_shared(smem_raw);
    const uint32_t smem_addr = (raw_addr + 1023) & ~1023u;
    const uint32_t own = smem_addr + 2 * STAGES * TILE;  // P's own shared memory (P::SMEM bytes, 1024-aligned)
    const uint32_t full_k = own + P::SMEM, full_v = full_k + 8 * STAGES;
    const uint32_t empty_k = full_v + 8 * STAGES, empty_v = empty_k + 8 * STAGES;

    /* Work item w: its head bh, its first row i0, its key tiles ntiles. A block per item: w is blockIdx.x, the order
     * block_tile's. Persistent: w = blockIdx.x, then + gridDim.x while < items, in ticket_tile's order (the same one:
     * causal, the longest row tiles first); producer and consumers walk the same items, each counting key tiles (kt)
     * so that the ring of stages and its parities run on from one item to the next. */
    auto item = [&](long w, long &bh, long &i0, long &ntiles) {
        long tile;
        if constexpr (C::PERSISTENT)
            ticket_tile(w, items / row_tiles, row_tiles, causal, items / row_tiles, &bh, &tile);
        else
            block_tile(row_tiles, causal, &bh, &tile);
        i0 = tile * C::BR;
        const long last_row = (i0 + C::BR < N ? i0 + C::BR : N) - 1;
        const long jend = causal ? last_row + 1 : N;
        ntiles = (jend + BC - 1) / BC;
    };
    long bh, i0, ntiles;                          // the block's item (persistent: its first)
    item(blockIdx.x, bh, i0, ntiles);

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) {
            mbar_init(full_k + 8 * s, 1);
            mbar_init(full_v + 8 * s, 1);
            mbar_init(empty_k + 8 * s, 4 * C::NWG);
            mbar_init(empty_v + 8 * s, 4 * C::NWG);
        }
        fence_mbar_init();
    }
    P::init_smem(own, C::THREADS);
    __syncthreads();

    if (threadIdx.x < 128) {                      // the producer: K_j and V^T_j released apart (kernel 13's ring)
        setmaxnreg_dec<C::REG_PRODUCER>();
        if (threadIdx.x == 0) {
            int kt = 0;                           // key tiles loaded for the items before this one
            for (int w = blockIdx.x;;) {          // the items: once, unless PERSISTENT
                for (long j = 0; j < ntiles; j++) {
                    const int s = (int)((kt + j) % STAGES), use = (int)(((kt + j) / STAGES) & 1);
                    const uint32_t k_dst = smem_addr + s * TILE, v_dst = smem_addr + (STAGES + s) * TILE;
                    mbar_wait(empty_k + 8 * s, use ^ 1);
                    mbar_expect_tx(full_k + 8 * s, TILE);
                    tma_load_3d(k_dst, &tm_k, 0, (int)(j * BC), (int)bh, full_k + 8 * s);
                    mbar_wait(empty_v + 8 * s, use ^ 1);
                    mbar_expect_tx(full_v + 8 * s, TILE);
#pragma unroll
                    for (int b = 0; b < BC / C::VBOX; b++)   // V^T_j in boxes of VBOX keys, each [D][VBOX]
                        tma_load_3d(v_dst + b * C::VBOX * D, &tm_v, (int)(j * BC) + b * C::VBOX, 0, (int)bh,
                                    full_v + 8 * s);
                }
                if constexpr (!C::PERSISTENT) break;
                kt += ntiles, w += gridDim.x;     // the block's next item, if any
                if (w >= items) break;
                item(w, bh, i0, ntiles);
            }
        }
        return;
    }
    setmaxnreg_inc<C::REG_CONSUMER>();

    const int warp = threadIdx.x / 32 - 4, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    int kt = 0;                                  // key tiles consumed for the items before this one
    long warp_row0, row_g, row_g8;               // the item's rows: this warp's first, this thread's two
    uint32_t qf[D / 32][4];                      // Q8 of rows g and g + 8, FP8 A fragments
    float sq;                                    // Q's scale
    auto load_q = [&]() {                        // the item's rows and Q (bh and i0: item's)
        const uint8_t *Qh = Q + bh * N * D;
        warp_row0 = i0 + warp * 16;
        row_g = warp_row0 + g, row_g8 = row_g + 8;
#pragma unroll
        for (int ks = 0; ks < D / 32; ks++)
#pragma unroll
            for (int r = 0; r < 4; r++) {
                const long row = (r % 2) ? row_g8 : row_g;
                const int col = ks * 32 + 4 * t + 16 * (r / 2);
                qf[ks][r] = row < N ? *reinterpret_cast<const uint32_t *>(Qh + row * D + col) : 0u;
            }
        const long qb = i0 / 64 + warp / 4;
        sq = SQ[bh * nqb + (qb < nqb ? qb : nqb - 1)];
    };
    float o[D / 2];
    float m[2];
    typename P::RowSums l;                        // l of rows g and g + 8, as P keeps it
    auto clear = [&]() {                          // O, m and l for an item's start
#pragma unroll
        for (int n = 0; n < D / 2; n++) o[n] = 0.0f;
        m[0] = -INFINITY, m[1] = -INFINITY;
        l.reset();
    };
    float s[BC / 2];                              // S_j, then 2^8 p_j as floats
    uint32_t pf[BC / 32][4];                      // 2^8 p_{j-1} as FP8 A fragments of O += P V
    auto stage = [&](long j, uint32_t base) { return base + 8 * (uint32_t)((kt + j) % STAGES); };
    auto parity = [&](long j) { return (int)(((kt + j) / STAGES) & 1); };
    auto issue_s = [&](long j) {                  // S8_j = Q8 K8_j^T, issued, not waited for
        const uint32_t k_addr = smem_addr + (uint32_t)((kt + j) % STAGES) * TILE;
        mbar_wait(stage(j, full_k), parity(j));
        wgmma_fence();
        auto kdesc = [&](uint32_t at) { return D == 128 ? make_desc(at, 16, 1024) : make_desc_sw64(at, 512); };
#pragma unroll
        for (int ks = 0; ks < D / 32; ks++) {
            if constexpr (BC == 128) {
                wgmma_fp8<BC>(s, qf[ks], kdesc(k_addr + ks * 32), ks > 0);
            } else {                              // 192 keys: the first 128 rows of K_j, then the last 64
                wgmma_fp8<128>(s, qf[ks], kdesc(k_addr + ks * 32), ks > 0);
                wgmma_fp8<64>(s + 64, qf[ks], kdesc(k_addr + 128 * D + ks * 32), ks > 0);
            }
        }
        wgmma_commit();
    };
    auto issue_pv = [&](long j) {                 // O += P_j V_j, issued, not waited for
        const uint32_t v_addr = smem_addr + (uint32_t)(STAGES + (kt + j) % STAGES) * TILE;
        mbar_wait(stage(j, full_v), parity(j));
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BC / 32; kk++) {
            const uint64_t desc = C::VBOX == 128 ? make_desc(v_addr + kk * 32, 16, 1024)   // k step kk's 32 keys
                                                 : make_desc_sw64(v_addr + kk / 2 * 64 * D + kk % 2 * 32, 512);
            wgmma_fp8<D>(o, pf[kk], desc, 1);
            l.pv(pf[kk], own);                    // P's product beside it, if any
        }
        wgmma_commit();
    };
    auto release = [&](uint32_t bar) {
        __syncwarp();
        if (lane == 0) mbar_arrive(bar);
    };
    auto softmax = [&](long j, float alpha[2]) {  // kernel 15's softmax of S_j: m, l updated, 2^8 p_j left in s
        const long j0 = j * BC;
        constexpr int G = BC == FP8_KBLOCK ? 1 : BC / 64;  // key groups of one scale each: the tile, or 64 keys
        float sl2[G];                             // their log2-domain scales: group u's K block
        if constexpr (G == 1) {
            sl2[0] = scale_log2 * sq * SK[bh * nkb + j];
        } else {
#pragma unroll
            for (int u = 0; u < G; u++) {
                const long kb = (j0 + 64 * u) / FP8_KBLOCK;
                sl2[u] = scale_log2 * sq * SK[bh * nkb + (kb < nkb ? kb : nkb - 1)];
            }
        }
        const bool need_mask = j0 + BC > N || (causal && j0 + BC - 1 > warp_row0);
        const int lim = (int)(N - j0 < BC ? N - j0 : BC);
        float mt[2] = {-INFINITY, -INFINITY};     // the row's max of raw scores (G > 1: of group 0's)
        float mg[G][2];                           // G > 1: each group's
        if constexpr (G > 1)
#pragma unroll
            for (int u = 0; u < G; u++) mg[u][0] = -INFINITY, mg[u][1] = -INFINITY;
        auto take = [&](int n, int e) {       // score 4n + e (column 8n + ..., group n / (BC / G / 8)) into its max
            if constexpr (G == 1) mt[e / 2] = fmaxf(mt[e / 2], s[4 * n + e]);
            else mg[n / (BC / G / 8)][e / 2] = fmaxf(mg[n / (BC / G / 8)][e / 2], s[4 * n + e]);
        };
        if (need_mask) {
#pragma unroll
            for (int n = 0; n < BC / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int c = n * 8 + 2 * t + (e % 2), d = (int)((e < 2 ? row_g : row_g8) - j0);
                    if (c >= lim || (causal && c > d)) s[4 * n + e] = -INFINITY;
                    take(n, e);
                }
        } else {
#pragma unroll
            for (int n = 0; n < BC / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) take(n, e);
        }
        float bse[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            if constexpr (G > 1) {                // each group's max times its own scale (sl2 > 0: they commute)
                mt[h] = mg[0][h] * sl2[0];
#pragma unroll
                for (int u = 1; u < G; u++) mt[h] = fmaxf(mt[h], mg[u][h] * sl2[u]);
            }
#pragma unroll
            for (int off = 1; off <= 2; off *= 2) mt[h] = fmaxf(mt[h], __shfl_xor_sync(0xffffffffu, mt[h], off));
            const float mn = fmaxf(m[h], G == 1 ? mt[h] * sl2[0] : mt[h]);
            const float base = mn == -INFINITY ? 0.0f : mn;
            alpha[h] = ex2(m[h] - base);
            bse[h] = base - FP8_P_SHIFT;
            m[h] = mn;
        }
        l.begin();
#pragma unroll
        for (int x = 0; x < BC / 2; x++) {
            const float y = fmaf(s[x], sl2[x / (BC / 2 / G)], -bse[x % 4 / 2]);
            s[x] = P::exp2_score(x, y);           // 2^8 p
            l.add(x, s[x]);
        }
        l.end(alpha);
    };
    auto rescale_and_pack = [&](const float alpha[2]) {  // O *= alpha_j; 2^8 p_j into pf, kernel 15's key order
#pragma unroll
        for (int n = 0; n < D / 8; n++) {
            o[4 * n + 0] *= alpha[0]; o[4 * n + 1] *= alpha[0];
            o[4 * n + 2] *= alpha[1]; o[4 * n + 3] *= alpha[1];
        }
        l.rescale(alpha);
#pragma unroll
        for (int c = 0; c < BC / 32; c++) {
            const float *x = s + 16 * c;
            pf[c][0] = pack4_e4m3(x[0], x[1], x[4], x[5]);
            pf[c][1] = pack4_e4m3(x[2], x[3], x[6], x[7]);
            pf[c][2] = pack4_e4m3(x[8], x[9], x[12], x[13]);
            pf[c][3] = pack4_e4m3(x[10], x[11], x[14], x[15]);
        }
    };

    auto store_o = [&](long obh, long org) {      // O of rows org and org + 8 of head obh, over l, scaled by V's scale
        if constexpr (P::O_BY_TMA) {              // by the copy engine (kernel 48): the warp's rows from org - g
            /* inv as the per-thread path below computes it: computed once above both, it changed kernels 16-47's
             * machine code (cuobjdump) */
            const float sv = SV[obh];
            float inv[2];
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const float lr = l.total(h);
                inv[h] = lr > 0.0f ? sv / lr : 0.0f;
            }
            P::template store_o_tma<D>(own, warp, lane, o, inv, org - g, obh, N, &tm_o, out_bf16);
            return;
        }
        __half *Oh = O + obh * N * D;
        const float sv = SV[obh];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const float lr = l.total(h);
            const float inv = lr > 0.0f ? sv / lr : 0.0f;
            const long row = h ? org + 8 : org;
            if (row < N) {
#pragma unroll
                for (int n = 0; n < D / 8; n++)
                    *reinterpret_cast<uint32_t *>(Oh + row * D + n * 8 + 2 * t) =
                        pack_o2(o[4 * n + 2 * h] * inv, o[4 * n + 2 * h + 1] * inv, out_bf16);
            }
        }
    };
    using Turns = typename P::template Turns<C::NWG>;  // the turns at the tensor cores, as P takes them
    auto tiles = [&](const Turns &turn, float alpha[2]) {  // an item from S_0's wait (S_0 issued) to its last softmax
        wgmma_wait<0>();
        if constexpr (P::EARLY_START) clear();    // at the item's start (ptxas: the same code as clearing under S_0)
        release(stage(0, empty_k));
        softmax(0, alpha);
        rescale_and_pack(alpha);
        for (long j = 1; j < ntiles; j++) {
            turn.mine();
            issue_s(j);                               // S_j ...
            issue_pv(j - 1);                          // ... and O += P_{j-1} V_{j-1} behind it
            turn.yours();
            wgmma_wait<1>();                          // S_j is in; P V still running
            release(stage(j, empty_k));
            softmax(j, alpha);                        // under P_{j-1} V_{j-1}
            wgmma_wait<0>();
            release(stage(j - 1, empty_v));
            rescale_and_pack(alpha);
        }
    };

    if constexpr (!P::EARLY_START) {
        for (int w = blockIdx.x;;) {              // the items: once, unless PERSISTENT
            load_q();
            clear();
            const Turns turn{warp / 4};
            turn.first();
            float alpha[2];
            turn.mine();
            issue_s(0);
            turn.yours();
            tiles(turn, alpha);
            turn.mine();
            issue_pv(ntiles - 1);
            turn.last();
            wgmma_wait<0>();
            release(stage(ntiles - 1, empty_v));
            store_o(bh, row_g);
            if constexpr (!C::PERSISTENT) break;
            kt += ntiles, w += gridDim.x;         // the block's next item, if any
            if (w >= items) break;
            item(w, bh, i0, ntiles);
        }
    } else {                                      // EARLY_START (persistent): the next S_0 behind the last P V
        /* ptxas must never see two ways meet where an S is running on one and not on the other (it then serialises
         * every wgmma, warning C7515): so the first item's S_0 is issued before the loop, each later one at the end
         * of the item before, and the block's last item ends apart, with a break. */
        load_q();
        const Turns turn{warp / 4};
        turn.first();
        turn.mine();
        issue_s(0);
        turn.yours();
        for (long w = blockIdx.x;;) {
            float alpha[2];
            tiles(turn, alpha);
            const long nw = w + gridDim.x;
            if (nw >= items) {                    // the block's last item: the other loop's end, written again
                turn.mine();                      // (one lambda for both moved kernel 47's registers: this was measured)
                issue_pv(ntiles - 1);
                turn.last();
                wgmma_wait<0>();
                release(stage(ntiles - 1, empty_v));
                store_o(bh, row_g);
                break;
            }
            const long obh = bh, org = row_g, on = ntiles;   // this item's, for its last P V and its store
            item(nw, bh, i0, ntiles);             // the next item ...
            load_q();                             // ... and its Q: qf is free, this item's last S has been waited for
            turn.mine();
            issue_pv(on - 1);                     // this item's last P V ...
            issue_s(on);                          // ... and the next item's S_0 behind it (ring tile kt + on)
            turn.yours();
            wgmma_wait<1>();                      // the P V is in; S_0 still running
            release(stage(on - 1, empty_v));
            store_o(obh, org);                    // under S_0
            kt += on, w = nw;
        }
    }
    if constexpr (P::O_BY_TMA)                    // the copy engine done with the last O before the block ends
        if (lane == 0) bulk_wait_all();
#else
    (void)Q, (void)O, (void)SQ, (void)SK, (void)SV, (void)N, (void)nqb, (void)nkb, (void)row_tiles, (void)causal, (void)out_bf16,
        (void)scale_log2, (void)tm_k, (void)tm_v, (void)items, (void)tm_o;
#endif
}

// --- the launcher -------------------------------------------------------------------

/* Kernel 16's launcher, with P's kernel (P128's at D = 128, P's unless given): kernels 17, 24, 28, 30 and 45-48
 * launch theirs with it too. */
template <class P, class P128 = P> static int fp8_pingpong_launch(int id, const Fp8Args *a, void *stream)
{
    if (wgmma_refused()) return -1;
    if (a->D == 64) return fp8_launch_d<Fp8PP<64, P>, 64>(fp8_pingpong<64, P>, id, a, (cudaStream_t)stream);
    if (a->D == 128) return fp8_launch_d<Fp8PP<128, P128>, 128>(fp8_pingpong<128, P128>, id, a, (cudaStream_t)stream);
    fprintf(stderr, "%s: kernel %d takes D = 64 or 128, not %ld\n", g_prog, id, a->D);
    return -1;
}

#if RUNG == 16
template <int D> using K16 = Fp8PP<D, Fp8PingPong>;

static int k16_launch(const Fp8Args *a, void *stream) { return fp8_pingpong_launch<Fp8PingPong>(16, a, stream); }

static void k16_describe(long D, char *buf, size_t n)
{
    snprintf(buf, n, "1 producer + 2 consumer warpgroups taking turns, BR=128 BC=%d, e4m3 wgmma k=32, softmax under P V, "
             "%zu bytes of shared memory", K16<64>::BC, D == 64 ? K16<64>::bytes : K16<128>::bytes);
}

static const Fp8Kernel kernel16 = {
    .id = 16, .extends = 15, .name = "fp8 ping-pong",
    .idea = "kernel 14's schedule in FP8: the softmax of tile j under P_{j-1} V_{j-1}, two warpgroups taking turns at the tensor cores",
    .launch = k16_launch, .describe = k16_describe, .unavailable = fp8_unavailable,
};
FP8_REGISTER(kernel16);
#endif
