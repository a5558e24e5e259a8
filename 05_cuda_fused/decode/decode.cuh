/*
 * decode.cuh: decode kernels 2 to 13, written once, as overlap.cuh is for forward kernels 13 and 14 and
 * bwd_mma.cuh for backward kernels 2 to 4. Each decodeN_*.cu instantiates the template below with its one
 * idea switched on (`make idea K=D3` shows the flags):
 *
 *   DecodeFlags<SPLIT, GROUPED, PAGED, NST[, OCC[, LEAN[, BULK[, MERGE8[, EARLY[, ROUND[, ONE[, FRONT]]]]]]]]>
 *   kernel 2  <0, 0, 0, 3>  the forward kernel as is: one block per (sequence, query head), its 4 warps
 *                           16 query rows each, every warp over every key (kernel 9's loop); n <= 16
 *                           new rows fill one warp, the block's other three only load
 *   kernel 3  <1, 0, 0, 4>  split-KV (flash-decoding): the keys of a sequence split across S blocks and,
 *                           inside a block, across its 4 warps; each ends with the tile loop's state
 *                           (m, l, o) for its rows, the warps' states merged in shared memory, the
 *                           blocks' by a second kernel: step 04's merge (flash.c: flash_merge_cpu), twice
 *   kernel 4  <1, 1, 0, 4>  grouped heads: one block per KV head, whose K/V tiles serve every query head
 *                           that reads them (Hq / Hkv of them, each with n rows): the cache read once
 *   kernel 5  <1, 1, 1, 3>  paged: the cache in pages of P keys, in any order, shared between sequences,
 *                           found through a block table (vLLM's PagedAttention)
 *   kernel 6  <1, 1, 1, 3, 1>  stages for occupancy: kernel 5, with two stages (three blocks an SM) where
 *                           B x heads fill the GPU without a split; a choice of the launcher (dec_fewer)
 *   kernel 7  <1, 1, 1, 3, 1, 1>  lean copies: kernel 6, each thread's copy addresses worked out once per
 *                           16-key quarter of a tile instead of once per 16 bytes (dec_load_tile_lean)
 *   kernel 8  <1, 1, 1, 3, 1, 1, 1>  bulk copies: kernel 7's tiles brought by the copy engine, one 4 KB
 *                           box per 16-key quarter of K or V issued by warp 0, a stage's bytes counted on
 *                           its mbarrier (dec_bulk_tile; sm_90 and later)
 *   kernel 9  <1, 1, 1, 3, 1, 1, 1, 1>  merge in flight: kernel 8, the merge kernel's loads of the S splits'
 *                           states 8 at a time (decode_merge's UNR)
 *   kernel 10 <1, 1, 1, 3, 1, 1, 1, 1, 1>  the merge launched early: kernel 9, its merge kernel launched as a
 *                           programmatic dependent of the split kernel (sm_90), resident and waiting
 *                           (griddepcontrol.wait) while the split's last blocks run
 *   kernel 11 <1, 1, 1, 3, 1, 1, 1, 1, 1, 1>  the merge's loads in one round: kernel 10, its merge kernel reading
 *                           every split's state of its row at once (decode_merge_round) instead of 8 at a time,
 *                           twice
 *   kernel 12 <1, 1, 1, 3, 1, 1, 1, 1, 1, 1, 1>  one block an SM at short splits: kernel 11, where its splits would
 *                           hold fewer than 8 tiles each, as many splits as fill the SMs with one block each
 *                           (half of them at D = 128), each twice as long, where that grid fills 7/8 of the SMs;
 *                           a choice of the launcher (dec_grid)
 *   kernel 13 <1, 1, 1, 3, 1, 1, 1, 1, 1, 1, 1, 1>  loads up front: kernel 12, the length, the first tile's page
 *                           entries and Q's fragments loaded together, the first tile's boxes issued behind one
 *                           trip to memory instead of three
 *
 * The arithmetic is kernel 9's (05_cuda_fused/kernel09_ffma_scale.cu): S = Q K^T and O += P V on
 * mma.sync m16n8k16, fp32 accumulators, the running max in log2 units, p = 2^(s scale_log2 - m) as one
 * FFMA and one ex2, P packed from the score fragments into the A fragments of the second product
 * without leaving registers. A warp owns 16 query rows; the new rows of a sequence (n <= 16), or of a
 * group of query heads (Hq / Hkv x n), are padded to 16: the tensor cores do the padding's work, and
 * they are far from being what a decode waits on.
 *
 * What a decode waits on is memory: one new row reads every cached key and value once and does 4 D flops
 * with each pair of 2 D elements, an arithmetic intensity of 1 flop per byte in fp16, where the H100's
 * balance point is about 300. The kernels are judged in GB/s of K and V read, against the measured read
 * bandwidth of the device. Everything below serves that: K/V tiles of BC = 64 keys stream through shared
 * memory by cp.async, NST stages deep (NST - 1 tiles in flight while one is used), and the grid is sized
 * to fill the GPU, which is the whole of kernel 3's idea: one query row per head gives the forward's
 * grid B x Hq blocks (32 at B = 1 and 32 heads, for 132 SMs); splitting the keys gives each SM work.
 */
#ifndef DECODE_CUH
#define DECODE_CUH

#include <climits>
#include <cmath>
#include <cstdio>

#include "gpu.cuh"
#include "../kernels.h"
#include "../primitives/tc.cuh"
#include "../primitives/tma_map.cuh" // decode kernel 8: the cache as a tensor map
#include "../primitives/wgmma.cuh"   // ... and the copy engine's loads and mbarriers

constexpr int DEC_BC = 64;        // keys per K/V tile
constexpr int DEC_WARPS = 4;
constexpr int DEC_ROWS = 64;      // query rows per block: 4 warps x 16

/* NST: the cp.async stages, NST - 1 tiles in flight while one is used. 3 stages take 104 KB at D = 128 (two
 * blocks an SM), 4 take 139 KB (one). */
template <bool SPLIT_, bool GROUPED_, bool PAGED_, int NST_, bool OCC_ = false, bool LEAN_ = false, bool BULK_ = false,
          bool MERGE8_ = false, bool EARLY_ = false, bool ROUND_ = false, bool ONE_ = false, bool FRONT_ = false>
struct DecodeFlags {
    static constexpr bool SPLIT = SPLIT_, GROUPED = GROUPED_, PAGED = PAGED_;
    static constexpr int NST = NST_;
    static constexpr bool OCC = OCC_;   // decode kernel 6: two stages where the grid fills the GPU without a split
    static constexpr bool LEAN = LEAN_; // decode kernel 7: the copies' address arithmetic once per quarter tile
    static constexpr bool BULK = BULK_; // decode kernel 8: quarter tiles by the copy engine, an mbarrier a stage
    static constexpr bool MERGE8 = MERGE8_; // decode kernel 9: the merge's loads of the splits' states 8 at a time
    static constexpr bool EARLY = EARLY_;   // decode kernel 10: the merge kernel launched while the split kernel runs
    static constexpr bool ROUND = ROUND_;   // decode kernel 11: the merge's loads of the splits' states in one round
    static constexpr bool ONE = ONE_;       // decode kernel 12: one block an SM where the splits would be short
    static constexpr bool FRONT = FRONT_;   // decode kernel 13: the first copy behind one trip to memory, not three
    /* FRONT reads the first tile's page entries before the length: a cp.async copy (no BULK) would take an entry past
     * the length as a page (dec_load_tile_lean counts on page 0 there); the boxes skip those quarters */
    static_assert(!FRONT_ || BULK_, "FRONT needs BULK");
};

