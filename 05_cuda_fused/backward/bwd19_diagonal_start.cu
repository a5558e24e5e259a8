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
 * a walk already starts at its diagonal: the walk is kernel 18's.
 * At D = 128 only (at D = 64 it did not gain: B19Policy::diagonal_start).
 * Why: at D = 128, N = 8192 the backward trailed cuDNN's in all three runs of kernel 18 (RESULTS.md#bwd-18), and the
 * one thing all of a head's blocks do at once is dQ's reduce-add into the same 32 KB of dQ_i. Kernel 18 with that
 * reduce-add left out (a wrong dQ, timed only) ran 2.1% and 2.7% faster there: about the most this idea could win.
 * What it costs: a test, a compare and a subtract a step in three places. dK and dV add their row tiles in another
 * order (D = 128, not causal): they are no longer kernel 5's bit for bit, only the same from run to run (--check
 * compares them with the float64 reference, and with kernel 10's plain launch to 1e-3 under a CUDA graph and on two
 * streams; at D = 64 and causal they are still kernel 5's bit for bit, and compared so: own_order).
 * Measured: H200, fp16, D = 128, over kernel 18 in the same run: +0.2% to +1.8% not causal (+1.8% at N = 8192),
 * and causal, where the walk is kernel 18's, +0.3% to +1.0%: the machine code differs there too (the test, 4.5 KB
 * more code), so the rotation's own share is the difference: 0.3% to 0.9% at N = 8192 in all four runs, within the
 * spread elsewhere. RESULTS.md#bwd-19 has the runs.
 */
#ifndef RUNG
#define RUNG 19         // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "bwd18_no_drain.cu" // the rung this one extends (.extends = 18): its body and its policy

// --- the idea ----------------------------------------------------------------------

namespace {   // as kernel 18's policy (kernel 11's counters)
struct B19Policy : B18Policy {
    /* At D = 128 only: at D = 64 it measured 2.5% behind to 0.4% ahead of kernel 18, and there kernel 19 is kernel
     * 18's machine code, which at D = 64 is kernel 15's. */
    template <int D> __host__ __device__ static constexpr bool diagonal_start() { return D == 128; }
    /* Step i0 of the walk of the K/V tile from key j0, not causal: the row tile i0 past the one holding row j0, round
     * the head's row tiles (whole tiles: the last one's rows past N are padding, as in every walk). Causal: step i0
     * itself. */
    template <class A> static __device__ __forceinline__ long row_at(const A &a, long i0, long j0)
    {
        constexpr int BR = A::C::BR;
        if constexpr (!diagonal_start<A::D>()) {
            return B18Policy::row_at(a, i0, j0);
        } else {
            if (a.causal) return i0;
            const long rows = (a.N + BR - 1) / BR * BR, r = i0 + j0 / BR * BR;
            return r < rows ? r : r - rows;
        }
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

/* Where the walk is rotated, dK and dV add the row tiles in this kernel's own order (the checks: kernels.h). */
static int b19_own_order(long D, int causal)
{
    return !causal && (D == 128 ? B19Policy::diagonal_start<128>() : B19Policy::diagonal_start<64>());  // D: 64 or 128
}

static const BackwardKernel bwd19 = {
    .id = 19, .extends = 18, .name = "diagonal start",
    .idea = "kernel 18 with each walk, not causal, starting at its K/V tile's diagonal row tile and wrapping round (D = 128)",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = bwd_wgmma_supports,
    .workspace = B19Policy::workspace, .launch = b19_launch, .describe = b19_describe,
    .unavailable = wgmma_unavailable, .dkdv_as = 5, .own_order = b19_own_order, .persistent = 1,
};
BWD_REGISTER(bwd19);
#endif
