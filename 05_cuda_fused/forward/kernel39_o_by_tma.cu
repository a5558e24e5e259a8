/*
 * Kernel 39: kernel 36 with O sent out by the copy engine: each warp writes its 16 rows to shared memory with
 * stmatrix, and one lane sends them with a TMA store.
 *
 * Extends kernel 36 (kernel36_first_pv_writes.cu). The idea: the store of O, FlashAttention-3's epilogue. Kernel 19
 * stores O 16 bytes a lane: in the accumulator's layout lane t of a quad holds 4 bytes of each 16-byte piece of its
 * rows, so the quad first exchanges its words (two rounds of shuffles, with selects on each side of them) and each
 * lane then stores, under a test of its row against N. Here each warp writes its 16 rows x D of O, scaled by 1 / l,
 * into 32 D bytes of shared memory of its own with D / 16 stmatrix (each stores four 8 x 8 blocks straight from the
 * accumulator's layout, into the 128-byte swizzle the tensor maps use, so no two lanes of a block share a bank), fences
 * them for the copy engine, and its lane 0 sends the D / 64 boxes of 16 rows x 64 columns with cp.async.bulk.tensor.
 * No shuffle, no select, no test of each row: the map's rows end at N and the engine writes no row past it (a warp
 * whose first row is past N sends nothing). Before a warp writes its tile again, at its next item, lane 0 waits until
 * the engine has read the last one (long done: a whole item lies between); it waits for the last store to finish
 * before the block ends.
 * Why: at causal N = 512, D = 64, kernel 36's O store holds about 11% of all the warps' stall samples (its
 * per-instruction profile, RESULTS.md#kernel-39); an experiment build of kernel 36 that leaves out only the 16-byte
 * stores (a wrong O, timing only: the scaling, packing and exchange kept) ran 1.7-1.9% faster there, 7.0-7.7% at
 * D = 128, N = 512.
 * What it costs: 32 D bytes of shared memory a consumer warp (16 KB at D = 64, 32 KB at D = 128, beside kernel 36's
 * 81 KB and 161 KB), a tensor map for O, and initcheck told that O is written (tma_map.cuh's tma_stores_written).
 * O and L are the same values as kernel 36's (--check compares them with kernel 14's bit for bit).
 * Measured: H200, over kernel 36 in the same run, two calls (fp16 and bf16, causal and not): at D = 64 +3.1% to
 * +3.5% at N = 2048, +4.3% to +6.0% from 4096 to 16384, +1.3% to +1.9% at 1024, -0.4% to +0.6% at 512; at D = 128
 * +1.3% to +4.1% at N = 512, +0.7% to +2.5% at 1024 and 2048, within the spread from 4096. Beside cuDNN, causal
 * fp16: 96.6% to 97.3% at N = 512, D = 64 (kernel 36 96.4% to 97.1%), 102.7% to 103.9% at D = 128, 101.8% to 102.0%
 * at N = 1024, D = 64. The runs and the experiment: RESULTS.md#kernel-39.
 */
#ifndef RUNG
#define RUNG 39 // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "kernel36_first_pv_writes.cu" // the rung this one extends (.extends = 36): its body and its policy

// --- the idea --------------------------------------------------------------------------------------------------

template <int D, typename T> struct OByCopyEngine : FirstPvWrites<D, T> {
    using C = K13<D>;
    static constexpr int O_WARP = 16 * D * 2;     // a warp's tile of O: 16 rows, D / 64 boxes of 16 x 128 bytes
    static constexpr uint32_t q_bytes = C::QTILE + 8 * O_WARP;  // after the K/V ring: Q's tile, then the 8 warps' O
    static constexpr size_t smem_bytes = C::bytes_persist + 8 * O_WARP;
    static constexpr int o_box_rows = 16;         // O's tensor map: boxes of 16 rows x 64 columns
    static void o_written(void *o, size_t bytes, cudaStream_t s)
    {
        void *const ranges[1] = {o};
        tma_stores_written(ranges, bytes, s);
    }

    /* Row h of this lane's pair (g, g + 8) of O times inv = 1 / l, for h = 0 then 1. h = 0 scales row g in place (O's
     * registers are free: the next item's first P V writes them, kernel 36); h = 1 scales row g + 8 as it goes out. */
    template <class B> static __device__ __forceinline__ void quad_store(B &b, int h, float inv, T *, long row)
    {
        if (h == 0) {
#pragma unroll
            for (int n = 0; n < D / 8; n++) b.o[4 * n] *= inv, b.o[4 * n + 1] *= inv;
            return;
        }
        const uint32_t tile = b.q_addr + C::QTILE + b.warp * O_WARP;
        if (b.lane == 0) bulk_wait_read();        // the engine has read this warp's last tile
        __syncwarp();
        stmatrix_rows<T, D>(tile, 16, 0, b.lane, b.o, 1.0f, inv);  // boxes of the warp's 16 rows; row g scaled above
        fence_proxy_async();                      // the stores, read next by the copy engine
        __syncwarp();
        const long row0 = row - 8 - b.g;          // the warp's first row
        if (b.lane == 0 && row0 < b.N) {
#pragma unroll
            for (int x = 0; x < D / 64; x++) tma_store_3d(b.sched.tm_o, tile + x * (16 * 128), x * 64, (int)row0, (int)b.bh);
            bulk_commit();
        }
    }
    template <class B> static __device__ __forceinline__ void lane_store(B &, int, float, T *, long) {} // nothing left

    /* Kernel 20's loop over the items, then the last store done before the block (and its shared memory) ends. */
    template <class B> static __device__ __forceinline__ void items(B &b)
    {
        FirstPvWrites<D, T>::items(b);
        if (b.lane == 0) bulk_wait_all();
    }

    static void describe(char *buf, size_t n);
};

// --- the launcher ------------------------------------------------------------------------------------------------

template <int D, typename T> void OByCopyEngine<D, T>::describe(char *buf, size_t n)
{
    FirstPvWrites<D, T>::describe(buf, n);
    const size_t used = strlen(buf);
    snprintf(buf + used, n - used, "; O by stmatrix and a TMA store a warp (%d bytes more)", 8 * O_WARP);
}

#if RUNG == 39
static int k39_launch_l(const void *q, const void *k, const void *v, void *o, float *Lp, long B, long H, long N, long D,
                        int dtype, int causal, void *stream)
{
    return overlap_launch<OByCopyEngine>(39, q, k, v, o, Lp, B, H, N, D, dtype, causal, stream);
}

static int k39_launch(const void *q, const void *k, const void *v, void *o, long B, long H, long N, long D, int dtype,
                      int causal, void *stream)
{
    return k39_launch_l(q, k, v, o, NULL, B, H, N, D, dtype, causal, stream);
}

static void k39_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    overlap_describe<OByCopyEngine>(D, buf, n);
}

static const FusedKernel kernel39 = {
    .id = 39, .extends = 36, .name = "O by TMA stores",
    .idea = "kernel 36 with O sent by the copy engine: stmatrix into shared memory, one TMA store a warp",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = tc_supports, .launch = k39_launch,
    .describe = k39_describe, .unavailable = wgmma_unavailable, .launch_l = k39_launch_l, .persistent = 1,
};
FUSED_REGISTER(kernel39);
#endif
