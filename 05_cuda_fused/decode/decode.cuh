/*
 * decode.cuh: what decode kernels 2 to 13 share unchanged: the block's shape, the shared-memory stages' layout and
 * size, and the arguments of a launch.
 *
 * Extends nothing: it is the part of the ladder that no rung changes. The body (the kernel, its launcher, the hooks
 * where later rungs change it) is decode kernel 2's, in decode02_forward.cu; each later rung's file includes the file
 * of the rung it extends and holds its one idea as a policy that replaces some of those hooks:
 *
 *   decode02_forward.cu        the forward's block (kernel 9's 4 warps of 16 query rows, K/V tiles of 64 keys through
 *                              shared memory by cp.async) on decode's shape: one block per (sequence, query head)
 *   decode03_split_kv.cu       split-KV (flash-decoding): the keys split across blocks and, inside a block, across its
 *                              warps; each ends with (m, l, o), merged in shared memory, then by a second kernel
 *   decode04_grouped.cu        grouped heads: one block per KV head, its tiles read once for every query head
 *   decode05_paged.cu          the cache in pages found through a block table (vLLM's PagedAttention)
 *   decode06_occupancy.cu      two stages, three blocks an SM, where the sequences and heads fill the GPU unsplit
 *   decode07_lean_copies.cu    the copies' addresses once per 16-key quarter of a tile, not per 16 bytes
 *   decode08_bulk_copies.cu    the tiles brought by the copy engine, one box a quarter, an mbarrier a stage (sm_90)
 *   decode09_merge_in_flight.cu  the merge kernel's loads 8 splits at a time
 *   decode10_early_merge.cu    the merge kernel launched while the split kernel runs (programmatic dependent launch)
 *   decode11_merge_round.cu    the merge kernel's loads of every split's state in one round
 *   decode12_one_block.cu      one block an SM where the splits would be short
 *   decode13_front_loads.cu    the length, the first pages and Q loaded together: the first copy one trip in
 *
 * The idea of the whole ladder: a decode step waits on memory. One new row reads every cached key and value once and
 * does 4 D flops with each pair of 2 D elements, an arithmetic intensity of 1 flop per byte in fp16, where the H100's
 * balance point is about 300. The kernels are judged in GB/s of K and V read, against the measured read bandwidth of
 * the device. Everything serves that: K/V tiles of BC = 64 keys stream through shared memory NST stages deep (NST - 1
 * tiles in flight while one is used), and the grid is sized to fill the GPU.
 * What it costs: nothing of its own; the layout below is the padded one of kernels 2-7 (kernel 8 brings its own), and
 * every rung counts its blocks an SM with it (dec_per_sm, decode03_split_kv.cu).
 * Measured: the ladder's steps, each against the rung below, in decode/RESULTS.md (one section a kernel, #decode-N).
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

/* A stage is K's tile then V's, 64 rows of D, each row padded to LD = D + 8 (16 bytes a row: ldmatrix without bank
 * conflicts, kernel 4's). NST stages: NST - 1 tiles in flight while one is used; 3 take 104 KB at D = 128 (two blocks
 * an SM), 4 take 139 KB (one). ld_at: where ldmatrix's lane finds row kr + rl (kr a multiple of 16, rl = 0..15 the
 * lane's row), column c + cl (c known when compiling, cl = 0 or 8 the lane's half), in elements from the tile's start.
 * ALIGN: the stages start at the first multiple of ALIGN bytes of the block's shared memory (1: where it starts).
 * Decode kernel 8 replaces this layout with the copy engine's (DecSmemBulk). */
template <int D, int NST> struct DecSmem {
    static constexpr int LD = D + 8;
    static constexpr size_t stages = (size_t)NST * 2 * DEC_BC * LD * 2; // K and V, NST stages, 16-bit
    static constexpr size_t bytes = stages;
    static constexpr int ALIGN = 1;
    static __device__ __forceinline__ int ld_at(int kr, int rl, int c, int cl) { return (kr + rl) * (D + 8) + c + cl; }
};

/* What one launch needs, by value: every rung's fields (a rung leaves the others as the launcher set them). The
 * partial states of the split (kernel 3 on, S > 1) go to ws_m, ws_l [rows_total, S] and ws_o [rows_total, S, D],
 * rows_total = B Hq n, in log2 units as the kernel keeps m. */
template <typename T> struct DecParams {
    const T *q; T *o;
    const T *k, *v;                // contiguous [B, Hkv, max_len, D], or the pools [pages, Hkv, page, D] (kernel 5 on)
    const int *len, *table;
    float *ws_m, *ws_l, *ws_o;
    long Hq, Hkv, n, max_len, max_pages;
    int page_shift;                // page = 1 << page_shift (kernel 5 on)
    int heads;                     // heads per sequence in the grid: Hq, or Hkv (kernel 4 on)
    int g;                         // query heads per block's KV head: 1, or Hq / Hkv (kernel 4 on)
    int rows;                      // query rows per (sequence, grid head): g n
    int S, chunk_tiles;            // splits of the keys, tiles per split
    float scale_log2;
    CUtensorMap tmk, tmv;          // kernel 8 on: K and V (pools, or contiguous caches) as tensors for the copy engine
};

/* float -> T, rounded to nearest (the outputs' one rounding). */
template <typename T> __device__ __forceinline__ T dec_from_float(float x);
template <> __device__ __forceinline__ __half dec_from_float<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 dec_from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

/* The grid of a decode launch: B x heads x row chunks blocks, times S splits of chunk_tiles tiles each (kernel 3 on).
 * one: kernel 12's rule taken (one block an SM). */
struct DecGrid { int heads, g, rows, rchunks, S, chunk_tiles, tiles; bool one; };

static int dec_supports(long D) { return D == 64 || D == 128; }

#endif
