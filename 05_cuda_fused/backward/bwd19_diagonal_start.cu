/*
 * Backward kernel 19: backward kernel 18 with each walk starting at its own diagonal.
 *
 * Extends backward kernel 18 (bwd18_no_drain.cu). The idea: not causal, every K/V block of a head walks the head's
 * row tiles from the first, and the persistent blocks take a head's K/V tiles one after the other, so the blocks
 * running together (up to 64 of one head at N = 8192, D = 128) read the same Q_i and dO_i and add into the same dQ_i
 * at the same time. Here the walk of the K/V tile whose first key is j0 starts at the row tile holding row j0, as a
 * causal walk does, and wraps round to the row tiles before it: the blocks running together add into different dQ
 * rows. Only the producer's roles and the writers see the rotation (the hook row_at: which row tile a step of the
 * walk loads and adds into); the consumers see steps, and their masks, not causal, depend on the keys alone. Causal,
 * a walk already starts at its diagonal: the code is kernel 18's.
 * Why: at D = 128, N = 8192 the backward trails cuDNN's (kernel 18's three runs: RESULTS.md#bwd-18), and the one
 * thing all of a head's blocks do together at every N is dQ's reduce-add into the same 32 KB.
 * What it costs: a compare and a subtract a step in three places. dK and dV add their row tiles in another order: they
 * are no longer kernel 5's bit for bit, only the same from run to run (--check compares them with the float64
 * reference, and with this kernel's own plain launch under a CUDA graph and two streams).
 * Measured: not yet.
 */
#ifndef RUNG
#define RUNG 19         // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "bwd18_no_drain.cu" // the rung this one extends (.extends = 18): its body and its policy

// --- the idea ----------------------------------------------------------------------

namespace {   // as kernel 18's policy (kernel 11's counters)
struct B19Policy : B18Policy {
    /* Step i0 of the walk of K/V tile j0, not causal: the row tile i0 past the one holding row j0, round the head's
     * row tiles (whole tiles: the last one's rows past N are padding, as in every walk). Causal: step i0 itself. */
    template <class A> static __device__ __forceinline__ long row_at(const A &a, long i0, long j0)
    {
        constexpr int BR = A::C::BR;
        if (a.causal) return i0;
        const long rows = (a.N + BR - 1) / BR * BR, r = i0 + j0 / BR * BR;
        return r < rows ? r : r - rows;
    }
};
} // namespace

// --- the launcher -------------------------------------------------------------------

#if RUNG == 19
static int b19_launch(const void *q, const void *k, const void *v, const void *o, const void *dout, const float *L,
                      void *dq, void *dk, void *dv, void *ws, long B, long H, long N, long D, int dtype, int causal,
                      void *stream)
{
    return wg_launch<B19Policy>(19, q, k, v, o, dout, L, dq, dk, dv, ws, B, H, N, D, dtype, causal, stream);
}

static void b19_describe(long D, int dtype, char *buf, size_t n)
{
    (void)dtype;
    wg_describe<B19Policy>(D, buf, n);
}

static const BackwardKernel bwd19 = {
    .id = 19, .extends = 18, .name = "diagonal start",
    .idea = "kernel 18 with each walk, not causal, starting at the row tile of its K/V tile's diagonal and wrapping round",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = bwd_wgmma_supports,
    .workspace = B19Policy::workspace, .launch = b19_launch, .describe = b19_describe,
    .unavailable = wgmma_unavailable, .persistent = 1,
};
BWD_REGISTER(bwd19);
#endif
