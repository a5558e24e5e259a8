/*
 * Backward kernel 7: backward kernel 5 without the mask arithmetic in the row tiles that have nothing to mask.
 *
 * Extends backward kernel 5 (bwd05_wgmma.cu). The idea: decide once per row tile. In kernel 5 the loop that turns s^T
 * and dp^T into p^T and ds^T takes need_mask as a value: a warpgroup's keys can be hidden in this row tile (keys past
 * N, or causal and the tile crosses the diagonal). nvcc keeps one loop, computes every element's mask (a 64-bit
 * compare of key against N and against the query) in every row tile, and schedules all of it before the wgmma of s^T
 * and dp^T, whose results it does not need. Here the loop is written twice, masked and not (p_ds_tile(true),
 * p_ds_tile(false) below), and need_mask picks one: the mask costs only in the row tiles that cross the diagonal or
 * the end of the keys. The arithmetic is kernel 5's: dK and dV are kernel 5's bit for bit (--check compares them).
 * Why: kernel 5's masks are some 260 integer instructions per thread and row tile at D = 64, between the wait for the
 * ring's stage and the tensor cores' next product, while both consumer warpgroups (in step at the named barrier)
 * leave the tensor cores idle.
 * What it costs: the loop twice in the binary (the kernel's machine code +8% at D = 64, +5% at D = 128), and ptxas
 * spills 36 bytes at D = 64 (kernel 5: 20), 4 at D = 128.
 * Measured: H200, fp16, N = 4096: 357.8 TFLOP/s at D = 64 and 385.0 at D = 128, +7.1% and +4.2% over kernel 5 (causal
 * +6.2% and +3.2%, bf16 +7.0% and +2.8%); 36% fewer instructions executed (Nsight Compute, D = 64); the runs and the
 * profile: RESULTS.md#bwd-7.
 */
#ifndef RUNG
#define RUNG 7          // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "bwd05_wgmma.cu" // the rung this one extends (.extends = 5): its body and its policy

// --- the idea ----------------------------------------------------------------------

struct B7Policy : B5Policy {
    /* p^T and ds^T together, as kernel 5, but the loop twice: with the masks and without, need_mask choosing once per
     * row tile (element 4 n + e of s, dp: key key0 + 8 (e / 2), query i0 + 8 n + 2 t + e % 2). */
    template <class A>
    static __device__ __forceinline__ void p_ds(const A &a, const BwdWgThread &w, const BwdWgRow &rt, float *s, float *dp,
                                                float *dv, uint32_t (*pa)[4], uint32_t (*dsa)[4])
    {
        (void)dv;
        using T = typename A::T;
        constexpr int BR = A::C::BR;
        const float scale_log2 = a.scale_log2;
        const long N = a.N, key0 = w.key0, i0 = rt.i0;
        const int causal = a.causal, t = w.t;
        const bool need_mask = w.kw0 + 64 > N || (causal && i0 < w.kw0 + 63);
        auto p_ds_tile = [&](bool masked) {
#pragma unroll
            for (int n = 0; n < BR / 8; n++) {
                const float2 lse = A::P::template lse_pair<A>(rt, n, t), dl = A::P::template dl_pair<A>(rt, n, t);
                bwd_p_ds4<T>(s + 4 * n, dp + 4 * n, lse, dl, scale_log2, masked, key0, i0 + 8 * n + 2 * t, N, causal,
                             &pa[n / 2][(n % 2) * 2], &dsa[n / 2][(n % 2) * 2]);
            }
        };
        if (need_mask) p_ds_tile(true);
        else p_ds_tile(false);
    }

    static const char *desc_mask() { return ", the masks only in the row tiles that need them"; }
};

// --- the launcher -------------------------------------------------------------------

#if RUNG == 7
static int b7_launch(const void *q, const void *k, const void *v, const void *o, const void *dout, const float *L,
                     void *dq, void *dk, void *dv, void *ws, long B, long H, long N, long D, int dtype, int causal,
                     void *stream)
{
    return wg_launch<B7Policy>(7, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, D, dtype, causal, stream);
}

static void b7_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    wg_describe<B7Policy>(D, buf, n);
}

static const BackwardKernel bwd7 = {
    .id = 7, .extends = 5, .name = "mask branch",
    .idea = "kernel 5 with the masks only in the row tiles that need them",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = bwd_wgmma_supports,
    .workspace = B7Policy::workspace, .launch = b7_launch, .describe = b7_describe,
    .unavailable = wgmma_unavailable, .dkdv_as = 5,
};
BWD_REGISTER(bwd7);
#endif
