/*
 * Backward kernel 10: backward kernel 8 with the consumers no longer adding into dQ themselves.
 *
 * Extends backward kernel 8 (bwd08_overlap.cu). The idea: hand dQ's additions to a warp that does nothing else,
 * FlashAttention-3's dQ writer. In kernel 8 each consumer thread ends every row tile with 16 red.global.add.v2 of its
 * 32 floats of the 64 x 64 part of dQ_i: 4096 warp-wide reductions per block and row tile, each touching 8 rows of dQ,
 * issued by the warps the tensor cores wait for. Here each consumer thread stores its 32 floats to a 16 KB buffer in
 * shared memory (8-byte stores, 2 passes through the banks each: the layout of bwd.cuh), fences them for the copy
 * engine and arrives on a named barrier without waiting; warp 2 + w of the producer warpgroup, idle until now, waits
 * there and sends the whole part with one cp.reduce.async.bulk ... add.f32 of 16 KB, waits until the engine has read
 * the buffer and frees it (a second named barrier, on which the consumers wait only when their next part is ready).
 * One bulk operation of 16 KB needs the part in one piece in global memory too: the accumulator is laid out in blocks
 * of 64 x 64 floats (bwd.cuh, bwd_dq_tiled_off), and the conversion to dQ reads it back in that layout. Kernel 6 sent
 * the same additions through shared memory from the consumers themselves, one bulk operation of 256 bytes per row,
 * and lost 4% against kernel 5.
 * Why: with its red.global.add skipped (a wrong dQ, timed only), kernel 8 ran 32% faster at D = 64 and 58% at
 * D = 128: a quarter and over a third of its time was the consumers sending dQ.
 * What it costs: 32 KB more shared memory (a 16 KB buffer per consumer warpgroup); the accumulator padded to whole row
 * tiles of 64 (zeroed, its padding rows too, by the preprocessing pass: bwd_prep.cu); two named barriers per row tile
 * and consumer warpgroup. The additions are the same fp32 sums in another order: dQ is no more bit-identical run to
 * run than kernel 8's; dK and dV are kernel 5's bit for bit (--check compares them).
 * Measured: H100, fp16, N = 4096: 438.6 TFLOP/s at D = 64 and 491.3 at D = 128, +22% and +28% over kernel 8 (causal
 * +18% and +24%, bf16 +22% and +27%); the tensor pipe 49% and 55% busy (kernel 8: 39%, 42%); 108% and 100% of cuDNN.
 * The runs and the profile: RESULTS.md#bwd-10.
 */
#ifndef RUNG
#define RUNG 10         // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "bwd08_overlap.cu" // the rung this one extends (.extends = 8): its body and its policy

// --- the idea ----------------------------------------------------------------------

/* Warpgroup wg's dQ part into shared memory in the accumulator's tiled layout, once its writer warp has sent the last
 * one (named barrier 6 + wg), then handed to it (4 + wg). Row 16 wiw + g + 8 h, column 8 n + 2 t. */
template <int SWZ = DQ_SWZ_ROW8>
__device__ __forceinline__ void bwd_put_dq(float *dq_s, const float *dq, int wg, int wiw, int g, int t)
{
    asm volatile("bar.sync %0, 160;\n" ::"r"(6 + wg) : "memory");   // the buffer is free
#pragma unroll
    for (int h = 0; h < 2; h++)
#pragma unroll
        for (int n = 0; n < 8; n++)
            *reinterpret_cast<float2 *>(dq_s + bwd_dq_tiled_off<SWZ>(16 * wiw + g + 8 * h, 8 * n + 2 * t)) =
                make_float2(dq[4 * n + 2 * h], dq[4 * n + 2 * h + 1]);
    fence_proxy_async();                          // the stores, read next by the copy engine
    asm volatile("bar.arrive %0, 160;\n" ::"r"(4 + wg) : "memory");  // the part is in
}

struct B10Policy : B8Policy {
    static constexpr int DQ_PART = 64 * 64;                /* a warpgroup's part, 64 x 64 fp32, tiled (bwd.cuh) */
    static constexpr int DQ_SMEM = 2 * DQ_PART * 4;        /* the parts, [NWG = 2][64 x 64] */