/* A stage is K's tile then V's, 64 rows of D. Kernels 2-7: rows padded to LD = D + 8 (16 bytes a row: ldmatrix
 * without bank conflicts, kernel 4's). BULK (kernel 8): rows unpadded and swizzled as the copy engine writes them
 * (dec_at), the stages 1024-byte aligned (the 128-byte swizzle's atom; 1 KB more to align in), then the stages'
 * mbarriers. */
template <int D, int NST, bool BULK = false> struct DecSmem {
    static constexpr int LD = BULK ? D : D + 8;
    static constexpr size_t stages = (size_t)NST * 2 * DEC_BC * LD * 2; // K and V, NST stages, 16-bit
    static constexpr size_t bytes = stages + (BULK ? 1024 + 8 * NST : 0);
};
template <int D, class F> using DecSmemF = DecSmem<D, F::NST, F::BULK>;

/* What one launch needs, by value. The partial states of the split (SPLIT, S > 1) go to ws_m, ws_l
 * [rows_total, S] and ws_o [rows_total, S, D], rows_total = B Hq n, in log2 units as the kernel keeps m. */
template <typename T> struct DecParams {
    const T *q; T *o;
    const T *k, *v;                // contiguous [B, Hkv, max_len, D], or the pools [pages, Hkv, page, D]
    const int *len, *table;
    float *ws_m, *ws_l, *ws_o;
    long Hq, Hkv, n, max_len, max_pages;
    int page_shift;                // page = 1 << page_shift (PAGED)
    int heads;                     // heads per sequence in the grid: Hkv (GROUPED) or Hq
    int g;                         // query heads per block's KV head: Hq / Hkv (GROUPED), else 1
    int rows;                      // query rows per (sequence, grid head): g n
    int S, chunk_tiles;            // splits of the keys, tiles per split
    float scale_log2;
    CUtensorMap tmk, tmv;          // BULK: K and V (pools, or contiguous caches) as tensors for the copy engine
};

/* float -> T, rounded to nearest (the outputs' one rounding). */
template <typename T> __device__ __forceinline__ T dec_from_float(float x);
template <> __device__ __forceinline__ __half dec_from_float<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 dec_from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

/* The query head and new-row index of the block's row gr (0 .. rows - 1) of grid head h. */
template <bool GROUPED, typename T>
__device__ __forceinline__ void dec_row(const DecParams<T> &p, long h, int gr, long *hq, long *i)
{
    if (GROUPED) { *hq = h * p.g + gr / p.n; *i = gr % p.n; }
    else { *hq = h; *i = gr; }
}

/* PAGED: the pages of tile `tile`'s four 16-key quarters (a page holds 16 keys or more, so a quarter is in
 * one page), read from the block table one tile before they are needed: the loads' latency is then under
 * a tile's work instead of in front of its copies (where it cost 5 to 9% with one block an SM). */
template <typename T>
__device__ __forceinline__ void dec_tile_pages(const DecParams<T> &p, long b, long tile, int len, int (&ent)[4])
{
#pragma unroll
    for (int q = 0; q < 4; q++) {
        const long key = tile * DEC_BC + 16 * q;
        ent[q] = key < len ? p.table[b * p.max_pages + (key >> p.page_shift)] : 0;
    }
}

/* One K/V tile (keys key0 .. key0 + 63 of sequence b, KV head hkv) into shared memory [64][LD] by
 * cp.async, each thread every 128th 16-byte chunk (consecutive threads, consecutive chunks of a row: one
 * warp copies 512 contiguous bytes an instruction); keys past len are zero-filled (the mask hides them).
 * PAGED: key -> row key % P of page ent[quarter of key], from dec_tile_pages. */
template <int D, bool PAGED, typename T>
__device__ __forceinline__ void dec_load_tile(T *ks, T *vs, const DecParams<T> &p, long b, long hkv, long key0, int len,
                                              const int (&ent)[4])
{
    constexpr int LD = D + 8, CH = DEC_BC * D / 8;
    const long base = (b * p.Hkv + hkv) * p.max_len * D; // contiguous: sequence b, head hkv
    for (int c = threadIdx.x; c < CH; c += DEC_WARPS * 32) {
        const int r = c / (D / 8), col = (c % (D / 8)) * 8;
        const long key = key0 + r;
        const bool in = key < len;
        long off = 0;
        if (in) {
            if (PAGED) {
                const int q = r / 16, page = q == 0 ? ent[0] : q == 1 ? ent[1] : q == 2 ? ent[2] : ent[3]; // (no local array)
                off = (((long)page * p.Hkv + hkv) << p.page_shift | (key & ((1L << p.page_shift) - 1))) * D + col;
            }
            else off = base + key * D + col;
        }
        cp_async16(ks + r * LD + col, p.k + off, in ? 16 : 0);
        cp_async16(vs + r * LD + col, p.v + off, in ? 16 : 0);
    }
}

/* Decode kernel 7: the same tile, the same cp.async, the address arithmetic hoisted. dec_load_tile works out
 * every 16-byte chunk's row, column, page and 64-bit offset from its index (about 17 instructions per cp.async
 * in its PTX at D = 128, a division, a 4-way page select, 64-bit multiplies), and a decode step is nothing but
 * these copies and a little math: Nsight Compute saw kernel 6 at B = 64 issue an instruction every 1.8 cycles
 * per scheduler with DRAM 73% busy. Here a thread keeps one column for the whole tile (col, from threadIdx)
 * and its rows are r0, r0 + RSTEP, ... (RSTEP = 8 at D = 128, 16 at D = 64), so that which quarter (16 keys:
 * one page) a row falls in is known at compile time: per quarter one page lookup and one 64-bit address, then
 * its rows at constant offsets from it. */
template <int D, bool PAGED, typename T>
__device__ __forceinline__ void dec_load_tile_lean(T *ks, T *vs, const DecParams<T> &p, long b, long hkv, long key0,
                                                   int len, const int (&ent)[4])
{
    constexpr int LD = D + 8, CPR = D / 8;                 // 16-byte chunks per row: 16 at D = 128, 8 at D = 64
    constexpr int RSTEP = DEC_WARPS * 32 / CPR;            // rows the block covers in one pass: 8 or 16
    constexpr int PASSES = 16 / RSTEP;                     // passes per 16-key quarter: 2 or 1
    const int r0 = threadIdx.x / CPR, col = (threadIdx.x % CPR) * 8;
#pragma unroll
    for (int q = 0; q < 4; q++) {
        const long kq = key0 + 16 * q;                     // the quarter's first key, 16-aligned: one page holds it all
        const long row = PAGED ? ((((long)ent[q] * p.Hkv + hkv) << p.page_shift) | (kq & ((1L << p.page_shift) - 1)))
                               : (b * p.Hkv + hkv) * p.max_len + kq;           // the quarter's first row in K and V
        const T *kq_g = p.k + row * D + col, *vq_g = p.v + row * D + col;
#pragma unroll
        for (int i = 0; i < PASSES; i++) {
            const int r = r0 + RSTEP * i;                  // the row within the quarter
            const bool in = kq + r < len;                  // past len: zero-filled, nothing read (the mask hides it)
            /* PAGED: the address is inside the pool even past len (the quarter's own page, or page 0 for a quarter
             * wholly past len: dec_tile_pages), so no select */
            cp_async16(ks + (16 * q + r) * LD + col, PAGED || in ? kq_g + r * D : p.k, in ? 16 : 0);
            cp_async16(vs + (16 * q + r) * LD + col, PAGED || in ? vq_g + r * D : p.v, in ? 16 : 0);
        }
    }
}

