/*
 * Kernel 48: kernel 47 with O sent out by the copy engine: each warp writes its 16 rows to shared memory with
 * stmatrix, and one lane sends them with a TMA store.
 *
 * Extends kernel 47 (kernel47_fp8_early_start.cu). The idea: forward kernel 39's, in FP8. Kernels 16-47 store O
 * from the accumulator's layout, each thread 4 bytes at a time (D / 4 stores a thread, each row tested against N):
 * a warp's store instruction writes 16 bytes of each of 8 rows. Here each warp writes its 16 rows x D of O, scaled by
 * V's scale over l, into 32 D bytes of shared memory of its own with D / 16 stmatrix (primitives/wgmma.cuh's
 * stmatrix_rows, into the 128-byte swizzle O's tensor map takes), fences them for the copy engine, and its lane 0
 * sends the D / 64 boxes of 16 rows x 64 columns with cp.async.bulk.tensor; the map's rows end at N, so no row is
 * tested. Before a warp writes its tile again, at its next item, lane 0 waits until the engine has read the last one
 * (long done: a whole item lies between), and for its last store before the block ends. The same store on every
 * path: the persistent one up to kernel 47's limits, kernel 30's grid past them.
 * Its code is the policy below, over kernel 47's (and kernel 30's) policies: the body's hook O_BY_TMA, which calls
 * store_o_tma; fp8_launch_d makes O's tensor map and tells compute-sanitizer's initcheck that O is written.
 * Why: at D = 128 a row tile pays about 4.5-5.2 us once (fp8/RESULTS.md#fp8-n4096), O's store part of it; in 16 bits
 * the same change gained 1.3-4.1% at N = 512, D = 128 (forward kernel 39 over 36).
 * What it costs: 32 D bytes of shared memory a consumer warp (24 KB more at D = 64, 32 KB at D = 128), O's tensor
 * map, and a wait for the engine's last store before the block ends. O is kernel 47's, bit for bit (kernel 28's where
 * it is persistent, kernel 30's past that: the persistent and long-rows lines of --check). Built only for sm_90a.
 * Measured: H200, over kernel 47 in the same run, two runs: at D = 128 +13.1% / +14.6% at N = 512 (587.2 / 590.9
 * TFLOP/s), +8.6% / +8.8% at 1024, +3.8% / +4.2% at 2048, +1.8% / +1.5% at 4096 (876.4 / 873.1), +2.1% to +2.8% at
 * 8192 and 16384 (kernel 30's grid there: 944.0 / 945.3 at 16384); causal +14.2% at 512 down to +2.5% at 16384. At
 * D = 64 (three runs) +4.3% to +5.0% at N = 512 and +1.0% to +2.1% from 4096, but 1.2-1.5% slower at 1024 and
 * 1.3-2.3% at 2048 (not profiled). The runs, checks and plant: fp8/RESULTS.md#kernel-48.
 */
#ifndef RUNG
#define RUNG 48          // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "kernel47_fp8_early_start.cu"  // the rung this one extends (kernel 47): its body and its policies

// --- the idea ------------------------------------------------------------------

/* Policy Base at head dim D with O sent by the copy engine. Each consumer warp's tile of O (8 warps at D = 128, 12 at
 * D = 64, where kernel 28's three consumer warpgroups run) sits after Base's shared memory (the ones, 1024 bytes: so
 * each tile keeps the 1024-byte alignment the swizzle wants). */
