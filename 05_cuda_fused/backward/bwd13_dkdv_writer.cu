/*
 * Backward kernel 13: backward kernel 12 with dK and dV sent out by the writer warps, as dQ is.
 *
 * Extends backward kernel 12 (bwd12_late_dq.cu). The idea: at the end of each K/V tile the consumers leave dK_j and
 * dV_j in shared memory and go on to the next tile; the writer warp that sends their dQ parts sends dK_j and dV_j too,
 * by the copy engine (a TMA store, cp.async.bulk.tensor). In kernels 5-12 each consumer thread stores its 64 + 64
 * values of dK_j and dV_j itself: 64 four-byte st.global a thread, each warp-wide store writing 16 bytes in each of 8
 * rows, so every 32-byte sector is written half at a time. Here each warp writes its 16 keys of dK and dV with 16
 * stmatrix at D = 128, 8 at D = 64 (four 8 x 8 blocks of 16-bit values each) into the 128-byte swizzle the tensor
 * maps use (16-byte chunk c of row r at c ^ (r % 8): the 8 rows of a block land in 8 different chunks, so no two
 * lanes share a bank), fences them for the copy engine and arrives on the writer's barrier; the writer warp's lane 0
 * issues one box per 64 columns for dK and for dV, and waits only until the engine has read them. The buffers: dV in
 * the warpgroup's dQ-part buffer (free once the tile's last part has been read), dK in 32 KB more at D = 128 (at
 * D = 64 dK and dV share the dQ-part buffer, 8 KB each). Keys past N are not written: the map's rows end at N (its
 * boxes are clipped there).
 * Why: Nsight Compute of kernel 12 at D = 128, N = 512 (H200; 8 row tiles a K/V tile): the consumers' 64 stores of
 * dK and dV held 6 900 of the 45 500 warp samples of the whole block (5 000 of them stalled on the memory pipe's
 * queue, "lg throttle"), against 21 000 in the row tiles' code; cuDNN's main kernel beside it took 377-383 us to
 * kernel 12's 422 with 13% fewer instructions (RESULTS.md#bwd-13).
 * What it costs: 32 KB more shared memory at D = 128 (231 512 bytes of the 232 448 a block may opt in to: it just
 * fits); per K/V tile, one more wait on the writer's barrier (the tile's last dQ part read before dV goes into its
 * buffer) and two tensor maps more for the launch. dK and dV are the same values (--check compares them bit for bit
 * with kernel 5's).
 * Measured: H200, fp16, over kernel 12 in the same run, two runs in two calls: at D = 128 +12.1% at N = 512, +7.1-7.2%
 * at 1024, +4.3-4.7% at 2048, then +0.4% to +3.1% up to 16384 (causal +11.8-12.0% at 512 to +2.9-3.1% at 16384); at
 * D = 64 +6.9-7.6% at 512, within the spread from 8192. The backward at D = 128 passes cuDNN's at N = 512 and 1024
 * (105.9-106.0%, 102.2-102.3%), ties it at 2048 (99.98-100.04%) and trails it from 4096 (95.3-99.5%). The runs:
 * RESULTS.md#bwd-13.
 */
#ifndef RUNG
#define RUNG 13         // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "bwd12_late_dq.cu" // the rung this one extends (.extends = 12): its body and its policy

// --- the idea ----------------------------------------------------------------------

namespace {   // as kernel 12's policy (kernel 11's counters)
struct B13Policy : B12Policy {
    /* dK's buffer at D = 128: 64 keys x 128 columns of 16-bit values a consumer warpgroup (at D = 64, dK and dV fit in
     * the warpgroup's 16 KB dQ-part buffer). */
    template <int D> static constexpr int DKV_SMEM = D == 128 ? 2 * 64 * 128 * 2 : 0;
    static constexpr bool DKV_MAPS = true;

    /* dK and dV are written by TMA stores, which compute-sanitizer's initcheck does not count (a later read, as step
     * 06's training widening them to fp32, would be reported): tma_map.cuh's tma_stores_written tells it. --check
     * proves every element is written (it poisons the gradients with NaN before each run). */
    static void dkdv_written(void *dk, void *dv, size_t bytes, cudaStream_t s)
    {
        void *const ranges[2] = {dk, dv};
        tma_stores_written(ranges, bytes, s);
    }

    /* Whether the writer sends the walk's dK and dV: every walk's (kernel 20: not a part's that hands them on). */
    template <class A> static __device__ __forceinline__ bool stores_dkdv(const A &a, const BwdWalk &wk)
    {
        (void)a, (void)wk;
        return true;
    }

    /* Warpgroup w's buffers for dK_w and dV_w (64 keys x D, in boxes of 64 columns, 128-byte swizzle). */
    template <class A> static __device__ __forceinline__ uint32_t dk_buf(const A &a, int w)
    {
        using C = typename A::C;
        return A::D == 128 ? a.base + C::OFF_DKV + w * 64 * 128 * 2 : a.base + C::OFF_DQ + w * DQ_PART * 4;
    }
    template <class A> static __device__ __forceinline__ uint32_t dv_buf(const A &a, int w)
    {
        using C = typename A::C;
        return a.base + C::OFF_DQ + w * DQ_PART * 4 + (A::D == 64 ? 64 * 64 * 2 : 0);
    }