/* Where element (r, c) of a 64-row tile of one stage sits (in elements from the tile's start). Kernels 2-7: row r
 * padded to LD = D + 8. Decode kernel 8 (SW): as the copy engine leaves a box of 16 rows x 64 columns (128 bytes a
 * row) with the 128-byte swizzle, boxes in the order (quarter r / 16, column half c / 64): row r's 16-byte chunk j
 * sits at chunk j ^ (r % 8), so ldmatrix's 8 rows of one chunk fall in 8 different bank groups (kernel 10's layout). */
template <int D, bool SW> __device__ __forceinline__ int dec_at(int r, int c)
{
    if constexpr (!SW) return r * (D + 8) + c;
    else return ((((r / 16) * (D / 64) + c / 64) * 16 + r % 16) * 64) + ((((c % 64) / 8) ^ (r % 8)) * 8) + c % 8;
}

/* dec_at for ldmatrix's rows: row kr + rl (kr a multiple of 16, rl = 0..15 the lane's row), column c + cl (c a
 * multiple of 16 known when compiling, cl = 0 or 8 the lane's half), the lane's part apart from the compiled part:
 * the swizzle is then one XOR with a per-lane constant, not a division and a modulo per ldmatrix. */
template <int D, bool SW> __device__ __forceinline__ int dec_ld_at(int kr, int rl, int c, int cl)
{
    if constexpr (!SW) return (kr + rl) * (D + 8) + c + cl;
    else return (((kr >> 4) * (D / 64) + c / 64) * 16 + rl) * 64 + ((((c % 64) / 8) ^ ((cl / 8) ^ (rl % 8))) * 8);
}

/* Decode kernel 8: the tile by the copy engine. A 16-key quarter of a tile is 16 consecutive rows of the cache
 * (in one page, or of one sequence's head), so one request of the copy engine brings it: the cache viewed as a
 * tensor [rows][D / 64 column halves][64] (dec_tensor_maps) gives a quarter as one box of 16 rows x 64 columns x
 * the halves, 4 KB at D = 128, landing as the halves one after the other, each [16][64] with the 128-byte swizzle
 * (dec_at's layout). 4 boxes of K and 4 of V per tile, where kernel 7 issues 2048 cp.async of 16 bytes. The
 * request's size is the point: the same tile as 128 bulk copies of one 256-byte row (into kernel 7's padded rows)
 * read the cache at half the rate of these boxes on the H200 (decode8_bulk_copies.cu has the steps measured).
 * Lanes 0-7 of warp 0 each issue one box (lane / 2 the quarter, lane % 2 K or V),
 * lane 0 tells the stage's mbarrier the bytes; the cache is read once, so each box is marked to leave L2 first.
 * Quarters wholly past len are not read; rows past len inside a read quarter arrive with whatever the cache holds
 * there (a slot never written may hold a NaN, and p = 0 times a NaN of V is NaN), so the block zeroes every row
 * from len on once the tile has landed (dec_zero_past_len). sm_90 and later; elsewhere the kernel is not launched. */
template <int D, bool PAGED, typename T>
__device__ __forceinline__ void dec_bulk_tile(T *ks, T *vs, const DecParams<T> &p, long b, long hkv, long key0, int len,
                                              const int (&ent)[4], uint32_t bar)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const int lane = threadIdx.x % 32;
    const int quarters = (int)min(4L, (len - key0 + 15) / 16); // quarters holding a key before len (key0 < len)
    if (lane == 0) mbar_expect_tx(bar, quarters * 16 * D * 2 * 2); // their K and V boxes
    const int q = lane / 2, isv = lane % 2;
    if (q < quarters) {
        const long kq = key0 + 16 * q;
        const int page = q == 0 ? ent[0] : q == 1 ? ent[1] : q == 2 ? ent[2] : ent[3];
        const long row = PAGED ? ((((long)page * p.Hkv + hkv) << p.page_shift) | (kq & ((1L << p.page_shift) - 1)))
                               : (b * p.Hkv + hkv) * p.max_len + kq;  // the quarter's first row in the [rows, D] view
        uint64_t policy;                                   // L2: evict these lines first (each byte is read once)
        asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
        asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint"
                     " [%0], [%1, {%2, %3, %4}], [%5], %6;\n"
                     ::"r"((uint32_t)__cvta_generic_to_shared((isv ? vs : ks) + dec_at<D, true>(16 * q, 0))),
                       "l"(reinterpret_cast<uint64_t>(isv ? &p.tmv : &p.tmk)), "r"(0), "r"((int)row), "r"(0), "r"(bar),
                       "l"(policy) : "memory");
    }
#else
    (void)ks, (void)vs, (void)p, (void)b, (void)hkv, (void)key0, (void)len, (void)ent, (void)bar;
    __trap();                                              // never launched below sm_90 (decode kernel 8's unavailable)
#endif
}

/* Decode kernel 8: after the tile that holds the sequence's end has landed, its rows from len on zeroed by the
 * block (then a __syncthreads): V's so that p = 0 times them is 0, K's so that no score reads an unwritten value. */
template <int D, typename T>
__device__ __forceinline__ void dec_zero_past_len(T *ks, T *vs, long key0, int len)
{
    const int from = (int)(len - key0);                    // 1 .. 63
    for (int x = threadIdx.x; x < (DEC_BC - from) * (D / 8); x += DEC_WARPS * 32) {
        const int r = from + x / (D / 8), c = (x % (D / 8)) * 8;
        *reinterpret_cast<uint4 *>(ks + dec_at<D, true>(r, c)) = make_uint4(0, 0, 0, 0);
        *reinterpret_cast<uint4 *>(vs + dec_at<D, true>(r, c)) = make_uint4(0, 0, 0, 0);
    }
}

/* NULL where the BULK kernels (decode kernels 8 to 13) run: sm_90 or later, in this build; else one line why not
 * (defined in decode8_bulk_copies.cu). */
const char *dec_bulk_unavailable(void);

/* BULK: the stages' mbarriers (count 1: lane 0 of warp 0's arrive with the bytes), and the wait for one. */
__device__ __forceinline__ void dec_bars_init(uint32_t bar0, int n)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (threadIdx.x == 0) {
        for (int i = 0; i < n; i++) mbar_init(bar0 + 8 * i, 1);
        fence_mbar_init();                                 // seen by the copy engine
    }
    __syncthreads();
#else
    (void)bar0, (void)n;
    __trap();
#endif
}
__device__ __forceinline__ void dec_bar_wait(uint32_t bar, int parity)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    mbar_wait(bar, parity);
#else
    (void)bar, (void)parity;
    __trap();
#endif
}

/* The tile copy a kernel's flags choose. */
template <int D, class F, typename T>
__device__ __forceinline__ void dec_copy_tile(T *ks, T *vs, const DecParams<T> &p, long b, long hkv, long key0, int len,
                                              const int (&ent)[4], uint32_t bar)
{
    if constexpr (F::BULK) {
        if (threadIdx.x < 32) dec_bulk_tile<D, F::PAGED>(ks, vs, p, b, hkv, key0, len, ent, bar);
    }
    else if constexpr (F::LEAN) dec_load_tile_lean<D, F::PAGED>(ks, vs, p, b, hkv, key0, len, ent);
    else dec_load_tile<D, F::PAGED>(ks, vs, p, b, hkv, key0, len, ent);
}

/* 16 keys (k_s rows kr .. kr + 15, absolute keys ka .. ka + 15) into one warp's state for its 16 rows:
 * the tile loop of step 04 on fragments. last[h]: the last key row g + 8h may see (-1: a padded row). */