    /* Warp 2 + w sends consumer warpgroup w's dQ parts. Named barriers 4 + w (the part is in shared memory) and 6 + w
     * (the engine has read it: the buffer is free), 160 threads each: the warpgroup's 128 and this warp's 32. The
     * consumers arrive on the first without waiting and wait on the second only when their next part is ready, a row
     * tile later. */
    template <class A>
    static __device__ __forceinline__ void other_warps(const A &a, long bh, long j0, long i_begin, long i_end)
    {
        using C = typename A::C;
        if (threadIdx.x / 32 >= 2) {
            const int w = threadIdx.x / 32 - 2, lane = threadIdx.x % 32;
            const uint32_t buf = a.base + C::OFF_DQ + w * 64 * 64 * 4;
            auto send = [&](long bh, long j0, long i_begin, long i_end) { send_walk(a, w, lane, buf, bh, j0, i_begin, i_end); };
            A::P::each_item(a, send, bh, j0, i_begin, i_end);
            if (lane == 0) bulk_wait_all();      // the sums done before the block ends
        }
    }
    /* Writer warp 2 + w: the parts of one walk (head bh, the K/V tile from key j0, its steps from i_begin to i_end, each into
     * the row tile row_at names), each sent once it is in. The buffer is free at the walk's start and after each part
     * but the last (the next walk's start frees that one). */
    template <class A>
    static __device__ __forceinline__ void send_walk(const A &a, int w, int lane, uint32_t buf, long bh, long j0, long i_begin,
                                                     long i_end)
    {
        constexpr int BR = A::C::BR, QB = BR / 64, DB = A::D / 64;
        const long Npad = a.Npad;
        float *dq_acc = a.dq_acc;
        asm volatile("bar.arrive %0, 160;\n" ::"r"(6 + w) : "memory");     // the buffer starts free
        for (long i0 = i_begin; i0 < i_end; i0 += BR) {
            asm volatile("bar.sync %0, 160;\n" ::"r"(4 + w) : "memory");   // the part is in
            if (lane == 0) {
                const long blk = (bh * (Npad / 64) + A::P::row_at(a, i0, j0) / 64 + (QB == 2 ? w : 0)) * DB + (DB == 2 ? w : 0);
                bulk_reduce_add_f32(dq_acc + blk * 4096, buf, 64 * 64 * 4);   // dQ_i += part, 16 KB in one piece
                bulk_commit();
                bulk_wait_read();                                              // the engine has read the buffer
            }
            __syncwarp();
            if (i0 + BR < i_end) asm volatile("bar.arrive %0, 160;\n" ::"r"(6 + w) : "memory");   // free for the next part
        }
    }
    /* The part into shared memory in the accumulator's tiled layout, once the writer warp has sent the last one; the
     * writer sends it. */
    template <class A>
    static __device__ __forceinline__ void add_dq(const A &a, const BwdWgThread &w, const BwdWgRow &rt, const float *dq)
    {
        (void)rt;
        A::P::put_dq(a, w, dq);
    }
    /* The part into the buffer (kernel 14: its own layout). */
    template <class A> static __device__ __forceinline__ void put_dq(const A &a, const BwdWgThread &w, const float *dq)
    {
        (void)a;
        bwd_put_dq(w.dq_part, dq, w.wg, w.wiw, w.g, w.t);
    }

    /* The dQ accumulator over whole row tiles of 64 ([B, H, Npad, D] floats, tiled: bwd.cuh). */
    static size_t workspace(long B, long H, long N, long D, int dtype)
    {
        (void)dtype;
        return ((size_t)2 * B * H * bwd_wgmma_npad(N) + (size_t)B * H * bwd_wgmma_npad(N) * D) * sizeof(float);
    }
    static long dq_rows(long N, long Npad)        // tiled: its padding rows too
    {
        (void)N;
        return Npad;
    }
    static int convert_dq(const float *dq_acc, void *dq, long BH, long N, long Npad, long D, float scale, int dtype,
                          cudaStream_t s)
    {
        return bwd_convert_dq_tiled(dq_acc, dq, BH, N, Npad, D, scale, dtype, s);
    }

    static const char *desc_dq() { return "one bulk reduce-add per 64 x 64 part, sent by a producer warp (2 writer warps)"; }
};

// --- the launcher -------------------------------------------------------------------

#if RUNG == 10
static int b10_launch(const void *q, const void *k, const void *v, const void *o, const void *dout, const float *L,
                      void *dq, void *dk, void *dv, void *ws, long B, long H, long N, long D, int dtype, int causal,
                      void *stream)
{
    return wg_launch<B10Policy>(10, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, D, dtype, causal, stream);
}

static void b10_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    wg_describe<B10Policy>(D, buf, n);
}

static const BackwardKernel bwd10 = {
    .id = 10, .extends = 8, .name = "dQ writer warps",
    .idea = "kernel 8 with dQ's parts sent to the copy engine by producer warps, one bulk reduce-add each",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = bwd_wgmma_supports,
    .workspace = B10Policy::workspace, .launch = b10_launch, .describe = b10_describe,
    .unavailable = wgmma_unavailable, .dkdv_as = 5,
};
BWD_REGISTER(bwd10);
#endif