template <class Base, int D> struct Fp8OByTma : Base {
    static constexpr bool O_BY_TMA = true;
    static constexpr int O_WARP = 16 * D * 2;     // a warp's tile: 16 rows of 16-bit O, D / 64 boxes of 16 x 128 bytes
    static constexpr int SMEM = Base::SMEM + 4 * Base::consumers(D) * O_WARP;  // a tile for each consumer warp
    static_assert(Base::SMEM % 1024 == 0, "each warp's tile 1024-aligned");

    /* Warp warp's 16 rows of O from row0 of head bh: x (the accumulator, rows g and g + 8) times inv[0] and inv[1].
     * The steps of forward kernel 39's quad_store, written again on purpose: one helper for both changed kernel 39's
     * machine code (its registers, cuobjdump), and the code here is what was measured. */
    template <int DD>
    __device__ static __forceinline__ void store_o_tma(uint32_t own, int warp, int lane, const float *x, const float inv[2],
                                                       long row0, long bh, long N, const CUtensorMap *tm_o, int out_bf16)
    {
        static_assert(DD == D, "the policy of this head dim");
        const uint32_t tile = own + Base::SMEM + warp * O_WARP;
        if (lane == 0) bulk_wait_read();          // the engine has read this warp's last tile
        __syncwarp();
        if (out_bf16)
            stmatrix_rows<__nv_bfloat16, D>(tile, 16, 0, lane, x, inv[0], inv[1]);
        else
            stmatrix_rows<__half, D>(tile, 16, 0, lane, x, inv[0], inv[1]);
        fence_proxy_async();                      // the stores, read next by the copy engine
        __syncwarp();
        if (lane == 0 && row0 < N) {              // a warp whose rows all lie past N sends nothing
#pragma unroll
            for (int b = 0; b < D / 64; b++) tma_store_3d(tm_o, tile + b * (16 * 128), b * 64, (int)row0, (int)bh);
            bulk_commit();
        }
    }
};

// --- the launcher -------------------------------------------------------------------

#if RUNG == 48
using Fp8OTma64 = Fp8OByTma<Fp8EarlyStart64, 64>;      // kernel 47's, persistent
using Fp8OTma128 = Fp8OByTma<Fp8EarlyStart, 128>;
using Fp8OTmaWide64 = Fp8OByTma<Fp8Wide, 64>;          // kernel 30's grid, a block per item
using Fp8OTmaWide128 = Fp8OByTma<Fp8Wide, 128>;

static int k48_launch(const Fp8Args *a, void *stream)
{
    if (a->N <= Fp8EarlyStart::persistent_to(a->D, a->causal))   // kernel 47's limits
        return fp8_pingpong_launch<Fp8OTma64, Fp8OTma128>(48, a, stream);
    return fp8_pingpong_launch<Fp8OTmaWide64, Fp8OTmaWide128>(48, a, stream);
}

static void k48_describe(long D, char *buf, size_t n)
{
    if (D == 128)
        snprintf(buf, n, "kernel 47 (BR=%d BC=%d persistent up to N = %ld, BC=%d past it) with O by stmatrix and a TMA store "
                 "a warp, %zu bytes of shared memory", Fp8PP<128, Fp8OTma128>::BR, Fp8PP<128, Fp8OTma128>::BC,
                 Fp8EarlyStart::persistent_to(128, 0), Fp8PP<128, Fp8OTmaWide128>::BC, Fp8PP<128, Fp8OTma128>::bytes);
    else
        snprintf(buf, n, "kernel 47 (BR=%d BC=%d persistent up to N = %ld) with O by stmatrix and a TMA store a warp, %zu "
                 "bytes of shared memory", Fp8PP<64, Fp8OTma64>::BR, Fp8PP<64, Fp8OTma64>::BC,
                 Fp8EarlyStart::persistent_to(64, 0), Fp8PP<64, Fp8OTma64>::bytes);
}

static const Fp8Kernel kernel48 = {
    .id = 48, .extends = 47, .name = "fp8 O by TMA stores",
    .idea = "kernel 47 with O sent by the copy engine: stmatrix into shared memory, one TMA store a warp",
    .launch = k48_launch, .describe = k48_describe, .unavailable = fp8_unavailable, .persistent = 1,
    .persistent_of = 28,   // kernel 47's tiles (kernel 28's at both D) and its order: O bit for bit
    .long_rows_of = 30,    // past them, kernel 30's grid and tiles (its O stored as here)
};
FP8_REGISTER(kernel48);
#endif