template <int D, typename T, bool SW = false>
__device__ __forceinline__ void dec_warp16(const uint32_t (&qa)[D / 16][4], const T *k_s, const T *v_s, int kr, long ka,
                                           const long (&last)[2], bool need_mask, float scale_log2,
                                           float (&o)[D / 8][4], float (&m)[2], float (&l)[2])
{
    const int lane = threadIdx.x % 32, t = lane % 4;
    float s[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
    for (int ks = 0; ks < D / 16; ks++) {                                      // s_tile = Q K^T, 16 x 16
        uint32_t kf[4];
        ldmatrix_x4(kf, k_s + dec_ld_at<D, SW>(kr, (lane % 8) + 8 * (lane / 16), ks * 16, 8 * ((lane / 8) % 2)));
        mma16816<T>(s[0], qa[ks], kf);
        mma16816<T>(s[1], qa[ks], kf + 2);
    }
    float mt[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nt = 0; nt < 2; nt++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            float &x = s[nt][e];
            if (need_mask && ka + nt * 8 + 2 * t + (e % 2) > last[e / 2]) x = -INFINITY; // causal, and past len
            mt[e / 2] = fmaxf(mt[e / 2], x);                                   // m_tile = rowmax(s_tile)
        }
    float bse[2], alpha[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
#pragma unroll
        for (int off = 1; off <= 2; off *= 2) mt[h] = fmaxf(mt[h], __shfl_xor_sync(0xffffffffu, mt[h], off));
        const float mn = fmaxf(m[h], mt[h] * scale_log2);                      // m_new = max(m, m_tile), log2 units
        bse[h] = mn == -INFINITY ? 0.0f : mn;                                  // nothing visible yet: 2^(-inf) = 0
        alpha[h] = ex2(m[h] - bse[h]);                                         // alpha = e^(m - m_new)
        m[h] = mn;
    }
    uint32_t pf[4];                                                            // p_tile as the A fragment
    float p[2][4];
#pragma unroll
    for (int nt = 0; nt < 2; nt++)
#pragma unroll
        for (int e = 0; e < 4; e++) p[nt][e] = ex2(fmaf(s[nt][e], scale_log2, -bse[e / 2])); // p = e^(s - m_new)
    pf[0] = pack2<T>(p[0][0], p[0][1]);   // row g,   keys 2t, 2t+1
    pf[1] = pack2<T>(p[0][2], p[0][3]);   // row g+8
    pf[2] = pack2<T>(p[1][0], p[1][1]);   // row g,   keys 2t+8, 2t+9
    pf[3] = pack2<T>(p[1][2], p[1][3]);   // row g+8
#pragma unroll
    for (int h = 0; h < 2; h++)
        l[h] = alpha[h] * l[h] + p[0][2 * h] + p[0][2 * h + 1] + p[1][2 * h] + p[1][2 * h + 1]; // l = alpha l + rowsum(p)
#pragma unroll
    for (int nt = 0; nt < D / 8; nt++) {                                        // o = alpha o ...
        o[nt][0] *= alpha[0]; o[nt][1] *= alpha[0];
        o[nt][2] *= alpha[1]; o[nt][3] *= alpha[1];
    }
#pragma unroll
    for (int n2 = 0; n2 < D / 16; n2++) {                                       // ... + p_tile V
        uint32_t vf[4];
        ldmatrix_x4_trans(vf, v_s + dec_ld_at<D, SW>(kr, (lane % 8) + 8 * ((lane / 8) % 2), n2 * 16, 8 * (lane / 16)));
        mma16816<T>(o[2 * n2], pf, vf);
        mma16816<T>(o[2 * n2 + 1], pf, vf + 2);
    }
}

/* Decode kernel 10: programmatic dependent launch (sm_90; PTX griddepcontrol). The split kernel's blocks each say at
 * their start that the merge kernel, launched after it with the programmatic-serialization attribute, may be
 * scheduled; once every split block has said so (is resident or done), the merge kernel's blocks are placed on the
 * SMs beside them and wait in griddepcontrol.wait, which returns when the split kernel has completed and its
 * writes are visible. So the merge's launch and its blocks' start run under the split's last blocks. Elsewhere
 * (sm_75, sm_80 builds) both are empty: kernel 10 runs only where decode kernel 8's copy engine does. */
__device__ __forceinline__ void dec_launch_dependents()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void dec_wait_prerequisite()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

template <int D, typename T, class F>
__global__ void __launch_bounds__(DEC_WARPS * 32)
decode_kernel(const __grid_constant__ DecParams<T> p)     // (__grid_constant__: the tensor maps' address is taken)
{
    if constexpr (F::EARLY) dec_launch_dependents();          // kernel 10: the merge kernel may take its place now
    constexpr int LD = DecSmemF<D, F>::LD, NST = F::NST;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    /* BULK: the stages from the first 1024-byte boundary (the swizzle's atom), their mbarriers after them */
    unsigned char *stage0 = F::BULK ? smem_raw + ((1024 - ((uint32_t)__cvta_generic_to_shared(smem_raw) & 1023)) & 1023)
                                    : smem_raw;
    T *k_buf = reinterpret_cast<T *>(stage0);                    // [NST][BC][LD]
    T *v_buf = k_buf + NST * DEC_BC * LD;                    // [NST][BC][LD]
    const uint32_t bar0 = (uint32_t)__cvta_generic_to_shared(stage0 + DecSmemF<D, F>::stages); // BULK: [NST] mbarriers
    const long b = blockIdx.x / p.heads, h = blockIdx.x % p.heads;
    const int s = blockIdx.y, rc = blockIdx.z;                   // split s of the keys, row chunk rc
    const long hkv = F::GROUPED ? h : h / (p.Hq / p.Hkv);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int t0 = s * p.chunk_tiles;
    int ent[4] = {0, 0, 0, 0};                                   // PAGED: the pages of the next tile to copy
    const bool copier = !F::BULK || warp == 0;                   // BULK: warp 0 alone copies, so alone needs pages
    const int len = p.len[b];

    /* Who does what. rows_here query rows (of the rows of this sequence and grid head) in R blocks of 16.
     * SPLIT: warp w takes row block w % R and key slice w / R of nsl = 4 / R slices of each tile; the
     * forward's way (kernel 2): warp w takes row block w and every key. */
    const int rows_here = min(DEC_ROWS, p.rows - rc * DEC_ROWS), R = (rows_here + 15) / 16;
    const int nsl = F::SPLIT ? DEC_WARPS / R : 1;
    const int rb = F::SPLIT ? warp % R : warp, sl = F::SPLIT ? warp / R : 0;
    const bool active = rb < R && sl < nsl;
    const int slice_keys = DEC_BC / nsl;                         // 16, 32 or 64

    /* This lane's two rows (g and g + 8 of the row block): their new-row index i, whether they are real, and Q's
     * A fragments, straight from memory. */
    long qi[2];
    bool qreal[2];
    uint32_t qa[D / 16][4];
    auto load_q = [&]() {
#pragma unroll
        for (int hh = 0; hh < 2; hh++) {
            const int gr = rc * DEC_ROWS + rb * 16 + g + 8 * hh;
            long hq = 0, i = 0;
            const bool real = active && gr < p.rows;
            if (real) dec_row<F::GROUPED>(p, h, gr, &hq, &i);
            qi[hh] = i;
            qreal[hh] = real;
            const T *qrow = p.q + ((b * p.Hq + hq) * p.n + i) * D;
#pragma unroll
            for (int ks = 0; ks < D / 16; ks++) {
                qa[ks][hh] = real ? *reinterpret_cast<const uint32_t *>(qrow + ks * 16 + 2 * t) : 0u;
                qa[ks][2 + hh] = real ? *reinterpret_cast<const uint32_t *>(qrow + ks * 16 + 8 + 2 * t) : 0u;
            }
        }
    };
    /* FRONT (decode kernel 13): the first tile's pages (read for every key below max_len, the longest sequence's
     * length, whose pages the table holds: which of them lie before this sequence's len is decided when the copies
     * are issued) and Q's fragments are loaded while the length is still on its way, and the mbarriers made
     * meanwhile: by the loads' order, one trip to memory before the first copy, not three (the length, then Q
     * behind the split's test, then the pages behind the barriers). */
    if constexpr (F::FRONT) {
        if (F::PAGED && copier) dec_tile_pages(p, b, t0, (int)min(p.max_len, (long)INT_MAX), ent);
        load_q();
        if constexpr (F::BULK) dec_bars_init(bar0, NST);
    }
    const int tiles = (len + DEC_BC - 1) / DEC_BC;
    const int t1 = min(t0 + p.chunk_tiles, tiles);
    if (t0 >= t1) return;                                        // a split past this sequence's keys: no state

    /* The K/V tiles t0 .. t1 - 1 through NST stages: tile it + NST - 1 is copied while tile it is used. */
    auto first_copies = [&]() {
#pragma unroll
        for (int st = 0; st < NST - 1; st++) {
            if (t0 + st < t1) {
                if (F::PAGED && copier && !(F::FRONT && st == 0)) dec_tile_pages(p, b, t0 + st, len, ent);
                dec_copy_tile<D, F>(k_buf + st * DEC_BC * LD, v_buf + st * DEC_BC * LD, p, b, hkv,
                                    (long)(t0 + st) * DEC_BC, len, ent, bar0 + 8 * st);
            }
            cp_async_commit();
        }
        if (F::PAGED && copier && t0 + NST - 1 < t1) dec_tile_pages(p, b, t0 + NST - 1, len, ent);
    };
    if constexpr (F::FRONT) first_copies();
    else load_q();

    /* The last key each of this lane's rows sees: row i sits at position len - n + i. A padded row (past the
     * block's rows) is never masked: its q is 0, so every score is 0 and nothing overflows, and what it computes
     * is never written. */
    long last[2];
#pragma unroll
    for (int hh = 0; hh < 2; hh++) last[hh] = qreal[hh] ? len - p.n + qi[hh] : LONG_MAX;
    /* The warp's rows: below lastmin no key is masked for any of them (no compare needed), past lastmax every
     * key is (the warp stops there). */
    long lastmin = min(last[0], last[1]);
    long lastmax = max(last[0] == LONG_MAX ? -1 : last[0], last[1] == LONG_MAX ? -1 : last[1]);
#pragma unroll
    for (int off = 1; off < 32; off *= 2) {
        lastmin = min(lastmin, __shfl_xor_sync(0xffffffffu, lastmin, off));
        lastmax = max(lastmax, __shfl_xor_sync(0xffffffffu, lastmax, off));
    }

    float o[D / 8][4];
#pragma unroll
    for (int nt = 0; nt < D / 8; nt++) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

    if constexpr (!F::FRONT) {
        if constexpr (F::BULK) dec_bars_init(bar0, NST);
        first_copies();
    }
    for (int it = 0; it < t1 - t0; it++) {
        const int nxt = it + NST - 1;
        if (t0 + nxt < t1) {
            dec_copy_tile<D, F>(k_buf + (nxt % NST) * DEC_BC * LD, v_buf + (nxt % NST) * DEC_BC * LD, p, b, hkv,
                                (long)(t0 + nxt) * DEC_BC, len, ent, bar0 + 8 * (nxt % NST));
            if (F::PAGED && copier && t0 + nxt + 1 < t1) dec_tile_pages(p, b, t0 + nxt + 1, len, ent); // next iteration's
        }
        T *k_s = k_buf + (it % NST) * DEC_BC * LD, *v_s = v_buf + (it % NST) * DEC_BC * LD;
        if constexpr (F::BULK) {
            dec_bar_wait(bar0 + 8 * (it % NST), (it / NST) & 1); // tile it's boxes are in, for every thread that waits
            if ((long)(t0 + it + 1) * DEC_BC > len) {            // the sequence's last tile, keys past len in it
                dec_zero_past_len<D>(k_s, v_s, (long)(t0 + it) * DEC_BC, len);
                __syncthreads();
            }
        } else {
            cp_async_commit();                                   // (empty near the end: the count stays uniform)
            cp_async_wait<NST - 1>();                            // tile it has landed ...
            __syncthreads();                                     // ... for every thread
        }
        if (active) {
            for (int kr = sl * slice_keys; kr < (sl + 1) * slice_keys; kr += 16) {
                const long ka = (long)(t0 + it) * DEC_BC + kr;   // the 16 keys' absolute index
                if (ka > lastmax) break;                         // every key from here on is masked for this warp
                dec_warp16<D, T, F::BULK>(qa, k_s, v_s, kr, ka, last, ka + 15 > lastmin, p.scale_log2, o, m, l);
            }
        }
        __syncthreads();                                         // nobody reads stage it % NST any more
    }

#pragma unroll
    for (int hh = 0; hh < 2; hh++)                               // l across the quad (each lane summed its keys)
#pragma unroll
        for (int off = 1; off <= 2; off *= 2) l[hh] += __shfl_xor_sync(0xffffffffu, l[hh], off);

    if (!F::SPLIT) {                                             // the forward's epilogue: each warp its own rows
        if (!active) return;
#pragma unroll
        for (int hh = 0; hh < 2; hh++) {
            const int gr = rc * DEC_ROWS + rb * 16 + g + 8 * hh;
            if (gr >= p.rows) continue;
            long hq, i;
            dec_row<F::GROUPED>(p, h, gr, &hq, &i);
            const float inv = l[hh] > 0.0f ? 1.0f / l[hh] : 0.0f;
            T *orow = p.o + ((b * p.Hq + hq) * p.n + i) * D;
#pragma unroll
            for (int nt = 0; nt < D / 8; nt++)                   // O = o / l
                *reinterpret_cast<uint32_t *>(orow + nt * 8 + 2 * t) = pack2<T>(o[nt][2 * hh] * inv, o[nt][2 * hh + 1] * inv);
        }
        return;
    }

    /* SPLIT: the warps that shared a row block merge their states, through shared memory (the K/V
     * stages are free now: the copies still counted are empty groups, waited for here all the same):
     * m = max m_w, l = sum e^(m_w - m) l_w, o = sum e^(m_w - m) o_w. */
    cp_async_wait<0>();
    float *ms = reinterpret_cast<float *>(smem_raw);             // [4 warps][16]
    float *ls = ms + DEC_WARPS * 16;                             // [4][16]
    float *os = ls + DEC_WARPS * 16;                             // [4][16][D]
    if (active) {
#pragma unroll
        for (int hh = 0; hh < 2; hh++) {
            const int r16 = g + 8 * hh;
            if (t == 0) { ms[warp * 16 + r16] = m[hh]; ls[warp * 16 + r16] = l[hh]; }
#pragma unroll
            for (int nt = 0; nt < D / 8; nt++) {
                os[(warp * 16 + r16) * D + nt * 8 + 2 * t] = o[nt][2 * hh];
                os[(warp * 16 + r16) * D + nt * 8 + 2 * t + 1] = o[nt][2 * hh + 1];
            }
        }
    }
    __syncthreads();
    for (int x = threadIdx.x; x < R * 16 * D; x += DEC_WARPS * 32) {
        const int rbx = x / (16 * D), r16 = (x / D) % 16, d = x % D;
        const int gr = rc * DEC_ROWS + rbx * 16 + r16;
        if (gr >= p.rows) continue;
        float M = -INFINITY;
        for (int w = rbx; w < R * nsl; w += R) M = fmaxf(M, ms[w * 16 + r16]);          // m = max over the slices
        float L = 0.0f, O = 0.0f;
        for (int w = rbx; w < R * nsl; w += R) {
            const float wt = M == -INFINITY ? 0.0f : ex2(ms[w * 16 + r16] - M);        // e^(m_w - m)
            L += wt * ls[w * 16 + r16];
            O += wt * os[(w * 16 + r16) * D + d];
        }
        long hq, i;
        dec_row<F::GROUPED>(p, h, gr, &hq, &i);
        const long row = (b * p.Hq + hq) * p.n + i;
        if (p.S == 1) {                                          // one split: this is the row's output
            p.o[row * D + d] = dec_from_float<T>(L > 0.0f ? O / L : 0.0f);
        } else {                                                 // the split's state, for decode_merge
            p.ws_o[(row * p.S + s) * D + d] = O;
            if (d == 0) { p.ws_m[row * p.S + s] = M; p.ws_l[row * p.S + s] = L; }
        }
    }
}

/* The merge of the S splits' states of each row (grid: B Hq n rows, D threads): the closed form of step
 * 04's flash_merge_cpu, every split's weight e^(m_s - m) at once: m = max m_s, l = sum e^(m_s - m) l_s,
 * O = sum e^(m_s - m) o_s / l. A split past the sequence's keys wrote nothing and is not read. UNR (decode
 * kernel 9: 8): the loops over the splits unrolled UNR times, so that UNR splits' loads are in flight at once
 * instead of one after the other; the same additions in the same order. WAIT (decode kernel 10): launched while the
 * split kernel still runs, it reads the lengths (the split kernel's input) first, then waits for the states. */
template <int D, typename T, int UNR = 1, bool WAIT = false>
__global__ void __launch_bounds__(D)
decode_merge(const DecParams<T> p)
{
    const long row = blockIdx.x, b = row / (p.Hq * p.n);
    const int tiles = (p.len[b] + DEC_BC - 1) / DEC_BC;
    const int Sb = (tiles + p.chunk_tiles - 1) / p.chunk_tiles;  // the splits that hold keys of sequence b
    const float *m_s = p.ws_m + row * p.S, *l_s = p.ws_l + row * p.S;
    if constexpr (WAIT) dec_wait_prerequisite();                // kernel 10: the split kernel done, its states visible
    float M = -INFINITY;
#pragma unroll UNR
    for (int s = 0; s < Sb; s++) M = fmaxf(M, m_s[s]);          // m = max m_s
    float L = 0.0f, O = 0.0f;
#pragma unroll UNR
    for (int s = 0; s < Sb; s++) {
        const float wt = ex2(m_s[s] - M);                        // e^(m_s - m); an empty split: 2^(-inf) = 0
        L += wt * l_s[s];                                        // l = sum e^(m_s - m) l_s
        O += wt * p.ws_o[(row * p.S + s) * D + threadIdx.x];     // o = sum e^(m_s - m) o_s
    }
    p.o[row * D + threadIdx.x] = dec_from_float<T>(L > 0.0f ? O / L : 0.0f); // O = o / l
}

/* Decode kernel 11: decode_merge's loads in one round. decode_merge reads its row's Sb states 8 at a time, and twice
 * (the m_s for m, then m_s, l_s and o_s for the sums): 2 Sb / 8 trips to memory one after the other, 8 at S = 32,
 * each some hundreds of nanoseconds that nothing hides once the split kernel is done (Nsight Compute on the H200:
 * 7.4 us for decode_merge at B = 1, 32/8 heads, L = 2048, S = 32; the split kernel 10.6). Here each thread first
 * sets off the loads of its column of the first MERGE_CH splits' o_s, into registers, then thread s reads split s's
 * m_s and l_s into shared memory: all in flight at once, one trip for Sb <= MERGE_CH (one more per MERGE_CH after).
 * The sums are decode_merge's, in its order (each thread walks the m_s and l_s in shared memory, the same values
 * for every thread): O bit for bit. Shared memory: 2 S floats. */
constexpr int MERGE_CH = 32;

template <int D, typename T, bool WAIT>
__global__ void __launch_bounds__(D)
decode_merge_round(const DecParams<T> p)
{
    extern __shared__ float ml[];                                // [S] m_s, then [S] l_s
    const long row = blockIdx.x, b = row / (p.Hq * p.n);
    const int tiles = (p.len[b] + DEC_BC - 1) / DEC_BC;
    const int Sb = min((tiles + p.chunk_tiles - 1) / p.chunk_tiles, p.S); // the splits that hold keys of sequence b
    const float *o_s = p.ws_o + row * p.S * D + threadIdx.x;     // this thread's column of split 0's o_s
    if constexpr (WAIT) dec_wait_prerequisite();                // (kernel 10's early launch, kept)
    float ov[MERGE_CH];
#pragma unroll
    for (int c = 0; c < MERGE_CH; c++) ov[c] = c < Sb ? o_s[c * D] : 0.0f;       // the first MERGE_CH splits' o_s ...
    for (int s = threadIdx.x; s < Sb; s += D) { ml[s] = p.ws_m[row * p.S + s]; ml[p.S + s] = p.ws_l[row * p.S + s]; }
    __syncthreads();                                             // ... in flight with every m_s and l_s
    float M = -INFINITY;
    for (int s = 0; s < Sb; s++) M = fmaxf(M, ml[s]);            // m = max m_s
    float L = 0.0f, O = 0.0f;
    for (int s0 = 0; s0 < Sb; s0 += MERGE_CH) {
        if (s0 > 0) {                                            // past MERGE_CH splits: the next MERGE_CH, together
#pragma unroll
            for (int c = 0; c < MERGE_CH; c++) ov[c] = s0 + c < Sb ? o_s[(s0 + c) * D] : 0.0f;
        }
#pragma unroll
        for (int c = 0; c < MERGE_CH; c++) {
            if (s0 + c >= Sb) break;
            const float wt = ex2(ml[s0 + c] - M);                // e^(m_s - m); an empty split: 2^(-inf) = 0
            L += wt * ml[p.S + s0 + c];                          // l = sum e^(m_s - m) l_s
            O += wt * ov[c];                                     // o = sum e^(m_s - m) o_s
        }
    }
    p.o[row * D + threadIdx.x] = dec_from_float<T>(L > 0.0f ? O / L : 0.0f); // O = o / l
}

// --- the launcher ---------------------------------------------------------------------------------

/* The grid of a decode launch: how many splits S of how many tiles. Without SPLIT, S = 1. With it, S
 * is what fills the GPU once: as many blocks as the SMs hold at a time, B x heads x row chunks of them
 * before the split, never a split without a tile. */
struct DecGrid { int heads, g, rows, rchunks, S, chunk_tiles, tiles; bool one; /* kernel 12's rule taken */ };

/* The SM count and shared memory per SM, read from the device once: a decode step takes tens of
 * microseconds, and host calls before each launch would be time the GPU waits (and the timer counts). */
static void dec_device(int *sms, int *smem_sm)
{
    static int s = 0, m = 0;
    if (!s) {
        int dev = 0;
        CUDA_CHECK(cudaGetDevice(&dev));
        CUDA_CHECK(cudaDeviceGetAttribute(&s, cudaDevAttrMultiProcessorCount, dev));
        m = gpu_smem_sm(); /* the --gpu-as GPU's, when one is emulated */
    }
    *sms = s;
    *smem_sm = m;
}

/* Blocks of NST stages an SM holds at a time: its shared memory over one block's (1 KB of it reserved per block), at
 * most 4 (the registers of 4 x 128 threads at about 128 each). Counted with padded stages for every kernel: decode
 * kernel 8's unpadded ones are 3-5% smaller, the same count on every GPU the tables name (1-3 blocks). */
template <int D, int NST> static long dec_per_sm()
{
    int sms, smem_sm;
    dec_device(&sms, &smem_sm);
    const long per_sm = (long)smem_sm / (long)(DecSmem<D, NST>::bytes + 1024);
    return per_sm < 1 ? 1 : per_sm > 4 ? 4 : per_sm;
}

template <int D, typename T, class F>
static DecGrid dec_grid(const DecodeArgs *a)
{
    DecGrid gr;
    gr.heads = F::GROUPED ? (int)a->Hkv : (int)a->Hq;
    gr.g = F::GROUPED ? (int)(a->Hq / a->Hkv) : 1;
    gr.rows = gr.g * (int)a->n;
    gr.rchunks = (gr.rows + DEC_ROWS - 1) / DEC_ROWS;
    gr.tiles = (int)((a->max_len + DEC_BC - 1) / DEC_BC);
    gr.S = 1;
    gr.chunk_tiles = gr.tiles;
    gr.one = false;
    if (F::SPLIT) {
        int sms, smem_sm;
        dec_device(&sms, &smem_sm);
        const long per_sm = dec_per_sm<D, F::NST>();
        const long base = a->B * gr.heads * gr.rchunks, want = (long)sms * per_sm;
        long S = a->splits > 0 ? a->splits : want / base; /* whole waves: a split more would start a wave mostly empty */
        /* kernel 12: splits of fewer than 8 tiles (512 keys) are all prologue and epilogue (the lengths, Q's
         * fragments, the barriers; the warps' merge through shared memory, the state written, then read and merged
         * again by decode_merge): there one block an SM, fewer splits of more keys each, where such a grid still
         * fills 7/8 of the SMs (B x heads = 72 would leave 60 of 132 idle at one split each) */
        if (F::ONE && a->splits <= 0 && per_sm > 1 && S > 1 && (gr.tiles + S - 1) / S < 8 &&
            8 * base * (sms / base) >= 7L * sms) {
            S = sms / base;
            gr.one = true;
        }
        if (S > gr.tiles) S = gr.tiles;
        if (S < 1) S = 1;
        gr.chunk_tiles = (int)((gr.tiles + S - 1) / S);
        gr.S = (gr.tiles + gr.chunk_tiles - 1) / gr.chunk_tiles;  // no split left without a tile
    }
    return gr;
}

template <int D, typename T, class F>
static size_t dec_ws_dt(const DecodeArgs *a)
{
    const DecGrid gr = dec_grid<D, T, F>(a);
    return gr.S > 1 ? (size_t)a->B * a->Hq * a->n * gr.S * (D + 2) * sizeof(float) : 0;
}

/* Decode kernel 8's tensor map of K or V: the cache's rows (D elements each) as [rows][D / 64][64], so that one box
 * {64, 16 rows, D / 64} is a 16-key quarter, every column, in one request, each 128-byte half-row swizzled (128B).
 * No L2 promotion: measured on the H200, promoting each 128-byte piece to 256 bytes cost 6-7% at B = 64 and L =
 * 131072 (the box reads all of every row anyway). 0, or -1 after one line. */
static inline int dec_encode_map(CUtensorMap *map, const void *base, long rows, long D, int dtype, const char *who)
{
    const cuuint64_t dims[3] = {64, (cuuint64_t)rows, (cuuint64_t)(D / 64)};
    const cuuint64_t strides[2] = {(cuuint64_t)D * 2, 128};                /* bytes: the next row, the next half */
    const cuuint32_t box[3] = {64, 16, (cuuint32_t)(D / 64)};
    return tma_encode_3d(map, dtype == DT_FP16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, base, dims,
                         strides, box, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_NONE, who);
}

/* The maps of K and V, the last four pairs kept: a benchmark turns over a few copies of one cache, and encoding is
 * a driver call. 0, or -1 after one line. */
static inline int dec_tensor_maps(int id, const void *k, const void *v, long rows, long D, int dtype, CUtensorMap *tk,
                                  CUtensorMap *tv)
{
    struct Kept { CUtensorMap k, v; const void *ck, *cv; long rows, D; int dtype; };
    static Kept kept[4];
    static int next = 0;
    for (int i = 0; i < 4; i++) {
        const Kept &e = kept[i];
        if (e.ck == k && e.cv == v && e.rows == rows && e.D == D && e.dtype == dtype) { *tk = e.k; *tv = e.v; return 0; }
    }
    char who[32];
    snprintf(who, sizeof who, "decode kernel %d", id);
    Kept &e = kept[next];
    e.ck = e.cv = nullptr;
    if (dec_encode_map(&e.k, k, rows, D, dtype, who) || dec_encode_map(&e.v, v, rows, D, dtype, who)) return -1;
    e.ck = k; e.cv = v; e.rows = rows; e.D = D; e.dtype = dtype;
    next = (next + 1) % 4;
    *tk = e.k;
    *tv = e.v;
    return 0;
}

template <int D, typename T, class F>
static int dec_launch_dt(int id, const DecodeArgs *a, void *ws, cudaStream_t s)
{
    if (F::PAGED && (a->page < 16 || a->page > 256 || (a->page & (a->page - 1)))) { /* a quarter tile in one page */
        fprintf(stderr, "%s: decode kernel %d takes pages of 16 to 256 keys, a power of two, not %ld\n", g_prog, id, a->page);
        return -1;
    }
    static int opted = 0;                                        /* once per instantiation, not per launch */
    if (!opted) {
        if (smem_opt_in(decode_kernel<D, T, F>, DecSmemF<D, F>::bytes, "decode kernel", id, D)) return -1;
        opted = 1;
    }
    const DecGrid gr = dec_grid<D, T, F>(a);
    DecParams<T> p = {};
    p.q = (const T *)a->q; p.o = (T *)a->o;
    p.k = (const T *)(F::PAGED ? a->k_pool : a->k); p.v = (const T *)(F::PAGED ? a->v_pool : a->v);
    p.len = a->len; p.table = a->table;
    const size_t rows_total = (size_t)a->B * a->Hq * a->n;
    p.ws_m = (float *)ws; p.ws_l = p.ws_m + rows_total * gr.S; p.ws_o = p.ws_l + rows_total * gr.S;
    p.Hq = a->Hq; p.Hkv = a->Hkv; p.n = a->n; p.max_len = a->max_len; p.max_pages = a->max_pages;
    p.page_shift = 0;
    while (F::PAGED && (1L << p.page_shift) < a->page) p.page_shift++;
    p.heads = gr.heads; p.g = gr.g; p.rows = gr.rows; p.S = gr.S; p.chunk_tiles = gr.chunk_tiles;
    p.scale_log2 = 1.4426950408889634f / sqrtf((float)D);       // log2(e) / sqrt(D)
    if constexpr (F::BULK) {                                     // the cache as one tensor of rows for the copy engine
        const long rows = F::PAGED ? a->pool_pages * a->Hkv * a->page : a->B * a->Hkv * a->max_len;
        if (rows > INT_MAX) {
            fprintf(stderr, "%s: decode kernel %d reads at most 2^31 - 1 cache rows by tensor map, not %ld\n", g_prog, id, rows);
            return -1;
        }
        if (dec_tensor_maps(id, p.k, p.v, rows, D, a->dtype, &p.tmk, &p.tmv)) return -1;
    }
    decode_kernel<D, T, F><<<dim3((unsigned)(a->B * gr.heads), (unsigned)gr.S, (unsigned)gr.rchunks), DEC_WARPS * 32,
                             DecSmemF<D, F>::bytes, s>>>(p);
    CUDA_CHECK_LAST();
    if (gr.S > 1 && F::EARLY) {                                  // kernel 10: a programmatic dependent of the split
        cudaLaunchAttribute early[1];
        early[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        early[0].val.programmaticStreamSerializationAllowed = 1;
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3((unsigned)rows_total);
        cfg.blockDim = dim3(D);
        cfg.stream = s;
        cfg.attrs = early;
        cfg.numAttrs = 1;
        if constexpr (F::ROUND) {                                // kernel 11: its merge reads in one round
            cfg.dynamicSmemBytes = 2 * (size_t)gr.S * sizeof(float);
            CUDA_CHECK(cudaLaunchKernelEx(&cfg, decode_merge_round<D, T, true>, p));
        } else {
            CUDA_CHECK(cudaLaunchKernelEx(&cfg, decode_merge<D, T, F::MERGE8 ? 8 : 1, true>, p));
        }
    } else if (gr.S > 1) {
        decode_merge<D, T, F::MERGE8 ? 8 : 1><<<(unsigned)rows_total, D, 0, s>>>(p);
        CUDA_CHECK_LAST();
    }
    return 0;
}

/* The stages a GPU's shared memory holds: F's own (3 at D = 128: 104 KB), or where a block may have less (99 KB on
 * the RTX 30/40/50 and the L4, 64 KB on Turing) two, the fewest that still overlap a tile's load with the last
 * one's math (the kernels' idea survives; 68 KB at D = 128, 36 KB at D = 64: so on Turing's 64 KB D = 64 runs and
 * D = 128 is still refused, a SKIP). The launch, its workspace and its
 * describe line all go through Fit, so that the split count (sized from the stages' bytes) is the same in each. */
template <class F>
using DecFewer = DecodeFlags<F::SPLIT, F::GROUPED, F::PAGED, 2, F::OCC, F::LEAN, F::BULK, F::MERGE8, F::EARLY, F::ROUND, F::ONE,
                             F::FRONT>;
template <int D, class F> static bool dec_stages_fit() { return DecSmemF<D, F>::bytes <= (size_t)gpu_smem_block(); }
/* Two stages instead of F's: where F's do not fit, and with OCC (decode kernel 6) where the grid fills every SM
 * without a split even at two stages' occupancy: B x heads x row chunks >= SMs x the blocks of two stages an SM
 * holds (3 at D = 128 against kernel 5's 2). Each block then keeps one tile in flight instead of two, but an SM
 * runs 12 warps instead of 8, and the SM's loads in flight are what a memory-bound step needs. */
template <int D, typename T, class F> static bool dec_fewer(const DecodeArgs *a)
{
    if (!dec_stages_fit<D, F>()) return true;
    if (F::OCC && dec_per_sm<D, 2>() > dec_per_sm<D, F::NST>()) {
        int sms, smem_sm;
        dec_device(&sms, &smem_sm);
        const DecGrid gr = dec_grid<D, T, F>(a);
        if (a->B * gr.heads * gr.rchunks >= (long)sms * dec_per_sm<D, 2>()) return true;
    }
    return false;
}
template <int D, typename T, class F> static int dec_launch_fit(int id, const DecodeArgs *a, void *ws, cudaStream_t s)
{
    return dec_fewer<D, T, F>(a) ? dec_launch_dt<D, T, DecFewer<F>>(id, a, ws, s) : dec_launch_dt<D, T, F>(id, a, ws, s);
}
template <int D, typename T, class F> static size_t dec_ws_fit(const DecodeArgs *a)
{
    return dec_fewer<D, T, F>(a) ? dec_ws_dt<D, T, DecFewer<F>>(a) : dec_ws_dt<D, T, F>(a);
}
template <int D, typename T, class F> static DecGrid dec_grid_fit(const DecodeArgs *a, int *stages)
{
    const bool fewer = dec_fewer<D, T, F>(a);
    *stages = fewer ? 2 : F::NST;
    return fewer ? dec_grid<D, T, DecFewer<F>>(a) : dec_grid<D, T, F>(a);
}

/* The DecodeKernel entries of kernel `id` with flags F: fp16 / bf16, D = 64 or 128. */
template <class F> static int dec_launch(int id, const DecodeArgs *a, void *ws, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (a->dtype == DT_FP16 && a->D == 64) return dec_launch_fit<64, __half, F>(id, a, ws, s);
    if (a->dtype == DT_FP16 && a->D == 128) return dec_launch_fit<128, __half, F>(id, a, ws, s);
    if (a->dtype == DT_BF16 && a->D == 64) return dec_launch_fit<64, __nv_bfloat16, F>(id, a, ws, s);
    if (a->dtype == DT_BF16 && a->D == 128) return dec_launch_fit<128, __nv_bfloat16, F>(id, a, ws, s);
    fprintf(stderr, "%s: decode kernel %d takes fp16/bf16 and D = 64 or 128, not %s D=%ld\n", g_prog, id,
            dtype_name(a->dtype), a->D);
    return -1;
}

template <class F> static size_t dec_workspace(const DecodeArgs *a)
{
    if (a->dtype == DT_FP16 && a->D == 64) return dec_ws_fit<64, __half, F>(a);
    if (a->dtype == DT_FP16 && a->D == 128) return dec_ws_fit<128, __half, F>(a);
    if (a->dtype == DT_BF16 && a->D == 64) return dec_ws_fit<64, __nv_bfloat16, F>(a);
    if (a->dtype == DT_BF16 && a->D == 128) return dec_ws_fit<128, __nv_bfloat16, F>(a);
    return 0;
}

template <class F> static void dec_describe(const DecodeArgs *a, char *buf, size_t n)
{
    DecGrid gr;
    int st;
    if (a->D == 64) gr = a->dtype == DT_BF16 ? dec_grid_fit<64, __nv_bfloat16, F>(a, &st) : dec_grid_fit<64, __half, F>(a, &st);
    else gr = a->dtype == DT_BF16 ? dec_grid_fit<128, __nv_bfloat16, F>(a, &st) : dec_grid_fit<128, __half, F>(a, &st);
    const long blocks = a->B * gr.heads * (long)gr.S * gr.rchunks;
    snprintf(buf, n, "%ld blocks of 4 warps: %ld sequences x %d %s heads%s x %d split%s of %d K/V tiles of %d keys, "
             "%d stages; %d query rows a block%s%s", blocks, a->B, gr.heads, F::GROUPED ? "KV" : "query",
             gr.rchunks > 1 ? " x row chunks" : "", gr.S, gr.S == 1 ? "" : "s", gr.chunk_tiles, DEC_BC, st,
             gr.rows < DEC_ROWS ? gr.rows : DEC_ROWS,
             gr.S == 1  ? ""
             : gr.one   ? ", one block an SM (short splits), then the merge kernel, launched early, its loads in one round"
             : F::ROUND ? ", then the merge kernel, launched early, its loads in one round"
             : F::EARLY ? ", then the merge kernel, launched early" : ", then the merge kernel",
             F::PAGED ? ", pages through the block table" : "");
}

static int dec_supports(long D) { return D == 64 || D == 128; }

#endif
