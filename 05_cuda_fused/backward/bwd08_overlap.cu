/*
 * Backward kernel 8: backward kernel 7 with each wait covering only the product that the next step reads.
 *
 * Extends backward kernel 7 (bwd07_mask_branch.cu). The idea: wait for one product at a time. Kernel 7's consumer
 * issues s^T and dp^T as one group, waits for both, then computes p^T and ds^T; the exponentials (64 ex2 per thread
 * and row tile at D = 64) run while the tensor cores wait for the next product. Here s^T and dp^T are committed as
 * two groups: the consumer waits for s^T alone and computes p^T (in place, fp32) while dp^T is still on the tensor
 * cores, then waits for dp^T and computes ds^T. At D = 128 it also issues dV_w += p^T dO_i before ds^T's arithmetic,
 * which then runs under it. At D = 64 not: p^T's 32 A registers beside s^T's and dp^T's 128 left ptxas no room, and
 * it serialised every wgmma of the kernel ("insufficient register resources"). The arithmetic is kernel 5's (bwd.cuh:
 * bwd_p4, bwd_ds4): dK and dV are kernel 5's bit for bit (--check compares them).
 * Why: in kernel 7 the tensor cores wait while each row tile's exponentials run.
 * What it costs: nothing in shared memory; registers: ptxas spills 0 bytes at D = 64 (kernel 7: 36), 4 at D = 128.
 * Adding row tile i's dQ part under row tile i + 1's s^T and dp^T was tried and dropped here (ptxas spilled the
 * accumulators and serialised the wgmma); kernel 12 does it another way.
 * Measured: H200, fp16, N = 4096: 365.1 TFLOP/s at D = 64 and 389.0 at D = 128, +2.0% and +1.0% over kernel 7 (causal
 * +2.2% and +0.5%, bf16 +2.1% and +1.7%). Small: the two consumer warpgroups still walk in step, held by the named
 * barrier, and the tensor pipe is 39-42% busy in kernels 5, 7 and 8 alike; 89% and 80% of cuDNN. The runs and the
 * profile: RESULTS.md#bwd-8.
 */
#ifndef RUNG
#define RUNG 8          // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "bwd07_mask_branch.cu" // the rung this one extends (.extends = 7): its body and its policy

// --- the idea ----------------------------------------------------------------------

struct B8Policy : B7Policy {
    /* dV_w += p^T dO_i goes to the tensor cores before ds^T's arithmetic: at D = 128 only (why: the header). */
    template <int D> static constexpr bool EARLY_DV = D == 128;

    /* s^T and dp^T committed as two groups; the wait is for s^T alone (dp^T still running). */
    template <class A>
    static __device__ __forceinline__ void scores(const A &a, const BwdWgThread &w, const BwdWgRow &rt, float *s, float *dp,
                                                  float *dq)
    {
        (void)dq;
        mbar_wait(a.full + 8 * rt.st, rt.use);    // Q_i, dO_i, L_i, Delta_i have landed
        wgmma_fence();
        bwd_wg_scores<A>(s, w.k_w, rt.q_s);
        wgmma_commit();
        bwd_wg_scores<A>(dp, w.v_w, rt.do_s);
        wgmma_commit();
        wgmma_wait<1>();                          // s^T is in; dp^T still running
    }
    /* p^T under dp^T's product, in place in s (fp32, kept for ds^T), the masks as in kernel 7; then (D = 128) dV_w's
     * product issued; then ds^T once dp^T is in. */
    template <class A>
    static __device__ __forceinline__ void p_ds(const A &a, const BwdWgThread &w, const BwdWgRow &rt, float *s, float *dp,
                                                float *dv, uint32_t (*pa)[4], uint32_t (*dsa)[4])
    {
        using T = typename A::T;
        constexpr int D = A::D, BR = A::C::BR;
        const float scale_log2 = a.scale_log2;
        const long N = a.N, key0 = w.key0, i0 = rt.i0;
        const int causal = a.causal, t = w.t;
        const bool need_mask = w.kw0 + 64 > N || (causal && i0 < w.kw0 + 63);
        auto p_tile = [&](bool masked) {
#pragma unroll
            for (int n = 0; n < BR / 8; n++) {
                const float2 lse = A::P::template lse_pair<A>(rt, n, t);
                bwd_p4(s + 4 * n, lse, scale_log2, masked, key0, i0 + 8 * n + 2 * t, N, causal);
                if constexpr (EARLY_DV<D>) bwd_pack4<T>(s + 4 * n, &pa[n / 2][(n % 2) * 2]);
            }
        };
        if (need_mask) p_tile(true);
        else p_tile(false);
        if constexpr (EARLY_DV<D>) {              // dV_w += p^T dO_i now: it runs under ds^T's arithmetic
            wgmma_fence();
#pragma unroll
            for (int ks = 0; ks < BR / 16; ks++)
                wgmma_rs<T, D, 1>(dv, pa[ks], bwd_desc<A::P::DESC_ADD>(rt.do_s, ks * 2048, BR * 128), 1);
            wgmma_commit();
            wgmma_wait<1>();                      // dp^T is in; dV still running
        } else {
            wgmma_wait<0>();                      // dp^T is in
        }
#pragma unroll
        for (int n = 0; n < BR / 8; n++) {
            const float2 dl = A::P::template dl_pair<A>(rt, n, t);
            if constexpr (!EARLY_DV<D>) bwd_pack4<T>(s + 4 * n, &pa[n / 2][(n % 2) * 2]);
            bwd_ds4<T>(s + 4 * n, dp + 4 * n, dl, &dsa[n / 2][(n % 2) * 2]);
        }
    }
    /* Step ks of dK_w += ds^T Q_i, and of dV_w += p^T dO_i unless it went earlier (D = 128). */
    template <class A>
    static __device__ __forceinline__ void dv_dk_step(const A &a, const BwdWgRow &rt, int ks, const uint32_t *pa,
                                                      const uint32_t *dsa, float *dv, float *dk)
    {
        using T = typename A::T;
        constexpr int D = A::D, BR = A::C::BR;
        if constexpr (EARLY_DV<D>) wgmma_rs<T, D, 1>(dk, dsa, bwd_desc<A::P::DESC_ADD>(rt.q_s, ks * 2048, BR * 128), 1);
        else B7Policy::dv_dk_step(a, rt, ks, pa, dsa, dv, dk);
    }

    static const char *desc_overlap(long D)
    {
        return D == 128 ? " (p^T under dp^T's product, ds^T under dV's)" : " (p^T under dp^T's product)";
    }
};

// --- the launcher -------------------------------------------------------------------

#if RUNG == 8
static int b8_launch(const void *q, const void *k, const void *v, const void *o, const void *dout, const float *L,
                     void *dq, void *dk, void *dv, void *ws, long B, long H, long N, long D, int dtype, int causal,
                     void *stream)
{
    return wg_launch<B8Policy>(8, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, D, dtype, causal, stream);
}

static void b8_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    wg_describe<B8Policy>(D, buf, n);
}

static const BackwardKernel bwd8 = {
    .id = 8, .extends = 7, .name = "consumer overlap",
    .idea = "kernel 7 with p^T computed under dp^T's product (D = 128: ds^T under dV's)",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = bwd_wgmma_supports,
    .workspace = B8Policy::workspace, .launch = b8_launch, .describe = b8_describe,
    .unavailable = wgmma_unavailable, .dkdv_as = 5,
};
BWD_REGISTER(bwd8);
#endif