    /* This warp's 16 keys of x (x[4 n + e], as dk in the body) times mul, as 16-bit values, into the buffer at buf
     * (boxes of the warpgroup's 64 keys, the warp's from key 16 wiw). */
    template <class A>
    static __device__ __forceinline__ void stage(uint32_t buf, const BwdWgThread &w, const float *x, float mul)
    {
        stmatrix_rows<typename A::T, A::D>(buf, 64, 16 * w.wiw, w.lane, x, mul, mul);
    }

    /* The consumers, after the walk: dK_w (scaled) and dV_w into shared memory, handed to the writer warp. dK's own
     * buffer first (D = 128; the writer read the last one a walk ago), then, once the writer has read the walk's last
     * dQ part (named barrier 6 + wg), what goes into the dQ-part buffer. */
    template <class A>
    static __device__ __forceinline__ void store_dkdv(const A &a, const BwdWgThread &w, const float *dk, const float *dv)
    {
        if constexpr (A::D == 128) stage<A>(dk_buf(a, w.wg), w, dk, a.scale);
        asm volatile("bar.sync %0, 160;\n" ::"r"(6 + w.wg) : "memory");   // the dQ-part buffer is free
        if constexpr (A::D == 64) stage<A>(dk_buf(a, w.wg), w, dk, a.scale);
        stage<A>(dv_buf(a, w.wg), w, dv, 1.0f);
        fence_proxy_async();                      // the stores, read next by the copy engine
        asm volatile("bar.arrive %0, 160;\n" ::"r"(4 + w.wg) : "memory");   // dK_w, dV_w are in
    }

    /* Writer warp 2 + w: walk after walk, kernel 10's dQ parts, then dK_w and dV_w of the walk (keys j0 + 64 w ..):
     * the buffer freed after the last part (the consumers put dV there), then one box per 64 columns of each, sent
     * once they are in; the next walk's start frees the buffer again once the engine has read them. */
    template <class A>
    static __device__ __forceinline__ void other_warps(const A &a, long bh, long j0, long i_begin, long i_end)
    {
        using C = typename A::C;
        (void)bh, (void)j0, (void)i_begin, (void)i_end;
        if (threadIdx.x / 32 >= 2) {
            const int w = threadIdx.x / 32 - 2, lane = threadIdx.x % 32;
            const uint32_t buf = a.base + C::OFF_DQ + w * DQ_PART * 4;
            each_tile(a, [&](const BwdWalk &wk) {  // kernel 11's ring: the stores need the tile, not only its walk
                const long tbh = wk.bh, tjt = wk.jt;
                send_walk(a, w, lane, buf, tbh, tjt * C::BC, wk.i_begin, wk.i_end);
                asm volatile("bar.arrive %0, 160;\n" ::"r"(6 + w) : "memory");   // the last part is read: free
                asm volatile("bar.sync %0, 160;\n" ::"r"(4 + w) : "memory");     // dK_w, dV_w are in
                if (lane == 0 && A::P::stores_dkdv(a, wk)) {   // kernel 20: not a part that hands its sums on
                    const int key = (int)(tjt * C::BC + 64 * w);
#pragma unroll
                    for (int blk = 0; blk < A::D / 64; blk++) {
                        tma_store_3d(a.tm_dk, dk_buf(a, w) + blk * 64 * 128, blk * 64, key, (int)tbh);
                        tma_store_3d(a.tm_dv, dv_buf(a, w) + blk * 64 * 128, blk * 64, key, (int)tbh);
                    }
                    bulk_commit();
                    bulk_wait_read();             // the engine has read them: the buffers may be written again
                }
                __syncwarp();
            });
            if (lane == 0) bulk_wait_all();       // the sums and the stores done before the block ends
        }
    }

    static const char *desc_dq() { return "one bulk reduce-add per 64 x 64 part, and dK, dV by TMA stores, sent by 2 writer warps"; }
};
} // namespace

// --- the launcher -------------------------------------------------------------------

#if RUNG == 13
static int b13_launch(const void *q, const void *k, const void *v, const void *o, const void *dout, const float *L,
                      void *dq, void *dk, void *dv, void *ws, long B, long H, long N, long D, int dtype, int causal,
                      void *stream)
{
    return wg_launch<B13Policy>(13, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, D, dtype, causal, stream);
}

static void b13_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    wg_describe<B13Policy>(D, buf, n);
}

static const BackwardKernel bwd13 = {
    .id = 13, .extends = 12, .name = "dK/dV writer",
    .idea = "kernel 12 with dK and dV left in shared memory and sent by the writer warps' TMA stores",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = bwd_wgmma_supports,
    .workspace = B13Policy::workspace, .launch = b13_launch, .describe = b13_describe,
    .unavailable = wgmma_unavailable, .dkdv_as = 5, .persistent = 1,
};
BWD_REGISTER(bwd13);
#endif
