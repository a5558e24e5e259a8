/*
 * Backward kernel 18: backward kernel 17 not draining the tensor cores between row tiles.
 *
 * Extends backward kernel 17 (bwd17_vec_ahead.cu). The idea: a row tile ends with dV_w += p^T dO_i and dK_w += ds^T
 * Q_i on the tensor cores, and in kernels 12-17 each consumer thread then waits for both (end_row's wgmma_wait<0>)
 * before it frees the stage (Q_i, dO_i, L_i, Delta_i) for the producer: the tensor cores run dry, and refill only
 * when the next row tile issues its first product, the last tile's dQ part. Here end_row does not wait: the next row
 * tile issues that dQ part behind dV and dK, then waits for dV and dK alone (the dQ part still running) and frees the
 * last stage (the hook dq_issued, in kernel 12's scores); the walk's last stage is freed in end_walk, after its last
 * wait. The products and their order are the same: dK and dV are kernel 5's bit for bit (--check compares them).
 * At D = 128 only (at D = 64 it lost: B18Policy::no_drain).
 * Why: of kernel 15's stall samples at D = 128, N = 8192 (H200, Nsight Compute; RESULTS.md#bwd-15), 7.3% sit on that
 * one wait, the most on any instruction.
 * What it costs: dV's and dK's products and their A operands (p^T, ds^T in registers) stay in flight across the
 * loop's back edge, beside the dQ part's accumulators. Waiting for them only after s^T is issued too would need s^T's
 * 32 registers as well: ptxas then serialises every wgmma ("insufficient register resources"); so s^T waits.
 * Measured: H200, fp16, D = 128, over kernel 17 in the same run (three runs, one causal): +0.6% to +2.9% at every N;
 * at D = 64 -5.3% to +0.1% (p^T and ds^T there hold 64 registers), hence D = 128 only. The runs: RESULTS.md#bwd-18.
 */
#ifndef RUNG
#define RUNG 18         // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "bwd17_vec_ahead.cu" // the rung this one extends (.extends = 17): its body and its policy

// --- the idea ----------------------------------------------------------------------

namespace {   // as kernel 17's policy (kernel 11's counters)
struct B18Policy : B17Policy {
    /* At D = 128 only: at D = 64 it measured 5.3% behind to 0.1% ahead of kernel 17 (three runs), and there kernel
     * 18 is kernel 17's machine code, which at D = 64 is kernel 15's. */
    template <int D> __host__ __device__ static constexpr bool no_drain() { return D == 128; }
    /* After the named barrier: nothing. dV and dK stay on the tensor cores; the stage is freed by the next row
     * tile's scores (dq_issued) or by end_walk. */
    template <class A>
    static __device__ __forceinline__ void end_row(const A &a, const BwdWgThread &w, const BwdWgRow &rt, float *dq)
    {
        if constexpr (!no_drain<A::D>()) B17Policy::end_row(a, w, rt, dq);
        else (void)a, (void)w, (void)rt, (void)dq;
    }
    /* In the next row tile's scores, its dQ part issued behind them: the last tile's dV and dK waited for (the dQ
     * part still running), the last stage freed. */
    template <class A>
    static __device__ __forceinline__ void dq_issued(const A &a, const BwdWgThread &w, const BwdWgRow &rt)
    {
        if constexpr (no_drain<A::D>()) {
            wgmma_wait<1>();
            if (rt.i0 > w.i_begin) mbar_arrive(a.empty + 8 * (int)((rt.it - 1) % A::C::STAGES));
        } else {
            (void)a, (void)w, (void)rt;
        }
    }
    /* The walk's last dQ part (kernel 12's end_walk waits for every product), then its last stage freed. */
    template <class A>
    static __device__ __forceinline__ void end_walk(const A &a, const BwdWgThread &w, long it, float *dq)
    {
        B17Policy::end_walk(a, w, it, dq);
        if constexpr (no_drain<A::D>()) {
            wgmma_wait<0>();   // done already on every path that runs (a walk has a row tile); ptxas must see it on all
            /* a walk always has a row tile (a whole walk's i_begin <= j0 < N; a part of kernel 20's at least one
             * step), so it - 1 is its last one's; kernel 12's end_walk tests i_begin < N all the same, for the compiler */
            mbar_arrive(a.empty + 8 * (int)((it - 1) % A::C::STAGES));
        }
    }
};
} // namespace

// --- the launcher -------------------------------------------------------------------

#if RUNG == 18
static int b18_launch(const void *q, const void *k, const void *v, const void *o, const void *dout, const float *L,
                      void *dq, void *dk, void *dv, void *ws, long B, long H, long N, long D, int dtype, int causal,
                      void *stream)
{
    return wg_launch<B18Policy>(18, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, D, dtype, causal, stream);
}

static void b18_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    wg_describe<B18Policy>(D, buf, n);
}

static const BackwardKernel bwd18 = {
    .id = 18, .extends = 17, .name = "no drain",
    .idea = "kernel 17 with the stage freed at the next row tile's first wait, so dV and dK run under its dQ part (D = 128)",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = bwd_wgmma_supports,
    .workspace = B18Policy::workspace, .launch = b18_launch, .describe = b18_describe,
    .unavailable = wgmma_unavailable, .dkdv_as = 5, .persistent = 1,
};
BWD_REGISTER(bwd18);
#endif
