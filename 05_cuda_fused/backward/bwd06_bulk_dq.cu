/*
 * Backward kernel 6: backward kernel 5 with dQ added by the copy engine.
 *
 * Extends backward kernel 5 (bwd05_wgmma.cu). The idea: hand dQ's additions to the TMA, as FlashAttention-3 does.
 * In kernel 5 each consumer thread adds its share of the 64 x 64 dQ part with 16 red.global.add.v2 per row tile: 2048
 * eight-byte atomics per warpgroup, each its own request to L2, issued by the threads that should be computing. Here
 * each warp writes its 16 rows of the part to shared memory (fp32, rows padded to 72 floats: the float2 stores of a
 * half-warp hit 32 banks), and 16 of its lanes each issue one cp.reduce.async.bulk .add.f32 of a 256-byte row: 16
 * requests per warp, the additions done in L2 by the copy engine while the warp goes on. The buffer is reused at the
 * next row tile once the engine has read it (cp.async.bulk.wait_group.read: long done by then), and the kernel waits
 * for its last additions before it exits.
 * Why: the consumers' 2048 atomics per warpgroup and row tile are issued by the warps the tensor cores wait for.
 * What it costs: 36.9 KB more shared memory (203.8 KB at D = 64, 202.8 KB at D = 128), and per row tile and warp the
 * stores, a fence.proxy.async, two __syncwarp and the wait for the engine's reads of the previous tile.
 * Measured: H100, fp16, N = 4096: 320.1 TFLOP/s at D = 64 and 356.6 at D = 128, 4% slower than kernel 5 (causal 2-3%
 * slower, 4-6% at N = 16384). It paid while kernel 5's consumers also loaded L and Delta from global memory (+5% at
 * D = 64); with them gone, kernel 5's atomics wait behind nothing, while here each warp still waits for the engine
 * to have read its buffer, stores, fences and syncs twice a tile (a guess, not profiled). Kept as the lesson it is:
 * FlashAttention-3's way out of the threads' atomics, measured, slower here; kernel 10 sends the same additions from
 * a producer warp, 16 KB at a time, and gains. The runs: RESULTS.md#bwd-6.
 */
#ifndef RUNG
#define RUNG 6          // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "bwd05_wgmma.cu" // the rung this one extends (.extends = 5): its body and its policy

// --- the idea ----------------------------------------------------------------------

struct B6Policy : B5Policy {
    static constexpr int DQ_LD = 72;                       /* the part's row pitch in floats (conflict-free float2 stores) */
    static constexpr int DQ_SMEM = 2 * 64 * DQ_LD * 4;     /* the parts, [NWG = 2][64][DQ_LD] fp32 */

    /* This warp's 16 rows of the part to shared memory, then one bulk reduce-add per row (64 floats, 256 bytes) by
     * lanes 0-15. */
    template <class A>
    static __device__ __forceinline__ void add_dq(const A &a, const BwdWgThread &w, const BwdWgRow &rt, const float *dq)
    {
        using C = typename A::C;
        constexpr int D = A::D;
        float *dq_h = a.dq_acc + w.bh * a.N * D;
        float *dq_s = reinterpret_cast<float *>(a.base_ptr + C::OFF_DQ) + (64 * w.wg + 16 * w.wiw) * DQ_LD;
        if (w.lane < 16) bulk_wait_read();        // the previous row tile's adds have read the buffer
        __syncwarp();
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
            for (int n = 0; n < 8; n++)
                *reinterpret_cast<float2 *>(dq_s + (w.g + 8 * h) * DQ_LD + 8 * n + 2 * w.t) = make_float2(dq[4 * n + 2 * h], dq[4 * n + 2 * h + 1]);
        fence_proxy_async();
        __syncwarp();
        const long row = rt.i0 + 64 * w.qblk + 16 * w.wiw + w.lane;
        if (w.lane < 16 && row < a.N) {
            bulk_reduce_add_f32(dq_h + row * D + 64 * w.dblk, (uint32_t)__cvta_generic_to_shared(dq_s + w.lane * DQ_LD), 256);
            bulk_commit();
        }
    }
    /* After the walk: the engine's adds all done (and so its reads of shared memory). */
    template <class A>
    static __device__ __forceinline__ void end_walk(const A &a, const BwdWgThread &w, long it, float *dq)
    {
        (void)a, (void)w, (void)it, (void)dq;
        bulk_wait_all();
    }

    static const char *desc_dq() { return "the copy engine's bulk reduce-add"; }
};

// --- the launcher -------------------------------------------------------------------

#if RUNG == 6
static int b6_launch(const void *q, const void *k, const void *v, const void *o, const void *dout, const float *L,
                     void *dq, void *dk, void *dv, void *ws, long B, long H, long N, long D, int dtype, int causal,
                     void *stream)
{
    return wg_launch<B6Policy>(6, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, D, dtype, causal, stream);
}

static void b6_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    wg_describe<B6Policy>(D, buf, n);
}

static const BackwardKernel bwd6 = {
    .id = 6, .extends = 5, .name = "bulk dQ",
    .idea = "kernel 5 with dQ added by the copy engine (bulk reduce-add from shared memory)",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = bwd_wgmma_supports,
    .workspace = B6Policy::workspace, .launch = b6_launch, .describe = b6_describe,
    .unavailable = wgmma_unavailable, .dkdv_as = 5,
};
BWD_REGISTER(bwd6);
#endif
