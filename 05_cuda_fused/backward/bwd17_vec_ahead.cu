/*
 * Backward kernel 17: backward kernel 15 reading the first of L_i and Delta_i as soon as the stage lands.
 *
 * Extends backward kernel 15 (bwd15_desc_add.cu; kernel 16, the waits asleep, was tried and not landed: RESULTS.md).
 * The idea: a load from shared memory takes some 30 cycles, more when its queue is full, and a warp that waits for it
 * issues nothing. Each row tile, p^T's exponents read L_i log2 e from the ring's stage (p^T = 2^(s^T scale_log2 -
 * L_i log2 e)) and ds^T's subtractions read Delta_i, each pair of them loaded where it is used: right after the wait
 * for s^T (dp^T's), and behind the 16 stores of dQ's part that the same warp has just queued (kernel 12's scores).
 * Here each lane loads its first pair of each (queries 2 t and 2 t + 1) as soon as the stage has landed, before s^T
 * is issued, and keeps them in four registers until they are used; the other seven pairs of each are loaded
 * where they were, behind the first ones' arithmetic. The products are the same: dK and dV are kernel 5's bit for bit
 * (--check compares them). At D = 128 only (at D = 64 it gained nothing beyond the spread: B17Policy::ahead).
 * Why: Nsight Compute's per-instruction samples of kernel 15 at D = 128, N = 8192 (H200; RESULTS.md#bwd-15): the first
 * FFMA of p^T, waiting for L's first pair, holds 3.6% of all the kernel's stall samples, third after a wgmma wait and
 * an mbarrier wait's spin; the first FADD of ds^T, waiting for Delta's, 1.1%.
 * What it costs: four registers per consumer thread across s^T's and dp^T's products (ptxas, sm_90a: the same spills
 * as kernel 15's).
 * Measured: H200, fp16, D = 128, over kernel 15 in the same run (three runs, one causal): +0.4% to +3.6% at every N,
 * +1.2% to +3.6% from N = 2048; at D = 64 -0.4% to +0.2%, hence D = 128 only. The runs: RESULTS.md#bwd-17.
 */
#ifndef RUNG
#define RUNG 17         // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "bwd15_desc_add.cu" // the rung this one extends (.extends = 15): its body and its policy

// --- the idea ----------------------------------------------------------------------

namespace {   // as kernel 15's policy (kernel 11's counters)
struct B17Policy : B15Policy {
    /* At D = 128 only: at D = 64 (BR = 128, sixteen pairs a row tile) it measured -0.4% to +0.2% against kernel 15,
     * within the spread, and there kernel 17 is kernel 15's machine code. */
    template <int D> __host__ __device__ static constexpr bool ahead() { return D == 128; }
    /* Once the stage has landed (kernel 12's scores, right after the wait on full): this lane's first pairs of L_i
     * log2 e and Delta_i into registers, before s^T, dQ's part and dp^T take the warp's next instructions. */
    template <class A> static __device__ __forceinline__ void stage_landed(const BwdWgRow &rt, int t)
    {
        if constexpr (ahead<A::D>()) {
            rt.lse0 = *reinterpret_cast<const float2 *>(rt.lse_s + 2 * t);
            rt.dl0 = *reinterpret_cast<const float2 *>(rt.dl_s + 2 * t);
        }
    }
    /* Pair n: the first from the registers, the others from the stage (kernel 5's). */
    template <class A> static __device__ __forceinline__ float2 lse_pair(const BwdWgRow &rt, int n, int t)
    {
        return ahead<A::D>() && n == 0 ? rt.lse0 : B15Policy::lse_pair<A>(rt, n, t);
    }
    template <class A> static __device__ __forceinline__ float2 dl_pair(const BwdWgRow &rt, int n, int t)
    {
        return ahead<A::D>() && n == 0 ? rt.dl0 : B15Policy::dl_pair<A>(rt, n, t);
    }
};
} // namespace

// --- the launcher -------------------------------------------------------------------

#if RUNG == 17
static int b17_launch(const void *q, const void *k, const void *v, const void *o, const void *dout, const float *L,
                      void *dq, void *dk, void *dv, void *ws, long B, long H, long N, long D, int dtype, int causal,
                      void *stream)
{
    return wg_launch<B17Policy>(17, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, D, dtype, causal, stream);
}

static void b17_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    wg_describe<B17Policy>(D, buf, n);
}

static const BackwardKernel bwd17 = {
    .id = 17, .extends = 15, .name = "vectors ahead",
    .idea = "kernel 15 with each row tile's first pairs of L and Delta read as soon as the stage lands (D = 128)",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = bwd_wgmma_supports,
    .workspace = B17Policy::workspace, .launch = b17_launch, .describe = b17_describe,
    .unavailable = wgmma_unavailable, .dkdv_as = 5, .persistent = 1,
};
BWD_REGISTER(bwd17);
#endif
